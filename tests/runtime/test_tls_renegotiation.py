"""A TLS server that asks to renegotiate (issue 37, probe finding 1): against a server H that stops reading while a
big request is being written to it, and then asks for a TLS 1.2 renegotiation, the one reader of the threaded
transport goes on serving every other server, and the calls to H fail within their timeout; a server that asks
while it reads has the request refused, which ends that connection only. The asyncio transport is held to the
same.

H is a TLS 1.2 server over memory buffers (:class:`RenegotiatingServer`): Python has no call to renegotiate, so it
asks OpenSSL through ctypes (``SSL_renegotiate`` on the SSL object behind its ``ssl.SSLObject``), which then
writes the HelloRequest. Its receive buffer is kept small, so a 15 MB request cannot fit in the kernel's buffers
and the writer's ``sendall`` blocks, holding the connection's write lock, while H does not read.
"""

from __future__ import annotations

import _ssl
import asyncio
import ctypes
import fcntl
import json
import select
import socket
import ssl
import struct
import termios
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import pytest

from rocket_rebalance.lab.certs import LabCertificates, make_certificates
from rocket_rebalance.model import MessageQueue, TlsSettings
from rocket_rebalance.remoting import FrameDecoder, RemotingCommand, RequestCode, ResponseCode, encode, response_to
from rocket_rebalance.runtime.transport import TransportError
from rocket_rebalance.runtime.transport.remoting import RemotingTransport
from rocket_rebalance.runtime.transport.remoting_async import AsyncRemotingTransport
from tests.aio import run
from tests.runtime.test_consumer import wait_for
from tests.runtime.test_tls_transport import server_context
from tests.scripted_server import Handler, ScriptedServer

T = TypeVar("T")

TIMEOUT = 2.0  # every call's, as in the probe
NOT_HUNG = 6.0  # a bound that still proves "not hung" on a busy machine (the hang was 15 s, until close())
BIG = 15 << 20  # one message body: far more than H's receive buffer and our send buffer hold
MQ_H = MessageQueue("TopicH", "broker-h", 0)
MQ_G = MessageQueue("TopicG", "broker-g", 0)


def _route(broker: str, address: str) -> bytes:
    return json.dumps(
        {
            "brokerDatas": [{"brokerAddrs": {"0": address}, "brokerName": broker, "cluster": "c"}],
            "queueDatas": [
                {"brokerName": broker, "perm": 6, "readQueueNums": 1, "writeQueueNums": 1, "topicSysFlag": 0}
            ],
        }
    ).encode()


def name_server_and_broker_g(routes: dict[str, tuple[str, str]]) -> Handler:
    """G, the healthy server: the name server (``routes``: topic -> broker, address) and broker-g."""

    def handler(command: RemotingCommand) -> RemotingCommand | None:
        if command.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            broker, address = routes[command.ext["topic"]]
            return response_to(command, ResponseCode.SUCCESS, body=_route(broker, address))
        return broker_answer(command)

    return handler


def broker_answer(command: RemotingCommand) -> RemotingCommand | None:
    """A broker's answers: offset 7 to GET_MAX_OFFSET, none to GET_MIN_OFFSET (a request left waiting)."""
    if command.code == RequestCode.GET_MAX_OFFSET:
        return response_to(command, ResponseCode.SUCCESS, ext={"offset": "7"})
    if command.code == RequestCode.GET_MIN_OFFSET:
        return None
    return response_to(command, ResponseCode.SUCCESS)


# ---------------------------------------------------------------------------------------------------- the server H

_OPENSSL = ctypes.CDLL(_ssl.__file__)  # _ssl links libssl, so its symbols resolve through it
_OPENSSL.SSL_renegotiate.argtypes = [ctypes.c_void_p]
_OPENSSL.SSL_version.argtypes = [ctypes.c_void_p]
_OPENSSL.SSL_is_server.argtypes = [ctypes.c_void_p]
_TLS1_2_VERSION = 0x0303


