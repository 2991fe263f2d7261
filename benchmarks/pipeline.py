"""Fleet impact pipeline: wall time on Spark local[2] against the same analysis in one plain Python process.

Run: ``.venv/bin/python benchmarks/pipeline.py`` (``--sizes 1000 10000`` to skip the 100k fleet, which takes
minutes). For each size a synthetic fleet is generated once (``fleet-gen``, seed 1, Parquet) and the same deploy
scenario is analysed twice: by the Spark job (one shared SparkSession; JVM start-up is printed once, apart) and by
:func:`rocket_rebalance.pipeline.reference.write_reference` (same tables, written as it goes). Both read the
snapshot and write all output tables; neither draws the Markdown report (the Spark side still computes its fleet
totals, a few small aggregation jobs, so it is charged slightly more work than the baseline). Groups, consumer
processes (members) and rows written are printed so the sizes can be compared with the target (100k groups,
about 1M views).

The Spark job runs once per ``--writers`` entry on the same fleet and scenario: ``pyarrow`` (the executors write
Parquet themselves, the default) and ``spark`` (rows handed back to Spark, persisted once and written by the
DataFrameWriter as Parquet); the last column is the second writer's time over the first's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from rocket_rebalance.pipeline.fleetgen import write_fleet
from rocket_rebalance.pipeline.options import WRITERS, writer_spec
from rocket_rebalance.pipeline.reference import write_reference
from rocket_rebalance.pipeline.scenario import load_scenario

SCENARIO = {
    "name": "deploy: one consumer joins every group, broker-a restarts",
    "changes": [{"action": "join", "count": 1}, {"action": "broker_down", "broker": "broker-a"}],
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--workdir", default=None, help="where fleets and outputs go (default: a temp folder)")
    parser.add_argument("--skip-python", action="store_true", help="only time Spark (the baseline is slow at 100k)")
    parser.add_argument("--writers", nargs="+", choices=WRITERS, default=list(WRITERS), help="Spark writers to time")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="rr-bench-"))
    scenario = load_scenario(SCENARIO)

    from rocket_rebalance.pipeline.job import build_session, run_impact

    started = time.perf_counter()
    spark = build_session(args.master)
    startup = time.perf_counter() - started
    print(f"Spark {args.master} session start-up: {startup:.1f} s (not included below)", flush=True)
    writers = {name: writer_spec(name) for name in args.writers}
    timed = "".join(f" {name + ' s':>9}" for name in writers)
    ratio = f" {'/'.join(reversed(args.writers)):>15}" if len(writers) == 2 else ""
    header = f"{'groups':>8} {'members':>9} {'rows out':>10} {'gen s':>7}{timed} {'python s':>9} {'py/spark':>9}{ratio}"
    print(header, flush=True)
    try:
        for size in args.sizes:
            fleet = work / f"fleet-{size}"
            started = time.perf_counter()
            if not (fleet / "groups.parquet").exists():
                counts = write_fleet(fleet, size, seed=1)
            else:
                import pyarrow.parquet as pq

                counts = {"members": pq.read_metadata(fleet / "members.parquet").num_rows}
            generated = time.perf_counter() - started
            seconds: dict[str, float] = {}
            for name, writer in writers.items():
                out = work / f"spark-{name}-{size}"
                shutil.rmtree(out, ignore_errors=True)
                started = time.perf_counter()
                result = run_impact(
                    fleet, out, scenario=scenario, spark=spark, report=False, progress=lambda line: None, writer=writer
                )
                seconds[name] = time.perf_counter() - started
                print(f"   ({size:,} groups: Spark with the {name} writer done in {seconds[name]:.1f} s)", flush=True)
            spark_seconds = seconds[args.writers[0]]
            python_seconds = float("nan")
            if not args.skip_python:
                started = time.perf_counter()
                write_reference(fleet, work / f"python-{size}", scenario=scenario)
                python_seconds = time.perf_counter() - started
            timings = "".join(f" {value:>9.1f}" for value in seconds.values())
            if len(seconds) == 2:
                timings_ratio = f" {seconds[args.writers[1]] / spark_seconds:>14.2f}x"
            else:
                timings_ratio = ""
            line = (
                f"{size:>8,} {counts['members']:>9,} {sum(result.rows.values()):>10,} {generated:>7.1f}{timings} "
                f"{python_seconds:>9.1f} {python_seconds / spark_seconds:>8.2f}x{timings_ratio}"
            )
            print(line, flush=True)
    finally:
        spark.stop()
    print(f"\nfleets and outputs in {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
