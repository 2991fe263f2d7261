"""TCP connections speaking RocketMQ's remoting protocol: requests multiplexed by opaque, inbound requests, and
the one thread that reads them all.

What a connection does above its socket (the table of requests waiting by opaque, the first bytes' check, frames
decoded and told apart, deadlines, the end that fails what waits, the errors' wording) is :class:`Multiplexer`,
shared with the asyncio connection (:mod:`.connection_async`), as are the reconnect :class:`Backoff` and the
pools' record of an address (:class:`Link`); the rest of this module is the threaded runtime's socket and reader.

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

The reader never waits for a writer. A writer holds its connection's write lock for as long as its ``sendall``
takes, and that is forever when the server has stopped reading; a reader waiting for that lock would stop reading,
and enforcing deadlines, for every connection of the pool (issue 37: a TLS 1.2 server that stopped reading and
then asked to renegotiate froze every call to every server). Yet reading TLS may make records the session must
send (an answer to the server's handshake message, an alert). So the reader sends them only when that waits on
nothing: when the write lock is free, and then without blocking (``MSG_DONTWAIT``); whatever is left waits in the
session, or in the connection's unsent bytes, and goes before the next writer's own records, or with the
reader's next try at its sweep. The writer that is stuck is not waited for but ended by the reader's sweep,
which closes the connection when a request is past its deadline, or a write (an answer to the server's request,
which has no deadline of its own) has taken longer than the call timeout; the shutdown makes the ``sendall``
return with an error. Closing waits on nothing either (the pending table's short lock, a shutdown, a close).
"""

from __future__ import annotations

import ctypes
import itertools
import logging
import selectors
import socket
import ssl
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from rocket_rebalance.remoting import FrameDecoder, ProtocolError, RemotingCommand, encode, sniff_non_remoting
from rocket_rebalance.runtime.transport import TransportError
from rocket_rebalance.runtime.transport.tls import TlsClient, TlsSession
from rocket_rebalance.runtime.workers import keep_to_cpu

__all__ = [
    "Backoff",
    "Completion",
    "Connection",
    "Link",
    "Multiplexer",
    "Pending",
    "Reactor",
    "cannot_connect",
    "split_host_port",
]

log = logging.getLogger("rocket_rebalance.runtime.remoting")

Completion = Callable[[RemotingCommand | TransportError], None]

_TICK = 0.1  # how often the reactor looks at the deadlines, in seconds
_NO_WAIT = getattr(socket, "MSG_DONTWAIT", None)  # a send that never blocks (None on Windows: the next write sends)


def _send_holding_gil() -> Callable[[int, bytes, int, int], int] | None:
    """The C library's ``send``, called without releasing the GIL (``ctypes.PyDLL``), where there is one.

    Python's own socket calls release the GIL for the system call and then wait to take it back. On the service
    thread, which sends every next pull, that wait was more than half of its time (issue 42: 1.5 of its 2.8 s in
    a run of 400,000 messages): while it sent, the socket reader or a listener thread took the GIL and kept it.
    A send that cannot block (``MSG_DONTWAIT``) of a request that fits the socket's buffer takes some tens of
    microseconds of the kernel's time (25 on loopback, the packet's delivery included) against a wait of hundreds
    for the GIL, so the GIL is kept through it; what does not go at once goes by ``sendall`` after it. None
    (every send by ``sendall``) without a C library ctypes can open (Windows)."""
    if _NO_WAIT is None:
        return None
    try:
        send = ctypes.PyDLL(None).send
    except (OSError, AttributeError, TypeError):
        return None
    send.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int)
    send.restype = ctypes.c_ssize_t
    return send


_SEND_HOLDING_GIL = _send_holding_gil()
_SEND_FLAGS = (_NO_WAIT or 0) | getattr(socket, "MSG_NOSIGNAL", 0)


def send_whole(sock: socket.socket, data: bytes | bytearray | memoryview) -> None:
    """Write ``data`` whole to the blocking ``sock``: what the socket takes at once without releasing the GIL (see
    :func:`_send_holding_gil`), the rest, or all of it on an error (which ``sendall`` then raises), by ``sendall``."""
    sent = 0
    if _SEND_HOLDING_GIL is not None and data and type(data) is bytes:  # ctypes passes bytes' own buffer
        sent = max(0, _SEND_HOLDING_GIL(sock.fileno(), data, len(data), _SEND_FLAGS))
    if sent < len(data):
        sock.sendall(data[sent:] if sent else data)


