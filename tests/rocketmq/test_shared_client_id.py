"""Two Python consumers with one client ID (cloned containers, RocketMQ #1547/#2760) on a real RocketMQ: the
broker lists the ID once per connection and locks queues per ID, so only the consumers themselves can keep the
clones from consuming the same messages. With the fence they must: each clone warns, naming the ID, withholds the
ID's queues while it is shared, and the survivor takes them back once the clone leaves."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest

from rocket_rebalance.admin.reads import consumer_connection
from rocket_rebalance.lab.mixed_group import PYTHON_ARGS, MixedGroup, new_topic
from rocket_rebalance.lab.rocketmq import RocketMQCluster
from rocket_rebalance.lab.stub_cluster import ConsumerProcess, start_consume_process
from rocket_rebalance.lab.wait import wait_until
from rocket_rebalance.runtime.transport import TransportError

pytestmark = pytest.mark.rocketmq

CLONE = "127.0.0.1@clone"


def consumed(member: ConsumerProcess, topic: str) -> list[tuple[str, int, int]]:
    if not member.record.exists():
        return []
    lines = [json.loads(line) for line in member.record.read_text(encoding="utf-8").splitlines()]
    return [(d["broker"], d["queue"], d["offset"]) for d in lines if d["topic"] == topic]


def test_clones_sharing_a_client_id_never_consume_a_message_twice(rocketmq: RocketMQCluster, tmp_path: Path) -> None:
    topic = new_topic(rocketmq, "Clone", 4)
    group = MixedGroup(rocketmq, tmp_path / "group", "GID_clone", topic)
    clones: list[ConsumerProcess] = []

    def clone(name: str) -> ConsumerProcess:
        work_dir = tmp_path / name
        work_dir.mkdir()
        member = start_consume_process(work_dir, rocketmq.namesrv_address, group.group, [topic], CLONE, PYTHON_ARGS)
        clones.append(member)
        return member

    def members() -> list[str]:
        try:
            return sorted(group.transport.consumer_list(rocketmq.broker_names[0], group.group))
        except TransportError:  # "no consumer for this group" before the first heartbeat
            return []

    try:
        first = clone("first")
        other = group.python("other")
        with group.traffic(0.1):
            wait_until(lambda: members() == [CLONE, "127.0.0.1@other"] and bool(first.owned(topic)), 60, "2 members")
            second = clone("second")
            wait_until(lambda: members() == [CLONE, CLONE, "127.0.0.1@other"], 60, "the broker lists the ID twice")
            wait_until(lambda: first.owned(topic) == set() and not second.owned(topic), 60, "clones withhold")
            assert other.owned(topic)  # the other member keeps consuming its own share
            rows = [row for row in consumer_connection(rocketmq.namesrv_address, group.group) if row.client_id == CLONE]
            assert len(rows) == 2 * len(rocketmq.broker_names)  # every connection is shown, not one per ID
            time.sleep(3)  # traffic goes on while the ID is shared
            assert second.stop() is not None
            wait_until(lambda: bool(first.owned(topic)), 60, "the survivor takes its queues back")

        def counts() -> Counter[tuple[str, int, int]]:
            return Counter(consumed(first, topic) + consumed(second, topic) + consumed(other, topic))

        def missing() -> list[tuple[str, int, int]]:
            seen = counts()
            ends = group.max_offsets().items()
            return [(b, q, o) for (b, q), end in ends for o in range(end) if (b, q, o) not in seen]

        wait_until(lambda: not missing(), 60, "every message consumed")
        seen = counts()
        assert sum(seen.values()) > 0 and {key: n for key, n in seen.items() if n > 1} == {}
        for name in ("first", "second"):
            log = (tmp_path / name / "consumer-127.0.0.1_clone.log").read_text(encoding="utf-8")
            assert f"client ID {CLONE}" in log and "used by 2 consumers" in log, log[-2000:]
    finally:
        for member in clones:
            if member.alive:
                member.kill()
        group.close()
