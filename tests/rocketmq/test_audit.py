"""From a live RocketMQ cluster to the audit's answer, as an operator's cron job runs it: ``rocket-rebalance
snapshot`` then ``rocket-rebalance audit``, both as real processes, against the real NameServer and brokers with
Java and Python consumers in three groups.

- a healthy group (a Java and a Python consumer, both AVG): nothing to find;
- a planted disagreement: a Python consumer that allocates BY_CIRCLE in a group whose other members (a Java
  consumer among them) use AVG. What it holds is computed here independently from each member's own strategy,
  and the audit must report exactly the queues held twice, the queues nobody holds and that consumer;
- a client ID shared by two processes (clones): the broker lists the ID twice; the audit must report the shared
  ID (its computed queues owned twice) and that its queues are observed held by nobody (the clones withhold them,
  core rule L6), and nothing about the other member;
- a group caught mid-rebalance: its rogue member leaves between the collector's two reads (a Java member stays),
  so what the first read showed does not hold, and the audit claims nothing about its ownership, while the split
  group's findings say they held across the two reads;
- stopped groups (one a Java consumer left, the positive control, one a Python consumer): a snapshot of a stopped
  group exits 0 and audits clean; one whose backlog grows while the snapshot reads it is a finding.

The audits run in-process (``--engine auto`` on a few groups: the engines' equality is tests/pipeline's); wall time
on 2 cores at load 10 to 14 was 350 s for the module when they ran on Spark.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from functools import partial
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

# a bound for hangs, not a measure: a cluster, Java and Python members, snapshots and audits, which took more than
# 300 s together in a CI run beside another at load 20 (with the audits on Spark)
pytestmark = [pytest.mark.rocketmq, pytest.mark.timeout(900)]

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


def listed(group: MixedGroup, broker: int = 0) -> list[str]:
    try:
        return sorted(group.transport.consumer_list(group.cluster.broker_names[broker], group.group))
    except TransportError:  # no heartbeat yet
        return []


def listed_nowhere(group: MixedGroup) -> bool:
    """No broker lists a member (the snapshot asks every master: one still listing a member that left would make
    the group a live one there)."""
    return not any(listed(group, broker) for broker in range(len(group.cluster.broker_names)))


def test_snapshot_then_audit_finds_exactly_the_shared_id_and_the_planted_disagreement(
    rocketmq: RocketMQCluster, tmp_path: Path
) -> None:
    prefix = f"GID_audit{int(time.time() * 1000) % 1_000_000}"
    healthy = MixedGroup(rocketmq, tmp_path / "healthy", f"{prefix}_healthy", new_topic(rocketmq, "AuditOk", 2))
    split = MixedGroup(rocketmq, tmp_path / "split", f"{prefix}_split", new_topic(rocketmq, "AuditSplit", 4))
    cloned = MixedGroup(rocketmq, tmp_path / "cloned", f"{prefix}_cloned", new_topic(rocketmq, "AuditClone", 2))
    moving = MixedGroup(rocketmq, tmp_path / "moving", f"{prefix}_moving", new_topic(rocketmq, "AuditMove", 4))
    groups = (healthy, split, cloned, moving)
    clones: list[ConsumerProcess] = []
    try:
        healthy.java("okjava")
        healthy.python("okpy")
        java = split.java("splitjava")
        split.python("splitavg")
        rogue = split.python("splitrogue", strategy="AVG_BY_CIRCLE")
        moving_java = moving.java("movejava")
        moving.python("moveavg")
        leaving = moving.python("moverogue", strategy="AVG_BY_CIRCLE")
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
        moving_shares = {moving_java.client_id: "AVG", "127.0.0.1@moveavg": "AVG", leaving.client_id: "AVG_BY_CIRCLE"}
        wait_until(lambda: moving.ownership() == own_share(moving, moving_shares), 120, "the moving group splits")
        wait_until(lambda: listed(cloned) == [CLONE, CLONE, "127.0.0.1@single"], 120, "the broker lists the clones")
        wait_until(lambda: not any(clone.owned(cloned.topic) for clone in clones), 60, "the clones withhold")

        snap = tmp_path / "snap"
        status, stderr = snapshot_leaving_between_reads(rocketmq, snap, f"{prefix}_*", leaving)
        assert status == 0, stderr
        settle = json.loads((snap / "_snapshot.json").read_text(encoding="utf-8"))["settle"]
        assert split.group in settle["held"] and moving.group in settle["moving"] + settle["settled"], settle
        done = run_cli("audit", "--snapshot", str(snap), "--format", "json", "--limit", "1000")
        assert done.returncode == 1, done.stderr[-3000:]
        answer = json.loads(done.stdout)
        assert answer["partial"] is False and answer["rejected_rows"] == 0 and answer["more_findings"] == 0
        findings: list[dict[str, Any]] = answer["findings"]
        by_group = {g.group: [f for f in findings if f["group"] == g.group] for g in groups}
        assert sorted(by_group) == sorted(g.group for g in groups) and sum(map(len, by_group.values())) == len(findings)

        assert by_group[healthy.group] == []
        # the first read of the moving group showed its rogue's split (it read it twice), which did not hold
        assert [f for f in by_group[moving.group] if f["side"] == "observed"] == [], by_group[moving.group]

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
        assert all(f["reason"].endswith("(held for 20 s across two reads)") for f in by_group[split.group])

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


def snapshot_leaving_between_reads(
    rocketmq: RocketMQCluster, snap: Path, pattern: str, leaving: ConsumerProcess
) -> tuple[int, str]:
    """``rocket-rebalance snapshot`` as a process; when it says it reads groups again (the settle interval,
    default 20 s, starts), ``leaving`` leaves its group: a group the first read found split is then mid-rebalance."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    args = ["snapshot", "-n", rocketmq.namesrv_address, "--out", str(snap), "--group", pattern]
    process = subprocess.Popen(
        [sys.executable, "-m", "rocket_rebalance", *args], env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stderr is not None
    lines: list[str] = []
    try:
        for line in process.stderr:
            lines.append(line)
            if "read again in" in line:
                leaving.stop()
        return process.wait(600), "".join(lines)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


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
        done = run_cli("audit", "--snapshot", str(snap), "--format", "json")
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


def consumed_all(group: MixedGroup) -> bool:
    return not group.missing()


def _retry_queues(group: MixedGroup) -> list[MessageQueue]:
    """The group's retry topic's queues (brokers create it when the first consumer registers)."""
    topic = retry_topic(group.group)
    route = group.transport.route(topic)
    return route.subscribe_queues()


def test_stopped_groups_are_clean_unless_their_backlog_grows(rocketmq: RocketMQCluster, tmp_path: Path) -> None:
    """Issue 41, item 2: a group whose consumers all left is recorded (with its lag), not a failed read. ``quiet``
    was consumed to its end by a Java member (the positive control: Java's own shutdown stores its offsets), which
    then left: the snapshot exits 0 and the audit finds nothing. ``busy`` was consumed by a Python member, which
    left while messages keep coming: read twice 5 s apart, its backlog grew, which is the one finding."""
    prefix = f"GID_stopped{int(time.time() * 1000) % 1_000_000}"
    quiet = MixedGroup(rocketmq, tmp_path / "quiet", f"{prefix}_quiet", new_topic(rocketmq, "AuditQuiet", 2))
    busy = MixedGroup(rocketmq, tmp_path / "busy", f"{prefix}_busy", new_topic(rocketmq, "AuditBusy", 2))
    try:
        java = quiet.java("quietjava")
        python = busy.python("busypy")
        for group in (quiet, busy):
            wait_until(group.settled, 120, f"{group.group} holds its queues")
            group.produce(3)
            wait_until(partial(consumed_all, group), 120, f"{group.group} consumes everything")
        assert java.stop() and python.stop() is not None
        wait_until(lambda: listed_nowhere(quiet) and listed_nowhere(busy), 60, "the brokers list nobody")

        snap = tmp_path / "quiet-snap"
        done = run_cli("snapshot", "-n", rocketmq.namesrv_address, "--out", str(snap), "--group", quiet.group)
        assert done.returncode == 0, done.stderr
        stopped = [json.loads(line) for line in (snap / "stopped.jsonl").read_text(encoding="utf-8").splitlines()]
        assert {row["topic"]: row["lag"] for row in stopped}.get(quiet.topic) == 0, stopped
        done = run_cli("audit", "--snapshot", str(snap))
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.splitlines()[0] == "no findings" and quiet.group in done.stdout

        snap = tmp_path / "busy-snap"
        with busy.traffic(0.5):
            wait_until(busy.missing, 60, f"a backlog in {busy.group}")  # the first read sees one, the second more
            done = run_cli("snapshot", "-n", rocketmq.namesrv_address, "--out", str(snap), "--group", f"{prefix}_*",
                           "--settle", "5")  # fmt: skip
        assert done.returncode == 0, done.stderr
        done = run_cli("audit", "--snapshot", str(snap), "--format", "json")
        assert done.returncode == 1, done.stderr[-3000:]
        answer = json.loads(done.stdout)
        (finding,) = answer["findings"]
        assert (finding["group"], finding["topic"], finding["kind"]) == (busy.group, busy.topic, "stopped_with_backlog")
        assert "the backlog grew from" in finding["reason"] and "in 5 s" in finding["reason"]
        assert {row["group"] for row in answer["stopped_groups"]} == {quiet.group, busy.group}
    finally:
        quiet.close()
        busy.close()
