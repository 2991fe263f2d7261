"""``rocket-rebalance audit``: findings of a snapshot's current state and its exit status (in-process, as ``--engine
auto`` runs a snapshot this small; that Spark gives the same tables is tests/pipeline/test_engines.py's)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from rocket_rebalance.cli import main as cli_main
from rocket_rebalance.pipeline.audit import LOSS, expected_idleness
from rocket_rebalance.pipeline.reference import run_reference
from rocket_rebalance.progress import Progress
from rocket_rebalance.subscription import SubscriptionExpression
from tests.pipeline.test_job import assert_same
from tests.pipeline.test_observed import observed_fleet
from tests.progress_lines import progress_of

A, B = "10.0.0.1@4001#1700000001", "10.0.0.2@4002#1700000002"


def write_jsonl(folder: Path, name: str, rows: list[dict[str, Any]]) -> None:
    (folder / f"{name}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


def clean_snapshot(base: Path) -> Path:
    """One AVG group of two consumers holding exactly their plan: nothing to find."""
    snap = base / "clean"
    snap.mkdir()
    write_jsonl(snap, "routes", [{"topic": "T", "broker": "b", "read_queue_nums": 4, "perm": 6}])
    write_jsonl(snap, "groups", [{"group": "G", "strategy": "AVG", "message_model": "CLUSTERING"}])
    write_jsonl(snap, "subscriptions", [{"group": "G", "topic": "T"}])
    members = [{"group": "G", "client_id": cid, "reported": True, "strategy": "AVG"} for cid in (A, B)]
    write_jsonl(snap, "members", members)
    write_jsonl(snap, "offsets", [])
    held = [(A, 0), (A, 1), (B, 2), (B, 3)]  # AVG: the first consumer in Java order takes the first half
    write_jsonl(
        snap, "observed", [{"group": "G", "client_id": c, "topic": "T", "broker": "b", "queue_id": q} for c, q in held]
    )
    write_jsonl(snap, "member_subscriptions", [subscribed("G", cid, "T", "TagA || TagB") for cid in (A, B)])
    return snap


def subscribed(group: str, client_id: str, topic: str, expression: str, kind: str = "TAG") -> dict[str, Any]:
    """A row of the collector's record of what each member subscribes."""
    return {"group": group, "client_id": client_id, "topic": topic, "expression_type": kind, "expression": expression}


def spanning_snapshot(base: Path, strategy: str) -> Path:
    """One group of 4 consumers on 10 topics of 2 queues each (the probe's h12): CROSS_TOPIC gives every consumer 5
    queues in all; AVG gives two consumers all 20 and leaves the other two with nothing."""
    snap = base / strategy
    snap.mkdir()
    topics = [f"T{k}" for k in range(10)]
    cids = [f"10.0.0.{k}@{k}" for k in range(1, 5)]
    routes = [{"topic": t, "broker": b, "read_queue_nums": 1, "perm": 6} for t in topics for b in ("ba", "bb")]
    write_jsonl(snap, "routes", routes)
    write_jsonl(snap, "groups", [{"group": "G", "strategy": strategy, "message_model": "CLUSTERING"}])
    write_jsonl(snap, "subscriptions", [{"group": "G", "topic": t} for t in topics])
    write_jsonl(snap, "members", [{"group": "G", "client_id": cid} for cid in cids])
    write_jsonl(snap, "offsets", [])
    write_jsonl(snap, "member_subscriptions", [subscribed("G", cid, t, "*") for cid in cids for t in topics])
    return snap


def test_a_clean_snapshot_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["audit", "--snapshot", str(clean_snapshot(tmp_path))]) == 0
    assert capsys.readouterr().out.strip() == "no findings"
    assert [p.name for p in tmp_path.iterdir()] == ["clean"]  # the temporary output folder is gone


def test_audit_of_an_observed_fleet_equals_the_reference_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = observed_fleet(tmp_path)
    (fleet / "_snapshot.json").write_text(json.dumps({"partial": True, "groups": 40}))
    out = tmp_path / "out"
    status = cli_main(["audit", "--snapshot", str(fleet), "--out", str(out), "--limit", "3", "--format", "json"])
    assert status == 1
    printed = json.loads(capsys.readouterr().out)
    reference = run_reference(fleet)
    assert_same(out, reference)  # the job equals the reference on observed data too
    assert printed["partial"] is True and len(printed["findings"]) == 3
    findings = [v for v in reference["violations"] if not expected_idleness(v)]
    assert len(findings) < len(reference["violations"])  # the fleet has consumers idle on retry topics ...
    assert printed["more_findings"] == len(findings) - 3  # ... which are not findings
    assert {"reason": "broker-b unreachable", "group": None, "client_id": None} in printed["collector_rejected"]
    assert printed["rejected_rows"] == len(reference["rejected"]) >= 2
    observed = [v for v in reference["violations"] if v["side"] == "observed"]
    assert {"double_owned", "observed_mismatch", "unreported"} <= {v["kind"] for v in observed}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["totals"]["observed_violations"] == len(observed)
    assert summary["partial"] == [str(fleet)]


