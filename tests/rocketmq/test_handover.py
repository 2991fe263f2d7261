"""Handing queues over on a real RocketMQ: committed offsets across languages, orderly consumers of both kinds
under the broker's locks, and our fenced handover between Python consumers."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from rocket_rebalance.lab.mixed_group import MixedGroup, new_topic
from rocket_rebalance.lab.rocketmq import RocketMQCluster
from rocket_rebalance.lab.wait import wait_until

pytestmark = pytest.mark.rocketmq


def behind(group: MixedGroup) -> dict[tuple[str, int], tuple[int | None, int]]:
    """Queues whose stored offset (the broker's, QUERY_CONSUMER_OFFSET) is short of the queue's max offset."""
    ends = group.max_offsets()
    lagging: dict[tuple[str, int], tuple[int | None, int]] = {}
    for broker in group.cluster.broker_names:
        queues = [mq for mq in group.queues if mq.broker_name == broker]
        for mq, stored in group.transport.query_offsets(broker, group.group, queues).items():
            end = ends[(mq.broker_name, mq.queue_id)]
            if stored is None or stored < end:
                lagging[(mq.broker_name, mq.queue_id)] = (stored, end)
    return lagging


def wait_committed(group: MixedGroup, who: str) -> None:
    """Until every queue's stored offset reached its max offset; a failure names the queues still behind."""
    try:
        wait_until(lambda: not behind(group), 60, f"{who} committed everything")
    except TimeoutError as error:
        raise AssertionError(f"{error}; (stored, max) of the queues behind: {behind(group)}") from None


def offsets_by(group: MixedGroup, client: str) -> set[tuple[str, int, int]]:
    return {(d["broker"], d["queue"], d["offset"]) for d in group.deliveries() if d["client"] == client}


def test_committed_offsets_carry_over_between_java_and_python(rocketmq: RocketMQCluster, tmp_path: Path) -> None:
    group = MixedGroup(rocketmq, tmp_path, "GID_offsets", new_topic(rocketmq, "Offsets"))
    try:
        group.produce(6)
        python = group.python("py-a")
        wait_until(lambda: not group.missing(), 60, "py-a consumed everything")
        wait_committed(group, "py-a")
        assert python.stop() is not None

        group.produce(4)
        java = group.java("java-b")
        wait_until(lambda: not group.missing(), 60, "java-b consumed the rest")
        wait_committed(group, "java-b")
        taken_over = offsets_by(group, java.client_id)
        assert taken_over == {(b, q, o) for (b, q), end in group.max_offsets().items() for o in range(6, end)}
        assert java.stop()

        group.produce(3)
        group.python("py-c")
        wait_until(lambda: not group.missing(), 60, "py-c consumed the rest")
        back = offsets_by(group, "127.0.0.1@py-c")
        assert back == {(b, q, o) for (b, q), end in group.max_offsets().items() for o in range(10, end)}
        assert max(group.counts().values()) == 1  # graceful leaves: nothing consumed twice
    finally:
        group.close()


def overlaps(deliveries: list[dict[str, object]]) -> list[tuple[dict[str, object], dict[str, object]]]:
    """Pairs of deliveries of one queue by different consumers whose [t0, t1] intervals intersect."""
    by_queue: dict[tuple[object, object], list[dict[str, object]]] = defaultdict(list)
    for delivery in deliveries:
        by_queue[(delivery["broker"], delivery["queue"])].append(delivery)
    found = []
    for items in by_queue.values():
        for i, first in enumerate(items):
            for second in items[i + 1 :]:
                if first["client"] == second["client"]:
                    continue
                if float(first["t0"]) < float(second["t1"]) and float(second["t0"]) < float(first["t1"]):  # type: ignore[arg-type]
                    found.append((first, second))
    return found


def test_orderly_java_and_python_never_work_one_queue_at_once(rocketmq: RocketMQCluster, tmp_path: Path) -> None:
    group = MixedGroup(rocketmq, tmp_path, "GID_orderly", new_topic(rocketmq, "Orderly", 4))
    try:
        group.python("py-1", "--orderly", "--work-ms", "5")
        group.java("java-1", orderly=True, work_ms=5)
        with group.traffic(0.2):
            wait_until(group.settled, 60, "two orderly members settle")
            group.python("py-2", "--orderly", "--work-ms", "5")
            group.java("java-2", orderly=True, work_ms=5)
            wait_until(group.settled, 60, "four orderly members settle")
            assert group.python_members["127.0.0.1@py-1"].stop() is not None
            assert group.java_members["127.0.0.1@java-1"].stop()
            wait_until(group.settled, 60, "two orderly members settle again")
        wait_until(lambda: not group.missing(), 60, "every message consumed")
        deliveries = group.deliveries()
        assert {d["client"] for d in deliveries} >= {"127.0.0.1@py-2", "127.0.0.1@java-2"}
        assert overlaps(deliveries) == []
    finally:
        group.close()


@pytest.mark.parametrize("api", ["push", "async-push", "pull", "async-pull"])
def test_fenced_handover_redelivers_nothing_on_graceful_moves(
    rocketmq: RocketMQCluster, tmp_path: Path, api: str
) -> None:
    """Python consumers under steady traffic, with work in flight: joins and graceful leaves re-deliver nothing
    (Java's handover re-delivers what was in flight: with ``--no-fence`` this test fails), whichever of our four
    consumers the members are (``consume --api``)."""
    group = MixedGroup(rocketmq, tmp_path, f"GID_fence_{api}", new_topic(rocketmq, f"Fence{api.replace('-', '')}", 4))
    try:
        for name in ("py-1", "py-2", "py-3"):
            group.python(name, "--work-ms", "20", "--api", api)
        with group.traffic(0.1):
            wait_until(group.settled, 60, "three members settle")
            group.python("py-4", "--work-ms", "20", "--api", api)
            wait_until(group.settled, 60, "a join settles")
            assert group.python_members["127.0.0.1@py-2"].stop() is not None
            wait_until(group.settled, 60, "a leave settles")
            assert group.python_members["127.0.0.1@py-1"].stop() is not None
            wait_until(group.settled, 60, "another leave settles")
        wait_until(lambda: not group.missing(), 60, "every message consumed")
        twice = {key: count for key, count in group.counts().items() if count > 1}
        assert twice == {}
        assert len({d["client"] for d in group.deliveries()}) == 4
    finally:
        group.close()
