"""The asyncio consumers on a real RocketMQ 5.3.3: consumption on one event loop and nothing else, and beside a
threaded consumer of the same group, with the real ``mqadmin consumerStatus`` showing an asyncio consumer's queues."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from pathlib import Path

import pytest

from rocket_rebalance import (
    AsyncPullConsumer,
    AsyncPushConsumer,
    ConsumeFromWhere,
    Message,
    MessageQueue,
    PullConsumer,
    PushConsumer,
)
from rocket_rebalance.lab.mixed_group import new_topic
from rocket_rebalance.lab.rocketmq import RocketMQCluster, mqadmin
from rocket_rebalance.model import MessageModel
from rocket_rebalance.runtime.settings import ConsumerNotReadyError, SeekOffsetError
from rocket_rebalance.runtime.transport import GroupRegistration
from rocket_rebalance.runtime.transport.remoting_async import AsyncRemotingTransport
from tests.aio import run

pytestmark = pytest.mark.rocketmq

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
FAST = {"consume_from_where": FIRST, "rebalance_interval": 2.0, "persist_interval": 0.5}


def produce(cluster: RocketMQCluster, topic: str, per_queue: int) -> int:
    transport = cluster.transport()
    try:
        for broker in cluster.broker_names:
            for queue_id in range(4):
                transport.send(topic, broker, [f"{broker}-{queue_id}-{n}".encode() for n in range(per_queue)], queue_id)
    finally:
        transport.close()
    return per_queue * 4 * len(cluster.broker_names)


async def until(condition: object, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.05)


def test_asyncio_consumers_run_on_the_loop_alone(rocketmq: RocketMQCluster) -> None:
    """Not a thread pool behind an async facade: while an AsyncPushConsumer and an AsyncPullConsumer consume,
    the process runs no thread it did not run before they started (the wire is asyncio streams, the timers the
    loop's, the offsets the brokers' on that wire)."""
    topic = new_topic(rocketmq, "AsyncAlone", 4)
    total = produce(rocketmq, topic, 5)
    before = {thread.ident for thread in threading.enumerate()}
    pushed: list[Message] = []
    during: set[int | None] = set()

    async def scenario() -> int:
        async def listener(batch: list[Message]) -> None:
            pushed.extend(batch)
            during.update(thread.ident for thread in threading.enumerate())

        polled = 0
        async with AsyncPushConsumer(
            rocketmq.namesrv_address, "GID_async_alone_push", topics=[topic], listener=listener, **FAST
        ):
            async with AsyncPullConsumer(
                rocketmq.namesrv_address, "GID_async_alone_pull", topics=[topic], **FAST
            ) as pulling:
                while polled < total:
                    polled += len(await pulling.poll(timeout=1.0))
                    during.update(thread.ident for thread in threading.enumerate())
                await until(lambda: len(pushed) >= total)
        return polled

    assert run(scenario(), timeout=120) == total
    assert len({(m.queue, m.queue_offset) for m in pushed}) == total
    assert during <= before, "a consumer started threads of its own"


def test_an_asyncio_and_a_threaded_consumer_share_a_group(rocketmq: RocketMQCluster, tmp_path: Path) -> None:
    """One group of both kinds splits the topic, consumes every message once, and the real ``mqadmin
    consumerStatus`` shows the asyncio member's own process-queue table (its running info, answered on the loop)."""
    topic = new_topic(rocketmq, "AsyncMixed", 4)
    total = produce(rocketmq, topic, 10)
    seen: list[tuple[str, Message]] = []
    lock = threading.Lock()

    def threaded_listener(batch: list[Message]) -> None:
        with lock:
            seen.extend(("threaded", m) for m in batch)

    threaded = PushConsumer(
        rocketmq.namesrv_address,
        "GID_async_mixed",
        topics=[topic],
        listener=threaded_listener,
        client_id="127.0.0.1@threaded",
        **FAST,
    )

    async def scenario() -> None:
        async def listener(batch: list[Message]) -> None:
            with lock:
                seen.extend(("async", m) for m in batch)

        async with AsyncPushConsumer(
            rocketmq.namesrv_address,
            "GID_async_mixed",
            topics=[topic],
            listener=listener,
            client_id="127.0.0.1@async",
            **FAST,
        ) as consumer:
            threaded.start()
            try:
                await until(lambda: len(seen) >= total)
                await until(lambda: len(consumer.owned_queues().get(topic, ())) == 4)
                assert len(threaded.owned_queues().get(topic, ())) == 4
                assert consumer.owned_queues()[topic].isdisjoint(threaded.owned_queues()[topic])
                assert rocketmq.lib is not None
                printed = await asyncio.to_thread(
                    mqadmin, rocketmq.lib, tmp_path / "mqadmin", "consumerStatus", "-n", rocketmq.namesrv_address,
                    "-g", "GID_async_mixed", "-i", "127.0.0.1@async",
                )  # fmt: skip
                rows = {(match[0], int(match[1])) for match in re.findall(rf"\n{topic} +(broker-\w) +(\d+) ", printed)}
                assert rows == {(mq.broker_name, mq.queue_id) for mq in consumer.owned_queues()[topic]}, printed
                assert re.search(r"\nPROP_CLIENT_LANGUAGE +: PYTHON\n", printed), printed
            finally:
                assert threaded.shutdown()

    run(scenario(), timeout=120)
    offsets = [(m.queue, m.queue_offset) for _, m in seen]
    assert len(offsets) == len(set(offsets)) == total
    assert {who for who, _ in seen} == {"async", "threaded"}


