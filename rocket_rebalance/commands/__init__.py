"""The sub-commands of ``rocket-rebalance``: each module parses its arguments and prints; the library does the work."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn


class CommandError(Exception):
    """A failure to report as one line (``rocket-rebalance: <message>``) with exit status 2."""


def printable(text: str) -> str:
    """Text as it may go to a terminal: control characters escaped, so a client ID or broker name from a server
    (or an error quoting one) cannot move the cursor, clear the screen or forge a line."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line (``PROG: error: MESSAGE (see PROG --help)``) and exit
    status 2, like every other failure of the command; argparse's own prints the whole usage first. Sub-command
    parsers inherit the class through ``add_subparsers``."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {printable(message)} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(2)