def _openssl_object(obj: ssl.SSLObject) -> int:
    """The ``SSL *`` behind ``obj``: CPython's ``_ssl._SSLSocket`` is PyObject_HEAD, a weak reference to its socket,
    then ``SSL *ssl``. Checked before use, since a wrong guess would crash the process."""
    pointer = ctypes.c_void_p.from_address(id(obj._sslobj) + object.__basicsize__ + ctypes.sizeof(ctypes.c_void_p))  # type: ignore[attr-defined]
    ssl_object = pointer.value
    if not ssl_object or _OPENSSL.SSL_is_server(ssl_object) != 1 or _OPENSSL.SSL_version(ssl_object) != _TLS1_2_VERSION:
        raise RuntimeError("not the SSL object expected: CPython's _ssl layout changed")
    return ssl_object


class RenegotiatingServer:
    """H: a TLS 1.2 remoting server over ``ssl.MemoryBIO`` answering with ``handler``, which can stop reading
    (:meth:`stop_reading`) and ask the client to renegotiate (:meth:`renegotiate`, the latest connection only).
    :attr:`refusal` holds OpenSSL's words when the client refused; :attr:`asked` is set once the HelloRequest is
    on the wire. Its receive buffer is small (64 KB), so a big request stays blocked in the client's ``sendall``."""

    def __init__(self, handler: Handler, context: ssl.SSLContext) -> None:
        self.handler = handler
        self.context = context
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)  # inherited by every connection
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.accepted = 0
        self.received: list[int] = []  # the codes of the requests read
        self.reading = threading.Event()
        self.reading.set()
        self.asked = threading.Event()
        self.refusal: str | None = None
        self._ask = threading.Event()
        self._closed = threading.Event()
        self._latest: socket.socket | None = None
        threading.Thread(target=self._accept, daemon=True).start()

    def stop_reading(self) -> None:
        self.reading.clear()

    def renegotiate(self) -> None:
        self._ask.set()

    def unread(self) -> int:
        """Bytes the latest connection has received that H has not read (the kernel's count)."""
        if self._latest is None:
            return 0
        count = fcntl.ioctl(self._latest.fileno(), termios.FIONREAD, b"\0\0\0\0")
        return int(struct.unpack("i", count)[0])

    def close(self) -> None:
        self._closed.set()
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        obj = self.context.wrap_bio(incoming, outgoing, server_side=True)
        with conn:
            try:
                self._handshake(conn, obj, incoming, outgoing)
            except (OSError, EOFError):  # ssl.SSLError included
                return
            self._latest = conn
            decoder = FrameDecoder()
            while not self._closed.is_set():
                if self._ask.is_set() and conn is self._latest:
                    self._ask.clear()
                    _OPENSSL.SSL_renegotiate(_openssl_object(obj))
                    try:
                        obj.do_handshake()  # writes the HelloRequest
                    except ssl.SSLWantReadError:
                        pass
                    conn.sendall(outgoing.read())
                    self.asked.set()
                if not self.reading.is_set() or not select.select([conn], [], [], 0.01)[0]:
                    time.sleep(0.01)
                    continue
                data = conn.recv(1 << 16)
                if not data:
                    return
                incoming.write(data)
                try:
                    plain = self._read_all(obj)
                except ssl.SSLError as error:  # the client refused the renegotiation: OpenSSL ends the session
                    self.refusal = str(error)
                    conn.sendall(outgoing.read())  # its fatal alert
                    return
                for command in decoder.feed(plain):
                    self.received.append(command.code)
                    answer = None if command.is_response else self.handler(command)
                    if answer is not None:
                        obj.write(encode(answer))
                conn.sendall(outgoing.read())

    @staticmethod
    def _handshake(conn: socket.socket, obj: ssl.SSLObject, incoming: ssl.MemoryBIO, outgoing: ssl.MemoryBIO) -> None:
        conn.settimeout(10)
        while True:
            try:
                obj.do_handshake()
            except ssl.SSLWantReadError:
                conn.sendall(outgoing.read())
                data = conn.recv(1 << 16)
                if not data:
                    raise EOFError from None
                incoming.write(data)
            else:
                conn.sendall(outgoing.read())
                conn.settimeout(None)
                return

    @staticmethod
    def _read_all(obj: ssl.SSLObject) -> bytes:
        parts = []
        while True:
            try:
                part = obj.read(1 << 16)
            except ssl.SSLWantReadError:
                return b"".join(parts)
            if not part:
                return b"".join(parts)
            parts.append(part)


