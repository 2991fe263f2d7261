"""The per-group analysis against the library, group by group, in plain Python (no Spark needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocket_rebalance import route, whatif
from rocket_rebalance.model import MessageQueue, prepare_rebalance_input
from rocket_rebalance.pipeline import SAMPLE_SCENARIO, SAMPLE_SNAPSHOT
from rocket_rebalance.pipeline.analysis import analyze_group as analyze_rows
from rocket_rebalance.pipeline.movement import offsets_from_rows
from rocket_rebalance.pipeline.rows import as_dicts
from rocket_rebalance.pipeline.scenario import ScenarioError, apply_scenario, load_scenario
from rocket_rebalance.pipeline.schema import check_snapshot
from rocket_rebalance.pipeline.sides import topic_queues
from rocket_rebalance.pipeline.validate import row_reason
from rocket_rebalance.pipeline.views import view_digest
from rocket_rebalance.plan import movement, plan, split_view
from rocket_rebalance.snapshot_folder import SnapshotError
from rocket_rebalance.strategies import create_strategy

TOPIC = "OrderTopic"
BROKERS = ("broker-a", "broker-b")
CIDS = [f"10.0.0.{k}@{4000 + k}#17000000{k}" for k in range(1, 7)]


def analyze_group(row: dict[str, Any], scenario: Any = None, compare: bool = False) -> dict[str, Any]:
    """The analysis with named columns, as these tests read it."""
    return as_dicts(analyze_rows(row, scenario, compare))


def side(
    members: list[tuple[str, list[str] | None]],
    strategy: str = "AVG",
    options: dict[str, Any] | None = None,
    model: str = "CLUSTERING",
    queues: int = 4,
    brokers: tuple[str, ...] = BROKERS,
) -> dict[str, Any]:
    return {
        "settings": [
            {"strategy": strategy, "message_model": model, "options": json.dumps(options) if options else None}
        ],
        "topics": [TOPIC],
        "routes": [{"topic": TOPIC, "broker": b, "read_queue_nums": queues, "perm": 6} for b in brokers],
        "members": [{"client_id": cid, "view": view} for cid, view in members],
    }


def queues_of(brokers: tuple[str, ...] = BROKERS, count: int = 4) -> list[MessageQueue]:
    return [MessageQueue(TOPIC, b, q) for b in brokers for q in range(count)]


def assignment_map(rows: list[dict[str, Any]], side_name: str) -> dict[str, list[MessageQueue]]:
    found: dict[str, list[MessageQueue]] = {}
    for row in rows:
        if row["side"] == side_name:
            found.setdefault(row["owner"], []).append(MessageQueue(row["topic"], row["broker"], row["queue_id"]))
    return found


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("AVG", None),
        ("AVG_BY_CIRCLE", None),
        ("CONSISTENT_HASH", {"virtual_node_count": 7}),
        ("MACHINE_ROOM_NEARBY", {"inner": "AVG"}),
    ],
)
def test_assignments_equal_the_library_plan(name: str, options: dict[str, Any] | None) -> None:
    cids = ["hz@" + c for c in CIDS[:3]] + ["sh@" + c for c in CIDS[3:5]]
    result = analyze_group({"group": "G1", "before": side([(c, None) for c in cids], name, options)})
    strategy = create_strategy(name, **(options or {}))
    data = prepare_rebalance_input(queues_of(), cids)
    expected = {cid: share for cid, share in plan(strategy, "G1", data.mq_all, data.cid_all).items() if share}
    got = assignment_map(result["assignments"], "before")
    assert {cid: sorted(qs) for cid, qs in got.items()} == {cid: sorted(qs) for cid, qs in expected.items()}
    assert [v for v in result["violations"] if v["kind"] != "idle_consumer"] == []


def test_split_view_violations_equal_plan_split_view() -> None:
    stale = CIDS[:2]  # these two have not seen the third consumer yet
    members = [(CIDS[0], stale), (CIDS[1], stale), (CIDS[2], None)]
    result = analyze_group({"group": "G1", "before": side(members)})
    strategy = create_strategy("AVG")
    data = prepare_rebalance_input(queues_of(), CIDS[:3])
    views = {CIDS[0]: stale, CIDS[1]: stale, CIDS[2]: list(data.cid_all)}
    expected = split_view(strategy, "G1", data.mq_all, views)
    kinds: dict[str, list[MessageQueue]] = {"double_owned": [], "unowned": []}
    for row in result["violations"]:
        if row["kind"] in kinds:
            kinds[row["kind"]].append(MessageQueue(row["topic"], row["broker"], row["queue_id"]))
            assert row["reason"].startswith("split view")
    assert kinds["double_owned"] == expected.double_owned
    assert kinds["unowned"] == expected.unowned
    assert expected.double_owned  # the planted split view really produces double owners


def test_movement_matches_plan_movement_on_a_join() -> None:
    before_side = side([(c, None) for c in CIDS[:3]])
    after_side = side([(c, None) for c in CIDS[:4]])
    result = analyze_group({"group": "G1", "before": before_side, "after": after_side, "offsets": {}}, compare=True)
    strategy = create_strategy("AVG")
    old = prepare_rebalance_input(queues_of(), CIDS[:3])
    new = prepare_rebalance_input(queues_of(), CIDS[:4])
    expected = movement(plan(strategy, "G1", old.mq_all, old.cid_all), plan(strategy, "G1", new.mq_all, new.cid_all))
    (row,) = result["movement"]
    assert (row["moved"], row["minimum"], row["queues"]) == (len(expected.moved), expected.minimum, expected.queues)
    moved = [MessageQueue(r["topic"], r["broker"], r["queue_id"]) for r in result["moved_queues"]]
    assert moved == expected.moved
    assert result["groups"][0]["rebalances"] is True


@pytest.mark.parametrize("name", ["AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH"])
def test_movement_matches_the_simulate_command(name: str) -> None:
    """The same join, leave and broker outage through ``rocket-rebalance simulate``'s engine and the pipeline."""
    topic_route = route.TopicRoute(TOPIC, tuple(route.QueueData(b, 4, 4) for b in (*BROKERS, "broker-c")))
    members = CIDS[:4]
    change = whatif.Change(joins=(CIDS[4],), leaves=(CIDS[1],), brokers_down=("broker-b",))
    (outcome,) = whatif.simulate([create_strategy(name)], "G1", [topic_route], members, change)
    before = side([(c, None) for c in members], name, brokers=(*BROKERS, "broker-c"))
    scenario = load_scenario(
        {
            "changes": [
                {"action": "join", "group": "G1", "client_ids": [CIDS[4]]},
                {"action": "leave", "group": "G1", "client_ids": [CIDS[1]]},
                {"action": "broker_down", "broker": "broker-b"},
            ]
        }
    )
    result = analyze_group({"group": "G1", "before": before, "offsets": {}}, scenario)
    (row,) = result["movement"]
    expected = outcome.movement
    assert (row["moved"], row["minimum"], row["queues"]) == (len(expected.moved), expected.minimum, expected.queues)
    assert [MessageQueue(r["topic"], r["broker"], r["queue_id"]) for r in result["moved_queues"]] == expected.moved


