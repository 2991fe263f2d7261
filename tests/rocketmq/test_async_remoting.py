"""The asyncio remoting transport against a real Apache RocketMQ 5.3.3 (the session's cluster): every call a
consumer makes, a long poll that a sent message ends, a notification caused by a threaded client joining the
group, running info read by an operator (our admin read and the real ``mqadmin consumerStatus``), and the same
answers as the threaded transport for the same calls."""

from __future__ import annotations

import asyncio
import itertools
import re
import threading
from pathlib import Path

import pytest

from rocket_rebalance.lab.mixed_group import new_topic
from rocket_rebalance.lab.rocketmq import RocketMQCluster, mqadmin
from rocket_rebalance.model import ConsumeFromWhere, MessageModel, MessageQueue, retry_topic
from rocket_rebalance.runtime.transport import (
    ConsumerReport,
    GroupRegistration,
    PullResult,
    PullStatus,
    SubscriptionRefusedError,
    TransportError,
)
from rocket_rebalance.runtime.transport.remoting import RemotingTransport
from rocket_rebalance.runtime.transport.remoting_async import AsyncRemotingTransport
from rocket_rebalance.subscription import SubscriptionExpression
from tests.aio import run
from tests.runtime.test_remoting_async import _AsyncClient

pytestmark = pytest.mark.rocketmq

_groups = itertools.count()


def group_of(name: str) -> str:
    return f"GID_async_{name}_{next(_groups)}"


def registration(group: str, topic: str, push: bool = True) -> GroupRegistration:
    return GroupRegistration(group, push, MessageModel.CLUSTERING, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, (topic,))


def test_every_call_of_a_consumer_against_a_real_broker(rocketmq: RocketMQCluster) -> None:
    topic = new_topic(rocketmq, "AsyncCalls", 2)
    group, client = group_of("calls"), "127.0.0.1@async-calls"
    mq = MessageQueue(topic, "broker-a", 0)

    async def calls() -> None:
        transport = AsyncRemotingTransport([rocketmq.namesrv_address])
        try:
            route = await transport.route(topic)
            assert sorted(d.broker_name for d in route.queue_datas) == ["broker-a", "broker-b"]
            for broker in ("broker-a", "broker-b"):
                await transport.heartbeat(broker, client, registration(group, topic))
            assert await transport.consumer_list("broker-a", group) == [client]
            table = await transport.subscription_table("broker-a", group)
            assert set(table) == {topic, retry_topic(group)} and table[topic].ours
            await transport.check_subscription("broker-a", group, client, topic, SubscriptionExpression("TagA"))
            with pytest.raises(SubscriptionRefusedError, match="enablePropertyFilter=true"):  # not set here
                await transport.check_subscription(
                    "broker-a", group, client, topic, SubscriptionExpression("a > 5", "SQL92")
                )
            assert await transport.send(topic, "broker-a", [b"one", b"two", b"three"], 0, tags="TagA", keys="k") == (
                0,
                [0, 1, 2],
            )
            # the broker's consume queue is built from the commit log after the send returns (its reput thread): on a
            # busy machine the max offset trails the send for a moment
            while await transport.max_offset(mq) < 3:
                await asyncio.sleep(0.05)
            assert await transport.max_offset(mq) == 3
            assert await transport.search_offset(mq, 0) == 0
            pulled = await transport.pull(mq, group, 0, 32, 0)
            assert pulled.status == PullStatus.FOUND and pulled.next_begin_offset == 3
            assert [(m.body, m.tags, m.keys) for m in pulled.messages] == [
                (b"one", "TagA", "k"),
                (b"two", "TagA", "k"),
                (b"three", "TagA", "k"),
            ]
            # never committed: a 5.x broker answers the queue's smallest offset when it is still 0
            assert await transport.query_offsets("broker-a", group, [mq]) == {mq: 0}
            assert await transport.update_offsets("broker-a", group, client, {mq: 2}) == {mq: 2}
            assert await transport.query_offsets("broker-a", group, [mq]) == {mq: 2}
            assert await transport.lock("broker-a", group, client, [mq]) == {mq}
            assert await transport.lock("broker-a", group, "127.0.0.1@someone-else", [mq]) == set()
            await transport.unlock("broker-a", group, client, [mq])
            assert await transport.lock("broker-a", group, "127.0.0.1@someone-else", [mq]) == {mq}
            await transport.send_back(group, pulled.messages[2], 16, 0)  # into the retry topic (after its delay)
            for broker in ("broker-a", "broker-b"):
                await transport.unregister(broker, client, group)
            with pytest.raises(TransportError):
                await transport.consumer_list("broker-a", group)  # nobody left: the broker says so
        finally:
            assert await transport.close()

    run(calls())