# ---------------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> LabCertificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def servers(certs: LabCertificates) -> Iterator[tuple[RenegotiatingServer, ScriptedServer]]:
    """H (TLS 1.2 at most, so it may renegotiate) and G, the healthy name server and broker-g."""
    h_context = server_context(certs)
    h_context.maximum_version = ssl.TLSVersion.TLSv1_2
    hostile = RenegotiatingServer(broker_answer, h_context)
    routes: dict[str, tuple[str, str]] = {"TopicH": ("broker-h", hostile.address)}
    healthy = ScriptedServer(name_server_and_broker_g(routes), tls=server_context(certs))
    routes["TopicG"] = ("broker-g", healthy.address)
    yield hostile, healthy
    hostile.close()
    healthy.close()


def learn_routes(transport: RemotingTransport) -> None:
    """broker-h at H, broker-g at G, from G, the name server."""
    for topic in ("TopicH", "TopicG"):
        transport.route(topic)


def timed(call: Callable[[], T]) -> Callable[[], tuple[float, T | TransportError]]:
    """``call`` run as a measure: the seconds it took and its result or its :class:`TransportError`."""

    def measured() -> tuple[float, T | TransportError]:
        started = time.monotonic()
        try:
            result: T | TransportError = call()
        except TransportError as error:
            result = error
        return time.monotonic() - started, result

    return measured


async def measured(call: Callable[[], Awaitable[T]]) -> tuple[float, T | TransportError]:
    """:func:`timed`'s twin on the loop."""
    started = time.monotonic()
    try:
        result: T | TransportError = await call()
    except TransportError as error:
        result = error
    return time.monotonic() - started, result


def outcome(future: Future[tuple[float, Any]], what: str) -> tuple[float, Any]:
    try:
        return future.result(timeout=NOT_HUNG)
    except TimeoutError:
        raise AssertionError(f"{what} hung for more than {NOT_HUNG} s on a {TIMEOUT} s timeout") from None


# ---------------------------------------------------------------------------------------------------- threaded


def test_a_server_asking_to_renegotiate_while_a_write_to_it_is_stuck_freezes_no_other_call(
    servers: tuple[RenegotiatingServer, ScriptedServer], certs: LabCertificates
) -> None:
    hostile, healthy = servers
    transport = RemotingTransport([healthy.address], timeout=TIMEOUT, tls=TlsSettings(ca_file=str(certs.ca)))
    calls = ThreadPoolExecutor(3)
    try:
        learn_routes(transport)
        assert transport.max_offset(MQ_H) == 7  # the TLS 1.2 connection to H is open
        assert transport.max_offset(MQ_G) == 7
        hostile.stop_reading()
        big = calls.submit(timed(lambda: transport.send("TopicH", "broker-h", [b"x" * BIG], queue_id=0)))
        wait_for(lambda: hostile.unread() > 0, timeout=10)  # the writer is in sendall, holding the write lock
        hostile.renegotiate()
        assert hostile.asked.wait(10)
        to_h = calls.submit(timed(lambda: transport.max_offset(MQ_H)))
        to_g = calls.submit(timed(lambda: transport.max_offset(MQ_G)))

        g_took, g_result = outcome(to_g, "the call to the healthy server G")
        h_took, h_result = outcome(to_h, "the call to H")
        big_took, big_result = outcome(big, "the big send to H")
    finally:
        transport.close()
        calls.shutdown(wait=False)
    assert g_result == 7 and g_took < TIMEOUT
    assert isinstance(h_result, TransportError) and h_took < NOT_HUNG, (h_took, h_result)
    assert isinstance(big_result, TransportError) and big_took < NOT_HUNG, (big_took, big_result)
    assert hostile.unread() < BIG  # the send was indeed stuck: H never held the whole request


