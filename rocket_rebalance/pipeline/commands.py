"""``rocket-rebalance impact`` and ``rocket-rebalance fleet-gen``: argument parsing only.

pyspark and pyarrow are imported inside the handlers, never here, so the rest of the command line stays fast and
works without the ``spark`` extra.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["add_arguments", "parse_conf", "register"]


def parse_conf(items: Sequence[str]) -> dict[str, str]:
    """``key=value`` pairs from ``--conf`` options."""
    conf = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--conf expects key=value, got {item!r}")
        conf[key] = value
    return conf


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The impact options, shared by ``rocket-rebalance impact`` and the spark-submit entry."""
    parser.add_argument("--snapshot", help="snapshot folder (default: the sample snapshot shipped with the package)")
    change = parser.add_mutually_exclusive_group()
    change.add_argument("--after", help="a second snapshot folder describing the state after the change")
    change.add_argument("--scenario", help="a scenario JSON file (joins, leaves, broker down, strategy switch)")
    parser.add_argument("--out", required=True, help="output folder (Parquet tables, report.md, charts/)")
    parser.add_argument("--master", default=None, help="Spark master (default local[*]; under spark-submit: its own)")
    parser.add_argument("--partitions", type=int, default=None, help="partitions of the per-group work")
    parser.add_argument("--no-report", action="store_true", help="skip the Markdown report and charts")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark settings")


def _impact(args: argparse.Namespace) -> int:
    from rocket_rebalance.pipeline.job import run_from_args

    result = run_from_args(args)
    print(f"impact: {result.totals['groups']} groups analyzed in {result.seconds:.1f}s; output in {result.out}")
    for name, count in result.rows.items():
        print(f"  {name:<13} {count:>10} rows")
    if result.rows.get("rejected"):
        print(f"impact: {result.rows['rejected']} input rows rejected; see {result.out}/rejected.parquet")
    if result.report:
        print(f"impact: report {result.report}")
    return 0


def _fleet_gen(args: argparse.Namespace) -> int:
    from rocket_rebalance.pipeline.fleetgen import write_fleet

    if args.groups < 1:
        raise ValueError("--groups must be at least 1")
    if not 0.0 <= args.split_views <= 1.0:
        raise ValueError("--split-views must be between 0 and 1")
    counts = write_fleet(Path(args.out), args.groups, args.seed, args.split_views, args.format)
    print(f"fleet-gen: {args.groups} groups written to {args.out}", file=sys.stderr)
    for name, count in counts.items():
        print(f"  {name:<13} {count:>10} rows")
    return 0


def register(subparsers: Any) -> None:
    """Add the pipeline's sub-commands to the ``rocket-rebalance`` parser."""
    impact = subparsers.add_parser(
        "impact",
        help="fleet impact of a change on every consumer group (Spark)",
        description="What a deploy, broker restart or strategy change does to every consumer group: assignments, "
        "violations, balance, movement, re-delivery exposure, strategy comparison and a report. Runs on Spark "
        "(local[*] by default). Without --snapshot, the sample snapshot and scenario shipped with the package.",
    )
    add_arguments(impact)
    impact.set_defaults(handler=_impact)
    gen = subparsers.add_parser(
        "fleet-gen",
        help="write a realistic synthetic fleet snapshot",
        description="A synthetic fleet snapshot (skewed group sizes, several topics per group, retry topics, "
        "RocketMQ-shaped client IDs, some split views) for tests and benchmarks.",
    )
    gen.add_argument("--groups", type=int, required=True, help="number of consumer groups")
    gen.add_argument("--out", required=True, help="snapshot folder to write")
    gen.add_argument("--seed", type=int, default=1, help="random seed (same seed, same fleet)")
    gen.add_argument("--split-views", type=float, default=0.02, help="share of groups with a stale member view")
    gen.add_argument("--format", choices=("parquet", "jsonl"), default="parquet", help="table file format")
    gen.set_defaults(handler=_fleet_gen)
