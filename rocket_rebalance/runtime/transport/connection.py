"""One TCP connection speaking RocketMQ's remoting protocol: requests multiplexed by opaque, inbound requests.

A connection owns one socket and one reader thread. Requests from any thread are written whole under a lock and
wait for their answer by opaque; a request's completion is a callback, so a long-poll pull waits with no thread
of its own (the reader calls it back). The reader also enforces each request's deadline, so an unanswered request
fails with ``DEADLINE_EXCEEDED`` instead of waiting forever. Requests the server sends on the same connection
(NOTIFY_CONSUMER_IDS_CHANGED, GET_CONSUMER_RUNNING_INFO ...) are told apart from responses by the flag's response
bit, never by opaque (each side counts its own opaques), and handed to ``on_request``.

When the connection ends for any reason, every request still waiting fails with ``UNAVAILABLE`` and ``on_close``
is called once. The first bytes a server sends are checked for the signs of another protocol (an HTTP/2 server,
say), so pointing the remoting wire at ``nameserver_stub`` ends with one line saying so, not a hang.
"""

from __future__ import annotations

import itertools
import logging
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from rocket_rebalance.remoting import FrameDecoder, ProtocolError, RemotingCommand, encode, sniff_non_remoting
from rocket_rebalance.runtime.transport import TransportError

__all__ = ["Connection", "split_host_port"]

log = logging.getLogger("rocket_rebalance.runtime.remoting")

Completion = Callable[[RemotingCommand | TransportError], None]


def split_host_port(address: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` as a (host, port) pair for ``socket.create_connection``."""
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


@dataclass
class _Pending:
    name: str
    deadline: float
    done: Completion


class Connection:
    """A live connection to ``address``; see the module docstring. Create it with :meth:`open`."""

    _opaques = itertools.count(1)  # process-wide, so a log line names one request unambiguously

    def __init__(
        self,
        address: str,
        sock: socket.socket,
        on_request: Callable[[Connection, RemotingCommand], None],
        on_close: Callable[[Connection, TransportError], None],
    ) -> None:
        self.address = address
        self._sock = sock
        self._on_request = on_request
        self._on_close = on_close
        self._write_lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._pending_lock = threading.Lock()
        self._closed = threading.Event()
        self._close_error: TransportError | None = None
        self._decoder = FrameDecoder()
        self._answered = False
        self._reader = threading.Thread(target=self._read_loop, name=f"rr-remoting-{address}", daemon=True)

    @classmethod
    def open(
        cls,
        address: str,
        connect_timeout: float,
        on_request: Callable[[Connection, RemotingCommand], None],
        on_close: Callable[[Connection, TransportError], None],
    ) -> Connection:
        try:
            sock = socket.create_connection(split_host_port(address), timeout=connect_timeout)
        except OSError as error:
            raise TransportError(f"cannot connect to {address}: {error.strerror or error}", "UNAVAILABLE") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(None)
        connection = cls(address, sock, on_request, on_close)
        connection._reader.start()
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
        data = encode(command)
        with self._write_lock:
            if self._closed.is_set():
                raise TransportError("connection closed", "UNAVAILABLE")
            try:
                self._sock.sendall(data)
            except OSError as error:
                self._close(TransportError(f"connection to {self.address} failed: {error}", "UNAVAILABLE"))
                raise TransportError(f"write to {self.address} failed: {error}", "UNAVAILABLE") from None

    def _take(self, opaque: int) -> _Pending | None:
        with self._pending_lock:
            return self._pending.pop(opaque, None)

    # ------------------------------------------------------------------ reading

    def _read_loop(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self._sock, selectors.EVENT_READ)
        try:
            while not self._closed.is_set():
                try:
                    readable = selector.select(timeout=0.1)
                except (OSError, ValueError):  # the socket was closed by close() on another thread
                    return
                if readable:
                    try:
                        chunk = self._sock.recv(1 << 16)
                    except OSError as error:
                        self._close(TransportError(f"connection to {self.address} failed: {error}", "UNAVAILABLE"))
                        return
                    if not chunk:
                        self._close(self._closed_by_peer())
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
                self._expire(time.monotonic())
        finally:
            selector.close()

    def _closed_by_peer(self) -> TransportError:
        if not self._answered and self._pending:
            return TransportError(
                f"the server at {self.address} closed the connection without answering: it does not seem to be a "
                f"RocketMQ name server or broker (for nameserver_stub use grpc://{self.address})",
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
                log.debug("%s: response to opaque %d that nobody waits for (timed out?)", self.address, command.opaque)
                return
            self._complete(pending, command)
            return
        try:
            self._on_request(self, command)
        except Exception:  # a failing handler must not take the connection down
            log.exception("%s: handling request code %d failed", self.address, command.code)

    def _expire(self, now: float) -> None:
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
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        for pending in waiting:
            # A server of another kind is the whole story; which request found out is noise.
            said = str(error) if error.code == "FAILED_PRECONDITION" else f"{pending.name} at {self.address}: {error}"
            self._complete(pending, TransportError(said, error.code))
        try:
            self._on_close(self, error)
        except Exception:
            log.exception("on_close of %s failed", self.address)
