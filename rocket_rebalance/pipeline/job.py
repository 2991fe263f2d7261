"""The fleet impact job on Spark (its ``spark-submit`` entry is :mod:`.submit`).

Steps: check the input tables (before Spark starts), read them with fixed schemas, reject bad rows with a reason
(Spark column expressions stating the rules of :mod:`~rocket_rebalance.pipeline.validate`), assemble one row per
consumer group with nested routes, members, settings and offsets (``groupBy`` + ``collect_list``), and run
:func:`~rocket_rebalance.pipeline.worker.write_batches` over Arrow batches of groups with ``mapInArrow``: the
executors analyse their groups and write the output tables as Parquet part files themselves, returning only row
counts. The fleet never comes to the driver: only the counts and the report's aggregates do.

On a cluster::

    spark-submit --master yarn --py-files rocket_rebalance.zip \\
        rocket_rebalance/pipeline/submit.py --snapshot hdfs:///fleet/snap --scenario deploy.json --out hdfs:///fleet/out

(local paths are checked before Spark starts; URIs with a scheme are left to Spark for the input, and to
pyarrow's file systems for the tables the executors write, so the executors need write access to ``--out``.)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocket_rebalance.inputs import read_input_text
from rocket_rebalance.model import GROUP_MAX_LENGTH, MAX_TOPIC_QUEUES, TOPIC_MAX_LENGTH
from rocket_rebalance.pipeline.options import (
    MAX_PARTITIONS,
    WriterSpec,
    check_master,
    choose_engine,
    parse_conf,
    writer_spec,
)
from rocket_rebalance.pipeline.output import claim_output, clear_output
from rocket_rebalance.pipeline.reference import write_local
from rocket_rebalance.pipeline.report import ReportData, write_report
from rocket_rebalance.pipeline.scenario import Scenario, load_scenario
from rocket_rebalance.pipeline.schema import INPUT_TABLES, MALFORMED, TableSpec, check_snapshot, exact_parquet_columns
from rocket_rebalance.pipeline.settings import COMPARED_STRATEGIES, compared_strategies
from rocket_rebalance.pipeline.validate import (
    DUPLICATE_ROUTE,
    NAME_PATTERN,
    NOT_AN_OBJECT,
    ORPHAN_OBSERVED,
    TOO_MANY_QUEUES,
    type_reason,
)
from rocket_rebalance.pipeline.writers import Written
from rocket_rebalance.progress import Progress
from rocket_rebalance.snapshot_folder import AFTER_TABLES, BEFORE_TABLES, OPTIONAL_TABLES, data_files, snapshot_partial

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "SPARK_LOG_PREFIX",
    "ImpactError",
    "ImpactResult",
    "build_session",
    "run_from_args",
    "run_impact",
    "spark_error_line",
    "spark_failures",
]


class ImpactError(ValueError):
    """A failure of the Spark job itself, reduced to one line for the command line (``rocket-rebalance: ...``).

    A ``ValueError`` because that is what the command line reports as one line, and the pipeline does not import
    the command-line package (the layering rule: it uses only the pure layers)."""


def build_session(
    master: str = "local[*]", conf: dict[str, str] | None = None, log: Path | None = None
) -> SparkSession:
    """A SparkSession for the job: UI off, quiet logs, and this interpreter for the Python workers.

    ``PYSPARK_PYTHON`` is set to this interpreter when unset, so workers import the same installed library. With
    ``log``, the JVM this process starts writes all its output there instead of the terminal: Spark's log4j lines
    (its ERROR and WARN lines, with their Java frames), the JVM's own warnings and whatever the Python workers
    print, which the command line would otherwise show before its one line. A JVM already running in this process
    (a session started earlier) or spark-submit's own keeps the output it has.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    settings = {
        "spark.app.name": "rocket-rebalance-impact",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.maxRecordsPerBatch": "1000",
    }
    if master:
        settings["spark.master"] = master
        if master.startswith("local"):
            # local mode runs the executors inside the driver JVM, whose default heap (1g) is small for a fleet
            settings["spark.driver.memory"] = "4g"
            # nothing outside this machine talks to a local job: its driver RPC and block manager (which have no
            # authentication) listen on loopback, not on whatever address the host name resolves to
            settings["spark.driver.bindAddress"] = "127.0.0.1"
            settings["spark.driver.host"] = "127.0.0.1"
    settings.update(conf or {})
    spark_conf = SparkConf(loadDefaults=False).setAll(list(settings.items()))
    if log is not None and SparkContext._gateway is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        from pyspark.java_gateway import launch_gateway

        with log.open("ab") as output:  # the JVM keeps its own handle
            # launch_gateway's popen_kwargs are PySpark's own way to capture the JVM's output; it has no annotations
            gateway = launch_gateway(spark_conf, popen_kwargs={"stdout": output, "stderr": output})  # type: ignore[no-untyped-call]
        SparkContext(conf=spark_conf, gateway=gateway)  # the context the builder below then takes
    spark = SparkSession.builder.config(conf=spark_conf).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _read(spark: SparkSession, path: Path | str, fmt: str, spec: TableSpec) -> DataFrame:
    """A table with exactly the spec's columns and types (missing optional columns are null), plus
    :data:`~.schema.MALFORMED`: a row holding a value that is not of its column's type is rejected with that reason,
    like any other bad row, instead of passing as a null (JSON) or stopping the job half-way (Parquet, ANSI casts)."""
    from pyspark.sql import functions as F

    if fmt == "json":
        line = "_line"  # Spark keeps the text of a line it could not read fully here (its other values stay parsed)
        frame = (
            spark.read.schema(f"{spec.ddl}, `{line}` string").option("columnNameOfCorruptRecord", line).json(str(path))
        )
        wrong = [
            F.when(
                F.col(f"`{c.name}`").isNull() & F.get_json_object(F.col(line), f"$.{c.name}").isNotNull(),
                F.lit(type_reason(c.name, c.spark_type)),
            )
            for c in spec.columns
        ]
        malformed = F.when(F.col(line).isNotNull(), F.coalesce(*wrong, F.lit(NOT_AN_OBJECT)))
        return frame.select(*[F.col(f"`{c.name}`") for c in spec.columns], malformed.alias(MALFORMED))
    # stored as the spec says (exact): read with that schema given, nothing to cast, nothing can be malformed
    exact = exact_parquet_columns(Path(path), spec) if _is_local(str(path)) else None
    if exact is not None:
        frame = spark.read.schema(", ".join(f"`{c.name}` {c.spark_type}" for c in exact)).parquet(str(path))
        present = list(exact)
    else:
        frame = spark.read.parquet(str(path))
        present = [c for c in spec.columns if c.name in frame.columns]  # the types were checked before Spark started
    values = {
        c.name: F.col(f"`{c.name}`") if exact is not None else F.col(f"`{c.name}`").try_cast(c.spark_type)
        for c in present
    }  # a cast gives null when out of range
    malformed = F.coalesce(
        *[
            F.when(F.col(f"`{c.name}`").isNotNull() & values[c.name].isNull(), F.lit(type_reason(c.name, c.spark_type)))
            for c in present
            if exact is None
        ],
        F.lit(None).cast("string"),
    )
    return frame.select(
        *[values.get(c.name, F.lit(None).cast(c.spark_type)).alias(c.name) for c in spec.columns],
        malformed.alias(MALFORMED),
    )


