"""Before against after: which queues move and the re-delivery exposure of the moves.

Movement compares what consumers actually take on each side (with their views); :mod:`.comparison` replays the
same membership and route change under each compared strategy on the true member lists.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import repeat
from typing import Any

from rocket_rebalance.model import MessageQueue, java_string_key
from rocket_rebalance.pipeline.placement import NO_PLAN, Change, TopicPlan, change
from rocket_rebalance.pipeline.rows import MovementRow, Tables
from rocket_rebalance.pipeline.settings import BROADCASTING
from rocket_rebalance.pipeline.sides import Side

__all__ = ["Moves", "Offsets", "compare_sides", "exposure", "offsets_from_rows", "queue_set"]

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
    """What moves between pairs of plans, worked out once per group.

    Without split views a side's effective shares are its true plans (the same objects), so the movement table
    and the comparison's "current" row ask for the same pair; they share the answer.
    """

    def __init__(self, offsets: Offsets) -> None:
        self.offsets = offsets
        # keyed by the plans' ids; the entry keeps both plans alive, so an id cannot be reused by another plan
        self.found: dict[tuple[int, int], tuple[TopicPlan, TopicPlan, Change]] = {}

    def __call__(self, old: TopicPlan, new: TopicPlan) -> Change:
        key = (id(old), id(new))
        found = self.found.get(key)
        if found is None:
            found = self.found[key] = (old, new, change(old, new))
        return found[2]


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
        found = moves(old, new)
        moved, minimum = len(found.moved), found.minimum
        offsets = [_exposure(moves.offsets, mq) for mq in found.moved]
        exposures = [exposed for _, exposed in offsets]
        exposed_total = sum(exposures)
        out["moved_queues"].extend_columns(
            moved,
            topic=repeat(topic, moved),
            broker=[mq.broker_name for mq in found.moved],
            queue_id=[mq.queue_id for mq in found.moved],
            owner_before=found.owner_before,
            owner_after=found.owner_after,
            committed_offset=[committed for committed, _ in offsets],
            exposure=exposures,
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
