"""Fleet impact pipeline: wall time on Spark against one plain Python process, and against an earlier pipeline.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/pipeline.py`` (``--sizes 1000 10000`` to skip the 100k fleet,
which takes minutes). For each size a synthetic fleet is generated once (``fleet-gen``, seed 1, Parquet) and the
same deploy scenario is analysed by:

* the Spark job on ``--master`` (one shared SparkSession; JVM start-up is printed once, apart), once per
  ``--writers`` entry: ``pyarrow`` (the executors write Parquet themselves, the default) and ``spark`` (rows handed
  back to Spark and written by the DataFrameWriter);
* the in-process engine (``run_impact(engine="local")``: :func:`rocket_rebalance.pipeline.reference.write_local`),
  the same analysis in this process (``python``);
* the control (``--control COMMIT``, default 5aaa92d, the last pipeline commit of 2026-11-22): that commit's code,
  extracted with ``git archive`` and run in a subprocess with ``PYTHONPATH`` pointing at it, on the same fleets in
  the same order, its Spark job on the same master (a session of its own) and its single-process reference. The
  ``ctl/`` columns are the control's time over ours: how much cheaper this code is, measured in the same run.
  (Issue 25 names 46bed62 as "the 2026-11-22 pipeline"; that commit predates the pipeline, whose first commit is
  83b21b2, so the default is the day's last pipeline commit.) The control rejects the groups of strategies it did
  not know yet (CONSISTENT_HASH_BOUNDED, CROSS_TOPIC: about 5% of the groups) and plans fewer strategies in the
  comparison, so it does somewhat less work on the same fleet.
* with ``--cluster``, a Spark standalone cluster on loopback (the tests' own, ``tests/pipeline/cluster.py``): one
  worker of one core, then two workers of one core each, the pyarrow writer; the last column is the one-worker
  time over the two-worker time.

Every run reads the snapshot and writes all output tables; none draws the Markdown report (the Spark side still
computes its fleet totals, a few small aggregation jobs, so it is charged slightly more work than the baseline).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rocket_rebalance.pipeline.fleetgen import write_fleet
from rocket_rebalance.pipeline.options import WRITERS, writer_spec
from rocket_rebalance.pipeline.scenario import load_scenario
from rocket_rebalance.progress import Progress

SCENARIO = {
    "name": "deploy: one consumer joins every group, broker-a restarts",
    "changes": [{"action": "join", "count": 1}, {"action": "broker_down", "broker": "broker-a"}],
}

REPO = Path(__file__).resolve().parent.parent

CONTROL = """
import json, sys, time
from pathlib import Path
try:
    from rocket_rebalance.pipeline.scenario import load_scenario
except ImportError:  # a commit before d121a83, which defined it in analysis
    from rocket_rebalance.pipeline.analysis import load_scenario
from rocket_rebalance.pipeline.job import build_session, run_impact
from rocket_rebalance.pipeline.reference import write_reference
try:
    from rocket_rebalance.progress import Progress
    quiet = Progress("impact", None)
except ImportError:  # a commit before the progress module, whose job took a callable
    quiet = lambda line: None
master, work, scenario, python = sys.argv[1], Path(sys.argv[2]), load_scenario(json.loads(sys.argv[3])), sys.argv[4]
sizes = [int(size) for size in sys.argv[5:]]
spark = build_session(master)
for size in sizes:
    started = time.perf_counter()
    run_impact(work / f"fleet-{size}", work / f"control-spark-{size}", scenario=scenario, spark=spark, report=False,
               progress=quiet)
    print(json.dumps({"size": size, "spark": time.perf_counter() - started}), flush=True)
spark.stop()
for size in sizes if python == "yes" else ():
    started = time.perf_counter()
    write_reference(work / f"fleet-{size}", work / f"control-python-{size}", scenario=scenario)
    print(json.dumps({"size": size, "python": time.perf_counter() - started}), flush=True)
