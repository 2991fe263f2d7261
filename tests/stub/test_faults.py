"""Fault injection: disabled by default; split views, lost and late notifications, a broker down and up."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from rocket_rebalance._proto.v1 import admin_pb2, broker_pb2
from tests.stub.conftest import StartStub
from tests.stub.harness import (
    Listener,
    StubClients,
    commit,
    connect_clients,
    consumer_data,
    consumer_ids,
    heartbeat,
    lock,
    query,
    send,
    status_of,
)

DROP_HEARTBEATS = admin_pb2.DROP_HEARTBEATS
DROP_NOTIFICATIONS = admin_pb2.DROP_NOTIFICATIONS
DELAY_NOTIFICATIONS = admin_pb2.DELAY_NOTIFICATIONS


@pytest.fixture
def listeners() -> Iterator[list[Listener]]:
    opened: list[Listener] = []
    yield opened
    for listener in opened:
        listener.close()


def inject(stub: StubClients, broker: str, kind: int, client_id: str = "", delay_ms: int = 0) -> list[admin_pb2.Fault]:
    response = stub.admin.InjectFault(
        admin_pb2.InjectFaultRequest(
            broker_name=broker, fault=admin_pb2.Fault(kind=kind, client_id=client_id, delay_ms=delay_ms)
        )
    )
    return list(response.faults)


def test_fault_injection_is_off_unless_enabled(start_stub: StartStub) -> None:
    server = start_stub(enable_faults=False)
    with connect_clients(server.address) as stub:
        for call, request in [
            (stub.admin.SetBrokerState, admin_pb2.SetBrokerStateRequest(broker_name="broker-a", up=False)),
            (
                stub.admin.InjectFault,
                admin_pb2.InjectFaultRequest(broker_name="broker-a", fault=admin_pb2.Fault(kind=DROP_HEARTBEATS)),
            ),
            (stub.admin.ClearFaults, admin_pb2.ClearFaultsRequest()),
        ]:
            code, details = status_of(call, request)
            assert code is grpc.StatusCode.FAILED_PRECONDITION and "--enable-faults" in details
        heartbeat(stub, "broker-a", "c1", consumer_data("G1", "TopicTest"))
        assert consumer_ids(stub, "broker-a", "G1") == ["c1"]


def test_dropped_heartbeats_give_split_views(stub: StubClients) -> None:
    assert [(f.kind, f.client_id) for f in inject(stub, "broker-b", DROP_HEARTBEATS, "c2")] == [(DROP_HEARTBEATS, "c2")]
    for broker in ("broker-a", "broker-b"):
        heartbeat(stub, broker, "c1", consumer_data("G1", "TopicTest"))
        heartbeat(stub, broker, "c2", consumer_data("G1", "TopicTest"))  # answered OK at both
    assert consumer_ids(stub, "broker-a", "G1") == ["c1", "c2"]
    assert consumer_ids(stub, "broker-b", "G1") == ["c1"]
    stub.admin.ClearFaults(admin_pb2.ClearFaultsRequest(broker_name="broker-b"))
    heartbeat(stub, "broker-b", "c2", consumer_data("G1", "TopicTest"))
    assert consumer_ids(stub, "broker-b", "G1") == ["c1", "c2"]


def test_dropped_notifications(stub: StubClients, listeners: list[Listener]) -> None:
    deaf = Listener(stub, "broker-a", "deaf")
    hearing = Listener(stub, "broker-a", "hearing")
    listeners += [deaf, hearing]
    inject(stub, "broker-a", DROP_NOTIFICATIONS, "deaf")
    heartbeat(stub, "broker-a", "deaf", consumer_data("G1", "TopicTest"))
    heartbeat(stub, "broker-a", "hearing", consumer_data("G1", "TopicTest"))
    assert hearing.next() == "G1"
    heartbeat(stub, "broker-a", "third", consumer_data("G1", "TopicTest"))
    assert hearing.next() == "G1"
    stub.admin.ClearFaults(admin_pb2.ClearFaultsRequest())
    heartbeat(stub, "broker-a", "deaf", consumer_data("G2", "TopicTest"))
    assert deaf.next() == "G2"  # the first one it gets: the three G1 changes were dropped, not queued


def test_delayed_notifications_are_held_until_released(stub: StubClients, listeners: list[Listener]) -> None:
    late = Listener(stub, "broker-a", "late")
    prompt = Listener(stub, "broker-a", "prompt")
    listeners += [late, prompt]
    inject(stub, "broker-a", DELAY_NOTIFICATIONS, "late", delay_ms=3_600_000)
    heartbeat(stub, "broker-a", "late", consumer_data("G1", "TopicTest"))
    heartbeat(stub, "broker-a", "prompt", consumer_data("G1", "TopicTest"))
    assert prompt.next() == "G1"
    assert late.pending() == []  # held for an hour, so certainly not here yet
    stub.admin.ClearFaults(admin_pb2.ClearFaultsRequest(broker_name="broker-a"))
    assert [late.next(), late.next()] == ["G1", "G1"]  # both held notifications, now


def test_short_delays_deliver_in_order(stub: StubClients, listeners: list[Listener]) -> None:
    late = Listener(stub, "broker-a", "late")
    listeners.append(late)
    inject(stub, "broker-a", DELAY_NOTIFICATIONS, delay_ms=50)  # every client
    heartbeat(stub, "broker-a", "late", consumer_data("G1", "TopicTest"))
    heartbeat(stub, "broker-a", "late", consumer_data("G2", "TopicTest"))
    assert [late.next(), late.next()] == ["G1", "G2"]


def test_fault_arguments(stub: StubClients) -> None:
    code, details = status_of(stub.admin.InjectFault, admin_pb2.InjectFaultRequest(broker_name="broker-a"))
    assert code is grpc.StatusCode.INVALID_ARGUMENT and "fault.kind 0" in details
    code, details = status_of(
        stub.admin.InjectFault,
        admin_pb2.InjectFaultRequest(broker_name="broker-a", fault=admin_pb2.Fault(kind=DROP_HEARTBEATS, delay_ms=5)),
    )
    assert code is grpc.StatusCode.INVALID_ARGUMENT and "only for DELAY_NOTIFICATIONS" in details
    code, details = status_of(
        stub.admin.InjectFault,
        admin_pb2.InjectFaultRequest(broker_name="nope", fault=admin_pb2.Fault(kind=DROP_HEARTBEATS)),
    )
    assert code is grpc.StatusCode.NOT_FOUND
    faults = inject(stub, "broker-a", DELAY_NOTIFICATIONS, "x", 10)
    faults = inject(stub, "broker-a", DELAY_NOTIFICATIONS, "x", 20)  # replaces the first
    assert [(f.kind, f.client_id, f.delay_ms) for f in faults] == [(DELAY_NOTIFICATIONS, "x", 20)]


def test_broker_down_closes_streams_and_forgets_memory_but_not_disk(
    stub: StubClients, listeners: list[Listener]
) -> None:
    on_b = Listener(stub, "broker-b", "c1")
    on_a = Listener(stub, "broker-a", "c1")
    listeners += [on_a, on_b]
    for broker, listener in (("broker-a", on_a), ("broker-b", on_b)):
        heartbeat(stub, broker, "c1", consumer_data("G1", "TopicTest"))
        assert listener.next() == "G1"
    send(stub, "broker-b", "TopicTest", b"kept", queue_id=0)
    commit(stub, "broker-b", "G1", {("TopicTest", 0): 1})
    assert lock(stub, "broker-b", "G1", "c1", 0) == [0]

    stub.admin.SetBrokerState(admin_pb2.SetBrokerStateRequest(broker_name="broker-b", up=False))
    assert on_b.wait_ended() is grpc.StatusCode.UNAVAILABLE
    code, details = status_of(
        stub.broker.GetConsumerListByGroup,
        broker_pb2.GetConsumerListByGroupRequest(broker_name="broker-b", consumer_group="G1"),
    )
    assert code is grpc.StatusCode.UNAVAILABLE and "broker 'broker-b' is down" in details
    code, _ = status_of(
        lambda **k: list(stub.broker.Connect(broker_pb2.ConnectRequest(broker_name="broker-b", client_id="c9"), **k))
    )
    assert code is grpc.StatusCode.UNAVAILABLE
    assert consumer_ids(stub, "broker-a", "G1") == ["c1"]  # the other broker is untouched
    assert on_a.pending() == []

    stub.admin.SetBrokerState(admin_pb2.SetBrokerStateRequest(broker_name="broker-b", up=True))
    assert consumer_ids(stub, "broker-b", "G1") == []  # memory was lost
    assert lock(stub, "broker-b", "G1", "c2", 0) == [0]  # so were the locks
    assert query(stub, "broker-b", "G1", ("TopicTest", 0)) == [1]  # the disk was not
    assert (
        stub.broker.GetMaxOffset(
            broker_pb2.GetMaxOffsetRequest(broker_name="broker-b", topic="TopicTest", queue_id=0)
        ).offset
        == 1
    )
