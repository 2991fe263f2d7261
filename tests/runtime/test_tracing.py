"""Message trace (``enable_trace``): the records each consumer writes, what the buffer does when the sender cannot
keep up (drops, counted and reported, never waited for), and the flush at shutdown. The consumers run against the
stub, whose transport here plays a broker's part for the trace: it stamps pulled messages with the broker's
``MSG_REGION`` (a real broker sets it on every message; Java traces nothing without it) and takes the trace
topic's messages. ``tests/rocketmq/test_trace.py`` reads the records back through ``mqadmin`` from a real broker."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from rocket_rebalance import AsyncPushConsumer, MessageQueue
from rocket_rebalance.core import RebalanceConfig
from rocket_rebalance.lab.wait import wait_until
from rocket_rebalance.route import QueueData, TopicRoute
from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.health import Health
from rocket_rebalance.runtime.listener import ConsumeResult
from rocket_rebalance.runtime.pull_consumer import PullConsumer
from rocket_rebalance.runtime.settings import EngineSettings
from rocket_rebalance.runtime.steps import Steps
from rocket_rebalance.runtime.tracing import TRACE_DROP_KIND, TraceBuffer, TraceDroppedError, Tracing
from rocket_rebalance.runtime.transport import GRPC_SCHEME, Message, PullResult, TransportError
from rocket_rebalance.runtime.transport.grpc import GrpcTransport
from rocket_rebalance.runtime.transport.grpc_async import AsyncGrpcTransport
from rocket_rebalance.trace import TRACE_TOPIC, SubBefore, TraceBean
from tests.aio import run
from tests.runtime.test_consumer import FAST, produce
from tests.runtime.test_metrics import scrape, value
from tests.stub.conftest import StartStub

REGION = "DefaultRegion"
TRACE_ROUTE = TopicRoute(TRACE_TOPIC, (QueueData("broker-a", 1, 1),))


def _stamped(result: PullResult | TransportError) -> PullResult | TransportError:
    if isinstance(result, TransportError):
        return result
    messages = tuple(dataclasses.replace(m, properties={**m.properties, "MSG_REGION": REGION}) for m in result.messages)
    return dataclasses.replace(result, messages=messages)


class TracedStub(GrpcTransport):
    """The stub's transport, with a broker's region on pulled messages and the trace topic's messages kept."""

    def __init__(self, address: str) -> None:
        super().__init__(address)
        self.traces: list[tuple[str, str]] = []  # (body, keys) of each trace message
        self.trace_lock = threading.Lock()

    def pull(
        self,
        mq: MessageQueue,
        consumer_group: str,
        offset: int,
        max_messages: int,
        wait_ms: int,
        done: Callable[[PullResult | TransportError], None],
    ) -> None:
        super().pull(mq, consumer_group, offset, max_messages, wait_ms, lambda result: done(_stamped(result)))

    def route(self, topic: str) -> TopicRoute:
        return TRACE_ROUTE if topic == TRACE_TOPIC else super().route(topic)

    def send(
        self,
        topic: str,
        broker: str,
        bodies: Sequence[bytes],
        queue_id: int | None = None,
        tags: str = "",
        keys: str = "",
        properties: Mapping[str, str] | None = None,
    ) -> tuple[int, list[int]]:
        if topic != TRACE_TOPIC:
            return super().send(topic, broker, bodies, queue_id, tags, keys, properties)
        with self.trace_lock:
            self.traces += [(body.decode("utf-8"), keys) for body in bodies]
        return 0, [0] * len(bodies)


