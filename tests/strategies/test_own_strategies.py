"""This library's own strategies: CONSISTENT_HASH_BOUNDED and CROSS_TOPIC, beyond the kit's properties
(tests/test_kit.py): how they relate to the Java strategies, their options, and what happens when consumers see
different inputs."""

from __future__ import annotations

import bisect
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocket_rebalance.model import MessageQueue, java_md5_hash, sort_client_ids, sort_queues
from rocket_rebalance.plan import plan, split_view, transition_views
from rocket_rebalance.strategies import (
    AllocateMessageQueueConsistentHashBounded,
    AllocationError,
    build_ring,
    create_strategy,
    cross_topic_sizes,
    java_compatible,
    load_cap,
    spans_topics,
    strategy_name,
)
from rocket_rebalance.strategies.base import plan_owners, shares_of
from rocket_rebalance.testing import RebalanceCase, rebalance_inputs

G = "G"


def topics(counts: list[int]) -> list[MessageQueue]:
    return sort_queues(
        MessageQueue(f"Topic{t:02}", "broker-a", q) for t, count in enumerate(counts) for q in range(count)
    )


def totals(shares: dict[str, list[MessageQueue]]) -> list[int]:
    return sorted(len(queues) for queues in shares.values())


def test_the_skew_of_apache_rocketmq_1945_is_gone() -> None:
    """10 topics of 10 queues over 4 consumers: topic by topic, AVG gives the same two consumers every remainder."""
    queues, cids = topics([10] * 10), ["c1", "c2", "c3", "c4"]
    by_topic: dict[str, list[MessageQueue]] = {cid: [] for cid in cids}
    for topic in {mq.topic for mq in queues}:
        for cid, share in plan(create_strategy("AVG"), G, [mq for mq in queues if mq.topic == topic], cids).items():
            by_topic[cid].extend(share)
    assert totals(by_topic) == [20, 20, 30, 30]
    for inner in ("AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH_BOUNDED"):
        assert totals(plan(create_strategy("CROSS_TOPIC", inner=inner), G, queues, cids)) == [25, 25, 25, 25]


@settings(max_examples=80, deadline=None)
@given(rebalance_inputs(), st.sampled_from(["AVG", "AVG_BY_CIRCLE"]))
def test_with_one_topic_cross_topic_is_its_inner_java_strategy(case: RebalanceCase, inner: str) -> None:
    one = tuple(mq for mq in case.mq_all if mq.topic == case.mq_all[0].topic)
    assert plan(create_strategy("CROSS_TOPIC", inner=inner), G, one, case.cid_all) == plan(
        create_strategy(inner), G, one, case.cid_all
    )


@given(st.lists(st.integers(0, 40), max_size=12), st.integers(1, 15))
def test_cross_topic_sizes_keep_each_topic_and_every_running_total_within_one(
    counts: list[int], consumers: int
) -> None:
    running = [0] * consumers
    for count, sizes in zip(counts, cross_topic_sizes(counts, consumers), strict=True):
        assert sum(sizes) == count and max(sizes) - min(sizes) <= 1
        running = [total + size for total, size in zip(running, sizes, strict=True)]
        assert max(running) - min(running) <= 1


@settings(max_examples=80, deadline=None)
@given(rebalance_inputs(), st.integers(1, 20))
def test_an_unreachable_cap_is_plain_consistent_hashing_on_javas_ring(case: RebalanceCase, nodes: int) -> None:
    """With a cap no consumer can reach, the walk stops at the first point: CONSISTENT_HASH's owner."""
    huge = float(len(case.cid_all))  # (1 + C) * Q / C > Q: the cap is above every queue count
    bounded = plan(create_strategy("CONSISTENT_HASH_BOUNDED", eps=huge, virtual_node_count=nodes), G, *case)
    assert bounded == plan(create_strategy("CONSISTENT_HASH", virtual_node_count=nodes), G, *case)


