"""Running the ``rocket-rebalance`` command as a user does: a separate process, its output and exit status."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from rocket_rebalance.lab.stub_cluster import StubProcess
from rocket_rebalance.model import ConsumeFromWhere, MessageModel
from rocket_rebalance.runtime.transport import GRPC_SCHEME, GroupRegistration
from rocket_rebalance.runtime.transport.grpc import GrpcTransport

RunCli = Callable[..., subprocess.CompletedProcess[str]]


@contextmanager
def stub_with_members(data_dir: Path, topic_spec: str, group: str, topic: str) -> Iterator[str]:
    """A stub process serving ``topic_spec`` where ``group`` has two members on ``topic`` at both brokers (what the
    preview commands read), stopped at the end; yields its address."""
    process = StubProcess(data_dir, [topic_spec])
    address = process.start()
    transport = GrpcTransport(address)
    registration = GroupRegistration(
        group, True, MessageModel.CLUSTERING, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, (topic,)
    )
    for client in ("10.0.0.2@2", "10.0.0.1@1"):
        for broker in ("broker-a", "broker-b"):
            transport.heartbeat(broker, client, registration)
    transport.close()
    try:
        yield GRPC_SCHEME + address
    finally:
        process.stop()


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
