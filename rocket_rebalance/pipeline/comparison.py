"""The strategy comparison: the group's membership and route change replayed under each compared strategy.

Each compared strategy plans both sides on their true member lists, topic by topic (all topics in one call for a
strategy that spans them), and the rows give what the change would move under it. AVG and AVG_BY_CIRCLE look
only at positions: which queue positions a route change keeps, how many consumers
there are and which of them are the same client on both sides. Many groups of a fleet share those (the same
brokers and queue counts, a handful of consumers, one joining), so their figures are worked out once per such
*shape* (:class:`GroupShape`) and reused, mapped back to each group's own queues for the re-delivery exposure.
Consistent hashing depends on the client IDs themselves and is planned group by group.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import add
from typing import Any, NamedTuple

from rocket_rebalance.model import MessageQueue, QueueList, java_string_key
from rocket_rebalance.pipeline.movement import Moves, Offsets
from rocket_rebalance.pipeline.placement import NO_PLAN, TopicPlan, change, map_shape
from rocket_rebalance.pipeline.rows import ComparisonRow, Tables
from rocket_rebalance.pipeline.settings import BROADCASTING, COMPARED_STRATEGIES, parse_strategy
from rocket_rebalance.pipeline.sides import Side, ViewPlans
from rocket_rebalance.plan import balance_of_loads
from rocket_rebalance.strategies import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueStrategy,
)

__all__ = ["GroupShape", "comparison"]

_NO_OFFSET = (None, 0)
"""The committed offset and exposure of a queue the offsets table does not have."""

POSITIONAL: tuple[type, ...] = (AllocateMessageQueueAveragely, AllocateMessageQueueAveragelyByCircle)
"""Strategies whose plan is a function of the list lengths and of which positions hold one client ID (exact
types: a subclass may look at more)."""


def positional_kind(strategy: AllocateMessageQueueStrategy) -> type | None:
    """The type of a strategy that plans each topic by positions alone (see :data:`POSITIONAL`), else ``None``.

    CROSS_TOPIC over AVG looks only at positions too, but over all the group's topics at once: its shape is the
    whole group's, which another group rarely shares, so it is planned group by group."""
    kind = type(strategy)
    return kind if kind in POSITIONAL else None


class Outcome(NamedTuple):
    """One topic's figures under one strategy: what moves (by position in the after list when the plans say each
    queue's owner, else the queues), the fewest moves a balanced split needs, the after plan's busiest consumer
    against its mean, and each of its consumers' queues after."""

    positions: Sequence[int] | None
    moved: Sequence[MessageQueue]
    minimum: int
    worst: float
    consumers: Sequence[str]
    loads: Sequence[int]


class _Shaped(NamedTuple):
    """A topic's :class:`Outcome` as positions: the moved queues' positions in the after list and the loads in
    the order of the after side's distinct consumers."""

    positions: tuple[int, ...]
    minimum: int
    worst: float
    loads: tuple[int, ...]


_shaped: dict[tuple[Any, ...], _Shaped] = {}


