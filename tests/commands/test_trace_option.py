"""``consume --trace [TOPIC]``: the consumer it runs writes message trace (the trace itself is proven on a real
broker by tests/rocketmq/test_trace.py); without the option, none."""

from __future__ import annotations

from rocket_rebalance.cli import build_parser
from rocket_rebalance.commands.client import _consumer_options
from rocket_rebalance.runtime.settings import EngineSettings
from rocket_rebalance.trace import TRACE_TOPIC
from tests.commands.test_acl_options import CONSUME


def _settings(*extra: str) -> EngineSettings | None:
    options = _consumer_options(build_parser().parse_args([*CONSUME, *extra]), "cid", False)
    settings = options.get("settings")
    assert settings is None or isinstance(settings, EngineSettings)
    return settings


def test_trace_is_off_unless_asked_and_goes_to_java_s_topic_or_the_one_named() -> None:
    assert _settings() is None
    traced = _settings("--trace")
    assert traced is not None and traced.enable_trace and traced.trace_topic == TRACE_TOPIC
    named = _settings("--trace", "MyTraceTopic")
    assert named is not None and named.enable_trace and named.trace_topic == "MyTraceTopic"
