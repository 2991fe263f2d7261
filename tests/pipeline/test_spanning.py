"""This library's own strategies through the per-group analysis, in plain Python (no Spark): CROSS_TOPIC planned over
all of a group's topics in one call yet reported topic by topic, and CONSISTENT_HASH_BOUNDED with its options."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from rocket_rebalance.model import MessageQueue, prepare_rebalance_input, sort_queues
from rocket_rebalance.pipeline.analysis import analyze_group
from rocket_rebalance.pipeline.fleetgen import generate_fleet
from rocket_rebalance.pipeline.rows import as_dicts
from rocket_rebalance.pipeline.scenario import load_scenario
from rocket_rebalance.pipeline.settings import COMPARED_STRATEGIES, parse_strategy
from rocket_rebalance.plan import Plan, movement, plan, split_view
from rocket_rebalance.strategies import AllocateMessageQueueStrategy, create_strategy

TOPICS = [f"Topic{k}" for k in range(10)]
BROKERS = ("broker-a", "broker-b")
CIDS = [f"10.0.0.{k}@{4000 + k}#17000000{k}" for k in range(1, 7)]


def side(
    members: list[tuple[str, list[str] | None]],
    strategy: str,
    options: dict[str, Any] | None = None,
    topics: list[str] = TOPICS,
) -> dict[str, Any]:
    """A group side subscribed to ``topics``, each 10 queues on two brokers (5 each)."""
    return {
        "settings": [
            {"strategy": strategy, "message_model": "CLUSTERING", "options": json.dumps(options) if options else None}
        ],
        "topics": topics,
        "routes": [{"topic": t, "broker": b, "read_queue_nums": 5, "perm": 6} for t in topics for b in BROKERS],
        "members": [{"client_id": cid, "view": view} for cid, view in members],
    }


def analyzed(row: dict[str, Any], scenario: Any = None) -> dict[str, Any]:
    return as_dicts(analyze_group(row, scenario, compare=scenario is not None))


def all_queues(topics: list[str] = TOPICS) -> list[MessageQueue]:
    return [MessageQueue(t, b, q) for t in topics for b in BROKERS for q in range(5)]


def whole_plan(strategy: AllocateMessageQueueStrategy, members: list[str]) -> Plan:
    """Every topic's queues in one call: what a consumer running a strategy that spans topics computes."""
    ready = prepare_rebalance_input(all_queues(), members)
    return plan(strategy, "G", ready.mq_all, ready.cid_all)


def held(rows: list[dict[str, Any]], side_name: str = "before") -> dict[str, set[MessageQueue]]:
    found: dict[str, set[MessageQueue]] = {}
    for row in rows:
        if row["side"] == side_name:
            found.setdefault(row["owner"], set()).add(MessageQueue(row["topic"], row["broker"], row["queue_id"]))
    return found


def test_cross_topic_plans_all_topics_together_and_reports_each_topic() -> None:
    result = analyzed({"group": "G", "before": side([(c, None) for c in CIDS[:4]], "CROSS_TOPIC")})
    expected = whole_plan(create_strategy("CROSS_TOPIC"), CIDS[:4])
    assert held(result["assignments"]) == {cid: set(share) for cid, share in expected.items()}
    assert result["violations"] == []
    balance = result["balance"]
    assert [row["topic"] for row in balance] == TOPICS  # one row per topic, as for any strategy
    assert all(row["max"] - row["min"] <= 1 and row["queues"] == 10 for row in balance)
    assert sorted(row["queues"] for row in result["skew"]) == [25, 25, 25, 25]
    (group,) = result["groups"]
    assert group["strategy_before"] == "CROSS_TOPIC-AVG" and group["queues_before"] == 100


def test_each_topic_on_its_own_piles_remainders_where_cross_topic_does_not() -> None:
    avg = analyzed({"group": "G", "before": side([(c, None) for c in CIDS[:4]], "AVG")})
    assert sorted(row["queues"] for row in avg["skew"]) == [20, 20, 30, 30]


def test_a_stale_view_plans_every_topic_from_that_view() -> None:
    """A consumer that has not seen the newest member computes its share of all the topics from its old list."""
    stale = CIDS[:3]
    members = [(CIDS[0], stale), (CIDS[1], None), (CIDS[2], None), (CIDS[3], None)]
    result = analyzed({"group": "G", "before": side(members, "CROSS_TOPIC")})
    strategy = create_strategy("CROSS_TOPIC")
    ready = prepare_rebalance_input(all_queues(), CIDS[:4])
    views = {CIDS[0]: stale, **{cid: list(ready.cid_all) for cid in CIDS[1:4]}}
    expected = split_view(strategy, "G", ready.mq_all, views)
    found: dict[str, list[MessageQueue]] = {"double_owned": [], "unowned": []}
    for row in result["violations"]:
        if row["kind"] in found:
            found[row["kind"]].append(MessageQueue(row["topic"], row["broker"], row["queue_id"]))
            assert row["reason"].startswith("split view")
    assert sort_queues(found["double_owned"]) == expected.double_owned and expected.double_owned
    assert sort_queues(found["unowned"]) == expected.unowned