"""
"""The control's driver, run with ``PYTHONPATH`` at the extracted commit: the API it uses (``build_session``,
``run_impact``, ``write_reference``, ``load_scenario``) is the same since the first pipeline, but for where
``load_scenario`` lives (``scenario`` since d121a83, ``analysis`` before) and what ``run_impact``'s ``progress``
takes (a ``Progress`` since issue 41, a callable of a line before)."""


def fleets(work: Path, sizes: list[int]) -> dict[int, tuple[int, float]]:
    """Each size's fleet under ``work`` (generated once): members and seconds taken to generate."""
    import pyarrow.parquet as pq

    found = {}
    for size in sizes:
        fleet = work / f"fleet-{size}"
        started = time.perf_counter()
        if not (fleet / "groups.parquet").exists():
            write_fleet(fleet, size, seed=1)
        found[size] = (pq.read_metadata(fleet / "members.parquet").num_rows, time.perf_counter() - started)
    return found


def spark_runs(
    master: str, work: Path, sizes: list[int], writers: list[str], tag: str, conf: dict[str, str] | None = None
) -> dict[tuple[int, str], tuple[float, int]]:
    """Our Spark job on ``master``, every size and writer in one session: seconds and rows out."""
    from rocket_rebalance.pipeline.job import build_session, run_impact

    scenario = load_scenario(SCENARIO)
    started = time.perf_counter()
    spark = build_session(master, conf=conf)
    print(f"Spark {master} session start-up: {time.perf_counter() - started:.1f} s (not included)", flush=True)
    timed: dict[tuple[int, str], tuple[float, int]] = {}
    try:
        for size in sizes:
            for name in writers:
                out = work / f"{tag}-{name}-{size}"
                shutil.rmtree(out, ignore_errors=True)
                started = time.perf_counter()
                result = run_impact(
                    work / f"fleet-{size}", out, scenario=scenario, spark=spark, report=False,
                    progress=Progress("impact", None), writer=writer_spec(name),
                )  # fmt: skip
                timed[(size, name)] = (time.perf_counter() - started, sum(result.rows.values()))
                print(f"   ({tag}: {size:,} groups, {name} writer, {timed[(size, name)][0]:.1f} s)", flush=True)
    finally:
        spark.stop()
    return timed


def python_runs(work: Path, sizes: list[int]) -> dict[int, float]:
    """The in-process engine per size, in this process."""
    from rocket_rebalance.pipeline.job import run_impact

    scenario = load_scenario(SCENARIO)
    timed = {}
    for size in sizes:
        started = time.perf_counter()
        run_impact(work / f"fleet-{size}", work / f"python-{size}", scenario=scenario, report=False, engine="local")
        timed[size] = time.perf_counter() - started
        print(f"   (python: {size:,} groups, {timed[size]:.1f} s)", flush=True)
    return timed


def code_of(commit: str, work: Path) -> Path:
    """The tree of ``commit`` (``git archive``) under ``work``, extracted once: code to put on ``PYTHONPATH``."""
    code = work / f"control-{commit}"
    if not (code / "rocket_rebalance").exists():
        code.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(REPO), "archive", commit], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(code)], input=archive.stdout, check=True)
    return code


def control_runs(commit: str, master: str, work: Path, sizes: list[int], python: bool) -> dict[int, dict[str, float]]:
    """The control commit's Spark job (and reference) on the same fleets, in a subprocess at that code."""
    code = code_of(commit, work)
    env = {**os.environ, "PYTHONPATH": str(code), "PYSPARK_PYTHON": sys.executable}
    # -P: without it ``python -c`` puts the current folder first on sys.path, ahead of PYTHONPATH, and a run
    # started from the repository would time this tree's code as the control. Spark's Python workers start with
    # ``python -m pyspark.daemon``, which puts *their* current folder first too (and -P cannot be passed to them):
    # so the control runs in its own code's folder, or its executors would run this tree's analysis.
    command = [sys.executable, "-P", "-c", CONTROL, master, str(work), json.dumps(SCENARIO), "yes" if python else "no"]
    timed: dict[int, dict[str, float]] = {size: {} for size in sizes}
    with subprocess.Popen(
        [*command, *map(str, sizes)], env=env, cwd=code, stdout=subprocess.PIPE, text=True
    ) as running:
        assert running.stdout is not None
        for line in running.stdout:
            if line.startswith("{"):
                found = json.loads(line)
                size = found.pop("size")
                timed[size].update(found)
                print(f"   (control {commit}: {size:,} groups, {found})", flush=True)
    if running.returncode != 0:
        raise RuntimeError(f"the control run of {commit} failed (exit {running.returncode})")
    return timed