def test_a_long_poll_returns_when_a_message_is_sent_meanwhile(rocketmq: RocketMQCluster) -> None:
    topic = new_topic(rocketmq, "AsyncPoll", 1)
    group, client = group_of("poll"), "127.0.0.1@async-poll"
    mq = MessageQueue(topic, "broker-a", 0)

    async def calls() -> PullResult:
        transport = AsyncRemotingTransport([rocketmq.namesrv_address])
        try:
            await transport.heartbeat("broker-a", client, registration(group, topic))
            polling = asyncio.create_task(transport.pull(mq, group, 0, 32, 60_000))
            await asyncio.sleep(1.0)
            assert not polling.done()  # held by the broker: nothing to return yet
            await transport.send(topic, "broker-a", [b"wake"], 0)  # on the same connection, beside the poll
            async with asyncio.timeout(30):  # the broker wakes the poll; without it the poll would wait 60 s
                return await polling
        finally:
            await transport.close()

    pulled = run(calls())
    assert pulled.status == PullStatus.FOUND and [m.body for m in pulled.messages] == [b"wake"]


def test_a_threaded_client_joining_the_group_is_notified_on_the_async_stream(rocketmq: RocketMQCluster) -> None:
    topic = new_topic(rocketmq, "AsyncNotify", 1)
    group = group_of("notify")
    joiner = RemotingTransport([rocketmq.namesrv_address])

    async def calls() -> tuple[str, bool]:
        transport = AsyncRemotingTransport([rocketmq.namesrv_address])
        notified: asyncio.Queue[tuple[str, bool]] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        try:
            await transport.heartbeat("broker-a", "127.0.0.1@async", registration(group, topic))
            await transport.connect(
                "broker-a",
                "127.0.0.1@async",
                lambda g: notified.put_nowait((g, asyncio.get_running_loop() is loop)),
                lambda error: None,
            )
            await asyncio.to_thread(joiner.heartbeat, "broker-a", "127.0.0.1@threaded", registration(group, topic))
            async with asyncio.timeout(30):
                return await notified.get()
        finally:
            await transport.close()

    try:
        assert run(calls()) == (group, True)
    finally:
        joiner.close()


