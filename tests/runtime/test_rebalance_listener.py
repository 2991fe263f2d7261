"""A push consumer's RebalanceListener against an in-process stub: exact deltas in order, revoke before the
release (with the fence the next owner hears of a queue only after our revoke returned), lost queues, failing and
``async def`` callbacks, and the callbacks' latency in the metrics."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from rocket_rebalance import RebalanceListener
from rocket_rebalance.model import MessageQueue
from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.settings import RebalanceListenerError
from rocket_rebalance.runtime.transport import GRPC_SCHEME
from tests.hostile.test_engine_answers import Altered
from tests.runtime.test_consumer import FAST, Recorder, produce, wait_for
from tests.runtime.test_pull_consumer import TOPIC, Heard, check_deltas, check_exclusive, holds
from tests.stub.conftest import StartStub


def push(address: str, client_id: str, listener: RebalanceListener, **options: Any) -> PushConsumer:
    return PushConsumer(
        address,
        "GID_rl",
        topics=[TOPIC],
        listener=options.pop("on_message", lambda batch: None),
        client_id=client_id,
        rebalance_listener=listener,
        **{**FAST, **options},
    )


class SlowRevoke(Heard):
    """Takes its time to flush, as an application writing its state would."""

    def on_queues_revoked(self, queues: frozenset[MessageQueue]) -> None:
        time.sleep(0.5)
        super().on_queues_revoked(queues)


def test_deltas_in_order_and_the_next_owner_hears_after_our_revoke(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    log: list[tuple[str, str, frozenset[MessageQueue], float]] = []
    produce(address, 20)
    seen_a, seen_b = Recorder(), Recorder()
    a = push(address, "a", SlowRevoke(log, "a"), on_message=seen_a)
    a.start()
    try:
        wait_for(lambda: len(seen_a.seen) >= 40)
        b = push(address, "b", Heard(log, "b"), on_message=seen_b)
        b.start()
        try:
            wait_for(lambda: holds(log, "b"))
            produce(address, 20)
            wait_for(lambda: len(seen_a.seen) + len(seen_b.seen) >= 320)
        finally:
            assert b.shutdown()
    finally:
        assert a.shutdown()
    consumed = seen_a.seen + seen_b.seen
    assert len(consumed) == len(set(consumed)) == 320  # graceful moves re-deliver nothing with the fence
    assert check_deltas(log, "a") == set() and check_deltas(log, "b") == set()
    check_exclusive(log)  # the revokes took 0.5 s each, and b waited for them
    moved = {mq for who, kind, qs, _ in log if who == "b" and kind == "assigned" for mq in qs}
    assert {mq.topic for mq in moved} >= {TOPIC}


def test_a_queue_whose_lock_is_refused_on_renewal_is_lost_not_revoked(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    log: list[tuple[str, str, frozenset[MessageQueue], float]] = []
    transport = Altered(address)
    consumer = push(address, "a", Heard(log, "a"), transport=transport, lock_all_interval=0.3)

    def lost() -> set[MessageQueue]:
        return {mq for _, kind, qs, _ in log if kind == "lost" for mq in qs}

    consumer.start()
    try:
        wait_for(lambda: len(check_deltas(log, "a")) == 10)  # 8 and 2 of the retry topic
        transport.refuse_locks = True  # as a broker that gave the locks to another holder
        # each broker's renewal is refused in its own turn: on a busy machine one can come well after the other
        wait_for(lambda: len(lost()) == 10)
        transport.refuse_locks = False
        wait_for(lambda: len(check_deltas(log, "a")) == 10)  # taken again by a later round
    finally:
        assert consumer.shutdown()
    revoked = {mq for _, kind, qs, _ in log if kind == "revoked" for mq in qs}
    assert len(lost()) == 10 and revoked == lost()  # lost while held; revoked once at the shutdown
    assert check_deltas(log, "a") == set()


class Failing(RebalanceListener):
    def __init__(self) -> None:
        self.assigned: list[frozenset[MessageQueue]] = []
        self.revoked: list[frozenset[MessageQueue]] = []

    def on_queues_assigned(self, queues: frozenset[MessageQueue]) -> None:
        self.assigned.append(queues)
        raise RuntimeError("cannot warm the cache")

    def on_queues_revoked(self, queues: frozenset[MessageQueue]) -> None:
        self.revoked.append(queues)
        raise RuntimeError("cannot flush")


def test_a_failing_callback_is_reported_and_the_rebalance_goes_on(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    produce(address, 2)
    errors: list[tuple[str, Exception]] = []
    seen = Recorder()
    listener = Failing()
    consumer = push(address, "a", listener, on_message=seen, on_error=lambda kind, error: errors.append((kind, error)))
    consumer.start()
    wait_for(lambda: len(seen.seen) == 16)  # the queues started though on_queues_assigned raised
    assert consumer.shutdown()  # and were released though on_queues_revoked raised
    assigned = [mq for queues in listener.assigned for mq in queues]
    revoked = [mq for queues in listener.revoked for mq in queues]
    assert sorted(assigned) == sorted(revoked) and {mq.topic for mq in revoked} >= {TOPIC}
    kinds = {kind for kind, error in errors if isinstance(error, RebalanceListenerError)}
    assert kinds == {"rebalance listener on_queues_assigned", "rebalance listener on_queues_revoked"}
    assert all(isinstance(error.__cause__, RuntimeError) for _, error in errors)


class AsyncHeard(RebalanceListener):
    def __init__(self) -> None:
        self.calls: list[tuple[str, frozenset[MessageQueue], str]] = []

    async def on_queues_assigned(self, queues: frozenset[MessageQueue]) -> None:
        self.calls.append(("assigned", queues, threading.current_thread().name))

    async def on_queues_revoked(self, queues: frozenset[MessageQueue]) -> None:
        self.calls.append(("revoked", queues, threading.current_thread().name))


def test_async_def_callbacks_run_in_a_threaded_consumer(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    listener = AsyncHeard()
    consumer = push(address, "a", listener)
    consumer.start()
    wait_for(lambda: sum(len(qs) for kind, qs, _ in listener.calls if kind == "assigned") == 10)
    assert consumer.shutdown()
    assigned = {mq for kind, qs, _ in listener.calls if kind == "assigned" for mq in qs}
    revoked = {mq for kind, qs, _ in listener.calls if kind == "revoked" for mq in qs}
    assert assigned == revoked and len(assigned) == 10
    assert {thread for _, _, thread in listener.calls} == {"rr-rebalance-listener_0"}  # one thread: in order


def test_the_callbacks_latency_is_in_the_metrics(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    registry = CollectorRegistry()
    log: list[tuple[str, str, frozenset[MessageQueue], float]] = []
    consumer = push(address, "a", SlowRevoke(log, "a"), metrics=registry)
    consumer.start()

    def sample(callback: str, what: str) -> float:
        labels = {"group": "GID_rl", "client": "a", "strategy": "AVG", "callback": callback}
        return registry.get_sample_value(f"rocket_rebalance_rebalance_listener_seconds_{what}", labels) or 0.0

    try:
        wait_for(lambda: len(check_deltas(log, "a")) == 10)
        wait_for(lambda: sample("assigned", "count") >= 1)
        assert sample("revoked", "count") == 0
        other = push(address, "b", Heard([], "b"))  # takes half: a revokes, slowly
        other.start()
        try:
            wait_for(lambda: sample("revoked", "count") >= 1)
            assert sample("revoked", "sum") >= 0.5
        finally:
            assert other.shutdown()
    finally:
        assert consumer.shutdown()


@pytest.mark.parametrize("bad", [object(), lambda queues: None])
def test_a_rebalance_listener_must_be_one(start_stub: StartStub, bad: object) -> None:
    with pytest.raises(TypeError, match="RebalanceListener"):
        PushConsumer("grpc://127.0.0.1:1", "GID_rl", topics=[TOPIC], rebalance_listener=bad)  # type: ignore[arg-type]