def cluster_runs(work: Path, sizes: list[int]) -> dict[int, dict[int, float]]:
    """Our job on a standalone cluster of one, then two one-core workers (the tests' cluster on loopback)."""
    sys.path.insert(0, str(REPO))
    from tests.pipeline.cluster import standalone_cluster

    python_env = {"PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(REPO)}
    conf = {"spark.executor.memory": "2g", "spark.executorEnv.PYTHONPATH": str(REPO)}
    timed: dict[int, dict[int, float]] = {}
    for workers in (1, 2):
        base = Path(tempfile.mkdtemp(prefix=f"rr-cluster-{workers}-", dir=work))
        with standalone_cluster(base, workers=workers, cores=1, memory="2560m", env=python_env) as cluster:
            runs = spark_runs(cluster.master_url, work, sizes, ["pyarrow"], f"cluster{workers}", conf)
        timed[workers] = {size: runs[(size, "pyarrow")][0] for size in sizes}
    return timed


def ratio(numerator: float | None, denominator: float | None) -> str:
    if numerator is None or denominator is None:
        return f"{'-':>9}"
    return f"{numerator / denominator:>8.2f}x"


def seconds(value: float | None) -> str:
    return f"{'-':>9}" if value is None else f"{value:>9.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--workdir", default=None, help="where fleets and outputs go (default: a temp folder)")
    parser.add_argument("--skip-python", action="store_true", help="no single-process runs (slow at 100k)")
    parser.add_argument("--writers", nargs="+", choices=WRITERS, default=["pyarrow"], help="Spark writers to time")
    parser.add_argument("--control", default="5aaa92d", help="commit to compare with ('none': no control)")
    parser.add_argument("--cluster", action="store_true", help="also time a standalone cluster of 1 and 2 workers")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="rr-bench-")).resolve()
    sizes: list[int] = args.sizes
    generated = fleets(work, sizes)
    spark = spark_runs(args.master, work, sizes, args.writers, "spark")
    python = {} if args.skip_python else python_runs(work, sizes)
    control: dict[int, dict[str, float]] = {}
    if args.control != "none":
        control = control_runs(args.control, args.master, work, sizes, not args.skip_python)
    cluster = cluster_runs(work, sizes) if args.cluster else {}

    first = args.writers[0]
    timed = "".join(f" {name + ' s':>9}" for name in args.writers)
    print(
        f"\n{'groups':>8} {'members':>9} {'rows out':>10} {'gen s':>7}{timed} {'python s':>9} {'py/spark':>9} "
        f"{'ctl spark':>9} {'ctl/ours':>9} {'ctl py':>9} {'ctl/ours':>9}"
    )
    for size in sizes:
        members, gen = generated[size]
        ours, rows = spark[(size, first)]
        line = f"{size:>8,} {members:>9,} {rows:>10,} {gen:>7.1f}"
        line += "".join(seconds(spark[(size, name)][0]) for name in args.writers)
        old: Callable[[str], float | None] = control.get(size, {}).get
        line += f"{seconds(python.get(size))} {ratio(python.get(size), ours)}"
        line += f"{seconds(old('spark'))} {ratio(old('spark'), ours)}"
        line += f"{seconds(old('python'))} {ratio(old('python'), python.get(size))}"
        print(line)
    if cluster:
        print(f"\n{'groups':>8} {'1 worker s':>11} {'2 workers s':>12} {'1w/2w':>9}")
        for size in sizes:
            one, two = cluster[1][size], cluster[2][size]
            print(f"{size:>8,} {one:>11.1f} {two:>12.1f} {ratio(one, two)}")
    print(f"\nfleets and outputs in {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