def test_an_operator_reads_the_running_info_of_an_async_client(rocketmq: RocketMQCluster, tmp_path: Path) -> None:
    topic = new_topic(rocketmq, "AsyncInfo", 1)
    group, client = group_of("info"), "127.0.0.1@async-info"
    operator = RemotingTransport([rocketmq.namesrv_address])
    assert rocketmq.lib is not None
    lib = rocketmq.lib

    async def calls() -> tuple[ConsumerReport, str]:
        transport = AsyncRemotingTransport([rocketmq.namesrv_address])
        transport.attach(_AsyncClient())
        try:
            for broker in ("broker-a", "broker-b"):
                await transport.heartbeat(broker, client, registration(group, topic))
            report = await asyncio.to_thread(operator.consumer_report, group, client)
            printed = await asyncio.to_thread(
                mqadmin, lib, tmp_path / "mqadmin", "consumerStatus", "-n", rocketmq.namesrv_address, "-g", group,
                "-i", client,
            )  # fmt: skip
            return report, printed
        finally:
            await transport.close()

    try:
        report, printed = run(calls(), timeout=120)
    finally:
        operator.close()
    expected = _AsyncClient().running_info()
    assert report.queues == frozenset(expected.queues)
    properties = report.properties
    assert properties["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY" and properties["PROP_CLIENT_LANGUAGE"] == "PYTHON"
    assert properties["PROP_THREADPOOL_CORE_SIZE"] == "20"
    assert report.subscriptions is not None
    assert report.subscriptions["TopicS"] == SubscriptionExpression("a > 5", "SQL92")
    assert re.search(r"\nPROP_CONSUME_TYPE +: CONSUME_PASSIVELY\n", printed), printed
    assert re.search(r"\nTopicT +broker-a +0 ", printed), printed  # the process-queue table's row


def pulled(result: PullResult) -> tuple[object, ...]:
    """A pull's answer as the differential test compares it: every field a listener or a send back reads."""
    return (
        result.status,
        result.next_begin_offset,
        [(m.mq, m.queue_offset, m.msg_id, m.body, dict(m.properties), m.commit_log_offset) for m in result.messages],
    )


def test_the_threaded_and_async_transports_answer_alike(rocketmq: RocketMQCluster) -> None:
    """The same calls through both transports, for one client of one group: the same route, members, offsets,
    locks and pulled messages."""
    topic = new_topic(rocketmq, "AsyncSame", 2)
    group, client = group_of("same"), "127.0.0.1@same"
    queues = [MessageQueue(topic, broker, q) for broker in ("broker-a", "broker-b") for q in (0, 1)]
    threaded = RemotingTransport([rocketmq.namesrv_address])
    try:
        for mq in queues:
            threaded.send(
                topic, mq.broker_name, [f"{mq.broker_name}-{mq.queue_id}-{n}".encode() for n in range(5)], mq.queue_id
            )

        def blocking_pull(mq: MessageQueue) -> PullResult:
            done = threading.Event()
            box: list[PullResult | TransportError] = []

            def finished(result: PullResult | TransportError) -> None:
                box.append(result)
                done.set()

            threaded.pull(mq, group, 0, 32, 0, finished)
            assert done.wait(30)
            assert isinstance(box[0], PullResult)
            return box[0]

        for broker in ("broker-a", "broker-b"):
            threaded.heartbeat(broker, client, registration(group, topic))  # the brokers make the group now
        threaded.update_offsets("broker-a", group, client, {queues[0]: 2})
        expected = (
            threaded.route(topic),
            threaded.consumer_list("broker-a", group),
            threaded.query_offsets("broker-a", group, queues[:2]),
            threaded.lock("broker-a", group, client, queues[:2]),
            [pulled(blocking_pull(mq)) for mq in queues],
            threaded.max_offset(queues[3]),
        )
        for broker in ("broker-a", "broker-b"):  # one connection per client ID at a time: a broker lists each one
            threaded.unregister(broker, client, group)
    finally:
        threaded.close()

    async def calls() -> tuple[object, ...]:
        transport = AsyncRemotingTransport([rocketmq.namesrv_address])
        try:
            for broker in ("broker-a", "broker-b"):
                await transport.heartbeat(broker, client, registration(group, topic))
            return (
                await transport.route(topic),
                await transport.consumer_list("broker-a", group),
                await transport.query_offsets("broker-a", group, queues[:2]),
                await transport.lock("broker-a", group, client, queues[:2]),
                [pulled(await transport.pull(mq, group, 0, 32, 0)) for mq in queues],
                await transport.max_offset(queues[3]),
            )
        finally:
            await transport.close()

    assert run(calls()) == expected
    assert expected[2] == {queues[0]: 2, queues[1]: 0} and expected[3] == set(queues[:2])
