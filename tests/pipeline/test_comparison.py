"""The strategy comparison's figures reused by shape (comparison.GroupShape) are the figures of the group itself."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rocket_rebalance.pipeline import comparison
from rocket_rebalance.pipeline.analysis import analyze_group
from rocket_rebalance.pipeline.rows import as_dicts
from rocket_rebalance.pipeline.scenario import load_scenario
from rocket_rebalance.pipeline.settings import COMPARED_STRATEGIES, compared_strategies

BROKERS = ("broker-a", "broker-b", "broker-c")
CIDS = [f"10.0.{k % 3}.{k}@{4000 + k}#1700000{k}" for k in range(7)]
SCENARIOS = [
    load_scenario({"changes": [{"action": "join", "count": 1}, {"action": "broker_down", "broker": "broker-a"}]}),
    load_scenario({"changes": [{"action": "leave", "count": 1}, {"action": "broker_down", "broker": "broker-b"}]}),
    load_scenario({"changes": [{"action": "join", "client_ids": [CIDS[0], "10.9.9.9@1#1"]}]}),
]

topic_routes = st.lists(  # a topic: (queues per broker, brokers); few shapes, so groups share them
    st.tuples(st.sampled_from([1, 2, 4]), st.lists(st.sampled_from(BROKERS), min_size=1, max_size=3, unique=True)),
    min_size=1,
    max_size=3,
)
groups = st.tuples(
    topic_routes,
    st.lists(st.sampled_from(CIDS), min_size=0, max_size=5),  # repeats: one client ID listed twice
    st.sampled_from(["AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH"]),
    st.integers(0, 2),
    st.integers(0, 50),
)


def group_row(number: int, shape: tuple[Any, ...]) -> tuple[dict[str, Any], int]:
    """A group with its own topic names and offsets, so two groups of one shape differ in everything else."""
    routes, members, strategy, scenario, lag = shape
    topics = [f"T{number}_{k}" for k in range(len(routes))]
    row = {
        "group": f"G{number}",
        "before": {
            "settings": [{"strategy": strategy, "message_model": "CLUSTERING", "options": None}],
            "topics": topics,
            "routes": [
                {"topic": topic, "broker": broker, "read_queue_nums": count, "perm": 6}
                for topic, (count, brokers) in zip(topics, routes, strict=True)
                for broker in brokers
            ],
            "members": [{"client_id": cid, "view": None} for cid in members],
        },
        "offsets": {
            (topic, broker, queue): (number, lag + queue)
            for topic, (count, brokers) in zip(topics, routes, strict=True)
            for broker in brokers
            for queue in range(count)
        },
    }
    return row, scenario


@settings(max_examples=150, deadline=None)
@given(st.lists(groups, min_size=1, max_size=6))
@example(
    [([(2, ["broker-a", "broker-b"])], CIDS[:2], "AVG", 1, 0), ([(2, ["broker-b", "broker-c"])], CIDS[:2], "AVG", 1, 0)]
)
def test_figures_reused_by_shape_are_each_groups_own(shapes: list[tuple[Any, ...]]) -> None:
    """Groups analysed one after the other (figures of a shape seen before reused) give what each gives alone
    (nothing remembered); every table compared, the comparison and its exposure included. The example: the
    same lengths before and after broker-b goes down, but it held the first queues of one topic and the last of
    the other."""
    comparison._shaped.clear()
    together = [as_dicts(analyze_group(row, SCENARIOS[s])) for row, s in map(group_row, range(len(shapes)), shapes)]
    for number, shape in enumerate(shapes):
        comparison._shaped.clear()
        row, scenario = group_row(number, shape)
        assert as_dicts(analyze_group(row, SCENARIOS[scenario])) == together[number]


def test_a_shape_seen_before_is_reused() -> None:
    """Not a test that could pass by never reusing: the second group of one shape finds its figures."""
    comparison._shaped.clear()
    shape = ([(4, ["broker-a", "broker-b"])], CIDS[:3], "AVG", 0, 7)
    first, scenario = group_row(1, shape)
    analyze_group(first, SCENARIOS[scenario])
    remembered = len(comparison._shaped)
    analyze_group(group_row(2, shape)[0], SCENARIOS[scenario])
    assert remembered > 0 and len(comparison._shaped) == remembered


@settings(max_examples=60, deadline=None)
@given(groups, st.lists(st.sampled_from(COMPARED_STRATEGIES), unique=True))
def test_fewer_compared_strategies_leave_every_other_row_as_it_was(shape: tuple[Any, ...], names: list[str]) -> None:
    """``impact --compare``: with some of the strategies, the comparison has their rows and the current one's,
    each with the figures of the whole comparison; with none, no comparison row at all; every other table is the
    same either way."""
    row, scenario = group_row(0, shape)
    whole = as_dicts(analyze_group(row, SCENARIOS[scenario]))
    fewer = as_dicts(analyze_group(row, SCENARIOS[scenario], compared=tuple(names)))
    assert {name: rows for name, rows in fewer.items() if name != "comparison"} == {
        name: rows for name, rows in whole.items() if name != "comparison"
    }
    by_strategy = {r["strategy"]: r for r in whole["comparison"]}
    expected = [by_strategy[name] for name in [*names, "current"]] if names and by_strategy else []
    assert fewer["comparison"] == expected


def test_compare_names_some_strategies_in_their_order_or_none() -> None:
    assert compared_strategies(",".join(COMPARED_STRATEGIES)) == COMPARED_STRATEGIES
    assert compared_strategies("CROSS_TOPIC, AVG") == ("CROSS_TOPIC", "AVG")
    assert compared_strategies("none") == compared_strategies(" NONE ") == ()
    # the command line's one rule for word values (model.canonical_choice): avg is AVG here as in --strategy
    assert compared_strategies("avg, Consistent_Hash") == ("AVG", "CONSISTENT_HASH")
    for text, said in [
        ("AVG,MACHINE_ROOM", "'MACHINE_ROOM' is not a compared strategy"),
        ("", "'' is not a compared strategy"),
        ("AVG,,CROSS_TOPIC", "'' is not a compared strategy"),
        ("avgg", "'avgg' is not a compared strategy"),
        ("AVG,AVG", "names a strategy twice"),
        ("avg,AVG", "names a strategy twice"),
    ]:
        with pytest.raises(ValueError, match=said):
            compared_strategies(text)