def _name_ok(column: Column, max_length: int) -> Column:
    from pyspark.sql import functions as F

    return column.isNotNull() & column.rlike(NAME_PATTERN) & (F.length(column) <= max_length)


def _reason(table: str) -> Column:
    """The rejection reason of a row, or null: the rules of ``validate.py``, in the same order."""
    from pyspark.sql import functions as F

    c = F.col
    group_bad = ~_name_ok(c("group"), GROUP_MAX_LENGTH)
    topic_bad = ~_name_ok(c("topic"), TOPIC_MAX_LENGTH)
    broker_missing = c("broker").isNull() | (c("broker") == "")
    if table == "routes":
        return (
            F.when(topic_bad, "invalid topic name")
            .when(broker_missing, "broker name is missing")
            .when(c("read_queue_nums").isNull(), "read queue count is missing")
            .when(c("read_queue_nums") < 0, "negative read queue count")
            .when(c("read_queue_nums") > MAX_TOPIC_QUEUES, TOO_MANY_QUEUES)
            .when(c("perm").isNotNull() & (c("perm") < 0), "negative perm")
        )
    if table == "members":
        return F.when(group_bad, "invalid group name").when(
            c("client_id").isNull() | (c("client_id") == ""), "client ID is missing"
        )
    if table == "subscriptions":
        return F.when(group_bad, "invalid group name").when(topic_bad, "invalid topic name")
    if table == "groups":
        return F.when(group_bad, "invalid group name")
    if table == "observed":
        return (
            F.when(group_bad, "invalid group name")
            .when(topic_bad, "invalid topic name")
            .when(c("client_id").isNull() | (c("client_id") == ""), "client ID is missing")
            .when(broker_missing, "broker name is missing")
            .when(c("queue_id").isNull() | (c("queue_id") < 0), "queue ID is missing or negative")
        )
    if table == "rejected":  # the collector's notes: kept whole, only their reasons are used
        return F.lit(None).cast("string")
    committed, maximum, in_flight = c("committed_offset"), c("max_offset"), c("in_flight_offset")
    return (
        F.when(group_bad, "invalid group name")
        .when(topic_bad, "invalid topic name")
        .when(broker_missing, "broker name is missing")
        .when(c("queue_id").isNull() | (c("queue_id") < 0), "queue ID is missing or negative")
        .when(maximum.isNull() | committed.isNull(), "offset is missing")
        .when((maximum < 0) | (committed < 0), "negative offset")
        .when(committed > maximum, "committed offset beyond max offset")
        .when(
            in_flight.isNotNull() & ((in_flight < committed) | (in_flight > maximum)),
            "in-flight offset outside committed..max",
        )
    )


