"""What a command's progress line looks like on a stream that is not a terminal, for the tests of every command that
prints one (:mod:`rocket_rebalance.progress`)."""

from __future__ import annotations

import re


def progress_line(command: str) -> re.Pattern[str]:
    """A plain progress line of ``command``: ``audit [3]   12.4s reading and checking rows``."""
    return re.compile(rf"{re.escape(command)} \[\d+\] +\d+\.\ds \S.*")


def progress_of(stderr: str, command: str) -> list[str]:
    """The lines of ``stderr`` that are ``command``'s progress lines."""
    pattern = progress_line(command)
    return [line for line in stderr.splitlines() if pattern.fullmatch(line)]
