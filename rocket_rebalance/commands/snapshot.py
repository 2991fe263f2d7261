"""``rocket-rebalance snapshot``: a live cluster's consumer groups as the fleet pipeline's snapshot tables.

Exit status: 0 for a complete snapshot, 3 for a partial one (something could not be read: see ``rejected.jsonl``),
2 for an error (bad argument or address, name server unreachable, unusable ``--out``), with one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rocket_rebalance.commands.options import acl_credentials, add_connection_options, duration, tls_settings
from rocket_rebalance.progress import Progress

__all__ = ["PARTIAL", "register"]

PARTIAL = 3


def _run(args: argparse.Namespace) -> int:
    from rocket_rebalance.admin.snapshot import take_snapshot

    with Progress("snapshot", None if args.quiet else sys.stderr) as progress:
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
            )
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
        "(rejected.jsonl). Exit status 0: complete; 3: partial; 2: error.",
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
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr (errors are still said)")
    parser.set_defaults(handler=_run)
