"""``rocket-rebalance impact``, ``audit`` and ``fleet-gen``: argument parsing only.

pyspark and pyarrow are imported inside the handlers, never here, so the rest of the command line stays fast and
works without the ``spark`` extra.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rocket_rebalance.model import word_choices
from rocket_rebalance.pipeline.audit import EXIT_STATUS
from rocket_rebalance.pipeline.options import MAX_GROUPS, QUIET_HELP, add_arguments, add_engine_arguments
from rocket_rebalance.progress import Progress

__all__ = ["register"]


def _impact(args: argparse.Namespace) -> int:
    from rocket_rebalance.pipeline.job import PARTIAL_NOTE, run_from_args

    result = run_from_args(args)
    print(f"impact: {result.totals['groups']} groups analyzed in {result.seconds:.1f}s; output in {result.out}")
    for name, count in result.rows.items():
        print(f"  {name:<13} {count:>10} rows")
    if result.rows.get("rejected"):
        print(f"impact: {result.rows['rejected']} input rows rejected; see {result.out}/rejected.parquet")
    for path in result.partial:
        print(f"impact: partial snapshot {path}: {PARTIAL_NOTE}")
    if result.report:
        print(f"impact: report {result.report} and {result.report.removesuffix('.md')}.html (self-contained)")
    return 0


def _audit(args: argparse.Namespace) -> int:
    from rocket_rebalance.pipeline.audit import format_audit, run_audit
    from rocket_rebalance.pipeline.options import check_master, parse_conf

    if args.report and not args.out:
        raise ValueError("--report needs --out: without it the output folder is deleted after the audit")
    if args.master is not None:
        check_master(args.master)
    with Progress("audit", None if args.quiet else sys.stderr) as progress:
        audit = run_audit(
            Path(args.snapshot),
            Path(args.out) if args.out else None,
            master=args.master,
            conf=parse_conf(args.conf),
            report=args.report,
            limit=args.limit,
            progress=progress,
            engine=args.engine,
        )
    print(format_audit(audit, args.limit, args.format))
    return audit.status


def _fleet_gen(args: argparse.Namespace) -> int:
    from rocket_rebalance.pipeline.fleetgen import write_fleet

    if not 1 <= args.groups <= MAX_GROUPS:
        raise ValueError(f"--groups must be between 1 and {MAX_GROUPS}, got {args.groups}")
    if not 0.0 <= args.split_views <= 1.0:  # NaN too
        raise ValueError(f"--split-views must be between 0 and 1, got {args.split_views}")
    with (
        Progress("fleet-gen", None if args.quiet else sys.stderr) as progress,
        progress.count(f"generating {args.groups:,} groups into {args.out}", "groups") as done,
    ):
        counts = write_fleet(
            Path(args.out),
            args.groups,
            args.seed,
            args.split_views,
            args.format,
            observed=args.observed,
            progress=done,
        )
    print(f"fleet-gen: {args.groups} groups written to {args.out}", file=sys.stderr)
    for name, count in counts.items():
        print(f"  {name:<13} {count:>10} rows")
    return 0


def register(subparsers: Any) -> None:
    """Add the pipeline's sub-commands to the ``rocket-rebalance`` parser."""
    impact = subparsers.add_parser(
        "impact",
        help="fleet impact of a change on every consumer group (in-process, or Spark for a large fleet)",
        description="What a deploy, broker restart or strategy change does to every consumer group: assignments, "
        "violations, balance, movement, re-delivery exposure, strategy comparison and a report. Runs in this "
        "process for a small fleet and on Spark (local[*] by default) for a large one (--engine). Without "
        "--snapshot, the sample snapshot and scenario shipped with the package.",
    )
    add_arguments(impact)
    impact.set_defaults(handler=_impact)
    audit = subparsers.add_parser(
        "audit",
        help="findings on a snapshot's current state; exit status 0 nothing to act on, 1 findings, 2 usage, "
        "3 could not read (for cron)",
        description="Run the fleet job on one snapshot (no scenario) and print one table of findings: violations "
        "of the computed assignment and of what consumers report holding (observed; ownership ones only as they "
        "held across the collector's two reads), stopped groups whose backlog grows, the collector's rejected "
        f"rows, and whether the snapshot is partial. {EXIT_STATUS}",
    )
    audit.add_argument("--snapshot", required=True, help="snapshot folder (e.g. from rocket-rebalance snapshot)")
    audit.add_argument(
        "--out", default=None, help="keep the output tables here (default: a temporary folder, deleted afterwards)"
    )
    add_engine_arguments(audit)
    audit.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark settings")
    audit.add_argument(
        "--format",
        **word_choices(("table", "json")),
        default="table",
        help="output format",
    )
    audit.add_argument("--limit", type=int, default=50, metavar="N", help="print at most N findings (default 50)")
    audit.add_argument("--report", action="store_true", help="also write report.md, report.html and charts into --out")
    audit.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    audit.set_defaults(handler=_audit)
    gen = subparsers.add_parser(
        "fleet-gen",
        help="write a realistic synthetic fleet snapshot",
        description="A synthetic fleet snapshot (skewed group sizes, several topics per group, retry topics, "
        "RocketMQ-shaped client IDs, some split views) for tests and benchmarks.",
    )
    gen.add_argument("--groups", type=int, required=True, help=f"number of consumer groups, 1 to {MAX_GROUPS}")
    gen.add_argument(
        "--out",
        required=True,
        help="snapshot folder to write: new, empty, or an earlier fleet-gen output (whose tables it replaces)",
    )
    gen.add_argument("--seed", type=int, default=1, help="random seed (same seed, same fleet)")
    gen.add_argument("--split-views", type=float, default=0.02, help="share of groups with a stale member view, 0 to 1")
    gen.add_argument(
        "--format",
        **word_choices(("parquet", "jsonl")),
        default="parquet",
        help="table file format",
    )
    gen.add_argument(
        "--observed",
        action="store_true",
        help="also write what each consumer reports holding (the plan, with a fault planted in about 1 group in 20)",
    )
    gen.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    gen.set_defaults(handler=_fleet_gen)
