"""What Spark runs in its Python workers: batches of groups in, the output tables written as Parquet, counts out.

Each task analyses its groups and writes every output table itself with pyarrow, one part file per table and
partition (``<out>/<table>.parquet/part-<partition>.parquet``), and hands Spark back only row counts. Handing the
rows back instead (nested per group, for Spark to explode and write) cost the JVM more than the analysis cost
Python: Arrow-to-row conversion and Spark's nested Parquet writer for tens of millions of rows, on the same two
cores (benchmarks/RESULTS.md). A part file is written under a temporary ``_``-prefixed name (which readers skip)
and moved into place when the task has finished, so a failed task leaves no partial table and a retried task
replaces its own file.

With ``--writer spark`` the executors do hand their rows back (:func:`row_batches`): slower, but then Spark's
DataFrameWriter writes them, in any format and into a table catalog (:mod:`.writers`).

It lives in the installed package so executors import it by name. It needs pyarrow and the library; pyspark only
for the task's partition number. The single-process reference writes through the same :class:`TableWriters`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from rocket_rebalance.pipeline.analysis import analyze_group, gc_paused
from rocket_rebalance.pipeline.movement import Offsets, exposure
from rocket_rebalance.pipeline.report import ReportParts
from rocket_rebalance.pipeline.rows import Tables
from rocket_rebalance.pipeline.scenario import Scenario
from rocket_rebalance.pipeline.schema import OUTPUT_TABLES, record_batch, struct_of_columns
from rocket_rebalance.pipeline.settings import COMPARED_STRATEGIES

__all__ = [
    "COUNT_SCHEMA",
    "REPORT_TAG",
    "ROWS_SCHEMA",
    "TableWriters",
    "analyze_rows",
    "complete_output",
    "filesystem",
    "offsets_per_group",
    "publish_files",
    "row_batches",
    "write_batches",
]

COUNT_SCHEMA = pa.schema(
    [pa.field("table", pa.string()), pa.field("rows", pa.int64()), pa.field("report", pa.string())]
)
"""What a task returns to Spark: rows written per output table, and one row (table :data:`REPORT_TAG`) whose
``report`` is the task's :class:`~rocket_rebalance.pipeline.report.ReportParts` as JSON."""

REPORT_TAG = "_report"
"""The table name of the row that carries a task's report parts (no output table is named so)."""

TABLE_FIELDS = {name: [pa.field("group", pa.string()), *fields] for name, fields in OUTPUT_TABLES.items()}
"""Each output table's columns as written: ``group`` first."""

TABLE_TAG = "table"
"""The column of :data:`ROWS_SCHEMA` naming the output table of a row."""

ROWS_SCHEMA = pa.schema(
    [
        pa.field(TABLE_TAG, pa.string()),
        *(pa.field(name, pa.struct(f)) for name, f in TABLE_FIELDS.items()),
        pa.field("report", pa.string()),
    ]
)
"""What a task returns with ``--writer spark``: every output row tagged with its table, its values in that table's
struct column (the others null). One flat frame, so the analysis runs once and each table is a filter of it. Its
last row (tagged :data:`REPORT_TAG`, every struct null) carries the task's report parts as JSON in ``report``."""


def offsets_per_group(column: pa.ListArray) -> list[Offsets | None]:
    """Each group's ``offsets`` list (null when the group has no offset row) in the analysis' shape."""
    rows = column.flatten()  # every group's offset rows, end to end (a sliced column is handled by flatten)
    topic, broker, queue_id, max_offset, committed, in_flight = (
        rows.field(name).to_pylist()
        for name in ("topic", "broker", "queue_id", "max_offset", "committed_offset", "in_flight_offset")
    )
    keys = list(zip(topic, broker, queue_id, strict=True))
    values = list(zip(committed, map(exposure, committed, max_offset, in_flight), strict=True))
    bounds = column.offsets.to_pylist()
    start = bounds[0]
    valid = column.is_valid().to_pylist()
    return [
        dict(zip(keys[low - start : high - start], values[low - start : high - start], strict=True)) if ok else None
        for ok, low, high in zip(valid, bounds, bounds[1:], strict=False)
    ]


def analyze_rows(
    batch: pa.RecordBatch, scenario: Scenario | None, compare: bool, compared: Sequence[str] = COMPARED_STRATEGIES
) -> Tables:
    """Every group of an Arrow batch through :func:`analyze_group`, into one set of tables."""
    names = batch.schema.names
    columns = [
        offsets_per_group(batch.column(name)) if name == "offsets" else batch.column(name).to_pylist() for name in names
    ]
    tables = Tables()
    for values in zip(*columns, strict=True):
        analyze_group(dict(zip(names, values, strict=True)), scenario, compare, tables, compared)
    return tables


