"""``rocket-rebalance snapshot`` against a real stub process and real consumer processes (gRPC wire): the tables
say what the group is and what each consumer holds, a group whose consumers left is recorded as stopped with its
lag (the snapshot stays whole: exit status 0), and a consumer that stops answering makes the snapshot partial (exit
status 3)."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from rocket_rebalance.lab.stub_cluster import LocalCluster, start_consume_process
from rocket_rebalance.lab.wait import wait_until
from rocket_rebalance.model import MessageQueue
from rocket_rebalance.pipeline.audit import member_subscriptions, subscription_findings
from rocket_rebalance.runtime.transport.wire import open_transport
from tests.commands.conftest import RunCli

pytestmark = pytest.mark.e2e


def table(out: Path, name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()]


def listed(cluster: LocalCluster, group: str) -> list[str]:
    """The group's members as the brokers list them."""
    transport = open_transport(cluster.address)
    try:
        return [cid for broker in ("broker-a", "broker-b") for cid in transport.consumer_list(broker, group)]
    finally:
        transport.close()


def offsets_stored(cluster: LocalCluster, group: str, topic: str) -> bool:
    """Whether the group stored an offset for queue 0 of ``topic`` on each broker: consumers store one at a persist
    interval after they took the queue (or when they give it up), which can come after a retry queue's topic was
    all consumed, or after a consumer was told its queues."""
    transport = open_transport(cluster.address)
    try:
        queues = [MessageQueue(topic, broker, 0) for broker in ("broker-a", "broker-b")]
        return all(
            offset is not None
            for queue in queues
            for offset in transport.query_offsets(queue.broker_name, group, [queue]).values()
        )
    finally:
        transport.close()


def test_snapshot_of_a_stub_group(tmp_path: Path, run_cli: RunCli) -> None:
    out = tmp_path / "snap"
    with LocalCluster(tmp_path / "cluster", group="GID_snap") as cluster:
        gone = start_consume_process(cluster.work_dir, cluster.address, "GID_gone", [cluster.topic], "127.0.0.1@gone")
        first = cluster.start_consumer("127.0.0.1@s1")
        cluster.start_consumer("127.0.0.1@s2", "--strategy", "AVG")
        wait_until(lambda: offsets_stored(cluster, "GID_gone", cluster.topic))  # else it leaves no trace
        gone.stop()  # leaves: GID_gone keeps its stored offsets and has no consumer
        wait_until(lambda: not listed(cluster, "GID_gone"))  # the stub may see the stream end a little later
        wait_until(cluster.balanced)
        cluster.produce(40)
        wait_until(cluster.caught_up)
        wait_until(lambda: offsets_stored(cluster, "GID_snap", "%RETRY%GID_snap"))

        args = ("snapshot", "-n", cluster.address, "--out", out, "--concurrency", "2", "--settle", "1")
        done = run_cli(*args, check=False)
        assert done.returncode == 0, done.stderr
        meta = json.loads((out / "_snapshot.json").read_text(encoding="utf-8"))
        assert meta["wire"] == "grpc" and meta["partial"] is False and meta["counts"]["rejected"] == 0
        summary = json.loads(done.stdout)
        assert summary["groups_read"] == 2 and summary["partial"] is False and summary["rows"] == meta["counts"]
        assert table(out, "rejected") == [] and meta["groups_stopped"] == 1
        # GID_gone left before the 40 messages: a backlog, read again a second later, that did not grow
        assert table(out, "stopped") == [
            {"group": "GID_gone", "topic": "%RETRY%GID_gone", "lag": 0, "later_lag": 0},
            {"group": "GID_gone", "topic": cluster.topic, "lag": 40, "later_lag": 40},
        ]
        assert meta["settle"] == {"seconds": 1.0, "held": [], "moving": [], "settled": []}  # GID_snap: read once
        assert "read again in 1 s" in done.stderr
        members = sorted((m["client_id"], m["reported"], m["strategy"], m["language"]) for m in table(out, "members"))
        assert members == [("127.0.0.1@s1", True, "AVG", "PYTHON"), ("127.0.0.1@s2", True, "AVG", "PYTHON")]
        assert table(out, "groups") == [
            {"group": "GID_snap", "strategy": "AVG", "message_model": "CLUSTERING", "options": None}
        ]
        assert table(out, "subscriptions") == [
            {"group": "GID_snap", "topic": "%RETRY%GID_snap"},
            {"group": "GID_snap", "topic": cluster.topic},
        ]
        routes = sorted((r["topic"], r["broker"], r["read_queue_nums"]) for r in table(out, "routes"))
        assert [route for route in routes if route[0] == cluster.topic] == [
            (cluster.topic, "broker-a", 4),
            (cluster.topic, "broker-b", 4),
        ]
        assert {route[0] for route in routes} == {cluster.topic, "%RETRY%GID_snap"}, routes
        observed: dict[str, set[str]] = {"127.0.0.1@s1": set(), "127.0.0.1@s2": set()}
        for row in table(out, "observed"):
            observed[row["client_id"]].add(f"{row['broker']}:{row['queue_id']}")
        assert observed == cluster.ownership() == cluster.expected_ownership()
        maxima = cluster.max_offsets()
        assert {
            (r["topic"], r["broker"], r["queue_id"]): (r["max_offset"], r["committed_offset"])
            for r in table(out, "offsets")
            if r["group"] == "GID_snap"
        } == {
            **{queue: (top, top) for queue, top in maxima.items()},
            **{("%RETRY%GID_snap", broker, 0): (0, 0) for broker in ("broker-a", "broker-b")},
        }

        # Only the group asked for, and one consumer that no longer answers its running-info request.
        first.process.send_signal(signal.SIGSTOP)
        try:
            done = run_cli(
                "snapshot", "-n", cluster.address, "--out", out, "--group", "GID_s*", "--timeout", "1", check=False
            )
        finally:
            first.process.send_signal(signal.SIGCONT)
        assert done.returncode == 3, done.stderr
        rejected = table(out, "rejected")
        assert [(r["group"], r["client_id"]) for r in rejected] == [("GID_snap", "127.0.0.1@s1")]
        assert rejected[0]["reason"].startswith("timeout"), rejected
        meta = json.loads((out / "_snapshot.json").read_text(encoding="utf-8"))
        assert meta["skipped"]["group_filter"] == ["GID_gone"]
        assert {m["client_id"]: m["reported"] for m in table(out, "members")} == {
            "127.0.0.1@s1": False,
            "127.0.0.1@s2": True,
        }
        # the stopped consumer's subscriptions are still recorded: the stub lists each member's own per connection
        assert {row["client_id"] for row in table(out, "member_subscriptions")} == {"127.0.0.1@s1", "127.0.0.1@s2"}