def test_impact_of_a_partial_snapshot_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Not only the audit: the impact report and the command's output name a snapshot its collector marked
    partial, since groups it could not read are missing from every table."""

    snap = clean_snapshot(tmp_path)
    (snap / "_snapshot.json").write_text(json.dumps({"partial": True}))
    assert cli_main(["impact", "--snapshot", str(snap), "--out", str(tmp_path / "out")]) == 0
    assert f"impact: partial snapshot {snap}: the collector could not read every group" in capsys.readouterr().out
    report = (tmp_path / "out" / "report.md").read_text()
    assert f"**Partial snapshot** {snap}:" in report
    (snap / "_snapshot.json").write_text(json.dumps({"partial": False}))
    assert cli_main(["impact", "--snapshot", str(snap), "--out", str(tmp_path / "out")]) == 0
    assert "partial snapshot" not in capsys.readouterr().out
    assert "Partial" not in (tmp_path / "out" / "report.md").read_text()


def test_a_partial_snapshot_with_nothing_found_exits_3_and_says_so() -> None:
    from rocket_rebalance.pipeline.audit import Audit, format_audit

    audit = Audit([], True, [{"group": "G", "client_id": A, "reason": "timeout"}])
    text = format_audit(audit, 50, "table")
    assert audit.status == 3 and text.startswith("partial snapshot") and "timeout" in text
    assert "no findings in what could be read" in text.splitlines()
    assert Audit([], False).status == 0
    rejected = Audit([], False, rejected_rows=2)  # rows not checked could hide a problem
    assert rejected.status == 3 and "2 input rows rejected, so not checked" in format_audit(rejected, 50, "table")


def test_ownership_findings_are_claimed_only_as_they_held_across_the_collectors_reads(tmp_path: Path) -> None:
    """The collector's settle record: a group whose holdings changed between its two reads (moving) loses its
    ownership findings, one whose holdings held keeps them, saying so; every other finding is as before."""
    from rocket_rebalance.pipeline.audit import run_audit
    from rocket_rebalance.pipeline.observed import OWNERSHIP_KINDS

    fleet = observed_fleet(tmp_path)
    once = [  # the job equals the reference (above): the findings of one read, without a run of their own
        {**{k: v[k] for k in ("group", "topic", "side", "kind", "reason")}, "where": where(v)}
        for v in run_reference(fleet)["violations"]
        if not expected_idleness(v)
    ]
    ownership = sorted({f["group"] for f in once if f["side"] == "observed" and f["kind"] in OWNERSHIP_KINDS})
    assert len(ownership) >= 2  # the fleet plants such faults
    held, moving = ownership[0], ownership[1]
    settle = {"seconds": 20, "held": [held], "moving": [moving], "settled": []}
    (fleet / "_snapshot.json").write_text(json.dumps({"partial": False, "settle": settle}))
    twice = run_audit(fleet, limit=10_000, progress=Progress("audit", None))
    assert twice.moving == [moving] and twice.settle_seconds == 20

    def about(group: str, findings: list[dict[str, Any]], kinds: frozenset[str] = OWNERSHIP_KINDS) -> list[Any]:
        return [f for f in findings if f["group"] == group and f["side"] == "observed" and f["kind"] in kinds]

    assert about(moving, once) and about(moving, twice.findings) == []
    assert [f["reason"] for f in about(held, twice.findings)] == [
        f"{f['reason']} (held for 20 s across two reads)" for f in about(held, once)
    ]
    rest = [f for f in once if f["group"] not in (held, moving) or f not in about(f["group"], once)]
    assert canonical(f for f in twice.findings if f in rest) == canonical(rest)


def canonical(findings: Iterable[dict[str, Any]]) -> list[str]:
    """Findings compared as a multiset, whatever their order and their keys' order."""
    return sorted(json.dumps(f, sort_keys=True) for f in findings)


def where(violation: dict[str, Any]) -> str:
    """A finding's ``where``: the queue, else the consumer."""
    if violation["queue_id"] is not None:
        return f"{violation['broker']}:{violation['queue_id']}"
    return violation["client_id"] or ""