@pytest.mark.parametrize(
    ("queues", "consumers", "eps", "cap"),
    [(64, 8, 0.25, 10), (64, 9, 0.25, 9), (50, 1, 0.1, 55), (30, 3, 0.1, 11), (7, 3, 0.0, 3), (5, 10, 0.25, 1)],
)
def test_the_cap_is_exact_decimal_arithmetic(queues: int, consumers: int, eps: float, cap: int) -> None:
    # (1 + 0.1) * 50 is 55.00000000000001 in floating point, whose ceiling would be 56
    assert math.ceil((1 + 0.1) * 50) == 56 and load_cap(queues, consumers, eps) == cap


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"eps": -0.1}, AllocationError, "eps must be a finite number >= 0, got -0.1"),
        ({"eps": float("nan")}, AllocationError, "eps must be a finite number >= 0, got nan"),
        ({"eps": True}, TypeError, "eps must be a number, got bool"),
        ({"eps": "0.2"}, TypeError, "eps must be a number, got str"),
        ({"virtual_node_count": 0}, AllocationError, "needs at least 1 virtual node, got 0"),
    ],
)
def test_bad_bounded_hash_options_are_named(options: dict[str, object], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message.replace("(", r"\(")):
        create_strategy("CONSISTENT_HASH_BOUNDED", **options)


def test_cross_topic_refuses_an_inner_strategy_that_cannot_fill_given_sizes() -> None:
    with pytest.raises(TypeError, match="must fill given sizes .* not CONSISTENT_HASH"):
        create_strategy("CROSS_TOPIC", inner="CONSISTENT_HASH")
    with pytest.raises(ValueError, match=r"sizes \[2, 2\] do not split 3 queues among 2 consumers"):
        create_strategy("AVG").place(topics([3]), ["a", "b"], [2, 2])  # type: ignore[attr-defined]


def test_the_own_strategies_say_they_are_python_only_and_which_span_topics() -> None:
    assert java_compatible(create_strategy("MACHINE_ROOM_NEARBY", inner="AVG"))
    assert not java_compatible(create_strategy("CONSISTENT_HASH_BOUNDED"))
    assert not java_compatible(create_strategy("CROSS_TOPIC", inner="AVG"))
    assert not java_compatible(create_strategy("MACHINE_ROOM_NEARBY", inner="CONSISTENT_HASH_BOUNDED"))
    assert [spans_topics(create_strategy(name)) for name in ("AVG", "CONSISTENT_HASH_BOUNDED", "CROSS_TOPIC")] == [
        False,
        False,
        True,
    ]


def test_cross_topic_needs_every_consumer_to_see_every_topics_queues_alike() -> None:
    """One consumer still sees Topic00 with 4 queues (its route is stale), the other with 5: topic by topic only
    Topic00 is affected, but CROSS_TOPIC carries the disagreement into Topic01, which both see alike."""
    old, new = topics([4, 3]), topics([5, 3])

    def window(strategy_name: str) -> tuple[set[str], set[str]]:
        strategy = create_strategy(strategy_name)
        c1 = plan(strategy, G, new, ["c1", "c2"])["c1"]  # c1 has the new route
        c2 = plan(strategy, G, old, ["c1", "c2"])["c2"]
        held = [mq for mq in c1 + c2 if mq.topic == "Topic01"]
        doubles = {str(mq) for mq in held if held.count(mq) > 1}
        return doubles, {str(mq) for mq in new if mq.topic == "Topic01" and mq not in held}

    assert window("AVG") == (set(), set())
    doubles, orphans = window("CROSS_TOPIC")
    assert doubles or orphans


def test_a_join_seen_by_half_the_group_splits_cross_topic_like_any_strategy() -> None:
    """The member list must agree too: while half the group has not seen a join, queues are held twice or by
    nobody (the window every strategy has; its size per strategy is in benchmarks/strategies.py)."""
    queues = topics([4, 3, 5])
    views = transition_views(["c1", "c2", "c3"], ["c1", "c2", "c3", "c4"])
    window = split_view(create_strategy("CROSS_TOPIC"), G, queues, views)
    assert window.double_owned or window.unowned
    assert split_view(create_strategy("CROSS_TOPIC"), G, queues, {c: ["c1", "c2"] for c in ("c1", "c2")}) == ([], [])


