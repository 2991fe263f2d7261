"""TLS on the remoting wire, against scripted servers on loopback with certificates made by the ``openssl``
command: big answers arrive whole through the one reader, every misconfiguration is one line saying what to
change, and bad files fail at construction. The real TLS-enforcing broker is in ``tests/rocketmq/test_tls.py``."""

from __future__ import annotations

import logging
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocket_rebalance.lab.certs import LabCertificates, make_certificates
from rocket_rebalance.model import MessageQueue, TlsSettings
from rocket_rebalance.remoting import RemotingCommand, RequestCode, ResponseCode, response_to
from rocket_rebalance.remoting.message import StoredMessage, encode_stored_message
from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.transport import GRPC_SCHEME, PullResult, PullStatus, TransportError
from rocket_rebalance.runtime.transport import tls as tls_module
from rocket_rebalance.runtime.transport.connection import split_host_port
from rocket_rebalance.runtime.transport.remoting import RemotingTransport
from rocket_rebalance.runtime.transport.wire import open_transport
from tests.runtime.test_acl_transport import members
from tests.runtime.test_consumer import FAST, wait_for
from tests.runtime.test_remoting_transport import broker_like
from tests.scripted_server import Handler, ScriptedServer

MQ = MessageQueue("TopicT", "broker-a", 0)
MANY = 3000  # messages in one pull answer: about 3 MB, dozens of TLS records and many socket reads


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> LabCertificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


def server_context(certs: LabCertificates, client_ca: Path | None = None) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs.server_cert, certs.server_key)
    if client_ca is not None:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(client_ca)
    return context


@pytest.fixture
def tls_server(certs: LabCertificates) -> Iterator[Callable[..., ScriptedServer]]:
    servers: list[ScriptedServer] = []

    def start(handler: Handler, client_ca: Path | None = None) -> ScriptedServer:
        server = ScriptedServer(handler, tls=server_context(certs, client_ca))
        handler.box["address"] = server.address  # type: ignore[attr-defined]
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def _stored(offset: int) -> StoredMessage:
    return StoredMessage("TopicT", 0, offset, offset * 1000, bytes([offset % 251]) * 1000, {"TAGS": "A"})


def many_messages(command: RemotingCommand) -> RemotingCommand | None:
    if command.code == RequestCode.PULL_MESSAGE:
        body = b"".join(encode_stored_message(_stored(offset)) for offset in range(MANY))
        return response_to(command, ResponseCode.SUCCESS, ext={"nextBeginOffset": str(MANY)}, body=body)
    return None


def test_a_large_pull_answer_and_concurrent_calls_arrive_whole_over_tls(
    tls_server: Callable[..., ScriptedServer], certs: LabCertificates
) -> None:
    """Each answer is read by the one reader through the TLS session; a 3 MB pull answer spans many records
    and reads, and calls from several threads interleave their writes on the same session."""
    server = tls_server(broker_like(many_messages))
    transport = RemotingTransport([server.address], timeout=10, tls=TlsSettings(ca_file=str(certs.ca)))
    results: list[PullResult | TransportError] = []
    answered = threading.Event()
    try:
        transport.route("TopicT")
        transport.pull(MQ, "G", 0, 32, 0, lambda r: (results.append(r), answered.set()))
        queues = [[MessageQueue("TopicT", "broker-a", 8 * batch + q) for q in range(8)] for batch in range(8)]
        with ThreadPoolExecutor(8) as pool:
            offsets = list(pool.map(lambda batch: transport.query_offsets("broker-a", "G", batch), queues))
        assert answered.wait(10)
    finally:
        transport.close()
    assert [o for found in offsets for o in found.values()] == list(range(64))  # broker_like: offset = queue ID
    (result,) = results
    assert isinstance(result, PullResult) and result.status == PullStatus.FOUND
    assert [m.queue_offset for m in result.messages] == list(range(MANY))
    assert all(m.body == _stored(m.queue_offset).body for m in result.messages)
    assert server.accepted == 1  # one connection, name server and broker being the same address here


def test_a_certificate_from_another_ca_is_refused_in_one_line(
    tls_server: Callable[..., ScriptedServer], certs: LabCertificates
) -> None:
    server = tls_server(broker_like())
    transport = RemotingTransport([server.address], timeout=5, tls=TlsSettings(ca_file=str(certs.other_ca)))
    try:
        with pytest.raises(TransportError) as raised:
            transport.route("TopicT")
    finally:
        transport.close()
    line = str(raised.value)
    assert line.startswith(f"the name server {server.address}'s certificate did not verify against {certs.other_ca}: ")
    assert "unable to get local issuer certificate" in line and "\n" not in line
    assert raised.value.code == "FAILED_PRECONDITION"


