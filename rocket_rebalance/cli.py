"""The ``rocket-rebalance`` command: argument parsing and printing only; the work is done by the library.

Each sub-command group lives beside the code it drives and registers itself through a ``register(subparsers)``
function listed in :data:`COMMAND_MODULES`; modules are imported only when the command line is parsed, and none of
them imports pyspark at import time. A bad argument or a failed call ends with one readable line on stderr and a
non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from rocket_rebalance import __version__
from rocket_rebalance.commands import CommandError, OneLineParser
from rocket_rebalance.model import printable
from rocket_rebalance.runtime.transport import StubWireUnavailableError

__all__ = ["COMMAND_MODULES", "main"]

COMMAND_MODULES: tuple[str, ...] = (
    "rocket_rebalance.commands.demo",
    "rocket_rebalance.commands.preview",
    "rocket_rebalance.commands.client",
    "rocket_rebalance.commands.snapshot",
    "rocket_rebalance.pipeline.commands",
)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="rocket-rebalance", description="RocketMQ-style queue rebalancing, bit-exact with the Java client."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one sub-command; returns the exit status (0 on success)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status: int = args.handler(args)
    except (CommandError, ValueError, TypeError, OSError, StubWireUnavailableError) as error:
        print(f"rocket-rebalance: {printable(str(error))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return status