def test_a_join_moves_what_the_whole_plan_moves_reported_per_topic() -> None:
    before = side([(c, None) for c in CIDS[:4]], "CROSS_TOPIC", {"inner": "CONSISTENT_HASH_BOUNDED"})
    scenario = load_scenario({"changes": [{"action": "join", "client_ids": [CIDS[4]]}]})
    result = analyzed({"group": "G", "before": before, "offsets": {}}, scenario)
    strategy = parse_strategy("CROSS_TOPIC", json.dumps({"inner": "CONSISTENT_HASH_BOUNDED"}))
    change = movement(whole_plan(strategy, CIDS[:4]), whole_plan(strategy, CIDS[:5]))
    moved = [MessageQueue(r["topic"], r["broker"], r["queue_id"]) for r in result["moved_queues"]]
    assert sort_queues(moved) == change.moved
    per_topic = Counter(mq.topic for mq in change.moved)
    assert {r["topic"]: r["moved"] for r in result["movement"]} == {t: per_topic[t] for t in TOPICS}
    assert sorted(r["queues"] for r in result["skew"] if r["side"] == "after") == [20] * 5
    (group,) = result["groups"]
    assert group["moved"] == len(change.moved) and group["rebalances"] is True


def test_a_switch_to_cross_topic_moves_from_each_topic_on_its_own_to_all_together() -> None:
    before = side([(c, None) for c in CIDS[:4]], "AVG")
    scenario = load_scenario({"changes": [{"action": "strategy", "strategy": "CROSS_TOPIC"}]})
    result = analyzed({"group": "G", "before": before, "offsets": {}}, scenario)
    avg = create_strategy("AVG")
    per_topic: Plan = {}
    for topic in TOPICS:
        ready = prepare_rebalance_input(all_queues([topic]), CIDS[:4])
        for cid, share in plan(avg, "G", ready.mq_all, ready.cid_all).items():
            per_topic.setdefault(cid, []).extend(share)
    change = movement(per_topic, whole_plan(create_strategy("CROSS_TOPIC"), CIDS[:4]))
    (group,) = result["groups"]
    assert (group["strategy_before"], group["strategy_after"]) == ("AVG", "CROSS_TOPIC-AVG")
    assert group["moved"] == len(change.moved) > 0 and group["violations_after"] == 0
    assert sorted(r["queues"] for r in result["skew"] if r["side"] == "after") == [25] * 4


def test_the_comparison_shows_the_skew_cross_topic_removes() -> None:
    before = side([(c, None) for c in CIDS[:4]], "AVG")
    changes = [{"action": "join", "client_ids": [CIDS[4]]}, {"action": "leave", "client_ids": [CIDS[0]]}]
    result = analyzed({"group": "G", "before": before, "offsets": {}}, load_scenario({"changes": changes}))
    rows = {r["strategy"]: r for r in result["comparison"]}
    assert set(rows) == {*COMPARED_STRATEGIES, "current"}
    assert rows["current"]["max_skew"] == rows["AVG"]["max_skew"] == 1.2  # 30, 30, 20, 20 over four consumers
    assert rows["CROSS_TOPIC"]["max_skew"] == 1.0  # 25 each
    assert rows["CROSS_TOPIC"]["max_over_avg"] == rows["AVG"]["max_over_avg"] == 1.2  # each topic: 3, 3, 2, 2
    strategy = create_strategy("CROSS_TOPIC")
    change = movement(whole_plan(strategy, CIDS[:4]), whole_plan(strategy, CIDS[1:5]))
    assert (rows["CROSS_TOPIC"]["moved"], rows["CROSS_TOPIC"]["queues"]) == (len(change.moved), 100)
    bounded = rows["CONSISTENT_HASH_BOUNDED"]  # eps 0.25: at most ceil(1.25 * 10 / 4) = 4 queues of a topic
    assert bounded["max_over_avg"] <= 4 / 2.5 and not bounded["failed"]


def test_the_current_strategy_with_default_options_has_the_compared_figures() -> None:
    before = side([(c, None) for c in CIDS[:3]], "CROSS_TOPIC")
    scenario = load_scenario({"changes": [{"action": "join", "count": 2}]})
    rows = {r["strategy"]: r for r in analyzed({"group": "G", "before": before, "offsets": {}}, scenario)["comparison"]}
    assert {k: v for k, v in rows["current"].items() if k != "current" and k != "strategy"} == {
        k: v for k, v in rows["CROSS_TOPIC"].items() if k != "current" and k != "strategy"
    }


def test_bounded_hash_with_its_options_equals_the_library_topic_by_topic() -> None:
    options = {"eps": 0, "virtual_node_count": 7}
    result = analyzed({"group": "G", "before": side([(c, None) for c in CIDS[:4]], "CONSISTENT_HASH_BOUNDED", options)})
    strategy = create_strategy("CONSISTENT_HASH_BOUNDED", **options)
    expected: dict[str, set[MessageQueue]] = {}
    for topic in TOPICS:
        ready = prepare_rebalance_input(all_queues([topic]), CIDS[:4])
        for cid, share in plan(strategy, "G", ready.mq_all, ready.cid_all).items():
            expected.setdefault(cid, set()).update(share)
    assert held(result["assignments"]) == expected
    assert all(row["max"] - row["min"] <= 1 for row in result["balance"])  # eps 0: each topic within one queue
    assert result["groups"][0]["strategy_before"] == "CONSISTENT_HASH_BOUNDED"


