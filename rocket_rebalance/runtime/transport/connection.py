"""TCP connections speaking RocketMQ's remoting protocol: requests multiplexed by opaque, inbound requests, and
the one thread that reads them all.

A :class:`Connection` owns one socket. Requests from any thread are written whole under a lock and wait for their
answer by opaque; a request's completion is a callback, so a long-poll pull waits with no thread of its own.
Requests the server sends on the same connection (NOTIFY_CONSUMER_IDS_CHANGED, GET_CONSUMER_RUNNING_INFO ...) are
told apart from responses by the flag's response bit, never by opaque (each side counts its own opaques), and
handed to ``on_request``.

Every connection of a pool is read by one :class:`Reactor`: a single thread with a selector over all their
sockets, which also enforces each request's deadline, so an unanswered request fails with ``DEADLINE_EXCEEDED``
instead of waiting forever. A thread per connection would make the thread count whatever a route says (a route
may name up to :data:`~rocket_rebalance.model.MAX_ROUTE_BROKERS` brokers); with one reader it is fixed. The price
is the rule that everything called on the reader (completions, ``on_request``, ``on_close``) returns at once:
anything that may block is handed to a pool.

When a connection ends for any reason, every request still waiting fails with ``UNAVAILABLE`` and ``on_close``
is called once. The first bytes a server sends are checked for the signs of another protocol (an HTTP/2 server,
say), so pointing the remoting wire at ``nameserver_stub`` ends with one line saying so, not a hang.

With TLS (:mod:`.tls`) the socket stays plain: the handshake is done in :meth:`Connection.open`, before the
reader sees the socket, and then the reader decrypts what it reads and writers encrypt under the write lock.
A server that closes a plaintext connection without a word may want TLS (RocketMQ's enforcing mode does that),
so that end says to turn TLS on.
"""

from __future__ import annotations

import itertools
import logging
import selectors
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from rocket_rebalance.remoting import FrameDecoder, ProtocolError, RemotingCommand, encode, sniff_non_remoting
from rocket_rebalance.runtime.transport import TransportError
from rocket_rebalance.runtime.transport.tls import TlsClient, TlsSession

__all__ = ["Connection", "Reactor", "split_host_port"]

log = logging.getLogger("rocket_rebalance.runtime.remoting")

Completion = Callable[[RemotingCommand | TransportError], None]

_TICK = 0.1  # how often the reactor looks at the deadlines, in seconds


