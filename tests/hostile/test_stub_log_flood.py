"""A flood of junk must not flood the log: junk bytes are one INVALID_ARGUMENT each (not gRPC's INTERNAL and a
traceback), and the CLI logs one line per kind per interval, counting the rest. Also: a token is accepted at start
exactly when gRPC can carry it, and then it works.
"""

from __future__ import annotations

import logging
import signal

import grpc
from grpc_health.v1 import health_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nameserver_stub.auth import bearer
from nameserver_stub.config import ConfigError, check_token
from nameserver_stub.logs import RepeatFilter
from tests.stub.conftest import SpawnStub, StartStub, spawn_stub_process, start_stub, stub, stub_server
from tests.stub.harness import StubClients, connect_clients, status_of

__all__ = ["spawn_stub_process", "start_stub", "stub", "stub_server"]

JUNK = b"\xff\xff\xff\xff"
FLOOD = 300


def test_junk_bytes_are_invalid_argument_naming_the_method(stub: StubClients) -> None:
    for method in ("/rocket_rebalance.v1.Broker/HeartBeat", "/grpc.health.v1.Health/Check"):
        code, details = status_of(stub.channel.unary_unary(method), JUNK)
        assert code is grpc.StatusCode.INVALID_ARGUMENT
        assert f"the request to {method} is not a valid protobuf message" in details
    code, details = status_of(
        lambda **k: list(stub.channel.unary_stream("/rocket_rebalance.v1.Broker/Connect")(JUNK, **k))
    )
    assert code is grpc.StatusCode.INVALID_ARGUMENT


def test_a_flood_of_junk_writes_a_bounded_log(spawn_stub_process: SpawnStub) -> None:
    process = spawn_stub_process(None, "--token", "tok", "--log-repeat-interval", "3600")
    with connect_clients(process.address) as stub:
        heartbeat = stub.channel.unary_unary("/rocket_rebalance.v1.Broker/HeartBeat")
        for _ in range(FLOOD):
            code, _ = status_of(heartbeat, JUNK, metadata=bearer("tok"))
            assert code is grpc.StatusCode.INVALID_ARGUMENT
            code, _ = status_of(heartbeat, JUNK, metadata=bearer("wrong"))
            assert code is grpc.StatusCode.UNAUTHENTICATED
    assert process.stop(signal.SIGTERM) == 0
    lines = process.stderr().splitlines()
    assert len(lines) <= 8, "\n".join(lines)  # serving, 2 kinds, their 2 counts at stop, stopped
    assert not any("Traceback" in line for line in lines)
    counts = [line for line in lines if "more lines like" in line]
    first = [line for line in lines if line not in counts]
    assert sum("refused an undecodable request to /rocket_rebalance.v1.Broker/HeartBeat" in line for line in first) == 1
    assert sum("missing or wrong token" in line for line in first) == 1
    assert len(counts) == 2 and all(f"{FLOOD - 1} more lines like" in line for line in counts), counts


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_next_line_let_through_counts_what_was_held_back(caplog: object) -> None:
    clock = FakeClock()
    repeats = RepeatFilter(5.0, clock)
    logger = logging.getLogger("test_stub_repeat_filter")
    records: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    handler = Collect()
    handler.addFilter(repeats)
    logger.addHandler(handler)
    logger.propagate = False
    try:
        for peer in range(10):
            logger.warning("refused junk from %s", peer)
        logger.warning("another kind")
        clock.now = 5.0
        logger.warning("refused junk from %s", "late")
        logger.warning("refused junk from %s", "later")
        repeats.flush(logger)
    finally:
        logger.removeHandler(handler)
    assert records == [
        "refused junk from 0",
        "another kind",
        "refused junk from late (9 more like this suppressed)",
        "1 more lines like 'refused junk from %s' (test_stub_repeat_filter) were suppressed",
    ]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(token=st.text(min_size=1, max_size=12))
def test_a_token_is_accepted_exactly_when_grpc_can_carry_it(start_stub: StartStub, token: str) -> None:
    printable = all(" " <= char <= "~" for char in token)
    try:
        check_token(token)
    except ConfigError as error:
        assert not printable and "not printable ASCII" in str(error)
        return
    assert printable
    server = start_stub(token=token)
    try:
        with connect_clients(server.address) as clients:
            answer = clients.health.Check(health_pb2.HealthCheckRequest(), metadata=bearer(token), timeout=30)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        server.stop(grace=0.5)