def _duplicate_route() -> Column:
    """:data:`~rocket_rebalance.pipeline.validate.DUPLICATE_ROUTE` for a routes row whose topic and broker another
    row of the table names too (``validate.route_key``: both named), checked after the row checks."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    named = F.col("topic").isNotNull() & F.col("broker").isNotNull()
    rows = F.count(F.lit(1)).over(Window.partitionBy("topic", "broker"))
    return F.when(named & (rows > 1), F.lit(DUPLICATE_ROUTE))


def _split(frames: dict[str, DataFrame], side: str, cached: list[DataFrame]) -> tuple[dict[str, DataFrame], DataFrame]:
    """Good rows per table, and every bad row as (group, side, table, reason, row).

    Each table is checked once: its rows with their reason are persisted (added to ``cached``, for the caller to
    release), so the bad rows, written after the analysis, come from what the analysis' own reading kept
    instead of a second reading and checking of every input table. All but ``offsets``: it holds most of the
    input's rows (a row per queue of each group), read only by the one aggregation, and building Spark's cache of
    it cost more than reading and checking it again for its bad rows (the stage timings in benchmarks/RESULTS.md,
    2026-11-27 local[2] 30,000 groups: 13 s of stages before the analysis against 7.6 s, and 2 s more after it)."""
    from functools import reduce

    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    good: dict[str, DataFrame] = {}
    bad_rows: list[DataFrame] = []
    for table, frame in frames.items():
        columns = [name for name in frame.columns if name != MALFORMED]
        rules = [F.col(MALFORMED), _reason(table)]
        if table == "routes":
            rules.append(_duplicate_route())
        checked = frame.withColumn("_reason", F.coalesce(*rules)).drop(MALFORMED)
        if table != "offsets":  # see above
            checked = checked.persist(StorageLevel.MEMORY_AND_DISK)
            cached.append(checked)
        good[table] = checked.filter(F.col("_reason").isNull()).drop("_reason")
        bad = checked.filter(F.col("_reason").isNotNull()).select(
            (F.col("group") if "group" in columns else F.lit(None).cast("string")).alias("group"),
            F.lit(side).alias("side"),
            F.lit(table).alias("table"),
            F.col("_reason").alias("reason"),
            F.to_json(F.struct(*[F.col(f"`{name}`") for name in columns])).alias("row"),
        )
        bad_rows.append(bad)
    if "observed" in good:  # a held queue of a consumer the members table does not have (as a good row)
        members = good["members"].select("group", "client_id").distinct()
        observed = good["observed"]
        good["observed"] = observed.join(members, ["group", "client_id"], "left_semi")
        orphans = observed.join(members, ["group", "client_id"], "left_anti")
        bad_rows.append(
            orphans.select(
                "group",
                F.lit(side).alias("side"),
                F.lit("observed").alias("table"),
                F.lit(ORPHAN_OBSERVED).alias("reason"),
                F.to_json(F.struct(*[F.col(f"`{name}`") for name in observed.columns])).alias("row"),
            )
        )
    return good, reduce(lambda left, right: left.unionByName(right), bad_rows)


def _side(good: dict[str, DataFrame], name: str) -> DataFrame:
    """One row per group: ``(group, <name>: struct<settings, topics, routes, members>)``."""
    from pyspark.sql import functions as F

    subscriptions = good["subscriptions"].select("group", "topic").dropDuplicates()
    topics = subscriptions.groupBy("group").agg(F.collect_list("topic").alias("topics"))
    routes = (
        subscriptions.join(good["routes"], "topic")
        .groupBy("group")
        .agg(F.collect_list(F.struct("topic", "broker", "read_queue_nums", "perm")).alias("routes"))
    )
    members = (
        good["members"]
        .groupBy("group")
        .agg(
            F.collect_list(F.struct("client_id", "view", "view_digest", "reported", "strategy", "language")).alias(
                "members"
            )
        )
    )
    settings = (
        good["groups"]
        .groupBy("group")
        .agg(F.collect_list(F.struct("strategy", "message_model", "options")).alias("settings"))
    )
    side = (
        settings.join(topics, "group", "full_outer")
        .join(members, "group", "full_outer")
        .join(routes, "group", "left_outer")
    )
    fields = ["settings", "topics", "routes", "members"]
    if "observed" in good:  # with an observed table every group holds what its rows say, possibly nothing
        held = F.struct("client_id", "topic", "broker", "queue_id")
        observed = good["observed"].groupBy("group").agg(F.collect_list(held).alias("observed"))
        side = side.join(observed, "group", "left_outer").withColumn(
            "observed", F.coalesce(F.col("observed"), F.array().cast(observed.schema["observed"].dataType))
        )
        fields.append("observed")
    if "rejected" in good:  # the collector's reasons for consumers whose running info it could not read
        notes = good["rejected"].filter(F.col("group").isNotNull() & F.col("client_id").isNotNull())
        unread = notes.groupBy("group").agg(F.collect_list(F.struct("client_id", "reason")).alias("unread"))
        side = side.join(unread, "group", "left_outer")
        fields.append("unread")
    return side.select("group", F.struct(*fields).alias(name))


@dataclass
class ImpactResult:
    """What a run produced: where, how many rows per table, and the fleet totals of the report."""

    out: str
    rows: dict[str, int]
    totals: dict[str, Any]
    report: str | None
    seconds: float
    partial: list[str]  # the snapshots (before, after) their collector marked partial
    engine: str = "spark"  # where the analysis ran: local (this process) or spark


PARTIAL_NOTE = (
    "the collector could not read every group (its rejected.jsonl says which and why); what it could not read is "
    "missing from these tables"
)


NO_COMPARISON_NOTE = "**No strategy comparison**: the run was asked for none (`--compare none`)"
"""The report's note when the comparison table is empty because it was not asked for."""


