"""Hostile inputs that get as far as Spark: bad rows are rejected with a reason (the same in the Spark job and the
plain-Python reference), an earlier output is replaced without losing anybody else's file, and whatever Spark
itself fails on reaches the command line as one line."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rocket_rebalance.pipeline import SAMPLE_SNAPSHOT
from rocket_rebalance.progress import Progress
from tests.pipeline.conftest import spark  # noqa: F401  (the session's one local SparkSession)
from tests.progress_lines import progress_line

pytestmark = pytest.mark.spark


def rejected_by_spark(session: Any, snapshot: Path, out: Path) -> list[tuple[str, str]]:
    from rocket_rebalance.pipeline.job import run_impact

    run_impact(snapshot, out, spark=session, partitions=2, report=False, progress=Progress("impact", None))
    return sorted((r["table"], r["reason"]) for r in pq.read_table(out / "rejected.parquet").to_pylist())


def rejected_by_reference(snapshot: Path) -> list[tuple[str, str]]:
    from rocket_rebalance.pipeline.reference import run_reference

    return sorted((r["table"], r["reason"]) for r in run_reference(snapshot)["rejected"])


def test_json_values_of_the_wrong_type_are_rejected_rows_with_a_reason(spark: Any, tmp_path: Path) -> None:  # noqa: F811
    snapshot = tmp_path / "snap"
    shutil.copytree(SAMPLE_SNAPSHOT, snapshot)
    with (snapshot / "routes.jsonl").open("a") as routes:
        routes.write(json.dumps({"topic": "T1", "broker": "b", "read_queue_nums": "8"}) + "\n")
        routes.write(json.dumps({"topic": "T2", "broker": "b", "read_queue_nums": 2**31}) + "\n")
        routes.write(json.dumps({"topic": "T3", "broker": "b", "read_queue_nums": 4, "perm": True}) + "\n")
        routes.write(json.dumps({"topic": "T4", "broker": "b", "read_queue_nums": 2**31 - 1}) + "\n")
        routes.write("this line is not JSON\n")
        routes.write("[1, 2]\n")
    with (snapshot / "offsets.jsonl").open("a") as offsets:
        offsets.write(
            json.dumps(
                {"group": "G", "topic": "T", "broker": "b", "queue_id": 0, "max_offset": 1.5, "committed_offset": 0}
            )
            + "\n"
        )
    found = rejected_by_spark(spark, snapshot, tmp_path / "out")
    assert found == rejected_by_reference(snapshot)
    new = {reason for table, reason in found if table in ("routes", "offsets")}
    assert {
        "read_queue_nums is not a valid int",
        "perm is not a valid int",
        "not a JSON object",
        "max_offset is not a valid bigint",
        "read queue count above 65536",
    } <= new
    assert [reason for table, reason in found if table == "routes"].count("read_queue_nums is not a valid int") == 2


def test_parquet_integers_beyond_the_column_type_are_rejected_rows(spark: Any, tmp_path: Path) -> None:  # noqa: F811
    snapshot = tmp_path / "snap"
    shutil.copytree(SAMPLE_SNAPSHOT, snapshot)
    (snapshot / "routes.jsonl").unlink()
    routes = pa.table(
        {
            "topic": ["OrderTopic", "PayTopic"],
            "broker": ["broker-a", "broker-a"],
            "read_queue_nums": pa.array([8, 2**40], pa.int64()),  # pandas writes int64; Spark's int is 32 bits
        }
    )
    pq.write_table(routes, snapshot / "routes.parquet")
    found = rejected_by_spark(spark, snapshot, tmp_path / "out")
    assert found == rejected_by_reference(snapshot)
    assert ("routes", "read_queue_nums is not a valid int") in found


def test_a_new_run_replaces_the_earlier_output_and_nothing_else(spark: Any, tmp_path: Path) -> None:  # noqa: F811
    from rocket_rebalance.pipeline.job import run_impact

    out = tmp_path / "out"
    run_impact(SAMPLE_SNAPSHOT, out, spark=spark, partitions=2, report=True, progress=Progress("impact", None))
    assert (out / "report.md").exists() and (out / "charts" / "balance.png").exists()
    (out / "notes.txt").write_text("an operator's notes")
    (out / "charts" / "annotated.png").write_bytes(b"not ours")
    run_impact(SAMPLE_SNAPSHOT, out, spark=spark, partitions=2, report=False, progress=Progress("impact", None))
    assert not (out / "report.md").exists() and not (out / "charts" / "balance.png").exists()  # no stale report
    assert (out / "notes.txt").read_text() == "an operator's notes"
    assert (out / "charts" / "annotated.png").read_bytes() == b"not ours"
    assert pq.read_table(out / "groups.parquet").num_rows == 6


def test_a_failure_inside_spark_is_one_line(
    spark: Any,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tempfile

    from rocket_rebalance.pipeline.job import ImpactError, run_from_args

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()

    args = argparse.Namespace(
        snapshot=f"file://{tmp_path}/missing",  # a URI: read by Spark, so only Spark can find it missing
        after=None,
        scenario=None,
        out=str(tmp_path / "out"),
        master=None,
        partitions=2,
        no_report=True,
        quiet=False,
        conf=[],
        writer="pyarrow",
        format=None,
        write_option=[],
        table_prefix=None,
        compare="none",
        engine="auto",  # Spark all the same: a session is given, and the input is a URI
    )
    with pytest.raises(ImpactError) as raised:
        run_from_args(args, spark=spark)
    message = str(raised.value)
    assert message.startswith("the Spark job failed: ") and "\n" not in message
    assert "PATH_NOT_FOUND" in message
    (log,) = (tmp_path / "tmp").iterdir()  # the details: Spark's whole message, in the file the line names
    assert message.endswith(f"(details in {log})") and "PATH_NOT_FOUND" in log.read_text(encoding="utf-8")


def test_an_error_in_a_python_worker_is_reduced_to_its_last_line(spark: Any) -> None:  # noqa: F811
    from rocket_rebalance.pipeline.job import spark_error_line

    def fail(batches: Any) -> Any:
        for _ in batches:
            raise NotADirectoryError("cannot create /out/groups.parquet")
        yield from ()

    with pytest.raises(Exception) as raised:
        spark.range(1).mapInArrow(fail, "id long").collect()
    assert spark_error_line(raised.value) == "NotADirectoryError: cannot create /out/groups.parquet"


def test_a_topic_and_broker_listed_twice_in_routes_is_rejected_not_merged(spark: Any, tmp_path: Path) -> None:  # noqa: F811
    """The routes table has one row per topic and broker; two rows for one (4 and 8 read queues) cannot both be
    true and which is cannot be told, so every row of that topic and broker is rejected with the reason, whatever
    the other rows' fate (a row refused for its own reason still names the pair), and the topic is analysed on
    its other brokers only: never as one merged route."""
    snapshot = tmp_path / "snap"
    shutil.copytree(SAMPLE_SNAPSHOT, snapshot)
    with (snapshot / "routes.jsonl").open("a") as routes:
        routes.write(json.dumps({"topic": "PayTopic", "broker": "broker-a", "read_queue_nums": 8, "perm": 6}) + "\n")
        routes.write(json.dumps({"topic": "BadTopic", "broker": "broker-a", "read_queue_nums": 2}) + "\n")
        routes.write(json.dumps({"topic": "NoTopic", "broker": "broker-a", "read_queue_nums": "x"}) + "\n")
        routes.write(json.dumps({"topic": "NoTopic", "broker": "broker-a", "read_queue_nums": 2}) + "\n")
    found = rejected_by_spark(spark, snapshot, tmp_path / "out")
    assert found == rejected_by_reference(snapshot)
    duplicate = "topic and broker listed more than once in routes"
    assert [reason for table, reason in found if table == "routes"].count(duplicate) == 4
    assert ("routes", "negative read queue count") in found  # BadTopic's first row keeps its own reason
    assert ("routes", "read_queue_nums is not a valid int") in found
    rows = [json.loads(r["row"]) for r in pq.read_table(tmp_path / "out" / "rejected.parquet").to_pylist()]
    assert sorted(r["read_queue_nums"] for r in rows if r.get("topic") == "PayTopic") == [4, 8]
    assignments = pq.read_table(tmp_path / "out" / "assignments.parquet").to_pylist()
    pay = {
        (a["broker"], a["queue_id"])
        for a in assignments
        if (a["group"], a["topic"], a["side"]) == ("pay_service", "PayTopic", "before")
    }
    assert pay == {("broker-b", q) for q in range(4)}


PROGRESS = progress_line("audit")
"""A progress line of the command itself (``audit [3]   12.4s reading and checking rows``)."""


def audit_process(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """``rocket-rebalance audit`` of the sample as a user runs it, with its temporary files under ``tmp_path``."""
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYSPARK_PYTHON": sys.executable}
    return subprocess.run(
        [sys.executable, "-m", "rocket_rebalance", "audit", "--snapshot", str(SAMPLE_SNAPSHOT), "--master", "local[1]"]
        + list(extra),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


def test_a_failed_spark_task_is_one_line_and_its_details_are_in_the_file_it_names(tmp_path: Path) -> None:
    """A task that fails in its Python worker (here: an address-space limit too small to import pyarrow) made
    Spark print its ERROR lines, the worker's traceback and the Java frames before the command's own line; now
    the command's line is all (beside its progress lines), and what Spark said is in the file the line names."""
    done = audit_process(tmp_path, "--conf", "spark.executor.pyspark.memory=100m")
    assert done.returncode == 2 and done.stdout == "", done.stderr[-3000:]
    lines = done.stderr.splitlines()
    own = [line for line in lines if not PROGRESS.fullmatch(line)]
    assert len(own) == 1 and own[0] == lines[-1], done.stderr[-3000:]
    found = re.fullmatch(r"rocket-rebalance: the Spark job failed: (.+) \(details in (.+)\)", own[0])
    assert found is not None, own[0]
    log = Path(found.group(2))
    assert log.parent == tmp_path and log.is_file()
    details = log.read_text(encoding="utf-8")
    assert found.group(1) in details  # the line's reason, with everything around it
    assert "ERROR Executor: Exception in task" in details and "Traceback (most recent call last)" in details
    assert "\tat org.apache.spark." in details


def test_a_run_that_works_prints_no_spark_output_and_leaves_no_log(tmp_path: Path) -> None:
    done = audit_process(tmp_path)
    assert done.returncode == 1, done.stderr[-3000:]  # the sample has findings
    assert done.stderr and all(PROGRESS.fullmatch(line) for line in done.stderr.splitlines()), done.stderr[-3000:]
    assert list(tmp_path.iterdir()) == []  # neither the log nor the audit's temporary output is left
