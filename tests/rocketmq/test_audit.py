"""From a live RocketMQ cluster to the audit's answer, as an operator's cron job runs it: ``rocket-rebalance
snapshot`` then ``rocket-rebalance audit``, both as real processes, against the real NameServer and brokers with
Java and Python consumers in three groups.

- a healthy group (a Java and a Python consumer, both AVG): nothing to find;
- a planted disagreement: a Python consumer that allocates BY_CIRCLE in a group whose other members (a Java
  consumer among them) use AVG. What it holds is computed here independently from each member's own strategy,
  and the audit must report exactly the queues held twice, the queues nobody holds and that consumer;
- a client ID shared by two processes (clones): the broker lists the ID twice; the audit must report the shared
  ID (its computed queues owned twice) and that its queues are observed held by nobody (the clones withhold them,
  core rule L6), and nothing about the other member.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rocket_rebalance.lab.mixed_group import PYTHON_ARGS, MixedGroup, new_topic
from rocket_rebalance.lab.rocketmq import JavaPeer, RocketMQCluster
from rocket_rebalance.lab.stub_cluster import ConsumerProcess, start_consume_process
from rocket_rebalance.lab.wait import wait_until
from rocket_rebalance.model import MessageQueue, prepare_rebalance_input, retry_topic
from rocket_rebalance.pipeline.audit import LOSS
from rocket_rebalance.plan import plan
from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.transport import TransportError
from rocket_rebalance.strategies import create_strategy

# a bound for hangs, not a measure: a cluster, Java and Python members, a snapshot and a Spark audit, which took
# more than 300 s together in a CI run beside another at load 20
pytestmark = [pytest.mark.rocketmq, pytest.mark.spark, pytest.mark.timeout(900)]

CLONE = "127.0.0.1@auditclone"


def run_cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    return subprocess.run(
        [sys.executable, "-m", "rocket_rebalance", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def own_share(group: MixedGroup, strategies: dict[str, str]) -> dict[str, set[tuple[str, int]]]:
    """What each member computes for itself with its own strategy over the live members."""
    ready = prepare_rebalance_input(group.queues, list(strategies))
    shares: dict[str, set[tuple[str, int]]] = {}
    for cid, name in strategies.items():
        mine = plan(create_strategy(name), group.group, ready.mq_all, ready.cid_all)[cid]
        shares[cid] = {(mq.broker_name, mq.queue_id) for mq in mine}
    return shares


def listed(group: MixedGroup) -> list[str]:
    try:
        return sorted(group.transport.consumer_list(group.cluster.broker_names[0], group.group))
    except TransportError:  # no heartbeat yet
        return []


def test_snapshot_then_audit_finds_exactly_the_shared_id_and_the_planted_disagreement(
    rocketmq: RocketMQCluster, tmp_path: Path
) -> None:
    prefix = f"GID_audit{int(time.time() * 1000) % 1_000_000}"
    healthy = MixedGroup(rocketmq, tmp_path / "healthy", f"{prefix}_healthy", new_topic(rocketmq, "AuditOk", 2))
    split = MixedGroup(rocketmq, tmp_path / "split", f"{prefix}_split", new_topic(rocketmq, "AuditSplit", 4))
    cloned = MixedGroup(rocketmq, tmp_path / "cloned", f"{prefix}_cloned", new_topic(rocketmq, "AuditClone", 2))
    groups = (healthy, split, cloned)
    clones: list[ConsumerProcess] = []
    try:
        healthy.java("okjava")
        healthy.python("okpy")
        java = split.java("splitjava")
        split.python("splitavg")
        rogue = split.python("splitrogue", strategy="AVG_BY_CIRCLE")
        cloned.python("single")
        for name in ("first", "second"):
            work_dir = tmp_path / name
            work_dir.mkdir()
            args = (*PYTHON_ARGS, "--strategy", "AVG")
            clones.append(
                start_consume_process(work_dir, rocketmq.namesrv_address, cloned.group, [cloned.topic], CLONE, args)
            )
        strategies = {java.client_id: "AVG", "127.0.0.1@splitavg": "AVG", rogue.client_id: "AVG_BY_CIRCLE"}
        held = own_share(split, strategies)
        # the audit reads the retry topic too: a snapshot taken while it still moves would find a healthy group at fault
        wait_until(lambda: healthy.settled() and healthy.retry_settled(), 120, "the healthy group settles")
        wait_until(lambda: split.ownership() == held, 120, "each split member holds its own strategy's share")
        wait_until(lambda: listed(cloned) == [CLONE, CLONE, "127.0.0.1@single"], 120, "the broker lists the clones")
        wait_until(lambda: not any(clone.owned(cloned.topic) for clone in clones), 60, "the clones withhold")

        snap = tmp_path / "snap"
        done = run_cli("snapshot", "-n", rocketmq.namesrv_address, "--out", str(snap), "--group", f"{prefix}_*")
        assert done.returncode == 0, done.stderr
        done = run_cli("audit", "--snapshot", str(snap), "--format", "json", "--limit", "1000", "--master", "local[2]")
        assert done.returncode == 1, done.stderr[-3000:]
        answer = json.loads(done.stdout)
        assert answer["partial"] is False and answer["rejected_rows"] == 0 and answer["more_findings"] == 0
        findings: list[dict[str, Any]] = answer["findings"]
        by_group = {g.group: [f for f in findings if f["group"] == g.group] for g in groups}
        assert sorted(by_group) == sorted(g.group for g in groups) and sum(map(len, by_group.values())) == len(findings)

        assert by_group[healthy.group] == []

        # The disagreement, computed here from what each member holds: the group uses AVG (two of its three).
        avg = own_share(split, dict.fromkeys(strategies, "AVG"))
        holders: dict[tuple[str, int], list[str]] = {}
        for cid, queues in held.items():
            for queue in queues:
                holders.setdefault(queue, []).append(cid)
        twice = {f"{b}:{q}" for (b, q), who in holders.items() if len(who) > 1}
        nobody = {f"{mq.broker_name}:{mq.queue_id}" for mq in split.queues} - {f"{b}:{q}" for b, q in holders}
        assert twice and nobody and held[rogue.client_id] != avg[rogue.client_id]  # the setup plants a real one
        got = {(f["side"], f["kind"], f["topic"], f["where"]) for f in by_group[split.group]}
        expected = (
            {("observed", "double_owned", split.topic, where) for where in twice}
            | {("observed", "unowned", split.topic, where) for where in nobody}
            | {("observed", "observed_mismatch", split.topic, rogue.client_id)}
        )
        assert got == expected
        mismatch = next(f for f in by_group[split.group] if f["kind"] == "observed_mismatch")
        assert "AVG_BY_CIRCLE" in mismatch["reason"] and "AVG" in mismatch["reason"]

        # The shared client ID: everything found in that group is about the clone ID and its queues.
        clone_share = own_share(cloned, {CLONE: "AVG", "127.0.0.1@single": "AVG"})[CLONE]
        clone_queues = {f"{b}:{q}" for b, q in clone_share}
        retry = {f"{mq.broker_name}:{mq.queue_id}" for mq in _retry_queues(cloned)}
        kinds = {(f["side"], f["kind"]) for f in by_group[cloned.group]}
        assert ("before", "double_owned") in kinds and ("observed", "unowned") in kinds
        for finding in by_group[cloned.group]:
            if finding["where"] == "127.0.0.1@single":  # the clone's extra listing pushes it off the retry queues
                assert finding["kind"] == "idle_consumer" and "duplicate client ID" in finding["reason"], finding
                continue
            assert finding["where"] == CLONE or finding["where"] in clone_queues | retry, finding
            if finding["kind"] == "double_owned":
                assert "duplicate client ID" in finding["reason"], finding
        assert {f["where"] for f in by_group[cloned.group] if f["topic"] == cloned.topic} >= clone_queues
    finally:
        for clone in clones:
            clone.stop()
        for group in groups:
            group.close()


def test_audit_names_members_subscribing_differently_and_what_is_lost(
    rocketmq: RocketMQCluster, tmp_path: Path
) -> None:
    """Issue 20, item 2: our member subscribes TagA, a Java member (Peer.java) '*' in the same group. The snapshot
    records each member's own expression from its running info (Java's subscriptionSet, and ours), and the audit
    names both members, the two expressions, and that ours never receives anything but TagA."""
    topic = new_topic(rocketmq, "AuditTags", 2)
    group = f"GID_auditsubs{int(time.time() * 1000) % 1_000_000}"
    ours = PushConsumer(
        rocketmq.namesrv_address, group, topics={topic: "TagA"}, listener=lambda batch: None,
        client_id="127.0.0.1@py-tagged",
    )  # fmt: skip
    assert rocketmq.lib is not None
    peer = JavaPeer(rocketmq.lib, tmp_path, rocketmq.namesrv_address, group, "java-all", [topic], tags="*")
    try:
        ours.start()
        wait_until(lambda: bool(peer.owned(topic)) and bool(ours.owned_queues().get(topic)), 90, "both hold a share")
        snap = tmp_path / "snap"
        done = run_cli("snapshot", "-n", rocketmq.namesrv_address, "--out", str(snap), "--group", group)
        assert done.returncode == 0, done.stderr
        done = run_cli("audit", "--snapshot", str(snap), "--format", "json", "--master", "local[2]")
    finally:
        ours.shutdown(15)
        peer.stop()
    assert done.returncode == 1, done.stderr[-3000:]
    answer = json.loads(done.stdout)
    assert answer["subscriptions_recorded"] is True
    (finding,) = [f for f in answer["findings"] if f["kind"] == "inconsistent_subscription"]
    java, python = sorted([peer.client_id, "127.0.0.1@py-tagged"])
    assert (finding["group"], finding["topic"], finding["where"]) == (group, topic, f"{java}, {python}")
    assert finding["reason"] == (
        f"subscribed as '*' by {peer.client_id}; as 'TagA' by 127.0.0.1@py-tagged; "
        f"127.0.0.1@py-tagged never receives anything but its own tags: {LOSS}"
    )


def _retry_queues(group: MixedGroup) -> list[MessageQueue]:
    """The group's retry topic's queues (brokers create it when the first consumer registers)."""
    topic = retry_topic(group.group)
    route = group.transport.route(topic)
    return route.subscribe_queues()