def _is_local(path: str | Path) -> bool:
    return "://" not in str(path)


def run_impact(
    snapshot: Path | str,
    out: Path | str,
    after: Path | str | None = None,
    scenario: Scenario | None = None,
    master: str | None = None,
    spark: SparkSession | None = None,
    partitions: int | None = None,
    report: bool = True,
    progress: Progress | None = None,
    conf: dict[str, str] | None = None,
    inputs: Sequence[Path | str] = (),
    writer: WriterSpec | None = None,
    spark_log: Path | None = None,
    compared: Sequence[str] = COMPARED_STRATEGIES,
    engine: str = "auto",
) -> ImpactResult:
    """Run the whole impact analysis; ``after`` and ``scenario`` are exclusive (neither: the snapshot alone).

    Everything that can be checked is checked before Spark starts: the arguments, the input tables (a missing
    table or column raises ``SnapshotError``) and the output folder (``OutputError``: it must lie apart from the
    snapshots, their tables and ``inputs``, further input files such as the scenario's, and hold nothing but an
    earlier run's output). ``engine`` (:data:`~.options.ENGINES`): in this process or on Spark; ``auto`` by the
    snapshot's size, and Spark whenever a Spark option is given: ``master`` (None: ``local[*]``), ``spark`` (a
    session to reuse, as the tests do; otherwise one is built and stopped), ``partitions``, ``conf``, a ``writer``
    other than pyarrow (default: the executors write Parquet; see :mod:`.writers`), an input under a URI.
    ``spark_log``: where the JVM a new session starts writes its output (see :func:`build_session`).
    ``compared``: the strategies the comparison table replays the change under (none: no comparison).
    ``progress``: where the steps are said (default: ``impact [N]`` lines on stderr; :mod:`~rocket_rebalance.progress`).
    """
    _check_arguments(after, scenario, partitions, master or "")
    writer = writer or WriterSpec()
    log = progress if progress is not None else Progress("impact", sys.stderr)
    log.step(f"checking snapshot {snapshot}")
    found = _check_inputs(snapshot, after)
    spark_only = _spark_options(master, spark, partitions, conf, writer, found)
    _require("pyarrow", "the fleet analysis")  # both engines write the tables with it
    chosen = choose_engine(engine, _group_count(found) if engine == "auto" and not spark_only else 0, spark_only)
    if chosen == "spark":
        _require("pyspark", "--engine spark")
    compare = after is not None or scenario is not None
    out_text = str(out)
    target = out_text if not _is_local(out_text) else str(Path(out_text).resolve())
    claim_output(target, [snapshot, *([after] if after is not None else []), *found.tables, *inputs])
    if chosen == "local":
        clear_output(target)
        with log.count("analyzing groups", "groups", "in this process, --engine local") as count:
            written = write_local(
                Path(snapshot), target, Path(after) if after is not None else None, scenario, compared, done=count
            )
    else:
        written = _on_spark(found, target, out_text, scenario, compare, compared, writer, _SparkRun(
            "local[*]" if master is None else master, spark, partitions, conf, spark_log), log)  # fmt: skip
    rows = written.rows
    data = written.report.data(_report_title(scenario, after, snapshot))
    data.notes += [f"**Partial snapshot** {path}: {PARTIAL_NOTE}" for path in found.partial]
    if compare and not compared:
        data.notes.append(NO_COMPARISON_NOTE)
    report_path = _publish_summary(data, rows, found.partial, target, out_text if report else None)
    seconds = log.seconds()
    log.step(
        f"done: {data.totals['groups']} groups, {data.totals['groups_rebalancing']} rebalance, "
        f"{rows.get('violations', 0)} violation rows, {rows['rejected']} rejected rows; output in {out_text}"
    )
    return ImpactResult(out_text, rows, data.totals, report_path, seconds, found.partial, chosen)