def test_exposure_counts_committed_to_in_flight_or_max_on_moved_queues() -> None:
    offsets = [
        {
            "topic": TOPIC,
            "broker": mq.broker_name,
            "queue_id": mq.queue_id,
            "max_offset": 1000,
            "committed_offset": 900,
            "in_flight_offset": 950 if mq.queue_id % 2 else None,
        }
        for mq in queues_of()
    ]
    row = {"group": "G1", "before": side([(c, None) for c in CIDS[:2]]), "offsets": offsets_from_rows(offsets)}
    scenario = load_scenario({"changes": [{"action": "join", "group": "G1", "client_ids": [CIDS[2]]}]})
    result = analyze_group(row, scenario)
    expected = sum(50 if r["queue_id"] % 2 else 100 for r in result["moved_queues"])
    assert result["moved_queues"] and result["movement"][0]["exposure"] == expected
    assert result["groups"][0]["exposure"] == expected


def test_broadcasting_every_consumer_owns_every_queue_and_no_violation() -> None:
    result = analyze_group({"group": "G1", "before": side([(c, None) for c in CIDS[:3]], model="BROADCASTING")})
    assert len(result["assignments"]) == 3 * len(queues_of())
    assert result["violations"] == []
    assert result["balance"][0]["max_over_avg"] == 1.0