class AsyncTracedStub(AsyncGrpcTransport):
    """:class:`TracedStub` for the asyncio consumers."""

    def __init__(self, address: str) -> None:
        super().__init__(address)
        self.traces: list[tuple[str, str]] = []

    async def pull(
        self, mq: MessageQueue, consumer_group: str, offset: int, max_messages: int, wait_ms: int
    ) -> PullResult:
        result = _stamped(await super().pull(mq, consumer_group, offset, max_messages, wait_ms))
        assert isinstance(result, PullResult)
        return result

    async def route(self, topic: str) -> TopicRoute:
        return TRACE_ROUTE if topic == TRACE_TOPIC else await super().route(topic)

    async def send(
        self,
        topic: str,
        broker: str,
        bodies: Sequence[bytes],
        queue_id: int | None = None,
        tags: str = "",
        keys: str = "",
        properties: Mapping[str, str] | None = None,
    ) -> tuple[int, list[int]]:
        if topic != TRACE_TOPIC:
            return await super().send(topic, broker, bodies, queue_id, tags, keys, properties)
        self.traces += [(body.decode("utf-8"), keys) for body in bodies]
        return 0, [0] * len(bodies)


def records(traces: list[tuple[str, str]]) -> list[list[str]]:
    """Every trace line's fields, from every trace message (the keys checked to name each line's message ID)."""
    lines: list[list[str]] = []
    for body, keys in traces:
        assert body.endswith("\x02")
        for line in body[:-1].split("\x02"):
            fields = line.split("\x01")
            msg_id = fields[5] if fields[0] == "SubBefore" else fields[2]
            assert msg_id in keys.split(" ")
            lines.append(fields)
    return lines


def check_traced(lines: list[list[str]], consumed: Mapping[str, bool], group: str) -> None:
    """Each message consumed has one SubBefore and one SubAfter line per call, paired by request ID, in the
    group, with success as the listener answered (the last call's) and Java's context code for it."""
    before = {(f[4], f[5]): f for f in lines if f[0] == "SubBefore"}
    after = {(f[1], f[2]): f for f in lines if f[0] == "SubAfter"}
    assert set(before) == set(after)
    assert {msg_id for _, msg_id in after} == set(consumed)
    for (request_id, msg_id), fields in after.items():
        assert len(fields) == 9 and fields[8] == group and int(fields[3]) >= 0
        assert before[request_id, msg_id][2] == REGION and before[request_id, msg_id][3] == group
        assert fields[4] in ("true", "false") and fields[6] == ("0" if fields[4] == "true" else "4")
    for msg_id, success in consumed.items():
        assert any(f[4] == str(success).lower() for (_, m), f in after.items() if m == msg_id)


@pytest.mark.parametrize("orderly", [False, True], ids=["concurrent", "orderly"])
def test_a_push_consumer_traces_every_call(start_stub: StartStub, orderly: bool) -> None:
    """Messages tagged by their body's parity are answered consumed or RECONSUME_LATER (once: then consumed),
    and each call's SubBefore and SubAfter reach the trace topic, flushed at shutdown at the latest."""
    address = GRPC_SCHEME + start_stub().address
    produce(address, 3)
    transport = TracedStub(address)
    outcome: dict[str, bool] = {}
    seen: set[str] = set()
    lock = threading.Lock()

    def listener(batch: list[Message]) -> ConsumeResult:
        (message,) = batch
        with lock:
            refuse = message.queue_offset == 1 and message.msg_id not in seen
            seen.add(message.msg_id)
            outcome[message.msg_id] = outcome.get(message.msg_id, False) or not refuse
        return ConsumeResult.RECONSUME_LATER if refuse else ConsumeResult.SUCCESS

    consumer = PushConsumer(
        address,
        "GID_trace",
        topics=["TopicTest"],
        listener=listener,
        client_id="c1",
        transport=transport,
        settings=EngineSettings(enable_trace=True, retry_delay=0.2, suspend_current_queue_time=0.1),
        consume_orderly=orderly,
        **FAST,
    )
    consumer.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (len(outcome) == 24 and all(outcome.values())):
            time.sleep(0.05)
    finally:
        assert consumer.shutdown(20)
    assert len(outcome) == 24 and all(outcome.values())
    lines = records(transport.traces)
    check_traced(lines, outcome, "GID_trace")
    failed = [f for f in lines if f[0] == "SubAfter" and f[4] == "false"]
    assert len(failed) == 8  # the offset-1 message of each of the 8 queues, refused once
    assert consumer.describe()["trace"] == {"written": len(lines), "dropped": 0, "lost": 0, "waiting": 0}