@dataclass(frozen=True)
class _SparkRun:
    """How the Spark engine runs: its master, a session to reuse (or None: one built and stopped), its
    partitions, extra settings and the new JVM's log file."""

    master: str
    spark: SparkSession | None
    partitions: int | None
    conf: dict[str, str] | None
    log: Path | None


def _on_spark(
    found: _Inputs,
    target: str,
    out_text: str,
    scenario: Scenario | None,
    compare: bool,
    compared: Sequence[str],
    writer: WriterSpec,
    run: _SparkRun,
    log: Progress,
) -> Written:
    """The Spark engine: read, check and assemble the groups with Spark, and write the tables with ``writer``."""
    spark = run.spark
    if spark is None:
        log.step(f"starting Spark ({run.master or 'master from spark-submit'})")
        spark = build_session(run.master, run.conf, run.log)
    from rocket_rebalance.pipeline.writers import write_tables

    count, restore = _partition(spark, run.partitions)
    cached: list[DataFrame] = []
    try:
        log.step("reading and checking rows")
        groups, rejected = _assemble(spark, found, compare, cached)
        log.step(f"preparing the analysis in {count} partitions")
        clear_output(target)
        return write_tables(
            groups, rejected, target if _is_local(out_text) else out_text, writer, scenario, compare, log, compared
        )
    finally:
        for frame in cached:  # a shared session (tests, notebooks) keeps nothing of the run
            frame.unpersist()
        restore()
        if run.spark is None:
            spark.stop()


