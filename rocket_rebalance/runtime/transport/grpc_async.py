"""The asyncio gRPC transport to ``nameserver_stub``: :class:`AsyncGrpcTransport`, the twin of
:class:`.grpc.GrpcTransport` on one ``grpc.aio`` channel of the running loop.

What each call sends and makes of its answer is :mod:`.grpc_calls`, shared with the threaded transport; this
module only awaits the calls (:meth:`AsyncGrpcTransport._run`, for most calls through one runner,
:class:`awaited_stub_call`). No thread is involved: every call is awaited on the loop, every ``Connect`` stream is
a task of the loop reading it (:func:`.grpc_calls.read_connect_stream`, the coroutine the threaded transport runs
on its own streams loop), and every answer to the stub's running-info requests is a task too, so the stream goes on
while the answer is sent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar, overload

import grpc

from rocket_rebalance._proto.v1 import broker_pb2
from rocket_rebalance.runtime.transport import (
    GRPC_SCHEME,
    AsyncBrokerRequests,
    GroupNotified,
    Message,
    NotificationStream,
    StreamEnded,
    TransportError,
)
from rocket_rebalance.runtime.transport.grpc_calls import (
    ConnectStream,
    Service,
    StubCall,
    StubCalls,
    call_metadata,
    closed_error,
    read_connect_stream,
    rpc_error,
    service_stubs,
)
from rocket_rebalance.subscription import SubscriptionExpression

__all__ = ["AsyncGrpcTransport"]

log = logging.getLogger("rocket_rebalance.runtime.grpc")

T = TypeVar("T")
P = ParamSpec("P")
R = TypeVar("R")
_LATE_EVENTS = 0.05
"""Seconds :meth:`AsyncGrpcTransport.close` waits after closing the channel: gRPC's core completes the calls the
close cancelled a little later, and hands each completion to the loop the call was made on. A loop closed before
they arrive (``asyncio.run`` returning right after ``close``) makes gRPC's poller fail on whichever other loop of
the process reads its events (``Event loop is closed``, logged there), so the close lets them arrive first."""


class awaited_stub_call(Generic[P, R]):
    """A call of :class:`AsyncGrpcTransport` that only awaits the :class:`~.grpc_calls.StubCall` that ``build`` (of
    :class:`~.grpc_calls.StubCalls`) makes, on the transport's channel (:meth:`AsyncGrpcTransport._run`):
    ``lock = awaited_stub_call(StubCalls.lock)`` makes ``await transport.lock(broker, ...)`` mean
    ``await transport._run(calls.lock(broker, ...))``; the twin of the threaded transport's
    :class:`~.grpc.blocking_stub_call`.

    Why a runner rather than a method per call: each such method was that one line under the call's whole
    signature, written again in the threaded transport and in both remoting ones, so a new call meant its signature
    in eight places. The signature now lives in the builder and in the interface, and the type of what
    :meth:`__get__` returns, a coroutine function ``Callable[P, Coroutine[Any, Any, R]]`` with ``P`` and ``R`` read
    off ``build``, is what mypy holds to :class:`~rocket_rebalance.runtime.transport.AsyncTransport` where a
    transport is given as one (:func:`~.wire.open_async_transport`), and what it checks every call against. Calls
    with logic of their own (connect, close, those answered without a call) stay methods.

    What :meth:`__get__` returns is an ``async def``, as the method it replaces was, so the request is built when
    the call is awaited, not before. Cheap: it binds the builder to this transport's calls and channel once per
    attribute access (a few attribute reads and one closure), and the call is then one coroutine around
    :meth:`AsyncGrpcTransport._run`, as the method's was, with no look-up or reflection."""

    __slots__ = ("build",)

    def __init__(self, build: Callable[Concatenate[StubCalls, P], StubCall[R]]) -> None:
        self.build = build

    @overload
    def __get__(self, transport: None, owner: type[object]) -> Self: ...

    @overload
    def __get__(self, transport: AsyncGrpcTransport, owner: type[object]) -> Callable[P, Coroutine[Any, Any, R]]: ...

    def __get__(
        self, transport: AsyncGrpcTransport | None, owner: type[object]
    ) -> Self | Callable[P, Coroutine[Any, Any, R]]:
        if transport is None:
            return self
        build, calls, run = self.build, transport._calls, transport._run

        async def call(*args: P.args, **kwargs: P.kwargs) -> R:
            return await run(build(calls, *args, **kwargs))

        return call