def test_planted_strategy_violations_carry_their_reason() -> None:
    config = {"message_queues": [{"topic": TOPIC, "brokerName": "broker-a", "queueId": 0}]}
    result = analyze_group({"group": "G1", "before": side([(c, None) for c in CIDS[:2]], "CONFIG", config)})
    reasons = {(v["kind"], v["reason"].split(":")[0]) for v in result["violations"]}
    assert ("double_owned", "CONFIG overlap") in reasons and ("unowned", "CONFIG") in reasons
    rooms = analyze_group(
        {
            "group": "G2",
            "before": side(
                [(c, None) for c in CIDS[:2]],
                "MACHINE_ROOM",
                {"consumer_idcs": ["hz"]},
                brokers=("hz@broker-a", "sh@broker-b"),
            ),
        }
    )
    unowned = [v for v in rooms["violations"] if v["kind"] == "unowned"]
    assert {v["broker"] for v in unowned} == {"sh@broker-b"} and len(unowned) == 4
    assert all(v["reason"].startswith("MACHINE_ROOM") for v in unowned)
    dup = analyze_group({"group": "G3", "before": side([(CIDS[0], None), (CIDS[0], None)])})
    assert {v["reason"].split(":")[0] for v in dup["violations"] if v["kind"] == "double_owned"} == {
        "duplicate client ID"
    }
    many = analyze_group({"group": "G4", "before": side([(c, None) for c in CIDS], queues=1, brokers=("b",))})
    idle = [v for v in many["violations"] if v["kind"] == "idle_consumer"]
    assert len(idle) == 5 and {v["reason"] for v in idle} == {"more consumers than queues"}
    pushed = analyze_group(
        {"group": "G5", "before": side([(CIDS[0], None), (CIDS[0], None), (CIDS[1], None)], queues=2, brokers=("b",))}
    )  # two distinct consumers for two queues, but Java counts the shared ID twice: the last one gets nothing
    idle = [v for v in pushed["violations"] if v["kind"] == "idle_consumer"]
    assert [(v["client_id"], v["reason"]) for v in idle] == [
        (CIDS[1], "duplicate client ID: 3 members listed for 2 queues, 2 distinct")
    ]


def test_bad_settings_and_orphan_members_are_rejected_not_analyzed() -> None:
    result = analyze_group({"group": "G1", "before": side([(CIDS[0], None)], "ROUND_ROBIN")})
    assert {(r["table"], r["reason"].split(" ")[0]) for r in result["rejected"]} == {
        ("groups", "unknown"),
        ("members", "group"),
        ("subscriptions", "group"),
    }
    assert result["assignments"] == [] and result["groups"] == []
    orphan = side([(CIDS[0], None)])
    orphan["topics"] = None
    result = analyze_group({"group": "G2", "before": orphan})
    assert [r["reason"] for r in result["rejected"]] == ["member of a group with no subscription"]
    bad_options = analyze_group({"group": "G3", "before": side([(CIDS[0], None)], "AVG", {"colour": "red"})})
    assert "no option colour" in bad_options["rejected"][0]["reason"]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(CIDS), min_size=1, max_size=6, unique=True),
    st.lists(st.booleans(), min_size=6, max_size=6),
    st.sampled_from(["AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH"]),
    st.integers(1, 6),
)
def test_any_group_equals_split_view_of_the_library(
    members: list[str], stale: list[bool], name: str, queues: int
) -> None:
    """Double-owned and unowned queues are exactly what plan.split_view finds, for any views.

    Client IDs are unique here: split_view keys consumers by ID, the pipeline counts consumer processes.
    """
    first_view = sorted(set(members))[:-1]
    rows = [(cid, first_view if stale[k] else None) for k, cid in enumerate(members)]
    result = analyze_group({"group": "G", "before": side(rows, name, queues=queues)})
    data = prepare_rebalance_input(queues_of(count=queues), members)
    views = {cid: (first_view if stale[k] else list(data.cid_all)) for k, cid in enumerate(members)}
    expected = split_view(create_strategy(name), "G", data.mq_all, views)
    found: dict[str, list[MessageQueue]] = {"double_owned": [], "unowned": []}
    for row in result["violations"]:
        if row["kind"] in found:
            found[row["kind"]].append(MessageQueue(row["topic"], row["broker"], row["queue_id"]))
    assert found["double_owned"] == expected.double_owned
    assert found["unowned"] == expected.unowned