def _spark_options(
    master: str | None,
    spark: SparkSession | None,
    partitions: int | None,
    conf: dict[str, str] | None,
    writer: WriterSpec,
    found: _Inputs,
) -> list[str]:
    """What was asked of the run that only Spark does: each makes ``--engine auto`` choose Spark."""
    given = [
        ("--master" if master else "spark-submit", master is not None),
        ("a Spark session", spark is not None),
        ("--partitions", partitions is not None),
        ("--conf", bool(conf)),
        ("--writer spark", writer.writer == "spark"),
        ("an input URI", not all(_is_local(path) for path in found.tables)),
    ]
    return [name for name, asked in given if asked]


def _require(module: str, what: str) -> None:
    """One line naming the extra when ``module`` is not installed, instead of a ``ModuleNotFoundError`` halfway."""
    if importlib.util.find_spec(module) is None:
        raise ValueError(f"{what} needs {module}, which is not installed: pip install 'rocket-rebalance[spark]'")


def _group_count(found: _Inputs) -> int:
    """The snapshot's size for ``--engine auto``: the rows of its ``groups`` table (one per group; the larger
    side's with an after snapshot), read from Parquet footers or by counting JSON lines, so it costs milliseconds
    where the analysis would cost seconds."""
    sides = [found.before, *([found.after] if found.after is not None else [])]
    return max(_rows(Path(side["groups"][0]), side["groups"][1]) for side in sides)


def _rows(path: Path, fmt: str) -> int:
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return sum(pq.ParquetFile(file).metadata.num_rows for file in data_files(path, fmt))
    total = 0
    for file in data_files(path, fmt):
        with file.open("rb") as lines:
            total += sum(1 for line in lines if line.strip())
    return total


def _check_arguments(after: Path | str | None, scenario: Scenario | None, partitions: int | None, master: str) -> None:
    """The arguments alone, first of all; ``master`` is checked unless empty (a session was given, or
    spark-submit chooses it)."""
    if after is not None and scenario is not None:
        raise ValueError("give either an after snapshot or a scenario, not both")
    if partitions is not None and not 1 <= partitions <= MAX_PARTITIONS:
        raise ValueError(f"--partitions must be between 1 and {MAX_PARTITIONS}, got {partitions}")
    if master:
        check_master(master)


@dataclass(frozen=True)
class _Inputs:
    """The checked input tables of both sides (path and format of each) and the snapshots marked partial."""

    before: dict[str, tuple[Path | str, str]]
    after: dict[str, tuple[Path | str, str]] | None
    partial: list[str]

    @property
    def tables(self) -> list[Path | str]:
        return [path for path, _ in (*self.before.values(), *(self.after or {}).values())]