class AsyncGrpcTransport:
    """The asyncio gRPC transport to ``nameserver_stub`` at ``address`` (``host:port`` or ``grpc://host:port``),
    with an optional shared token, satisfying :class:`~rocket_rebalance.runtime.transport.AsyncTransport`.

    Its channel belongs to the loop it is made on: the running loop when the transport is made inside one, else
    the loop of its first call. A call from another loop is refused (:class:`RuntimeError`): a ``grpc.aio``
    channel completes its calls on its own loop only."""

    def __init__(self, address: str, token: str | None = None, timeout: float = 5.0) -> None:
        address = address.removeprefix(GRPC_SCHEME)
        self._metadata = call_metadata(token)
        self.address = address
        self.long_poll_ms = 1000
        self._timeout = timeout
        self._calls = StubCalls(address, timeout)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._channel: grpc.aio.Channel | None = None
        self._services: dict[Service, Any] = {}
        self._closed = False
        self._client: AsyncBrokerRequests | None = None
        self._tasks: set[asyncio.Task[None]] = set()  # the streams' readers and the running-info answers
        self._streams: set[ConnectStream] = set()  # open, each read by one of the tasks
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass  # made outside a loop: the first call opens the channel, on its loop
        else:
            self._open("AsyncGrpcTransport()")

    def _here(self, call: str) -> None:
        """Bind the transport to the running loop, or refuse another loop than the one it is bound to."""
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif loop is not self._loop:
            raise RuntimeError(
                f"{call} of the AsyncGrpcTransport to {self.address} runs on another event loop than its channel; "
                "a grpc.aio channel serves the loop it was made on: make one transport per loop"
            )

    def _open(self, call: str) -> grpc.aio.Channel:
        """The channel, made on the running loop at the first call. Raises :class:`RuntimeError` on another loop,
        :class:`TransportError` once the transport is closed (no request leaves any more)."""
        self._here(call)
        if self._closed:
            raise closed_error(call, self.address)
        if self._channel is None:
            self._channel = grpc.aio.insecure_channel(self.address)
            self._services = service_stubs(self._channel)
        return self._channel

    async def _run(self, call: StubCall[T]) -> T:
        """Carry ``call`` and make its answer. A caller's cancellation propagates (gRPC cancels the call, and its
        answer goes nowhere); the channel's close, which cancels the call from under its caller, is a CANCELLED
        failure, as the threaded transport's blocking calls see it."""
        try:
            self._open(call.method)
            method = getattr(self._services[call.service], call.method)
            reply = await method(call.request, timeout=call.timeout, metadata=self._metadata)
        except TransportError as error:  # closed (before the channel, so no call reaches a closed channel)
            failure = error
        except grpc.aio.AioRpcError as error:
            failure = rpc_error(call.method, self.address, error)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            failure = TransportError(f"{call.method} at {self.address}: CANCELLED Channel closed!", "CANCELLED")
        else:
            return call.answer(reply)
        return call.recover(failure)

    # the calls that only carry a StubCall (awaited_stub_call); those with logic of their own follow

    route = awaited_stub_call(StubCalls.route)
    heartbeat = awaited_stub_call(StubCalls.heartbeat)
    unregister = awaited_stub_call(StubCalls.unregister)
    subscription_table = awaited_stub_call(StubCalls.subscription_table)
    consumer_list = awaited_stub_call(StubCalls.consumer_list)
    query_offsets = awaited_stub_call(StubCalls.query_offsets)
    update_offsets = awaited_stub_call(StubCalls.update_offsets)
    lock = awaited_stub_call(StubCalls.lock)
    unlock = awaited_stub_call(StubCalls.unlock)
    pull = awaited_stub_call(StubCalls.pull)
    max_offset = awaited_stub_call(StubCalls.max_offset)
    search_offset = awaited_stub_call(StubCalls.search_offset)
    min_offset = awaited_stub_call(StubCalls.min_offset)
    consumer_connections = awaited_stub_call(StubCalls.consumer_connections)
    send = awaited_stub_call(StubCalls.send)

    async def check_subscription(
        self, broker: str, consumer_group: str, client_id: str, topic: str, expression: SubscriptionExpression
    ) -> None:
        """Tag expressions pass (the stub filters by them); SQL92 is refused in one line."""
        self._calls.check_subscription(topic, expression)

    async def send_back(
        self, consumer_group: str, message: Message, max_reconsume_times: int, delay_level: int
    ) -> None:
        self._calls.refuse_send_back()

    def attach(self, client: AsyncBrokerRequests) -> None:
        """Answer the stub's running-info requests (on our ``Connect`` streams) from ``client``."""
        self._client = client

    async def connect(
        self, broker: str, client_id: str, on_group: GroupNotified, on_end: StreamEnded
    ) -> NotificationStream:
        """Returns at once, as the threaded transport's: the stream is a task of the loop, and a broker that
        cannot be reached is told to ``on_end``. Raises :class:`TransportError` (UNAVAILABLE) once closed."""
        if self._closed:
            raise closed_error("Connect", self.address, "UNAVAILABLE")
        channel = self._open("Connect")
        stream = ConnectStream(on_group, on_end, partial(self._asked, broker, client_id))
        request = broker_pb2.ConnectRequest(broker_name=broker, client_id=client_id)
        task = self._start(read_connect_stream(channel, request, self._metadata, self.address, stream))
        stream.future = task
        self._streams.add(stream)
        task.add_done_callback(lambda _: self._streams.discard(stream))
        return stream

    def _start(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """A task of the transport's own, ended by :meth:`close`; a failure it did not handle is logged as it
        ends, never dropped with the task."""
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._ended)
        return task

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            log.error("a task of the gRPC transport to %s failed unexpectedly", self.address, exc_info=error)

    def _asked(self, broker: str, client_id: str, request_id: str, consumer_group: str) -> None:
        """A running-info request on the stream to ``broker``: answered in a task, so the stream goes on."""
        if self._closed:  # the stub's wait for us ends by its timeout
            log.debug("running-info request %s at %s after close: not answered", request_id, broker)
            return
        self._start(self._report(broker, client_id, request_id, consumer_group))

    async def _report(self, broker: str, client_id: str, request_id: str, consumer_group: str) -> None:
        """Answer one running-info request; a failure is logged, and the operator's call ends by its timeout."""
        call = self._calls.running_info_report(
            self._client, broker, client_id, request_id, consumer_group, lambda: self._closed
        )
        if call is not None:
            await self._run(call)

    async def close(self, timeout: float | None = None) -> bool:
        """Close the channel: calls in flight fail at once (CANCELLED), every stream tells ``on_end(None)`` now,
        and no request leaves afterwards. Then wait up to ``timeout`` seconds (None: the call timeout) for the
        streams' and answers' tasks to end; True when they did. Runs on the channel's loop."""
        self._here("close")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self._timeout if timeout is None else timeout)
        if not self._closed:
            self._closed = True
            for stream in list(self._streams):
                stream.cancel()  # says so itself: a task cancelled before its first step never would
            for task in self._tasks:
                task.cancel()
            if self._channel is not None:
                await self._channel.close()
                await asyncio.sleep(max(0.0, min(_LATE_EVENTS, deadline - loop.time())))
        if not self._tasks:
            return True
        _, pending = await asyncio.wait(set(self._tasks), timeout=max(0.0, deadline - loop.time()))
        return not pending