def split_host_port(address: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` as a (host, port) pair for ``socket.create_connection``."""
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


@dataclass
class _Pending:
    name: str
    deadline: float
    done: Completion


class Reactor:
    """The one thread (``rr-remoting``) that reads every connection added to it; see the module docstring.

    Started with the first connection; :meth:`close` stops it and waits for it. Sockets are registered, and
    unregistered and closed, on the reactor's own thread only (a socket closed elsewhere first could see its
    file number reused by a new one while the selector still holds it); other threads queue the change and wake
    the reactor through a socket pair."""

    def __init__(self) -> None:
        self._selector = selectors.DefaultSelector()
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._wake_reader.setblocking(False)
        self._wake_writer.setblocking(False)
        self._selector.register(self._wake_reader, selectors.EVENT_READ)
        self._lock = threading.Lock()
        self._added: list[Connection] = []
        self._retired: list[Connection] = []
        self._connections: set[Connection] = set()
        self._thread: threading.Thread | None = None
        self._stopped = False  # close() was called: no connection is added any more
        self._released = False  # every socket is closed, the selector too: a retired socket is closed in place

    def add(self, connection: Connection) -> None:
        with self._lock:
            if self._stopped:
                raise TransportError(f"transport to {connection.address} is closed", "UNAVAILABLE")
            self._added.append(connection)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="rr-remoting", daemon=True)
                self._thread.start()
        self._wake()

    def retire(self, connection: Connection) -> None:
        """Unregister and close ``connection``'s socket (already shut down), on the reactor's thread; in place
        when that is the caller, or when the reactor never started or has released everything."""
        with self._lock:
            queued = self._thread is not None and not self._released and threading.current_thread() is not self._thread
            if queued:
                self._retired.append(connection)
        if queued:
            self._wake()
        else:
            self._forget(connection)

    def close(self, timeout: float) -> bool:
        """Stop reading (the connections are closed first, by their pool) and wait up to ``timeout`` for the
        thread to end; True when it did."""
        with self._lock:
            self._stopped = True
            thread = self._thread
        self._wake()
        if thread is None:
            self._release()
            return True
        if thread is not threading.current_thread():
            thread.join(timeout)
        return not thread.is_alive() or thread is threading.current_thread()

    def _wake(self) -> None:
        try:
            self._wake_writer.send(b"\0")
        except OSError:  # full (a wake-up is pending anyway) or closed (the reactor has ended)
            pass

    def _run(self) -> None:
        next_expiry = time.monotonic() + _TICK
        try:
            while True:
                with self._lock:
                    stopped = self._stopped
                    added, self._added = self._added, []
                    retired, self._retired = self._retired, []
                for connection in retired:
                    self._forget(connection)
                if stopped:
                    for connection in added:
                        connection.close()
                    return
                for connection in added:
                    if connection.alive:
                        self._selector.register(connection.sock, selectors.EVENT_READ, connection)
                        self._connections.add(connection)
                    else:
                        self._forget(connection)
                for key, _ in self._selector.select(timeout=max(0.0, next_expiry - time.monotonic())):
                    if key.data is None:
                        self._drain_wake()
                    elif key.data.alive:
                        key.data.readable()
                now = time.monotonic()
                if now >= next_expiry:
                    for connection in list(self._connections):
                        connection.expire(now)
                    next_expiry = now + _TICK
        except Exception:  # a reader that died would leave every request waiting until its deadline, unseen
            log.exception("the remoting reader failed; closing its connections")
            for connection in list(self._connections):
                connection.close()
        finally:
            self._release()

    def _drain_wake(self) -> None:
        try:
            while self._wake_reader.recv(4096):
                pass
        except OSError:  # nothing more to read (BlockingIOError) or closed
            pass

    def _forget(self, connection: Connection) -> None:
        self._connections.discard(connection)
        try:
            self._selector.unregister(connection.sock)
        except (KeyError, ValueError, OSError, RuntimeError):  # never registered, or the selector is closed already
            pass
        connection.sock.close()

    def _release(self) -> None:
        """The reactor's end: every socket it still holds is closed, then its own."""
        with self._lock:
            self._stopped = self._released = True
            left = [*self._connections, *self._added, *self._retired]
            self._added, self._retired = [], []
        for connection in left:
            connection.close()
            self._forget(connection)
        self._selector.close()
        self._wake_reader.close()
        self._wake_writer.close()


class Connection:
    """A live connection to ``address``, read by ``reactor``; see the module docstring. Create it with
    :meth:`open`."""

    _opaques = itertools.count(1)  # process-wide, so a log line names one request unambiguously

    def __init__(
        self,
        address: str,
        sock: socket.socket,
        reactor: Reactor,
        on_request: Callable[[Connection, RemotingCommand], None],
        on_close: Callable[[Connection, TransportError], None],
        tls: TlsSession | None = None,
    ) -> None:
        self.address = address
        self._tls = tls
        self.sock = sock
        self._reactor = reactor
        self._on_request = on_request
        self._on_close = on_close
        self._write_lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._pending_lock = threading.Lock()
        self._closed = threading.Event()
        self._close_error: TransportError | None = None
        self._decoder = FrameDecoder()
        self._answered = False

    @classmethod
    def open(
        cls,
        address: str,
        connect_timeout: float,
        reactor: Reactor,
        on_request: Callable[[Connection, RemotingCommand], None],
        on_close: Callable[[Connection, TransportError], None],
        tls: TlsClient | None = None,
        peer: str = "the server",
    ) -> Connection:
        """Connect to ``address`` within ``connect_timeout`` (the TLS handshake too, with ``tls``; ``peer`` names
        the server in its errors) and hand the connection to ``reactor``."""
        try:
            sock = socket.create_connection(split_host_port(address), timeout=connect_timeout)
        except OSError as error:
            raise TransportError(f"cannot connect to {address}: {error.strerror or error}", "UNAVAILABLE") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        session = None
        if tls is not None:
            try:
                session = TlsSession.handshake(sock, address, peer, tls, connect_timeout)
            except TransportError:
                sock.close()
                raise
        sock.settimeout(None)
        connection = cls(address, sock, reactor, on_request, on_close, session)
        try:
            reactor.add(connection)
        except TransportError:
            sock.close()
            raise
        return connection

    @property
    def alive(self) -> bool:
        return not self._closed.is_set()

    # ------------------------------------------------------------------ writing

    def request(self, name: str, command: RemotingCommand, timeout: float, done: Completion) -> None:
        """Send ``command`` and call ``done`` once with its response or the error (never from this call's
        thread for a response; from it at once when the connection is already closed)."""
        opaque = next(self._opaques)
        with self._pending_lock:
            if self._closed.is_set():
                error = self._close_error or TransportError(f"{name} at {self.address}: connection closed")
                done(TransportError(f"{name} at {self.address}: {error}", "UNAVAILABLE"))
                return
            self._pending[opaque] = _Pending(name, time.monotonic() + timeout, done)
        try:
            self._write(replace(command, opaque=opaque))
        except TransportError as error:
            pending = self._take(opaque)
            if pending is not None:
                pending.done(TransportError(f"{name} at {self.address}: {error}", "UNAVAILABLE"))

    def send(self, command: RemotingCommand) -> None:
        """Write a oneway request or a response (nothing is awaited)."""
        self._write(command)

    def _write(self, command: RemotingCommand) -> None:
        self._send(encode(command))

    def _send(self, data: bytes) -> None:
        """Write ``data`` whole (encrypted, with TLS: records leave in the order the session makes them, because
        they are made under the write lock; b"" sends only what the session has of its own)."""
        with self._write_lock:
            if self._closed.is_set():
                raise TransportError("connection closed", "UNAVAILABLE")
            try:
                self.sock.sendall(data if self._tls is None else self._tls.encrypt(data))
            except OSError as error:  # ssl.SSLError included: the session is broken, like the socket
                self._close(TransportError(f"connection to {self.address} failed: {error}", "UNAVAILABLE"))
                raise TransportError(f"write to {self.address} failed: {error}", "UNAVAILABLE") from None

    def _take(self, opaque: int) -> _Pending | None:
        with self._pending_lock:
            return self._pending.pop(opaque, None)

    # ------------------------------------------------------------------ reading (on the reactor)

    def readable(self) -> None:
        """The socket has bytes (or its end): read them and hand on every whole frame."""
        try:
            chunk = self.sock.recv(1 << 16)
        except BlockingIOError:
            return
        except OSError as error:
            self._close(TransportError(f"connection to {self.address} failed: {error}", "UNAVAILABLE"))
            return
        if not chunk:
            self._close(self._closed_by_peer())
            return
        if self._tls is not None:
            chunk = self._decrypted(chunk)
            if not chunk:
                return
        if not self._answered:
            self._answered = True
            other = sniff_non_remoting(chunk)
            if other is not None:
                self._close(self._wrong_protocol(other))
                return
        try:
            commands = self._decoder.feed(chunk)
        except ProtocolError as error:
            self._close(TransportError(f"{self.address} sent a bad frame: {error}", "INTERNAL"))
            return
        for command in commands:
            self._dispatch(command)

    def _decrypted(self, chunk: bytes) -> bytes:
        """The plaintext ``chunk`` completes (see :meth:`TlsSession.decrypt`), b"" when none or when the session
        ended (the connection is closed then); records the session made while reading are sent at once."""
        assert self._tls is not None
        try:
            plain = self._tls.decrypt(chunk)
        except ssl.SSLZeroReturnError:
            self._close(self._closed_by_peer())
            return b""
        except ssl.SSLError as error:
            self._close(TransportError(f"TLS on the connection to {self.address} failed: {error}", "UNAVAILABLE"))
            return b""
        if self._tls.has_output:
            try:
                self._send(b"")
            except TransportError:  # the connection is closed, and says why
                return b""
        return plain

    def _closed_by_peer(self) -> TransportError:
        if not self._answered and self._pending and self._tls is None:
            return TransportError(
                f"the server at {self.address} closed the connection without answering: it may require TLS (a "
                f"RocketMQ server enforcing TLS closes plaintext connections so: use --tls, or tls=True), or not "
                f"be a RocketMQ name server or broker (for nameserver_stub use grpc://{self.address})",
                "UNAVAILABLE",
            )
        if not self._answered and self._pending:
            return TransportError(
                f"the server at {self.address} closed the TLS connection without answering: it does not seem to "
                "be a RocketMQ name server or broker",
                "UNAVAILABLE",
            )
        return TransportError(f"connection to {self.address} closed by the server", "UNAVAILABLE")

    def _wrong_protocol(self, what: str) -> TransportError:
        what = what.replace("HOST:PORT", self.address)
        return TransportError(
            f"the server at {self.address} is not a RocketMQ name server or broker: it seems to be {what}",
            "FAILED_PRECONDITION",
        )

    def _dispatch(self, command: RemotingCommand) -> None:
        if command.is_response:
            pending = self._take(command.opaque)
            if pending is None:
                # a request that timed out closed its connection, so no late answer can come here: the server
                # answered something never asked (Java warns too: "receive response, cmd=..., but not matched")
                log.warning(
                    "%s: response %d to opaque %d, which no request used", self.address, command.code, command.opaque
                )
                return
            self._complete(pending, command)
            return
        try:
            self._on_request(self, command)
        except Exception:  # a failing handler must not take the connection down
            log.exception("%s: handling request code %d failed", self.address, command.code)

    def expire(self, now: float) -> None:
        """Fail the requests past their deadline, then close the connection, as Java's client does
        (``clientCloseSocketIfTimeout``): an answer that never came may be a frame stuck half-read, which would
        swallow every later answer on this connection, so the next request goes on a new one."""
        with self._pending_lock:
            expired = [opaque for opaque, pending in self._pending.items() if pending.deadline <= now]
            late = [self._pending.pop(opaque) for opaque in expired]
        for pending in late:
            self._complete(
                pending, TransportError(f"{pending.name} at {self.address}: no answer in time", "DEADLINE_EXCEEDED")
            )
        if late:
            self._close(
                TransportError(
                    f"connection to {self.address} closed after {late[0].name} had no answer in time; "
                    "the next request opens a new one",
                    "UNAVAILABLE",
                )
            )

    @staticmethod
    def _complete(pending: _Pending, result: RemotingCommand | TransportError) -> None:
        try:
            pending.done(result)
        except Exception:
            log.exception("completing %s failed", pending.name)

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        self._close(TransportError(f"connection to {self.address} closed", "UNAVAILABLE"))

    def _close(self, error: TransportError) -> None:
        with self._pending_lock:
            if self._closed.is_set():
                return
            self._closed.set()
            self._close_error = error
            waiting = list(self._pending.values())
            self._pending.clear()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # the peer sees the end now; the socket is closed by the reactor
        except OSError:
            pass
        self._reactor.retire(self)
        for pending in waiting:
            # A server of another kind is the whole story; which request found out is noise.
            said = str(error) if error.code == "FAILED_PRECONDITION" else f"{pending.name} at {self.address}: {error}"
            self._complete(pending, TransportError(said, error.code))
        try:
            self._on_close(self, error)
        except Exception:
            log.exception("on_close of %s failed", self.address)
