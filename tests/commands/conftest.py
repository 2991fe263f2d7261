"""Running the ``rocket-rebalance`` command as a user does: a separate process, its output and exit status."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

RunCli = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def run_cli() -> RunCli:
    def run(*args: str | Path, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "rocket_rebalance", *map(str, args)],
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"exit {done.returncode}: {done.stderr}")
        return done

    return run


@pytest.fixture
def route_file(tmp_path: Path) -> Path:
    path = tmp_path / "route.json"
    path.write_text(
        '{"queueDatas": [\n'
        '  {"brokerName": "broker-a", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6},\n'
        '  {"brokerName": "broker-b", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}\n'
        "]}\n",
        encoding="utf-8",
    )
    return path
