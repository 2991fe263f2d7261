"""``describe()["rebalances"]``: the last rounds as an operator reads them, on a real consumer against a real
in-process stub: a round whose locks the broker refuses, and rounds whose member list cannot be read."""

from __future__ import annotations

import json
from typing import Any

from rocket_rebalance.lab.wait import wait_until
from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.history import member_digest
from rocket_rebalance.runtime.transport import GRPC_SCHEME
from tests.stub.conftest import StartStub
from tests.stub.harness import connect_clients, lock

GROUP = "GID_history"


def _rounds(consumer: PushConsumer) -> list[dict[str, Any]]:
    described = consumer.describe()
    json.dumps(described)  # what the SIGUSR1 dump writes: it must serialise as it is
    rounds = described["rebalances"]
    assert isinstance(rounds, list)
    return rounds


def test_a_round_whose_locks_are_refused_shows_the_refusal_and_waits_unapplied(start_stub: StartStub) -> None:
    server = start_stub()
    with connect_clients(server.address) as clients:
        assert lock(clients, "broker-a", GROUP, "127.0.0.1@holder", 0) == [0]  # a holder we never saw listed
    consumer = PushConsumer(
        GRPC_SCHEME + server.address, GROUP, topics=["TopicTest"], listener=lambda batch: None, client_id="me"
    )
    consumer.start()
    try:
        wait_until(lambda: len(consumer.owned_queues().get("TopicTest", ())) == 8, 15, "all 8 queues allocated")

        def refused() -> bool:
            return any("lock refused at broker-a" in r["problems"] for r in _rounds(consumer))

        def first_started() -> bool:  # on a busy machine its other queues start after the refusal is shown
            return _rounds(consumer)[0]["steps_ms"]["queues started"] is not None

        wait_until(refused, 15, "a round shows the refused lock")
        wait_until(first_started, 15, "the first round's other queues started")
        first = _rounds(consumer)[0]
        assert first["trigger"] == "start" and first["round"] == 1
        # TopicTest's 8 (the retry topic's are there too when its route came while the round waited)
        assert sum("topic=TopicTest," in mq for mq in first["gained"]) == 8 and first["lost"] == []
        assert first["members"]["TopicTest"] == {"count": 1, "digest": member_digest(["me"])}
        assert first["failed"] and first["steps_ms"]["table applied"] is None
        assert first["steps_ms"]["member lists"] is not None and first["steps_ms"]["queues started"] is not None

        def waiting_for_the_held_queue_alone() -> bool:  # on a busy machine the first rounds wait for others too
            last = _rounds(consumer)[-1]
            return last["steps_ms"]["table applied"] is None and last["waiting"] == 1  # queue 0 of broker-a

        wait_until(waiting_for_the_held_queue_alone, 15, "a round waits for the held queue alone")
        wait_until(
            lambda: any(r["retry_reason"] == "lock refused at broker-a" for r in _rounds(consumer)), 15, "a retry round"
        )
    finally:
        consumer.shutdown()


def test_rounds_whose_member_list_cannot_be_read_show_it(start_stub: StartStub) -> None:
    server = start_stub()
    consumer = PushConsumer(
        GRPC_SCHEME + server.address,
        GROUP,
        topics=["TopicTest"],
        listener=lambda batch: None,
        client_id="me",
        rebalance_interval=0.5,
    )
    consumer.start()
    try:
        wait_until(lambda: len(consumer.owned_queues().get("TopicTest", ())) == 8, 15, "all 8 queues allocated")

        def applied() -> list[dict[str, Any]]:  # the last round may be a periodic one still under way
            return [r for r in _rounds(consumer) if r["steps_ms"]["table applied"] is not None]

        wait_until(lambda: bool(applied()), 15, "a round that applied its table")
        assert not applied()[0]["failed"]
        server.stop(grace=0.1)  # the broker is gone: its member list cannot be read

        def unread() -> list[dict[str, Any]]:
            return [r for r in _rounds(consumer) if r["members"].get("TopicTest", 0) is None]

        wait_until(lambda: bool(unread()), 15, "a round whose member list was not read")
        failed = unread()[0]
        # not read: its request failed, or it was not asked since the lost connection no longer lists us (L6)
        assert failed["failed"] and any(p.startswith("member list of TopicTest not read") for p in failed["problems"])
        assert failed["gained"] == failed["lost"] == []  # the queues are kept meanwhile (R3)
        assert len(consumer.owned_queues()["TopicTest"]) == 8
    finally:
        consumer.shutdown(timeout=2)