class TableWriters:
    """One Parquet part file per output table under ``out`` (a local path or a URI pyarrow can write to).

    Files are written under a temporary name and moved into place by :meth:`close`; :meth:`abort` removes them.
    """

    def __init__(self, out: str, part: str) -> None:
        self.fs, self.base = filesystem(out)
        self.part = part
        self.rows = dict.fromkeys(OUTPUT_TABLES, 0)
        self._writers: dict[str, tuple[pq.ParquetWriter, str]] = {}

    def write(self, table: str, columns: Sequence[Sequence[Any]]) -> None:
        """Append rows, given as the columns of ``TABLE_FIELDS[table]``, to the table's part file."""
        if table not in self._writers:
            folder = f"{self.base}/{table}.parquet"
            self.fs.create_dir(folder, recursive=True)
            temporary = f"{folder}/_{self.part}-{uuid.uuid4().hex}.parquet"
            self._writers[table] = (
                pq.ParquetWriter(temporary, pa.schema(TABLE_FIELDS[table]), filesystem=self.fs),
                temporary,
            )
        if columns and columns[0]:
            self._writers[table][0].write_batch(record_batch(columns, TABLE_FIELDS[table]))
            self.rows[table] += len(columns[0])

    def close(self) -> None:
        """Finish every part file (an empty table still gets one, so its schema is readable) and publish it."""
        for table in OUTPUT_TABLES:
            self.write(table, [])
        for table, (writer, temporary) in self._writers.items():
            writer.close()
            self.fs.move(temporary, f"{self.base}/{table}.parquet/{self.part}.parquet")
        self._writers.clear()

    def abort(self) -> None:
        """Drop the unfinished part files."""
        for writer, temporary in self._writers.values():
            writer.close()
            self.fs.delete_file(temporary)
        self._writers.clear()


def filesystem(out: str) -> tuple[pafs.FileSystem, str]:
    """The pyarrow file system and path of a local path or a URI pyarrow can write to."""
    if "://" in out:
        scheme, rest = out.split("://", 1)
        # Spark's Hadoop connectors say s3a:// (or s3n://) where pyarrow says s3://
        filesystem, path = pafs.FileSystem.from_uri(f"s3://{rest}" if scheme in ("s3a", "s3n") else out)
        return filesystem, path.rstrip("/")
    return pafs.LocalFileSystem(), out.rstrip("/")


def _task_part() -> str:
    """``part-<partition>`` of the running Spark task: a retried task then replaces its own file."""
    from pyspark import TaskContext

    context = TaskContext.get()
    return f"part-{context.partitionId():05d}" if context is not None else f"part-{uuid.uuid4().hex}"


def write_batches(
    batches: Iterable[pa.RecordBatch],
    out: str,
    scenario: Scenario | None = None,
    compare: bool = False,
    part: str | None = None,
    compared: Sequence[str] = COMPARED_STRATEGIES,
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: analyse each Arrow batch of groups, write its rows, and yield the counts at the end.

    One Arrow batch holds many groups, so the per-call overhead of Spark's Python bridge is paid per batch, not
    per group (``applyInPandas`` per group costs about 1.5 ms a group before any work is done).
    """
    writers = TableWriters(out, part or _task_part())
    parts = _parts(compare)
    try:
        for batch in batches:
            with gc_paused():
                tables = analyze_rows(batch, scenario, compare, compared)
                parts.add(tables)
                for table, rows in tables.items():
                    writers.write(table, rows.columns)
        writers.close()
    except BaseException:
        writers.abort()
        raise
    counts = [{"table": t, "rows": n, "report": None} for t, n in writers.rows.items()]
    yield pa.RecordBatch.from_pylist(
        [*counts, {"table": REPORT_TAG, "rows": 0, "report": parts.to_json()}], schema=COUNT_SCHEMA
    )


def row_batches(
    batches: Iterable[pa.RecordBatch],
    scenario: Scenario | None = None,
    compare: bool = False,
    compared: Sequence[str] = COMPARED_STRATEGIES,
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body of ``--writer spark``: each Arrow batch of groups analysed, its rows yielded as one
    :data:`ROWS_SCHEMA` batch per table, so the rows of a table lie together (Spark's cache can skip the others'
    batches when a table is selected)."""
    parts = _parts(compare)
    for batch in batches:
        with gc_paused():
            tables = analyze_rows(batch, scenario, compare, compared)
            parts.add(tables)
            for table, rows in tables.items():
                if rows:
                    columns = [
                        struct_of_columns(rows.columns, fields)
                        if name == table
                        else pa.nulls(len(rows), pa.struct(fields))
                        for name, fields in TABLE_FIELDS.items()
                    ]
                    yield pa.RecordBatch.from_arrays(
                        [pa.repeat(table, len(rows)), *columns, pa.nulls(len(rows), pa.string())], schema=ROWS_SCHEMA
                    )
    nothing = [pa.nulls(1, pa.struct(fields)) for fields in TABLE_FIELDS.values()]
    yield pa.RecordBatch.from_arrays(
        [pa.array([REPORT_TAG]), *nothing, pa.array([parts.to_json()])], schema=ROWS_SCHEMA
    )


def _parts(compare: bool) -> ReportParts:
    """A task's empty report parts: the histogram shows the after side's balance when there is one."""
    return ReportParts("after" if compare else "before")


def publish_files(local: str, out: str) -> None:
    """Copy every file under the local folder ``local`` into ``out`` (a path or a URI), keeping relative paths."""
    fs, base = filesystem(out)
    pafs.copy_files(local, base, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs)


def complete_output(out: str) -> None:
    """Give every table that no task wrote (no group at all) an empty part file, so each table can be read."""
    fs, base = filesystem(out)
    missing = [t for t in OUTPUT_TABLES if fs.get_file_info(f"{base}/{t}.parquet").type == pafs.FileType.NotFound]
    if missing:
        writers = TableWriters(out, "part-empty")
        writers.close()  # every table gets a file; only the missing ones are kept
        for table in OUTPUT_TABLES:
            if table not in missing:
                fs.delete_file(f"{base}/{table}.parquet/part-empty.parquet")
