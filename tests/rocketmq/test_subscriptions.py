"""Tag and SQL92 subscriptions on a real RocketMQ 5.3.3, in a group of two Python consumers and one Java consumer
(Peer.java) subscribing alike: every matching message is consumed exactly once across the group and no other. A
broker without ``enablePropertyFilter`` refuses an SQL92 consumer at start in one line naming the broker and the
setting; a malformed SQL92 expression is one line naming the expression. A member whose group subscribes otherwise
at the broker says so."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocket_rebalance.lab.mixed_group import new_topic
from rocket_rebalance.lab.rocketmq import JavaPeer, RocketMQCluster
from rocket_rebalance.lab.wait import wait_until
from rocket_rebalance.model import ConsumeFromWhere
from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.settings import SubscriptionMismatchError
from rocket_rebalance.runtime.transport import Message, SubscriptionRefusedError
from rocket_rebalance.subscription import SQL92, SubscriptionExpression
from tests.rocketmq.conftest import start_cluster

pytestmark = pytest.mark.rocketmq

PER_KIND = 3  # messages of each kind (A, B, C) on every queue


@pytest.fixture(scope="module")
def filtering_rocketmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RocketMQCluster]:
    """One broker with ``enablePropertyFilter=true``: SQL92 subscriptions need it."""
    cluster = start_cluster(
        tmp_path_factory.mktemp("rocketmq-sql"), ("broker-a",), broker_settings={"enablePropertyFilter": "true"}
    )
    yield cluster
    cluster.stop()


class Taken:
    def __init__(self) -> None:
        self.ids: Counter[str] = Counter()
        self.tags: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, batch: list[Message]) -> None:
        with self.lock:
            self.ids.update(m.msg_id for m in batch)
            self.tags.update(m.tags for m in batch)


def produce(cluster: RocketMQCluster, topic: str) -> int:
    """PER_KIND messages tagged A, B and C (property ``kind`` alike) on every queue; how many queues."""
    transport = cluster.transport()
    queues = 0
    try:
        for data in transport.route(topic).queue_datas:
            for queue_id in range(data.write_queue_nums):
                queues += 1
                for kind in "ABC":
                    body = [kind.encode()] * PER_KIND
                    transport.send(topic, data.broker_name, body, queue_id, tags=kind, properties={"kind": kind})
    finally:
        transport.close()
    return queues


def run_group(
    cluster: RocketMQCluster, tmp_path: Path, name: str, expression: SubscriptionExpression, java: dict[str, str]
) -> None:
    topic = new_topic(cluster, name, 4)
    group = f"GID_{name}"
    taken = Taken()
    consumers = [
        PushConsumer(
            cluster.namesrv_address,
            group,
            topics={topic: expression},
            listener=taken,
            client_id=f"127.0.0.1@py-{index}",
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            rebalance_interval=1.0,
            persist_interval=0.5,
        )
        for index in (1, 2)
    ]
    assert cluster.lib is not None
    peer = JavaPeer(cluster.lib, tmp_path, cluster.namesrv_address, group, f"java-{name}", [topic], **java)
    try:
        for consumer in consumers:
            consumer.start()
        queues = len(cluster.transport().route(topic).queue_datas) * 4

        def settled() -> bool:
            owned = [q for c in consumers for q in c.owned_queues().get(topic, ())]
            java_owned = peer.owned(topic)
            if not java_owned or any(not c.owned_queues().get(topic) for c in consumers):
                return False  # every member, the Java one too (its JVM starts last), must hold a share
            return (
                len(owned) + len(java_owned) == queues == len({(q.broker_name, q.queue_id) for q in owned} | java_owned)
            )

        wait_until(settled, 90, "each queue has one owner across the three members")
        produce(cluster, topic)
        expected = queues * PER_KIND * 2

        def java_ids() -> Counter[str]:
            return Counter(m["msgId"] for m in peer.consumed())

        wait_until(lambda: sum(taken.ids.values()) + sum(java_ids().values()) >= expected, 90, "A and B consumed")
        both = taken.ids + java_ids()
        assert len(both) == expected and set(both.values()) == {1}, both.most_common(3)
        java_tags = Counter(m["tags"] for m in peer.consumed())
        assert set(taken.tags + java_tags) == {"A", "B"}
        assert sum(taken.tags.values()) > 0 and sum(java_tags.values()) > 0  # all three consumed a share
    finally:
        for consumer in consumers:
            consumer.shutdown(15)
        peer.stop()


def test_a_tag_expression_shared_with_a_java_member(rocketmq: RocketMQCluster, tmp_path: Path) -> None:
    run_group(rocketmq, tmp_path, "Tags", SubscriptionExpression("A || B"), {"tags": "A || B"})


def test_an_sql92_expression_shared_with_a_java_member(filtering_rocketmq: RocketMQCluster, tmp_path: Path) -> None:
    sql = "kind = 'A' OR kind = 'B'"
    run_group(filtering_rocketmq, tmp_path, "Sql", SubscriptionExpression(sql, SQL92), {"sql": sql})


def test_a_broker_without_property_filtering_refuses_sql92_at_start(rocketmq: RocketMQCluster) -> None:
    topic = new_topic(rocketmq, "SqlRefused", 2)
    consumer = PushConsumer(
        rocketmq.namesrv_address, "GID_sql_refused", topics={topic: SubscriptionExpression("a > 5", SQL92)}
    )
    with pytest.raises(SubscriptionRefusedError) as refused:
        consumer.start()
    text = str(refused.value)
    assert "enablePropertyFilter=true" in text and "broker-" in text and "\n" not in text
    consumer.transport.close()


def test_a_malformed_sql92_expression_is_named(filtering_rocketmq: RocketMQCluster) -> None:
    topic = new_topic(filtering_rocketmq, "SqlMalformed", 2)
    bad = "kind = = 'A'"
    consumer = PushConsumer(
        filtering_rocketmq.namesrv_address, "GID_sql_bad", topics={topic: SubscriptionExpression(bad, SQL92)}
    )
    with pytest.raises(SubscriptionRefusedError) as refused:
        consumer.start()
    assert repr(bad) in str(refused.value) and "\n" not in str(refused.value)
    consumer.transport.close()


def test_a_member_beside_a_java_member_that_subscribes_otherwise_says_so(
    rocketmq: RocketMQCluster, tmp_path: Path
) -> None:
    """Issue 20, item 2 on the real broker: the Java member (started last, so its subscription version is the
    newest and the broker keeps its row) subscribes everything, ours ``A``; ours names the topic and both."""
    topic = new_topic(rocketmq, "Mismatch", 2)
    group = "GID_Mismatch"
    errors: list[tuple[str, Exception]] = []
    ours = PushConsumer(
        rocketmq.namesrv_address,
        group,
        topics={topic: "A"},
        listener=Taken(),
        client_id="127.0.0.1@py-mismatch",
        heartbeat_interval=1.0,
        on_error=lambda kind, error: errors.append((kind, error)),
    )
    assert rocketmq.lib is not None
    peer = JavaPeer(rocketmq.lib, tmp_path, rocketmq.namesrv_address, group, "java-mismatch", [topic])
    try:
        ours.start()
        wait_until(lambda: bool(peer.owned(topic)), 90, "the Java member holds a share")
        wait_until(
            lambda: any(isinstance(e, SubscriptionMismatchError) for _, e in errors), 30, "the mismatch is named"
        )
        said = next(str(e) for _, e in errors if isinstance(e, SubscriptionMismatchError))
        assert topic in said and "'*'" in said and "'A'" in said and group in said, said
        assert f"subscription of {topic}" in ours.describe()["problems"]
    finally:
        ours.shutdown(15)
        peer.stop()