class GroupShape:
    """What strategies that look only at positions see of one group's change: per topic the two queue lists'
    lengths and the map between them (:func:`~rocket_rebalance.pipeline.placement.map_shape`), and the two
    member lists as patterns (each client ID replaced by the order in which it first appears on either side)."""

    def __init__(self, before: Side, after: Side, topics: Sequence[str]) -> None:
        self.before, self.after, self.topics = before, after, topics
        numbers: dict[str, int] = {}
        self.members = (
            tuple([numbers.setdefault(cid, len(numbers)) for cid in before.members]),
            tuple([numbers.setdefault(cid, len(numbers)) for cid in after.members]),
        )
        self.consumers = list(dict.fromkeys(after.members))
        self._exposures: list[list[int]] | None = None
        self.lists = [(_queues(before, topic), _queues(after, topic)) for topic in topics]
        self.keys = tuple(
            (len(old), len(new), map_shape(old, new)) if old and new else (len(old), len(new), None)
            for old, new in self.lists
        )

    def outcomes(self, kind: type, strategy: AllocateMessageQueueStrategy, group: str) -> list[Outcome] | None:
        """Each topic's outcome under ``strategy`` (of ``kind``, on both sides), from the figures of the same shape
        when another group had them; ``None`` when the strategy refused this group's lists."""
        keys = [(kind, key, self.members) for key in self.keys]
        found = list(map(_shaped.get, keys))
        if None in found:
            try:
                computed = self._shape(strategy, group)
            except (ValueError, TypeError):
                return None
            if len(_shaped) >= 100_000:
                _shaped.clear()
            found = [_shaped.setdefault(key, one) for key, one in zip(keys, computed, strict=True)]
        consumers = self.consumers
        return [
            Outcome(one.positions, (), one.minimum, one.worst, consumers if one.loads else (), one.loads)
            for one in found
            if one is not None
        ]

    def exposures(self, offsets: Offsets) -> list[list[int]]:
        """Each topic's re-delivery exposure of every queue of its after list, by position."""
        if self._exposures is None:
            self._exposures = [
                [offsets.get((mq.topic, mq.broker_name, mq.queue_id), _NO_OFFSET)[1] for mq in new]
                for _, new in self.lists
            ]
        return self._exposures

    def _shape(self, strategy: AllocateMessageQueueStrategy, group: str) -> list[_Shaped]:
        """Every topic's figures as positions, planned on this group's own lists."""
        old_plans, new_plans = _true_plans(strategy, group, self.before), _true_plans(strategy, group, self.after)
        shaped = []
        for topic in self.topics:
            old, new = _true_plan(old_plans, self.before, topic), _true_plan(new_plans, self.after, topic)
            found = change(old, new)
            assert found.positions is not None  # both plans by position: a positional strategy says every owner
            loads = new.loads()
            worst = balance_of_loads(loads).max_over_avg
            shaped.append(_Shaped(tuple(found.positions), found.minimum, worst, tuple(loads)))
        return shaped


def _queues(side: Side, topic: str) -> QueueList:
    data = side.inputs.get(topic)
    return data.mq_all if data is not None else QueueList.trusted(())


def _true_plans(strategy: AllocateMessageQueueStrategy, group: str, side: Side) -> ViewPlans:
    """The plans of ``strategy`` over the side's topics (the side's own, already made, when it is its strategy)."""
    if strategy is side.strategy and side.plans is not None:
        return side.plans
    return ViewPlans(strategy, group, {topic: data.mq_all for topic, data in side.inputs.items()})


def _true_plan(plans: ViewPlans, side: Side, topic: str) -> TopicPlan:
    """The plan of ``topic`` on the side's true member list; the strategy's refusal raises ``ValueError``."""
    data = side.inputs.get(topic)
    if data is None or not data.cid_all:
        return NO_PLAN
    return plans.checked(data.cid_all, topic)


def _outcomes(
    old_strategy: AllocateMessageQueueStrategy,
    new_strategy: AllocateMessageQueueStrategy,
    group: str,
    shape: GroupShape,
    moves: Moves,
) -> list[Outcome | None]:
    """Each topic's outcome under the strategy pair, planned on this group's lists (``None``: a strategy refused)."""
    old_plans = _true_plans(old_strategy, group, shape.before)
    new_plans = _true_plans(new_strategy, group, shape.after)
    found: list[Outcome | None] = []
    for topic in shape.topics:
        try:
            old = _true_plan(old_plans, shape.before, topic)
            new = _true_plan(new_plans, shape.after, topic)
        except (ValueError, TypeError):
            found.append(None)
            continue
        moved = moves(old, new)
        loads = new.loads()
        worst = balance_of_loads(loads).max_over_avg
        found.append(Outcome(moved.positions, moved.moved, moved.minimum, worst, new.consumers, loads))
    return found


