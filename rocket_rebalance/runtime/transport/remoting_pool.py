"""The remoting transport's connection pool: one TCP connection per address, shared by every role, and the threads.

:class:`~rocket_rebalance.runtime.transport.remoting.RemotingTransport` sends everything through this one pool: its
own consumer calls and the roles built over the pool (:mod:`.remoting_admin`'s operator reads,
:mod:`.remoting_producer`'s sends), because the broker keys a consumer by its connection: heartbeats, pulls and
the unregister must travel on the same one, and a broker's requests to the consumer (notifications, running info)
arrive on it too. Those requests go the other way, so the role that answers them
(:class:`~.remoting_inbound.RemotingInbound`) is not built over the pool but given to it: it says what each request
is and what answers it, the pool decides which thread runs that.

What the pool owns: the connections (:class:`~.connection.Link` per address; a connection that fails is reopened on
the next call, with a :class:`~.connection.Backoff` so a broker that is down is not hammered; a response
``GO_AWAY``, a broker shutting down, retires the connection and the request is sent once more on a new one), the
blocking driver that runs the wire's operations (:meth:`RemotingPool.run`: each exchange waits for its answer, which
the reader delivers), and the threads. What each request is and which address it goes to is the wire's
(:mod:`.remoting_wire`, shared with the asyncio transport), which the pool is given: the name servers of the list
are tried in turn, from the one that answered last; brokers are named as in routes, and their addresses are learnt
from every route and from the cluster info (:meth:`RemotingPool.route`, :meth:`RemotingPool.brokers`,
:meth:`RemotingPool.master`, the name-server reads every role relies on). A broker no route gave an address for
asks the cluster info at most once per :attr:`~.remoting_wire.RemotingWire.cluster_info_every` seconds, one
look-up at a time (the pool's lock), whoever asks: a heartbeat round over a thousand such brokers costs one
look-up, not a thousand.

Threads: one reader for every connection (:class:`~.connection.Reactor`) and a pool of :data:`WORK_THREADS` for
what the reader must not wait for (answering a broker's requests, which waits for the consumer; opening a new
connection after GO_AWAY). That is all, however many brokers the routes name. The reader serves every connection,
so nothing it runs waits on anything that may be stuck: it only sorts what arrives, hands answers to their
callbacks and the slow work to the work pool, and takes no lock but the short ones. :meth:`RemotingPool.close`
ends them: after it no request leaves, and every one in flight fails at once.

Credentials and TLS are applied here: every connection, to a name server or a broker, is opened by
:meth:`RemotingPool._open`, which does the TLS handshake with the transport's one context when TLS is on
(:mod:`.tls`), and every request we send leaves through :meth:`RemotingPool.request`, which has the wire sign it
(:meth:`~.remoting_wire.RemotingWire.outgoing`) and name the refused credentials in a NO_PERMISSION answer
(:meth:`~.remoting_wire.RemotingWire.answered`).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from rocket_rebalance.remoting import RemotingCommand
from rocket_rebalance.route import TopicRoute
from rocket_rebalance.runtime.transport import TransportError
from rocket_rebalance.runtime.transport.connection import Completion, Connection, Link, Reactor
from rocket_rebalance.runtime.transport.remoting_calls import RemotingCalls
from rocket_rebalance.runtime.transport.remoting_inbound import RemotingInbound
from rocket_rebalance.runtime.transport.remoting_wire import Batch, Done, Exchange, Op, WireIO, step
from rocket_rebalance.runtime.transport.tls import TlsClient
from rocket_rebalance.runtime.workers import DaemonPool

__all__ = ["WORK_THREADS", "RemotingPool"]

log = logging.getLogger("rocket_rebalance.runtime.remoting")

WORK_THREADS = 2  # answers to brokers' requests and re-sends after GO_AWAY in progress at once

T = TypeVar("T")


class RemotingPool:
    """Connections to the name servers of ``wire`` and the brokers their routes name, one per address, opened with
    ``tls`` when it is given and waited for ``timeout`` seconds each; see the module docstring.

    The requests a server sends on a connection, and each connection's end, go to ``inbound``, from the reader."""

    def __init__(self, wire: RemotingCalls, tls: TlsClient | None, timeout: float, inbound: RemotingInbound) -> None:
        self.wire = wire
        self._tls = tls
        self._timeout = timeout
        self._inbound = inbound
        self._links: dict[str, Link[threading.Lock, Connection]] = {}
        self._links_lock = threading.Lock()
        self._closed = False
        self._reactor = Reactor()
        self._work = DaemonPool(WORK_THREADS, "rr-remoting-work", self._work_failed)
        self._cluster_info_lock = threading.Lock()

    # ------------------------------------------------------------------ connections

    def _link(self, address: str) -> Link[threading.Lock, Connection]:
        with self._links_lock:
            link = self._links.get(address)
            if link is None:
                link = self._links[address] = Link(threading.Lock())
            return link

    def _open(self, address: str) -> Connection:
        """A new connection to ``address``, over TLS when the pool has it."""
        peer = "the name server" if address in self.wire.namesrvs else "the broker"
        return Connection.open(address, self._timeout, self._reactor, self._on_request, self._on_close, self._tls, peer)

    @staticmethod
    def _work_failed(error: Exception) -> None:
        log.error("remoting work failed unexpectedly", exc_info=error)

    def connection(self, address: str) -> Connection:
        """The live connection to ``address``, opened now if there is none (one opening at a time per address)."""
        if self._closed:
            raise TransportError(f"transport to {address} is closed", "UNAVAILABLE")
        link = self._link(address)
        with link.lock:  # one opening at a time per address
            current = link.connection
            if current is not None and current.alive:
                return current
            now = time.monotonic()
            link.backoff.check(now)
            try:
                connection = self._open(address)
            except TransportError as error:
                link.backoff.failed(error, now)
                raise
            with self._links_lock:  # close() either sees this connection and closes it, or is seen here
                accepted = not self._closed
                if accepted:
                    link.connection = connection
            if accepted:
                link.backoff.opened()
                return connection
        connection.close()
        raise TransportError(f"transport to {address} is closed", "UNAVAILABLE")

    def _on_close(self, connection: Connection, error: TransportError) -> None:
        """Forget a connection that ended. Runs on the reader: it takes only the short lock, never the link's,
        which a thread opening a new connection to the same address holds for as long as connecting takes."""
        with self._links_lock:
            link = self._links.get(connection.address)
            if link is not None and link.connection is connection:
                link.connection = None
                link.backoff.ended(error, time.monotonic())
        self._inbound.ended(connection.address, None if self._closed else error)

    def _on_request(self, connection: Connection, command: RemotingCommand) -> None:
        """A request a server sent on ``connection``. Runs on the reader: the inbound role takes a notification at
        once, and any answer, which waits for the consumer, goes to the work pool."""
        answer = self._inbound.received(connection, command)
        if answer is not None and not self._work.submit(answer):
            log.debug("%s sent request code %d after close; not answered", connection.address, command.code)

    # ------------------------------------------------------------------ the blocking driver

    def run(self, op: Op[T]) -> T:
        """Run one of the wire's operations, each exchange waited for (:func:`~.remoting_wire.step`)."""
        reply: object = None
        error: TransportError | None = None
        while True:
            io = step(op, reply, error)
            if isinstance(io, Done):
                return io.value
            try:
                reply, error = self._perform(io), None
            except TransportError as failed:
                reply, error = None, failed

    def _perform(self, io: WireIO) -> object:
        if isinstance(io, Exchange):
            return self.call(io.address, io.name, io.command, io.timeout)
        if isinstance(io, Batch):
            return self._each(io.address, io.name, io.commands, io.timeout)
        with self._cluster_info_lock:  # LearnCluster: one look-up at a time, whoever asks
            self.run(self.wire.learn_cluster())
        return None

    # ------------------------------------------------------------------ requests

    def call(self, address: str, name: str, command: RemotingCommand, timeout: float | None = None) -> RemotingCommand:
        """One request and its response (:meth:`request`, waited for); raises :class:`TransportError` on failure."""
        answers: queue.SimpleQueue[RemotingCommand | TransportError] = queue.SimpleQueue()
        self.request(self.connection(address), name, command, timeout or self._timeout, answers.put)
        answer = answers.get()  # the connection's reader enforces the deadline, so this always returns
        if isinstance(answer, TransportError):
            raise answer
        return answer

    def request(
        self, connection: Connection, name: str, command: RemotingCommand, timeout: float, done: Completion
    ) -> None:
        """One request whose answer (or failure) goes to ``done`` on the connection's reader: no thread waits. The
        wire signs it and reads the answer (:mod:`.remoting_wire`); a GO_AWAY answer retires the connection and the
        request goes once more on a new one, opened on the work pool (opening waits: not on the reader, which
        reads for all)."""
        command = self.wire.outgoing(command)

        def read(answer: RemotingCommand | TransportError) -> RemotingCommand | TransportError:
            return answer if isinstance(answer, TransportError) else self.wire.answered(answer)

        def again() -> None:
            try:
                self.connection(connection.address).request(name, command, timeout, lambda answer: done(read(answer)))
            except TransportError as error:
                done(error)

        def first(answer: RemotingCommand | TransportError) -> None:
            answer = read(answer)
            if isinstance(answer, TransportError) or not self.wire.going_away(connection.address, name, answer):
                done(answer)
                return
            connection.close()
            if not self._work.submit(again):
                done(TransportError(f"{name} at {connection.address}: transport closed", "UNAVAILABLE"))

        connection.request(name, command, timeout, first)

    def _each(
        self, address: str, name: str, commands: Sequence[RemotingCommand], timeout: float | None = None
    ) -> list[RemotingCommand | TransportError]:
        """Send several requests on one connection at once and wait for all answers (in order)."""
        results: list[RemotingCommand | TransportError | None] = [None] * len(commands)
        remaining = [len(commands)]
        finished = threading.Event()
        lock = threading.Lock()
        if not commands:
            return []
        try:
            connection = self.connection(address)
        except TransportError as error:
            return [error] * len(commands)

        def done_at(index: int) -> Callable[[RemotingCommand | TransportError], None]:
            def done(result: RemotingCommand | TransportError) -> None:
                results[index] = result
                with lock:
                    remaining[0] -= 1
                    if remaining[0] == 0:
                        finished.set()

            return done

        for index, command in enumerate(commands):
            self.request(connection, name, command, timeout or self._timeout, done_at(index))
        finished.wait()
        return [result for result in results if result is not None]

    def ok(self, address: str, name: str, command: RemotingCommand, timeout: float | None = None) -> RemotingCommand:
        """One request whose answer must be SUCCESS (:meth:`~.remoting_wire.RemotingWire.ok`)."""
        return self.run(self.wire.ok(address, name, command, timeout))

    def namesrv_call(self, name: str, command: RemotingCommand) -> tuple[str, RemotingCommand]:
        """Ask the name servers in turn until one answers (:meth:`~.remoting_wire.RemotingWire.namesrv_call`)."""
        return self.run(self.wire.namesrv_call(name, command))

    # ------------------------------------------------------------------ where the brokers are

    def route(self, topic: str) -> TopicRoute:
        return self.run(self.wire.route(topic))

    def brokers(self) -> dict[str, str]:
        """Every broker's master address, from the name server's cluster info."""
        return self.run(self.wire.brokers())

    def master(self, broker: str) -> str:
        """The address of ``broker``'s master, from the routes learnt so far, else from the cluster info."""
        return self.run(self.wire.master(broker))

    def keep_to_cpu(self, cpu: int) -> None:
        """The reader's thread runs on ``cpu`` only (the consumer's ``pin_cpu``)."""
        self._reactor.keep_to_cpu(cpu)

    def close(self, timeout: float | None = None) -> bool:
        """Close every connection (what waits on one fails at once, and nothing is sent after this), then wait
        up to ``timeout`` (None: the call timeout) for the reader and the work pool to end; True when they did."""
        deadline = time.monotonic() + (self._timeout if timeout is None else timeout)
        with self._links_lock:
            self._closed = True
            connections = [link.connection for link in self._links.values() if link.connection is not None]
        for connection in connections:
            connection.close()
        self._work.shutdown()
        ended = self._reactor.close(max(0.0, deadline - time.monotonic()))
        return self._work.join(deadline) and ended
