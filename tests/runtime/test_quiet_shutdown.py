"""A graceful shutdown is not a failure: it logs no WARNING (probe 2026-11-24, finding 22: every shutdown on the
remoting wire warned that a pull was failing on a closed connection, which was the shutdown closing it)."""

from __future__ import annotations

import logging
import time

import pytest

from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.transport import GRPC_SCHEME, Message
from tests.runtime.test_consumer import FAST, produce
from tests.stub.conftest import StartStub


def test_a_graceful_shutdown_warns_of_nothing(start_stub: StartStub, caplog: pytest.LogCaptureFixture) -> None:
    address = GRPC_SCHEME + start_stub().address
    produce(address, 5)
    seen: list[Message] = []
    consumer = PushConsumer(address, "GID_quiet", topics=["TopicTest"], listener=seen.extend, client_id="c1", **FAST)
    consumer.start()
    deadline = time.monotonic() + 20
    while len(seen) < 40 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(seen) == 40
    time.sleep(0.5)  # every queue is now in a long poll, which the shutdown ends
    with caplog.at_level(logging.WARNING, logger="rocket_rebalance"):
        assert consumer.shutdown(10)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
