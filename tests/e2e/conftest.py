"""End-to-end fixtures: a real stub process and real consumer processes (see lab/stub_cluster.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from rocket_rebalance._proto.v1 import admin_pb2, admin_pb2_grpc
from rocket_rebalance.lab.stub_cluster import LocalCluster

APIS = ("push", "async-push", "pull", "async-pull")
"""``consume --api``: the four consumers, which must pass the same end-to-end checks."""


@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[LocalCluster]:
    """A stub process and a group of ``consume`` processes; parametrize it indirectly with an API of :data:`APIS`
    to run every consumer of the test as that kind (the default: the threaded push consumer)."""
    api = getattr(request, "param", "push")
    # heartbeats well within the stub's client expiry (10 s here, 120 s as a broker's), or a live member would drop
    # off the member lists between heartbeats and a peer's dead-holder release (core rule L9) would free its locks
    intervals = ("--rebalance-interval", "2", "--persist-interval", "0.5", "--heartbeat-interval", "3")
    consumer_args = (*intervals, "--api", api)
    with LocalCluster(
        tmp_path, stub_args=["--enable-faults", "--client-expiry", "10"], consumer_args=consumer_args
    ) as running:
        yield running


def inject(address: str, broker: str, kind: int, client_id: str = "") -> None:
    """Turn on a fault at one broker of the stub (admin RPC, allowed by --enable-faults)."""
    with grpc.insecure_channel(address) as channel:
        admin_pb2_grpc.AdminStub(channel).InjectFault(
            admin_pb2.InjectFaultRequest(broker_name=broker, fault=admin_pb2.Fault(kind=kind, client_id=client_id)),
            timeout=5,
        )