def _check_inputs(snapshot: Path | str, after: Path | str | None) -> _Inputs:
    """Check the local snapshots' tables and read their collectors' partial flags before Spark starts, so a typo
    costs a second; tables under a URI are left to Spark."""
    before: dict[str, tuple[Path | str, str]] = dict(
        check_snapshot(Path(snapshot), BEFORE_TABLES, OPTIONAL_TABLES)
        if _is_local(snapshot)
        else _remote(snapshot, BEFORE_TABLES)
    )
    after_paths: dict[str, tuple[Path | str, str]] | None = None
    if after is not None:
        after_paths = dict(
            check_snapshot(Path(after), AFTER_TABLES) if _is_local(after) else _remote(after, AFTER_TABLES)
        )
    partial = [str(p) for p in (snapshot, after) if p is not None and _is_local(p) and snapshot_partial(Path(p))]
    return _Inputs(before, after_paths, partial)


def _assemble(
    spark: SparkSession, found: _Inputs, compare: bool, cached: list[DataFrame]
) -> tuple[DataFrame, DataFrame]:
    """One row per group with both sides (and the offsets when comparing), and every rejected input row; the
    frames persisted on the way are added to ``cached``."""
    from pyspark.sql import functions as F

    frames = {t: _read(spark, p, f, INPUT_TABLES[t]) for t, (p, f) in found.before.items()}
    good, rejected = _split(frames, "before", cached)
    groups = _side(good, "before")
    if found.after is not None:
        after_frames = {t: _read(spark, p, f, INPUT_TABLES[t]) for t, (p, f) in found.after.items()}
        after_good, after_rejected = _split(after_frames, "after", cached)
        rejected = rejected.unionByName(after_rejected)
        groups = groups.join(_side(after_good, "after"), "group", "full_outer")
    if compare:
        offsets = (
            good["offsets"]
            .groupBy("group")
            .agg(
                F.collect_list(
                    F.struct("topic", "broker", "queue_id", "max_offset", "committed_offset", "in_flight_offset")
                ).alias("offsets")
            )
        )
        groups = groups.join(offsets, "group", "left_outer")
    return groups, rejected


def _publish_summary(
    data: ReportData, rows: dict[str, int], partial: list[str], target: str, report_to: str | None
) -> str | None:
    """Write ``summary.json`` (and ``report.md`` when ``report_to`` is the output folder as given) beside the
    tables: drawn in a local folder, then put there, as the output may be on a remote file system. Returns the
    report's path."""
    from rocket_rebalance.pipeline.worker import publish_files

    report_path = None
    with tempfile.TemporaryDirectory(prefix="rr-impact-") as local:
        if report_to is not None:
            write_report(data, Path(local))
            report_path = f"{report_to}/report.md"
        summary = {"rows": rows, "totals": data.totals, "partial": partial}
        (Path(local) / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
        publish_files(local, target)
    return report_path


def _partition(spark: SparkSession, partitions: int | None) -> tuple[int, Callable[[], None]]:
    """Give every shuffle of this job (the group assembly, and so the per-group work after it) exactly ``count``
    partitions: the assembled groups are then already partitioned by group, so no extra shuffle of the whole fleet
    is needed before mapInArrow, and adaptive execution must not merge them into fewer Python tasks than there are
    cores. By default several per core: one group of hundreds of consumers cannot leave a core idle at the end for
    long. Returns ``count`` and what puts the session's own settings back."""
    count = partitions or max(2, 4 * spark.sparkContext.defaultParallelism)
    settings = {"spark.sql.shuffle.partitions": str(count), "spark.sql.adaptive.coalescePartitions.enabled": "false"}
    return count, _set_conf(spark, settings)


def _set_conf(spark: SparkSession, settings: dict[str, str]) -> Callable[[], None]:
    """Set SQL settings for this job; returns what puts the session's own values back (a shared session)."""
    previous = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)

    def restore() -> None:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)

    return restore


def _remote(base: Path | str, tables: Sequence[str]) -> dict[str, tuple[Path | str, str]]:
    """Tables under a URI Spark reads itself (no local check possible): ``<table>.parquet`` is assumed."""
    return {table: (f"{base}/{table}.parquet", "parquet") for table in tables}


def _report_title(scenario: Scenario | None, after: Path | str | None, snapshot: Path | str) -> str:
    if scenario is not None:
        return f"scenario {scenario.name}"
    if after is not None:
        return f"{snapshot} -> {after}"
    return f"snapshot {snapshot}"