def test_snapshot_records_each_members_subscriptions_and_audit_names_what_is_lost(
    tmp_path: Path, run_cli: RunCli
) -> None:
    """One member subscribes TagA, the other '*': the snapshot records each member's own expression, and the audit's
    finding names both members and that the TagA member never receives anything else."""
    out = tmp_path / "snap"
    with LocalCluster(tmp_path / "cluster", group="GID_subs") as cluster:
        cluster.start_consumer("127.0.0.1@tagged", "--tags", "TagA")
        cluster.start_consumer("127.0.0.1@all")
        wait_until(cluster.balanced)
        run_cli("snapshot", "-n", cluster.address, "--out", out)
        rows = {
            (r["client_id"], r["topic"]): (r["expression_type"], r["expression"])
            for r in table(out, "member_subscriptions")
        }
        assert rows == {
            ("127.0.0.1@all", cluster.topic): ("TAG", "*"),
            ("127.0.0.1@all", "%RETRY%GID_subs"): ("TAG", "*"),
            ("127.0.0.1@tagged", cluster.topic): ("TAG", "TagA"),
            ("127.0.0.1@tagged", "%RETRY%GID_subs"): ("TAG", "*"),
        }
    recorded = member_subscriptions(out)
    assert recorded is not None
    (finding,) = subscription_findings(recorded)
    assert (finding["group"], finding["topic"]) == ("GID_subs", cluster.topic)
    assert finding["where"] == "127.0.0.1@all, 127.0.0.1@tagged"
    assert finding["reason"].startswith(
        "subscribed as '*' by 127.0.0.1@all; as 'TagA' by 127.0.0.1@tagged; "
        "127.0.0.1@tagged never receives anything but its own tags: "
    )
