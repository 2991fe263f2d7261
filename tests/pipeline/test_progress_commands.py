"""``impact`` and ``audit`` say their steps on stderr labelled with their own name (``audit`` runs the impact job,
and once said ``impact [N]``), the analysis counted in Spark tasks; ``--quiet``: tests/commands/.

The commands run as a user runs them, in-process on the tests' one SparkSession: only the session they would start
is that one (a second JVM would cost the Spark part a minute)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from rocket_rebalance.cli import main as cli_main
from rocket_rebalance.pipeline import SAMPLE_SNAPSHOT
from tests.progress_lines import progress_of

pytestmark = pytest.mark.spark

COUNTED = re.compile(r" analyzing groups: (\d+)/\1 Spark tasks in \d+s$")
"""The analysis' last line: every Spark task of it done."""


@pytest.fixture
def session(spark: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The shared session in place of the one a command starts, and kept when the command is done with it."""
    monkeypatch.setattr("rocket_rebalance.pipeline.job.build_session", lambda *args, **kwargs: spark)
    monkeypatch.setattr(spark, "stop", lambda: None)
    return spark


@pytest.mark.parametrize(
    ("command", "argv", "status"),
    [
        ("impact", ["--snapshot", str(SAMPLE_SNAPSHOT), "--partitions", "2", "--no-report"], 0),
        ("audit", ["--snapshot", str(SAMPLE_SNAPSHOT), "--engine", "spark"], 1),  # the sample has findings
    ],
)
def test_each_command_labels_its_progress_with_its_own_name(
    session: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, argv: list[str], status: int
) -> None:
    assert cli_main([command, *argv, "--out", str(tmp_path / "out")]) == status
    err = capsys.readouterr().err
    lines = progress_of(err, command)
    assert lines == err.splitlines(), err
    assert any(COUNTED.search(line) for line in lines), lines
