"""A property-testing kit for allocation strategies: realistic inputs and the invariants a group relies on.

Point it at any strategy, ours or your own, from pytest::

    from hypothesis import given
    from rocket_rebalance import testing as rt

    @given(rt.rebalance_inputs())
    def test_my_strategy(case):
        rt.check_strategy(MyStrategy(), case, rt.Property.PARTITION)

Inputs (hypothesis strategies): :func:`topics`, :func:`broker_names`, :func:`client_ids` (the shapes RocketMQ
clients really use: ``ip@pid``, ``ip@pid#nanotime``, unit names, IPv6, characters beyond U+FFFF, whose Java order
differs from Python's), :func:`message_queues`, :func:`rebalance_inputs`.

Checks (plain functions raising :class:`PropertyViolation`, an ``AssertionError``): determinism, order
independence after the rebalance sort, plan equal to per-consumer allocate, no queue with two owners, full
coverage, balance (max - min <= 1, over everything and within each topic), a load cap, monotonicity on join and
leave, and :func:`split_view_report` for the window when consumers disagree on the member list. :data:`PROMISES`
says which properties each built-in strategy keeps, and why the others do not hold for it.

Needs hypothesis (``pip install rocket-rebalance[testing]``); ``import rocket_rebalance`` does not load this module.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from hypothesis import strategies as st

from rocket_rebalance.model import MessageQueue, prepare_rebalance_input, retry_topic, sort_client_ids
from rocket_rebalance.plan import Plan, SplitView, owners, plan, split_view, transition_views
from rocket_rebalance.strategies import AllocateMessageQueueStrategy

__all__ = [
    "PROMISES",
    "Property",
    "PropertyViolation",
    "RebalanceCase",
    "broker_names",
    "check_balanced",
    "check_balanced_per_topic",
    "check_bounded_load",
    "check_deterministic",
    "check_full_coverage",
    "check_monotonic_join",
    "check_monotonic_leave",
    "check_no_double_owner",
    "check_order_independent",
    "check_plan_matches_allocate",
    "check_strategy",
    "client_ids",
    "consumer_groups",
    "message_queues",
    "rebalance_inputs",
    "split_view_report",
    "topics",
]

GROUP = "kit_group"

# Characters that make Java's UTF-16 order differ from Python's code-point order: high BMP and beyond U+FFFF.
_AWKWARD = st.sampled_from(["\uff21", "\ue000", "\U0001d538", "\U0001f600", "\U00020000", "\U0010fffd", "中"])
_WORD = st.text(alphabet=st.sampled_from("abcxyzAZ019_-"), min_size=1, max_size=8)


def topics() -> st.SearchStrategy[str]:
    """Topic names: RocketMQ-valid ones, retry topics, and (as Java accepts in the strategies) awkward text."""
    plain = st.builds(lambda word: f"Topic{word}", _WORD)
    return st.one_of(
        plain, st.builds(lambda word: retry_topic(f"GID_{word}"), _WORD), st.builds("{}{}".format, plain, _AWKWARD)
    )


def consumer_groups() -> st.SearchStrategy[str]:
    """Consumer group names in the shapes operators use (``GID_...``, ``CID_...``)."""
    return st.builds("{}_{}".format, st.sampled_from(["GID", "CID", "group"]), _WORD)


def broker_names(rooms: Sequence[str] = ()) -> st.SearchStrategy[str]:
    """Broker names, ``room@broker`` when ``rooms`` are given (for the machine-room strategies)."""
    base = st.one_of(st.builds("broker-{}".format, _WORD), st.builds("broker-{}".format, _AWKWARD))
    if rooms:
        return st.builds("{}@{}".format, st.sampled_from(list(rooms)), base)
    return base


def _ipv4() -> st.SearchStrategy[str]:
    return st.builds("192.168.{}.{}".format, st.integers(0, 3), st.integers(1, 254))


def client_ids(rooms: Sequence[str] = ()) -> st.SearchStrategy[str]:
    """Client IDs as RocketMQ clients build them, optionally prefixed ``room@`` for the machine-room strategies."""
    pid = st.integers(1, 99999)
    shapes = st.one_of(
        st.builds("{}@{}".format, _ipv4(), pid),
        st.builds("{}@{}#{}".format, _ipv4(), pid, st.integers(10**12, 10**15)),
        st.builds("{}@{}@{}".format, _ipv4(), pid, st.sampled_from(["unitA", "unitB"])),
        st.builds("2408:400a::{:x}@{}".format, st.integers(1, 0xFFFF), pid),
        st.builds("{}@{}{}".format, _ipv4(), _AWKWARD, pid),
    )
    if rooms:
        return st.builds("{}@{}".format, st.sampled_from(list(rooms)), shapes)
    return shapes


def message_queues(
    topic: st.SearchStrategy[str] | None = None, brokers: st.SearchStrategy[str] | None = None
) -> st.SearchStrategy[MessageQueue]:
    """Message queues on a few topics and brokers (small ranges, so lists share topics and brokers)."""
    return st.builds(
        MessageQueue,
        topic if topic is not None else st.sampled_from(["TopicA", "Topic\uff21", "Topic\U0001d538"]),
        brokers if brokers is not None else st.sampled_from(["broker-a", "broker-b", "broker-\U0001f600"]),
        st.integers(0, 31),
    )


class RebalanceCase(NamedTuple):
    """One group's view: queues and client IDs, already in the order the rebalance sorts them."""

    mq_all: tuple[MessageQueue, ...]
    cid_all: tuple[str, ...]


