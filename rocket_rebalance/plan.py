"""Whole-group plans and what they tell: owners, balance, movement, and split consumer views.

A consumer computes only its own share; an operator wants everybody's. :func:`plan` gives every consumer's share
in one pass (equal to calling ``allocate`` for each), and the functions below measure plans. The preview and
simulate commands, the property-testing kit and the Spark pipeline all use these, so they agree by construction.
Pure: no I/O, no clocks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from rocket_rebalance.model import MessageQueue, sort_client_ids, sort_queues
from rocket_rebalance.strategies.base import AllocateMessageQueueStrategy, plan_group

__all__ = [
    "Balance",
    "Movement",
    "Plan",
    "SplitView",
    "balance",
    "balance_of_loads",
    "by_topic",
    "fewest_moves",
    "first_owners",
    "minimum_moves",
    "movement",
    "owners",
    "plan",
    "split_view",
    "transition_views",
]

Plan = dict[str, list[MessageQueue]]


def plan(
    strategy: AllocateMessageQueueStrategy,
    consumer_group: str,
    mq_all: Sequence[MessageQueue] | None,
    cid_all: Sequence[str] | None,
) -> Plan:
    """Every distinct consumer's share, computed in one pass when the strategy can (all six built-ins can).

    Give it the lists as the rebalance sorts them (:func:`rocket_rebalance.model.prepare_rebalance_input`) to
    get what real consumers compute. Errors are the strategy's own (e.g. ``AllocationError`` on no queues).
    """
    return plan_group(strategy, consumer_group, mq_all, cid_all)


def owners(shares: Mapping[str, Iterable[MessageQueue]]) -> dict[MessageQueue, list[str]]:
    """Each queue that somebody holds, with every consumer holding it (more than one is a double owner)."""
    held: dict[MessageQueue, list[str]] = {}
    for cid, queues in shares.items():
        for mq in queues:
            held.setdefault(mq, []).append(cid)
    return held


def by_topic(whole: Plan, topics: Sequence[str]) -> dict[str, Plan]:
    """A plan over several topics (a strategy spanning topics, CROSS_TOPIC) as one plan per topic, each with every
    consumer of the whole. A plan of one topic stays as the strategy gave it (CONFIG hands out its configured
    queues whatever the topic)."""
    if len(topics) == 1:
        return {topics[0]: whole}
    parts: dict[str, Plan] = {topic: {cid: [] for cid in whole} for topic in topics}
    for cid, share in whole.items():
        for mq in share:
            parts[mq.topic][cid].append(mq)
    return parts


class Balance(NamedTuple):
    """Queues per consumer: the spread an operator looks at first."""

    consumers: int
    queues: int
    min: int
    max: int
    mean: float
    max_over_avg: float


def balance(shares: Mapping[str, Sequence[MessageQueue]]) -> Balance:
    """Load figures of a plan; ``max_over_avg`` is 1.0 for a perfect split (and for an empty plan)."""
    return balance_of_loads([len(queues) for queues in shares.values()])


def balance_of_loads(loads: Sequence[int]) -> Balance:
    """:func:`balance` of a plan given as each consumer's number of queues."""
    if not loads:
        return Balance(0, 0, 0, 0, 0.0, 1.0)
    total = sum(loads)
    mean = total / len(loads)
    return Balance(len(loads), total, min(loads), max(loads), mean, max(loads) / mean if mean else 1.0)


class Movement(NamedTuple):
    """What a change of plan moves: queues whose owner changes, against the fewest a balanced split needs.

    ``owner_before`` and ``owner_after`` map each queue to its first owner in either plan (a queue absent from a
    plan is absent from its map), so callers can say who handed a moved queue to whom without another pass.
    """

    moved: list[MessageQueue]
    minimum: int
    queues: int
    owner_before: dict[MessageQueue, str]
    owner_after: dict[MessageQueue, str]


