"""The production-cluster proof shared by the ACL and TLS tests: two of our consumers and a Java consumer share a
group on a secured one-broker cluster, and every message sent is consumed exactly once across the languages."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from rocket_rebalance.lab.rocketmq import JavaPeer, RocketMQCluster
from rocket_rebalance.lab.wait import wait_until
from rocket_rebalance.model import ConsumeFromWhere, MessageQueue
from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.transport import Message
from rocket_rebalance.runtime.transport.remoting import RemotingTransport

# From the first offset, as the Java peer: from the last one, a new group asks GET_MAX_OFFSET (Java does too),
# which ACL 2.0 authorizes as Get on the topic, a permission beyond Sub.
FAST: dict[str, Any] = {
    "rebalance_interval": 1.0,
    "persist_interval": 0.2,
    "heartbeat_interval": 1.0,
    "consume_from_where": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
}


class Recorder:
    """A listener that keeps which (queue, offset) it consumed."""

    def __init__(self) -> None:
        self.seen: list[tuple[MessageQueue, int]] = []
        self._lock = threading.Lock()

    def __call__(self, batch: list[Message]) -> None:
        with self._lock:
            self.seen.extend((message.mq, message.queue_offset) for message in batch)


def share_a_group_exactly_once(
    cluster: RocketMQCluster,
    tmp_path: Path,
    group: str,
    topic: str,
    queues: int,
    *,
    ours: dict[str, Any],
    java: dict[str, Any],
    producer: RemotingTransport,
    batches: list[list[bytes]],
    timeout: float,
) -> None:
    """Start the three members (``ours``/``java``: the options that make them reach the cluster), wait until they
    share the queues of broker-a, send ``batches`` to every queue with ``producer`` (closed here), and check that
    every message is consumed exactly once and that each member consumed some."""
    assert cluster.lib is not None
    recorders = [Recorder(), Recorder()]
    consumers = [
        PushConsumer(
            cluster.namesrv_address,
            group,
            topics=[topic],
            listener=recorder,
            client_id=f"127.0.0.1@py-{index}",
            **ours,
            **FAST,
        )  # fmt: skip
        for index, recorder in enumerate(recorders)
    ]
    peer = JavaPeer(cluster.lib, tmp_path, cluster.namesrv_address, group, "java-1", [topic], **java)
    try:
        for consumer in consumers:
            consumer.start()
        assert peer.started.wait(60), "the Java consumer did not start"
        every = frozenset(("broker-a", queue) for queue in range(queues))

        def settled() -> bool:
            owned = [frozenset((q.broker_name, q.queue_id) for q in c.owned_queues().get(topic, ())) for c in consumers]
            owned.append(peer.owned(topic))
            # AVG over 4 queues and 3 members gives each at least one: until then someone has not joined yet
            return all(owned) and sum(len(o) for o in owned) == queues and frozenset().union(*owned) == every

        wait_until(settled, 60, "the three members share the queues")
        assert all(consumer.healthy for consumer in consumers), [c.describe().get("problems") for c in consumers]
        try:
            sent = {
                (MessageQueue(topic, "broker-a", queue), offset)
                for queue in range(queues)
                for bodies in batches
                for offset in producer.send(topic, "broker-a", bodies, queue_id=queue)[1]
            }
        finally:
            producer.close()

        def consumed() -> list[tuple[MessageQueue, int]]:
            java_seen = [(MessageQueue(m["topic"], m["broker"], m["queue"]), m["offset"]) for m in peer.consumed()]
            return [pair for recorder in recorders for pair in recorder.seen] + java_seen

        wait_until(lambda: set(consumed()) >= sent, timeout, "every message consumed")
        assert sorted(consumed()) == sorted(sent)  # each exactly once, across both languages
        assert all(recorder.seen for recorder in recorders) and peer.consumed()
    finally:
        for consumer in consumers:
            consumer.shutdown()
        peer.stop()