def test_a_snapshot_of_stopped_groups_only_finds_the_backlog_that_grew(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No live group: the job runs on empty tables; the stopped groups are listed, and one is a finding only when
    its backlog grew between the collector's two reads (a snapshot of a quiet one exiting 0: tests/rocketmq)."""
    snap = tmp_path / "stopped"
    snap.mkdir()
    for table in ("routes", "groups", "subscriptions", "members", "offsets", "observed", "rejected"):
        write_jsonl(snap, table, [])
    (snap / "_snapshot.json").write_text(json.dumps({"partial": False, "settle": None}))
    quiet = [{"group": "G_quiet", "topic": "T", "lag": 5, "later_lag": 5}, {"group": "G_none", "topic": None,
             "lag": 0, "later_lag": None}]  # fmt: skip
    busy = {"group": "G_busy", "topic": "T", "lag": 5, "later_lag": 9}
    write_jsonl(snap, "stopped", [*quiet, busy])
    assert cli_main(["audit", "--snapshot", str(snap), "--format", "json"]) == 1
    printed = json.loads(capsys.readouterr().out)
    assert printed["stopped_groups"] == sorted([*quiet, busy], key=lambda row: row["group"])
    (finding,) = printed["findings"]  # the quiet ones are listed, not found (the status rule: test_findings.py)
    assert (finding["group"], finding["kind"]) == ("G_busy", "stopped_with_backlog")
    assert finding["reason"] == "no online consumer, and the backlog grew from 5 to 9 messages between two reads"


def test_only_retry_topics_idle_for_lack_of_queues_are_expected() -> None:
    row = {"kind": "idle_consumer", "topic": "%RETRY%G", "reason": "more consumers than queues"}
    assert expected_idleness(row)
    assert not expected_idleness({**row, "topic": "T"})  # a topic of the application: a real finding
    assert not expected_idleness({**row, "reason": "the consumer is missing from its own view of the members"})
    assert not expected_idleness({**row, "kind": "unowned"})


@pytest.mark.parametrize(
    ("setup", "extra", "message"),
    [
        (lambda snap: (snap / "_snapshot.json").write_text("{oops"), [], "_snapshot.json is not JSON"),
        (lambda snap: (snap / "_snapshot.json").write_text('{"partial": "yes"}'), [], '"partial": true or false'),
        (lambda snap: (snap / "rejected.jsonl").write_text("[1]\n"), [], "rejected.jsonl line 1 is not a JSON object"),
        (lambda snap: (snap / "routes.jsonl").unlink(), [], "table 'routes' not found"),
        (
            lambda snap: write_jsonl(snap, "member_subscriptions", [subscribed("G", A, "T", "a > 1", "SQL")]),
            [],
            "member_subscriptions.jsonl line 1: 'a > 1': expression type must be one of TAG, SQL92",
        ),
        (
            lambda snap: write_jsonl(snap, "member_subscriptions", [subscribed("G", A, "T/x", "*")]),
            [],
            "member_subscriptions.jsonl line 1: topic",
        ),
        (
            lambda snap: (snap / "member_subscriptions.jsonl").write_text('{"group": "G"}\n'),
            [],
            "member_subscriptions.jsonl line 1: 'client_id'",
        ),
        (lambda snap: None, ["--limit", "-1"], "--limit must be 0 or more"),
        (lambda snap: None, ["--report"], "--report needs --out"),
        (lambda snap: None, ["--master", "nowhere"], "is not a Spark master"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], setup: Any, extra: list[str], message: str
) -> None:
    snap = clean_snapshot(tmp_path)
    setup(snap)
    assert cli_main(["audit", "--snapshot", str(snap), *extra]) == 2
    stderr = capsys.readouterr().err
    err = [line for line in stderr.strip().splitlines() if line not in progress_of(stderr, "audit")]
    assert len(err) == 1 and err[0].startswith("rocket-rebalance: ") and message in err[0], err


def test_a_balanced_cross_topic_group_is_clean_and_an_avg_one_is_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Idleness under a strategy that spans topics is judged on the consumer's total: a balanced CROSS_TOPIC group
    has nothing to find, while AVG really leaves two consumers idle on every topic."""
    assert cli_main(["audit", "--snapshot", str(spanning_snapshot(tmp_path, "CROSS_TOPIC"))]) == 0
    assert capsys.readouterr().out.strip() == "no findings"
    avg = spanning_snapshot(tmp_path, "AVG")
    assert cli_main(["audit", "--snapshot", str(avg), "--format", "json", "--limit", "5"]) == 1
    printed = json.loads(capsys.readouterr().out)
    every = sorted(
        (v["group"], v["topic"], v["side"], v["kind"], v["client_id"], v["reason"])
        for v in run_reference(avg)["violations"]
    )
    assert len(every) == 20 and {row[3] for row in every} == {"idle_consumer"}
    shown = [(f["group"], f["topic"], f["side"], f["kind"], f["where"], f["reason"]) for f in printed["findings"]]
    assert shown == every[:5] and printed["more_findings"] == 15  # the first in sort order, the rest counted


def test_the_audit_keeps_only_the_findings_it_prints(tmp_path: Path) -> None:
    """A fleet may have millions of findings; the audit holds the first ``limit`` in sort order and counts the
    others, so its memory does not grow with them, and says how many it left out."""
    from rocket_rebalance.pipeline.audit import format_audit, run_audit

    snap = spanning_snapshot(tmp_path, "AVG")
    kept = run_audit(snap, limit=3, progress=Progress("audit", None))
    assert len(kept.findings) == 3 and kept.left_out == 17 and kept.status == 1
    whole = run_audit(snap, limit=100, progress=Progress("audit", None))
    assert len(whole.findings) == 20 and whole.left_out == 0 and kept.findings == whole.findings[:3]
    assert format_audit(kept, 3, "table").splitlines()[-1] == "... and 17 more"
    assert format_audit(kept, 2, "table").splitlines()[-1] == "... and 18 more"
    nothing = run_audit(snap, limit=0, progress=Progress("audit", None))
    assert nothing.findings == [] and nothing.left_out == 20 and nothing.status == 1
    assert format_audit(nothing, 0, "table").splitlines() == ["20 findings, none shown (the limit is 0)"]


def test_members_subscribing_differently_are_a_finding_per_topic_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A subscribes T by TagA and B by '*' (A never receives B's other tags); A also subscribes Extra, which B does
    not (B is handed Extra's queues all the same): two findings, each naming the members concerned."""
    snap = clean_snapshot(tmp_path)
    rows = [subscribed("G", A, "T", "TagA"), subscribed("G", B, "T", "*"), subscribed("G", A, "Extra", "*")]
    write_jsonl(snap, "member_subscriptions", rows)
    assert cli_main(["audit", "--snapshot", str(snap), "--format", "json"]) == 1
    printed = json.loads(capsys.readouterr().out)
    assert printed["subscriptions_recorded"] is True and printed["more_findings"] == 0
    extra, t = printed["findings"]  # in sort order
    assert (t["group"], t["topic"], t["kind"], t["where"]) == ("G", "T", "inconsistent_subscription", f"{A}, {B}")
    assert t["reason"] == (
        f"subscribed as 'TagA' by {A}; as '*' by {B}; {A} never receives anything but its own tags: {LOSS}"
    )
    assert (extra["topic"], extra["where"]) == ("Extra", f"{A}, {B}")
    assert f"as '*' by {A}; not subscribed by {B}, which is handed queues of it" in extra["reason"]


def test_a_snapshot_without_subscriptions_audits_and_says_they_were_not_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snap = clean_snapshot(tmp_path)
    (snap / "member_subscriptions.jsonl").unlink()  # a snapshot of an earlier collector
    assert cli_main(["audit", "--snapshot", str(snap)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == "no findings" and lines[-1].startswith("subscriptions not recorded in this snapshot")
    assert cli_main(["audit", "--snapshot", str(snap), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["subscriptions_recorded"] is False


def test_subscription_findings_are_bounded_and_escaped() -> None:
    """A thousand members and a client ID with a terminal escape: the finding names the first few, says how many
    more, and the table escapes what came from the consumers."""
    from rocket_rebalance.pipeline.audit import Audit, format_audit, subscription_findings

    hostile = "10.0.0.9@\x1b[2J\nforged"
    members = {f"10.0.1.{n:04d}@1": {"T": SubscriptionExpression(f"Tag{n}")} for n in range(1000)}
    members[hostile] = {"T": SubscriptionExpression("*")}
    (finding,) = subscription_findings({"G": members})
    assert finding["where"].endswith("and 996 more")
    assert "; and 996 more expressions;" in finding["reason"] and " and 995 more: " in finding["reason"]
    assert len(finding["reason"]) < 1000
    text = format_audit(Audit([finding], False), 50, "table")
    assert "\x1b" not in text and len(text.splitlines()) == 2
