"""The write stage of the impact job: who writes the output tables, and where the report then reads them from.

Two writers, chosen with ``--writer`` (:class:`~rocket_rebalance.pipeline.options.WriterSpec`):

* ``pyarrow`` (default): the executors analyse their groups and write every table as Parquet part files themselves
  (:func:`~rocket_rebalance.pipeline.worker.write_batches`), returning only row counts. The JVM never handles the
  tens of millions of output rows, which is why it is the faster one (benchmarks/RESULTS.md).
* ``spark``: the executors analyse the same way but hand their rows back, tagged with their table
  (:func:`~rocket_rebalance.pipeline.worker.row_batches`). That frame is persisted once, so the analysis runs once
  and not once per table, and each table is a filter of it written by Spark's DataFrameWriter: any data source
  (``--format``, ``--write-option``) into ``<out>/<table>.<format>``, or ``saveAsTable`` into the session catalog
  (``--table-prefix``). What pyarrow cannot write to (a catalog, a table format) is then reachable.

Both give the same tables with the same columns in the same order; the rows rejected by the row checks are added to
``rejected`` either way. The report is computed from what :class:`Written` returns, so it works with either.
"""

from __future__ import annotations

import functools
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rocket_rebalance.pipeline.options import WriterSpec
from rocket_rebalance.pipeline.report import ReportParts
from rocket_rebalance.pipeline.scenario import Scenario
from rocket_rebalance.pipeline.schema import OUTPUT_TABLES
from rocket_rebalance.pipeline.settings import COMPARED_STRATEGIES
from rocket_rebalance.progress import Count, Progress

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark import SparkContext
    from pyspark.sql import DataFrame, Row

    Worker = Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]
    """A ``mapInArrow`` body with its settings bound (:mod:`.worker`)."""

__all__ = ["Written", "table_location", "write_tables"]

_TASKS_POLL = 0.5
"""Seconds between two reads of Spark's status of the analysis' tasks (a read is a call into the driver's JVM)."""


@dataclass
class Written:
    """What the write stage produced: rows per table and the report's aggregates, added up from the executors'
    parts and the rows the row checks rejected."""

    rows: dict[str, int]
    report: ReportParts


def table_location(out: str, table: str, spec: WriterSpec) -> str:
    """Where a table goes: ``<prefix><table>`` in the catalog, else the folder ``<out>/<table>.<format>``."""
    if spec.table_prefix is not None:
        return f"{spec.table_prefix}{table}"
    return f"{out}/{table}.{spec.format}"


def write_tables(
    groups: DataFrame,
    rejected: DataFrame,
    out: str,
    spec: WriterSpec,
    scenario: Scenario | None,
    compare: bool,
    progress: Progress,
    compared: Sequence[str] = COMPARED_STRATEGIES,
) -> Written:
    """Analyse the assembled ``groups`` (one row per group) and write every output table with ``spec``'s writer;
    ``rejected`` holds the rows the row checks refused (``group`` and the ``rejected`` table's columns);
    ``compared``: the strategies of the comparison table (see :func:`~.settings.compared_strategies`)."""
    from pyspark import StorageLevel

    from rocket_rebalance.pipeline.worker import row_batches, write_batches

    rejected = rejected.select("group", *(f.name for f in OUTPUT_TABLES["rejected"])).persist(
        StorageLevel.MEMORY_AND_DISK  # written, then counted by reason: the row checks run once
    )
    try:
        if spec.writer == "spark":
            worker = functools.partial(row_batches, scenario=scenario, compare=compare, compared=tuple(compared))
            written = _with_spark(groups, rejected, out, spec, worker, compare, progress)
        else:
            worker = functools.partial(
                write_batches, out=out, scenario=scenario, compare=compare, compared=tuple(compared)
            )
            written = _with_pyarrow(groups, rejected, out, worker, compare, progress)
        for row in rejected.groupBy("side", "table", "reason").count().collect():
            written.report.rejected[(row["side"], row["table"], row["reason"])] += int(row["count"])
            written.rows["rejected"] += int(row["count"])
    finally:
        rejected.unpersist()
    return written


def _report(rows: list[Row], compare: bool) -> ReportParts:
    """The executors' report parts (in the rows tagged :data:`~rocket_rebalance.pipeline.worker.REPORT_TAG`)
    added up."""
    report = ReportParts("after" if compare else "before")
    for row in rows:
        report.merge(ReportParts.from_json(row["report"]))
    return report


def _with_pyarrow(
    groups: DataFrame,
    rejected: DataFrame,
    out: str,
    worker: Worker,
    compare: bool,
    progress: Progress,
) -> Written:
    from pyspark.sql.pandas.types import from_arrow_schema

    from rocket_rebalance.pipeline.worker import COUNT_SCHEMA, REPORT_TAG, complete_output

    rows = dict.fromkeys(OUTPUT_TABLES, 0)
    reports = []
    detail = "mapInArrow over Arrow batches; executors write the tables with pyarrow"
    with (
        progress.count("analyzing groups", "Spark tasks", detail) as count,
        _spark_tasks(groups.sparkSession.sparkContext, count),
    ):
        counted = groups.mapInArrow(worker, from_arrow_schema(COUNT_SCHEMA)).collect()
    for count_row in counted:
        if count_row["table"] == REPORT_TAG:
            reports.append(count_row)
        else:
            rows[count_row["table"]] += int(count_row["rows"])
    complete_output(out)
    progress.step("writing rows rejected by the row checks")
    rejected.write.mode("append").parquet(f"{out}/rejected.parquet")
    return Written(rows, _report(reports, compare))