def test_an_async_push_consumer_traces_every_call(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    produce(address, 2)

    async def main() -> AsyncTracedStub:
        transport = AsyncTracedStub(address)
        done: set[str] = set()

        async def listener(batch: list[Message]) -> None:
            done.update(m.msg_id for m in batch)

        consumer = AsyncPushConsumer(
            address,
            "GID_trace_async",
            topics=["TopicTest"],
            listener=listener,
            client_id="a1",
            transport=transport,
            settings=EngineSettings(enable_trace=True, consume_message_batch_max_size=2),
            **FAST,
        )
        await consumer.start()
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and len(done) < 16:
                await asyncio.sleep(0.05)
        finally:
            assert await consumer.shutdown(20)
        assert len(done) == 16
        check_traced(records(transport.traces), dict.fromkeys(done, True), "GID_trace_async")
        return transport

    run(main())


def test_a_pull_consumer_traces_what_poll_hands_out(start_stub: StartStub) -> None:
    """Java's DefaultLitePullConsumer writes both records, successful, when poll() returns a queue's messages."""
    address = GRPC_SCHEME + start_stub().address
    produce(address, 2)
    transport = TracedStub(address)
    polled: set[str] = set()
    consumer = PullConsumer(
        address,
        "GID_trace_pull",
        topics=["TopicTest"],
        client_id="p1",
        transport=transport,
        settings=EngineSettings(enable_trace=True),
        **FAST,
    )
    consumer.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(polled) < 16:
            polled.update(m.msg_id for m in consumer.poll(timeout=0.5))
    finally:
        consumer.close(20)
    assert len(polled) == 16
    check_traced(records(transport.traces), dict.fromkeys(polled, True), "GID_trace_pull")


# ---------------------------------------------------------------------------------------------- the bounded buffer


class StuckService:
    """Just enough of the engine for :class:`Tracing`: a sender that never runs (its pool is busy for good), so
    every record stays in the buffer; what the health heard is kept."""

    def __init__(self) -> None:
        self.settings = EngineSettings(enable_trace=True)
        self.config = RebalanceConfig(consumer_group="GID_stuck", client_id="c1")
        self.failures: list[tuple[str, Exception]] = []
        self.health = Health(lambda kind, error: self.failures.append((kind, error)))
        self.posted: list[Callable[[], None]] = []
        self.closing = threading.Event()

    def post(self, item: Callable[[], None]) -> None:
        self.posted.append(item)

    def later(self, delay: float, callback: Callable[[], None]) -> None:
        pass

    def spawn(self, pool: str, what: str, steps: Steps[Any], then: Callable[[Any], None] | None = None) -> bool:
        return True  # taken, and never run


def _message(offset: int) -> Message:
    mq = MessageQueue("TopicTest", "broker-a", 0)
    return Message(mq, offset, f"ID{offset}", b"", properties={"MSG_REGION": REGION})


@given(st.integers(1, 40), st.lists(st.integers(1, 3), max_size=60))
def test_a_full_buffer_drops_and_counts_without_waiting(capacity: int, batches: list[int]) -> None:
    """However many calls come while the sender is stuck, ``before`` returns (no call waits for room), the buffer
    holds at most its capacity, the oldest records in order, and every record refused is counted (in trace
    lines) and reported under its own kind."""
    service = StuckService()
    tracing = Tracing(service)  # type: ignore[arg-type]
    tracing.buffer = TraceBuffer(capacity)
    offsets = iter(range(10**6))
    offered: list[int] = []
    for size in batches:
        batch = [_message(next(offsets)) for _ in range(size)]
        traced = tracing.before(batch)
        assert traced is not None
        offered.append(size)
    kept = offered[:capacity]
    assert len(tracing.buffer) == len(kept)
    assert tracing.buffer.dropped == sum(offered[capacity:])
    assert [len(r.beans) for r in tracing.buffer.take(capacity)] == kept
    drops = [error for kind, error in service.failures if kind == TRACE_DROP_KIND]
    assert bool(drops) == (len(offered) > capacity)
    assert all(isinstance(error, TraceDroppedError) for error in drops)


@given(st.integers(1, 20), st.lists(st.tuples(st.booleans(), st.integers(0, 5)), max_size=80))
def test_the_buffer_is_a_bounded_queue(capacity: int, operations: list[tuple[bool, int]]) -> None:
    """Against a model: offers append while there is room, else count their lines as dropped; takes remove
    the oldest first."""
    buffer = TraceBuffer(capacity)
    model: list[SubBefore] = []
    dropped = 0
    for index, (offer, count) in enumerate(operations):
        if offer:
            beans = tuple(TraceBean(f"m{index}-{n}", None, 0, "T") for n in range(count))
            record = SubBefore(0, REGION, "G", str(index), beans)
            taken, waiting = buffer.offer(record)
            assert taken == (len(model) < capacity)
            if taken:
                model.append(record)
            else:
                dropped += count
            assert waiting == len(model)
        else:
            got = buffer.take(count)
            assert got == model[:count]
            del model[:count]
        assert len(buffer) == len(model) <= capacity
    assert buffer.dropped == dropped


def test_untraced_messages_write_nothing() -> None:
    """Java's hook skips messages whose TRACE_ON is false, and a call whose messages carry no region."""
    tracing = Tracing(StuckService())  # type: ignore[arg-type]
    off = dataclasses.replace(_message(0), properties={"MSG_REGION": REGION, "TRACE_ON": "false"})
    no_region = dataclasses.replace(_message(1), properties={})
    assert tracing.before([off]) is None
    assert tracing.before([no_region]) is None
    assert len(tracing.buffer) == 0


@pytest.mark.parametrize("bad", [0, 21, True, "10"])
def test_a_trace_batch_size_java_would_not_keep_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="trace_batch_size"):
        EngineSettings(trace_batch_size=bad)  # type: ignore[arg-type]