def test_the_system_store_is_used_without_a_ca_file(
    tls_server: Callable[..., ScriptedServer], certs: LabCertificates
) -> None:
    server = tls_server(broker_like())
    transport = RemotingTransport([server.address], timeout=5, tls=TlsSettings())
    try:
        with pytest.raises(TransportError, match="did not verify against the system's trusted certificates"):
            transport.route("TopicT")
    finally:
        transport.close()


def test_tls_verify_false_connects_and_warns_once(
    tls_server: Callable[..., ScriptedServer], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tls_module, "_insecure_warned", threading.Event())
    server = tls_server(broker_like())
    caplog.set_level(logging.WARNING)
    transports = [RemotingTransport([server.address], timeout=5, tls=TlsSettings(verify=False)) for _ in range(2)]
    try:
        assert all(t.route("TopicT").queue_datas for t in transports)
    finally:
        for transport in transports:
            transport.close()
    warnings = [r for r in caplog.records if "without certificate verification" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING


def test_mutual_tls_needs_the_client_certificate(
    tls_server: Callable[..., ScriptedServer], certs: LabCertificates
) -> None:
    server = tls_server(broker_like(), client_ca=certs.ca)
    without = RemotingTransport([server.address], timeout=5, tls=TlsSettings(ca_file=str(certs.ca)))
    with_cert = RemotingTransport(
        [server.address],
        timeout=5,
        tls=TlsSettings(str(certs.ca), str(certs.client_cert), str(certs.client_key)),
    )
    try:
        with pytest.raises(TransportError) as raised:
            without.route("TopicT")  # TLS 1.3: the refusal comes after the handshake, on the first read
        assert with_cert.route("TopicT").queue_datas
    finally:
        without.close()
        with_cert.close()
    assert "\n" not in str(raised.value)


class _Plain:
    """A plaintext server that reads the first bytes and then either closes (as a RocketMQ server enforcing TLS
    does to a plaintext client, and a plaintext one to a TLS client) or answers ``reply``."""

    def __init__(self, reply: bytes = b"") -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.reply = reply
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(4096)
                if self.reply:
                    conn.sendall(self.reply)
                    conn.recv(4096)  # until the client gives up

    def close(self) -> None:
        self.listener.close()


PLAINTEXT_ANSWERS = [
    (b"", "closed the connection during the TLS handshake: it does not seem to speak TLS"),
    (b"\x00\x00\x00\x20\x00\x00\x00\x10{}" + b"\x00" * 40, "answered the TLS handshake in plaintext"),
]
"""What a plaintext server answers a TLS client (nothing, or a remoting frame), and the line that says so."""


@pytest.mark.parametrize(("reply", "expected"), PLAINTEXT_ANSWERS)
def test_a_plaintext_server_is_one_line_when_tls_is_on(reply: bytes, expected: str) -> None:
    server = _Plain(reply)
    transport = RemotingTransport([server.address], timeout=5, tls=TlsSettings(verify=False))
    try:
        with pytest.raises(TransportError, match=expected) as raised:
            transport.route("TopicT")
    finally:
        transport.close()
        server.close()
    assert "\n" not in str(raised.value) and raised.value.code == "FAILED_PRECONDITION"


def test_a_server_closing_a_plaintext_connection_says_to_turn_tls_on() -> None:
    server = _Plain()
    transport = RemotingTransport([server.address], timeout=5)
    try:
        with pytest.raises(TransportError, match=r"it may require TLS .*use --tls, or tls=True") as raised:
            transport.route("TopicT")
    finally:
        transport.close()
        server.close()
    assert "\n" not in str(raised.value)


def test_a_consumer_on_the_wrong_ca_reports_it_through_on_error(
    tls_server: Callable[..., ScriptedServer], certs: LabCertificates
) -> None:
    server = tls_server(broker_like(members))
    errors: list[str] = []
    reported = threading.Event()

    def on_error(kind: str, error: Exception) -> None:
        errors.append(str(error))
        reported.set()

    consumer = PushConsumer(
        server.address,
        "GID_tls",
        topics=["TopicT"],
        listener=lambda batch: None,
        client_id="c1",
        tls_ca_file=certs.other_ca,
        on_error=on_error,
        **FAST,
    )
    consumer.start()
    try:
        assert reported.wait(10)
        wait_for(lambda: not consumer.healthy)
    finally:
        consumer.shutdown()
    assert any(f"certificate did not verify against {certs.other_ca}" in line for line in errors)
    assert all("\n" not in line for line in errors)


def _bad_files(certs: LabCertificates, tmp: Path) -> list[tuple[dict[str, object], str]]:
    not_pem = tmp / "not.pem"
    not_pem.write_text("hello\n")
    return [
        ({"tls_ca_file": tmp / "missing.pem"}, f"TLS CA file {tmp / 'missing.pem'}: no such file"),
        ({"tls_ca_file": not_pem}, f"TLS CA file {not_pem} holds no PEM certificate"),
        ({"tls_cert_file": not_pem, "tls_key_file": certs.client_key}, f"certificate file {not_pem} holds no PEM"),
        ({"tls_cert_file": certs.client_cert, "tls_key_file": not_pem}, f"TLS key file {not_pem} holds no PEM"),
        (
            {"tls_cert_file": certs.client_cert, "tls_key_file": certs.server_key},
            f"TLS key file {certs.server_key} does not match the certificate in {certs.client_cert}",
        ),
        ({"tls_cert_file": certs.client_cert}, f"certificate file {certs.client_cert} holds no private key"),
        ({"tls_key_file": certs.client_key}, "needs its certificate file"),
        ({"tls_ca_file": certs.ca, "tls_verify": False}, "give one or the other"),
    ]


def test_bad_tls_files_fail_the_consumers_construction_in_one_line(certs: LabCertificates, tmp_path: Path) -> None:
    for kwargs, expected in _bad_files(certs, tmp_path):
        with pytest.raises(ValueError) as raised:
            PushConsumer("127.0.0.1:9876", "GID_tls", topics=["TopicT"], **kwargs)  # type: ignore[arg-type]
        assert expected in str(raised.value) and "\n" not in str(raised.value), kwargs


def test_the_file_options_turn_tls_on_and_plain_stays_plain(certs: LabCertificates) -> None:
    plain = PushConsumer("127.0.0.1:9876", "GID_tls", topics=["TopicT"])
    with_ca = PushConsumer("127.0.0.1:9876", "GID_tls", topics=["TopicT"], tls_ca_file=certs.ca)
    try:
        assert plain.transport._tls is None  # type: ignore[attr-defined]
        assert with_ca.transport._tls.settings == TlsSettings(ca_file=str(certs.ca))  # type: ignore[attr-defined]
    finally:
        plain.transport.close()
        with_ca.transport.close()


def test_the_stub_wire_refuses_tls_in_one_line() -> None:
    with pytest.raises(ValueError, match="TLS options .* not nameserver_stub") as raised:
        open_transport(f"{GRPC_SCHEME}127.0.0.1:1", tls=TlsSettings())
    assert "\n" not in str(raised.value)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=5000), min_size=1, max_size=20), st.data())
