"""What ``consume`` shows an operator: the rebalance history in the SIGUSR1 dump, and ``--log-format json``."""

from __future__ import annotations

import json
import signal
from typing import Any

import pytest

from rocket_rebalance.lab.stub_cluster import LocalCluster
from rocket_rebalance.lab.wait import wait_until
from rocket_rebalance.model import retry_topic

pytestmark = pytest.mark.e2e


def test_the_sigusr1_dump_holds_the_rebalances_and_the_log_is_one_json_object_a_line(cluster: LocalCluster) -> None:
    first = cluster.start_consumer("c1", "--log-format", "json", "--log-level", "INFO")
    wait_until(lambda: first.owned(cluster.topic) is not None and len(first.owned(cluster.topic) or ()) == 8, 30)
    # and its retry topic's queues: their route comes after the first heartbeat creates the topic, and on a busy
    # machine that round (a "route change") could still be waiting when c2 joins and name the join's round
    wait_until(lambda: bool(first.owned(retry_topic(cluster.group))), 30, "c1 holds its retry topic too")
    second = cluster.start_consumer("c2")
    wait_until(cluster.balanced, 30, "the two consumers share the queues")

    def states() -> list[dict[str, Any]]:
        with first.lock:
            return [e for e in first.events if e.get("event") == "state"]

    first.process.send_signal(signal.SIGUSR1)
    wait_until(lambda: bool(states()), 15, "the state dump")
    rounds = states()[-1]["rebalances"]

    def of_topic(queues: list[str]) -> list[str]:  # the retry topic's queues move too, in whichever round
        return [mq for mq in queues if f"topic={cluster.topic}," in mq]

    assert rounds[0]["trigger"] == "start" and len(of_topic(rounds[0]["gained"])) == 8
    join = next(r for r in rounds if of_topic(r["lost"]))  # c2 joined: c1 gave up half its queues
    assert join["trigger"] in ("notify", "timer") and len(of_topic(join["lost"])) == 4
    assert join["members"][cluster.topic]["count"] == 2
    assert join["steps_ms"]["table applied"] is not None

    first.stop()
    second.stop()
    lines = (cluster.work_dir / "consumer-c1.log").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]  # every line a JSON object, whole
    assert all({"at", "level", "logger", "thread", "message"} <= record.keys() for record in records)
    [stacks] = [record["stacks"] for record in records if record["message"] == "thread stacks"]
    assert any(name.startswith("rebalance-service") for name in stacks)  # faulthandler's dump, as JSON