def test_scenario_applies_joins_leaves_broker_down_and_strategy() -> None:
    before = side([(c, None) for c in CIDS[:3]])
    scenario = load_scenario(
        {
            "changes": [
                {"action": "join", "group": "G1", "count": 2},
                {"action": "leave", "group": ["G1"], "client_ids": [CIDS[0]]},
                {"action": "broker_down", "broker": "broker-b"},
                {"action": "strategy", "strategy": "CONSISTENT_HASH", "options": {"virtual_node_count": 3}},
            ]
        }
    )
    after = apply_scenario("G1", before, scenario)
    assert after is not None
    assert len(after["members"]) == 4 and CIDS[0] not in {m["client_id"] for m in after["members"]}
    assert after["brokers_down"] == ["broker-b"]
    taken = as_dicts(analyze_rows({"group": "G1", "before": before}, scenario))["assignments"]
    assert {r["broker"] for r in taken if r["side"] == "after"} == {"broker-a"}
    assert after["settings"][0]["strategy"] == "CONSISTENT_HASH"
    untouched = apply_scenario("G2", before, scenario)
    assert untouched is not None and len(untouched["members"]) == 3
    stale = apply_scenario(
        "G1", before, load_scenario({"changes": [{"action": "join", "count": 1, "notified": False}]})
    )
    assert stale is not None
    views = {m["client_id"]: m["view"] for m in stale["members"]}
    assert views[CIDS[0]] == sorted(CIDS[:3]) and list(views.values()).count(None) == 1


@pytest.mark.parametrize("count", [1, 2, 3, 4, 100])
def test_a_leave_count_takes_that_many_or_everyone(count: int) -> None:
    before = side([(c, None) for c in CIDS[:3]])
    after = apply_scenario("G1", before, load_scenario({"changes": [{"action": "leave", "count": count}]}))
    assert after is not None and len(after["members"]) == max(0, 3 - count)


@pytest.mark.parametrize(
    ("scenario", "message"),
    [
        ({"changes": [{"action": "explode"}]}, "unknown action"),
        ({"changes": [{"action": "join"}]}, "needs client_ids or count"),
        ({"changes": [{"action": "strategy", "strategy": "NOPE"}]}, "unknown strategy"),
        ({"changes": [{"action": "broker_down"}]}, "broker name"),
        ({"no": "changes"}, "list of changes"),
    ],
)
def test_bad_scenarios_are_refused_up_front(scenario: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        load_scenario(scenario)


def test_row_rules() -> None:
    assert row_reason("routes", {"topic": "T", "broker": "b", "read_queue_nums": -1, "perm": 6}) == (
        "negative read queue count"
    )
    assert row_reason("routes", {"topic": "bad topic", "broker": "b", "read_queue_nums": 1}) == "invalid topic name"
    assert row_reason("members", {"group": "G", "client_id": ""}) == "client ID is missing"
    assert row_reason("members", {"group": "G\n", "client_id": "c"}) == "invalid group name"
    offset = {"group": "G", "topic": "T", "broker": "b", "queue_id": 0, "max_offset": 5, "committed_offset": 9}
    assert row_reason("offsets", offset) == "committed offset beyond max offset"
    assert row_reason("offsets", {**offset, "committed_offset": 3, "in_flight_offset": 2}) == (
        "in-flight offset outside committed..max"
    )
    assert row_reason("offsets", {**offset, "committed_offset": 3, "in_flight_offset": 4}) is None


def test_missing_table_or_column_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match="table 'offsets' not found"):
        for name in ("routes", "members", "subscriptions", "groups"):
            (tmp_path / f"{name}.jsonl").write_text((SAMPLE_SNAPSHOT / f"{name}.jsonl").read_text())
        check_snapshot(tmp_path, ["routes", "members", "subscriptions", "groups", "offsets"])
    (tmp_path / "groups.jsonl").write_text('{"group": "G", "message_model": "CLUSTERING"}\n')
    with pytest.raises(SnapshotError, match="table groups has no column strategy"):
        check_snapshot(tmp_path, ["groups"])


