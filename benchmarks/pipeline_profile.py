"""Where the fleet analysis spends its time: per stage of the single-process path, then per part of one group.

Run: ``.venv/bin/python benchmarks/pipeline_profile.py --groups 3000`` (fleet-gen seed 1, the scenario of
benchmarks/pipeline.py). Two tables, both in milliseconds a group:

* stages of :func:`rocket_rebalance.pipeline.reference.write_reference`, timed one after the other without a
  profiler: reading the snapshot, the row checks, assembling group rows, ``analyze_group`` (into one set of
  tables, held as columns), turning the columns into Arrow, and writing Parquet;
* ``analyze_group`` cut into its parts by wrapping them with counters (exclusive time: a plan is not counted in the
  function that called it). The wrappers cost something of their own, so the parts add up to more than the first
  table's ``analyze_group``; read them as shares. A plan or movement is labelled by where it was asked for: by a
  side (what the consumers take) or by the strategy comparison.
"""

from __future__ import annotations

import argparse
import gc
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rocket_rebalance.pipeline import analysis, comparison, movement, reference, sides
from rocket_rebalance.pipeline.fleetgen import write_fleet
from rocket_rebalance.pipeline.rows import Tables
from rocket_rebalance.pipeline.scenario import Scenario, load_scenario
from rocket_rebalance.pipeline.schema import record_batch
from rocket_rebalance.pipeline.worker import TABLE_FIELDS
from rocket_rebalance.snapshot_folder import BEFORE_TABLES, OPTIONAL_TABLES
from rocket_rebalance.strategies import consistent_hash

sys.path.insert(0, str(Path(__file__).parent))
from pipeline import SCENARIO  # noqa: E402  (the benchmark's own scenario, so both profile the same work)


def stages(fleet: Path, groups: int) -> list[dict[str, Any]]:
    """The reference path stage by stage; returns the assembled group rows for :func:`parts`."""
    scenario = load_scenario(SCENARIO)
    times: dict[str, float] = {}

    def timed(name: str, work: Callable[[], Any]) -> Any:
        started = time.perf_counter()
        result = work()
        times[name] = time.perf_counter() - started
        return result

    raw = timed("read snapshot", lambda: reference.read_snapshot(fleet, BEFORE_TABLES, OPTIONAL_TABLES))
    before = timed("row checks", lambda: reference._split("before", raw, []))
    rows: list[dict[str, Any]] = timed("assemble groups", lambda: reference.assemble_groups(before, None, True))
    with analysis.gc_paused():
        tables = timed("analyze_group", lambda: _analyzed(rows, scenario))
        batches = timed(
            "to Arrow",
            lambda: {t: record_batch(v.columns, TABLE_FIELDS[t]) for t, v in tables.items() if len(v)},
        )
    out = Path(tempfile.mkdtemp(prefix="rr-profile-"))
    timed(
        "write Parquet",
        lambda: [pq.write_table(pa.Table.from_batches([b]), out / f"{t}.parquet") for t, b in batches.items()],
    )
    shutil.rmtree(out)
    total = sum(times.values())
    print(f"{'stage':<45} {'ms/group':>9} {'share':>6}")
    for name, seconds in times.items():
        print(f"{name:<45} {seconds / groups * 1e3:>9.3f} {seconds / total:>6.1%}")
    print(f"{'total':<45} {total / groups * 1e3:>9.3f}")
    return rows


def _analyzed(rows: list[dict[str, Any]], scenario: Scenario) -> Tables:
    """Every group into one set of tables, as a Spark task analyses its batches."""
    tables = Tables()
    for row in rows:
        analysis.analyze_group(row, scenario, True, tables)
    return tables


def parts(rows: list[dict[str, Any]], groups: int) -> None:
    """``analyze_group`` with its parts wrapped by exclusive-time counters."""
    scenario = load_scenario(SCENARIO)
    spent: dict[str, float] = defaultdict(float)
    inner: list[float] = []
    asker = ["side"]

    def wrap(module: Any, name: str, label: Callable[[tuple[Any, ...]], str], sets: str | None = None) -> None:
        function = getattr(module, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            before = asker[0]
            if sets is not None:
                asker[0] = sets
            what = label(args)
            started = time.perf_counter()
            inner.append(0.0)
            try:
                return function(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - started
                spent[what] += elapsed - inner.pop()
                if inner:
                    inner[-1] += elapsed
                asker[0] = before

        setattr(module, name, counted)

    wrap(analysis, "analyze_side", lambda a: "sides: views, ownership, assignment/balance/skew rows")
    wrap(analysis, "check_observed", lambda a: "observed")
    wrap(analysis, "apply_scenario", lambda a: "scenario")
    wrap(analysis, "compare_sides", lambda a: "movement table")
    wrap(analysis, "comparison", lambda a: "comparison: the rest", sets="comparison")
    wrap(sides, "plan_owners", lambda a: f"plan {a[0].name} ({asker[0]})")
    wrap(sides, "plan", lambda a: f"plan {a[0].name} ({asker[0]})")
    wrap(consistent_hash, "build_ring", lambda a: f"ring building ({asker[0]})")
    wrap(consistent_hash, "neighbour_ring", lambda a: f"ring building ({asker[0]})")
    wrap(movement, "change", lambda a: f"movement ({asker[0]})")
    wrap(comparison, "change", lambda a: f"movement ({asker[0]})")
    gc.disable()
    started = time.perf_counter()
    _analyzed(rows, scenario)
    total = time.perf_counter() - started
    gc.enable()
    spent["analyze_group: the rest"] = total - sum(spent.values())
    print(f"\n{'analyze_group part (exclusive)':<45} {'ms/group':>9} {'share':>6}")
    for name, seconds in sorted(spent.items(), key=lambda item: -item[1]):
        if seconds / total >= 0.005:
            print(f"{name:<45} {seconds / groups * 1e3:>9.3f} {seconds / total:>6.1%}")
    print(f"{'total (with the counters own cost)':<45} {total / groups * 1e3:>9.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=3_000)
    parser.add_argument("--workdir", default=None, help="where the fleet goes (default: a temp folder)")
    args = parser.parse_args()
    fleet = Path(args.workdir or tempfile.mkdtemp(prefix="rr-profile-fleet-")) / f"fleet-{args.groups}"
    if not (fleet / "groups.parquet").exists():
        write_fleet(fleet, args.groups, seed=1)
    parts(stages(fleet, args.groups), args.groups)
    return 0


if __name__ == "__main__":
    sys.exit(main())
