"""The consumers' typed options: ``mypy --strict`` rejects a misspelled option and a wrong type in a user's script
(and passes a correct one), a misspelled option at run time names the consumer class, and ``strategy`` takes a
strategy object or a name and refuses anything else at the constructor."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocket_rebalance.runtime.async_consumer import AsyncPullConsumer, AsyncPushConsumer
from rocket_rebalance.runtime.consumer import ConsumerBase, PushConsumer, why_not_ready
from rocket_rebalance.runtime.options import ConsumerOptions, PushOptions, check_option_names
from rocket_rebalance.runtime.pull_consumer import PullConsumer
from rocket_rebalance.strategies import UnknownStrategyError, create_strategy

REPO = Path(__file__).resolve().parents[2]
CONSUMERS: list[type[ConsumerBase]] = [PushConsumer, PullConsumer, AsyncPushConsumer, AsyncPullConsumer]  # type: ignore[type-arg]
WRONG = """
    PushConsumer("127.0.0.1:9876", "GID", topics=["T"], rebalance_intervall=5.0)
    PullConsumer("127.0.0.1:9876", "GID", topics=["T"], persist_interval="5s")
    AsyncPullConsumer("127.0.0.1:9876", "GID", topics=["T"], consume_orderly=True)
"""
RIGHT = """
    PushConsumer("127.0.0.1:9876", "GID", topics=["T"], rebalance_interval=5.0, strategy="CONSISTENT_HASH")
    PullConsumer("127.0.0.1:9876", "GID", topics={"T": "TagA"}, persist_interval=5, auto_commit=False)
    AsyncPushConsumer("127.0.0.1:9876", "GID", topics=["T"], consume_orderly=True, strategy=create_strategy("AVG"))
"""


def _mypy(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    """``mypy --strict`` over a user's script outside the checkout, the package found in this checkout (with its
    own mypy settings, which keep the generated protobuf code out of the check, as an installed wheel's is)."""
    script = tmp_path / "user.py"
    script.write_text(
        "from rocket_rebalance import AsyncPullConsumer, AsyncPushConsumer, PullConsumer, PushConsumer\n"
        "from rocket_rebalance import create_strategy\n" + textwrap.dedent(body)
    )
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"), str(script)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,  # a hang bound: mypy checks the package too, on a loaded machine
        check=False,
    )


def test_mypy_strict_names_a_misspelled_option_and_a_wrong_type(tmp_path: Path) -> None:
    checked = _mypy(tmp_path, WRONG)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert 'Unexpected keyword argument "rebalance_intervall" for "PushConsumer"' in checked.stdout
    assert '"persist_interval"' in checked.stdout and 'expected "float"' in checked.stdout
    assert 'Unexpected keyword argument "consume_orderly" for "AsyncPullConsumer"' in checked.stdout
    assert "Found 3 errors" in checked.stdout


def test_mypy_strict_passes_a_correct_script(tmp_path: Path) -> None:
    checked = _mypy(tmp_path, RIGHT)
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize("consumer", CONSUMERS)
def test_a_misspelled_option_names_the_consumer_and_the_near_name(consumer: type[ConsumerBase]) -> None:  # type: ignore[type-arg]
    pattern = rf"^{consumer.__name__}\(\) got an unexpected keyword argument 'persist_intervall'; did you mean "
    with pytest.raises(TypeError, match=pattern + "'persist_interval'"):
        consumer("127.0.0.1:1", "GID", topics=["T"], persist_intervall=1.0)


def test_pull_consumers_take_no_orderly_option() -> None:
    with pytest.raises(TypeError, match="^PullConsumer takes no listener and is not orderly"):
        PullConsumer("127.0.0.1:1", "GID", topics=["T"], consume_orderly=True)  # type: ignore[call-arg]