def test_streaming_reference_writes_what_the_in_memory_reference_returns(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from rocket_rebalance.pipeline.reference import run_reference, write_local
    from rocket_rebalance.pipeline.schema import OUTPUT_TABLES

    scenario = load_scenario(SAMPLE_SCENARIO.read_text())
    counts = write_local(SAMPLE_SNAPSHOT, str(tmp_path), scenario=scenario, chunk=2).rows
    expected = run_reference(SAMPLE_SNAPSHOT, scenario=scenario)
    for name in OUTPUT_TABLES:
        rows = pq.read_table(tmp_path / f"{name}.parquet").to_pylist()
        key = lambda row: json.dumps(row, sort_keys=True)  # noqa: E731
        assert sorted(map(key, rows)) == sorted(map(key, expected[name])), name
        assert counts[name] == len(rows)


def test_the_sample_snapshot_and_scenario_are_valid() -> None:
    check_snapshot(SAMPLE_SNAPSHOT, ["routes", "members", "subscriptions", "groups", "offsets"])
    assert load_scenario(SAMPLE_SCENARIO.read_text()).changes


def test_impact_without_snapshot_uses_the_packaged_sample(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``rocket-rebalance impact --out DIR`` alone runs the sample snapshot with the sample scenario."""
    from rocket_rebalance.cli import build_parser
    from rocket_rebalance.pipeline import job

    seen: dict[str, Any] = {}

    def fake_run(snapshot: Any, out: Any, **kwargs: Any) -> Any:
        seen.update(snapshot=snapshot, out=out, **kwargs)
        return job.ImpactResult(str(out), {}, {"groups": 0}, None, 0.0, [])

    monkeypatch.setattr(job, "run_impact", fake_run)
    args = build_parser().parse_args(["impact", "--out", str(tmp_path), "--conf", "spark.x=1"])
    job.run_from_args(args)
    assert Path(seen["snapshot"]) == SAMPLE_SNAPSHOT and seen["scenario"] is not None
    # no --master: unset (local[*] if Spark runs); the engine by size, --conf making it Spark
    assert seen["master"] is None and seen["conf"] == {"spark.x": "1"} and seen["engine"] == "auto"


def member_rows(result: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [v for v in result["violations"] if v["kind"] == kind]


def test_a_view_given_by_digest_is_the_list_it_names() -> None:
    stale = CIDS[:2]
    in_full = side([(CIDS[0], None), (CIDS[1], None), (CIDS[2], stale)])
    by_digest = side([(CIDS[0], None), (CIDS[1], None), (CIDS[2], None)])
    by_digest["members"][2]["view_digest"] = view_digest(reversed(stale))  # a list's digest ignores its order
    by_digest["members"][1]["view_digest"] = view_digest(CIDS[:4])  # the group's own list: consistent
    by_digest["members"].append({"client_id": CIDS[3], "view": stale})  # a list recorded in full names it too
    in_full["members"].append({"client_id": CIDS[3], "view": stale})
    assert analyze_group({"group": "G1", "before": by_digest}) == analyze_group({"group": "G1", "before": in_full})


def test_after_a_change_a_digest_may_name_the_list_before_it() -> None:
    before = side([(c, None) for c in CIDS[:3]])
    after_in_full = side([(CIDS[0], CIDS[:3]), (CIDS[1], None), (CIDS[2], None), (CIDS[3], None)])
    after_by_digest = side([(c, None) for c in CIDS[:4]])
    after_by_digest["members"][0]["view_digest"] = view_digest(CIDS[:3])
    results = [
        analyze_group({"group": "G1", "before": before, "after": after, "offsets": {}}, compare=True)
        for after in (after_in_full, after_by_digest)
    ]
    assert results[0] == results[1]
    assert any(v["reason"].startswith("split view") for v in results[0]["violations"])


def test_a_digest_naming_no_known_list_is_reported_not_guessed() -> None:
    data = side([(c, None) for c in CIDS[:3]])
    data["members"][2]["view_digest"] = view_digest(["10.9.9.9@1#1"])
    result = analyze_group({"group": "G1", "before": data})
    (row,) = member_rows(result, "unknown_view")
    assert row["client_id"] == CIDS[2] and view_digest(["10.9.9.9@1#1"]) in row["reason"]
    assert CIDS[2] not in {a["owner"] for a in result["assignments"]}
    assert [v["client_id"] for v in member_rows(result, "idle_consumer")] == []


@settings(max_examples=150)
@given(
    st.lists(
        st.tuples(st.sampled_from(["broker-a", "broker-b", "broker-c"]), st.integers(0, 6), st.sampled_from([2, 4, 6])),
        max_size=3,
        unique_by=lambda row: row[0],
    ),
    st.sets(st.sampled_from(["broker-a", "broker-b", "broker-x"])),
)
def test_a_topics_queues_with_brokers_down_are_the_route_models_and_the_whole_lists_objects(
    rows: list[tuple[str, int, int]], down: set[str]
) -> None:
    """The queues a side sees with brokers down (cut out of the cached whole list) equal what the route model gives
    built afresh, and are the very objects of the whole list (what makes movement's lookups and hashes cheap)."""
    routes = [{"topic": "T", "broker": b, "read_queue_nums": n, "perm": p} for b, n, p in rows]
    fresh = route.TopicRoute("T", tuple(route.QueueData(b, n, n, p) for b, n, p in sorted(rows)))
    fresh = fresh.without_brokers(down & set(fresh.brokers()))
    expected = prepare_rebalance_input(fresh.subscribe_queues(), (), warn=False).mq_all
    whole = {id(mq) for mq in topic_queues("T", routes)}
    found = topic_queues("T", routes, down)
    assert found == expected and all(id(mq) in whole for mq in found)


def test_a_route_refused_whole_is_refused_with_a_broker_down_too() -> None:
    """As the route model does: the whole route is checked before its brokers leave it."""
    routes = [
        {"topic": "T", "broker": "broker-a", "read_queue_nums": 65_536, "perm": 6},
        {"topic": "T", "broker": "broker-b", "read_queue_nums": 2, "perm": 6},
    ]
    for down in (set(), {"broker-a"}):
        with pytest.raises(route.RouteError):
            topic_queues("T", routes, down)


def test_parquet_stored_with_the_specs_own_types_is_read_with_that_schema(tmp_path: Path) -> None:
    """exact_parquet_columns: the first file's spec columns when every file stores them with the spec's own types
    (Spark then reads with that schema, no casts); ``None`` as soon as one file needs a cast, or there is no file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rocket_rebalance.pipeline.schema import INPUT_TABLES, exact_parquet_columns

    spec = INPUT_TABLES["routes"]
    table = tmp_path / "routes.parquet"
    table.mkdir()
    assert exact_parquet_columns(table, spec) is None
    exact = pa.table({"topic": ["T"], "broker": ["b"], "read_queue_nums": pa.array([4], pa.int32())})
    pq.write_table(exact, table / "part-0.parquet")
    assert [c.name for c in exact_parquet_columns(table, spec) or ()] == ["topic", "broker", "read_queue_nums"]
    wider = exact.set_column(2, "read_queue_nums", pa.array([4], pa.int64()))
    pq.write_table(wider, table / "part-1.parquet")
    assert exact_parquet_columns(table, spec) is None
    members = tmp_path / "members.parquet"
    views = pa.array([["a", "b"]], pa.list_(pa.string()))
    pq.write_table(pa.table({"group": ["G"], "client_id": ["a"], "view": views}), members)
    found = exact_parquet_columns(members, INPUT_TABLES["members"])
    assert [c.name for c in found or ()] == ["group", "client_id", "view"]