def test_trace_lines_show_in_the_metrics(start_stub: StartStub) -> None:
    """With metrics on, the trace's lines written, dropped and lost are counters and its waiting records a gauge;
    a consumer without trace has none of them."""
    address = GRPC_SCHEME + start_stub().address
    produce(address, 1)
    registry = CollectorRegistry()
    consumed: list[int] = []
    consumers = [
        PushConsumer(
            address,
            group,
            topics=["TopicTest"],
            listener=lambda batch: consumed.extend(m.queue_offset for m in batch),
            client_id=client,
            transport=TracedStub(address),
            settings=EngineSettings(enable_trace=traced),
            metrics=registry,
            **FAST,
        )
        for group, client, traced in (("GID_traced", "m1", True), ("GID_untraced", "m2", False))
    ]
    for consumer in consumers:
        consumer.start()
    try:
        ours = {"group": "GID_traced", "strategy": "AVG", "client": "m1"}
        # 8 messages, one call each: a SubBefore and a SubAfter line per call, sent 5 s after the first at the latest
        wait_until(lambda: value(scrape(registry), "rocket_rebalance_trace_lines_total", **ours) == 16, 30, "traced")
        samples = scrape(registry)
        for outcome, expected in (("written", 16), ("dropped", 0), ("lost", 0)):
            assert value(samples, "rocket_rebalance_trace_lines_total", outcome=outcome, **ours) == expected, outcome
        assert value(samples, "rocket_rebalance_trace_waiting_records", **ours) == 0
        assert not [name for name, labels in samples if "trace" in name and ("group", "GID_untraced") in labels]
        untraced = {"group": "GID_untraced", "topic": "TopicTest"}
        assert value(samples, "rocket_rebalance_assigned_queues", **untraced) == 8  # it was scraped all the same
    finally:
        for consumer in consumers:
            consumer.shutdown()