def test_a_renegotiation_asked_by_a_reading_server_is_refused_and_ends_that_connection_only(
    servers: tuple[RenegotiatingServer, ScriptedServer], certs: LabCertificates
) -> None:
    """RocketMQ never renegotiates: the client refuses (``OP_NO_RENEGOTIATION``) with a warning alert the reader
    sends at once, OpenSSL's server ends the session on it, and the request waiting on that connection fails then,
    saying so; the other server is untouched and the next call to H opens a new connection."""
    hostile, healthy = servers
    transport = RemotingTransport([healthy.address], timeout=TIMEOUT, tls=TlsSettings(ca_file=str(certs.ca)))
    calls = ThreadPoolExecutor(1)
    try:
        learn_routes(transport)
        assert transport.max_offset(MQ_H) == 7
        waiting = calls.submit(timed(lambda: transport.min_offset(MQ_H)))  # H never answers it
        wait_for(lambda: RequestCode.GET_MIN_OFFSET in hostile.received, timeout=10)
        hostile.renegotiate()
        took, result = outcome(waiting, "the request waiting on H")
        assert transport.max_offset(MQ_G) == 7
        assert transport.max_offset(MQ_H) == 7  # on a new connection
    finally:
        transport.close()
        calls.shutdown(wait=False)
    assert hostile.refusal is not None and "NO_RENEGOTIATION" in hostile.refusal
    assert isinstance(result, TransportError) and result.code == "UNAVAILABLE", result
    assert f"TLS on the connection to {hostile.address} failed" in str(result) and took < TIMEOUT, (took, result)
    assert hostile.accepted == 2


# ---------------------------------------------------------------------------------------------------- asyncio


async def async_transport(healthy: ScriptedServer, certs: LabCertificates) -> AsyncRemotingTransport:
    """An asyncio transport whose name server is G, with broker-h and broker-g learnt."""
    transport = AsyncRemotingTransport([healthy.address], timeout=TIMEOUT, tls=TlsSettings(ca_file=str(certs.ca)))
    for topic in ("TopicH", "TopicG"):
        await transport.route(topic)
    return transport


def test_the_asyncio_transport_is_not_frozen_either(
    servers: tuple[RenegotiatingServer, ScriptedServer], certs: LabCertificates
) -> None:
    """The asyncio twin could not freeze so (it passed before the fix too): a write there is buffered by the loop's
    transport and only its caller awaits it, and each connection has its own reader task; the same scenario."""
    hostile, healthy = servers

    async def scenario() -> list[tuple[float, Any]]:
        transport = await async_transport(healthy, certs)
        try:
            assert await transport.max_offset(MQ_H) == 7
            assert await transport.max_offset(MQ_G) == 7
            hostile.stop_reading()
            big = asyncio.create_task(measured(lambda: transport.send("TopicH", "broker-h", [b"x" * BIG], queue_id=0)))
            while hostile.unread() == 0:
                await asyncio.sleep(0.01)
            hostile.renegotiate()
            while not hostile.asked.is_set():
                await asyncio.sleep(0.01)
            calls = [measured(lambda: transport.max_offset(MQ_G)), measured(lambda: transport.max_offset(MQ_H)), big]
            async with asyncio.timeout(NOT_HUNG):
                return list(await asyncio.gather(*calls))
        finally:
            await transport.close()

    (g_took, g_result), (h_took, h_result), (big_took, big_result) = run(scenario(), timeout=3 * NOT_HUNG)
    assert g_result == 7 and g_took < TIMEOUT
    assert isinstance(h_result, TransportError) and h_took < NOT_HUNG, (h_took, h_result)
    assert isinstance(big_result, TransportError) and big_took < NOT_HUNG, (big_took, big_result)


def test_the_asyncio_transport_refuses_a_renegotiation_too(
    servers: tuple[RenegotiatingServer, ScriptedServer], certs: LabCertificates
) -> None:
    """The context is the threaded transport's (``OP_NO_RENEGOTIATION``): the request waiting on H fails when the
    session ends, and the next call opens a new connection."""
    hostile, healthy = servers

    async def scenario() -> tuple[float, Any]:
        transport = await async_transport(healthy, certs)
        try:
            assert await transport.max_offset(MQ_H) == 7
            waiting = asyncio.create_task(measured(lambda: transport.min_offset(MQ_H)))  # H never answers it
            while RequestCode.GET_MIN_OFFSET not in hostile.received:
                await asyncio.sleep(0.01)
            hostile.renegotiate()
            ended = await waiting
            assert await transport.max_offset(MQ_G) == 7
            assert await transport.max_offset(MQ_H) == 7  # on a new connection
            return ended
        finally:
            await transport.close()

    took, result = run(scenario(), timeout=3 * NOT_HUNG)
    assert hostile.refusal is not None and "NO_RENEGOTIATION" in hostile.refusal
    assert isinstance(result, TransportError) and result.code == "UNAVAILABLE", result
    assert f"connection to {hostile.address} failed" in str(result) and took < TIMEOUT, (took, result)
    assert hostile.accepted == 2
