"""The gRPC transport to ``nameserver_stub`` (chosen with a ``grpc://host:port`` address), on threads.

Every logical broker is served at the stub's own address, so one channel carries every call; broker names travel
in the requests. What each call sends and makes of its answer is :mod:`.grpc_calls`, shared with the asyncio twin
(:mod:`.grpc_async`); this module carries the calls on a blocking channel (:meth:`GrpcTransport._run`, for most
calls through one runner, :class:`blocking_stub_call`).

The stub asks a consumer about itself (an operator's ``ConsumerRunningInfo``) on the consumer's ``Connect``
stream; the answer goes back in a ``ReportRunningInfo`` call, from a small pool of its own, because building it
waits for the consumer's service thread and the stream must go on delivering notifications meanwhile.

Every ``Connect`` stream (one per broker) is read by one asyncio loop on one thread, on an asyncio channel of its
own: a synchronous gRPC stream holds a thread for as long as it is open, and a route may name up to
:data:`~rocket_rebalance.model.MAX_ROUTE_BROKERS` brokers. So the transport's threads are that loop and the
answers' pool, however many brokers.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Concatenate, Generic, ParamSpec, Self, TypeVar, overload

import grpc

from rocket_rebalance._proto.v1 import broker_pb2
from rocket_rebalance.model import MessageQueue
from rocket_rebalance.runtime.transport import (
    GRPC_SCHEME,
    BrokerRequests,
    GroupNotified,
    Message,
    NotificationStream,
    ProgressRow,
    PullResult,
    StreamEnded,
    TransportError,
)
from rocket_rebalance.runtime.transport.grpc_calls import (
    ConnectStream,
    StubCall,
    StubCalls,
    call_metadata,
    closed_error,
    read_connect_stream,
    rpc_error,
    service_stubs,
)
from rocket_rebalance.runtime.workers import DaemonPool
from rocket_rebalance.subscription import SubscriptionExpression

__all__ = ["GrpcTransport"]

log = logging.getLogger("rocket_rebalance.runtime.grpc")

T = TypeVar("T")
P = ParamSpec("P")
R = TypeVar("R")
_ANSWER_THREADS = 2  # running-info answers in flight at once; the stub bounds how many it asks for


class blocking_stub_call(Generic[P, R]):
    """A call of :class:`GrpcTransport` that only carries the :class:`~.grpc_calls.StubCall` that ``build`` (of
    :class:`~.grpc_calls.StubCalls`) makes, on the transport's blocking channel (:meth:`GrpcTransport._run`):
    ``lock = blocking_stub_call(StubCalls.lock)`` makes ``transport.lock(broker, ...)`` mean
    ``transport._run(calls.lock(broker, ...))``.

    Why a runner rather than a method per call: each such method was that one line under the call's whole
    signature, written again in the asyncio transport (:class:`~.grpc_async.awaited_stub_call`) and in both
    remoting ones, so a new call meant its signature in eight places. The signature now lives in the builder and in
    the interface, and the type of what :meth:`__get__` returns, ``Callable[P, R]`` with ``P`` and ``R`` read off
    ``build``, is what mypy holds to :class:`~rocket_rebalance.runtime.transport.AdminTransport` where a transport
    is given as one (:func:`~.wire.open_transport`), and what it checks every call against. Calls with logic of
    their own (the pull with its callback, connect, close, those answered without a call) stay methods.

    Cheap on the hot path (the offsets, locks, heartbeats; never the pull): :meth:`__get__` binds the builder to
    this transport's calls and channel once per attribute access (a few attribute reads and one closure), and the
    call is then one Python frame around :meth:`GrpcTransport._run`, as the method it replaces was, with no look-up
    or reflection."""

    __slots__ = ("build",)

    def __init__(self, build: Callable[Concatenate[StubCalls, P], StubCall[R]]) -> None:
        self.build = build

    @overload
    def __get__(self, transport: None, owner: type[object]) -> Self: ...

    @overload
    def __get__(self, transport: GrpcTransport, owner: type[object]) -> Callable[P, R]: ...

    def __get__(self, transport: GrpcTransport | None, owner: type[object]) -> Self | Callable[P, R]:
        if transport is None:
            return self
        build, calls, run = self.build, transport._calls, transport._run

        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            return run(build(calls, *args, **kwargs))

        return call


_loop_lock = threading.Lock()
_shared_loop: asyncio.AbstractEventLoop | None = None


def _streams_loop() -> asyncio.AbstractEventLoop:
    """The one asyncio loop, on one daemon thread, that reads every stub ``Connect`` stream of the process.

    One for the process, never closed: gRPC's asyncio layer binds its completion queue to the loop it first runs
    on, and a loop per transport, closed with the transport, made gRPC call into a closed loop (``Event loop is
    closed``) once a second transport had been used. The thread belongs to no consumer, so it is named apart."""
    global _shared_loop
    with _loop_lock:
        if _shared_loop is None:
            _shared_loop = asyncio.new_event_loop()
            threading.Thread(target=_shared_loop.run_forever, name="rocket-rebalance-grpc-loop", daemon=True).start()
        return _shared_loop


class _Streams:
    """The ``Connect`` streams of one transport, read on the process's one streams loop (:func:`_streams_loop`),
    over a channel of their own, and ended by :meth:`close`."""

    def __init__(self, address: str, metadata: tuple[tuple[str, str], ...]) -> None:
        self._address = address
        self._metadata = metadata
        self._lock = threading.Lock()
        self._tasks: set[asyncio.Task[None]] = set()  # touched on the streams loop only
        self._channel: grpc.aio.Channel | None = None
        self._closed = False

    def open(self, request: broker_pb2.ConnectRequest, stream: ConnectStream) -> None:
        with self._lock:
            if self._closed:
                raise closed_error("Connect", self._address, "UNAVAILABLE")
            stream.future = asyncio.run_coroutine_threadsafe(self._read(request, stream), _streams_loop())

    async def _read(self, request: broker_pb2.ConnectRequest, stream: ConnectStream) -> None:
        if self._closed:  # closed after open() scheduled this: close()'s stop() did not see it
            stream.end(None)
            return
        task = asyncio.current_task()
        assert task is not None  # a coroutine run by the loop always has its task
        self._tasks.add(task)
        try:
            if self._channel is None:  # an asyncio channel belongs to the loop it was made on
                self._channel = grpc.aio.insecure_channel(self._address)
            await read_connect_stream(self._channel, request, self._metadata, self._address, stream)
        finally:
            self._tasks.discard(task)

    def close(self, timeout: float) -> bool:
        """Cancel this transport's streams and close its channel; wait up to ``timeout`` for that."""
        with self._lock:
            if self._closed:
                return True
            self._closed = True  # no stream opens from now on

        async def stop() -> None:
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if self._channel is not None:
                await self._channel.close()

        done = asyncio.run_coroutine_threadsafe(stop(), _streams_loop())
        try:
            done.result(timeout)
        except TimeoutError:
            return False
        return True


