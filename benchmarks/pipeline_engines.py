"""``impact``'s two engines from the command line: wall time in this process (``--engine local``) against Spark
(``--engine spark``, ``local[*]``), at several fleet sizes, to find where Spark's fixed cost stops dominating.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/pipeline_engines.py`` (``--sizes 1 6 50 --runs 3``). Each fleet is
generated once (``fleet-gen --seed 1``, Parquet); each run is a fresh ``rocket-rebalance impact`` process with the
deploy scenario of ``benchmarks/pipeline.py`` and ``--no-report`` (the report is drawn the same way by both), so a
Spark run pays what a user's does: the interpreter, a JVM, a session. Runs are interleaved (every size and engine
once, then again, the engines' order alternating), so a change in the machine's load falls on both; the table gives
the medians, the crossover the first size at which Spark's median is below the local one, and the load average
before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from rocket_rebalance.pipeline.fleetgen import write_fleet
from rocket_rebalance.snapshot_folder import data_files

SCENARIO = {
    "name": "deploy: one consumer joins every group, broker-a restarts",
    "changes": [{"action": "join", "count": 1}, {"action": "broker_down", "broker": "broker-a"}],
}

ENGINES = ("local", "spark")


def timed_run(fleet: Path, scenario: Path, out: Path, engine: str) -> float:
    """One ``impact`` process; its wall time (it must succeed: a failed run is no measurement)."""
    command = [sys.executable, "-m", "rocket_rebalance", "impact", "--snapshot", str(fleet), "--scenario"]
    command += [str(scenario), "--out", str(out), "--engine", engine, "--no-report"]
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 6, 50, 300, 2000, 10000, 20000])
    parser.add_argument("--runs", type=int, default=3, help="runs per size and engine (the median is shown)")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the fleets here (default: a temporary one)")
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="rr-engines-"))
    scenario = work / "scenario.json"
    work.mkdir(parents=True, exist_ok=True)
    scenario.write_text(json.dumps(SCENARIO), encoding="utf-8")
    members = {}
    for size in args.sizes:
        fleet = work / f"fleet-{size}"
        if not (fleet / "groups.parquet").exists():
            write_fleet(fleet, size, 1, 0.02, "parquet")
        members[size] = sum(pq.read_metadata(f).num_rows for f in data_files(fleet / "members.parquet", "parquet"))
    print(f"{platform.node()}: {os.cpu_count()} cores, Python {platform.python_version()}, load {os.getloadavg()}")
    seconds: dict[tuple[int, str], list[float]] = {(s, e): [] for s in args.sizes for e in ENGINES}
    for run in range(args.runs):
        for size in args.sizes:
            order = ENGINES if (run + size) % 2 == 0 else ENGINES[::-1]
            for engine in order:
                out = work / f"out-{engine}"
                took = timed_run(work / f"fleet-{size}", scenario, out, engine)
                shutil.rmtree(out, ignore_errors=True)
                seconds[(size, engine)].append(took)
                print(f"   (run {run + 1}: {size:,} groups, {engine}: {took:.1f} s)", flush=True)
    print(f"load after: {os.getloadavg()}")
    print(f"\n{'groups':>8} {'members':>9} {'local s':>9} {'spark s':>9} {'spark/local':>12}")
    crossover = None
    for size in args.sizes:
        local, spark = (statistics.median(seconds[(size, e)]) for e in ENGINES)
        print(f"{size:>8,} {members[size]:>9,} {local:>9.1f} {spark:>9.1f} {spark / local:>11.2f}x")
        if crossover is None and spark < local:
            crossover = size
    print(
        f"\nSpark is faster from {crossover:,} groups on"
        if crossover is not None
        else f"\nthe local engine is faster at every size measured (up to {max(args.sizes):,} groups)"
    )
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
