"""The audit's finding rules without Spark: which stopped groups are findings, which ownership findings hold (the
collector's second read), the exit status, and the collector's records read back (a bad one is one line)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocket_rebalance.pipeline.audit import (
    GROWING_BACKLOG,
    Audit,
    backlog_findings,
    format_audit,
    judged,
    stopped_groups,
)
from rocket_rebalance.pipeline.observed import OWNERSHIP_KINDS
from rocket_rebalance.snapshot_folder import MARKER, Settle, SnapshotError, collector_settle

GROUPS = ["G1", "G2", "G3"]
KINDS = [*sorted(OWNERSHIP_KINDS), "unreported", "idle_consumer", "inconsistent_subscription", GROWING_BACKLOG]

findings_st = st.fixed_dictionaries(
    {
        "group": st.sampled_from(GROUPS),
        "topic": st.sampled_from(["T", "%RETRY%G1", None]),
        "side": st.sampled_from(["before", "observed"]),
        "kind": st.sampled_from(KINDS),
        "where": st.sampled_from(["b:0", "10.0.0.1@1", ""]),
        "reason": st.text(max_size=20),
    }
)
settles = st.builds(
    lambda seconds, verdicts: Settle(
        seconds, *(frozenset(g for g, v in zip(GROUPS, verdicts, strict=True) if v == name) for name in "hms")
    ),
    st.floats(min_value=0.5, max_value=600),
    st.lists(st.sampled_from("hms-"), min_size=len(GROUPS), max_size=len(GROUPS)),
)


@given(findings_st, st.none() | settles)
def test_only_ownership_findings_are_judged_by_the_second_read(finding: dict[str, Any], settle: Settle | None) -> None:
    got = judged(finding, settle)
    ownership = finding["side"] == "observed" and finding["kind"] in OWNERSHIP_KINDS
    if settle is None or not ownership or finding["group"] in settle.settled:
        assert got == finding
    elif finding["group"] in settle.moving:
        assert got is None  # caught mid-round: not a finding
    elif finding["group"] in settle.held:
        assert got is not None and {k: v for k, v in got.items() if k != "reason"} == {
            k: v for k, v in finding.items() if k != "reason"
        }
        assert got["reason"] == f"{finding['reason']} (held for {settle.seconds:g} s across two reads)"
    else:
        assert got == finding  # read once: no claim either way


stopped_rows = st.lists(
    st.fixed_dictionaries(
        {
            "group": st.sampled_from(GROUPS),
            "topic": st.sampled_from(["T", "U", None]),
            "lag": st.integers(0, 10**12),
            "later_lag": st.none() | st.integers(0, 10**12),
        }
    ),
    max_size=8,
)


@given(stopped_rows, st.none() | st.floats(min_value=0.5, max_value=600))
def test_a_stopped_group_is_a_finding_exactly_when_its_backlog_grew(
    rows: list[dict[str, Any]], seconds: float | None
) -> None:
    found = backlog_findings(rows, seconds)
    grown = [row for row in rows if row["later_lag"] is not None and row["later_lag"] > row["lag"]]
    assert [(f["group"], f["topic"]) for f in found] == [(row["group"], row["topic"]) for row in grown]
    for finding, row in zip(found, grown, strict=True):
        assert finding["kind"] == GROWING_BACKLOG and finding["side"] == "observed"
        assert f"from {row['lag']} to {row['later_lag']} messages" in finding["reason"]


audits = st.builds(
    Audit,
    findings=st.lists(findings_st, max_size=3),
    partial=st.booleans(),
    rejected_rows=st.integers(0, 3),
    left_out=st.integers(0, 3),
    stopped=st.lists(st.fixed_dictionaries({"group": st.sampled_from(GROUPS), "topic": st.just("T"),
                                            "lag": st.integers(0, 9), "later_lag": st.none()}), max_size=2),
    moving=st.lists(st.sampled_from(GROUPS), max_size=2, unique=True),
    settle_seconds=st.none() | st.just(20.0),
)  # fmt: skip


@given(audits)
def test_exit_status_0_nothing_to_act_on_1_findings_3_could_not_read(audit: Audit) -> None:
    found = bool(audit.findings or audit.left_out)
    expected = 1 if found else 3 if audit.partial or audit.rejected_rows else 0
    assert audit.status == expected
    text = format_audit(audit, 50, "table")
    assert ("no findings" in text.splitlines()) == (audit.status == 0)  # "no findings" means exit 0, and back
    assert json.loads(format_audit(audit, 50, "json"))["status"] == expected


def test_the_text_names_stopped_groups_and_groups_still_moving() -> None:
    audit = Audit([], False, stopped=[{"group": "G1", "topic": "T", "lag": 4, "later_lag": 4}], moving=["G2"],
                  settle_seconds=20.0)  # fmt: skip
    lines = format_audit(audit, 50, "table").splitlines()
    assert lines[0] == "no findings"
    assert lines[1].startswith("ownership not judged in G2: what their members hold changed between two reads 20 s")
    assert lines[3:] == ["groups with no online consumer:", "group  topic  lag  later_lag", "G1     T      4    4"]


def write_marker(snapshot: Path, settle: Any) -> None:
    snapshot.mkdir(exist_ok=True)
    (snapshot / MARKER).write_text(json.dumps({"partial": False, "settle": settle}), encoding="utf-8")


def test_the_settle_record_is_read_back(tmp_path: Path) -> None:
    assert collector_settle(tmp_path) is None  # no marker: fleet-gen's, or hand-made
    write_marker(tmp_path, None)
    assert collector_settle(tmp_path) is None  # --settle 0
    write_marker(tmp_path, {"seconds": 20, "held": ["G1"], "moving": [], "settled": ["G2"]})
    assert collector_settle(tmp_path) == Settle(20.0, frozenset({"G1"}), frozenset(), frozenset({"G2"}))


@pytest.mark.parametrize(
    "record",
    [
        {"seconds": 0, "held": [], "moving": [], "settled": []},
        {"seconds": True, "held": [], "moving": [], "settled": []},
        {"seconds": 20, "held": "G1", "moving": [], "settled": []},
        {"seconds": 20, "held": [], "moving": [3], "settled": []},
        {"seconds": 20, "held": []},
        [20],
    ],
)
def test_a_bad_settle_record_is_one_line(tmp_path: Path, record: Any) -> None:
    write_marker(tmp_path, record)
    with pytest.raises(SnapshotError, match='"settle" must hold'):
        collector_settle(tmp_path)


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ('{"group": "G", "topic": "T", "lag": -1}', "lag must be a whole number"),
        ('{"group": "G", "topic": "T", "lag": 1, "later_lag": "2"}', "later_lag must be a whole number"),
        ('{"group": "G", "topic": "T", "lag": null}', "lag is missing"),
        ('{"group": "G/x", "topic": "T", "lag": 0}', "G/x"),
        ("[1]", "not a JSON object"),
    ],
)
def test_a_bad_stopped_row_names_its_line(tmp_path: Path, line: str, error: str) -> None:
    (tmp_path / "stopped.jsonl").write_text('{"group": "G", "topic": null, "lag": 0}\n' + line + "\n")
    with pytest.raises(SnapshotError, match=f"stopped.jsonl line 2: .*{error}"):
        stopped_groups(tmp_path)


def test_stopped_rows_are_read_sorted(tmp_path: Path) -> None:
    rows = [{"group": "G2", "topic": "T", "lag": 3, "later_lag": 5}, {"group": "G1", "topic": None, "lag": 0}]
    (tmp_path / "stopped.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert stopped_groups(tmp_path) == [
        {"group": "G1", "topic": None, "lag": 0, "later_lag": None},
        {"group": "G2", "topic": "T", "lag": 3, "later_lag": 5},
    ]
