"""The property-testing kit: our six strategies keep their promises, and the checks catch broken strategies."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from rocket_rebalance.model import MessageQueue
from rocket_rebalance.strategies import create_strategy
from rocket_rebalance.testing import (
    PROMISES,
    Property,
    PropertyViolation,
    RebalanceCase,
    check_balanced,
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


def test_promises_cover_all_six() -> None:
    assert set(PROMISES) == {"AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH", "CONFIG", "MACHINE_ROOM", "MACHINE_ROOM_NEARBY"}


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


class KeyedOnListIdentity:
    """Places queues by a hash that includes the list object's identity: equal inputs, different shares."""

    name = "IDENTITY"

    def allocate(
        self, consumer_group: str, current_cid: str | None, mq_all: object, cid_all: object
    ) -> list[MessageQueue]:
        assert isinstance(cid_all, tuple | list) and isinstance(mq_all, tuple | list)
        return [
            mq for i, mq in enumerate(mq_all) if hash((mq, id(cid_all))) % len(cid_all) == cid_all.index(current_cid)
        ]


def test_checks_catch_broken_strategies() -> None:
    with pytest.raises(PropertyViolation, match="for the same inputs"):
        check_deterministic(Flaky(), CASE)
    with pytest.raises(PropertyViolation, match="input order changed"):
        check_order_independent(KeyedOnListIdentity(), CASE)
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
