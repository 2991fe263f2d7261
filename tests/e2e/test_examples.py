"""The README's examples run as a user runs them: each program in ``examples/`` as its own process against a real
stub process with messages waiting, to its end (exit 0), saying what it consumed."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocket_rebalance.runtime.transport import GRPC_SCHEME
from tests.runtime.test_consumer import produce
from tests.stub.harness import REPO_ROOT, spawn_stub

EXAMPLES = REPO_ROOT / "examples"
pytestmark = pytest.mark.e2e


def run_example(name: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT
    )
    assert done.returncode == 0, f"{name} exited {done.returncode}: {done.stderr[-2000:]}"
    return done.stdout


@pytest.fixture
def address(tmp_path: Path) -> Iterator[str]:
    stub = spawn_stub(tmp_path / "stub")
    try:
        produce(GRPC_SCHEME + stub.address, 2)  # 16 messages in the 8 queues of TopicTest
        yield GRPC_SCHEME + stub.address
    finally:
        stub.stop()


def test_push_consumer(address: str) -> None:
    out = run_example("push_consumer.py", address, "--count", "16")
    assert out.count(" offset ") == 16 and out.rstrip().endswith("consumed 16 messages")


def test_pull_loop(address: str) -> None:
    out = run_example("pull_loop.py", address, "--count", "16")
    assert out.count(" offset ") == 16 and "assigned [" in out and "revoked [" in out
    assert out.rstrip().endswith("polled and committed 16 messages")


def test_asyncio_consumer(address: str) -> None:
    out = run_example("asyncio_consumer.py", address, "--count", "16")
    assert out.count("pulled ") == 16 and "push: assigned" in out and "pull: revoked" in out
    assert out.rstrip().endswith("push consumer consumed 16, pull consumer polled 16")


def test_custom_strategy(address: str) -> None:
    assert "keeps PARTITION" in run_example("custom_strategy.py", "--check")
    out = run_example("custom_strategy.py", address, "--count", "16")
    assert out.rstrip().endswith("consumed 16 messages; owned 8 queues of TopicTest by RENDEZVOUS")