def first_owners(shares: Mapping[str, Iterable[MessageQueue]]) -> dict[MessageQueue, str]:
    """Each queue of a plan with the first consumer (in the plan's order) that holds it."""
    # built back to front, so an earlier holder overwrites a later one: one C-level comprehension, no setdefault
    return {mq: cid for cid, queues in reversed(list(shares.items())) for mq in queues}


def fewest_moves(had: Mapping[str | None, int], queues: int, consumers: Sequence[str]) -> int:
    """See :func:`minimum_moves`: ``queues`` queues held after, of which ``had[c]`` were held by ``c`` before
    (``None``: by nobody), and ``consumers`` the distinct consumers of the after plan."""
    if not consumers or not queues:
        return 0
    base, larger = divmod(queues, len(consumers))
    kept = [had.get(cid, 0) for cid in consumers]
    stay = sum(min(count, base) for count in kept) + min(larger, sum(1 for count in kept if count > base))
    return queues - stay


def _fewest_moves(
    held_before: Mapping[MessageQueue, str], held_after: Mapping[MessageQueue, str], consumers: Sequence[str]
) -> int:
    """See :func:`minimum_moves`; ``consumers`` are the distinct consumers of the after plan."""
    # per consumer: queues of the after plan it held before
    return fewest_moves(Counter(map(held_before.get, held_after)), len(held_after), consumers)


def minimum_moves(before: Mapping[str, Iterable[MessageQueue]], after: Mapping[str, Iterable[MessageQueue]]) -> int:
    """The fewest queues any balanced split (sizes differ by at most one) over ``after``'s consumers can move.

    Each consumer that stays may keep up to its target size of the queues it held; the ``n % c`` consumers with
    the most surplus get the larger target. Everything else (a leaver's queues, new queues) must move.
    """
    return _fewest_moves(first_owners(before), first_owners(after), list(after))


def movement(before: Mapping[str, Iterable[MessageQueue]], after: Mapping[str, Iterable[MessageQueue]]) -> Movement:
    """Queues of ``after`` whose (first) owner differs from ``before`` (Java sort order), and the minimum."""
    held_before = first_owners(before)
    held_after = first_owners(after)
    was = held_before.get
    moved = sort_queues([mq for mq, cid in held_after.items() if was(mq) != cid])
    return Movement(
        moved, _fewest_moves(held_before, held_after, list(after)), len(held_after), held_before, held_after
    )


class SplitView(NamedTuple):
    """Live consumers that disagree on the member list: queues taken twice, and queues nobody takes."""

    double_owned: list[MessageQueue]
    unowned: list[MessageQueue]


def split_view(
    strategy: AllocateMessageQueueStrategy,
    consumer_group: str,
    mq_all: Sequence[MessageQueue],
    views: Mapping[str, Sequence[str]],
) -> SplitView:
    """Each live consumer (a key of ``views``) allocates from its own view of the member list.

    This is the window after a join or leave when some consumers were notified and others not yet. Each distinct
    view is planned once; a consumer missing from its own view takes nothing (Java: not in cidAll).
    """
    plans: dict[tuple[str, ...], Plan] = {}
    taken: dict[MessageQueue, int] = {}
    for cid, view in views.items():
        key = tuple(view)
        if key not in plans:
            plans[key] = plan(strategy, consumer_group, mq_all, key) if key else {}
        for mq in plans[key].get(cid, ()):
            taken[mq] = taken.get(mq, 0) + 1
    double = sort_queues(mq for mq, count in taken.items() if count > 1)
    unowned = sort_queues(mq for mq in set(mq_all) if mq not in taken)
    return SplitView(double, unowned)


def transition_views(old_cid_all: Sequence[str], new_cid_all: Sequence[str]) -> dict[str, list[str]]:
    """Views in the middle of a membership change: live consumers are the new list's, and every other one of
    them (in Java order) still sees the old list, as when a notification reached only some consumers."""
    old_view, new_view = sort_client_ids(old_cid_all), sort_client_ids(new_cid_all)
    return {cid: (old_view if position % 2 else new_view) for position, cid in enumerate(dict.fromkeys(new_view))}