def rebalance_inputs(
    min_queues: int = 1,
    max_queues: int = 48,
    min_consumers: int = 1,
    max_consumers: int = 12,
    rooms: Sequence[str] = (),
) -> st.SearchStrategy[RebalanceCase]:
    """A sorted, duplicate-free group view; give ``rooms`` to get ``room@`` brokers and consumers."""
    queues = st.lists(
        message_queues(brokers=broker_names(rooms) if rooms else None),
        min_size=min_queues,
        max_size=max_queues,
        unique=True,
    )
    cids = st.lists(client_ids(rooms), min_size=min_consumers, max_size=max_consumers, unique=True)

    def prepared(mq_all: list[MessageQueue], cid_all: list[str]) -> RebalanceCase:
        ready = prepare_rebalance_input(mq_all, cid_all)
        return RebalanceCase(ready.mq_all, ready.cid_all)

    return st.builds(prepared, queues, cids)


class PropertyViolation(AssertionError):
    """A strategy broke an invariant; the message says which queues or consumers show it."""


def _sample(queues: Iterable[MessageQueue], limit: int = 5) -> str:
    listed = [str(mq) for mq in queues]
    more = f" (+{len(listed) - limit} more)" if len(listed) > limit else ""
    return ", ".join(listed[:limit]) + more


def check_deterministic(strategy: AllocateMessageQueueStrategy, case: RebalanceCase) -> None:
    """The same inputs give the same share, call after call (no hidden state, no randomness)."""
    for cid in case.cid_all:
        first = strategy.allocate(GROUP, cid, case.mq_all, case.cid_all)
        again = strategy.allocate(GROUP, cid, case.mq_all, case.cid_all)
        if first != again:
            raise PropertyViolation(f"{strategy.name}: {cid} got {first} then {again} for the same inputs")


def check_order_independent(strategy: AllocateMessageQueueStrategy, case: RebalanceCase, seed: int = 0) -> None:
    """Shuffled inputs, once prepared like the rebalance prepares them, give every consumer the same share."""
    shuffle = random.Random(seed)
    queues, cids = list(case.mq_all), list(case.cid_all)
    shuffle.shuffle(queues)
    shuffle.shuffle(cids)
    shuffled = prepare_rebalance_input(queues, cids)
    expected = plan(strategy, GROUP, case.mq_all, case.cid_all)
    got = plan(strategy, GROUP, shuffled.mq_all, shuffled.cid_all)
    if got != expected:
        differing = sorted(cid for cid in expected if expected[cid] != got.get(cid))
        raise PropertyViolation(f"{strategy.name}: input order changed the shares of {differing}")


def check_plan_matches_allocate(strategy: AllocateMessageQueueStrategy, case: RebalanceCase) -> None:
    """The whole-group plan gives each consumer exactly what its own ``allocate`` call gives (order included)."""
    whole = plan(strategy, GROUP, case.mq_all, case.cid_all)
    for cid in case.cid_all:
        own = list(strategy.allocate(GROUP, cid, case.mq_all, case.cid_all) or ())
        if whole.get(cid) != own:
            raise PropertyViolation(f"{strategy.name}: plan gives {cid} {whole.get(cid)}, allocate gives {own}")


