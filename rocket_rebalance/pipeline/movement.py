"""Before against after: which queues move, the re-delivery exposure of the moves, and the strategy comparison.

Movement compares what consumers actually take on each side (with their views); the comparison replays the same
membership and route change under each compared strategy on the true member lists.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rocket_rebalance.model import MessageQueue, java_string_key
from rocket_rebalance.pipeline.placement import NO_PLAN, Change, TopicPlan, change
from rocket_rebalance.pipeline.rows import ComparisonRow, MovedQueueRow, MovementRow, Tables
from rocket_rebalance.pipeline.settings import BROADCASTING, COMPARED_STRATEGIES, parse_strategy
from rocket_rebalance.pipeline.sides import Side, ViewPlans
from rocket_rebalance.plan import balance_of_loads
from rocket_rebalance.strategies import AllocateMessageQueueStrategy

__all__ = ["Moves", "Offsets", "compare_sides", "comparison", "exposure", "offsets_from_rows", "queue_set"]

Offsets = dict[tuple[str, str, int], tuple[int, int]]
"""(topic, broker, queue ID) -> (committed offset, re-delivery exposure) of one group's queues."""


def exposure(committed: int, max_offset: int, in_flight: int | None) -> int:
    """What a new owner may consume a second time: committed up to the in-flight offset when known, else the max."""
    return max(0, (max_offset if in_flight is None else in_flight) - committed)


def offsets_from_rows(rows: Iterable[Mapping[str, Any]]) -> Offsets:
    """A group's offsets table rows (``topic``, ``broker``, ``queue_id``, ``max_offset``, ``committed_offset``,
    ``in_flight_offset``) as the analysis takes them."""
    return {
        (row["topic"], row["broker"], row["queue_id"]): (
            row["committed_offset"],
            exposure(row["committed_offset"], row["max_offset"], row.get("in_flight_offset")),
        )
        for row in rows
    }


def _exposure(offsets: Offsets, mq: MessageQueue) -> tuple[int | None, int]:
    return offsets.get((mq.topic, mq.broker_name, mq.queue_id), (None, 0))


class Moves:
    """Movement and re-delivery exposure per pair of plans, computed once per group.

    Without split views a side's effective shares are its true plans (the same objects), so the movement table
    and the comparison's "current" row ask for the same pair; they share the answer.
    """

    def __init__(self, offsets: Offsets) -> None:
        self.offsets = offsets
        # keyed by the plans' ids; the entry keeps both plans alive, so an id cannot be reused by another plan
        self.found: dict[tuple[int, int], tuple[TopicPlan, TopicPlan, Change, int]] = {}

    def __call__(self, old: TopicPlan, new: TopicPlan) -> tuple[Change, int]:
        key = (id(old), id(new))
        found = self.found.get(key)
        if found is None:
            moved = change(old, new)
            exposed = sum(_exposure(self.offsets, mq)[1] for mq in moved.moved) if self.offsets else 0
            found = (old, new, moved, exposed)
            self.found[key] = found
        return found[2], found[3]


def queue_set(side: Side, topic: str) -> set[MessageQueue]:
    return set(side.inputs[topic].mq_all) if topic in side.inputs else set()


