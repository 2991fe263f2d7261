"""Tag subscriptions end to end on the stub (which filters by tags as a broker does), the client-side re-filter
after a broker's hash-code filter, and the start-up check of expressions the wire cannot filter by."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest

from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.settings import SubscriptionMismatchError
from rocket_rebalance.runtime.transport import (
    GRPC_SCHEME,
    GroupRegistration,
    Message,
    SubscriptionRefusedError,
)
from rocket_rebalance.runtime.transport.grpc import GrpcTransport
from rocket_rebalance.subscription import SQL92, ExpressionError, SubscriptionExpression
from tests.runtime.test_consumer import FAST, wait_for
from tests.stub.conftest import StartStub, start_stub

__all__ = ["start_stub"]  # the fixture, used by name

TAGS = ("A", "B", "C", "Aa", "BB", "")


def produce_tagged(address: str, per_tag: int) -> None:
    """``per_tag`` messages of each tag in TAGS on every queue of TopicTest."""
    transport = GrpcTransport(address)
    try:
        for broker in ("broker-a", "broker-b"):
            for queue_id in range(4):
                for tag in TAGS:
                    transport.send("TopicTest", broker, [tag.encode() or b"-"] * per_tag, queue_id, tags=tag)
    finally:
        transport.close()


class HashOnlyBroker(GrpcTransport):
    """The stub's transport, registering ``*`` at the stub whatever the subscription: the stub then hands out
    every message, as a broker hands out those whose tag merely shares a hash code with a subscribed one."""

    def heartbeat(self, broker: str, client_id: str, group: GroupRegistration) -> None:
        super().heartbeat(broker, client_id, replace(group, expressions={}))


class Taken:
    def __init__(self) -> None:
        self.tags: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, batch: list[Message]) -> None:
        with self.lock:
            self.tags.update(m.tags for m in batch)


def consumer(address: str, taken: Taken, **extra: Any) -> PushConsumer:
    return PushConsumer(address, "GID_tags", listener=taken, **{"client_id": "c1", **FAST, **extra})


def committed(address: str) -> int:
    transport = GrpcTransport(address)
    try:
        rows = transport.consumer_progress("GID_tags", "TopicTest", owners=False)
    finally:
        transport.close()
    return sum(row.consumer_offset for row in rows)


def test_a_tag_expression_consumes_exactly_its_tags_and_commits_past_the_others(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    produce_tagged(address, 3)
    taken = Taken()
    c = consumer(address, taken, topics={"TopicTest": " A || B ||"})
    c.start()
    try:
        wait_for(lambda: sum(taken.tags.values()) >= 48 and committed(address) == 8 * 3 * len(TAGS))
        assert taken.tags == Counter({"A": 24, "B": 24})
    finally:
        c.shutdown(10)


def test_messages_sharing_a_hash_code_with_a_subscribed_tag_are_filtered_again_and_still_move_offsets(
    start_stub: StartStub,
) -> None:
    address = GRPC_SCHEME + start_stub().address
    produce_tagged(address, 2)
    taken = Taken()
    c = consumer(address, taken, topics={"TopicTest": "Aa"}, transport=HashOnlyBroker(address))
    c.start()
    try:
        wait_for(lambda: committed(address) == 8 * 2 * len(TAGS))
        assert taken.tags == Counter({"Aa": 16})
        assert c.describe()["filtered"] == 8 * 2 * (len(TAGS) - 1)
    finally:
        c.shutdown(10)


def test_subscribe_gives_a_topic_its_expression_and_refuses_one_no_consumer_can_use(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    c = consumer(address, Taken())
    c.subscribe("TopicTest", "A||B")
    assert c.subscriptions == {"TopicTest": SubscriptionExpression("A||B")}
    with pytest.raises(ExpressionError, match="names no tag"):
        c.subscribe("TopicTest", " || ")
    with pytest.raises(ExpressionError, match="expression type"):
        c.subscribe("TopicTest", "a > 1", "sql")
    c.transport.close()


def test_the_stub_wire_refuses_sql92_at_start_in_one_line(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    c = consumer(address, Taken())
    c.subscribe("TopicTest", "a > 5", SQL92)
    with pytest.raises(SubscriptionRefusedError) as refused:
        c.start()
    assert "tags only" in str(refused.value) and "\n" not in str(refused.value)
    c.transport.close()


def test_a_member_whose_group_subscribes_otherwise_at_the_broker_says_so(start_stub: StartStub) -> None:
    """Issue 20, item 2: a broker filters a group's pulls by one subscription table, written by the members'
    heartbeats; a member whose expression differs from the table's hears of it (health, on_error), by topic."""
    address = GRPC_SCHEME + start_stub().address
    errors: list[tuple[str, Exception]] = []
    other = consumer(address, Taken(), topics={"TopicTest": "A || B"}, client_id="c0")
    other.start()
    try:
        wait_for(lambda: bool(other.owned_queues().get("TopicTest")))
        assert not [kind for kind in other.describe()["problems"] if "subscription" in kind]
        mine = consumer(address, Taken(), topics={"TopicTest": "C"}, on_error=lambda k, e: errors.append((k, e)))
        mine.start()
        try:
            wait_for(lambda: any(isinstance(e, SubscriptionMismatchError) for _, e in errors))
            said = next(str(e) for _, e in errors if isinstance(e, SubscriptionMismatchError))
            assert "TopicTest" in said and "'C'" in said and "GID_tags" in said, said
            assert any("subscription of TopicTest" in kind for kind in mine.describe()["problems"])
        finally:
            mine.shutdown(10)
    finally:
        other.shutdown(10)


def test_members_that_subscribe_alike_report_nothing(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    errors: list[tuple[str, Exception]] = []
    first = consumer(address, Taken(), topics={"TopicTest": "A || B"}, client_id="c0")
    second = consumer(address, Taken(), topics={"TopicTest": "B||A"}, on_error=lambda k, e: errors.append((k, e)))
    first.start()
    second.start()
    try:
        wait_for(lambda: bool(first.owned_queues().get("TopicTest")) and bool(second.owned_queues().get("TopicTest")))
        assert not [e for _, e in errors if isinstance(e, SubscriptionMismatchError)]
    finally:
        first.shutdown(10)
        second.shutdown(10)
