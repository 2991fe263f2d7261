"""The output rows of the per-group analysis, one named type per output table.

Each type's fields are its table's columns in the order of :data:`rocket_rebalance.pipeline.schema.OUTPUT_TABLES`
(``group`` excluded: a group's result carries it once); a test holds the two together. Rows are built by keyword
so that a column cannot silently shift, and stay plain tuples underneath: the executors turn tens of millions of
them into Arrow columns by one transposition, positionally. No pyarrow here, so the analysis does not need it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

__all__ = [
    "ROW_TYPES",
    "AssignmentRow",
    "BalanceRow",
    "ComparisonRow",
    "GroupRow",
    "MovedQueueRow",
    "MovementRow",
    "RejectedRow",
    "SkewRow",
    "Tables",
    "ViolationRow",
    "as_dicts",
    "empty_output",
]


class AssignmentRow(NamedTuple):
    side: str
    topic: str
    broker: str
    queue_id: int
    owner: str


class ViolationRow(NamedTuple):
    side: str
    topic: str | None
    broker: str | None
    queue_id: int | None
    kind: str
    owners: list[str]
    client_id: str | None
    reason: str


class BalanceRow(NamedTuple):
    side: str
    topic: str
    consumers: int
    queues: int
    min: int
    max: int
    mean: float
    max_over_avg: float


class SkewRow(NamedTuple):
    side: str
    client_id: str
    queues: int
    fair_share: float
    skew: float


class MovementRow(NamedTuple):
    topic: str
    queues: int
    moved: int
    minimum: int
    moved_share: float
    minimum_share: float
    removed: int
    paused: int
    exposure: int


class MovedQueueRow(NamedTuple):
    topic: str
    broker: str
    queue_id: int
    owner_before: str | None
    owner_after: str | None
    committed_offset: int | None
    exposure: int


class ComparisonRow(NamedTuple):
    strategy: str
    current: bool
    queues: int
    moved: int
    minimum: int
    moved_share: float
    max_over_avg: float
    max_skew: float
    exposure: int
    failed: bool


class GroupRow(NamedTuple):
    strategy_before: str | None
    strategy_after: str | None
    message_model: str | None
    consumers_before: int
    consumers_after: int | None
    queues_before: int
    queues_after: int | None
    violations_before: int
    violations_after: int | None
    observed_violations: int | None
    moved: int
    minimum: int
    exposure: int
    paused: int
    rebalances: bool


class RejectedRow(NamedTuple):
    side: str
    table: str
    reason: str
    row: str


ROW_TYPES: dict[str, type[tuple[Any, ...]]] = {
    "assignments": AssignmentRow,
    "violations": ViolationRow,
    "balance": BalanceRow,
    "skew": SkewRow,
    "movement": MovementRow,
    "moved_queues": MovedQueueRow,
    "comparison": ComparisonRow,
    "groups": GroupRow,
    "rejected": RejectedRow,
}
"""Each output table's row type, in the order of the schema's tables."""

Tables = dict[str, list[Any]]
"""One group's rows per output table (each row one of the types above)."""


def empty_output(group: str) -> dict[str, Any]:
    """A group's result with every output table empty."""
    result: dict[str, Any] = {name: [] for name in ROW_TYPES}
    result["group"] = group
    return result


def as_dicts(result: Mapping[str, Any]) -> dict[str, Any]:
    """A group's result with each row as a dict of column names (for tests and readers, not the hot path)."""
    named: dict[str, Any] = {"group": result["group"]}
    for name in ROW_TYPES:
        named[name] = [row._asdict() for row in result[name]]
    return named
