"""The sub-commands of ``rocket-rebalance``: each module parses its arguments and prints; the library does the work."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from rocket_rebalance.model import printable


class CommandError(Exception):
    """A failure to report as one line (``rocket-rebalance: <message>``) with exit status 2."""


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line (``PROG: error: MESSAGE (see PROG --help)``) and exit
    status 2, like every other failure of the command; argparse's own prints the whole usage first. Sub-command
    parsers inherit the class through ``add_subparsers``."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {printable(message)} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(2)
