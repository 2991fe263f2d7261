"""PushConsumer in-process against an in-process stub: consumption, handover, the pull-style use, bad input."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from rocket_rebalance.model import ConsumeFromWhere, MessageModel, MessageQueue
from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.transport import GRPC_SCHEME, Message
from rocket_rebalance.runtime.transport.grpc import GrpcTransport
from tests.stub.conftest import StartStub

FAST: dict[str, Any] = {
    "rebalance_interval": 1.0,
    "persist_interval": 0.2,
    "consume_from_where": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,  # messages are produced before the start
}


def wait_for(condition: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached")


def produce(address: str, per_queue: int) -> None:
    transport = GrpcTransport(address)
    try:
        for broker in ("broker-a", "broker-b"):
            for queue_id in range(4):
                transport.send("TopicTest", broker, [b"m"] * per_queue, queue_id)
    finally:
        transport.close()


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[MessageQueue, int]] = []
        self.lock = threading.Lock()

    def __call__(self, batch: list[Message]) -> None:
        with self.lock:
            self.seen.extend((m.mq, m.queue_offset) for m in batch)


def test_two_consumers_share_the_topic_and_consume_everything_once(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    produce(address, 10)
    first, second = Recorder(), Recorder()
    a = PushConsumer(address, "GID_rt", topics=["TopicTest"], listener=first, client_id="a", **FAST)
    b = PushConsumer(address, "GID_rt", topics=["TopicTest"], listener=second, client_id="b", **FAST)
    a.start()
    b.start()
    try:
        wait_for(lambda: len(first.seen) + len(second.seen) >= 80)
        wait_for(lambda: len(a.owned_queues().get("TopicTest", ())) == 4 == len(b.owned_queues().get("TopicTest", ())))
        assert a.owned_queues()["TopicTest"].isdisjoint(b.owned_queues()["TopicTest"])
    finally:
        assert a.shutdown() and b.shutdown()
    consumed = first.seen + second.seen
    assert len(consumed) == len(set(consumed)) == 80


def test_failing_listener_is_retried_and_nothing_is_committed_past_it(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    produce(address, 2)
    attempts: list[int] = []

    def flaky(batch: list[Message]) -> None:
        attempts.append(batch[0].queue_offset)
        if len(attempts) <= 3:
            raise RuntimeError("not yet")

    consumer = PushConsumer(
        address, "GID_retry", topics=["TopicTest"], listener=flaky, client_id="a", settings=None, **FAST
    )
    consumer.start()
    try:
        wait_for(lambda: consumer.consumed >= 16)
    finally:
        assert consumer.shutdown()
    assert len(attempts) == 16 + 3


def test_pull_style_use_is_told_its_queues_and_pulls_nothing(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    produce(address, 5)
    changes: list[tuple[str, Sequence[MessageQueue], Sequence[MessageQueue]]] = []
    consumer = PushConsumer(
        address,
        "GID_pull",
        topics=["TopicTest"],
        queue_listener=lambda topic, mq_all, mine: changes.append((topic, mq_all, mine)),
        client_id="p",
        **FAST,
    )
    consumer.start()
    try:
        wait_for(lambda: any(topic == "TopicTest" and len(mine) == 8 for topic, _, mine in changes))
    finally:
        assert consumer.shutdown()
    assert consumer.consumed == 0


def test_broadcasting_keeps_offsets_in_the_given_file(start_stub: StartStub, tmp_path: pytest.TempPathFactory) -> None:
    address = GRPC_SCHEME + start_stub().address
    produce(address, 3)
    seen = Recorder()
    path = tmp_path / "offsets.json"  # type: ignore[operator]
    consumer = PushConsumer(
        address,
        "GID_bc",
        topics=["TopicTest"],
        listener=seen,
        message_model=MessageModel.BROADCASTING,
        offset_file=path,
        client_id="x",
        **FAST,
    )
    consumer.start()
    try:
        wait_for(lambda: len(seen.seen) == 24)
    finally:
        assert consumer.shutdown()
    assert path.exists()


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"topics": ["bad topic"]}, ValueError, "characters outside"),
        ({"topics": ["T"], "persist_interval": 0}, ValueError, "persist_interval must be a finite number"),
    ],
)
def test_bad_settings_are_named(kwargs: dict[str, object], error: type[Exception], text: str) -> None:
    with pytest.raises(error, match=text):
        PushConsumer("127.0.0.1:1", "GID_bad", **kwargs)  # type: ignore[arg-type]


def test_start_needs_a_topic() -> None:
    consumer = PushConsumer("127.0.0.1:1", "GID_none")
    with pytest.raises(ValueError, match="subscribe to at least one topic"):
        consumer.start()


def test_a_second_shutdown_is_a_quiet_no_op(start_stub: StartStub, caplog: pytest.LogCaptureFixture) -> None:
    consumer = PushConsumer(
        GRPC_SCHEME + start_stub().address, "GID_twice", topics=["TopicTest"], listener=lambda b: None
    )
    consumer.start()
    assert consumer.shutdown() is True
    caplog.clear()
    assert consumer.shutdown() is True
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
