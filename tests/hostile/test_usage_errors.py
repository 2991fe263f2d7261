"""A bad command line is one readable line and exit status 2, like every other refusal: argparse's own error
prints the whole usage first, which buries the one line that says what was wrong."""

from __future__ import annotations

import pytest

from rocket_rebalance import cli
from rocket_rebalance.pipeline import submit


@pytest.mark.parametrize(
    ("argv", "prog", "expected"),
    [
        ((), "rocket-rebalance", "required: COMMAND"),
        (("nope",), "rocket-rebalance", "invalid choice: 'nope'"),
        (
            ("snapshot", "-n", "127.0.0.1:9876", "--out", "x", "--concurrency", "many"),
            "rocket-rebalance snapshot",
            "invalid int value: 'many'",
        ),
        (("allocate-mq", "-t", "T"), "rocket-rebalance allocate-mq", "required"),
        (("impact", "--snapshot"), "rocket-rebalance impact", "expected one argument"),
        (("allocate-mq", "-t", "T", "-i", "a", "--strategy", "AVG\x1b[2J"), "rocket-rebalance allocate-mq", "\\x1b[2J"),
    ],
)
def test_a_usage_error_is_one_line(
    argv: tuple[str, ...], prog: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as ended:
        cli.main(list(argv))
    assert ended.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{prog}: error: ") and expected in lines[0], lines[0]
    assert lines[0].endswith(f"(see {prog} --help)")


def test_the_spark_submit_entry_speaks_as_the_impact_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:
        submit.main(["--writer", "nothing"])
    assert ended.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("rocket-rebalance impact: error: "), lines


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (("--api", "pull", "--orderly"), "--orderly is for the push consumers"),
        (("--api", "async-pull", "--orderly"), "--orderly is for the push consumers"),
    ],
)
def test_consume_refuses_what_its_consumer_cannot_do_in_one_line(
    extra: tuple[str, ...], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pull consumer is never orderly: said before anything connects, in one line, exit status 2."""
    assert cli.main(["consume", "-n", "grpc://127.0.0.1:1", "-g", "G", "-t", "T", *extra]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and expected in lines[0], lines