def compare_sides(before: Side, after: Side, moves: Moves, out: Tables) -> tuple[int, int, int, int]:
    """Movement rows per topic; returns the group's (moved, minimum, exposure, paused)."""
    totals = [0, 0, 0, 0]
    broadcasting = BROADCASTING in (before.model, after.model)
    for topic in sorted(set(before.inputs) | set(after.inputs), key=java_string_key):
        queues_after = len(after.inputs[topic].mq_all) if topic in after.inputs else 0
        removed = len(queue_set(before, topic) - queue_set(after, topic))
        # a broadcasting group has every consumer read every queue: nothing moves between consumers
        old, new = (
            (NO_PLAN, NO_PLAN)
            if broadcasting
            else (before.shares.get(topic, NO_PLAN), after.shares.get(topic, NO_PLAN))
        )
        found, exposed_total = moves(old, new)
        moved, minimum = len(found.moved), found.minimum
        for mq, owner_before, owner_after in zip(found.moved, found.owner_before, found.owner_after, strict=True):
            committed, exposed = _exposure(moves.offsets, mq)
            out["moved_queues"].append(
                MovedQueueRow(
                    topic=topic,
                    broker=mq.broker_name,
                    queue_id=mq.queue_id,
                    owner_before=owner_before,
                    owner_after=owner_after,
                    committed_offset=committed,
                    exposure=exposed,
                )
            )
        paused = moved + after.unowned.get(topic, 0)
        out["movement"].append(
            MovementRow(
                topic=topic,
                queues=queues_after,
                moved=moved,
                minimum=minimum,
                moved_share=moved / queues_after if queues_after else 0.0,
                minimum_share=minimum / queues_after if queues_after else 0.0,
                removed=removed,
                paused=paused,
                exposure=exposed_total,
            )
        )
        for position, value in enumerate((moved, minimum, exposed_total, paused)):
            totals[position] += value
    return totals[0], totals[1], totals[2], totals[3]


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


def _max_skew(totals: Mapping[str, int]) -> float:
    """The busiest consumer's queues over all topics against the group's mean (the skew table's measure)."""
    mean = sum(totals.values()) / len(totals) if totals else 0.0
    return max(totals.values()) / mean if mean else 1.0  # no queue held: no skew, as the skew table says


def comparison(group: str, before: Side, after: Side, moves: Moves, out: Tables) -> None:
    """The same membership and route change under each compared strategy and the group's current one.

    Each topic's figures come from the plans the group's consumers would make (all topics in one call for a
    strategy that spans them); ``max_skew`` is over the topics together, which is what such a strategy balances.
    """
    if BROADCASTING in (before.model, after.model) or before.strategy is None or after.strategy is None:
        return
    candidates: list[tuple[str, bool, AllocateMessageQueueStrategy, AllocateMessageQueueStrategy]] = [
        (name, False, parse_strategy(name, None), parse_strategy(name, None)) for name in COMPARED_STRATEGIES
    ]
    candidates.append(("current", True, before.strategy, after.strategy))
    topics = sorted(set(before.inputs) | set(after.inputs), key=java_string_key)
    done: dict[tuple[int, int], dict[str, Any]] = {}  # figures per strategy pair, after the label columns
    for label, current, old_strategy, new_strategy in candidates:
        pair = (id(old_strategy), id(new_strategy))
        if pair not in done:  # else the group's current strategy is one of the compared ones: same figures
            old_plans, new_plans = _true_plans(old_strategy, group, before), _true_plans(new_strategy, group, after)
            queues = moved = minimum = exposed_total = 0
            worst = 1.0
            failed = False
            totals: dict[str, int] = {}
            for topic in topics:
                try:
                    old = _true_plan(old_plans, before, topic)
                    new = _true_plan(new_plans, after, topic)
                except (ValueError, TypeError):
                    failed = True
                    continue
                found, exposed = moves(old, new)
                queues += len(after.inputs[topic].mq_all) if topic in after.inputs else 0
                moved += len(found.moved)
                minimum += found.minimum
                exposed_total += exposed
                loads = new.loads()
                worst = max(worst, balance_of_loads(loads).max_over_avg)
                for cid, load in zip(new.consumers, loads, strict=True):
                    totals[cid] = totals.get(cid, 0) + load
            done[pair] = {
                "queues": queues,
                "moved": moved,
                "minimum": minimum,
                "moved_share": moved / queues if queues else 0.0,
                "max_over_avg": worst,
                "max_skew": _max_skew(totals),
                "exposure": exposed_total,
                "failed": failed,
            }
        out["comparison"].append(ComparisonRow(strategy=label, current=current, **done[pair]))
