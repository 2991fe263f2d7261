"""End-to-end fixtures: a real stub process and real consumer processes (see lab/stub_cluster.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from rocket_rebalance._proto.v1 import admin_pb2, admin_pb2_grpc
from rocket_rebalance.lab.stub_cluster import LocalCluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path, stub_args=["--enable-faults", "--client-expiry", "10"]) as running:
        yield running


def inject(address: str, broker: str, kind: int, client_id: str = "") -> None:
    """Turn on a fault at one broker of the stub (admin RPC, allowed by --enable-faults)."""
    with grpc.insecure_channel(address) as channel:
        admin_pb2_grpc.AdminStub(channel).InjectFault(
            admin_pb2.InjectFaultRequest(broker_name=broker, fault=admin_pb2.Fault(kind=kind, client_id=client_id)),
            timeout=5,
        )