def split_host_port(address: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` as a (host, port) pair for ``socket.create_connection``."""
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


@dataclass
class Pending:
    """A request waiting for its answer: what names it in errors, when it gives up, who hears the outcome."""

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
        self._cpu: int | None = None  # the one CPU its thread runs on (see keep_to_cpu)

    def add(self, connection: Connection) -> None:
        with self._lock:
            if self._stopped:
                raise TransportError(f"transport to {connection.address} is closed", "UNAVAILABLE")
            self._added.append(connection)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="rr-remoting", daemon=True)
                self._thread.start()
        self._wake()

    def keep_to_cpu(self, cpu: int) -> None:
        """Run the reactor's thread on ``cpu`` only: the running one now, one started later from its start."""
        with self._lock:
            self._cpu = cpu
            thread = self._thread
        if thread is not None:
            keep_to_cpu(cpu, thread)

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
        with self._lock:
            cpu = self._cpu
        keep_to_cpu(cpu)  # a system call, and maybe a log line: not under the lock that add() and retire() take
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


class Multiplexer(ABC):
    """One connection's protocol above its socket, for both runtimes (the threaded :class:`Connection`, the
    asyncio :class:`~.connection_async.AsyncConnection`): requests waiting for their answer by opaque, the first
    bytes checked for another protocol, frames decoded and told apart (responses to their requests, requests to
    :meth:`_request_received`), deadlines, and the end that fails everything still waiting. Subclasses move the
    bytes: they feed what they read to :meth:`_received` and release their socket in :meth:`_release`."""

    _opaques = itertools.count(1)  # process-wide, so a log line names one request unambiguously

    def __init__(self, address: str, tls: bool) -> None:
        self.address = address
        self._tls_on = tls
        self._pending: dict[int, Pending] = {}
        self._pending_lock = threading.Lock()  # the threaded runtime's writers and reader meet here
        self._closed = False
        self._close_error: TransportError | None = None
        self._decoder = FrameDecoder()
        self._answered = False

    @property
    def alive(self) -> bool:
        return not self._closed

    @abstractmethod
    def _request_received(self, command: RemotingCommand) -> None:
        """A request the server sent (on the reader: it must return at once)."""

    @abstractmethod
    def _release(self) -> None:
        """Stop the socket (the peer sees the end now); called once, by :meth:`_close`."""

    @abstractmethod
    def _ended(self, error: TransportError) -> None:
        """The connection ended with ``error``, after every request waiting on it failed."""

    # ------------------------------------------------------------------ requests

    def _register(
        self, name: str, command: RemotingCommand, timeout: float, done: Completion
    ) -> RemotingCommand | None:
        """``command`` with an opaque of its own, noted as waiting up to ``timeout`` for its answer, which goes to
        ``done``; None when the connection is closed already (``done`` has heard so, at once)."""
        opaque = next(self._opaques)
        with self._pending_lock:
            if self._closed:
                error = self._close_error or TransportError(f"{name} at {self.address}: connection closed")
                done(TransportError(f"{name} at {self.address}: {error}", "UNAVAILABLE"))
                return None
            self._pending[opaque] = Pending(name, time.monotonic() + timeout, done)
        return command.with_opaque(opaque)

    def _write_failed(self, opaque: int, error: TransportError) -> None:
        """The request ``opaque`` could not be written: it fails now, if nothing else failed it first."""
        pending = self._take(opaque)
        if pending is not None:
            pending.done(TransportError(f"{pending.name} at {self.address}: {error}", "UNAVAILABLE"))

    def _take(self, opaque: int) -> Pending | None:
        with self._pending_lock:
            return self._pending.pop(opaque, None)

    # ------------------------------------------------------------------ reading

    def _received(self, chunk: bytes) -> None:
        """Plaintext bytes from the socket: the first are checked for another protocol, then every whole frame is
        handed on; a bad frame closes the connection (the stream has lost its frame boundary)."""
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

    def _closed_by_peer(self) -> TransportError:
        if not self._answered and self._pending and not self._tls_on:
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
            self._request_received(command)
        except Exception:  # a failing handler must not take the connection down
            log.exception("%s: handling request code %d failed", self.address, command.code)

    # ------------------------------------------------------------------ deadlines

    def expire(self, now: float) -> None:
        """Fail the requests past their deadline, then close the connection (see :meth:`_expired`)."""
        with self._pending_lock:
            expired = [opaque for opaque, pending in self._pending.items() if pending.deadline <= now]
            late = [self._pending.pop(opaque) for opaque in expired]
        self._expired(late)

    def _expired(self, late: list[Pending]) -> None:
        """Fail ``late``, requests past their deadline, then close the connection, as Java's client does
        (``clientCloseSocketIfTimeout``): an answer that never came may be a frame stuck half-read, which would
        swallow every later answer on this connection, so the next request goes on a new one."""
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
    def _complete(pending: Pending, result: RemotingCommand | TransportError) -> None:
        try:
            pending.done(result)
        except Exception:
            log.exception("completing %s failed", pending.name)

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        self._close(TransportError(f"connection to {self.address} closed", "UNAVAILABLE"))

    def _close(self, error: TransportError) -> None:
        """End the connection once: every request still waiting fails with ``error``'s code, then :meth:`_ended`."""
        with self._pending_lock:
            if self._closed:
                return
            self._closed = True
            self._close_error = error
            waiting = list(self._pending.values())
            self._pending.clear()
        self._release()
        for pending in waiting:
            # A server of another kind is the whole story; which request found out is noise.
            said = str(error) if error.code == "FAILED_PRECONDITION" else f"{pending.name} at {self.address}: {error}"
            self._complete(pending, TransportError(said, error.code))
        try:
            self._ended(error)
        except Exception:
            log.exception("on_close of %s failed", self.address)


class Connection(Multiplexer):
    """A live connection to ``address``, read by ``reactor``; see the module docstring. Create it with
    :meth:`open`."""

    def __init__(
        self,
        address: str,
        sock: socket.socket,
        reactor: Reactor,
        on_request: Callable[[Connection, RemotingCommand], None],
        on_close: Callable[[Connection, TransportError], None],
        tls: TlsSession | None = None,
        write_timeout: float = 5.0,
    ) -> None:
        super().__init__(address, tls is not None)
        self._tls = tls
        self._write_timeout = write_timeout  # a write taking longer: the server has stopped reading
        self._writing_since: float | None = None  # when the write under way began
        self.sock = sock
        self._reactor = reactor
        self._on_request = on_request
        self._on_close = on_close
        self._write_lock = threading.Lock()
        self._unsent = b""  # TLS records the reader sent only in part, under the write lock: they go first

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
        the server in its errors) and hand the connection to ``reactor``; a write may take as long (see
        :meth:`expire`)."""
        try:
            sock = socket.create_connection(split_host_port(address), timeout=connect_timeout)
        except OSError as error:
            raise cannot_connect(address, error) from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        session = None
        if tls is not None:
            try:
                session = TlsSession.handshake(sock, address, peer, tls, connect_timeout)
            except TransportError:
                sock.close()
                raise
        sock.settimeout(None)
        connection = cls(address, sock, reactor, on_request, on_close, session, connect_timeout)
        try:
            reactor.add(connection)
        except TransportError:
            sock.close()
            raise
        return connection

    # ------------------------------------------------------------------ writing

    def request(self, name: str, command: RemotingCommand, timeout: float, done: Completion) -> None:
        """Send ``command`` and call ``done`` once with its response or the error (never from this call's
        thread for a response; from it at once when the connection is already closed)."""
        numbered = self._register(name, command, timeout, done)
        if numbered is None:
            return
        try:
            self._write(numbered)
        except TransportError as error:
            self._write_failed(numbered.opaque, error)

    def send(self, command: RemotingCommand) -> None:
        """Write a oneway request or a response (nothing is awaited)."""
        self._write(command)

    def _write(self, command: RemotingCommand) -> None:
        self._send(encode(command))

    def _send(self, data: bytes) -> None:
        """Write ``data`` whole, blocking, after what the reader left unsent (encrypted, with TLS: records leave
        in the order the session makes them, because they are made under the write lock, and the records the
        session made while reading go first). Only writers call this: it may wait as long as the server does not
        read, until the reader's sweep closes the connection."""
        with self._write_lock:
            if self._closed:
                raise TransportError("connection closed", "UNAVAILABLE")
            self._writing_since = time.monotonic()
            try:
                if self._unsent:
                    send_whole(self.sock, self._unsent)
                    self._unsent = b""
                send_whole(self.sock, data if self._tls is None else self._tls.encrypt(data))
            except OSError as error:  # ssl.SSLError included: the session is broken, like the socket
                self._close(TransportError(f"connection to {self.address} failed: {error}", "UNAVAILABLE"))
                raise TransportError(f"write to {self.address} failed: {error}", "UNAVAILABLE") from None
            finally:
                self._writing_since = None

    def _send_now(self) -> None:
        """On the reader: send what the session made while reading (and what an earlier try left), as far as that
        waits on nothing (see the module docstring): not at all while a writer holds the lock (its write takes
        these records first, or the sweep's next try does), and no more than the socket takes at once."""
        if _NO_WAIT is None or not self._write_lock.acquire(blocking=False):
            return
        try:
            if self._closed:
                return
            data = self._unsent + (b"" if self._tls is None else self._tls.encrypt(b""))
            try:
                sent = self.sock.send(data, _NO_WAIT) if data else 0
            except BlockingIOError:  # the socket's buffer is full: the server is not reading
                sent = 0
            except OSError as error:  # ssl.SSLError included
                self._close(TransportError(f"connection to {self.address} failed: {error}", "UNAVAILABLE"))
                return
            self._unsent = data[sent:]
        finally:
            self._write_lock.release()

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
        self._received(chunk)

    def _decrypted(self, chunk: bytes) -> bytes:
        """The plaintext ``chunk`` completes (see :meth:`TlsSession.decrypt`), b"" when none or when the session
        ended (the connection is closed then); records the session made while reading are sent if that waits on
        nothing (:meth:`_send_now`), else later."""
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
            self._send_now()
        return b"" if self._closed else plain  # a failed send closed the connection, and said why

    def expire(self, now: float) -> None:
        """The reactor's sweep: requests past their deadline fail (see :meth:`Multiplexer.expire`); a write under
        way for longer than the write timeout closes the connection, which ends it (a request's write is ended by
        its deadline first; this one ends the answers to the server's requests, which have none, and whose thread
        serves every broker); records the session still owes the server are tried again (see :meth:`_send_now`)."""
        super().expire(now)
        since = self._writing_since
        if since is not None and now - since > self._write_timeout:
            self._close(
                TransportError(
                    f"connection to {self.address} closed: a write to it did not finish in {self._write_timeout:g} s "
                    "(the server is not reading)",
                    "UNAVAILABLE",
                )
            )
        elif self._unsent or (self._tls is not None and self._tls.has_output):
            self._send_now()

    def _request_received(self, command: RemotingCommand) -> None:
        self._on_request(self, command)

    # ------------------------------------------------------------------ closing

    def _release(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # the peer sees the end now; the socket is closed by the reactor
        except OSError:
            pass
        self._reactor.retire(self)

    def _ended(self, error: TransportError) -> None:
        self._on_close(self, error)


def cannot_connect(address: str, error: OSError) -> TransportError:
    """A connection that could not be opened (refused, unreachable, no answer in time), in one line."""
    return TransportError(f"cannot connect to {address}: {error.strerror or error}", "UNAVAILABLE")


_BACKOFF = (0.2, 5.0)


@dataclass
class Backoff:
    """When a pool may try an address again after failures, for both runtimes' pools: 0.2 s after the first
    failure, doubling to 5 s, so a broker that is down is not hammered; at once again after a success. A server of
    another kind (``FAILED_PRECONDITION``) is not tried again for the longest wait."""

    retry_at: float = 0.0
    delay: float = _BACKOFF[0]
    last_error: TransportError | None = None

    def check(self, now: float) -> None:
        """Raise the last failure while its wait lasts."""
        if now < self.retry_at and self.last_error is not None:
            raise TransportError(f"{self.last_error} (next try in {self.retry_at - now:.1f} s)", "UNAVAILABLE")

    def failed(self, error: TransportError, now: float) -> None:
        """Opening a connection failed with ``error``."""
        self.last_error = error
        self.retry_at = now + self.delay
        self.delay = min(_BACKOFF[1], self.delay * 2)

    def opened(self) -> None:
        self.delay = _BACKOFF[0]
        self.last_error = None

    def ended(self, error: TransportError, now: float) -> None:
        """A connection ended with ``error``."""
        if error.code == "FAILED_PRECONDITION":  # a server of another kind: do not retry at once
            self.last_error, self.retry_at = error, now + _BACKOFF[1]


LockT = TypeVar("LockT")
ConnectionT = TypeVar("ConnectionT", bound=Multiplexer)


@dataclass
class Link(Generic[LockT, ConnectionT]):
    """What a pool knows of one address, for both runtimes' pools: its live connection and, after failures, when
    to try again. ``lock`` is of the pool's runtime's kind (a thread's or the loop's): whoever holds it is the one
    opening a connection to the address."""

    lock: LockT
    connection: ConnectionT | None = None
    backoff: Backoff = field(default_factory=Backoff)
