"""The documented programs run as a user runs them: each program in ``examples/`` (which docs/examples.md includes),
and the README's ten-line consumer, as its own process against a real stub process with messages waiting, to its
end (exit 0), saying what it consumed. The docs build type-checks every other snippet (docs/_ext/snippets.py)."""

from __future__ import annotations

import os
import re
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


def readme_consumer() -> str:
    """The README's consumer in ten lines: its first python block (docs/install.md shows the same program)."""
    found = re.search(r"```python\n(.*?)```", (REPO_ROOT / "README.md").read_text(encoding="utf-8"), re.DOTALL)
    assert found is not None, "README.md has no python block"
    return found[1]


def test_readme_consumer(address: str, tmp_path: Path) -> None:
    code = readme_consumer()
    assert code.count('"127.0.0.1:9876"') == 1, "the README's consumer no longer names 127.0.0.1:9876"
    script = tmp_path / "readme_consumer.py"
    script.write_text(code.replace('"127.0.0.1:9876"', repr(address)), encoding="utf-8")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # each printed message reaches us as it is printed
    with (
        (tmp_path / "stderr").open("w") as errors,
        subprocess.Popen(
            [sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, env=env
        ) as process,
    ):
        assert process.stdout is not None
        # Listener threads print at once, so their lines may interleave: count the topic's name, which each print
        # writes whole. The program waits for Enter; pytest's timeout bounds a consumer that gets nothing.
        seen = b""
        while seen.count(b"TopicTest") < 16:
            chunk = os.read(process.stdout.fileno(), 4096)
            if not chunk:
                break
            seen += chunk
        rest, _ = process.communicate(b"\n", timeout=120)  # Enter: the with block ends and the consumer shuts down
    assert process.returncode == 0, (tmp_path / "stderr").read_text()[-2000:]
    assert (seen + rest).count(b"TopicTest") == 16, (seen + rest).decode(errors="replace")
