"""Queue locks for orderly consumption: one owner per (group, queue), expiry, renewal, release."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from nameserver_stub.clock import ManualClock
from nameserver_stub.server import StubServer
from rocket_rebalance._proto.v1 import broker_pb2
from tests.stub.conftest import StartStub
from tests.stub.harness import Listener, StubClients, connect_clients, consumer_data, heartbeat, lock, unlock


@pytest.fixture
def clocked(start_stub: StartStub, manual_clock: ManualClock) -> StubServer:
    return start_stub(clock=manual_clock, lock_expiry=60.0, client_expiry=120.0, sweep_interval=3600.0)


@pytest.fixture
def cstub(clocked: StubServer) -> Iterator[StubClients]:
    with connect_clients(clocked.address) as clients:
        yield clients


def test_one_owner_per_group_and_queue(stub: StubClients) -> None:
    assert lock(stub, "broker-a", "G1", "c1", 0, 1) == [0, 1]
    assert lock(stub, "broker-a", "G1", "c2", 1, 2) == [2]
    assert lock(stub, "broker-a", "G2", "c2", 1) == [1]  # another group locks the same queue independently
    assert lock(stub, "broker-b", "G1", "c2", 0) == [0]  # and queues of another broker are other queues
    assert lock(stub, "broker-a", "G1", "c1", 0, 1, 2) == [0, 1]  # renewing its own, not taking c2's


def test_unlock_releases_only_own_locks(stub: StubClients) -> None:
    assert lock(stub, "broker-a", "G1", "c1", 0, 1) == [0, 1]
    assert unlock(stub, "broker-a", "G1", "c2", 0, 1) == []
    assert lock(stub, "broker-a", "G1", "c2", 0) == []
    assert unlock(stub, "broker-a", "G1", "c1", 0, 3) == [0]
    assert lock(stub, "broker-a", "G1", "c2", 0, 1) == [0]


def test_locks_expire_unless_renewed(cstub: StubClients, manual_clock: ManualClock) -> None:
    assert lock(cstub, "broker-a", "G1", "c1", 0, 1) == [0, 1]
    manual_clock.advance(30)
    assert lock(cstub, "broker-a", "G1", "c1", 1) == [1]  # renewed: lives until t=90
    manual_clock.advance(29.999)
    assert lock(cstub, "broker-a", "G1", "c2", 0, 1) == []
    manual_clock.advance(0.001)  # t=60: queue 0's lock (granted at t=0) has expired
    assert lock(cstub, "broker-a", "G1", "c2", 0, 1) == [0]
    manual_clock.advance(30)  # t=90: queue 1's renewed lock expires too
    assert lock(cstub, "broker-a", "G1", "c2", 1) == [1]


def test_leaving_releases_locks(cstub: StubClients) -> None:
    heartbeat(cstub, "broker-a", "c1", consumer_data("G1", "TopicTest"), consumer_data("G2", "TopicTest"))
    assert lock(cstub, "broker-a", "G1", "c1", 0) == [0]
    assert lock(cstub, "broker-a", "G2", "c1", 0) == [0]
    cstub.broker.UnregisterClient(
        broker_pb2.UnregisterClientRequest(broker_name="broker-a", client_id="c1", consumer_group="G1")
    )
    assert lock(cstub, "broker-a", "G1", "c2", 0) == [0]
    assert lock(cstub, "broker-a", "G2", "c2", 0) == []  # still in G2, still holding


def test_closing_the_stream_releases_locks(cstub: StubClients) -> None:
    listener = Listener(cstub, "broker-a", "c1")
    heartbeat(cstub, "broker-a", "c1", consumer_data("G1", "TopicTest"))
    assert listener.next() == "G1"
    assert lock(cstub, "broker-a", "G1", "c1", 2) == [2]
    listener.close()
    for _ in range(1000):  # the server sees the cancellation shortly after; bounded wait
        if lock(cstub, "broker-a", "G1", "c2", 2) == [2]:
            break
    assert lock(cstub, "broker-a", "G1", "c2", 2) == [2]


def test_client_expiry_releases_live_locks(start_stub: StartStub, manual_clock: ManualClock) -> None:
    server = start_stub(clock=manual_clock, lock_expiry=60.0, client_expiry=30.0, sweep_interval=3600.0)
    with connect_clients(server.address) as stub:
        heartbeat(stub, "broker-a", "c1", consumer_data("G1", "TopicTest"))
        assert lock(stub, "broker-a", "G1", "c1", 3) == [3]
        manual_clock.advance(31)
        assert lock(stub, "broker-a", "G1", "c2", 3) == []  # the lock itself lives until t=60
        assert server.cluster.sweep() == 1  # c1 expired from G1 ...
        assert lock(stub, "broker-a", "G1", "c2", 3) == [3]  # ... and its lock went with it
