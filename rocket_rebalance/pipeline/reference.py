"""The fleet analysis in one plain Python process: ``impact`` and ``audit``'s in-process engine (``--engine local``),
the tests' oracle and the benchmark's baseline.

It reads the snapshot with pyarrow / json, applies the row checks of :mod:`~rocket_rebalance.pipeline.validate`,
assembles the same per-group input rows the Spark job assembles with ``groupBy``/``collect_list``, and calls the
same :func:`~rocket_rebalance.pipeline.analysis.analyze_group`. Any difference between this and the Spark job is
therefore in the plumbing (reading, row checks, grouping, Arrow batches), which is exactly what the tests check.
A small fleet is analysed here rather than on Spark because Spark's fixed cost (a JVM, a session, a dozen jobs) is
tens of seconds where the analysis is milliseconds a group (benchmarks/RESULTS.md, "Engines"). Nothing here imports
pyspark: the engine runs with pyarrow alone.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from rocket_rebalance.pipeline.analysis import analyze_group, gc_paused
from rocket_rebalance.pipeline.movement import offsets_from_rows
from rocket_rebalance.pipeline.report import ReportParts
from rocket_rebalance.pipeline.rows import Tables as RowTables
from rocket_rebalance.pipeline.scenario import Scenario
from rocket_rebalance.pipeline.schema import INPUT_TABLES, MALFORMED, OUTPUT_TABLES, check_snapshot
from rocket_rebalance.pipeline.settings import COMPARED_STRATEGIES
from rocket_rebalance.pipeline.validate import (
    DUPLICATE_ROUTE,
    NOT_AN_OBJECT,
    ORPHAN_OBSERVED,
    route_key,
    row_reason,
    type_reason,
)
from rocket_rebalance.pipeline.writers import Written
from rocket_rebalance.snapshot_folder import AFTER_TABLES, BEFORE_TABLES, OPTIONAL_TABLES, data_files

__all__ = [
    "Tables",
    "assemble_groups",
    "flatten",
    "read_snapshot",
    "run_reference",
    "write_local",
]

Row = dict[str, Any]
Tables = dict[str, list[Row]]

_INTEGER_RANGES = {"int": (-(2**31), 2**31 - 1), "bigint": (-(2**63), 2**63 - 1)}


def _coerce(value: Any, spark_type: str) -> Any:
    """A JSON or Parquet value as Spark reads it into ``spark_type``; a wrong type becomes ``None``."""
    if value is None:
        return None
    if spark_type in _INTEGER_RANGES:
        low, high = _INTEGER_RANGES[spark_type]
        return value if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high else None
    if spark_type == "string":
        return value if isinstance(value, str) else None
    if spark_type == "boolean":
        return value if isinstance(value, bool) else None
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return list(value)
    return None


def _typed_row(raw: Any, table: str) -> Row:
    """A read row with its spec's columns; with :data:`~.schema.MALFORMED` set when Spark would find it malformed too: a
    line that is no JSON object, or the first column whose value is not of its type (a string in an int column)."""
    columns = INPUT_TABLES[table].columns
    if not isinstance(raw, Mapping):
        return {**dict.fromkeys(c.name for c in columns), MALFORMED: NOT_AN_OBJECT}
    row: Row = {c.name: _coerce(raw.get(c.name), c.spark_type) for c in columns}
    # Spark reads any JSON value into a string (its text) and any list into array<string>; only these fail there
    wrong = [
        c
        for c in columns
        if (c.spark_type in (*_INTEGER_RANGES, "boolean") and raw.get(c.name) is not None and row[c.name] is None)
        or (c.spark_type.startswith("array") and raw.get(c.name) is not None and not isinstance(raw[c.name], list))
    ]
    if wrong:
        row[MALFORMED] = type_reason(wrong[0].name, wrong[0].spark_type)
    return row


def _file_rows(path: Path, fmt: str) -> Iterator[Any]:
    """Each row of a table's files: a dict, or for a JSON line that does not parse, ``None`` (a malformed row)."""
    for file in data_files(path, fmt):
        if fmt == "parquet":
            import pyarrow.parquet as pq

            yield from pq.read_table(file).to_pylist()
        else:
            with file.open(encoding="utf-8") as handle:
                for line in handle:
                    if line.strip():
                        try:
                            yield json.loads(line)
                        except json.JSONDecodeError:
                            yield None