def _max_skew(totals: Sequence[int]) -> float:
    """The busiest consumer's queues over all topics against the group's mean (the skew table's measure)."""
    mean = sum(totals) / len(totals) if totals else 0.0
    return max(totals) / mean if mean else 1.0  # no queue held: no skew, as the skew table says


def comparison(
    group: str,
    before: Side,
    after: Side,
    moves: Moves,
    out: Tables,
    compared: Sequence[str] = COMPARED_STRATEGIES,
) -> None:
    """The same membership and route change under each of the ``compared`` strategies and the group's current one
    (nothing at all when ``compared`` is empty: see :func:`~.settings.compared_strategies`).

    ``max_skew`` is over the topics together, which is what a strategy spanning them balances.
    """
    if not compared or BROADCASTING in (before.model, after.model) or before.strategy is None or after.strategy is None:
        return
    candidates: list[tuple[str, bool, AllocateMessageQueueStrategy, AllocateMessageQueueStrategy]] = [
        (name, False, parse_strategy(name, None), parse_strategy(name, None)) for name in compared
    ]
    candidates.append(("current", True, before.strategy, after.strategy))
    topics = sorted(set(before.inputs) | set(after.inputs), key=java_string_key)
    shape = GroupShape(before, after, topics)
    done: dict[tuple[int, int], dict[str, Any]] = {}  # figures per strategy pair, after the label columns
    for label, current, old_strategy, new_strategy in candidates:
        pair = (id(old_strategy), id(new_strategy))
        if pair not in done:  # else the group's current strategy is one of the compared ones: same figures
            kind = positional_kind(old_strategy) if old_strategy is new_strategy else None
            shaped = shape.outcomes(kind, old_strategy, group) if kind is not None else None
            outcomes = _outcomes(old_strategy, new_strategy, group, shape, moves) if shaped is None else shaped
            done[pair] = _figures(outcomes, shape, moves.offsets)
        out["comparison"].append(ComparisonRow(strategy=label, current=current, **done[pair]))


def _figures(outcomes: Sequence[Outcome | None], shape: GroupShape, offsets: Offsets) -> dict[str, Any]:
    """A comparison row's figures from each topic's outcome."""
    queues = moved = minimum = exposed = 0
    worst = 1.0
    failed = False
    totals = [0] * len(shape.consumers)  # per consumer after, over the topics: a plan's loads in that order
    others: dict[str, int] = {}  # a plan of other consumers (a user strategy may name them)
    held = summed = False
    for topic, (outcome, (_, new)) in enumerate(zip(outcomes, shape.lists, strict=True)):
        if outcome is None:
            failed = True
            continue
        queues += len(new)
        minimum += outcome.minimum
        worst = max(worst, outcome.worst)
        if outcome.positions is not None:
            moved += len(outcome.positions)
            if offsets:
                exposed += sum(map(shape.exposures(offsets)[topic].__getitem__, outcome.positions))
        else:
            moved += len(outcome.moved)
            if offsets:
                exposed += sum(
                    offsets.get((mq.topic, mq.broker_name, mq.queue_id), _NO_OFFSET)[1] for mq in outcome.moved
                )
        if outcome.consumers:
            held = True
            if outcome.consumers == shape.consumers:
                totals = list(map(add, totals, outcome.loads))
                summed = True
            else:
                for cid, load in zip(outcome.consumers, outcome.loads, strict=True):
                    others[cid] = others.get(cid, 0) + load
    if others:
        for cid, total in zip(shape.consumers, totals, strict=True) if summed else ():
            others[cid] = others.get(cid, 0) + total
        totals = list(others.values())
    return {
        "queues": queues,
        "moved": moved,
        "minimum": minimum,
        "moved_share": moved / queues if queues else 0.0,
        "max_over_avg": worst,
        "max_skew": _max_skew(totals if held else []),
        "exposure": exposed,
        "failed": failed,
    }
