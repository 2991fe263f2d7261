"""The types of the snapshot tables the pipeline reads and of the tables it writes, in one place.

The snapshot folder's names and files (which tables, where each lives, the collector's marker) are its contract in
:mod:`rocket_rebalance.snapshot_folder`; here are the columns and their types, which need pyarrow. Input tables are
checked here (presence and columns) before any Spark work starts, because a typo in a folder name should cost a
second, not a JVM start and a failed stage. Output schemas are Arrow schemas: the executors build Arrow
batches directly and the Spark schema is derived from them, so the two cannot drift apart.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from rocket_rebalance.snapshot_folder import SnapshotError, data_files, has_table, table_path

__all__ = [
    "ARROW_TYPES",
    "INPUT_TABLES",
    "MALFORMED",
    "OUTPUT_TABLES",
    "Column",
    "TableSpec",
    "check_snapshot",
    "exact_parquet_columns",
    "record_batch",
    "struct_of_columns",
]


@dataclass(frozen=True)
class Column:
    """One input column: its name, its Spark SQL type, and whether a snapshot must have it."""

    name: str
    spark_type: str
    required: bool = True


@dataclass(frozen=True)
class TableSpec:
    name: str
    columns: tuple[Column, ...]

    @property
    def ddl(self) -> str:
        """The Spark DDL schema, used to read JSON Lines without inference and to cast Parquet columns."""
        return ", ".join(f"`{c.name}` {c.spark_type}" for c in self.columns)


MALFORMED = "_malformed"
"""What a read of an input table adds to each row besides the spec's columns (a column in the Spark job, a key in the
reference): why the row's values cannot be read as the table's types, which rejects it (null or absent when they
can)."""

INPUT_TABLES: dict[str, TableSpec] = {  # the tables of snapshot_folder.TABLES, in its order
    spec.name: spec
    for spec in (
        TableSpec(
            "routes",
            (
                Column("topic", "string"),
                Column("broker", "string"),
                Column("read_queue_nums", "int"),
                Column("perm", "int", required=False),
            ),
        ),
        TableSpec(
            "members",
            (
                Column("group", "string"),
                Column("client_id", "string"),
                Column("view", "array<string>", False),
                Column("view_digest", "string", False),
                Column("reported", "boolean", False),
                Column("strategy", "string", False),
                Column("language", "string", False),
            ),
        ),
        TableSpec("subscriptions", (Column("group", "string"), Column("topic", "string"))),
        TableSpec(
            "groups",
            (
                Column("group", "string"),
                Column("strategy", "string"),
                Column("message_model", "string", required=False),
                Column("options", "string", required=False),
            ),
        ),
        TableSpec(
            "offsets",
            (
                Column("group", "string"),
                Column("topic", "string"),
                Column("broker", "string"),
                Column("queue_id", "int"),
                Column("max_offset", "bigint"),
                Column("committed_offset", "bigint"),
                Column("in_flight_offset", "bigint", required=False),
            ),
        ),
        TableSpec(
            "observed",
            (
                Column("group", "string"),
                Column("client_id", "string"),
                Column("topic", "string"),
                Column("broker", "string"),
                Column("queue_id", "int"),
            ),
        ),
        TableSpec(
            "rejected",
            (
                Column("group", "string", False),
                Column("client_id", "string", False),
                Column("reason", "string", False),
            ),
        ),
    )
}


def _fits(kind: pa.DataType, spark_type: str) -> bool:
    """Whether a Parquet column of Arrow type ``kind`` can be read as ``spark_type`` (all-null columns can)."""
    if pa.types.is_null(kind):
        return True
    if pa.types.is_dictionary(kind):
        return _fits(kind.value_type, spark_type)
    if spark_type in ("int", "bigint"):
        return bool(pa.types.is_integer(kind))
    if spark_type == "boolean":
        return bool(pa.types.is_boolean(kind))
    if spark_type == "string":
        return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))
    return bool(pa.types.is_list(kind) or pa.types.is_large_list(kind)) and _fits(kind.value_type, "string")


ARROW_TYPES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "int": pa.int32(),
    "bigint": pa.int64(),
    "boolean": pa.bool_(),
    "array<string>": pa.list_(pa.string()),
}
"""The Arrow type of each input column type: what fleet-gen writes, and what a file storing a column exactly holds."""


def _stored_exactly(kind: pa.DataType, spark_type: str) -> bool:
    """Whether a Parquet column of Arrow type ``kind`` holds ``spark_type`` itself, not a type Spark must cast."""
    expected = ARROW_TYPES[spark_type]
    if pa.types.is_list(expected):  # the item field's name and nullability are the writer's own
        return bool(pa.types.is_list(kind) and kind.value_type == expected.value_type)
    return bool(kind == expected)


def exact_parquet_columns(path: Path, spec: TableSpec) -> tuple[Column, ...] | None:
    """The spec's columns that a local Parquet table has (those of its first file, as Spark reads them), when every
    file stores each of them with exactly the spec's type, as fleet-gen and the collector write them; ``None`` when
    some file stores one otherwise (a cast is needed), or there is no file.

    Spark can then read the table with that schema given: no job to read a footer for the schema, and no cast or
    malformed-value check per column (a column of the spec's own type holds no value of another), which were most
    of a run's start on a fresh JVM (benchmarks/RESULTS.md, 2026-11-27)."""
    import pyarrow.parquet as pq

    files = data_files(path, "parquet")
    if not files:
        return None
    schemas = [pq.read_schema(file) for file in files]
    present = tuple(c for c in spec.columns if c.name in schemas[0].names)
    for schema in schemas:
        for column in present:
            if column.name in schema.names and not _stored_exactly(schema.field(column.name).type, column.spark_type):
                return None
    return present


def _parquet_columns(files: list[Path], spec: TableSpec, where: str) -> set[str]:
    """Column names of Parquet files, whose types must fit the spec: a whole column of the wrong type is a wrong
    file, not a set of bad rows, and Spark would only find out half-way through the job."""
    import pyarrow.parquet as pq

    names: set[str] = set()
    for file in files:
        try:
            schema = pq.read_schema(file)
        except (pa.ArrowException, OSError) as error:
            raise SnapshotError(f"{where}: {file.name} is not a Parquet file ({error})") from None
        if not names:
            names = set(schema.names)
        for column in spec.columns:
            if column.name in schema.names and not _fits(schema.field(column.name).type, column.spark_type):
                raise SnapshotError(
                    f"{where}: {file.name} column {column.name} is {schema.field(column.name).type}, "
                    f"expected {column.spark_type}"
                )
    return names


def _columns_of(path: Path, fmt: str, spec: TableSpec, where: str) -> set[str] | None:
    """Column names of the first data file, or ``None`` for an empty table (nothing to check)."""
    files = data_files(path, fmt)
    if not files:
        return None
    if fmt == "parquet":
        return _parquet_columns(files, spec, where)
    with files[0].open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                try:
                    first = json.loads(line)
                except json.JSONDecodeError as error:
                    raise SnapshotError(f"{files[0]}: first line is not JSON: {error}") from None
                if not isinstance(first, dict):
                    raise SnapshotError(f"{files[0]}: lines must be JSON objects")
                return set(first)
    return None


def check_snapshot(
    snapshot: Path, tables: tuple[str, ...] | list[str], optional: tuple[str, ...] = ()
) -> dict[str, tuple[Path, str]]:
    """Each table's path and format; raises :class:`SnapshotError` for a missing folder, table or column.

    ``optional`` tables are checked the same way when the snapshot has them, and left out when it does not.

    JSON Lines tables are checked on their first object: required columns must be present (``null`` is allowed
    and rejected later, row by row, with a reason, as is a value of the wrong type). Parquet tables are checked on
    every file's schema: required columns present, and every column of a type that can be read as the spec's.
    """
    if not snapshot.is_dir():
        raise SnapshotError(f"snapshot {snapshot}: not a folder")
    found: dict[str, tuple[Path, str]] = {}
    present = [table for table in optional if has_table(snapshot, table)]
    for table in (*tables, *present):
        path, fmt = table_path(snapshot, table)
        columns = _columns_of(path, fmt, INPUT_TABLES[table], f"snapshot {snapshot}: table {table}")
        if columns is not None:
            required = [c.name for c in INPUT_TABLES[table].columns if c.required]
            missing = [name for name in required if name not in columns]
            if missing:
                raise SnapshotError(
                    f"snapshot {snapshot}: table {table} has no column {', '.join(missing)} "
                    f"(required: {', '.join(required)})"
                )
        found[table] = (path, fmt)
    return found


# ---- outputs -------------------------------------------------------------------------------------------------

_str = pa.string()
_int = pa.int32()
_long = pa.int64()
_dbl = pa.float64()


def _fields(*pairs: tuple[str, pa.DataType]) -> list[pa.Field]:
    return [pa.field(name, kind) for name, kind in pairs]


OUTPUT_TABLES: dict[str, list[pa.Field]] = {
    "assignments": _fields(("side", _str), ("topic", _str), ("broker", _str), ("queue_id", _int), ("owner", _str)),
    "violations": _fields(
        ("side", _str),
        ("topic", _str),
        ("broker", _str),
        ("queue_id", _int),
        ("kind", _str),
        ("owners", pa.list_(_str)),
        ("client_id", _str),
        ("reason", _str),
    ),
    "balance": _fields(
        ("side", _str),
        ("topic", _str),
        ("consumers", _int),
        ("queues", _int),
        ("min", _int),
        ("max", _int),
        ("mean", _dbl),
        ("max_over_avg", _dbl),
    ),
    "skew": _fields(("side", _str), ("client_id", _str), ("queues", _int), ("fair_share", _dbl), ("skew", _dbl)),
    "movement": _fields(
        ("topic", _str),
        ("queues", _int),
        ("moved", _int),
        ("minimum", _int),
        ("moved_share", _dbl),
        ("minimum_share", _dbl),
        ("removed", _int),
        ("paused", _int),
        ("exposure", _long),
    ),
    "moved_queues": _fields(
        ("topic", _str),
        ("broker", _str),
        ("queue_id", _int),
        ("owner_before", _str),
        ("owner_after", _str),
        ("committed_offset", _long),
        ("exposure", _long),
    ),
    "comparison": _fields(
        ("strategy", _str),
        ("current", pa.bool_()),
        ("queues", _int),
        ("moved", _int),
        ("minimum", _int),
        ("moved_share", _dbl),
        ("max_over_avg", _dbl),
        ("max_skew", _dbl),
        ("exposure", _long),
        ("failed", pa.bool_()),
    ),
    "groups": _fields(
        ("strategy_before", _str),
        ("strategy_after", _str),
        ("message_model", _str),
        ("consumers_before", _int),
        ("consumers_after", _int),
        ("queues_before", _int),
        ("queues_after", _int),
        ("violations_before", _int),
        ("violations_after", _int),
        ("observed_violations", _int),
        ("moved", _int),
        ("minimum", _int),
        ("exposure", _long),
        ("paused", _int),
        ("rebalances", pa.bool_()),
    ),
    "rejected": _fields(("side", _str), ("table", _str), ("reason", _str), ("row", _str)),
}
"""Each output table's columns except ``group``, which every table has first."""


def struct_of_columns(columns: Sequence[Sequence[object]], fields: list[pa.Field]) -> pa.StructArray:
    """Columns (in ``fields`` order, of equal length) as one Arrow struct array."""
    return pa.StructArray.from_arrays(
        [pa.array(column, type=field.type) for column, field in zip(columns, fields, strict=True)], fields=fields
    )


def record_batch(columns: Sequence[Sequence[object]], fields: list[pa.Field]) -> pa.RecordBatch:
    """Columns (in ``fields`` order, of equal length) as one Arrow record batch of those fields."""
    return pa.RecordBatch.from_struct_array(struct_of_columns(columns, fields))
