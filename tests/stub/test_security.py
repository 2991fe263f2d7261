"""Token, TLS and the health service."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2

from nameserver_stub.auth import bearer
from nameserver_stub.server import SERVICE_NAMES
from rocket_rebalance._proto.v1 import admin_pb2, broker_pb2, namesrv_pb2
from tests.stub.conftest import StartStub
from tests.stub.harness import Listener, StubClients, connect_clients, consumer_data, consumer_ids, heartbeat, status_of


def test_health_reports_every_service(stub: StubClients) -> None:
    for name in ("", *SERVICE_NAMES):
        response = stub.health.Check(health_pb2.HealthCheckRequest(service=name), timeout=10)
        assert response.status == health_pb2.HealthCheckResponse.SERVING, name
    code, _ = status_of(stub.health.Check, health_pb2.HealthCheckRequest(service="no.such.Service"))
    assert code is grpc.StatusCode.NOT_FOUND


def test_token_is_checked_on_every_call(start_stub: StartStub) -> None:
    server = start_stub(token="s3cret")
    with connect_clients(server.address) as stub:
        calls = [
            (stub.namesrv.GetRouteInfoByTopic, namesrv_pb2.GetRouteInfoByTopicRequest(topic="TopicTest")),
            (stub.broker.HeartBeat, broker_pb2.HeartbeatRequest(broker_name="broker-a", client_id="c1")),
            (stub.admin.GetBrokerClusterInfo, admin_pb2.GetBrokerClusterInfoRequest()),
            (stub.health.Check, health_pb2.HealthCheckRequest()),
        ]
        for call, request in calls:
            for metadata in (None, bearer("wrong"), (("authorization", "s3cret"),)):
                code, details = status_of(call, request, metadata=metadata)
                assert code is grpc.StatusCode.UNAUTHENTICATED and "token" in details
            call(request, metadata=bearer("s3cret"), timeout=10)  # and with the token it works
        code, _ = status_of(
            lambda **k: list(
                stub.broker.Connect(broker_pb2.ConnectRequest(broker_name="broker-a", client_id="c1"), **k)
            )
        )
        assert code is grpc.StatusCode.UNAUTHENTICATED
        unknown = stub.channel.unary_unary("/rocket_rebalance.v1.Broker/NoSuchMethod")
        code, _ = status_of(unknown, b"")
        assert code is grpc.StatusCode.UNAUTHENTICATED
        listener = Listener(stub, "broker-a", "c1", metadata=bearer("s3cret"))
        heartbeat(stub, "broker-a", "c1", consumer_data("G1", "TopicTest"), metadata=bearer("s3cret"))
        assert listener.next() == "G1"
        listener.close()


def make_certificate(directory: Path) -> tuple[Path, Path]:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_tls(start_stub: StartStub, tmp_path: Path) -> None:
    cert, key = make_certificate(tmp_path)
    server = start_stub(tls_cert=cert, tls_key=key, token="t")
    credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
    with connect_clients(server.address, credentials=credentials) as stub:
        heartbeat(stub, "broker-a", "c1", consumer_data("G1", "TopicTest"), metadata=bearer("t"))
        assert stub.broker.GetConsumerListByGroup(
            broker_pb2.GetConsumerListByGroupRequest(broker_name="broker-a", consumer_group="G1"),
            metadata=bearer("t"),
            timeout=10,
        ).consumer_id_list == ["c1"]
    with connect_clients(server.address) as plain:  # a plaintext client cannot talk to a TLS server
        code, _ = status_of(plain.health.Check, health_pb2.HealthCheckRequest())
        assert code is grpc.StatusCode.UNAVAILABLE


def test_without_token_config_no_metadata_is_needed(stub: StubClients) -> None:
    heartbeat(stub, "broker-a", "c1", consumer_data("G1", "TopicTest"))
    assert consumer_ids(stub, "broker-a", "G1") == ["c1"]
