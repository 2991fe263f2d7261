"""Consumers with ``namespace=`` in-process against an in-process stub whose topic is ``ns%TopicTest``: the group,
topics and retry topic on the wire are wrapped, and what the user reads (a message's topic, ``subscriptions``,
``owned_queues()``' keys) is not; queues keep the wire's name (Java's choice, and what ``seek`` takes)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from rocket_rebalance import AsyncPushConsumer, PullConsumer, PushConsumer
from rocket_rebalance.model import MessageQueue
from rocket_rebalance.runtime.transport import GRPC_SCHEME, Message
from rocket_rebalance.runtime.transport.grpc import GrpcTransport
from tests.aio import run
from tests.runtime.test_async_consumers import until
from tests.runtime.test_consumer import FAST, wait_for
from tests.runtime.test_pull_consumer import poll_until
from tests.stub.conftest import StartStub

WIRE_TOPIC = "ns%TopicTest"
SPEC = f"{WIRE_TOPIC}:broker-a=4,broker-b=4"


def produce(address: str, per_queue: int) -> None:
    transport = GrpcTransport(address)
    try:
        for broker in ("broker-a", "broker-b"):
            for queue_id in range(4):
                transport.send(WIRE_TOPIC, broker, [b"m"] * per_queue, queue_id)
    finally:
        transport.close()


def test_two_namespaced_push_consumers_consume_everything_once(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub(topics=(SPEC,)).address
    produce(address, 10)
    seen: list[Message] = []
    lock = threading.Lock()

    def listener(batch: list[Message]) -> None:
        with lock:
            seen.extend(batch)

    options: dict[str, Any] = {"topics": ["TopicTest"], "listener": listener, "namespace": "ns", **FAST}
    a = PushConsumer(address, "GID_x", client_id="a", **options)
    b = PushConsumer(address, "GID_x", client_id="b", **options)
    assert a.config.consumer_group == "ns%GID_x"
    assert a.subscriptions.keys() == {"TopicTest"}
    a.start()
    b.start()
    try:
        wait_for(lambda: len(seen) >= 80)
        wait_for(lambda: len(a.owned_queues().get("TopicTest", ())) == 4 == len(b.owned_queues().get("TopicTest", ())))
        assert a.owned_queues().keys() == {"TopicTest", "%RETRY%GID_x"}
        assert {mq.topic for mq in a.owned_queues()["TopicTest"]} == {WIRE_TOPIC}

        def retry_queues() -> set[MessageQueue]:  # the stub creates the retry topic at the first heartbeat
            return {mq for consumer in (a, b) for mq in consumer.owned_queues().get("%RETRY%GID_x", ())}

        wait_for(lambda: len(retry_queues()) == 2)  # one per broker
        assert {mq.topic for mq in retry_queues()} == {"%RETRY%ns%GID_x"}
        assert a.describe()["namespace"] == "ns"
    finally:
        assert a.shutdown() and b.shutdown()
    assert {m.topic for m in seen} == {"TopicTest"}
    assert {m.queue.topic for m in seen} == {WIRE_TOPIC}
    consumed = [(m.queue, m.queue_offset) for m in seen]
    assert len(consumed) == len(set(consumed)) == 80


def test_a_namespaced_pull_consumer_polls_and_is_assigned_queues_named_either_way(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub(topics=(SPEC,)).address
    produce(address, 5)
    with PullConsumer(address, "GID_p", topics=["TopicTest"], namespace="ns", client_id="p", **FAST) as consumer:
        polled = poll_until(consumer, 40)
    assert {m.topic for m in polled} == {"TopicTest"}
    assert len({(m.queue, m.queue_offset) for m in polled}) == 40
    assigned = PullConsumer(address, "GID_q", namespace="ns", client_id="q", **FAST)
    assigned.assign([MessageQueue("TopicTest", "broker-a", 0), MessageQueue(WIRE_TOPIC, "broker-b", 1)])
    assert assigned.subscriptions.keys() == {"TopicTest"}
    with assigned:
        polled = poll_until(assigned, 10)
        wire = {MessageQueue(WIRE_TOPIC, "broker-a", 0), MessageQueue(WIRE_TOPIC, "broker-b", 1)}
        assert assigned.assignment() == wire
        named = MessageQueue("TopicTest", "broker-a", 0)  # the queue named without the namespace, as Java takes it
        assert assigned.position(named) == 5
        assigned.seek(named, 2)
        again = poll_until(assigned, 3)
        assert [m.queue_offset for m in again] == [2, 3, 4]
        assigned.pause([named])
        assigned.resume([named])
        assert assigned.commit()
        assert assigned.committed(named) == 5
    assert {m.topic for m in polled} == {"TopicTest"}


def test_a_namespaced_async_listener_reads_the_topic_without_it(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub(topics=(SPEC,)).address
    produce(address, 2)
    seen: list[Message] = []

    async def listener(batch: list[Message]) -> None:
        await asyncio.sleep(0)
        seen.extend(batch)

    async def scenario() -> None:
        consumer = AsyncPushConsumer(
            address, "GID_a", topics={"TopicTest": "*"}, listener=listener, namespace="ns", client_id="a", **FAST
        )
        async with consumer:
            await until(lambda: len(seen) >= 16)

    run(scenario())
    assert {m.topic for m in seen} == {"TopicTest"}


@pytest.mark.parametrize(
    ("queue_topic", "properties", "namespace", "topic"),
    [
        (WIRE_TOPIC, {}, "ns", "TopicTest"),
        ("%RETRY%ns%GID_x", {"RETRY_TOPIC": WIRE_TOPIC}, "ns", "TopicTest"),  # retried: the original topic, unwrapped
        ("%RETRY%ns%GID_x", {}, "ns", "%RETRY%GID_x"),
        (WIRE_TOPIC, {}, None, WIRE_TOPIC),
        ("other%TopicTest", {}, "ns", "other%TopicTest"),  # another namespace's topic is left as it is
    ],
)
def test_a_message_s_topic_is_read_as_java_s_reset_retry_and_namespace_gives_it(
    queue_topic: str, properties: dict[str, str], namespace: str | None, topic: str
) -> None:
    message = Message(
        MessageQueue(queue_topic, "broker-a", 0), 0, "id", b"", properties=properties, namespace=namespace
    )
    assert message.topic == topic


@pytest.mark.parametrize(
    ("options", "error", "text"),
    [
        ({"namespace": "a%b"}, ValueError, "namespace 'a%b' has characters"),
        ({"namespace": "rmq_sys_x"}, ValueError, "system name"),
        ({"namespace": 3}, TypeError, "namespace must be a str"),
        ({"namespace": "n" * 120}, ValueError, "topic 'nnn"),  # ns%TopicTest is past the 127 a topic may have
    ],
)
def test_bad_namespaces_are_refused_at_once(options: dict[str, Any], error: type[Exception], text: str) -> None:
    with pytest.raises(error, match=text):
        PushConsumer("grpc://127.0.0.1:1", "GID_x", topics=["TopicTest"], **options)


def test_no_namespace_wraps_nothing() -> None:
    consumer = PushConsumer("grpc://127.0.0.1:1", "ns%GID_x", topics=["ns%T"], namespace="")
    assert consumer.namespace is None
    assert consumer.config.consumer_group == "ns%GID_x" and consumer.subscriptions.keys() == {"ns%T"}
