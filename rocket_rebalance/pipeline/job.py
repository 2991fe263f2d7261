"""The fleet impact job on Spark; also the entry module for ``spark-submit``.

Steps: check the input tables (before Spark starts), read them with fixed schemas, reject bad rows with a reason
(Spark column expressions stating the rules of :mod:`~rocket_rebalance.pipeline.validate`), assemble one row per
consumer group with nested routes, members, settings and offsets (``groupBy`` + ``collect_list``), and run
:func:`~rocket_rebalance.pipeline.worker.write_batches` over Arrow batches of groups with ``mapInArrow``: the
executors analyse their groups and write the output tables as Parquet part files themselves, returning only row
counts. The fleet never comes to the driver: only the counts and the report's aggregates do.

On a cluster::

    spark-submit --master yarn --py-files rocket_rebalance.zip \\
        rocket_rebalance/pipeline/job.py --snapshot hdfs:///fleet/snap --scenario deploy.json --out hdfs:///fleet/out

(local paths are checked before Spark starts; URIs with a scheme are left to Spark for the input, and to
pyarrow's file systems for the tables the executors write, so the executors need write access to ``--out``.)
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocket_rebalance.model import GROUP_MAX_LENGTH, TOPIC_MAX_LENGTH
from rocket_rebalance.pipeline.analysis import Scenario, load_scenario
from rocket_rebalance.pipeline.commands import add_arguments, parse_conf
from rocket_rebalance.pipeline.report import BUCKET_CAP, BUCKET_WIDTH, TOP, ReportData, write_report
from rocket_rebalance.pipeline.schema import (
    AFTER_TABLES,
    INPUT_TABLES,
    OUTPUT_TABLES,
    TableSpec,
    check_snapshot,
)
from rocket_rebalance.pipeline.validate import NAME_PATTERN

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["ImpactResult", "build_session", "main", "run_impact"]

BEFORE_TABLES = ("routes", "members", "subscriptions", "groups", "offsets")


def build_session(master: str = "local[*]", conf: dict[str, str] | None = None) -> SparkSession:
    """A SparkSession for the job: UI off, quiet logs, and this interpreter for the Python workers.

    ``PYSPARK_PYTHON`` is set to this interpreter when unset, so workers import the same installed library.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.appName("rocket-rebalance-impact")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "1000")
    )
    if master:
        builder = builder.master(master)
        if master.startswith("local") and "spark.driver.memory" not in (conf or {}):
            # local mode runs the executors inside the driver JVM, whose default heap (1g) is small for a fleet
            builder = builder.config("spark.driver.memory", "4g")
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _read(spark: SparkSession, path: Path | str, fmt: str, spec: TableSpec) -> DataFrame:
    """A table with exactly the spec's columns and types (missing optional columns are null)."""
    from pyspark.sql import functions as F

    if fmt == "json":
        return spark.read.schema(spec.ddl).json(str(path))
    frame = spark.read.parquet(str(path))
    present = set(frame.columns)
    return frame.select(
        *[
            (F.col(f"`{c.name}`") if c.name in present else F.lit(None)).cast(c.spark_type).alias(c.name)
            for c in spec.columns
        ]
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


def _split(frames: dict[str, DataFrame], side: str) -> tuple[dict[str, DataFrame], DataFrame]:
    """Good rows per table, and every bad row as (group, side, table, reason, row)."""
    from functools import reduce

    from pyspark.sql import functions as F

    good: dict[str, DataFrame] = {}
    bad_rows: list[DataFrame] = []
    for table, frame in frames.items():
        checked = frame.withColumn("_reason", _reason(table))
        good[table] = checked.filter(F.col("_reason").isNull()).drop("_reason")
        bad = checked.filter(F.col("_reason").isNotNull()).select(
            (F.col("group") if "group" in frame.columns else F.lit(None).cast("string")).alias("group"),
            F.lit(side).alias("side"),
            F.lit(table).alias("table"),
            F.col("_reason").alias("reason"),
            F.to_json(F.struct(*[F.col(f"`{name}`") for name in frame.columns])).alias("row"),
        )
        bad_rows.append(bad)
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
        .agg(F.collect_list(F.struct("client_id", "view", "view_digest")).alias("members"))
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
    return side.select("group", F.struct("settings", "topics", "routes", "members").alias(name))


@dataclass
class ImpactResult:
    """What a run produced: where, how many rows per table, and the fleet totals of the report."""

    out: str
    rows: dict[str, int]
    totals: dict[str, Any]
    report: str | None
    seconds: float


def _is_local(path: str | Path) -> bool:
    return "://" not in str(path)


def run_impact(
    snapshot: Path | str,
    out: Path | str,
    after: Path | str | None = None,
    scenario: Scenario | None = None,
    master: str = "local[*]",
    spark: SparkSession | None = None,
    partitions: int | None = None,
    report: bool = True,
    progress: Callable[[str], None] | None = None,
    conf: dict[str, str] | None = None,
) -> ImpactResult:
    """Run the whole impact analysis; ``after`` and ``scenario`` are exclusive (neither: the snapshot alone).

    Input tables are checked before Spark starts (a missing table or column raises ``SnapshotError``).
    ``spark`` reuses a session (tests); otherwise one is built for ``master`` and stopped at the end.
    """
    if after is not None and scenario is not None:
        raise ValueError("give either an after snapshot or a scenario, not both")
    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    started = time.monotonic()
    step = 0

    def log(text: str) -> None:
        nonlocal step
        step += 1
        say(f"impact [{step}] {time.monotonic() - started:6.1f}s {text}")

    log(f"checking snapshot {snapshot}")
    before_paths: dict[str, tuple[Path | str, str]] = dict(
        check_snapshot(Path(snapshot), BEFORE_TABLES) if _is_local(snapshot) else _remote(snapshot, BEFORE_TABLES)
    )
    after_paths: dict[str, tuple[Path | str, str]] | None = None
    if after is not None:
        after_paths = dict(
            check_snapshot(Path(after), AFTER_TABLES) if _is_local(after) else _remote(after, AFTER_TABLES)
        )
    compare = after is not None or scenario is not None
    out_text = str(out)
    own_session = spark is None
    if spark is None:
        log(f"starting Spark ({master or 'master from spark-submit'})")
        spark = build_session(master, conf)
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    from rocket_rebalance.pipeline.worker import (
        COUNT_SCHEMA,
        complete_output,
        prepare_output,
        publish_files,
        write_batches,
    )

    # several partitions per core: one group of hundreds of consumers cannot leave a core idle at the end for long
    count = partitions or max(2, 4 * spark.sparkContext.defaultParallelism)
    # Every shuffle (the group assembly, and so the per-group work after it) gets exactly `count` partitions: the
    # assembled groups are then already partitioned by group, so no extra shuffle of the whole fleet is needed
    # before mapInArrow, and adaptive execution must not merge them into fewer Python tasks than there are cores.
    restore = _set_conf(
        spark, {"spark.sql.shuffle.partitions": str(count), "spark.sql.adaptive.coalescePartitions.enabled": "false"}
    )
    try:
        log("reading and checking rows")
        frames = {t: _read(spark, p, f, INPUT_TABLES[t]) for t, (p, f) in before_paths.items()}
        good, rejected = _split(frames, "before")
        groups = _side(good, "before")
        if after_paths is not None:
            after_frames = {t: _read(spark, p, f, INPUT_TABLES[t]) for t, (p, f) in after_paths.items()}
            after_good, after_rejected = _split(after_frames, "after")
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
        log(f"analyzing groups in {count} partitions (mapInArrow over Arrow batches; executors write the tables)")
        target = out_text if not _is_local(out_text) else str(Path(out_text).resolve())
        prepare_output(target)
        worker = functools.partial(write_batches, out=target, scenario=scenario, compare=compare)
        rows = dict.fromkeys(OUTPUT_TABLES, 0)
        for count_row in groups.mapInArrow(worker, from_arrow_schema(COUNT_SCHEMA)).collect():
            rows[count_row["table"]] += int(count_row["rows"])
        complete_output(target)
        log("writing rows rejected by the row checks")
        rejected_fields = ["group", *(f.name for f in OUTPUT_TABLES["rejected"])]
        rejected.select(*rejected_fields).write.mode("append").parquet(f"{out_text}/rejected.parquet")
        rows["rejected"] = spark.read.parquet(f"{out_text}/rejected.parquet").count()
        log("aggregating the report")
        data = _report_data(spark, out_text, scenario, after, snapshot, compare)
        report_path = None
        with tempfile.TemporaryDirectory(prefix="rr-impact-") as local:  # drawn here, then put beside the tables
            if report:
                write_report(data, Path(local))
                report_path = f"{out_text}/report.md"
            summary = {"rows": rows, "totals": data.totals}
            (Path(local) / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
            publish_files(local, target)
        seconds = time.monotonic() - started
        log(
            f"done: {data.totals['groups']} groups, {data.totals['groups_rebalancing']} rebalance, "
            f"{rows.get('violations', 0)} violation rows, {rows['rejected']} rejected rows; output in {out_text}"
        )
        return ImpactResult(out_text, rows, data.totals, report_path, seconds)
    finally:
        restore()
        if own_session:
            spark.stop()


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


def _report_data(
    spark: SparkSession,
    out: str,
    scenario: Scenario | None,
    after: Path | str | None,
    snapshot: Path | str,
    compare: bool,
) -> ReportData:
    """The report's aggregates, computed by Spark from the written tables; only these reach the driver."""
    from pyspark.sql import functions as F

    def table(name: str) -> DataFrame:
        return spark.read.parquet(f"{out}/{name}.parquet")

    total = F.coalesce
    zero = F.lit(0)
    g = (
        table("groups")
        .agg(
            F.count(F.lit(1)).alias("groups"),
            total(F.sum(F.col("rebalances").cast("int")), zero).alias("groups_rebalancing"),
            total(F.sum("consumers_before"), zero).alias("consumers_before"),
            total(F.sum("queues_before"), zero).alias("queues_before"),
            total(F.sum("moved"), zero).alias("moved"),
            total(F.sum("minimum"), zero).alias("minimum"),
            total(F.sum("exposure"), zero).alias("exposure"),
            total(F.sum("paused"), zero).alias("paused"),
        )
        .first()
    )
    assert g is not None
    totals: dict[str, Any] = {key: int(value) for key, value in g.asDict().items()}
    totals["rejected_rows"] = table("rejected").count()
    violations = table("violations")
    for row in violations.groupBy("side", "kind").count().orderBy("side", "kind").collect():
        totals[f"{row['kind']}_{row['side']}"] = int(row["count"])
    side = "after" if compare else "before"
    edge = F.round(F.least(F.lit(BUCKET_CAP), F.floor(F.col("max_over_avg") / BUCKET_WIDTH + 1e-9) * BUCKET_WIDTH), 1)
    histogram = (
        table("balance")
        .filter((F.col("side") == side) & (F.col("consumers") > 0) & (F.col("queues") > 0))
        .groupBy(edge.alias("edge"))
        .count()
        .orderBy("edge")
        .collect()
    )
    strategies = (
        table("comparison")
        .groupBy("strategy")
        .agg(
            F.count(F.lit(1)).alias("groups"),
            F.sum("queues").alias("queues"),
            F.sum("moved").alias("moved"),
            F.sum("minimum").alias("minimum"),
            F.sum("exposure").alias("exposure"),
        )
        .orderBy("strategy")
        .collect()
    )
    top = (
        table("groups")
        .orderBy(F.desc("exposure"), F.desc("moved"), "group")
        .select("group", "strategy_before", "strategy_after", "moved", "minimum", "exposure", "paused")
        .limit(TOP)
        .collect()
    )

    def counted(frame: DataFrame, keys: list[str]) -> list[dict[str, Any]]:
        found = frame.groupBy(*keys).count().orderBy(F.desc("count"), *keys).limit(TOP).collect()
        return [row.asDict() for row in found]

    if scenario is not None:
        title = f"scenario {scenario.name}"
    elif after is not None:
        title = f"{snapshot} -> {after}"
    else:
        title = f"snapshot {snapshot}"
    return ReportData(
        title,
        totals,
        side,
        [(float(row["edge"]), int(row["count"])) for row in histogram],
        [{k: (int(v) if isinstance(v, int) else v) for k, v in row.asDict().items()} for row in strategies],
        [row.asDict() for row in top],
        counted(violations, ["side", "kind", "reason"]),
        counted(table("rejected"), ["side", "table", "reason"]),
    )


def run_from_args(args: argparse.Namespace, default_master: str = "local[*]") -> ImpactResult:
    """Resolve defaults (the packaged sample) and run; shared by the CLI command and ``main``."""
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
        scenario = load_scenario(Path(scenario_path).read_text(encoding="utf-8"))
    return run_impact(
        snapshot,
        args.out,
        after=args.after,
        scenario=scenario,
        master=args.master or default_master,
        partitions=args.partitions,
        report=not args.no_report,
        conf=parse_conf(args.conf),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """The spark-submit entry: the master comes from spark-submit unless ``--master`` is given."""
    parser = argparse.ArgumentParser(prog="rocket_rebalance.pipeline.job", description="fleet impact analysis")
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        run_from_args(args, default_master="")
    except (ValueError, OSError) as error:
        print(f"impact: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