@pytest.mark.parametrize(
    ("strategy", "options", "reason"),
    [
        ("CONSISTENT_HASH_BOUNDED", {"eps": -1}, "eps must be a finite number >= 0"),
        ("CONSISTENT_HASH_BOUNDED", {"eps": "0.1"}, "eps must be a number, got str"),
        ("CROSS_TOPIC", {"inner": "CONSISTENT_HASH"}, "CROSS_TOPIC's inner strategy must fill given sizes"),
        ("CROSS_TOPIC", {"inner": {"name": "AVG"}}, 'inner must be a strategy name or {"strategy": NAME'),
        ("MACHINE_ROOM_NEARBY", {"inner": {"strategy": "MACHINE_ROOM_NEARBY", "options": {"inner": {
            "strategy": "MACHINE_ROOM_NEARBY", "options": {"inner": {"strategy": "AVG"}}}}}},
         "inner strategies nest at most 2 deep"),
    ],
)  # fmt: skip
def test_bad_options_of_the_new_strategies_reject_the_group(
    strategy: str, options: dict[str, Any], reason: str
) -> None:
    result = analyzed({"group": "G", "before": side([(CIDS[0], None)], strategy, options)})
    groups = [r for r in result["rejected"] if r["table"] == "groups"]
    assert len(groups) == 1 and reason in groups[0]["reason"] and result["assignments"] == []


def test_an_inner_strategy_takes_options_of_its_own() -> None:
    options = {"inner": {"strategy": "CONSISTENT_HASH_BOUNDED", "options": {"eps": 0, "virtual_node_count": 5}}}
    parsed = parse_strategy("CROSS_TOPIC", json.dumps(options))
    expected = create_strategy("CROSS_TOPIC", inner=create_strategy("CONSISTENT_HASH_BOUNDED", eps=0,
                                                                    virtual_node_count=5))  # fmt: skip
    assert whole_plan(parsed, CIDS[:4]) == whole_plan(expected, CIDS[:4])


def test_fleet_gen_gives_a_few_groups_the_new_strategies() -> None:
    settings = [row for table, row in generate_fleet(60, seed=5) if table == "groups"]
    names = Counter(parse_strategy(row["strategy"], row["options"]).name for row in settings)
    own = ["CONSISTENT_HASH_BOUNDED", "CROSS_TOPIC-AVG", "CROSS_TOPIC-CONSISTENT_HASH_BOUNDED"]
    assert all(names[name] for name in own) and sum(names[name] for name in own) < 60 // 5  # present, a small share


def idle_rows(strategy: str, consumers: int, topics: list[str], view: list[str] | None = None) -> list[dict[str, Any]]:
    """The ``idle_consumer`` rows of a group of ``consumers`` on ``topics`` of two queues each (one per broker);
    the last consumer plans on ``view`` when given."""
    cids = CIDS[:consumers]
    row = side([(c, view if c == cids[-1] else None) for c in cids], strategy, topics=topics)
    row["routes"] = [{"topic": t, "broker": b, "read_queue_nums": 1, "perm": 6} for t in topics for b in BROKERS]
    return [v for v in analyzed({"group": "G", "before": row})["violations"] if v["kind"] == "idle_consumer"]


def test_a_strategy_that_spans_topics_is_idle_only_with_nothing_of_any_topic() -> None:
    """10 topics of 2 queues, 4 consumers: CROSS_TOPIC gives each consumer 5 queues in all, though each topic only
    2 of them, which is its plan working, not a fault; AVG leaves two consumers with nothing on every topic."""
    assert idle_rows("CROSS_TOPIC", 4, TOPICS) == []
    avg = idle_rows("AVG", 4, TOPICS)
    assert Counter(v["topic"] for v in avg) == dict.fromkeys(TOPICS, 2)
    assert {v["client_id"] for v in avg} == set(CIDS[2:4])


def test_an_idle_consumer_of_a_spanning_strategy_is_one_row_for_all_topics() -> None:
    """6 consumers for 4 queues in all: two hold nothing anywhere, one row each (no topic, the reason over all
    topics), not one per topic; a consumer missing from its own view is idle over all topics for that reason."""
    rows = idle_rows("CROSS_TOPIC", 6, TOPICS[:2])
    assert sorted((v["topic"], v["client_id"], v["reason"]) for v in rows) == [
        (None, cid, "more consumers than queues") for cid in sorted(CIDS[4:6])
    ]
    missing = idle_rows("CROSS_TOPIC", 3, TOPICS[:2], view=CIDS[:2])  # the third consumer's view lacks itself
    assert [(v["topic"], v["client_id"], v["reason"]) for v in missing] == [
        (None, CIDS[2], "the consumer is missing from its own view of the members")
    ]
