"""The output rows of the per-group analysis: one named type per output table, and the tables that hold them.

Each type's fields are its table's columns in the order of :data:`rocket_rebalance.pipeline.schema.OUTPUT_TABLES`
(``group`` excluded: it is filled in per group); a test holds the two together. A row is built by keyword so that a
column cannot silently shift. Tables keep their rows as columns (:class:`Table`): the executors hand tens of
millions of rows to Arrow, which takes columns, so no Python object per row is kept (or built, for the runs of rows
the analysis adds column by column: a consumer's queues, a topic's moved queues). No pyarrow here, so the analysis
does not need it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from itertools import repeat
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
    "Table",
    "Tables",
    "ViolationRow",
    "as_dicts",
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


class Table:
    """One output table's rows, for one group or a batch of groups, held as columns: ``group`` first, then the
    row type's fields. The analysis adds rows without their group (:meth:`append`, :meth:`extend`,
    :meth:`extend_columns`); :meth:`close_group` fills it in for the rows added since the last call."""

    __slots__ = ("_names", "_values", "columns", "fields")

    def __init__(self, fields: tuple[str, ...]) -> None:
        self.fields = fields
        self._names = frozenset(fields)
        self.columns: list[list[Any]] = [[] for _ in range(len(fields) + 1)]
        self._values = self.columns[1:]  # the same lists: every column but the group

    def __len__(self) -> int:
        return len(self.columns[-1])

    def append(self, row: tuple[Any, ...]) -> None:
        """One row: a value per field, in order (one of the row types above, built by keyword)."""
        if len(row) != len(self._values):
            raise ValueError(f"a row of {len(row)} values for the {len(self._values)} columns {self.fields}")
        deque(map(list.append, self._values, row), maxlen=0)  # each value onto its column, in C

    def extend(self, rows: Iterable[tuple[Any, ...]]) -> None:
        for row in rows:
            self.append(row)

    def extend_columns(self, count: int, **columns: Iterable[Any]) -> None:
        """``count`` rows given column by column: every field by name, each ``count`` values (a value the same in
        every row as ``itertools.repeat(value, count)``). A column of another length is a bug of the caller: it
        raises ``ValueError``, and the table is not to be used after it."""
        if columns.keys() != self._names:
            raise ValueError(f"columns {sorted(columns)} are not the table's {sorted(self._names)}")
        end = len(self) + count
        for column, name in zip(self._values, self.fields, strict=True):
            column.extend(columns[name])
            if len(column) != end:
                raise ValueError(f"column {name} has {len(column) - end + count} values for {count} rows")

    def close_group(self, group: str) -> None:
        """Give the rows added since the last call their group."""
        self.columns[0].extend(repeat(group, len(self) - len(self.columns[0])))

    def rows(self, start: int = 0) -> list[tuple[Any, ...]]:
        """The rows from ``start`` on, as tuples of the fields (no group)."""
        return list(zip(*(column[start:] for column in self._values), strict=True))

    def replace_rows(self, start: int, rows: Iterable[tuple[Any, ...]]) -> None:
        """The rows from ``start`` on (none of them closed yet) replaced by ``rows``."""
        for column in self._values:
            del column[start:]
        self.extend(rows)


class Tables(dict[str, Table]):
    """Every output table (by name, in the order of the schema's tables) for one group or a batch of groups; the
    groups analysed into them, in order, in :attr:`groups`."""

    def __init__(self) -> None:
        super().__init__((name, Table(row_type._fields)) for name, row_type in ROW_TYPES.items())  # type: ignore[attr-defined]
        self.groups: list[str] = []

    def close_group(self, group: str) -> None:
        """The rows added since the last group are ``group``'s."""
        for table in self.values():
            table.close_group(group)
        self.groups.append(group)


def as_dicts(result: Tables) -> dict[str, Any]:
    """One group's tables as ``group`` and, per table, each row as a dict of column names (for tests and readers,
    not the hot path)."""
    (group,) = result.groups
    named: dict[str, Any] = {"group": group}
    for name, table in result.items():
        named[name] = [dict(zip(table.fields, row, strict=True)) for row in table.rows()]
    return named