def read_snapshot(snapshot: Path, tables: Iterable[str], optional: tuple[str, ...] = ()) -> Tables:
    """Every table's rows (``optional`` tables when present), with the columns of its spec only (missing optional
    columns are ``None``), and the :data:`~.schema.MALFORMED` reason of a row Spark cannot read either."""
    found = check_snapshot(snapshot, list(tables), optional)
    return {table: [_typed_row(raw, table) for raw in _file_rows(path, fmt)] for table, (path, fmt) in found.items()}


def _spark_json(row: Row) -> str:
    """A rejected row's text as Spark's ``to_json`` writes it (its columns in order, no null ones, compact, not
    ASCII-escaped), so the two engines' ``rejected`` tables are the same to the character."""
    return json.dumps({k: v for k, v in row.items() if v is not None}, separators=(",", ":"), ensure_ascii=False)


def _split(side: str, tables: Tables, rejected: list[Row]) -> Tables:
    """Good rows by table; bad rows go to ``rejected`` with their reason (after the row checks: routes rows naming
    a topic and broker another row names too, and observed queues of consumers that are not good members)."""
    good: Tables = {}

    def refuse(table: str, reason: str, row: Row) -> None:
        rejected.append(
            {
                "group": row.get("group"),
                "side": side,
                "table": table,
                "reason": reason,
                "row": _spark_json(row),
            }
        )

    for table, rows in tables.items():
        keep = good.setdefault(table, [])
        named = Counter(route_key(row) for row in rows) if table == "routes" else Counter()
        for row in rows:
            reason = row.pop(MALFORMED, None) or row_reason(table, row)
            if reason is None and named[route_key(row)] > 1:
                reason = DUPLICATE_ROUTE
            if reason is None:
                keep.append(row)
            else:
                refuse(table, reason, row)
    if "observed" in good:
        members = {(row["group"], row["client_id"]) for row in good["members"]}
        observed = good["observed"]
        good["observed"] = [row for row in observed if (row["group"], row["client_id"]) in members]
        for row in observed:
            if (row["group"], row["client_id"]) not in members:
                refuse("observed", ORPHAN_OBSERVED, row)
    return good


def _sides(tables: Tables) -> dict[str, Row]:
    """One side dict per group, the shape :func:`analyze_group` takes (and the Spark job builds)."""
    routes_by_topic: dict[str, list[Row]] = defaultdict(list)
    for route in tables["routes"]:
        routes_by_topic[route["topic"]].append(route)
    sides: dict[str, Row] = defaultdict(lambda: {"settings": None, "topics": None, "routes": None, "members": None})
    for row in tables["groups"]:
        side = sides[row["group"]]
        side["settings"] = (side["settings"] or []) + [
            {"strategy": row["strategy"], "message_model": row["message_model"], "options": row["options"]}
        ]
    pairs = {(row["group"], row["topic"]) for row in tables["subscriptions"]}
    for group, topic in pairs:
        side = sides[group]
        side["topics"] = (side["topics"] or []) + [topic]
        if routes_by_topic.get(topic):
            side["routes"] = (side["routes"] or []) + routes_by_topic[topic]
    member_columns = ("client_id", "view", "view_digest", "reported", "strategy", "language")
    for row in tables["members"]:
        side = sides[row["group"]]
        side["members"] = (side["members"] or []) + [{c: row[c] for c in member_columns}]
    found = dict(sides)
    if "observed" in tables:  # a snapshot with observed data: every group holds what its rows say, maybe nothing
        for side in found.values():
            side["observed"] = []
        for row in tables["observed"]:
            held = {c: row[c] for c in ("client_id", "topic", "broker", "queue_id")}
            found[row["group"]]["observed"].append(held)  # its group has members: orphans were rejected
    for row in tables.get("rejected", ()):
        if row["group"] in found and row["client_id"] is not None:
            side = found[row["group"]]
            side["unread"] = (side.get("unread") or []) + [{"client_id": row["client_id"], "reason": row["reason"]}]
    return found


