"""The asyncio remoting transport: RocketMQ's own protocol to a real Apache RocketMQ cluster, on an event loop.

The twin of :class:`~.remoting.RemotingTransport` for the asyncio runtime (:class:`~rocket_rebalance.runtime.
transport.AsyncTransport`): the same calls, answers, errors and codes, as coroutines of the loop it is used on.
Everything above the socket is shared with the threaded transport, not copied: each call is the operation of
:mod:`.remoting_calls` (building the request, reading the answer, mapping errors, the name servers in turn, the
brokers' addresses, the retry topic in heartbeats, the expression types for pulls), run here by an awaiting driver
(:meth:`AsyncRemotingTransport._run`) through one runner (:class:`awaited_op`); signing, the refused credentials'
line and the GO_AWAY rule are the wire's (:mod:`.remoting_wire`); what a broker asks of us and how it is answered
is :mod:`.remoting_answers`.

What is the loop's own: one connection per address (:class:`~.connection_async.AsyncConnection`, asyncio streams,
TLS with the context :mod:`.tls` builds) opened lazily by the first call that needs it, shared by every call,
requests multiplexed by opaque, one reader task per connection and no thread at all. Opening is one at a time per
address (an ``asyncio.Lock``), with the threaded pool's reconnect backoff; the cluster-info look-up for an unknown
broker is one at a time too. A broker's notification goes to the stream's ``on_group`` on the loop, from the
reader; running info is answered in place; CONSUME_MESSAGE_DIRECTLY awaits the attached consumer in a task of its
own, so the reader goes on reading meanwhile.

Written twice, once per runtime, and why: the driver loop (:meth:`AsyncRemotingTransport._run`), opening a
connection under a per-address lock, and the answer to CONSUME_MESSAGE_DIRECTLY (:meth:`AsyncRemotingTransport.
_reply`) differ from the threaded transport's only by ``await`` and by the kind of lock: a thread cannot await the
loop's future, and the loop must not block on a thread's lock, so each runtime keeps those few lines of its own
around the shared :func:`~.remoting_wire.step`, :class:`~.connection.Link`, :class:`~.connection.Backoff` and
:mod:`.remoting_answers`.

A transport belongs to the loop of its first call: its connections are that loop's streams, and a call from
another loop is refused (``FAILED_PRECONDITION``) rather than left to hang on a stream no loop reads.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar, overload

from rocket_rebalance.model import AclCredentials, TlsSettings
from rocket_rebalance.remoting import RemotingCommand
from rocket_rebalance.runtime.transport import (
    AsyncBrokerRequests,
    GroupNotified,
    NotificationStream,
    StreamEnded,
    TransportError,
)
from rocket_rebalance.runtime.transport.connection import Link
from rocket_rebalance.runtime.transport.connection_async import AsyncConnection
from rocket_rebalance.runtime.transport.remoting_answers import (
    NotificationStreams,
    answer_now,
    consumed_directly,
    failed_answer,
    offsets_reset,
)
from rocket_rebalance.runtime.transport.remoting_calls import RemotingCalls, RemotingEnds
from rocket_rebalance.runtime.transport.remoting_wire import Batch, Done, Exchange, Op, WireIO, step

__all__ = ["AsyncRemotingTransport"]

log = logging.getLogger("rocket_rebalance.runtime.remoting")

T = TypeVar("T")
P = ParamSpec("P")
R = TypeVar("R")


class awaited_op(Generic[P, R]):
    """A call of :class:`AsyncRemotingTransport` that is only the wire's operation ``op`` (of :mod:`.remoting_calls`)
    awaited by the transport's driver (:meth:`AsyncRemotingTransport._run`): ``lock = awaited_op(RemotingCalls.lock)``
    makes ``await transport.lock(broker, ...)`` mean ``await transport._run(wire.lock(broker, ...))``; the twin of
    the threaded transport's :class:`~.remoting.blocking_op`.

    Why a runner rather than a method per call: each such method was that one line under the call's whole
    signature, written again in the threaded transport and in both gRPC ones, so a new call meant its signature in
    eight places. The signature now lives in the operation and in the interface, and the type of what
    :meth:`__get__` returns, a coroutine function ``Callable[P, Coroutine[Any, Any, R]]`` with ``P`` and ``R`` read
    off ``op``, is what mypy holds to :class:`~rocket_rebalance.runtime.transport.AsyncTransport` where a transport
    is given as one (:func:`~.wire.open_async_transport`), and what it checks every call against. Calls with logic
    of their own (connect, close) stay methods.

    What :meth:`__get__` returns is an ``async def``, as the method it replaces was, so nothing happens before the
    call is awaited. Cheap: it binds the operation to this transport's wire and driver once per attribute access
    (a few attribute reads and one closure), and the call is then one coroutine around the driver, as the method's
    was, with no look-up or reflection."""

    __slots__ = ("op",)

    def __init__(self, op: Callable[Concatenate[RemotingCalls, P], Op[R]]) -> None:
        self.op = op

    @overload
    def __get__(self, transport: None, owner: type[object]) -> Self: ...

    @overload
    def __get__(
        self, transport: AsyncRemotingTransport, owner: type[object]
    ) -> Callable[P, Coroutine[Any, Any, R]]: ...

    def __get__(
        self, transport: AsyncRemotingTransport | None, owner: type[object]
    ) -> Self | Callable[P, Coroutine[Any, Any, R]]:
        if transport is None:
            return self
        op, wire, run = self.op, transport._wire, transport._run

        async def call(*args: P.args, **kwargs: P.kwargs) -> R:
            return await run(op(wire, *args, **kwargs))

        return call


class AsyncRemotingTransport(RemotingEnds):
    """A RocketMQ client's wire to the name servers ``namesrv_addrs`` and the brokers their routes name, on the
    running event loop; see the module docstring. ``timeout`` is each call's (a pull's socket waits its long poll
    and 15 s more), ``credentials`` sign every request, ``tls`` encrypts every connection."""

    def __init__(
        self,
        namesrv_addrs: Sequence[str],
        timeout: float = 5.0,
        credentials: AclCredentials | None = None,
        tls: TlsSettings | None = None,
    ) -> None:
        super().__init__(namesrv_addrs, timeout, credentials, tls)
        self._links: dict[str, Link[asyncio.Lock, AsyncConnection]] = {}
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._cluster_info_lock = asyncio.Lock()
        self._streams = NotificationStreams()
        self._client: AsyncBrokerRequests | None = None
        self._readers: set[asyncio.Task[None]] = set()
        self._answers: set[asyncio.Task[None]] = set()

    def __repr__(self) -> str:
        return f"AsyncRemotingTransport({self.address!r})"

    # ------------------------------------------------------------------ connections

    async def _connection(self, address: str) -> AsyncConnection:
        if self._closed:
            raise TransportError(f"transport to {address} is closed", "UNAVAILABLE")
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif loop is not self._loop:
            raise TransportError(
                f"the transport to {self.address} belongs to another event loop (the one of its first call)",
                "FAILED_PRECONDITION",
            )
        link = self._links.setdefault(address, Link(asyncio.Lock()))
        async with link.lock:  # one opening at a time per address
            current = link.connection
            if current is not None and current.alive:
                return current
            now = time.monotonic()
            link.backoff.check(now)
            peer = "the name server" if address in self._wire.namesrvs else "the broker"
            try:
                connection = await AsyncConnection.open(
                    address, self._timeout, self._on_request, self._on_close, self._tls, peer
                )
            except TransportError as error:
                link.backoff.failed(error, now)
                raise
            self._track(connection.task, self._readers)
            if self._closed:  # close() came while this one was opening
                connection.close()
                raise TransportError(f"transport to {address} is closed", "UNAVAILABLE")
            link.connection = connection
            link.backoff.opened()
            return connection

    def _on_close(self, connection: AsyncConnection, error: TransportError) -> None:
        """Forget a connection that ended (on the loop, from its reader) and end its notification streams."""
        link = self._links.get(connection.address)
        if link is not None and link.connection is connection:
            link.connection = None
            link.backoff.ended(error, time.monotonic())
        self._streams.ended(connection.address, None if self._closed else error)

    def _track(self, task: asyncio.Task[None], tasks: set[asyncio.Task[None]]) -> None:
        """Keep ``task`` until it ends; one that fails unexpectedly is logged, never lost."""
        tasks.add(task)

        def ended(done: asyncio.Task[None]) -> None:
            tasks.discard(done)
            if not done.cancelled() and done.exception() is not None:
                log.error("remoting task %s failed unexpectedly", done.get_name(), exc_info=done.exception())

        task.add_done_callback(ended)

    # ------------------------------------------------------------------ the awaiting driver

    async def _run(self, op: Op[T]) -> T:
        """Run one of the wire's operations, each exchange awaited (:func:`~.remoting_wire.step`). Cancelled, it
        closes the operation where it waits; an answer that comes after is dropped by the connection."""
        reply: object = None
        error: TransportError | None = None
        try:
            while True:
                io = step(op, reply, error)
                if isinstance(io, Done):
                    return io.value
                try:
                    reply, error = await self._perform(io), None
                except TransportError as failed:
                    reply, error = None, failed
        finally:
            op.close()

    async def _perform(self, io: WireIO) -> object:
        if isinstance(io, Exchange):
            return await self._exchange(io.address, io.name, io.command, io.timeout)
        if isinstance(io, Batch):
            return await self._batch(io)
        async with self._cluster_info_lock:  # LearnCluster: one look-up at a time, whoever asks
            await self._run(self._wire.learn_cluster())
        return None

    async def _exchange(
        self,
        address: str,
        name: str,
        command: RemotingCommand,
        timeout: float,
        connection: AsyncConnection | None = None,
    ) -> RemotingCommand:
        """One request (signed by the wire) and its answer as the wire reads it; GO_AWAY retires the connection
        and the request goes once more on a new one."""
        command = self._wire.outgoing(command)
        connection = connection or await self._connection(address)
        answer = self._wire.answered(await connection.request(name, command, timeout))
        if self._wire.going_away(address, name, answer):
            connection.close()
            connection = await self._connection(address)
            answer = self._wire.answered(await connection.request(name, command, timeout))
        return answer

    async def _batch(self, batch: Batch) -> list[RemotingCommand | TransportError]:
        """Every request of ``batch`` on one connection at once; the answers, or failures, in order."""
        try:
            connection = await self._connection(batch.address)
        except TransportError as error:
            return [error] * len(batch.commands)
        answers = await asyncio.gather(
            *(
                self._exchange(batch.address, batch.name, command, batch.timeout, connection)
                for command in batch.commands
            ),
            return_exceptions=True,
        )
        for answer in answers:
            if not isinstance(answer, RemotingCommand | TransportError):
                raise answer  # not a failure of the wire's: the caller's to see
        return [answer for answer in answers if isinstance(answer, RemotingCommand | TransportError)]

    # ------------------------------------------------------------------ the consumer's calls

    route = awaited_op(RemotingCalls.route)
    heartbeat = awaited_op(RemotingCalls.heartbeat)
    unregister = awaited_op(RemotingCalls.unregister)
    consumer_list = awaited_op(RemotingCalls.consumer_list)
    subscription_table = awaited_op(RemotingCalls.subscription_table)
    check_subscription = awaited_op(RemotingCalls.check_subscription)
    query_offsets = awaited_op(RemotingCalls.query_offsets)
    update_offsets = awaited_op(RemotingCalls.update_offsets)
    lock = awaited_op(RemotingCalls.lock)
    unlock = awaited_op(RemotingCalls.unlock)
    pull = awaited_op(RemotingCalls.pull)
    max_offset = awaited_op(RemotingCalls.max_offset)
    search_offset = awaited_op(RemotingCalls.search_offset)
    min_offset = awaited_op(RemotingCalls.min_offset)
    consumer_connections = awaited_op(RemotingCalls.consumer_connections)
    send = awaited_op(RemotingCalls.send)
    send_back = awaited_op(RemotingCalls.send_back)

    # ------------------------------------------------------------------ what brokers ask of us

    async def connect(
        self, broker: str, client_id: str, on_group: GroupNotified, on_end: StreamEnded
    ) -> NotificationStream:
        """The broker's NOTIFY_CONSUMER_IDS_CHANGED requests on our connection to its master (while it is down, its
        slave), until it closes; ``on_group`` and ``on_end`` are called on the loop."""
        _, address = await self._run(self._wire.reader(broker))
        connection = await self._connection(address)
        stream = self._streams.open(address, on_group, on_end)
        if not connection.alive:
            stream.end(TransportError(f"connection to {address} closed", "UNAVAILABLE"))
        return stream

    def attach(self, client: AsyncBrokerRequests) -> None:
        """Answer brokers' requests about this consumer (running info, consume directly) from ``client``."""
        self._client = client

    def _on_request(self, connection: AsyncConnection, command: RemotingCommand) -> None:
        """On the reader: notifications and resets of offsets at once; anything to answer in a task of its own."""
        if offsets_reset(command, self._client, connection.address) or self._streams.take(connection.address, command):
            return
        if self._closed:
            log.debug("%s sent request code %d after close; not answered", connection.address, command.code)
            return
        task = asyncio.get_running_loop().create_task(
            self._answer(connection, command), name=f"rr-remoting-answer {connection.address}"
        )
        self._track(task, self._answers)

    async def _answer(self, connection: AsyncConnection, command: RemotingCommand) -> None:
        try:
            reply = await self._reply(command)
        except Exception as error:  # Java answers SYSTEM_ERROR with the exception's text
            log.exception("answering request code %d from %s failed", command.code, connection.address)
            reply = failed_answer(command, error)
        try:
            connection.send(reply)
        except TransportError as error:
            log.debug("could not answer %s: %s", connection.address, error)

    async def _reply(self, command: RemotingCommand) -> RemotingCommand:
        client = self._client
        found = answer_now(command, client, self.address, self._wire.sub_version)
        if isinstance(found, RemotingCommand):
            return found
        assert client is not None  # a message to consume is handed on only when a consumer is attached
        started = time.monotonic()
        consumed, remark = await client.consume_directly(found)
        return consumed_directly(command, consumed, remark, int((time.monotonic() - started) * 1000))

    # ------------------------------------------------------------------ closing

    async def close(self, timeout: float | None = None) -> bool:
        """Close every connection: what waits on one fails at once (``UNAVAILABLE``), every notification stream
        hears its end (None), and nothing is sent after this; answers under way are cancelled. Then wait up to
        ``timeout`` seconds (None: the call timeout) for the reader and answer tasks to end; True when they did."""
        self._closed = True
        for link in list(self._links.values()):
            if link.connection is not None:
                link.connection.close()
        for task in self._answers:
            task.cancel()
        tasks = self._readers | self._answers
        if not tasks:
            return True
        _, pending = await asyncio.wait(tasks, timeout=self._timeout if timeout is None else timeout)
        return not pending
