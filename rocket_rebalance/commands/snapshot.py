"""``rocket-rebalance snapshot``: a live cluster's consumer groups as the fleet pipeline's snapshot tables.

Exit status (:data:`EXIT_STATUS`): 0 for a complete snapshot (groups with no online consumer included: they are
recorded with their lag, not failed reads), 3 when something could not be read (a partial snapshot, see
``rejected.jsonl``; or the cluster not at all), 2 for a usage error (bad argument or address, unusable ``--out``),
with one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rocket_rebalance.admin.snapshot import DEFAULT_SETTLE, ClusterReadError, take_snapshot
from rocket_rebalance.commands.options import acl_credentials, add_connection_options, duration, tls_settings
from rocket_rebalance.model import printable
from rocket_rebalance.progress import Progress

__all__ = ["EXIT_STATUS", "PARTIAL", "register"]

PARTIAL = 3
EXIT_STATUS = "Exit status: 0 complete; 3 could not read everything (partial) or the cluster at all; 2 usage error."


def _run(args: argparse.Namespace) -> int:
    with Progress("snapshot", None if args.quiet else sys.stderr) as progress:

        def rereading(groups: list[str], seconds: float) -> None:
            progress.step(
                f"{len(groups)} groups read again in {seconds:g} s, to see whether what their first read showed "
                "holds (an ownership problem, or a stopped group's backlog)"
            )

        try:
            with progress.count("reading consumer groups", "groups") as count:
                result = take_snapshot(
                    args.namesrv,
                    args.out,
                    group_patterns=args.group or (),
                    topic_patterns=args.topic or (),
                    include_system=args.include_system,
                    concurrency=args.concurrency,
                    timeout=args.timeout,
                    token=args.token,
                    credentials=acl_credentials(args),
                    tls=tls_settings(args),
                    progress=lambda done, total, rejected: count(done, total, f"{rejected} rejected"),
                    settle=args.settle,
                    rereading=rereading,
                )
        except ClusterReadError as error:  # the cluster could not be read: not a usage error
            print(f"rocket-rebalance: {printable(str(error))}", file=sys.stderr)
            return PARTIAL
    summary = {"out": str(result.out), "groups_read": result.groups, "partial": result.partial, "rows": result.counts}
    print(json.dumps(summary))
    if result.partial:
        print(
            f"rocket-rebalance: the snapshot is partial: {result.counts['rejected']} things could not be read "
            f"(see {result.out / 'rejected.jsonl'})",
            file=sys.stderr,
        )
        return PARTIAL
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "snapshot",
        help="collect a live cluster's consumer groups into snapshot tables for `impact`",
        description="Collect the consumer groups of a live cluster into a snapshot folder (the tables `impact` "
        "reads), plus what each consumer reports holding (observed.jsonl) and what could not be read "
        "(rejected.jsonl); groups with no online consumer with their lag (stopped.jsonl). " + EXIT_STATUS,
    )
    add_connection_options(parser, required=True)
    parser.add_argument("--out", required=True, type=Path, metavar="DIR", help="new, empty or earlier snapshot folder")
    parser.add_argument("--group", action="append", metavar="PATTERN", help="keep groups matching (shell glob)")
    parser.add_argument(
        "--topic", action="append", metavar="PATTERN", help="keep subscribed topics matching (shell glob)"
    )
    parser.add_argument("--include-system", action="store_true", help="also RocketMQ's own groups (TOOLS_CONSUMER...)")
    parser.add_argument("--concurrency", type=int, default=8, metavar="N", help="groups read at once, 1 to 64")
    parser.add_argument("--timeout", type=duration(), default=5.0, metavar="S", help="seconds per request (default 5)")
    parser.add_argument(
        "--settle",
        type=duration(zero=True),
        default=DEFAULT_SETTLE,
        metavar="S",
        help="read a group again S seconds later when its first read shows an ownership problem or a stopped "
        f"group's backlog, so findings describe a state, not a moment of a rebalance (default {DEFAULT_SETTLE:g}: "
        "Java's rebalance interval; 0: never)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr (errors are still said)")
    parser.set_defaults(handler=_run)
