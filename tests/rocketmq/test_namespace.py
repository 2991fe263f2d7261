"""A namespaced group on a real RocketMQ 5.3.3: one Java consumer (Peer.java ``--namespace``, the positive control)
and two of ours with ``namespace=``, on a topic created as ``ns%<topic>``: every message is consumed exactly once
across the three, a message failed once comes back through ``%RETRY%ns%<group>`` (each language fails its first
delivery of the ``later`` messages), and every listener reads the topic without the namespace."""

from __future__ import annotations

import hashlib
import threading
from collections import Counter
from pathlib import Path

import pytest

from rocket_rebalance.lab.mixed_group import new_topic
from rocket_rebalance.lab.rocketmq import JavaPeer, RocketMQCluster
from rocket_rebalance.lab.wait import wait_until
from rocket_rebalance.model import ConsumeFromWhere
from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.transport import Message

pytestmark = pytest.mark.rocketmq

NAMESPACE = "ns_rr"
PER_QUEUE = 4  # plain messages on every queue, and one tagged "later" besides


class Taken:
    """What our listeners consumed (body hashes) and the topics they read; the first delivery of a ``later``
    message fails, as Peer.java ``--answers`` fails it."""

    def __init__(self) -> None:
        self.done: Counter[str] = Counter()
        self.topics: set[str] = set()
        self.retried: list[Message] = []
        self.lock = threading.Lock()

    def __call__(self, batch: list[Message]) -> None:
        with self.lock:
            self.topics.update(m.topic for m in batch)
            if any(m.tags == "later" and m.reconsume_times == 0 for m in batch):
                raise RuntimeError("later: consumed on its next delivery")
            self.retried += [m for m in batch if m.reconsume_times > 0]
            self.done.update(hashlib.sha256(m.body).hexdigest() for m in batch)


def produce(cluster: RocketMQCluster, wire_topic: str) -> set[str]:
    """PER_QUEUE plain messages and one ``later`` on every queue, each body its own; their hashes."""
    transport = cluster.transport()
    hashes: set[str] = set()
    try:
        for data in transport.route(wire_topic).queue_datas:
            for queue_id in range(data.write_queue_nums):
                plain = [f"{data.broker_name}-{queue_id}-{n}".encode() for n in range(PER_QUEUE)]
                later = f"{data.broker_name}-{queue_id}-later".encode()
                transport.send(wire_topic, data.broker_name, plain, queue_id)
                transport.send(wire_topic, data.broker_name, [later], queue_id, tags="later")
                hashes.update(hashlib.sha256(body).hexdigest() for body in [*plain, later])
    finally:
        transport.close()
    return hashes


def test_a_namespaced_mixed_group_consumes_every_message_once(rocketmq: RocketMQCluster, tmp_path: Path) -> None:
    wire_topic = new_topic(rocketmq, f"{NAMESPACE}%NsTopic", 4)  # the instance's topic: created wrapped
    topic = wire_topic.removeprefix(f"{NAMESPACE}%")
    group = "GID_ns"
    taken = Taken()
    consumers = [
        PushConsumer(
            rocketmq.namesrv_address,
            group,
            topics=[topic],
            listener=taken,
            namespace=NAMESPACE,
            client_id=f"127.0.0.1@py-ns-{index}",
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            rebalance_interval=1.0,
            persist_interval=0.5,
        )
        for index in (1, 2)
    ]
    assert rocketmq.lib is not None
    extra = ["--namespace", NAMESPACE, "--answers"]
    peer = JavaPeer(rocketmq.lib, tmp_path, rocketmq.namesrv_address, group, "java-ns", [topic], extra=extra)
    try:
        for consumer in consumers:
            consumer.start()
        queues = len(rocketmq.transport().route(wire_topic).queue_datas) * 4

        def settled() -> bool:
            owned = [q for c in consumers for q in c.owned_queues().get(topic, ())]
            java_owned = peer.owned(wire_topic)  # Java's MessageQueueListener is given the wire's topic
            if not java_owned or any(not c.owned_queues().get(topic) for c in consumers):
                return False
            return (
                len(owned) + len(java_owned) == queues == len({(q.broker_name, q.queue_id) for q in owned} | java_owned)
            )

        wait_until(settled, 90, "each queue has one owner across the three members")
        for consumer in consumers:
            assert consumer.owned_queues().keys() == {topic, f"%RETRY%{group}"}
            assert {q.topic for q in consumer.owned_queues()[topic]} == {wire_topic}
        expected = produce(rocketmq, wire_topic)

        def java_done() -> Counter[str]:
            return Counter(
                m["sha256"] for m in peer.consumed() if not (m["tags"] == "later" and m["reconsumeTimes"] == 0)
            )

        wait_until(lambda: set(taken.done + java_done()) >= expected, 120, "every message consumed, retries too")
        both = taken.done + java_done()
        assert set(both) == expected and set(both.values()) == {1}, both.most_common(3)
        assert taken.topics == {topic} and {m["topic"] for m in peer.consumed()} == {topic}
        assert sum(taken.done.values()) > 0 and sum(java_done().values()) > 0  # all three consumed a share
        assert all(m.queue.topic == f"%RETRY%{NAMESPACE}%{group}" for m in taken.retried)
    finally:
        for consumer in consumers:
            consumer.shutdown(15)
        peer.stop()