def test_a_snapshot_names_the_own_strategies_from_what_consumers_report() -> None:
    for name in ("CONSISTENT_HASH_BOUNDED", "CROSS_TOPIC"):
        reported = type(create_strategy(name))
        assert strategy_name(f"{reported.__module__}.{reported.__qualname__}") == name


def _plain_walk(
    strategy: AllocateMessageQueueConsistentHashBounded, mq_all: list[MessageQueue], cids: list[str], eps: float
) -> dict[str, list[MessageQueue]]:
    """The bounded walk written the plain way, one room check per step: what the strategy's faster walk must equal."""
    ring = build_ring(cids, strategy.virtual_node_count)
    load = dict.fromkeys(cids, 0)
    floor, remainder = divmod(len(mq_all), len(cids))
    cap = load_cap(len(mq_all), len(cids), eps)
    big_slots = remainder if eps == 0 and remainder else len(cids)
    shares: dict[str, list[MessageQueue]] = {cid: [] for cid in cids}
    for mq in mq_all:
        start = bisect.bisect_left(ring.points, java_md5_hash(str(mq)))
        laps = [ring.owners[(start + step) % len(ring.points)] for step in range(len(ring.points))]
        owner = next(c for c in [*laps, *cids] if load[c] < floor or (load[c] < cap and big_slots > 0))
        if eps == 0 and remainder and load[owner] == floor:
            big_slots -= 1
        load[owner] += 1
        shares[owner].append(mq)
    return shares


@settings(max_examples=150, deadline=None)
@given(rebalance_inputs(), st.integers(1, 12), st.sampled_from([0.0, 0.1, 0.25, 1.0]))
def test_the_bounded_walk_equals_the_plain_walk(case: RebalanceCase, nodes: int, eps: float) -> None:
    strategy = AllocateMessageQueueConsistentHashBounded(eps=eps, virtual_node_count=nodes)
    cids = list(dict.fromkeys(case.cid_all))
    assert strategy.plan_all(G, case.mq_all, case.cid_all) == _plain_walk(strategy, list(case.mq_all), cids, eps)


OWNING = [
    ("AVG", {}),
    ("AVG_BY_CIRCLE", {}),
    ("CONSISTENT_HASH", {}),
    ("CONSISTENT_HASH", {"virtual_node_count": 2}),
    ("CONSISTENT_HASH_BOUNDED", {}),
    ("CONSISTENT_HASH_BOUNDED", {"eps": 0, "virtual_node_count": 2}),
    ("CROSS_TOPIC", {}),
    ("CROSS_TOPIC", {"inner": "AVG_BY_CIRCLE"}),
    ("CROSS_TOPIC", {"inner": "CONSISTENT_HASH_BOUNDED"}),
]


@settings(max_examples=300, deadline=None)
@given(rebalance_inputs(), st.lists(st.integers(0, 11), max_size=4), st.sampled_from(OWNING))
def test_owners_are_the_whole_group_plan_by_queue_position(
    case: RebalanceCase, repeats: list[int], named: tuple[str, dict[str, object]]
) -> None:
    """Each queue's owner (what the fleet pipeline compares position by position) gives back the plan exactly:
    the same consumers in the same order, each with its queues in the same order, repeated client IDs included."""
    name, options = named
    strategy = create_strategy(name, **options)
    cids = sort_client_ids([*case.cid_all, *(case.cid_all[k % len(case.cid_all)] for k in repeats)])
    owners = plan_owners(strategy, G, case.mq_all, cids)
    assert owners is not None and len(owners) == len(case.mq_all)
    assert list(shares_of(case.mq_all, cids, owners).items()) == list(plan(strategy, G, case.mq_all, cids).items())


def test_strategies_that_hand_a_queue_to_many_or_to_rooms_give_no_owners() -> None:
    queues = topics([4])
    config = create_strategy("CONFIG", message_queues=queues[:1])
    assert plan_owners(config, G, queues, ["c1", "c2"]) is None
    assert plan_owners(create_strategy("MACHINE_ROOM", consumer_idcs={"hz"}), G, queues, ["c1"]) is None
