"""Observed allocations (what consumers report holding) against the plan, and the named output rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rocket_rebalance.model import MessageQueue, sort_client_ids
from rocket_rebalance.pipeline.analysis import analyze_group
from rocket_rebalance.pipeline.fleetgen import write_fleet
from rocket_rebalance.pipeline.reference import run_reference
from rocket_rebalance.pipeline.rows import ROW_TYPES, as_dicts
from rocket_rebalance.pipeline.schema import OUTPUT_TABLES  # noqa: E402
from rocket_rebalance.pipeline.validate import row_reason
from rocket_rebalance.plan import plan
from rocket_rebalance.strategies import create_strategy

TOPIC = "OrderTopic"
BROKERS = ("broker-a", "broker-b")
CIDS = [f"10.0.0.{k}@{4000 + k}#17000000{k}" for k in range(1, 7)]


def queues(count: int = 4) -> list[MessageQueue]:
    return [MessageQueue(TOPIC, b, q) for b in BROKERS for q in range(count)]


def the_plan(ids: list[str], strategy: str = "AVG", count: int = 4) -> dict[str, list[MessageQueue]]:
    return plan(create_strategy(strategy), "G", sorted(queues(count)), sort_client_ids(ids))


def group(
    ids: list[str],
    held: dict[str, list[MessageQueue]] | None,
    strategy: str = "AVG",
    reported: dict[str, bool | None] | None = None,
    member: dict[str, dict[str, Any]] | None = None,
    unread: list[dict[str, str]] | None = None,
    count: int = 4,
) -> dict[str, Any]:
    """A group input row: one topic on two brokers, ``held`` the observed holdings (None: no observed table)."""
    members = [
        {
            "client_id": cid,
            "view": None,
            "view_digest": None,
            "reported": (reported or {}).get(cid, True),
            "strategy": None,
            "language": None,
            **(member or {}).get(cid, {}),
        }
        for cid in ids
    ]
    observed = None
    if held is not None:
        observed = [
            {"client_id": cid, "topic": mq.topic, "broker": mq.broker_name, "queue_id": mq.queue_id}
            for cid, share in held.items()
            for mq in share
        ]
    before = {
        "settings": [{"strategy": strategy, "message_model": "CLUSTERING", "options": None}],
        "topics": [TOPIC],
        "routes": [{"topic": TOPIC, "broker": b, "read_queue_nums": count, "perm": 6} for b in BROKERS],
        "members": members,
        "observed": observed,
        "unread": unread,
    }
    return {"group": "G", "before": before, "after": None, "offsets": None}


def observed_rows(row: dict[str, Any]) -> list[dict[str, Any]]:
    result = as_dicts(analyze_group(row))
    found = [v for v in result["violations"] if v["side"] == "observed"]
    (groups,) = result["groups"]
    assert groups["observed_violations"] == (None if row["before"]["observed"] is None else len(found))
    return found


def kinds(rows: list[dict[str, Any]]) -> set[tuple[Any, ...]]:
    return {(r["kind"], r["broker"], r["queue_id"], r["client_id"]) for r in rows}


def test_each_row_type_names_its_tables_columns_in_order() -> None:
    assert list(ROW_TYPES) == list(OUTPUT_TABLES)
    for name, fields in OUTPUT_TABLES.items():
        assert ROW_TYPES[name]._fields == tuple(f.name for f in fields), name  # type: ignore[attr-defined]


def test_without_an_observed_table_nothing_is_claimed() -> None:
    assert observed_rows(group(CIDS[:3], None)) == []


ids_strategy = st.lists(st.sampled_from(CIDS), min_size=1, max_size=5, unique=True)


@settings(max_examples=30, deadline=None)
@given(ids_strategy, st.sampled_from(["AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH"]), st.integers(1, 6))
def test_holding_exactly_the_plan_is_no_violation(ids: list[str], strategy: str, count: int) -> None:
    assert observed_rows(group(ids, the_plan(ids, strategy, count), strategy, count=count)) == []


@settings(max_examples=50, deadline=None)
@given(ids_strategy, st.integers(1, 6), st.sampled_from(["move", "drop", "duplicate"]), st.data())
def test_one_planted_change_yields_exactly_its_violations(
    ids: list[str], count: int, change: str, data: st.DataObject
) -> None:
    held = the_plan(ids, "AVG", count)
    victim = data.draw(st.sampled_from([cid for cid in ids if held[cid]]))
    mq = data.draw(st.sampled_from(held[victim]))
    others = [cid for cid in ids if cid != victim]
    if change != "drop" and not others:
        return  # a single consumer has nobody to move or share a queue with
    other = data.draw(st.sampled_from(others)) if others else victim
    changed = {cid: list(share) for cid, share in held.items()}
    if change in ("move", "drop"):
        changed[victim].remove(mq)
    if change in ("move", "duplicate"):
        changed[other].append(mq)
    found = observed_rows(group(ids, changed, count=count))
    mismatch = "observed_mismatch"
    expected = {
        "move": {(mismatch, None, None, victim), (mismatch, None, None, other)},
        "drop": {(mismatch, None, None, victim), ("unowned", mq.broker_name, mq.queue_id, None)},
        "duplicate": {(mismatch, None, None, other), ("double_owned", mq.broker_name, mq.queue_id, None)},
    }[change]
    assert kinds(found) == expected and len(found) == len(expected)
    reasons = {r["client_id"]: r["reason"] for r in found if r["kind"] == mismatch}
    if victim in reasons:
        assert reasons[victim].startswith("0 extra and 1 missing queues: stale member view or mid-rebalance")
    if change != "drop":
        assert reasons[other].startswith("1 extra and 0 missing queues")
    if change == "duplicate":
        (double,) = [r for r in found if r["kind"] == "double_owned"]
        assert double["owners"] == sort_client_ids([victim, other]) and victim in double["reason"]


def test_an_unreported_consumer_stops_unowned_claims_and_is_named_with_the_collectors_reason() -> None:
    ids = CIDS[:3]
    held = the_plan(ids)
    silent = sort_client_ids(ids)[0]
    held[silent] = []
    unread = [{"client_id": silent, "reason": "timeout after 3000 ms"}]
    found = observed_rows(group(ids, held, reported={silent: False}, unread=unread))
    assert [(r["kind"], r["client_id"], r["reason"]) for r in found] == [
        ("unreported", silent, "running info not read: timeout after 3000 ms")
    ]
    other = sort_client_ids(ids)[1]
    found = observed_rows(group(ids, held, reported={silent: None, other: False}))
    assert {(r["kind"], r["client_id"], r["reason"]) for r in found} == {
        ("unreported", silent, "running info not read"),
        ("unreported", other, "running info not read"),
    }


def test_mismatch_reasons_name_the_likely_cause() -> None:
    ids = CIDS[:3]
    odd = sort_client_ids(ids)[0]
    held = the_plan(ids, "AVG_BY_CIRCLE")  # what AVG_BY_CIRCLE consumers hold, in a group configured for AVG
    by_strategy = observed_rows(group(ids, held, member={cid: {"strategy": "AVG_BY_CIRCLE"} for cid in ids}))
    assert by_strategy and all("reports strategy AVG_BY_CIRCLE, the group uses AVG" in r["reason"] for r in by_strategy)
    languages = {cid: {"language": "JAVA"} for cid in ids} | {odd: {"language": "PYTHON"}}
    by_language = observed_rows(group(ids, held, member=languages))
    assert by_language and all("language" in r["reason"] and "JAVA, PYTHON" in r["reason"] for r in by_language)


def test_a_shared_client_id_is_two_holders_of_each_of_its_queues() -> None:
    ids = [CIDS[0], CIDS[0], CIDS[1]]
    held = {cid: share for cid, share in the_plan(ids).items()}
    found = observed_rows(group(ids, held))
    doubles = [r for r in found if r["kind"] == "double_owned"]
    assert doubles and all(r["owners"] == [CIDS[0], CIDS[0]] for r in doubles)
    assert len(doubles) == len(held[CIDS[0]])  # the other consumer's queues are fine


def test_a_queue_outside_the_route_or_the_subscriptions_is_a_mismatch() -> None:
    ids = CIDS[:2]
    held = the_plan(ids)
    stray = [MessageQueue(TOPIC, "broker-z", 0), MessageQueue("OtherTopic", "broker-a", 0)]
    found = observed_rows(group(ids, {CIDS[0]: held[CIDS[0]] + stray, CIDS[1]: held[CIDS[1]]}))
    assert {(r["kind"], r["topic"], r["broker"], r["reason"]) for r in found} == {
        ("observed_mismatch", TOPIC, "broker-z", "holds a queue outside the route"),
        ("observed_mismatch", "OtherTopic", "broker-a", "holds a queue outside the route"),
    }


def test_observed_row_rules() -> None:
    good = {"group": "G", "client_id": "c", "topic": "T", "broker": "b", "queue_id": 0}
    assert row_reason("observed", good) is None
    assert row_reason("observed", {**good, "queue_id": -1}) == "queue ID is missing or negative"
    assert row_reason("observed", {**good, "topic": "bad topic"}) == "invalid topic name"
    assert row_reason("observed", {**good, "group": "bad group"}) == "invalid group name"
    assert row_reason("observed", {**good, "client_id": ""}) == "client ID is missing"
    assert row_reason("observed", {**good, "broker": None}) == "broker name is missing"


def observed_fleet(base: Path) -> Path:
    """A fleet with observed holdings and planted faults, plus a bad row, an orphan and the collector's notes."""
    fleet = base / "fleet"
    write_fleet(fleet, 40, seed=4, fmt="jsonl", observed=True)
    with (fleet / "observed.jsonl").open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"group": "GID_0000001", "client_id": "10.9.9.9@1#1", "topic": "T", "broker": "b",
                                 "queue_id": 0}) + "\n")  # fmt: skip
        handle.write(json.dumps({"group": "GID_0000001", "client_id": "x", "topic": "T", "broker": "b",
                                 "queue_id": -2}) + "\n")  # fmt: skip
    members = [json.loads(line) for line in (fleet / "members.jsonl").read_text().splitlines()]
    silent = members[0]
    silent["reported"] = False
    (fleet / "members.jsonl").write_text("".join(json.dumps(m) + "\n" for m in members))
    notes = [
        {"group": silent["group"], "client_id": silent["client_id"], "reason": "timeout"},
        {"group": None, "client_id": None, "reason": "broker-b unreachable"},
    ]
    (fleet / "rejected.jsonl").write_text("".join(json.dumps(n) + "\n" for n in notes))
    return fleet


def test_fleet_gen_observed_plants_faults_the_analysis_finds(tmp_path: Path) -> None:
    fleet = observed_fleet(tmp_path)
    tables = run_reference(fleet)
    found = [v for v in tables["violations"] if v["side"] == "observed"]
    assert {"double_owned", "observed_mismatch", "unreported"} <= {v["kind"] for v in found}
    silent = [v for v in found if v["kind"] == "unreported" and v["reason"] == "running info not read: timeout"]
    assert len(silent) == 1
    reasons = {(r["table"], r["reason"]) for r in tables["rejected"]}
    assert ("observed", "observed queue of a consumer not in members") in reasons
    assert ("observed", "queue ID is missing or negative") in reasons
    per_group = {g["group"]: g["observed_violations"] for g in tables["groups"]}
    assert sum(per_group.values()) == len(found)
