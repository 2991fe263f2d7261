"""Several consumer processes against a real stub: joins, leaves, crashes, restarts, lost notifications.

After every step the group must settle with each queue owned by exactly one live consumer (by the consumers' own
reports) and every produced message consumed; duplicates are allowed only where a crash left work in flight.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from rocket_rebalance._proto.v1 import admin_pb2
from rocket_rebalance.admin.reads import consumer_connection, consumer_progress
from rocket_rebalance.lab.stub_cluster import LocalCluster, start_consume_process
from rocket_rebalance.lab.wait import wait_until
from rocket_rebalance.runtime.transport import TransportError
from rocket_rebalance.runtime.transport.wire import open_transport
from tests.e2e.conftest import APIS, inject

pytestmark = pytest.mark.e2e


def settle(cluster: LocalCluster, timeout: float = 30.0) -> None:
    wait_until(cluster.balanced, timeout)
    wait_until(cluster.caught_up, timeout)


def committed(cluster: LocalCluster) -> dict[tuple[str, int], int]:
    return {
        (r.mq.broker_name, r.mq.queue_id): r.consumer_offset for r in consumer_progress(cluster.address, cluster.group)
    }


@pytest.mark.parametrize("cluster", APIS, indirect=True)
def test_join_graceful_leave_and_kill(cluster: LocalCluster) -> None:
    for name in ("c1", "c2", "c3"):
        cluster.start_consumer(name)
    cluster.produce(300)
    settle(cluster)
    assert sorted(len(q) for q in cluster.ownership().values()) == [2, 3, 3]
    history = [committed(cluster)]

    cluster.start_consumer("c4")
    cluster.produce(200)
    settle(cluster)
    assert sorted(len(q) for q in cluster.ownership().values()) == [2, 2, 2, 2]
    history.append(committed(cluster))

    stopped = cluster.consumers["c2"].stop()
    assert stopped is not None and stopped["clean"] is True
    cluster.produce(200)
    settle(cluster)
    history.append(committed(cluster))

    cluster.consumers["c3"].kill()  # idle: nothing in flight, so nothing may be consumed twice
    cluster.produce(100)
    settle(cluster)
    history.append(committed(cluster))

    assert set(cluster.ownership()) == {"c1", "c4"}
    delivery = cluster.delivery()
    assert delivery.missing(cluster.max_offsets()) == 0
    assert delivery.duplicates == 0
    for earlier, later in zip(history, history[1:], strict=False):
        assert all(later[queue] >= offset for queue, offset in earlier.items()), "a committed offset went backwards"


@pytest.mark.parametrize("cluster", APIS, indirect=True)
def test_kill_while_consuming_redelivers_only_the_killed_consumers_work(cluster: LocalCluster) -> None:
    cluster.start_consumer("c1", "--work-ms", "20")
    victim = cluster.start_consumer("c2", "--work-ms", "20")
    wait_until(cluster.balanced)
    cluster.produce(400)
    wait_until(lambda: victim.record.exists() and len(victim.record.read_text().splitlines()) > 20)
    victims_queues = victim.owned(cluster.topic) or set()
    victim.kill()
    settle(cluster, timeout=60)
    delivery = cluster.delivery()
    assert delivery.missing(cluster.max_offsets()) == 0
    doubled = {f"{broker}:{queue}" for (_, broker, queue, _), count in delivery.counts.items() if count > 1}
    assert doubled <= victims_queues, "only queues the crashed consumer held may be re-delivered"


def test_stub_restart_loses_nothing(cluster: LocalCluster) -> None:
    for name in ("c1", "c2"):
        cluster.start_consumer(name)
    cluster.produce(200)
    settle(cluster)
    before = committed(cluster)
    cluster.stub.restart()
    after_restart = committed(cluster)
    assert after_restart == before, "offsets survive a restart of the stub"
    cluster.produce(200)
    settle(cluster, timeout=60)
    delivery = cluster.delivery()
    assert delivery.missing(cluster.max_offsets()) == 0
    assert delivery.duplicates == 0


def test_lost_notifications_are_made_up_by_the_periodic_round(cluster: LocalCluster) -> None:
    first = cluster.start_consumer("c1")
    wait_until(cluster.balanced)
    for broker in ("broker-a", "broker-b"):
        inject(cluster.stub.address, broker, admin_pb2.DROP_NOTIFICATIONS, "c1")
    rounds_before = len(first.events)
    cluster.start_consumer("c2")
    wait_until(cluster.balanced, timeout=30)  # c1 learns of c2 only from its 2 s periodic round
    assert len(first.events) > rounds_before
    assert sorted(len(q) for q in cluster.ownership().values()) == [4, 4]


def test_split_views_between_brokers_stay_safe(cluster: LocalCluster) -> None:
    cluster.start_consumer("c1")
    wait_until(cluster.balanced)
    # broker-a never records c2's heartbeats: the brokers disagree on the member list for good. Every consumer
    # reads the list from the same broker (the route's first), so they agree with each other all the same.
    inject(cluster.stub.address, "broker-a", admin_pb2.DROP_HEARTBEATS, "c2")
    c2 = cluster.start_consumer("c2")
    cluster.produce(200)
    wait_until(cluster.caught_up, timeout=30)
    wait_until(cluster.single_owners, timeout=30)
    assert not c2.owned(cluster.topic), "broker-a, which every consumer asks, does not list c2"
    delivery = cluster.delivery()
    assert delivery.missing(cluster.max_offsets()) == 0 and delivery.duplicates == 0


@pytest.mark.parametrize("cluster", ["push", "async-push"], indirect=True)
def test_orderly_consumers_never_process_one_queue_at_the_same_time(cluster: LocalCluster) -> None:
    for name in ("c1", "c2"):
        cluster.start_consumer(name, "--orderly", "--work-ms", "5")
    cluster.produce(300)
    cluster.start_consumer("c3", "--orderly", "--work-ms", "5")
    first = cluster.consumers["c1"]
    # c1 leaves while it consumes: on a busy machine the others may have consumed 100 before its first message
    wait_until(lambda: len(cluster.delivery().counts) > 100 and first.record.exists(), 60, "c1 consuming")
    first.stop()
    settle(cluster, timeout=60)
    spans: dict[tuple[str, int], list[tuple[float, float, str]]] = {}
    for consumer in cluster.consumers.values():
        for line in consumer.record.read_text().splitlines():
            item = json.loads(line)
            spans.setdefault((item["broker"], item["queue"]), []).append((item["t0"], item["t1"], item["client"]))
    for queue, intervals in spans.items():
        for start, end, owner in intervals:
            for other_start, other_end, other in intervals:
                if other != owner:
                    assert end <= other_start or other_end <= start, f"{queue}: {owner} and {other} at once"
    assert cluster.delivery().missing(cluster.max_offsets()) == 0


def test_broadcasting_gives_every_consumer_every_message(cluster: LocalCluster) -> None:
    for name in ("b1", "b2"):
        cluster.start_consumer(name, "--broadcast", "--offsets", str(cluster.work_dir / f"{name}-offsets.json"))
    wait_until(lambda: all(len(c.owned(cluster.topic) or ()) == 8 for c in cluster.live()))
    cluster.produce(160)
    wait_until(lambda: sum(cluster.delivery().counts.values()) >= 320, timeout=30)
    per_client: dict[str, int] = {}
    for consumer in cluster.consumers.values():
        per_client[consumer.client_id] = len(consumer.record.read_text().splitlines())
    assert per_client == {"b1": 160, "b2": 160}
    cluster.consumers["b1"].stop()  # shutdown persists the local offsets
    stored = json.loads((cluster.work_dir / "b1-offsets.json").read_text())["offsets"]
    # produce spreads 160 messages evenly: 20 on each of the 8 queues, all consumed.
    assert {(o["brokerName"], o["queueId"]): o["offset"] for o in stored if o["topic"] == cluster.topic} == {
        (mq.broker_name, mq.queue_id): 20 for mq in cluster.queues
    }


def test_live_demo_passes() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rocket_rebalance", "demo"],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "demo passed" in done.stdout and "missing 0, consumed twice 0" in done.stdout


def test_clones_sharing_a_client_id_consume_nothing_twice(cluster: LocalCluster, tmp_path: Path) -> None:
    """Two processes with one client ID: the stub lists the ID once per connection, so both clones see it twice,
    warn, and withhold its queues (the fence cannot tell them apart) until one leaves."""
    clones = []
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
        clones.append(
            start_consume_process(
                tmp_path / name, cluster.address, cluster.group, [cluster.topic], "clone", cluster.consumer_args
            )
        )
        if name == "first":
            wait_until(lambda: bool(clones[0].owned(cluster.topic)))
    first, second = clones
    other = cluster.start_consumer("other")
    try:
        wait_until(lambda: consumer_list(cluster) == ["clone", "clone", "other"])
        wait_until(lambda: first.owned(cluster.topic) == set() and bool(other.owned(cluster.topic)))
        rows = [row for row in consumer_connection(cluster.address, cluster.group) if row.client_id == "clone"]
        assert len(rows) == 4  # two brokers, two connections each: every connection shown

        def counts() -> Counter[tuple[str, str, int, int]]:
            found = cluster.delivery().counts
            for clone in clones:
                if clone.record.exists():
                    found.update(
                        (item["topic"], item["broker"], item["queue"], item["offset"])
                        for item in map(json.loads, clone.record.read_text(encoding="utf-8").splitlines())
                    )
            return found

        cluster.produce(200)
        wait_until(lambda: sum(counts().values()) > 0)
        assert second.stop() is not None
        wait_until(lambda: bool(first.owned(cluster.topic)))
        wait_until(lambda: sum(counts().values()) >= 200)
        assert sum(counts().values()) == 200 and max(counts().values()) == 1
        log = (tmp_path / "first" / "consumer-clone.log").read_text(encoding="utf-8")
        assert "client ID clone in TopicTest failing: used by 2 consumers" in log
        # the second clone joined a group where the ID was in use: it never held a queue of the topic (it did for a
        # round when a heartbeat sent before its stream opened counted as its registration, core rule L6)
        with second.lock:
            held = [e["queues"] for e in second.events if e.get("event") == "owned" and e.get("topic") == cluster.topic]
        assert not any(held)
    finally:
        for clone in clones:
            if clone.alive:
                clone.kill()


def consumer_list(cluster: LocalCluster) -> list[str]:
    transport = open_transport(cluster.address)
    try:
        return sorted(transport.consumer_list("broker-a", cluster.group))
    except TransportError:
        return []
    finally:
        transport.close()
