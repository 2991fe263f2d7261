"""The analysis' progress in Spark tasks, read from a status tracker (here a fake: no Spark starts): counts of the
stages that ran, the caller's job group put back, and a tracker that fails said in the count's last line."""

from __future__ import annotations

import io
import re
import threading
from dataclasses import dataclass, field
from typing import Any

import pytest
from pyspark.status import SparkJobInfo, SparkStageInfo

from rocket_rebalance.pipeline.writers import _spark_tasks
from rocket_rebalance.progress import Progress


@dataclass
class Tracker:
    """Jobs of one group: job 1 ran stage 10 (4 tasks) and skipped stage 11 (its output computed before); job 2 runs
    stage 12 (8 tasks, 3 done)."""

    failure: Exception | None = None
    asked: threading.Event = field(default_factory=threading.Event)

    def getJobIdsForGroup(self, group: str) -> list[int]:  # noqa: N802  (Spark's name)
        self.asked.set()
        if self.failure is not None:
            raise self.failure
        return [1, 2]

    def getJobInfo(self, job: int) -> SparkJobInfo:  # noqa: N802
        return SparkJobInfo(job, [10, 11] if job == 1 else [12], "RUNNING")

    def getStageInfo(self, stage: int) -> SparkStageInfo:  # noqa: N802
        done = {10: (0, 4), 11: (0, 0), 12: (2, 3)}[stage]
        tasks = {10: 4, 11: 6, 12: 8}[stage]
        return SparkStageInfo(stage, 0, "stage", tasks, done[0], done[1], 0)


@dataclass
class Context:
    """What of a SparkContext the count uses; the caller had a job group of its own."""

    tracker: Tracker
    properties: dict[str, str | None] = field(default_factory=lambda: {"spark.jobGroup.id": "notebook"})
    groups: list[str] = field(default_factory=list)

    def statusTracker(self) -> Tracker:  # noqa: N802
        return self.tracker

    def getLocalProperty(self, key: str) -> str | None:  # noqa: N802
        return self.properties.get(key)

    def setLocalProperty(self, key: str, value: str | None) -> None:  # noqa: N802
        self.properties[key] = value

    def setJobGroup(self, group: str, description: str) -> None:  # noqa: N802
        self.groups.append(group)
        self.properties.update({"spark.jobGroup.id": group, "spark.job.description": description})


def counted(context: Any, during: Any = None) -> str:
    log = io.StringIO()
    with Progress("impact", log) as progress, progress.count("analyzing groups", "Spark tasks") as count:
        with _spark_tasks(context, count):
            assert context.properties["spark.jobGroup.id"] == context.groups[-1]  # the block's jobs: its group
            if during is not None:
                during()
    return log.getvalue()


def test_the_stages_that_ran_are_counted_and_the_callers_group_put_back() -> None:
    context = Context(Tracker())
    lines = counted(context).splitlines()
    assert re.search(r" analyzing groups: 7/12 Spark tasks in \d+s$", lines[-1]), lines  # stage 11 skipped: not counted
    assert context.properties["spark.jobGroup.id"] == "notebook" and context.properties["spark.job.description"] is None


def test_a_tracker_that_fails_is_said_and_the_work_goes_on() -> None:
    tracker = Tracker(failure=RuntimeError("the JVM is gone"))
    text = counted(Context(tracker), during=lambda: tracker.asked.wait(60))  # a hang bound only
    assert tracker.asked.is_set()
    last = re.sub(r" in \d+s,", " in Ns,", text.splitlines()[-1])
    assert last.endswith(
        " analyzing groups: 0/0 Spark tasks in Ns, Spark's task counts unavailable (RuntimeError: the JVM is gone)"
    ), text


def test_a_failure_of_the_work_ends_the_polling_and_passes() -> None:
    context = Context(Tracker())

    def fail() -> None:
        raise ValueError("a task failed")

    with pytest.raises(ValueError, match="a task failed"):
        counted(context, during=fail)
    assert context.properties["spark.jobGroup.id"] == "notebook"
    assert not [thread for thread in threading.enumerate() if thread.name == "rocket-rebalance-spark-progress"]
