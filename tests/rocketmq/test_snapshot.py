"""``rocket-rebalance snapshot`` against a real RocketMQ: a group of Java and Python consumers collected into the
pipeline's tables, each consumer's observed queues equal to what it holds, filters, and a consumer that stops
answering while the broker still lists it (a rejected row, exit status 3)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rocket_rebalance.lab.mixed_group import MixedGroup, new_topic
from rocket_rebalance.lab.rocketmq import RocketMQCluster
from rocket_rebalance.lab.wait import wait_until
from rocket_rebalance.model import retry_topic
from rocket_rebalance.runtime.transport import TransportError
from tests.progress_lines import progress_of

pytestmark = pytest.mark.rocketmq


def snapshot(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rocket_rebalance", "snapshot", *args], capture_output=True, text=True, timeout=120
    )


def table(out: Path, name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()]


def test_snapshot_of_a_mixed_group(rocketmq: RocketMQCluster, tmp_path: Path) -> None:
    topic = new_topic(rocketmq, "Snap", 4)
    name = f"GID_snap_{topic.split('_', 1)[1]}"
    group = MixedGroup(rocketmq, tmp_path / "group", name, topic)
    address = rocketmq.namesrv_address
    out = tmp_path / "snap"
    try:
        group.java("java-c")
        python_a = group.python("py-a")
        group.python("py-b")
        wait_until(group.settled, 60, "the group settles")
        group.produce(3)

        def committed() -> bool:
            rows = group.transport.consumer_progress(name, topic)
            return len(rows) == 8 and all(row.consumer_offset == row.broker_offset == 3 for row in rows)

        wait_until(committed, 30, "every message consumed and its offset committed")

        done = snapshot("-n", address, "--out", str(out), "--group", "GID_snap_*", "--group", name, "--timeout", "5")
        assert done.returncode == 0, done.stderr
        assert done.stderr.splitlines()[-1] in progress_of(done.stderr, "snapshot")  # the count's last line
        assert done.stderr.splitlines()[-1].endswith(", 0 rejected")
        meta = json.loads((out / "_snapshot.json").read_text(encoding="utf-8"))
        assert meta["partial"] is False and meta["complete"] is True and meta["wire"] == "remoting"
        assert {"TOOLS_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONSAPI_PULL"} <= set(meta["skipped"]["system"])
        assert meta["strategy_defaulted"]["groups"] == []
        assert table(out, "rejected") == []
        mine = {t: [r for r in table(out, t) if r.get("group", name) == name] for t in ("members", "groups")}

        ids = {"127.0.0.1@java-c": "JAVA", "127.0.0.1@py-a": "PYTHON", "127.0.0.1@py-b": "PYTHON"}
        assert sorted((m["client_id"], m["language"], m["strategy"], m["reported"]) for m in mine["members"]) == [
            (cid, language, "AVG", True) for cid, language in sorted(ids.items())
        ]
        assert all(m["view"] is None for m in mine["members"])
        assert mine["groups"] == [{"group": name, "strategy": "AVG", "message_model": "CLUSTERING", "options": None}]
        subscribed = {r["topic"] for r in table(out, "subscriptions") if r["group"] == name}
        assert subscribed == {topic, retry_topic(name)}
        routes = {(r["topic"], r["broker"]): (r["read_queue_nums"], r["perm"]) for r in table(out, "routes")}
        assert {routes[(topic, broker)] for broker in ("broker-a", "broker-b")} == {(4, 6)}
        assert any(key[0] == retry_topic(name) for key in routes)

        observed: dict[str, set[tuple[str, int]]] = {cid: set() for cid in ids}
        for row in table(out, "observed"):
            if row["group"] == name and row["topic"] == topic:
                observed[row["client_id"]].add((row["broker"], row["queue_id"]))
        assert observed == group.ownership(), group.describe()
        offsets = {
            (r["broker"], r["queue_id"]): (r["max_offset"], r["committed_offset"])
            for r in table(out, "offsets")
            if r["group"] == name and r["topic"] == topic
        }
        assert offsets == {queue: (3, 3) for queue in group.max_offsets()}

        # Filters: a --topic matching none of the group's topics skips it; the same folder is replaced.
        done = snapshot("-n", address, "--out", str(out), "--group", name, "--topic", "NoSuch*")
        assert done.returncode == 0, done.stderr
        meta = json.loads((out / "_snapshot.json").read_text(encoding="utf-8"))
        assert meta["skipped"]["topic_filter"] == [name] and meta["counts"]["members"] == 0
        assert sorted(p.name for p in out.iterdir()) == sorted([*meta["files"], "_snapshot.json"])

        # A consumer the broker still lists but that no longer answers (stopped, as a hung or cut-off process).
        with pytest.raises(TransportError) as offline:
            group.transport.consumer_report(name, "127.0.0.1@nobody")
        assert offline.value.code == "NOT_FOUND"
        python_a.process.send_signal(signal.SIGSTOP)
        try:
            done = snapshot("-n", address, "--out", str(out), "--group", name, "--timeout", "2")
        finally:
            python_a.process.send_signal(signal.SIGCONT)
        assert done.returncode == 3, done.stderr
        assert "partial" in done.stderr.splitlines()[-1] and "Traceback" not in done.stderr
        rejected = table(out, "rejected")
        assert [(r["group"], r["client_id"]) for r in rejected] == [(name, "127.0.0.1@py-a")]
        assert rejected[0]["reason"].startswith("timeout")
        members = {m["client_id"]: m for m in table(out, "members")}
        assert members["127.0.0.1@py-a"]["reported"] is False and members["127.0.0.1@java-c"]["reported"] is True
        assert json.loads((out / "_snapshot.json").read_text(encoding="utf-8"))["partial"] is True
    finally:
        group.close()
