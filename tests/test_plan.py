"""Whole-group plans equal per-consumer allocation, and the measures built on plans."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rocket_rebalance.model import MessageQueue
from rocket_rebalance.plan import balance, minimum_moves, movement, owners, plan, split_view
from rocket_rebalance.strategies import AllocateMessageQueueStrategy, create_strategy
from rocket_rebalance.testing import RebalanceCase, check_plan_matches_allocate, rebalance_inputs

ROOMS = ["hz", "sh", "bj"]


def all_strategies() -> list[AllocateMessageQueueStrategy]:
    return [
        create_strategy("AVG"),
        create_strategy("AVG_BY_CIRCLE"),
        create_strategy("CONSISTENT_HASH"),
        create_strategy("CONSISTENT_HASH", virtual_node_count=0),
        create_strategy("CONFIG", message_queues=[MessageQueue("T", "b", 0)]),
        create_strategy("MACHINE_ROOM", consumer_idcs={"hz", "sh"}),
        create_strategy("MACHINE_ROOM_NEARBY", inner=create_strategy("AVG")),
        create_strategy("MACHINE_ROOM_NEARBY", inner=create_strategy("CONSISTENT_HASH", virtual_node_count=3)),
    ]


@settings(max_examples=150, deadline=None)
@given(rebalance_inputs(rooms=ROOMS), st.sampled_from(range(len(all_strategies()))))
def test_plan_equals_allocate_for_every_consumer(case: RebalanceCase, which: int) -> None:
    check_plan_matches_allocate(all_strategies()[which], case)


@settings(max_examples=60, deadline=None)
@given(rebalance_inputs())
def test_plan_falls_back_to_allocate_for_user_strategies(case: RebalanceCase) -> None:
    class FirstQueueToFirstConsumer:
        name = "FIRST"

        def allocate(
            self, consumer_group: str, current_cid: str | None, mq_all: object, cid_all: object
        ) -> list[MessageQueue] | None:
            return [case.mq_all[0]] if current_cid == case.cid_all[0] else None

    shares = plan(FirstQueueToFirstConsumer(), "g", case.mq_all, case.cid_all)
    assert shares[case.cid_all[0]] == [case.mq_all[0]]
    assert all(shares[cid] == [] for cid in case.cid_all[1:])


Q = [MessageQueue("T", "b", i) for i in range(6)]


def test_owners_and_balance() -> None:
    shares = {"a": Q[:4], "b": Q[3:5], "c": []}
    assert owners(shares)[Q[3]] == ["a", "b"]
    assert balance(shares) == (3, 6, 0, 4, 2.0, 2.0)
    assert balance({}).max_over_avg == 1.0


def test_movement_counts_changed_owners_and_the_balanced_minimum() -> None:
    before = {"a": Q[:3], "b": Q[3:]}
    after = {"a": Q[:2], "b": Q[2:4], "c": Q[4:]}
    moved = movement(before, after)
    assert moved.moved == [Q[2], Q[4], Q[5]]
    # a keeps 2 of 3, b keeps 2 of 3: at best 4 stay, so 2 must move.
    assert moved.minimum == 2
    assert minimum_moves(before, before) == 0


def test_leavers_queues_always_move() -> None:
    before = {"a": Q[:3], "b": Q[3:]}
    assert minimum_moves(before, {"a": Q}) == 3


def test_split_view_finds_double_and_missing_owners() -> None:
    avg = create_strategy("AVG")
    # a and b still see [a, b] (3 queues each); c joined and sees [a, b, c] (takes the last 2).
    views = {"a": ["a", "b"], "b": ["a", "b"], "c": ["a", "b", "c"]}
    report = split_view(avg, "g", Q, views)
    assert report.double_owned == [Q[4], Q[5]]
    assert report.unowned == []
    agreed = split_view(avg, "g", Q, dict.fromkeys("abc", ["a", "b", "c"]))
    assert agreed.double_owned == [] and agreed.unowned == []


QUEUES = [MessageQueue("T", "b", q) for q in range(6)]


@st.composite
def overlapping_plans(draw: st.DrawFn) -> dict[str, list[MessageQueue]]:
    """Plans as the pipeline meets them: any consumer may hold any queues, even the same queue as another."""
    consumers = draw(st.lists(st.sampled_from("abcd"), min_size=0, max_size=3, unique=True))
    return {cid: draw(st.lists(st.sampled_from(QUEUES), max_size=4)) for cid in consumers}


def first_holders(shares: dict[str, list[MessageQueue]]) -> dict[MessageQueue, str]:
    held: dict[MessageQueue, str] = {}
    for cid, queues in shares.items():
        for mq in queues:
            held.setdefault(mq, cid)
    return held


def brute_force_minimum(before: dict[str, list[MessageQueue]], after: dict[str, list[MessageQueue]]) -> int:
    """The definition itself: every balanced split of after's queues over after's consumers, fewest changed."""
    import itertools

    held = first_holders(before)
    queues = list(dict.fromkeys(mq for share in after.values() for mq in share))
    consumers = list(after)
    if not consumers or not queues:
        return 0
    best = len(queues)
    for split in itertools.product(consumers, repeat=len(queues)):
        sizes = [split.count(cid) for cid in consumers]
        if max(sizes) - min(sizes) <= 1:
            best = min(best, sum(1 for mq, cid in zip(queues, split, strict=True) if held.get(mq) != cid))
    return best


@settings(max_examples=300, deadline=None)
@given(overlapping_plans(), overlapping_plans())
def test_movement_and_minimum_follow_their_definitions(
    before: dict[str, list[MessageQueue]], after: dict[str, list[MessageQueue]]
) -> None:
    first_before, first_after = first_holders(before), first_holders(after)
    change = movement(before, after)
    assert change.owner_before == first_before and change.owner_after == first_after
    assert change.moved == sorted(mq for mq, cid in first_after.items() if first_before.get(mq) != cid)
    assert change.queues == len(first_after)
    assert change.minimum == minimum_moves(before, after) == brute_force_minimum(before, after)
