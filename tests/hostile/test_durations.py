"""Every interval and duration is a finite positive number, or one clear error (probe 2026-11-24 section 14).

NaN and inf passed ``value <= 0``: ``persist_interval=inf`` never wrote an offset, a NaN lock lifetime consumed
nothing, ``consume --report-interval 0`` busy-looped and ``--work-ms -5`` failed every message. One check,
:func:`rocket_rebalance.model.check_duration`, serves the config, the runtime's settings and the command line.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocket_rebalance import cli
from rocket_rebalance.core import RebalanceConfig
from rocket_rebalance.model import check_duration
from rocket_rebalance.runtime.consumer import WAIT_INTERVAL_ENV, PushConsumer
from rocket_rebalance.runtime.settings import EngineSettings

BAD = [math.nan, math.inf, -math.inf, 0, 0.0, -1, -5.0, True, "5", None]
DURATIONS = [
    f.name
    for f in dataclasses.fields(RebalanceConfig)
    if f.name.endswith(("_interval", "_lifetime", "_expiry", "_timeout"))
]


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_a_duration_is_exactly_a_finite_positive_number(value: float) -> None:
    if math.isfinite(value) and value > 0:
        assert check_duration("x", value) == value
    else:
        with pytest.raises(ValueError, match="x must be a finite number of seconds > 0"):
            check_duration("x", value)


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_where_zero_means_something_it_is_the_only_non_positive_value_taken(value: float) -> None:
    if math.isfinite(value) and value >= 0:
        assert check_duration("x", value, zero=True, unit="milliseconds") == value
    else:
        with pytest.raises(ValueError, match="x must be a finite number of milliseconds >= 0"):
            check_duration("x", value, zero=True, unit="milliseconds")


def test_every_config_duration_is_checked() -> None:
    assert len(DURATIONS) >= 14, DURATIONS  # the intervals, both lock lifetimes, pull_expiry, the timeouts


@pytest.mark.parametrize("name", DURATIONS)
@pytest.mark.parametrize("value", BAD, ids=repr)
def test_a_bad_config_duration_is_named(name: str, value: object) -> None:
    with pytest.raises(ValueError, match=f"{name} must be a finite number of seconds > 0, got {value!r}"):
        RebalanceConfig("G", "c", **{name: value})  # type: ignore[arg-type]


def test_the_probes_nan_lock_lifetime_is_refused_before_the_comparison_it_would_pass() -> None:
    with pytest.raises(ValueError, match="client_lock_lifetime must be a finite number"):
        RebalanceConfig("G", "c", client_lock_lifetime=math.nan)


@pytest.mark.parametrize("value", [math.inf, math.nan, 0.0])
def test_push_consumer_intervals_are_checked(value: float) -> None:
    with pytest.raises(ValueError, match="persist_interval must be a finite number of seconds > 0"):
        PushConsumer("127.0.0.1:1", "GID_bad", topics=["T"], persist_interval=value)


@pytest.mark.parametrize(
    ("settings", "name"),
    [
        ({"pull_error_backoff": math.nan}, "pull_error_backoff"),
        ({"retry_delay": -1.0}, "retry_delay"),
        ({"retry_delay": 0.0}, "retry_delay"),
        ({"reconnect_backoff": (0.2, math.inf)}, "reconnect_backoff"),
        ({"reconnect_backoff": (0.0, 5.0)}, "reconnect_backoff"),
        ({"pull_wait_ms": -5}, "pull_wait_ms"),
        ({"pull_wait_ms": math.nan}, "pull_wait_ms"),
    ],
)
def test_engine_setting_durations_are_checked(settings: dict[str, object], name: str) -> None:
    with pytest.raises(ValueError, match=f"{name} must be a finite number"):
        EngineSettings(**settings)  # type: ignore[arg-type]


def test_engine_settings_take_a_zero_server_wait_and_the_defaults() -> None:
    assert EngineSettings(pull_wait_ms=0).pull_wait_ms == 0
    assert EngineSettings() == EngineSettings()


def test_backoff_bounds_must_be_in_order() -> None:
    with pytest.raises(ValueError, match="reconnect_backoff"):
        EngineSettings(reconnect_backoff=(5.0, 0.2))


@pytest.mark.parametrize("text", ["nan", "inf", "0", "soon"])
def test_the_wait_interval_environment_variable_is_checked_by_name(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WAIT_INTERVAL_ENV, text)
    with pytest.raises(ValueError, match=f"{WAIT_INTERVAL_ENV} must be a finite number of seconds > 0"):
        PushConsumer("127.0.0.1:1", "GID_env", topics=["T"])


@pytest.mark.parametrize("timeout", [math.nan, -1.0, math.inf])
def test_a_shutdown_timeout_is_checked(timeout: float) -> None:
    consumer = PushConsumer("127.0.0.1:1", "GID_t", topics=["T"])
    with pytest.raises(ValueError, match="timeout must be a finite number of seconds >= 0"):
        consumer.shutdown(timeout)


CONSUME = ("consume", "-n", "127.0.0.1:1", "-g", "G", "-t", "T")


@pytest.mark.parametrize(
    ("argv", "flag", "rule"),
    [
        ((*CONSUME, "--persist-interval", "inf"), "--persist-interval", "seconds > 0"),
        ((*CONSUME, "--persist-interval", "nan"), "--persist-interval", "seconds > 0"),
        ((*CONSUME, "--rebalance-interval", "nan"), "--rebalance-interval", "seconds > 0"),
        ((*CONSUME, "--heartbeat-interval", "nan"), "--heartbeat-interval", "seconds > 0"),
        ((*CONSUME, "--route-interval", "-1"), "--route-interval", "seconds > 0"),
        ((*CONSUME, "--report-interval", "0"), "--report-interval", "seconds > 0"),
        ((*CONSUME, "--report-interval", "nan"), "--report-interval", "seconds > 0"),
        ((*CONSUME, "--work-ms", "-5"), "--work-ms", "milliseconds >= 0"),
        ((*CONSUME, "--work-ms", "nan"), "--work-ms", "milliseconds >= 0"),
        ((*CONSUME, "--work-ms", "lots"), "--work-ms", "milliseconds >= 0"),
        (("snapshot", "-n", "127.0.0.1:1", "--out", "x", "--timeout", "nan"), "--timeout", "seconds > 0"),
        (("snapshot", "-n", "127.0.0.1:1", "--out", "x", "--timeout", "0"), "--timeout", "seconds > 0"),
    ],
)
def test_a_bad_duration_on_the_command_line_is_one_line(
    argv: tuple[str, ...], flag: str, rule: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as ended:
        cli.main(list(argv))
    assert ended.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert f"argument {flag}: must be a finite number of {rule}, got " in lines[0], lines[0]


def test_zero_work_and_fractions_are_taken() -> None:
    args = cli.build_parser().parse_args([*CONSUME, "--work-ms", "0", "--report-interval", "0.5"])
    assert (args.work_ms, args.report_interval) == (0.0, 0.5)