def test_decrypting_any_split_of_the_stream_gives_back_the_plaintext(
    certs: LabCertificates, chunks: list[bytes], data: st.DataObject
) -> None:
    """However the bytes on the wire are cut into reads, the session gives back exactly what was sent, in order:
    the reader never needs to look at the SSL layer for data it already holds."""
    left, right = socket.socketpair()
    server_side = server_context(certs).wrap_socket(right, server_side=True, do_handshake_on_connect=False)
    done = threading.Thread(target=server_side.do_handshake)
    done.start()
    client = tls_module.tls_client(TlsSettings(ca_file=str(certs.ca)))
    session = tls_module.TlsSession.handshake(left, "127.0.0.1:1", "the broker", client, 5)
    done.join()
    try:
        sent = b"".join(chunks)
        for chunk in chunks:
            server_side.sendall(chunk)
        server_side.shutdown(socket.SHUT_WR)  # the TCP end, no close_notify: the client reads to EOF
        wire = b""
        left.settimeout(5)
        while piece := left.recv(1 << 16):  # every record the server sent, as raw bytes
            wire += piece
        cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=10)))
        got = b"".join(session.decrypt(wire[a:b]) for a, b in zip([0, *cuts], [*cuts, len(wire)], strict=True))
        assert got == sent
    finally:
        server_side.close()
        left.close()


def test_a_closed_tls_test_server_writes_nothing_where_its_sockets_were(certs: LabCertificates) -> None:
    """The test server itself (a CI run failed on it): closed while its thread read a TLS connection, the socket's
    file number went to the next file opened, and when the client then ended the stream, OpenSSL's alert for the
    unexpected end was written there: into a later test's ``openssl`` pipe, which then could not be read. The
    server now ends its connections and waits for their threads before it closes a socket."""
    for _ in range(3):
        server = ScriptedServer(lambda command: None, tls=server_context(certs))
        client_context = ssl.create_default_context(cafile=str(certs.ca))
        client_context.check_hostname = False
        client = client_context.wrap_socket(socket.create_connection(split_host_port(server.address)))
        client.settimeout(0.2)
        with pytest.raises(TimeoutError):
            client.recv(1)  # takes the session tickets, so the client's close is an end of stream, not a reset
        server.close()
        pipes = [os.pipe() for _ in range(4)]  # the lowest free numbers: those the server's sockets had
        try:
            client.close()
            time.sleep(0.3)  # time for a thread still reading to see the end and answer it
            for read_end, _ in pipes:
                os.set_blocking(read_end, False)
                with pytest.raises(BlockingIOError):
                    os.read(read_end, 100)
        finally:
            for read_end, write_end in pipes:
                os.close(read_end)
                os.close(write_end)
