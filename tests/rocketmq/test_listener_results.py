"""What a listener answers, on a real RocketMQ 5.3.3 (issue 38), beside a Java consumer answering alike (Peer.java
``--answers``, the positive control): RECONSUME_LATER brings a batch back through the retry topic with its
reconsume count, ``ackIndex`` sends back exactly the rest, delay level -1 puts a batch in ``%DLQ%<group>``, an
orderly listener failing past ``max_reconsume_times`` puts its message in the dead-letter queue and the queue's next
messages are consumed in order. Python only (Java has neither): ``return False`` is reported and consumed again; a
listener stuck past a short ``consume_timeout`` gives its message back and the committed offset moves past it.

Each group consumes one queue (broker-a, queue 0) of a topic of its own, filled before it starts, so one pull
brings every message and the batches are the same in both languages: ``consume_message_batch_max_size`` splits a
pull's messages in order, in Java's client and in ours."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rocket_rebalance.lab.mixed_group import new_topic
from rocket_rebalance.lab.rocketmq import JavaPeer, RocketMQCluster
from rocket_rebalance.lab.wait import wait_until
from rocket_rebalance.model import ConsumeFromWhere, MessageModel, MessageQueue, dead_letter_topic
from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.dispatch import CONSUME_TIMEOUT_KIND
from rocket_rebalance.runtime.listener import ConsumeResult, Reconsume
from rocket_rebalance.runtime.settings import ConsumeTimeoutError, EngineSettings, ListenerResultError
from rocket_rebalance.runtime.transport import GroupRegistration, Message, PullResult, TransportError
from rocket_rebalance.runtime.transport.remoting import RemotingTransport

pytestmark = pytest.mark.rocketmq

FAST: dict[str, Any] = {
    "rebalance_interval": 2.0,
    "persist_interval": 0.5,
    "route_refresh_interval": 1.0,
    "consume_from_where": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
}
CONCURRENT = ["later", "p1", "p2", "p3", "rest", "p4", "dlq", "p5", "p6"]
"""In batches of three: [later p1 p2] comes back whole (RECONSUME_LATER on later's first delivery); [p3 rest p4]:
p3 consumed, rest and p4 back (ackIndex 0 on rest's first delivery); [dlq p5 p6]: all to the dead-letter queue."""
CONCURRENT_DELIVERIES = {"later": 2, "p1": 2, "p2": 2, "p3": 1, "rest": 2, "p4": 2, "dlq": 1, "p5": 1, "p6": 1}
ORDERLY = ["o0", "poison", "o1", "o2"]


def fill(cluster: RocketMQCluster, name: str, tags: list[str]) -> tuple[str, MessageQueue]:
    """A topic of its own with one message per tag (the tag also its body and key) in broker-a's queue 0."""
    topic = new_topic(cluster, name, 1)
    transport = cluster.transport()
    try:
        for tag in tags:
            transport.send(topic, "broker-a", [tag.encode()], 0, tags=tag, keys=tag)
    finally:
        transport.close()
    return topic, MessageQueue(topic, "broker-a", 0)


def dead_letters(cluster: RocketMQCluster, group: str) -> list[str]:
    """The tags of what is in ``group``'s dead-letter queue, on every broker: the broker a message is sent back to
    keeps it (ours send it back to the message's own broker; Java's orderly consumer sends it to the retry topic
    with its producer, which picks any broker of that topic)."""
    return [m.tags for broker in cluster.broker_names for m in stored(cluster, broker, dead_letter_topic(group))]


def stored(cluster: RocketMQCluster, broker: str, topic: str) -> list[Message]:
    """What queue 0 of ``topic`` at ``broker`` holds (read by a group of its own), or nothing yet."""
    reader = f"GID_reader{topic.replace('%', '_')}"  # one per topic: a group's heartbeat replaces its subscriptions
    transport = cluster.transport()
    try:
        registration = GroupRegistration(
            reader, False, MessageModel.CLUSTERING, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, (topic,)
        )
        transport.heartbeat(broker, f"127.0.0.1@{reader}", registration)
        return pull_all(transport, MessageQueue(topic, broker, 0), reader)
    except TransportError:  # no such topic there (yet)
        return []
    finally:
        transport.close()


def pull_all(transport: RemotingTransport, mq: MessageQueue, group: str) -> list[Message]:
    messages: list[Message] = []
    while batch := pull_once(transport, mq, group, len(messages)):
        messages += batch
    return messages


def pull_once(transport: RemotingTransport, mq: MessageQueue, group: str, offset: int) -> tuple[Message, ...]:
    answered = threading.Event()
    results: list[PullResult | TransportError] = []

    def done(result: PullResult | TransportError) -> None:
        results.append(result)
        answered.set()

    transport.pull(mq, group, offset, 32, 0, done)
    assert answered.wait(30)
    (result,) = results
    if isinstance(result, TransportError):
        raise result
    return result.messages


class Deliveries:
    """Every delivery a Python listener saw: (tag, reconsume times)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []
        self.lock = threading.Lock()

    def note(self, batch: list[Message]) -> None:
        with self.lock:
            self.seen += [(m.tags, m.reconsume_times) for m in batch]

    def counts(self) -> Counter[str]:
        with self.lock:
            return Counter(tag for tag, _ in self.seen)


def java_counts(peer: JavaPeer) -> Counter[str]:
    return Counter(event["tags"] for event in peer.consumed())


def python_group(
    cluster: RocketMQCluster, group: str, topic: str, listener: Callable[[list[Message]], Any], **options: Any
) -> PushConsumer:
    consumer = PushConsumer(
        cluster.namesrv_address,
        group,
        topics=[topic],
        listener=listener,
        client_id=f"127.0.0.1@{group}",
        **{**FAST, **options},
    )
    consumer.start()
    return consumer


def java_group(
    cluster: RocketMQCluster, tmp_path: Path, group: str, topic: str, *extra: str, orderly: bool = False
) -> JavaPeer:
    assert cluster.lib is not None
    return JavaPeer(
        cluster.lib,
        tmp_path,
        cluster.namesrv_address,
        group,
        group,
        [topic],
        orderly=orderly,
        extra=("--answers", *extra),
    )


def test_reconsume_later_ack_index_and_delay_level_minus_one_as_java_does_them(
    rocketmq: RocketMQCluster, tmp_path: Path
) -> None:
    topic, _ = fill(rocketmq, "Answers", CONCURRENT)
    deliveries = Deliveries()

    def listener(batch: list[Message]) -> ConsumeResult | Reconsume | None:
        deliveries.note(batch)
        for index, message in enumerate(batch):
            first = message.reconsume_times == 0
            if message.tags == "dlq":
                return Reconsume(delay_level=-1)
            if message.tags == "later" and first:
                return ConsumeResult.RECONSUME_LATER
            if message.tags == "rest" and first:
                return Reconsume(consumed=index)
        return None

    python_name, java_name = "GID_answers_py", "GID_answers_java"
    java = java_group(rocketmq, tmp_path, java_name, topic, "--batch", "3")
    python = python_group(
        rocketmq, python_name, topic, listener, settings=EngineSettings(consume_message_batch_max_size=3)
    )
    try:
        wanted = Counter(CONCURRENT_DELIVERIES)
        wait_until(lambda: java_counts(java) == wanted, 90, "the Java group's deliveries")
        wait_until(lambda: deliveries.counts() == wanted, 90, "the Python group's deliveries")
        wait_until(lambda: sorted(dead_letters(rocketmq, java_name)) == ["dlq", "p5", "p6"], 30, "Java's DLQ")
        wait_until(lambda: sorted(dead_letters(rocketmq, python_name)) == ["dlq", "p5", "p6"], 30, "our DLQ")
        again = sorted((tag, times) for tag, times in deliveries.seen if times)
        assert again == [(tag, 1) for tag in sorted(t for t, n in CONCURRENT_DELIVERIES.items() if n == 2)]
        java_again = sorted((e["tags"], e["reconsumeTimes"]) for e in java.consumed() if e["reconsumeTimes"])
        assert java_again == again  # the positive control: Java's consumer saw the same
        assert python.healthy  # answers are not failures
    finally:
        python.shutdown(10)
        java.stop()


def test_an_orderly_message_past_max_reconsume_times_goes_to_the_dead_letter_queue_as_java_puts_it(
    rocketmq: RocketMQCluster, tmp_path: Path
) -> None:
    topic, _ = fill(rocketmq, "OrderlyDLQ", ORDERLY)
    deliveries = Deliveries()

    def listener(batch: list[Message]) -> Reconsume | None:
        deliveries.note(batch)
        return Reconsume(suspend=0.1) if batch[0].tags == "poison" else None

    python_name, java_name = "GID_orderly_dlq_py", "GID_orderly_dlq_java"
    java = java_group(rocketmq, tmp_path, java_name, topic, "--max-reconsume-times", "2", orderly=True)
    python = python_group(
        rocketmq, python_name, topic, listener, consume_orderly=True, settings=EngineSettings(max_reconsume_times=2)
    )
    expected = [("o0", 0), ("poison", 0), ("poison", 1), ("poison", 2), ("o1", 0), ("o2", 0)]
    try:
        wait_until(lambda: len(deliveries.seen) >= len(expected), 60, "the Python group's deliveries")
        wait_until(lambda: len(java.consumed()) >= len(expected), 60, "the Java group's deliveries")
        assert [(e["tags"], e["reconsumeTimes"]) for e in java.consumed()] == expected  # the positive control
        assert deliveries.seen == expected
        wait_until(lambda: dead_letters(rocketmq, java_name) == ["poison"], 30, "Java's DLQ")
        wait_until(lambda: dead_letters(rocketmq, python_name) == ["poison"], 30, "our DLQ")
    finally:
        python.shutdown(10)
        java.stop()


def test_a_mistaken_return_and_a_stuck_listener_on_a_real_broker(rocketmq: RocketMQCluster) -> None:
    """``return False``: reported once, consumed again through the retry topic. A listener stuck past
    ``consume_timeout``: its message comes back through the retry topic, the committed offset moves past it while
    the call still runs, and health says so."""
    topic, mq = fill(rocketmq, "Mistakes", ["false", "stuck", "p"])
    deliveries = Deliveries()
    release = threading.Event()
    errors: list[tuple[str, Exception]] = []

    def listener(batch: list[Message]) -> bool | None:
        deliveries.note(batch)
        (message,) = batch
        if message.reconsume_times == 0 and message.tags == "false":
            return False
        if message.reconsume_times == 0 and message.tags == "stuck":
            release.wait(120)
        return None

    group = "GID_mistakes_py"
    consumer = python_group(
        rocketmq,
        group,
        topic,
        listener,
        settings=EngineSettings(consume_timeout=2.0),
        on_error=lambda kind, error: errors.append((kind, error)),
    )
    transport = rocketmq.transport()
    try:
        wait_until(lambda: transport.query_offsets("broker-a", group, [mq])[mq] == 3, 60, "the offset past the stuck")
        assert not release.is_set() and CONSUME_TIMEOUT_KIND in consumer.describe()["problems"]  # type: ignore[operator]
        timeouts = [e for kind, e in errors if kind == CONSUME_TIMEOUT_KIND]
        assert timeouts and isinstance(timeouts[0], ConsumeTimeoutError) and f"{mq} offsets [1]" in str(timeouts[0])
        wait_until(lambda: deliveries.counts() == Counter({"false": 2, "stuck": 2, "p": 1}), 60, "the redeliveries")
        assert sorted(t for t in deliveries.seen if t[1]) == [("false", 1), ("stuck", 1)]
        mistakes = [e for _, e in errors if isinstance(e.__cause__, ListenerResultError)]
        assert len(mistakes) == 1 and "sent back to the retry topic" in str(mistakes[0])
        release.set()
        wait_until(lambda: CONSUME_TIMEOUT_KIND not in consumer.describe()["problems"], 30)  # type: ignore[operator]
    finally:
        release.set()
        transport.close()
        consumer.shutdown(10)
