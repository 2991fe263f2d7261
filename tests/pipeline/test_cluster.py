"""The impact job on a real multi-process Spark standalone cluster: spark-submit to a master with two workers on
loopback, the same tables as a local[2] run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from rocket_rebalance.cli import main as cli_main
from rocket_rebalance.pipeline.scenario import load_scenario
from rocket_rebalance.pipeline.schema import OUTPUT_TABLES
from rocket_rebalance.progress import Progress

pytestmark = pytest.mark.spark

from tests.pipeline.cluster import SparkHome, StandaloneCluster, standalone_cluster  # noqa: E402
from tests.progress_lines import progress_of  # noqa: E402

SCENARIO = {
    "name": "deploy: one consumer joins every group, broker-b restarts",
    "changes": [{"action": "join", "count": 1}, {"action": "broker_down", "broker": "broker-b"}],
}

PYTHON_ENV = {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
"""The workers start Python workers with the venv's interpreter, which has the package installed."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    with standalone_cluster(tmp_path_factory.mktemp("cluster"), env=PYTHON_ENV) as running:
        yield running


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("fleet")
    assert cli_main(["fleet-gen", "--groups", "300", "--out", str(base / "fleet"), "--split-views", "0.1"]) == 0
    (base / "scenario.json").write_text(json.dumps(SCENARIO))
    return base / "fleet", base / "scenario.json"


@pytest.fixture(scope="module")
def local_run(spark: Any, fleet: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same fleet and scenario on the tests' local[2] session: what the cluster must reproduce."""
    from rocket_rebalance.pipeline.job import run_impact

    snapshot, scenario = fleet
    out = tmp_path_factory.mktemp("local") / "out"
    run_impact(
        snapshot, out, scenario=load_scenario(json.loads(scenario.read_text())), spark=spark, partitions=4,
        report=False, progress=Progress("impact", None),
    )  # fmt: skip
    assert rows(out, "moved_queues") and rows(out, "violations")
    return out


def rows(out: Path, name: str) -> list[str]:
    return sorted(json.dumps(row, sort_keys=True) for row in pq.read_table(out / f"{name}.parquet").to_pylist())


@pytest.mark.timeout(1200)  # a bound for hangs: a standalone cluster, a fleet and two Spark runs, on a busy machine too
def test_spark_submit_to_a_standalone_cluster_equals_a_local_run(
    cluster: StandaloneCluster, fleet: tuple[Path, Path], local_run: Path, tmp_path: Path
) -> None:
    import rocket_rebalance.pipeline.submit as entry_module

    snapshot, scenario = fleet
    # the default writer: each executor writes its own part files into --out, on the local disk here, which the
    # driver and both workers share since all run on this machine (on real nodes: shared storage)
    out = tmp_path / "cluster"
    command = [
        str(SparkHome().spark_submit), "--master", cluster.master_url,
        "--conf", "spark.ui.enabled=false", "--conf", "spark.executor.memory=768m",
        "--conf", "spark.executor.cores=1", "--conf", "spark.cores.max=2",
        str(Path(entry_module.__file__)),
        "--snapshot", str(snapshot), "--scenario", str(scenario), "--out", str(out), "--partitions", "2",
    ]  # fmt: skip
    env = {**os.environ, **PYTHON_ENV, "SPARK_LOCAL_IP": "127.0.0.1"}
    earlier = {app["id"] for app in cluster.state()["completedapps"]}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert progress_of(done.stdout + done.stderr, "impact")  # spark-submit relays the Python driver's progress lines
    assert (out / "report.md").exists()  # drawn on the driver from the executors' tables

    # the tasks ran in executors on both workers, not in the driver: each worker launched an executor of this app
    # (its folder <app>/<executor>/), and that executor's log shows tasks it ran
    (app,) = [app["id"] for app in cluster.state()["completedapps"] if app["id"] not in earlier]
    for work, executors in cluster.executor_dirs().items():
        logs = [(e / "stderr").read_text(errors="replace") for e in executors if e.parent.name == app]
        assert any("Running task" in log for log in logs), f"no executor of {app} ran a task in {work}"

    for name in OUTPUT_TABLES:
        assert rows(out, name) == rows(local_run, name), name
