"""The per-group analysis cost of several versions of the code, on the same fleet, in the same run.

Run: ``.venv/bin/python benchmarks/analysis_cost.py --groups 3000 --codes 5aaa92d main .`` Each code (a commit,
extracted with ``git archive``, or ``.`` for this working tree) reads the fleet (fleet-gen seed 1, the scenario of
benchmarks/pipeline.py) with its own reader in a fresh process, then analyses every group once with
``analyze_group`` (the garbage collector paused, as the Spark workers run it) and reports the CPU seconds of that
loop alone. The codes run one after the other, round after round (interleaved), so a load that comes and goes on a
shared machine falls on all of them alike; the table gives every round and the median per group, and the last
column is each code's median over the first code's (the control's). CPU time, not wall time: another session's
work on the same cores slows a process's wall clock more than its CPU clock (both still suffer from shared caches).

``--without-comparison`` adds, for each code, a run with the strategy comparison left out (the analysis module's
comparison function replaced by one that does nothing; ``comparison`` since it has its own module, ``_comparison``
before): what the rest of a group's analysis (both sides, their movement, the group row) costs on its own.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from pipeline import REPO, SCENARIO, code_of, fleets  # noqa: E402  (the benchmark's fleet, scenario and extraction)

DRIVER = """
import gc, json, sys, time
from pathlib import Path
from rocket_rebalance.pipeline import reference
from rocket_rebalance.pipeline.analysis import analyze_group
try:
    from rocket_rebalance.pipeline.scenario import load_scenario
except ImportError:  # a commit before d121a83, which defined it in analysis
    from rocket_rebalance.pipeline.analysis import load_scenario
fleet, scenario = Path(sys.argv[1]), load_scenario(json.loads(sys.argv[2]))
tables = ("routes", "members", "subscriptions", "groups", "offsets")
rows = reference.assemble_groups(reference._split("before", reference.read_snapshot(fleet, tables), []), None, True)
if sys.argv[3] == "without comparison":
    from rocket_rebalance.pipeline import analysis
    setattr(analysis, "comparison" if hasattr(analysis, "comparison") else "_comparison", lambda *args: None)
gc.collect()
gc.disable()
started = time.process_time()
results = [analyze_group(row, scenario, True) for row in rows]
spent = time.process_time() - started
analysed = sum(1 for result in results if result["groups"])
print(json.dumps({"seconds": spent, "groups": len(rows), "analysed": analysed, "rows": sum(
    len(rows) for result in results for name, rows in result.items() if name != "group")}))
"""
"""Runs with ``PYTHONPATH`` at one code: the API it uses (``read_snapshot(fleet, tables)``, ``_split``,
``assemble_groups``, ``analyze_group``, ``load_scenario``) is the same since the first pipeline, but for where
``load_scenario`` lives (``scenario`` since d121a83, ``analysis`` before)."""


def analysis_seconds(code: Path, fleet: Path, mode: str = "whole") -> dict[str, float]:
    """One fresh process of ``code``: CPU seconds of analysing every group of ``fleet`` once, and counts;
    ``mode`` "without comparison" leaves the strategy comparison out."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    done = subprocess.run(
        # -P: PYTHONPATH's code, not the current folder's (see pipeline.py's control_runs)
        [sys.executable, "-P", "-c", DRIVER, str(fleet), json.dumps(SCENARIO), mode],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the analysis at {code} failed: {done.stderr.strip().splitlines()[-1:]}")
    found: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--groups", type=int, default=3_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--codes", nargs="+", default=["5aaa92d", "main", "."], help="commits, or . for this tree")
    parser.add_argument("--workdir", default=None, help="where the fleet and the codes go (default: a temp folder)")
    parser.add_argument(
        "--without-comparison", action="store_true", help="also time each code with the strategy comparison left out"
    )
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="rr-cost-")).resolve()
    fleets(work, [args.groups])
    fleet = work / f"fleet-{args.groups}"
    paths = {name: REPO if name == "." else code_of(name, work) for name in args.codes}
    modes = ["whole", "without comparison"] if args.without_comparison else ["whole"]
    # each run: (label, code, mode); "-cmp" marks a run without the comparison
    runs = {(name if mode == "whole" else f"{name} -cmp"): (paths[name], mode) for name in args.codes for mode in modes}
    spent: dict[str, list[float]] = {name: [] for name in runs}
    counts: dict[str, dict[str, float]] = {}
    for round_ in range(args.rounds):
        for name, (code, mode) in runs.items():
            found = analysis_seconds(code, fleet, mode)
            spent[name].append(found["seconds"])
            counts[name] = found
            print(f"   (round {round_ + 1}, {name}: {found['seconds']:.2f} s)", flush=True)
    rounds = "".join(f" {f'round {r + 1}':>8}" for r in range(args.rounds))
    print(f"\n{'code':<12}{rounds} {'groups':>7} {'analysed':>9} {'rows out':>10} {'ms/group':>9} {'/ first':>8}")
    first = statistics.median(spent[args.codes[0]])
    for name in runs:
        median = statistics.median(spent[name])
        found = counts[name]
        print(
            f"{name:<12}{''.join(f' {s:>8.2f}' for s in spent[name])} {found['groups']:>7,.0f} "
            f"{found['analysed']:>9,.0f} {found['rows']:>10,.0f} {median / found['groups'] * 1e3:>9.3f} "
            f"{median / first:>7.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
