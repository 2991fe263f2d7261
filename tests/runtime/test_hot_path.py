"""The consume path against an in-process stub: orderly retries keep the order, flow control bounds what is held,
a consume task stops before its next batch once its queue is given up, and the knobs refuse nonsense."""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

import pytest

from rocket_rebalance.model import MessageQueue
from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.settings import EngineSettings
from rocket_rebalance.runtime.transport import GRPC_SCHEME, Message
from tests.runtime.test_consumer import FAST, produce, wait_for
from tests.stub.conftest import StartStub


def test_an_orderly_queue_retries_a_failed_batch_before_anything_behind_it(start_stub: StartStub) -> None:
    """Pulls of four keep arriving while the failed message waits for its retry: none of them may overtake it."""
    address = GRPC_SCHEME + start_stub().address
    produce(address, 30)
    given: dict[MessageQueue, list[int]] = defaultdict(list)
    failed: set[MessageQueue] = set()
    lock = threading.Lock()

    def listener(batch: list[Message]) -> None:
        (message,) = batch
        with lock:
            given[message.mq].append(message.queue_offset)
            if message.queue_offset == 5 and message.mq not in failed:
                failed.add(message.mq)
                raise RuntimeError("the first try of offset 5 fails")

    consumer = PushConsumer(
        address,
        "GID_order",
        topics=["TopicTest"],
        listener=listener,
        consume_orderly=True,
        client_id="o",
        settings=EngineSettings(pull_batch_size=4, retry_delay=0.3),
        **FAST,
    )
    consumer.start()
    try:
        wait_for(lambda: consumer.consumed >= 8 * 30)
    finally:
        assert consumer.shutdown()
    assert len(given) == 8
    for offsets in given.values():
        assert offsets == [0, 1, 2, 3, 4, 5, *range(5, 30)]


def _cached(consumer: PushConsumer) -> dict[MessageQueue, tuple[int, int, int]]:
    """Each TopicTest queue's messages pulled and not consumed: how many, the smallest offset and the largest.
    One topic: the retry topic's queues (empty) start in the same round or a later one, as registration allows."""
    assert consumer._engine is not None
    rows = consumer._engine.running_info().queues
    return {
        mq: (row.cached_count, row.cached_min_offset, row.cached_max_offset)
        for mq, row in rows.items()
        if mq.topic == "TopicTest"
    }


def test_a_blocked_listener_holds_no_more_than_the_threshold_and_a_pull(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    produce(address, 300)
    release = threading.Event()
    consumer = PushConsumer(
        address,
        "GID_flow",
        topics=["TopicTest"],
        listener=lambda batch: release.wait(),
        client_id="f",
        settings=EngineSettings(pull_batch_size=8, pull_threshold_for_queue=50, consume_threads=2),
        **FAST,
    )
    consumer.start()
    try:
        wait_for(lambda: len(_cached(consumer)) == 8 and all(n > 50 for n, _, _ in _cached(consumer).values()))
        threading.Event().wait(1.0)  # pulls would have gone on by now
        assert all(n <= 50 + 8 for n, _, _ in _cached(consumer).values())
    finally:
        release.set()
        assert consumer.shutdown()


@pytest.mark.parametrize("metrics", [False, True])
def test_a_task_gives_back_the_batches_it_had_not_begun_when_its_queue_moves(
    start_stub: StartStub, metrics: bool
) -> None:
    """A quick listener gets many batches per task. One blocks in the middle of a task of queue q while a second
    consumer joins and q moves to it (AVG gives "b" broker-b's queues): once unblocked, the first consumer gives
    the listener nothing more of q (the rest of the task, and the tasks waiting behind it, go back undelivered),
    and with the fence every message is consumed exactly once. One listener thread, so nothing of q after the
    blocked message was consumed out of order (which would make the next owner re-deliver it, in Java too)."""
    address = GRPC_SCHEME + start_stub().address
    produce(address, 400)
    moving = MessageQueue("TopicTest", "broker-b", 1)
    seen: dict[str, list[tuple[MessageQueue, int]]] = {"a": [], "b": []}
    lock = threading.Lock()
    blocked, release = threading.Event(), threading.Event()

    def recorder(name: str) -> Any:
        def listener(batch: list[Message]) -> None:
            with lock:
                seen[name].extend((m.mq, m.queue_offset) for m in batch)
                mine = sum(1 for mq, _ in seen[name] if mq == moving)
                block = name == "a" and not blocked.is_set() and batch[-1].mq == moving and mine >= 100
                if block:
                    blocked.set()
            if block:
                release.wait()

        return listener

    one_thread = EngineSettings(consume_threads=1)
    failures: list[str] = []
    first = PushConsumer(
        address,
        "GID_move",
        topics=["TopicTest"],
        listener=recorder("a"),
        client_id="a",
        settings=one_thread,
        metrics=metrics,  # a task that gives everything back records no listener call
        on_error=lambda kind, error: failures.append(kind),
        **FAST,
    )
    second = PushConsumer(address, "GID_move", topics=["TopicTest"], listener=recorder("b"), client_id="b", **FAST)
    first.start()
    try:
        wait_for(blocked.is_set, timeout=30)
        with lock:
            stuck_offset = max(offset for mq, offset in seen["a"] if mq == moving)
        second.start()
        wait_for(lambda: moving not in first.owned_queues().get("TopicTest", ()), timeout=30)
        release.set()
        wait_for(lambda: first.consumed + second.consumed >= 8 * 400, timeout=60)
    finally:
        release.set()
        assert second.shutdown() and first.shutdown()
    everything = seen["a"] + seen["b"]
    assert len(everything) == len(set(everything)) == 8 * 400
    assert any(mq == moving for mq, _ in seen["b"])
    assert [offset for mq, offset in seen["a"] if mq == moving and offset > stuck_offset] == []
    assert "consume task" not in failures  # nothing of the engine's own failed on the way


@pytest.mark.parametrize(
    "field", ["pull_batch_size", "consume_message_batch_max_size", "consume_threads", "pull_threshold_for_queue"]
)
@pytest.mark.parametrize("value", [0, -3, 2.5, True])
def test_counts_must_be_whole_and_positive(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        EngineSettings(**{field: value})  # type: ignore[arg-type]