def run_from_args(
    args: argparse.Namespace, spark_submit: bool = False, spark: SparkSession | None = None
) -> ImpactResult:
    """Resolve defaults (the packaged sample) and run; shared by the CLI command and ``main``. Under
    ``spark_submit`` the job runs on Spark, with spark-submit's master unless ``--master`` is given.

    A failure inside Spark (whatever the checks before it could not foresee) is raised as :class:`ImpactError`,
    one line, so the command line never shows a Java or Python stack trace.
    """
    from rocket_rebalance.pipeline import SAMPLE_SCENARIO, SAMPLE_SNAPSHOT

    snapshot = args.snapshot
    scenario_path = args.scenario
    if snapshot is None:
        snapshot = str(SAMPLE_SNAPSHOT)
        if args.after is None and scenario_path is None:
            scenario_path = str(SAMPLE_SCENARIO)
        print(f"impact: no --snapshot given; using the sample snapshot {snapshot}", file=sys.stderr)
    scenario = None
    if scenario_path is not None:
        scenario = load_scenario(read_input_text(Path(scenario_path), "--scenario"))
    with spark_failures() as log, Progress("impact", None if args.quiet else sys.stderr) as progress:
        return run_impact(
            snapshot,
            args.out,
            after=args.after,
            scenario=scenario,
            master=args.master or ("" if spark_submit else None),
            spark=spark,
            partitions=args.partitions,
            report=not args.no_report,
            conf=parse_conf(args.conf),
            writer=writer_spec(args.writer, args.format, args.write_option, args.table_prefix),
            inputs=[scenario_path] if scenario_path is not None else [],
            spark_log=log,
            compared=compared_strategies(args.compare),
            progress=progress,
            engine=args.engine,
        )


SPARK_LOG_PREFIX = "rocket-rebalance-spark-"
"""The name a run's Spark log starts with, in the system's temporary folder (``TMPDIR``)."""


@contextmanager
def spark_failures() -> Iterator[Path]:
    """Raise a failure inside Spark (whatever the checks before it could not foresee) as :class:`ImpactError`, one
    line, so no command shows a Java or Python stack trace; every other error passes unchanged.

    Yields the run's log file (``rocket-rebalance-spark-*.log`` in the temporary folder, readable by its owner
    only) for :func:`build_session`'s ``log``. The details of a Spark failure (Spark's whole message: the worker's
    traceback, the Java frames) are appended to it, and the line names it; after a run that worked, or failed
    before or apart from Spark (a one-line error of its own), the file is removed.
    """
    handle, name = tempfile.mkstemp(prefix=SPARK_LOG_PREFIX, suffix=".log")
    os.close(handle)
    log = Path(name)
    keep = False
    try:
        yield log
    except Exception as error:
        if not _from_spark(error):
            raise
        with log.open("a", encoding="utf-8") as details:
            details.write(f"\nrocket-rebalance: the Spark job failed: {type(error).__name__}: {error}\n")
        keep = True
        raise ImpactError(f"the Spark job failed: {spark_error_line(error)} (details in {log})") from None
    finally:
        if not keep:
            log.unlink(missing_ok=True)


def _from_spark(error: BaseException) -> bool:
    """Whether PySpark or Py4J raised ``error``: told by its classes' modules, not by importing theirs, which the
    in-process engine never does (it runs without the ``spark`` extra)."""
    return any(cls.__module__.split(".")[0] in ("pyspark", "py4j") for cls in type(error).__mro__)


def spark_error_line(error: BaseException) -> str:
    """The line of a Spark failure that says what went wrong: for an error raised in a Python worker, the last
    line of its traceback (``NotADirectoryError: ...``); otherwise the first line of Spark's message."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if "Traceback (most recent call last):" in lines:
        worker = lines[lines.index("Traceback (most recent call last):") + 1 :]
        raised = [line for line in worker if not line.startswith(("File ", "at ", "^", "~"))]
        if raised:
            return raised[-1]
    return lines[0] if lines else type(error).__name__
