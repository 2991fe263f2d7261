"""AsyncPushConsumer and AsyncPullConsumer in-process against an in-process stub (grpc.aio): the threaded
consumers' checks, on one event loop: everything consumed once across a changing group, ``async def`` listeners and
rebalance callbacks as exact deltas with the fence between a revoke and the next owner's assign, commit and seek,
a shutdown awaited from the consumer's own listener, and what reaches ``on_error``."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from rocket_rebalance import AsyncPullConsumer, AsyncPushConsumer, Message, MessageQueue, RebalanceListener
from rocket_rebalance.runtime.settings import ListenerError, SeekOffsetError
from rocket_rebalance.runtime.transport import GRPC_SCHEME, TransportError
from rocket_rebalance.runtime.transport.grpc_async import AsyncGrpcTransport
from tests.aio import run
from tests.runtime.test_consumer import FAST, produce
from tests.runtime.test_pull_consumer import QUEUES, TOPIC, check_deltas, check_exclusive, holds, refused
from tests.stub.conftest import StartStub

Log = list[tuple[str, str, frozenset[MessageQueue], float]]


class AsyncHeard(RebalanceListener):
    """Every callback, awaited, with when it returned; a revoke takes its time, as a flush would."""

    def __init__(self, log: Log, name: str, revoke_takes: float = 0.0) -> None:
        self.log = log
        self.name = name
        self.revoke_takes = revoke_takes

    async def on_queues_assigned(self, queues: frozenset[MessageQueue]) -> None:
        self.log.append((self.name, "assigned", queues, time.monotonic()))

    async def on_queues_revoked(self, queues: frozenset[MessageQueue]) -> None:
        await asyncio.sleep(self.revoke_takes)
        self.log.append((self.name, "revoked", queues, time.monotonic()))

    async def on_queues_lost(self, queues: frozenset[MessageQueue]) -> None:
        self.log.append((self.name, "lost", queues, time.monotonic()))


async def until(condition: Any, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.05)


def pushing(address: str, client_id: str, seen: list[Message], log: Log, **options: Any) -> AsyncPushConsumer:
    async def listener(batch: list[Message]) -> None:
        await asyncio.sleep(0)
        seen.extend(batch)

    return AsyncPushConsumer(
        address,
        "GID_async_push",
        topics=[TOPIC],
        listener=listener,
        client_id=client_id,
        rebalance_listener=AsyncHeard(log, client_id, revoke_takes=0.3),
        **{**FAST, **options},
    )


def test_async_push_consumers_share_a_changing_group_and_consume_everything_once(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    produce(address, 10)
    log: Log = []
    seen_a: list[Message] = []
    seen_b: list[Message] = []

    async def scenario() -> None:
        async with pushing(address, "a", seen_a, log):
            await until(lambda: len(seen_a) >= 80)
            b = pushing(address, "b", seen_b, log)
            await b.start()
            await until(lambda: holds(log, "b"))
            produce(address, 10)  # a blocking call of the test's own: a moment of a stalled loop, harmless
            await until(lambda: len(seen_a) + len(seen_b) >= 160)
            assert await b.shutdown()

    run(scenario())
    consumed = [(m.queue, m.queue_offset) for m in seen_a + seen_b]
    assert len(consumed) == len(set(consumed)) == 160  # graceful moves re-deliver nothing with the fence
    assert check_deltas(log, "a") == set() and check_deltas(log, "b") == set()
    check_exclusive(log)  # b heard of each queue only after a's 0.3 s revoke of it returned


def test_async_pull_consumers_poll_every_message_once_across_a_join(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    produce(address, 10)
    log: Log = []
    polled: dict[str, list[Message]] = {"a": [], "b": []}
    stop = asyncio.Event()

    async def poller(consumer: AsyncPullConsumer, name: str) -> None:
        async with consumer:
            while not stop.is_set():
                batch = await consumer.poll(max_messages=16, timeout=0.2)
                polled[name] += batch
                if batch:
                    assert await consumer.commit()

    def pulling(name: str) -> AsyncPullConsumer:
        return AsyncPullConsumer(
            address,
            "GID_async_pull",
            topics=[TOPIC],
            client_id=name,
            auto_commit=False,
            rebalance_listener=AsyncHeard(log, name),
            **FAST,
        )

    async def scenario() -> None:
        first = asyncio.create_task(poller(pulling("a"), "a"))
        await until(lambda: len(polled["a"]) >= 80)
        second = asyncio.create_task(poller(pulling("b"), "b"))
        await until(lambda: holds(log, "b"))
        produce(address, 10)
        await until(lambda: len(polled["a"]) + len(polled["b"]) >= 160)
        stop.set()
        await asyncio.gather(first, second)

    run(scenario())
    consumed = [(m.queue, m.queue_offset) for m in polled["a"] + polled["b"]]
    assert len(consumed) == len(set(consumed)) == 160
    assert check_deltas(log, "a") == set() and check_deltas(log, "b") == set()
    check_exclusive(log)


def test_async_pull_commit_seek_and_iteration(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    produce(address, 3)
    mq = QUEUES[0]

    async def scenario() -> None:
        consumer = AsyncPullConsumer(address, "GID_async_seek", topics=[TOPIC], auto_commit=False, **FAST)
        async with consumer:
            seen: list[Message] = []
            async for message in consumer:
                seen.append(message)
                if len(seen) == 24:
                    break
            assert consumer.position(mq) == 3
            assert await consumer.commit() and await consumer.committed(mq) == 3
            await consumer.seek(mq, 1)
            again = await consumer.poll(timeout=5.0)
            assert [m.queue_offset for m in again if m.queue == mq] == [1, 2]
            await consumer.seek_to_beginning(mq)
            assert consumer.position(mq) == 0
            await consumer.seek_to_end(mq)
            assert await consumer.poll(timeout=0.3) == []
            with pytest.raises(ValueError, match="max_messages"):
                await consumer.poll(max_messages=0)
        with pytest.raises(RuntimeError, match="closed"):
            await consumer.poll()
        assert await AsyncPullConsumer(address, "GID_async_seek", topics=[TOPIC], **FAST).committed(mq) == 3

    run(scenario())


class AsyncReportedOffsets(AsyncGrpcTransport):
    """The stub's asyncio transport with the min offsets a broker reports once it cleaned up each queue's first
    ``low`` messages (the stub deletes none), or with the ask failing (``broken``)."""

    def __init__(self, address: str, low: int) -> None:
        super().__init__(address)
        self.low = low
        self.broken: TransportError | None = None

    async def min_offset(self, mq: MessageQueue) -> int:
        if self.broken is not None:
            raise self.broken
        return max(self.low, await super().min_offset(mq))


def test_async_pull_seek_is_held_to_the_queues_offsets(start_stub: StartStub) -> None:
    """The threaded consumer's seek checks (probe 2026-11-27, finding 2), awaited: outside [min offset, max offset]
    as the broker reports them, or with the broker not answering, a seek is refused and nothing moves; exactly
    the max and exactly the min are accepted, and the commit after a seek to the max stores exactly the max."""
    address = GRPC_SCHEME + start_stub().address
    produce(address, 5)
    mq = QUEUES[0]

    async def scenario() -> None:
        transport = AsyncReportedOffsets(address, low=2)
        consumer = AsyncPullConsumer(
            address, "GID_async_seek_range", topics=[TOPIC], auto_commit=False, transport=transport, **FAST
        )
        await consumer.start()
        try:
            await until(lambda: mq in consumer.assignment())
            for offset in (6, 2**63 - 1, 1):
                with pytest.raises(SeekOffsetError, match=refused(mq, offset, 2, 5)):
                    await consumer.seek(mq, offset)
                assert consumer.position(mq) == 0
            await consumer.seek(mq, 5)
            assert await consumer.commit() and await consumer.committed(mq) == 5
            assert (await transport.query_offsets(mq.broker_name, "GID_async_seek_range", [mq]))[mq] == 5
            await consumer.seek(mq, 2)
            transport.broken = TransportError("the broker cannot be reached", "UNAVAILABLE")
            with pytest.raises(TransportError, match="cannot be reached"):
                await consumer.seek(mq, 3)
            assert consumer.position(mq) == 2
            transport.broken = None
            messages: list[Message] = []
            while len(messages) < 38:
                messages += await consumer.poll(timeout=5.0)
            assert [m.queue_offset for m in messages if m.queue == mq] == [2, 3, 4]
        finally:
            started = time.monotonic()
            assert await consumer.close(10) and time.monotonic() - started < 5

    run(scenario())


def test_a_shutdown_awaited_from_the_listener_does_not_deadlock(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    produce(address, 1)
    answers: list[bool] = []

    async def scenario() -> None:
        consumer: AsyncPushConsumer

        async def listener(batch: list[Message]) -> None:
            answers.append(await consumer.shutdown())  # from its own task: starts it, cannot wait for it

        consumer = AsyncPushConsumer(address, "GID_async_stop", topics=[TOPIC], listener=listener, **FAST)
        await consumer.start()
        await until(lambda: bool(answers))
        assert await consumer.shutdown()  # the shutdown it started, awaited from outside: clean

    run(scenario())
    assert answers[0] is False


def test_a_failing_async_listener_reaches_on_error_and_is_retried(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    produce(address, 1)
    errors: list[tuple[str, Exception]] = []
    attempts: list[int] = []

    async def scenario() -> None:
        async def listener(batch: list[Message]) -> None:
            attempts.append(batch[0].queue_offset)
            if len(attempts) <= 2:
                raise RuntimeError("not yet")

        consumer = AsyncPushConsumer(
            address,
            "GID_async_error",
            topics=[TOPIC],
            listener=listener,
            on_error=lambda kind, error: errors.append((kind, error)),
            **FAST,
        )
        async with consumer:
            await until(lambda: consumer.consumed >= 8)

    run(scenario())
    assert len(attempts) == 8 + 2
    failures = [error for kind, error in errors if isinstance(error, ListenerError)]
    assert failures and all("not yet" in str(error) for error in failures)  # told as logged: not once per failure