def check_no_double_owner(shares: Plan) -> None:
    """No queue is held by two consumers (it would be consumed twice)."""
    doubles = {mq: cids for mq, cids in owners(shares).items() if len(cids) > 1}
    if doubles:
        raise PropertyViolation(f"queues with several owners: {_sample(doubles)}")


def check_full_coverage(shares: Plan, mq_all: Iterable[MessageQueue]) -> None:
    """Every queue has an owner (none is left unconsumed)."""
    held = owners(shares)
    missing = [mq for mq in mq_all if mq not in held]
    if missing:
        raise PropertyViolation(f"queues nobody owns: {_sample(missing)}")


def check_balanced(shares: Plan, max_spread: int = 1) -> None:
    """Loads differ by at most ``max_spread`` queues between the busiest and the idlest consumer."""
    loads = {cid: len(queues) for cid, queues in shares.items()}
    if loads and max(loads.values()) - min(loads.values()) > max_spread:
        busiest = max(loads, key=loads.__getitem__)
        idlest = min(loads, key=loads.__getitem__)
        raise PropertyViolation(f"unbalanced: {busiest} has {loads[busiest]} queues, {idlest} has {loads[idlest]}")


def check_balanced_per_topic(shares: Plan) -> None:
    """Within every topic of the plan, loads differ by at most one queue (consumers holding none of it count)."""
    topics = {mq.topic for queues in shares.values() for mq in queues}
    for topic in sorted(topics):
        check_balanced({cid: [mq for mq in queues if mq.topic == topic] for cid, queues in shares.items()})


def check_bounded_load(strategy: AllocateMessageQueueStrategy, shares: Plan) -> None:
    """No consumer holds more than the strategy's own cap, ``strategy.cap(queues, consumers)`` (a bounded-load
    strategy such as CONSISTENT_HASH_BOUNDED says what its cap is)."""
    cap = getattr(strategy, "cap", None)
    if not callable(cap):
        raise PropertyViolation(f"{strategy.name}: has no cap(queues, consumers) to check loads against")
    limit = cap(sum(len(queues) for queues in shares.values()), len(shares))
    over = {cid: len(queues) for cid, queues in shares.items() if len(queues) > limit}
    if over:
        raise PropertyViolation(f"{strategy.name}: above the cap of {limit} queues: {over}")


def _with(cids: Sequence[str], newcomer: str) -> list[str]:
    return sort_client_ids([*cids, newcomer])


def check_monotonic_join(strategy: AllocateMessageQueueStrategy, case: RebalanceCase, newcomer: str) -> None:
    """When ``newcomer`` joins, a queue either stays with its owner or moves to the newcomer."""
    if newcomer in case.cid_all:
        return
    before = owners(plan(strategy, GROUP, case.mq_all, case.cid_all))
    after = owners(plan(strategy, GROUP, case.mq_all, _with(case.cid_all, newcomer)))
    bad = [mq for mq, cids in after.items() if cids != [newcomer] and cids != before.get(mq)]
    if bad:
        raise PropertyViolation(f"{strategy.name}: join of {newcomer} moved queues between others: {_sample(bad)}")


def check_monotonic_leave(strategy: AllocateMessageQueueStrategy, case: RebalanceCase, leaver: str) -> None:
    """When ``leaver`` leaves, only its queues move; everybody else keeps what they had."""
    if leaver not in case.cid_all or len(case.cid_all) < 2:
        return
    before = owners(plan(strategy, GROUP, case.mq_all, case.cid_all))
    remaining = [cid for cid in case.cid_all if cid != leaver]
    after = owners(plan(strategy, GROUP, case.mq_all, remaining))
    bad = [mq for mq, cids in before.items() if cids != [leaver] and after.get(mq) != cids]
    if bad:
        raise PropertyViolation(f"{strategy.name}: leave of {leaver} moved others' queues: {_sample(bad)}")