def assemble_groups(before: Tables, after: Tables | None, compare: bool) -> list[Row]:
    """The per-group input rows, sorted by group name."""
    before_sides = _sides(before)
    after_sides = _sides(after) if after is not None else {}
    offsets: dict[str, list[Row]] = defaultdict(list)
    if compare:
        for row in before.get("offsets", ()):
            offsets[row["group"]].append(row)
    rows = []
    for group in sorted(set(before_sides) | set(after_sides)):
        rows.append(
            {
                "group": group,
                "before": before_sides.get(group),
                "after": after_sides.get(group),
                "offsets": offsets_from_rows(offsets.get(group, ())) if compare else None,
            }
        )
    return rows


def flatten(results: Iterable[RowTables]) -> Tables:
    """Analysed tables into flat tables, each row a dict with its ``group`` first."""
    tables: Tables = {name: [] for name in OUTPUT_TABLES}
    for result in results:
        for name, table in result.items():
            names = ("group", *table.fields)
            tables[name].extend(dict(zip(names, row, strict=True)) for row in zip(*table.columns, strict=True))
    return tables


def _results(
    snapshot: Path,
    after: Path | None,
    scenario: Scenario | None,
    rejected: list[Row],
    chunk: int,
    compared: Sequence[str] = COMPARED_STRATEGIES,
    done: Callable[[int, int], None] | None = None,
) -> Iterator[RowTables]:
    """The analysis' tables, ``chunk`` groups at a time (the garbage collector paused while a chunk is analysed,
    as the Spark workers do); ``done(groups analysed, groups)`` after each chunk."""
    before = _split("before", read_snapshot(snapshot, BEFORE_TABLES, OPTIONAL_TABLES), rejected)
    after_tables = _split("after", read_snapshot(after, AFTER_TABLES), rejected) if after is not None else None
    compare = after is not None or scenario is not None
    assembled = assemble_groups(before, after_tables, compare)
    rows = iter(assembled)
    analysed = 0
    while batch := list(itertools.islice(rows, chunk)):
        tables = RowTables()
        with gc_paused():
            for row in batch:
                analyze_group(row, scenario, compare, tables, compared)
        analysed += len(batch)
        if done is not None:
            done(analysed, len(assembled))
        yield tables


def run_reference(
    snapshot: Path,
    after: Path | None = None,
    scenario: Scenario | None = None,
    compared: Sequence[str] = COMPARED_STRATEGIES,
) -> Tables:
    """The whole analysis in this process; returns the output tables (``rejected`` includes row-level checks)."""
    rejected: list[Row] = []
    flat = flatten(_results(snapshot, after, scenario, rejected, 2_000, compared))
    flat["rejected"] = rejected + flat["rejected"]
    return flat


def write_local(
    snapshot: Path,
    out: str,
    after: Path | None = None,
    scenario: Scenario | None = None,
    compared: Sequence[str] = COMPARED_STRATEGIES,
    chunk: int = 500,
    done: Callable[[int, int], None] | None = None,
) -> Written:
    """The in-process engine: the same analysis, writing each table as it goes (``chunk`` groups at a time) into
    ``out`` (a claimed, cleared output folder, or a URI pyarrow writes to); returns rows per table and the report's
    aggregates, as the Spark job's write stage does. ``done(groups analysed, groups)`` is called after each chunk.

    A large fleet's output (tens of millions of rows) does not fit in memory as Python dicts, hence the chunks. It
    writes through the executors' own :class:`~rocket_rebalance.pipeline.worker.TableWriters` (one part file per
    table) and adds the report's parts up as they do, so the two engines' outputs are the same table by table.
    """
    from rocket_rebalance.pipeline.worker import TABLE_FIELDS, TableWriters

    writers = TableWriters(out, "part-00000")
    report = ReportParts("after" if after is not None or scenario is not None else "before")
    rejected: list[Row] = []
    try:
        for tables in _results(snapshot, after, scenario, rejected, chunk, compared, done):
            report.add(tables)
            for name, table in tables.items():
                writers.write(name, table.columns)
        writers.write("rejected", [[row[f.name] for row in rejected] for f in TABLE_FIELDS["rejected"]])
        writers.close()
    except BaseException:
        writers.abort()
        raise
    report.rejected.update((row["side"], row["table"], row["reason"]) for row in rejected)
    return Written(writers.rows, report)