def test_every_option_is_one_the_consumer_reads() -> None:
    """Every name the TypedDicts list is accepted at run time by the consumers that take it (none is refused as
    unknown), and a pull consumer refuses exactly the push consumer's own."""
    assert PushOptions.__optional_keys__ - ConsumerOptions.__optional_keys__ == {"consume_orderly"}
    assert PushConsumer._option_names == PushOptions.__optional_keys__
    assert PullConsumer._option_names == AsyncPullConsumer._option_names == ConsumerOptions.__optional_keys__


@pytest.mark.parametrize(
    ("strategy", "name"),
    [("CONSISTENT_HASH", "CONSISTENT_HASH"), (create_strategy("AVG_BY_CIRCLE"), "AVG_BY_CIRCLE"), (None, "AVG")],
)
def test_strategy_is_an_object_or_a_name(strategy: object, name: str) -> None:
    options = {} if strategy is None else {"strategy": strategy}
    consumer = PushConsumer("127.0.0.1:1", "GID", topics=["T"], **options)  # type: ignore[arg-type]
    assert consumer.config.strategy.name == name


@pytest.mark.parametrize("strategy", [42, object(), ["AVG"]])
def test_any_other_strategy_is_a_type_error_at_the_constructor(strategy: object) -> None:
    pattern = r"^PullConsumer\(strategy=...\) takes a strategy object \(with name and allocate\) or a name \(AVG, "
    with pytest.raises(TypeError, match=pattern):
        PullConsumer("127.0.0.1:1", "GID", topics=["T"], strategy=strategy)  # type: ignore[arg-type]


def test_an_unknown_strategy_name_lists_the_valid_ones() -> None:
    with pytest.raises(UnknownStrategyError, match="unknown strategy 'AVERAGE'; valid names: AVG, "):
        AsyncPushConsumer("127.0.0.1:1", "GID", topics=["T"], strategy="AVERAGE")


NAMES = sorted(PushOptions.__optional_keys__)


@given(st.sets(st.sampled_from(NAMES)), st.text(min_size=1, max_size=30))
def test_only_names_outside_the_options_are_refused(valid: set[str], other: str) -> None:
    """Any set of the options passes the check; adding any other name fails it, naming the class and that name."""
    check_option_names(PushConsumer, valid, PushOptions.__optional_keys__)
    if other not in PushOptions.__optional_keys__:
        with pytest.raises(
            TypeError, match=rf"^PushConsumer\(\) got an unexpected keyword argument {re.escape(repr(other))}"
        ):
            check_option_names(PushConsumer, [*valid, other], PushOptions.__optional_keys__)


CODES = ["", "NOT_FOUND", "UNAVAILABLE", "DEADLINE_EXCEEDED", "PERMISSION_DENIED", "UNAUTHENTICATED", "INTERNAL"]
KINDS = ["route of A", "route of B", "heartbeat", "pull", "persist offsets", "member list for A"]


@given(st.dictionaries(st.sampled_from(KINDS), st.sampled_from(CODES)))
def test_the_reason_names_the_gravest_failure(codes: dict[str, str]) -> None:
    """A refused permission comes first (nothing else can work), then an unknown topic, then an unreachable name
    server; any other failure is named by its kinds; nothing failing is a round not applied yet."""
    reason = why_not_ready(codes)
    routes = {kind[len("route of ") :]: code for kind, code in codes.items() if kind.startswith("route of ")}
    if any(code in ("PERMISSION_DENIED", "UNAUTHENTICATED") for code in codes.values()):
        assert reason.startswith("permission denied (")
    elif "NOT_FOUND" in routes.values():
        assert reason == "topic unknown to the name server: " + ", ".join(
            t for t, c in routes.items() if c == "NOT_FOUND"
        )
    elif any(code in ("UNAVAILABLE", "DEADLINE_EXCEEDED") for code in routes.values()):
        assert reason == "name server unreachable"
    elif codes:
        assert reason == "failing: " + ", ".join(codes)
    else:
        assert reason.startswith("no rebalance round")