def test_pull_consumers_commit_seek_and_pause_on_a_real_broker(rocketmq: RocketMQCluster) -> None:
    """What the pull consumers promise, against the broker's own offsets: a commit is the broker's committed
    offset (QUERY_CONSUMER_OFFSET), a seek backwards re-delivers without moving it back, a paused queue is not
    polled, and what was polled without a commit comes again to the next consumer of the group."""
    topic = new_topic(rocketmq, "PullReal", 1)
    for broker in rocketmq.broker_names:
        rocketmq_send(rocketmq, topic, broker, 5)
    group = "GID_pull_real"
    a, b = (MessageQueue(topic, broker, 0) for broker in rocketmq.broker_names)

    def stored() -> dict[MessageQueue, int | None]:
        transport = rocketmq.transport()
        try:
            return {mq: transport.query_offsets(mq.broker_name, group, [mq])[mq] for mq in (a, b)}
        finally:
            transport.close()

    consumer = PullConsumer(rocketmq.namesrv_address, group, topics=[topic], auto_commit=False, **FAST)
    with consumer:
        polled = poll_all(consumer, 10)
        assert {m.queue for m in polled} == {a, b}
        assert consumer.commit() and stored() == {a: 5, b: 5}
        with pytest.raises(SeekOffsetError, match="seek offset = 6, min offset = 0, max offset = 5"):
            consumer.seek(a, 6)  # beyond the broker's max offset, which the broker would store (probe 2026-11-27)
        consumer.seek(b, 5)  # exactly the max (the next to be written): accepted
        consumer.seek(a, 2)
        again = poll_all(consumer, 3)
        assert [(m.queue, m.queue_offset) for m in again] == [(a, 2), (a, 3), (a, 4)]
        assert consumer.commit() and stored() == {a: 5, b: 5}  # re-read: the offset did not go back
        consumer.pause([b])
        for broker in rocketmq.broker_names:
            rocketmq_send(rocketmq, topic, broker, 2)
        paused = poll_all(consumer, 2)
        assert {m.queue for m in paused} == {a} and consumer.poll(timeout=1.0) == []
        consumer.resume([b])
        assert {(m.queue, m.queue_offset) for m in poll_all(consumer, 2)} == {(b, 5), (b, 6)}
        # a's 5 and 6 and b's 5 and 6 polled, not committed: the group's next consumer gets them again
    assert stored() == {a: 5, b: 5}

    async def next_consumer() -> list[Message]:
        async with AsyncPullConsumer(rocketmq.namesrv_address, group, topics=[topic], **FAST) as pulling:
            messages: list[Message] = []
            while len(messages) < 4:
                messages += await pulling.poll(timeout=1.0)
            return messages

    again = run(next_consumer(), timeout=60)
    assert {(m.queue, m.queue_offset) for m in again} == {(a, 5), (a, 6), (b, 5), (b, 6)}


def poll_all(consumer: PullConsumer, count: int, timeout: float = 60.0) -> list[Message]:
    messages: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(messages) < count:
        assert time.monotonic() < deadline, f"{len(messages)} of {count} polled"
        messages += consumer.poll(timeout=1.0)
    return messages


