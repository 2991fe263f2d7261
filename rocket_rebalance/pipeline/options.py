"""The ``impact`` options and their checks, shared by ``rocket-rebalance impact`` (:mod:`.commands`), the
spark-submit entry (:mod:`.submit`) and the job itself (:mod:`.job`), which checks them again before Spark starts.

A module of its own so that none of those three imports another just for its options.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence

__all__ = ["MAX_GROUPS", "MAX_PARTITIONS", "add_arguments", "check_master", "parse_conf"]

MAX_PARTITIONS = 100_000
"""Most partitions of the per-group work: each writes one part file per output table, so a typo of a few digits
would otherwise mean millions of tiny files (a 100-million-group fleet needs a few thousand)."""

MAX_GROUPS = 1_000_000
"""Most groups ``fleet-gen`` writes: about 10 million members and 100 million offset rows, several GB; a typed
extra digit should be an error, not a full disk."""

_MASTER = re.compile(
    r"local(\[([1-9][0-9]*|\*)(,[1-9][0-9]*)?\])?"
    r"|local-cluster\[[1-9][0-9]*,[1-9][0-9]*,[1-9][0-9]*\]"
    r"|spark://[^\s,/]+(,[^\s,/]+)*|k8s://\S+|yarn"
)
"""The master URLs Spark accepts (its SparkContext.createTaskScheduler), checked here because a wrong one makes
the JVM exit before PySpark can say why."""


def check_master(master: str) -> None:
    """Refuse a Spark master URL that Spark would not start with."""
    if not _MASTER.fullmatch(master):
        raise ValueError(
            f"--master {master!r} is not a Spark master "
            "(local, local[N], local[*], local[N,RETRIES], spark://HOST:PORT, yarn, k8s://URL)"
        )


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
    parser.add_argument(
        "--out",
        required=True,
        help="output folder (Parquet tables, report.md, charts/): new, empty, or an earlier impact output (whose "
        "files it replaces), apart from the inputs",
    )
    parser.add_argument("--master", default=None, help="Spark master (default local[*]; under spark-submit: its own)")
    parser.add_argument(
        "--partitions",
        type=int,
        default=None,
        metavar="N",
        help=f"partitions of the per-group work, 1 to {MAX_PARTITIONS} (default: 4 per core)",
    )
    parser.add_argument("--no-report", action="store_true", help="skip the Markdown report and charts")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark settings")