def _with_spark(
    groups: DataFrame,
    rejected: DataFrame,
    out: str,
    spec: WriterSpec,
    worker: Worker,
    compare: bool,
    progress: Progress,
) -> Written:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    from rocket_rebalance.pipeline.worker import REPORT_TAG, ROWS_SCHEMA, TABLE_TAG

    # memory first, disk when it does not fit: the frame is read once per table and must not be recomputed
    analysed = groups.mapInArrow(worker, from_arrow_schema(ROWS_SCHEMA)).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        selected = {name: analysed.filter(F.col(TABLE_TAG) == name).select(f"`{name}`.*") for name in OUTPUT_TABLES}
        selected["rejected"] = selected["rejected"].unionByName(rejected)
        rows = dict.fromkeys(OUTPUT_TABLES, 0)
        detail = "mapInArrow over Arrow batches; rows back to Spark, persisted once"
        with (
            progress.count("analyzing groups", "Spark tasks", detail) as count,
            _spark_tasks(analysed.sparkSession.sparkContext, count),
        ):
            tagged = analysed.groupBy(TABLE_TAG).count().collect()  # runs the analysis, filling the cache
        for count_row in tagged:
            if count_row[TABLE_TAG] != REPORT_TAG:
                rows[count_row[TABLE_TAG]] = int(count_row["count"])
        report = _report(analysed.filter(F.col(TABLE_TAG) == REPORT_TAG).select("report").collect(), compare)
        for name, frame in selected.items():
            where = table_location(out, name, spec)
            progress.step(f"writing {name} ({spec.format}) to {where}")
            writer = frame.write.mode("overwrite").format(spec.format).options(**spec.options)
            if spec.table_prefix is not None:
                writer.saveAsTable(where)
            else:
                writer.save(where)
    finally:
        analysed.unpersist()  # a shared session (tests, notebooks) must not keep the cache
    return Written(rows, report)


_JOB_GROUP = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")
"""The local properties :meth:`SparkContext.setJobGroup` sets."""


@contextmanager
def _spark_tasks(context: SparkContext, count: Count) -> Iterator[None]:
    """Report to ``count`` how many of the Spark tasks of the jobs run inside the block are done, of those known
    (a stage's tasks are known once one of them starts, so the total grows from one stage to the next): the
    analysis is one action, silent for most of a run otherwise (47 s at 300 groups on local[*]).

    The jobs run under a job group of their own, read from Spark's status tracker every ``_TASKS_POLL`` seconds
    by a thread that ends with the block; the caller's own job group (a shared session's) is put back after. A
    failed read ends the polling (the analysis goes on) and is said in the count's final line."""
    group = f"rocket-rebalance-{uuid.uuid4().hex}"
    previous = {key: context.getLocalProperty(key) for key in _JOB_GROUP}
    context.setJobGroup(group, "rocket-rebalance: analyzing groups")
    stop = threading.Event()
    failed: list[str] = []
    last = (0, 0)

    def read() -> None:
        nonlocal last
        try:
            last = _tasks_done(context, group)
        except Exception as error:  # Py4J's errors or a stopped context: the numbers stop, the job goes on
            failed.append(f"{type(error).__name__}: {error}".splitlines()[0])

    def poll() -> None:
        while not stop.wait(_TASKS_POLL) and not failed:
            read()
            if not failed:
                count(*last)

    poller = threading.Thread(target=poll, name="rocket-rebalance-spark-progress", daemon=True)
    poller.start()
    try:
        yield
    finally:
        stop.set()
        poller.join()
        for key, value in previous.items():
            context.setLocalProperty(key, value)  # type: ignore[arg-type]  # None unsets, as its docstring says
    if not failed:
        read()  # the last count: every stage that ran
    count(*last, note=f"Spark's task counts unavailable ({failed[0]})" if failed else "")


def _tasks_done(context: SparkContext, group: str) -> tuple[int, int]:
    """The completed and known tasks of the job group's jobs. A stage is known once a task of it has started: a
    job also lists the stages it skips (their shuffle output already computed by an earlier job, as adaptive
    execution runs each shuffle as a job of its own), whose tasks never run."""
    tracker = context.statusTracker()
    done = total = 0
    for job in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job)
        for stage in info.stageIds if info is not None else []:
            stage_info = tracker.getStageInfo(stage)
            if stage_info is not None and stage_info.numActiveTasks + stage_info.numCompletedTasks > 0:
                done += stage_info.numCompletedTasks
                total += stage_info.numTasks
    return done, total