def rocketmq_send(cluster: RocketMQCluster, topic: str, broker: str, count: int) -> None:
    transport = cluster.transport()
    try:
        transport.send(topic, broker, [b"m"] * count, 0)
    finally:
        transport.close()


def registration(group: str, topic: str) -> GroupRegistration:
    return GroupRegistration(group, True, MessageModel.CLUSTERING, FIRST, (topic,))


@pytest.mark.parametrize("wire", ["threaded", "asyncio"])
def test_a_new_groups_first_offset_writes_are_all_stored(rocketmq: RocketMQCluster, wire: str) -> None:
    """RocketMQ 5.3.3 makes a topic's offset table for a group on its first write without a lock, so first writes
    of several queues processed at once may keep one and lose the others, each answered SUCCESS (2 of 12 short
    drains of a benchmark lost a queue's only write). Whatever the broker's timing: every queue of a fresh group's
    first batch ends up stored, on both wires. The order that makes it so (one write per topic first) is checked
    deterministically at the wire in ``tests/runtime/test_remoting_transport.py``; the race itself is rare on a
    quiet broker."""
    topic = new_topic(rocketmq, f"FirstWrites{wire}", 8)
    queues = [MessageQueue(topic, "broker-a", queue_id) for queue_id in range(8)]
    groups = [f"GID_first_writes_{wire}_{n}_{time.time_ns()}" for n in range(20)]
    offsets = {mq: 3 + mq.queue_id for mq in queues}

    async def write_async() -> None:
        transport = AsyncRemotingTransport([rocketmq.namesrv_address])
        try:
            for group in groups:
                await transport.heartbeat("broker-a", "127.0.0.1@w", registration(group, topic))
                assert await transport.update_offsets("broker-a", group, "127.0.0.1@w", offsets) == offsets
        finally:
            await transport.close()

    if wire == "asyncio":
        run(write_async(), timeout=120)
    else:
        transport = rocketmq.transport()
        try:
            for group in groups:
                transport.heartbeat("broker-a", "127.0.0.1@w", registration(group, topic))  # the group exists now
                assert transport.update_offsets("broker-a", group, "127.0.0.1@w", offsets) == offsets
        finally:
            transport.close()
    reader = rocketmq.transport()
    try:
        lost = {
            group: {
                mq.queue_id
                for mq, stored in reader.query_offsets("broker-a", group, queues).items()
                if stored != offsets[mq]
            }
            for group in groups
        }
    finally:
        reader.close()
    assert {group: ids for group, ids in lost.items() if ids} == {}


def test_wait_for_assignment_on_a_real_broker(rocketmq: RocketMQCluster) -> None:
    """Three members of a group on a topic of two queues (one per broker): each ``wait_for_assignment`` returns,
    one of them with no queue, and together they hold every queue once; a topic the name server does not know is
    named in the error (the broker's TOPIC_NOT_EXIST)."""
    topic = new_topic(rocketmq, "Ready", 1)
    queues = {MessageQueue(topic, broker, 0) for broker in rocketmq.broker_names}
    address = rocketmq.namesrv_address

    async def scenario() -> list[frozenset[MessageQueue]]:
        async with AsyncPushConsumer(address, "GID_ready", topics=[topic], client_id="ready-a") as first:
            with PullConsumer(address, "GID_ready", topics=[topic], client_id="ready-b") as second:
                with PushConsumer(address, "GID_ready", topics=[topic], client_id="ready-c") as third:
                    groups = [first, second, third]
                    await until(lambda: sum(len(c.owned_queues().get(topic, ())) for c in groups) == 2, 120)
                    held = [(await first.wait_for_assignment(60))[topic]]
                    return held + [c.wait_for_assignment(60)[topic] for c in (second, third)]

    held = run(scenario(), timeout=300)
    assert sorted(map(len, held)) == [0, 1, 1] and frozenset().union(*held) == queues

    with PushConsumer(address, "GID_ready_unknown", topics=["NoSuchTopicReady"]) as unknown:
        run(until(lambda: not unknown.healthy, 60))
        with pytest.raises(ConsumerNotReadyError) as refused:
            unknown.wait_for_assignment(0.5)
    assert refused.value.reason == "topic unknown to the name server: NoSuchTopicReady"
