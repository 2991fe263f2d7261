"""Running the command line as a user does, in a process of its own, and checking that a refusal is one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def run_cli(*args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``rocket-rebalance ARGS`` with no stdin, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "rocket_rebalance", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def one_line_error(done: subprocess.CompletedProcess[str], *expected: str, status: int = 2) -> str:
    """The one ``rocket-rebalance: ...`` line of a refusal (exit status 2, a usage error, unless told: 3 is a
    cluster that could not be read), holding every ``expected`` text."""
    assert done.returncode == status, (done.returncode, done.stdout[-500:], done.stderr[-2000:])
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("rocket-rebalance: "), done.stderr[-2000:]
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]
