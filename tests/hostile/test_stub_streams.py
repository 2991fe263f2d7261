"""Streams and long polls that nobody reads must not take every worker thread: past a bound they are refused
with RESOURCE_EXHAUSTED naming the limit, and plain calls keep working. Also: an unread stream's mailbox stays
bounded however much its groups churn, and loses no group.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2
from hypothesis import given, settings
from hypothesis import strategies as st

from nameserver_stub.connections import MAX_PENDING, Connection
from rocket_rebalance._proto.v1 import broker_pb2
from tests.stub.conftest import StartStub, start_stub
from tests.stub.harness import WAIT, connect_clients, consumer_data, consumer_ids, heartbeat

__all__ = ["start_stub"]

EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED


def open_stream(clients: Any, broker: str, client_id: str) -> tuple[Any, grpc.StatusCode, str]:
    """Open a Connect stream and read only its first message: (call, OK or the refusal's code, details)."""
    call = clients.broker.Connect(broker_pb2.ConnectRequest(broker_name=broker, client_id=client_id), timeout=120)
    try:
        first = next(call)
    except grpc.RpcError as error:
        return call, error.code(), error.details() or ""
    assert first.HasField("connected")
    return call, grpc.StatusCode.OK, ""


@pytest.fixture
def calls() -> Iterator[list[Any]]:
    opened: list[Any] = []
    yield opened
    for call in opened:
        call.cancel()


def test_unread_streams_beyond_the_limit_are_refused_and_plain_calls_still_work(
    start_stub: StartStub, calls: list[Any]
) -> None:
    server = start_stub(max_workers=8)  # the default stream limit is half the pool: 4
    with connect_clients(server.address) as stub:
        results = []
        for number in range(12):  # more streams than the pool has threads
            call, code, details = open_stream(stub, "broker-a", f"c{number}")
            calls.append(call)
            results.append((code, details))
        assert [code for code, _ in results] == [grpc.StatusCode.OK] * 4 + [EXHAUSTED] * 8
        assert all("allows 4 at once" in details and "--max-streams" in details for _, details in results[4:])
        # plain calls are served while the streams sit at the limit (the deadline is generous, not a timing check)
        heartbeat(stub, "broker-a", "plain", consumer_data("G1", "TopicTest"))
        assert consumer_ids(stub, "broker-a", "G1") == ["plain"]
        assert stub.health.Check(health_pb2.HealthCheckRequest(), timeout=WAIT).status == 1


def test_health_watch_streams_count_too(start_stub: StartStub, calls: list[Any]) -> None:
    server = start_stub(max_workers=8, max_streams=2)
    with connect_clients(server.address) as stub:
        codes = []
        for _ in range(4):
            call = stub.health.Watch(health_pb2.HealthCheckRequest(), timeout=120)
            calls.append(call)
            try:
                next(call)
                codes.append(grpc.StatusCode.OK)
            except grpc.RpcError as error:
                codes.append(error.code())
        assert codes == [grpc.StatusCode.OK] * 2 + [EXHAUSTED] * 2
        assert stub.health.Check(health_pb2.HealthCheckRequest(), timeout=WAIT).status == 1


def test_a_closed_stream_frees_its_slot(start_stub: StartStub, calls: list[Any]) -> None:
    server = start_stub(max_workers=8, max_streams=1)
    with connect_clients(server.address) as stub:
        first, code, _ = open_stream(stub, "broker-a", "c1")
        assert code is grpc.StatusCode.OK
        calls.append(first)
        _, code, _ = open_stream(stub, "broker-a", "c2")
        assert code is EXHAUSTED
        first.cancel()
        deadline = time.monotonic() + WAIT
        while server.stream_slots.open and time.monotonic() < deadline:
            time.sleep(0.02)
        second, code, _ = open_stream(stub, "broker-a", "c2")
        calls.append(second)
        assert code is grpc.StatusCode.OK


def test_one_client_cannot_take_every_stream(start_stub: StartStub, calls: list[Any]) -> None:
    server = start_stub(max_workers=64, max_streams_per_client=2)
    with connect_clients(server.address) as stub:
        codes = []
        for _ in range(3):
            call, code, details = open_stream(stub, "broker-a", "greedy")
            calls.append(call)
            codes.append(code)
        assert codes == [grpc.StatusCode.OK, grpc.StatusCode.OK, EXHAUSTED]
        assert "already has 2 open streams at broker 'broker-a'" in details and "--max-streams-per-client" in details
        for client_id, broker in (("other", "broker-a"), ("greedy", "broker-b")):
            call, code, _ = open_stream(stub, broker, client_id)
            calls.append(call)
            assert code is grpc.StatusCode.OK


def test_parked_long_polls_are_bounded(start_stub: StartStub) -> None:
    server = start_stub(max_workers=8, max_parked_pulls=2, max_long_poll=120.0)

    def long_poll(stub: Any, queue_id: int, wait_ms: int = 100_000) -> Any:
        request = broker_pb2.PullMessageRequest(
            broker_name="broker-a",
            consumer_group="G1",
            topic="TopicTest",
            queue_id=queue_id,
            queue_offset=0,
            max_wait_ms=wait_ms,
        )
        return stub.broker.PullMessage.future(request, timeout=120)

    with connect_clients(server.address) as stub:
        parked = [long_poll(stub, 0), long_poll(stub, 1)]
        try:
            deadline = time.monotonic() + WAIT
            while server.cluster.parked_pulls() < 2 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert server.cluster.parked_pulls() == 2
            refused = long_poll(stub, 2)
            with pytest.raises(grpc.RpcError) as raised:
                refused.result(timeout=WAIT)
            assert raised.value.code() is EXHAUSTED
            assert "2 pulls are already waiting" in (raised.value.details() or "")
            assert "--max-parked-pulls" in (raised.value.details() or "")
            answered = long_poll(stub, 2, wait_ms=0).result(timeout=WAIT)  # a pull that needs no wait is served
            assert broker_pb2.PullStatus.Name(answered.status) == "NO_NEW_MSG"
        finally:
            for future in parked:
                future.cancel()


def test_stream_and_poll_limits_must_leave_workers_for_plain_calls(start_stub: StartStub) -> None:
    from nameserver_stub.config import ConfigError

    with pytest.raises(ConfigError, match="must leave a quarter of the 8 worker threads"):
        start_stub(max_workers=8, max_streams=6)
    with pytest.raises(ConfigError, match="max_parked_pulls must be at least 1"):
        start_stub(max_parked_pulls=0)


@settings(max_examples=60, deadline=None)
@given(
    groups=st.lists(st.sampled_from([f"G{n}" for n in range(6)]), min_size=1, max_size=40),
    repeat=st.integers(1, 3 * MAX_PENDING),
)
def test_an_unread_mailbox_stays_bounded_and_loses_no_group(groups: list[str], repeat: int) -> None:
    connection = Connection("broker-a", "c1")
    for _ in range(repeat // len(groups) + 1):
        for group in groups:
            connection.push(group)
    assert connection.pending <= MAX_PENDING + len(set(groups))
    delivered = []
    while connection.pending:
        delivered.append(connection.next())
    assert set(delivered) == set(groups)
