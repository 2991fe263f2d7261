"""The property-testing kit: every built-in strategy keeps its promises, and the checks catch broken strategies."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocket_rebalance.model import MessageQueue
from rocket_rebalance.plan import plan
from rocket_rebalance.strategies import STRATEGY_NAMES, create_strategy
from rocket_rebalance.testing import (
    PROMISES,
    Property,
    PropertyViolation,
    RebalanceCase,
    check_balanced,
    check_balanced_per_topic,
    check_bounded_load,
    check_deterministic,
    check_full_coverage,
    check_monotonic_join,
    check_monotonic_leave,
    check_no_double_owner,
    check_order_independent,
    check_strategy,
    client_ids,
    rebalance_inputs,
    split_view_report,
)

ROOMS = ["hz", "sh"]


@settings(max_examples=60, deadline=None)
@given(rebalance_inputs(), client_ids())
def test_avg_circle_and_hash_keep_their_promises(case: RebalanceCase, newcomer: str) -> None:
    for name in ("AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH"):
        check_strategy(create_strategy(name), case, newcomer=newcomer)


@settings(max_examples=60, deadline=None)
@given(rebalance_inputs(rooms=ROOMS))
def test_room_strategies_and_config_keep_their_promises(case: RebalanceCase) -> None:
    check_strategy(create_strategy("MACHINE_ROOM", consumer_idcs={"hz"}), case)
    check_strategy(create_strategy("MACHINE_ROOM_NEARBY", inner="AVG"), case)
    check_strategy(create_strategy("MACHINE_ROOM_NEARBY", inner="CONSISTENT_HASH"), case)
    check_strategy(create_strategy("CONFIG", message_queues=case.mq_all[:2]), case)


@settings(max_examples=60, deadline=None)
@given(rebalance_inputs(), st.sampled_from([0.0, 0.1, 0.25, 1.0]), st.integers(1, 50))
def test_the_bounded_hash_keeps_its_promises(case: RebalanceCase, eps: float, nodes: int) -> None:
    check_strategy(create_strategy("CONSISTENT_HASH_BOUNDED", eps=eps, virtual_node_count=nodes), case)
    if eps == 0:  # eps = 0 is perfect balance
        check_balanced(plan(create_strategy("CONSISTENT_HASH_BOUNDED", eps=0, virtual_node_count=nodes), "G", *case))


@settings(max_examples=60, deadline=None)
@given(rebalance_inputs(max_queues=64), st.sampled_from(["AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH_BOUNDED"]))
def test_cross_topic_keeps_its_promises_over_several_topics(case: RebalanceCase, inner: str) -> None:
    check_strategy(create_strategy("CROSS_TOPIC", inner=inner), case)


def test_promises_cover_every_strategy() -> None:
    assert set(PROMISES) == set(STRATEGY_NAMES)


def test_the_new_checks_catch_what_they_exist_for() -> None:
    two_topics = {"a": [MessageQueue("T", "b", 0), MessageQueue("T", "b", 1)], "b": [MessageQueue("U", "b", 0)]}
    check_balanced(two_topics)  # 2 and 1 in total ...
    with pytest.raises(PropertyViolation, match="unbalanced"):
        check_balanced_per_topic(two_topics)  # ... but 2 and 0 of T
    bounded = create_strategy("CONSISTENT_HASH_BOUNDED", eps=0.5)  # cap ceil(1.5 * 8 / 2) = 6
    check_bounded_load(bounded, {"a": list(QUEUES[:6]), "b": list(QUEUES[6:])})
    with pytest.raises(PropertyViolation, match="above the cap of 6 queues"):
        check_bounded_load(bounded, {"a": list(QUEUES[:7]), "b": list(QUEUES[7:])})
    with pytest.raises(PropertyViolation, match="has no cap"):
        check_bounded_load(create_strategy("AVG"), {"a": list(QUEUES)})


# Broken strategies: each check must catch the defect it exists for.
QUEUES = tuple(MessageQueue("T", "b", i) for i in range(8))
CASE = RebalanceCase(QUEUES, ("c1", "c2", "c3"))


class Flaky:
    name = "FLAKY"

    def __init__(self) -> None:
        self.calls = 0

    def allocate(
        self, consumer_group: str, current_cid: str | None, mq_all: object, cid_all: object
    ) -> list[MessageQueue]:
        self.calls += 1
        return list(QUEUES[self.calls % 2 :: 2])


class KeyedOnListType:
    """Splits by position when given a plain tuple and deals like cards otherwise: equal inputs, different shares
    (a stand-in for any hidden dependence on how the lists were built; deterministic, unlike one on ``id``)."""

    name = "LIST_TYPE"

    def allocate(
        self, consumer_group: str, current_cid: str | None, mq_all: object, cid_all: object
    ) -> list[MessageQueue]:
        inner = create_strategy("AVG" if type(cid_all) is tuple else "AVG_BY_CIRCLE")
        return list(inner.allocate(consumer_group, current_cid, mq_all, cid_all) or ())  # type: ignore[arg-type]


def test_checks_catch_broken_strategies() -> None:
    with pytest.raises(PropertyViolation, match="for the same inputs"):
        check_deterministic(Flaky(), CASE)
    with pytest.raises(PropertyViolation, match="input order changed"):
        check_order_independent(KeyedOnListType(), CASE)
    with pytest.raises(PropertyViolation, match="several owners"):
        check_no_double_owner({"a": list(QUEUES[:2]), "b": list(QUEUES[1:3])})
    with pytest.raises(PropertyViolation, match="nobody owns"):
        check_full_coverage({"a": list(QUEUES[:2])}, QUEUES)
    with pytest.raises(PropertyViolation, match="unbalanced"):
        check_balanced({"a": list(QUEUES[:6]), "b": list(QUEUES[6:])})
    with pytest.raises(PropertyViolation, match="moved queues between others"):
        check_monotonic_join(create_strategy("AVG"), CASE, "c0")
    with pytest.raises(PropertyViolation, match="moved others' queues"):
        check_monotonic_leave(create_strategy("AVG"), CASE, "c1")
    with pytest.raises(PropertyViolation):
        check_strategy(create_strategy("AVG"), CASE, Property.MONOTONIC)


def test_split_view_report_shows_the_window_of_a_join() -> None:
    report = split_view_report(create_strategy("AVG"), CASE, ["c1", "c2", "c3", "c4"])
    assert report.double_owned or report.unowned
    calm = split_view_report(create_strategy("AVG"), CASE, CASE.cid_all)
    assert calm.double_owned == [] and calm.unowned == []