def split_view_report(
    strategy: AllocateMessageQueueStrategy, case: RebalanceCase, new_cid_all: Sequence[str]
) -> SplitView:
    """While half the live consumers still see ``case.cid_all`` and the rest ``new_cid_all``: who double-owns?

    Live consumers are those of the new list; every other one of them (in sorted order) still has the old view,
    which is the window between a membership change and the last consumer's rebalance.
    """
    return split_view(strategy, GROUP, case.mq_all, transition_views(case.cid_all, new_cid_all))


class Property(enum.Flag):
    """The invariants :func:`check_strategy` can check; combine with ``|``."""

    DETERMINISTIC = enum.auto()
    ORDER_INDEPENDENT = enum.auto()
    PLAN_MATCHES_ALLOCATE = enum.auto()
    NO_DOUBLE_OWNER = enum.auto()
    FULL_COVERAGE = enum.auto()
    BALANCED = enum.auto()
    MONOTONIC = enum.auto()
    BALANCED_PER_TOPIC = enum.auto()
    BOUNDED_LOAD = enum.auto()
    PURE = DETERMINISTIC | ORDER_INDEPENDENT | PLAN_MATCHES_ALLOCATE
    PARTITION = PURE | NO_DOUBLE_OWNER | FULL_COVERAGE


#: What each built-in strategy keeps, by its name; the comments in the source say why the rest cannot hold for it.
PROMISES: dict[str, Property] = {
    # Positional splits: every queue exactly once, sizes within one; any membership change reshuffles.
    "AVG": Property.PARTITION | Property.BALANCED,
    "AVG_BY_CIRCLE": Property.PARTITION | Property.BALANCED,
    # Ring placement is uneven by design but moves only the joiner's/leaver's queues (with at least 1 node).
    "CONSISTENT_HASH": Property.PARTITION | Property.MONOTONIC,
    # Every consumer gets the same configured list: shared on purpose, and unlisted queues stay unconsumed.
    "CONFIG": Property.PURE,
    # Only queues of configured rooms are consumed (others have no owner); those are split within one.
    "MACHINE_ROOM": Property.PURE | Property.NO_DOUBLE_OWNER | Property.BALANCED,
    # Rooms are split separately, so loads differ across rooms; coverage holds when the inner strategy covers.
    "MACHINE_ROOM_NEARBY": Property.PARTITION,
    # This library's own. The ring walk skips full consumers, so nobody exceeds ceil((1+eps)*queues/consumers); a
    # join lowers the cap and queues cascade past it, so it is not monotonic (it moves little, see RESULTS.md).
    "CONSISTENT_HASH_BOUNDED": Property.PARTITION | Property.BOUNDED_LOAD,
    # Every topic split within one and the totals over all topics within one (given all topics in one call).
    "CROSS_TOPIC": Property.PARTITION | Property.BALANCED | Property.BALANCED_PER_TOPIC,
}


def check_strategy(
    strategy: AllocateMessageQueueStrategy,
    case: RebalanceCase,
    properties: Property | None = None,
    newcomer: str = "zz-kit-newcomer@0",
) -> None:
    """Check ``properties`` (default: what :data:`PROMISES` lists for the strategy's name) on one case."""
    if properties is None:
        properties = PROMISES.get(strategy.name.split("-")[0], Property.PURE)
    if Property.DETERMINISTIC in properties:
        check_deterministic(strategy, case)
    if Property.ORDER_INDEPENDENT in properties:
        check_order_independent(strategy, case)
    if Property.PLAN_MATCHES_ALLOCATE in properties:
        check_plan_matches_allocate(strategy, case)
    shares = plan(strategy, GROUP, case.mq_all, case.cid_all)
    if Property.NO_DOUBLE_OWNER in properties:
        check_no_double_owner(shares)
    if Property.FULL_COVERAGE in properties:
        check_full_coverage(shares, case.mq_all)
    if Property.BALANCED in properties:
        check_balanced(shares)
    if Property.BALANCED_PER_TOPIC in properties:
        check_balanced_per_topic(shares)
    if Property.BOUNDED_LOAD in properties:
        check_bounded_load(strategy, shares)
    if Property.MONOTONIC in properties:
        check_monotonic_join(strategy, case, newcomer)
        check_monotonic_leave(strategy, case, case.cid_all[0])