class GrpcTransport:
    """The gRPC transport to ``nameserver_stub`` at ``address`` (``host:port`` or ``grpc://host:port``), with an
    optional shared token."""

    def __init__(self, address: str, token: str | None = None, timeout: float = 5.0) -> None:
        address = address.removeprefix(GRPC_SCHEME)
        self._metadata = call_metadata(token)
        self.address = address
        self.long_poll_ms = 1000
        self._timeout = timeout
        self._calls = StubCalls(address, timeout)
        self._channel = grpc.insecure_channel(address)
        self._services = service_stubs(self._channel)
        self._closed = threading.Event()
        self._client: BrokerRequests | None = None
        self._answers = DaemonPool(_ANSWER_THREADS, "rr-grpc-answer", self._answer_failed)
        self._streams = _Streams(address, self._metadata)

    def _run(self, call: StubCall[T]) -> T:
        method = getattr(self._services[call.service], call.method)
        try:
            reply = method(call.request, timeout=call.timeout, metadata=self._metadata)
        except grpc.RpcError as error:
            failure = rpc_error(call.method, self.address, error)
        except ValueError as error:  # a closed channel
            failure = TransportError(f"{call.method} at {self.address}: {error}")
        else:
            return call.answer(reply)
        return call.recover(failure)

    # the calls that only carry a StubCall (blocking_stub_call); those with logic of their own follow

    route = blocking_stub_call(StubCalls.route)
    heartbeat = blocking_stub_call(StubCalls.heartbeat)
    unregister = blocking_stub_call(StubCalls.unregister)
    subscription_table = blocking_stub_call(StubCalls.subscription_table)
    consumer_list = blocking_stub_call(StubCalls.consumer_list)
    query_offsets = blocking_stub_call(StubCalls.query_offsets)
    update_offsets = blocking_stub_call(StubCalls.update_offsets)
    lock = blocking_stub_call(StubCalls.lock)
    unlock = blocking_stub_call(StubCalls.unlock)
    max_offset = blocking_stub_call(StubCalls.max_offset)
    min_offset = blocking_stub_call(StubCalls.min_offset)
    search_offset = blocking_stub_call(StubCalls.search_offset)
    send = blocking_stub_call(StubCalls.send)

    # the operator's (AdminTransport)

    brokers = blocking_stub_call(StubCalls.brokers)
    consumer_connections = blocking_stub_call(StubCalls.consumer_connections)
    topics = blocking_stub_call(StubCalls.topics)
    consumer_groups = blocking_stub_call(StubCalls.consumer_groups)
    consumer_report = blocking_stub_call(StubCalls.consumer_report)

    def check_subscription(
        self, broker: str, consumer_group: str, client_id: str, topic: str, expression: SubscriptionExpression
    ) -> None:
        """Tag expressions pass (the stub filters by them); SQL92 is refused in one line."""
        self._calls.check_subscription(topic, expression)

    def pull(
        self,
        mq: MessageQueue,
        consumer_group: str,
        offset: int,
        max_messages: int,
        wait_ms: int,
        done: Callable[[PullResult | TransportError], None],
    ) -> None:
        call = self._calls.pull(mq, consumer_group, offset, max_messages, wait_ms)

        def finished(future: grpc.Future) -> None:
            try:
                answer = future.result()
            except grpc.RpcError as error:
                done(rpc_error(call.method, self.address, error))
                return
            except grpc.FutureCancelledError:
                done(TransportError(f"{call.method} at {self.address}: cancelled", "CANCELLED"))
                return
            done(call.answer(answer))

        method = getattr(self._services[call.service], call.method)
        try:
            future = method.future(call.request, timeout=call.timeout, metadata=self._metadata)
        except ValueError as error:  # a closed channel
            done(TransportError(f"{call.method} at {self.address}: {error}"))
            return
        future.add_done_callback(finished)

    def send_back(self, consumer_group: str, message: Message, max_reconsume_times: int, delay_level: int) -> None:
        self._calls.refuse_send_back()

    def attach(self, client: BrokerRequests) -> None:
        """Answer the stub's running-info requests (on our ``Connect`` streams) from ``client``."""
        self._client = client

    def keep_to_cpu(self, cpu: int) -> None:
        """Nothing: the answers are read on the gRPC loop's thread, which every consumer of the process shares,
        so one consumer's setting cannot choose its CPU."""

    def _asked(self, broker: str, client_id: str, request_id: str, consumer_group: str) -> None:
        if not self._answers.submit(partial(self._report, broker, client_id, request_id, consumer_group)):
            # closed: the stub's wait for us ends by its timeout
            log.debug("running-info request %s at %s after close: not answered", request_id, broker)

    @staticmethod
    def _answer_failed(error: Exception) -> None:
        log.error("answering a running-info request failed unexpectedly", exc_info=error)

    def _report(self, broker: str, client_id: str, request_id: str, consumer_group: str) -> None:
        """Answer one running-info request; a failure is logged, and the operator's call ends by its timeout."""
        call = self._calls.running_info_report(
            self._client, broker, client_id, request_id, consumer_group, self._closed.is_set
        )
        if call is not None:
            self._run(call)

    def create_topic(self, topic: str, queue_nums: int, brokers: Sequence[str] = ()) -> None:
        for broker in brokers or self.brokers():
            self._run(self._calls.create_topic(broker, topic, queue_nums))

    def consumer_progress(self, consumer_group: str, topic: str = "", owners: bool = True) -> list[ProgressRow]:
        """The stub knows owners (last committer, lock holder) itself: ``owners`` costs nothing here."""
        return self._run(self._calls.consumer_progress(consumer_group, topic))

    def connect(self, broker: str, client_id: str, on_group: GroupNotified, on_end: StreamEnded) -> NotificationStream:
        """Returns at once: the stream is opened on the stream loop, and a broker that cannot be reached is
        told to ``on_end``."""
        stream = ConnectStream(on_group, on_end, partial(self._asked, broker, client_id))
        self._streams.open(broker_pb2.ConnectRequest(broker_name=broker, client_id=client_id), stream)
        return stream

    def close(self, timeout: float | None = None) -> bool:
        """Close the channel (calls in flight fail at once) and the streams, then wait up to ``timeout`` (None:
        the call timeout) for the stream loop and the answers' pool to end; True when they did."""
        deadline = time.monotonic() + (self._timeout if timeout is None else timeout)
        if not self._closed.is_set():
            self._closed.set()
            self._answers.shutdown()
            self._channel.close()
        ended = self._streams.close(max(0.0, deadline - time.monotonic()))
        return self._answers.join(deadline) and ended
