"""A topic's plan as the analysis holds it, and what changes between two plans, position by position.

Movement used to compare two plans as dictionaries keyed by queue (each plan's first owners, then a lookup per
queue): millions of ``MessageQueue.__hash__`` calls, a Python method, for a fleet. A strategy that can say each
queue's owner by its position in the sorted queue list (:func:`~rocket_rebalance.strategies.base.plan_owners`)
gives a plan as one list of owners, and two plans of one topic are then compared position by position: the
positions of the after list in the before list are worked out once per pair of queue lists (the lists are shared
by every group of a worker that subscribes to the topic, see :func:`~rocket_rebalance.pipeline.sides.topic_queues`),
and the rest is list work that runs in C. Plans without owners (CONFIG hands a queue to many consumers; a split
view is each consumer's own plan) are compared as dictionaries, as :func:`rocket_rebalance.plan.movement` does;
both ways give the same figures (tests/pipeline/test_placement.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from itertools import compress, count, repeat
from operator import is_not, ne
from typing import NamedTuple

from rocket_rebalance.model import MessageQueue
from rocket_rebalance.plan import Balance, Plan, balance_of_loads, fewest_moves, movement
from rocket_rebalance.strategies.base import Owners, shares_of

__all__ = ["NO_PLAN", "Change", "TopicPlan", "change", "map_shape", "queue_map"]


class TopicPlan:
    """One strategy's plan of one topic's ``queues`` on one member list: what each consumer takes (``shares``)
    and, when the strategy says it, each queue's owner by position (``owners``); see :meth:`placed` and
    :meth:`given`."""

    __slots__ = ("_shares", "consumers", "owners", "queues")

    def __init__(
        self, queues: Sequence[MessageQueue], consumers: list[str], owners: Owners | None, shares: Plan | None
    ) -> None:
        self.queues = queues
        self.consumers = consumers  # every distinct consumer of the plan, in list order
        self.owners = owners
        self._shares = shares

    @classmethod
    def placed(cls, queues: Sequence[MessageQueue], cid_all: Sequence[str], owners: Owners) -> TopicPlan:
        """The plan of the member list ``cid_all`` whose queue at position ``k`` goes to ``owners[k]``; its shares
        are built when first asked for."""
        return cls(queues, list(dict.fromkeys(cid_all)), owners, None)

    @classmethod
    def given(cls, queues: Sequence[MessageQueue], shares: Plan) -> TopicPlan:
        """A plan known only by its shares (a strategy without owners, or each consumer's own view)."""
        return cls(queues, list(shares), None, shares)

    @property
    def shares(self) -> Plan:
        """Each consumer's queues (every consumer, an empty list for one that takes nothing)."""
        if self._shares is None:
            assert self.owners is not None
            self._shares = shares_of(self.queues, self.consumers, self.owners)
        return self._shares

    def loads(self) -> list[int]:
        """Each consumer's number of queues, in :attr:`consumers` order."""
        if self._shares is None:
            assert self.owners is not None
            held = Counter(self.owners)
            return [held.get(cid, 0) for cid in self.consumers]
        return [len(share) for share in self._shares.values()]

    def balance(self) -> Balance:
        """:func:`rocket_rebalance.plan.balance` of the plan."""
        return balance_of_loads(self.loads())


NO_PLAN = TopicPlan.placed((), (), [])
"""The plan of a topic a side does not have: nobody takes anything."""


class Change(NamedTuple):
    """What moving from one plan to another moves: the moved queues (Java order) with each one's first owner before
    (``None``: nobody's) and after, and the fewest moves a balanced split needs (see
    :func:`rocket_rebalance.plan.movement`)."""

    moved: list[MessageQueue]
    owner_before: list[str | None]
    owner_after: list[str | None]
    minimum: int
    positions: list[int] | None  # of the moved queues in the after plan's queues (compared by position only)


_queue_maps: dict[tuple[int, int], tuple[Sequence[MessageQueue], Sequence[MessageQueue], list[int], int]] = {}


_map_shapes: dict[tuple[int, ...], int] = {}
_shape_numbers = count()


def queue_map(old: Sequence[MessageQueue], new: Sequence[MessageQueue]) -> list[int]:
    """For each queue of ``new``, its position in ``old`` (-1 when ``old`` has no such queue); lists without
    repeats. Remembered per pair of list objects (the entry keeps both alive, so an id cannot be reused by
    another list), bounded."""
    return _mapped(old, new)[2]


def map_shape(old: Sequence[MessageQueue], new: Sequence[MessageQueue]) -> int:
    """A number naming :func:`queue_map` of the two lists, the same for every pair of lists with the same map
    (two topics over the same brokers with one of them down, say): what a plan that looks only at positions
    sees of a route change."""
    return _mapped(old, new)[3]


def _mapped(
    old: Sequence[MessageQueue], new: Sequence[MessageQueue]
) -> tuple[Sequence[MessageQueue], Sequence[MessageQueue], list[int], int]:
    key = (id(old), id(new))
    found = _queue_maps.get(key)
    if found is None:
        position = {mq: index for index, mq in enumerate(old)}
        mapping = [position.get(mq, -1) for mq in new]
        if len(_queue_maps) >= 16_384:
            _queue_maps.clear()
        shape = _map_shapes.get(mapped := (len(old), *mapping))
        if shape is None:
            if len(_map_shapes) >= 65_536:  # forgotten maps get new numbers: a number never names two maps
                _map_shapes.clear()
            shape = _map_shapes[mapped] = next(_shape_numbers)
        found = (old, new, mapping, shape)
        _queue_maps[key] = found
    return found


def change(old: TopicPlan, new: TopicPlan) -> Change:
    """What moving from plan ``old`` to plan ``new`` of a topic moves (the figures of
    :func:`rocket_rebalance.plan.movement`)."""
    if old.owners is None or new.owners is None:
        found = movement(old.shares, new.shares)
        return Change(
            found.moved,
            list(map(found.owner_before.get, found.moved)),
            list(map(found.owner_after.__getitem__, found.moved)),
            found.minimum,
            None,
        )
    after = new.owners
    if old.queues is new.queues:
        before: Owners = old.owners
    else:  # a queue new to the topic had no owner: position -1 reads the None appended
        before = list(map([*old.owners, None].__getitem__, queue_map(old.queues, new.queues)))
    owned = list(map(is_not, after, repeat(None)))
    positions = [k for k in compress(count(), map(ne, after, before)) if owned[k]]
    held = Counter(compress(before, owned))  # per consumer before: queues of the after plan it held
    queues = new.queues
    return Change(
        [queues[k] for k in positions],
        [before[k] for k in positions],
        [after[k] for k in positions],
        fewest_moves(held, sum(owned), new.consumers),
        positions,
    )
