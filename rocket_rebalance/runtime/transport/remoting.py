"""The remoting transport: RocketMQ's own protocol to a real Apache RocketMQ cluster.

Chosen by a name-server list in RocketMQ's form (``host:port;host:port``). It behaves on the wire as the Java
client does (``MQClientAPIImpl``): requests multiplexed by opaque, every required header field sent as a string,
Java enum names in bodies, and the retry topic ``%RETRY%<group>`` in every heartbeat of a clustering consumer, so
Java and Python members of one group keep one subscription table.

:class:`RemotingTransport` is one object that has its parts rather than inherits them: one connection pool, and a
role object for each kind of traffic, each in a module of its own and all on that one pool (built over it, or for
the requests brokers send us, given to it), because the broker keys a consumer by its connection (heartbeats, pulls
and the unregister must share it, and the broker's requests to the consumer arrive on it). Its public calls
(the :class:`~rocket_rebalance.runtime.transport.AdminTransport` protocol and the producer's) go to the part that
owns each:

* :mod:`.remoting_pool` (:class:`~.remoting_pool.RemotingPool`): one TCP connection per name server or broker
  address, the name servers tried in turn, brokers' addresses learnt from routes and cluster info, the blocking
  driver of the wire's operations, one reader thread for every connection and a small work pool (a fixed number of
  threads, however many brokers), TLS and ACL signing, and ``close``;
* this module: the consumer's wire (routes, cluster info, heartbeat, unregister, consumer list, offsets, locks,
  pulls, send back), each call the operation of :mod:`.remoting_calls` (shared with the asyncio transport) run by
  the pool's driver through one runner (:class:`blocking_op`), except the pull, which waits with no thread (a
  callback on the reader);
* :mod:`.remoting_inbound` (:class:`~.remoting_inbound.RemotingInbound`): the requests a broker sends us
  (notifications, running info, consume directly); the pool hands it what its reader receives, so it is built
  first and given to the pool (``attach`` and ``connect`` are its);
* :mod:`.remoting_admin` (:class:`~.remoting_admin.RemotingAdminReads`): the operator's reads (connections,
  topics, groups, running info, progress, assignment);
* :mod:`.remoting_producer` (:class:`~.remoting_producer.RemotingProducer`): creating topics, for tests, demos
  and the lab (sending is the wire's operation itself, run as the consumer's calls are).

What the parts share is built once, by :class:`~.remoting_calls.RemotingEnds` (the constructor this transport
shares with the asyncio one): the wire's calls and state, and the TLS context.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Concatenate, Generic, ParamSpec, Self, TypeVar, overload

from rocket_rebalance.model import AclCredentials, MessageQueue, TlsSettings
from rocket_rebalance.remoting import RemotingCommand
from rocket_rebalance.runtime.transport import (
    BrokerRequests,
    ConnectionRow,
    ConsumerReport,
    GroupNotified,
    NotificationStream,
    ProgressRow,
    PullResult,
    StreamEnded,
    TransportError,
)
from rocket_rebalance.runtime.transport.remoting_admin import RemotingAdminReads
from rocket_rebalance.runtime.transport.remoting_calls import RemotingCalls, RemotingEnds, pull_timeout
from rocket_rebalance.runtime.transport.remoting_inbound import RemotingInbound
from rocket_rebalance.runtime.transport.remoting_pool import RemotingPool
from rocket_rebalance.runtime.transport.remoting_producer import RemotingProducer
from rocket_rebalance.runtime.transport.remoting_wire import Op

__all__ = ["RemotingTransport"]

P = ParamSpec("P")
R = TypeVar("R")


class blocking_op(Generic[P, R]):
    """A consumer's call of :class:`RemotingTransport` that is only the wire's operation ``op`` (of
    :mod:`.remoting_calls`) run by the pool's blocking driver (:meth:`~.remoting_pool.RemotingPool.run`):
    ``lock = blocking_op(RemotingCalls.lock)`` makes ``transport.lock(broker, ...)`` mean
    ``pool.run(wire.lock(broker, ...))``.

    Why a runner rather than a method per call: each such method was that one line under the call's whole
    signature, written again in the asyncio transport (:class:`~.remoting_async.awaited_op`) and in both gRPC ones,
    so a new call meant its signature in eight places. The signature now lives in the operation and in the
    interface, and the type of what :meth:`__get__` returns, ``Callable[P, R]`` with ``P`` and ``R`` read off
    ``op``, is what mypy holds to :class:`~rocket_rebalance.runtime.transport.Transport` where a transport is
    given as one (:func:`~.wire.open_transport`), and what it checks every call against. Calls with logic of
    their own (the pull, connect, close) stay methods.

    Cheap on the hot path (the offsets, locks, heartbeats; never the pull): :meth:`__get__` binds the operation to
    this transport's wire and driver once per attribute access (a few attribute reads and one closure), and the call
    is then one Python frame around the driver, as the method it replaces was, with no look-up or reflection."""

    __slots__ = ("op",)

    def __init__(self, op: Callable[Concatenate[RemotingCalls, P], Op[R]]) -> None:
        self.op = op

    @overload
    def __get__(self, transport: None, owner: type[object]) -> Self: ...

    @overload
    def __get__(self, transport: RemotingTransport, owner: type[object]) -> Callable[P, R]: ...

    def __get__(self, transport: RemotingTransport | None, owner: type[object]) -> Self | Callable[P, R]:
        if transport is None:
            return self
        op, wire, run = self.op, transport._wire, transport._pool.run

        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            return run(op(wire, *args, **kwargs))

        return call


class RemotingTransport(RemotingEnds):
    """A RocketMQ client's wire to the name servers ``namesrv_addrs`` and the brokers their routes name: ``timeout``
    is each call's (a pull's socket waits its long poll and 15 s more), ``credentials`` sign every request, ``tls``
    encrypts every connection.

    The consumer's calls are the wire's operations run by the pool (:class:`blocking_op`), and the pull; the pool
    and the roles it is made of own the rest (see the module docstring), all on one connection per address."""

    def __init__(
        self,
        namesrv_addrs: Sequence[str],
        timeout: float = 5.0,
        credentials: AclCredentials | None = None,
        tls: TlsSettings | None = None,
    ) -> None:
        super().__init__(namesrv_addrs, timeout, credentials, tls)
        self._inbound = RemotingInbound(self._wire)
        self._pool = RemotingPool(self._wire, self._tls, timeout, self._inbound)
        self._admin = RemotingAdminReads(self._pool)
        self._producer = RemotingProducer(self._pool)

    # ------------------------------------------------------------------ the consumer's calls

    route = blocking_op(RemotingCalls.route)
    brokers = blocking_op(RemotingCalls.brokers)
    addresses = blocking_op(RemotingCalls.addresses)  # a broker set's, by broker ID (the lab waits for slaves)
    heartbeat = blocking_op(RemotingCalls.heartbeat)
    check_subscription = blocking_op(RemotingCalls.check_subscription)
    unregister = blocking_op(RemotingCalls.unregister)
    consumer_list = blocking_op(RemotingCalls.consumer_list)
    subscription_table = blocking_op(RemotingCalls.subscription_table)
    query_offsets = blocking_op(RemotingCalls.query_offsets)
    update_offsets = blocking_op(RemotingCalls.update_offsets)
    lock = blocking_op(RemotingCalls.lock)
    unlock = blocking_op(RemotingCalls.unlock)
    max_offset = blocking_op(RemotingCalls.max_offset)
    min_offset = blocking_op(RemotingCalls.min_offset)
    search_offset = blocking_op(RemotingCalls.search_offset)
    send_back = blocking_op(RemotingCalls.send_back)

    def pull(
        self,
        mq: MessageQueue,
        consumer_group: str,
        offset: int,
        max_messages: int,
        wait_ms: int,
        done: Callable[[PullResult | TransportError], None],
    ) -> None:
        """The wire's pull request, sent with its answer going to ``done`` on the reader: an idle queue's long
        poll holds no thread. The broker holds it up to ``wait_ms`` and the socket waits 15 s longer than that."""
        try:
            broker_id, address = self._pool.run(self._wire.pull_node(mq))
            connection = self._pool.connection(address)
        except TransportError as error:
            done(error)
            return

        def finished(answer: RemotingCommand | TransportError) -> None:
            if isinstance(answer, TransportError):
                done(answer)
                return
            try:
                done(self._wire.pulled(mq, broker_id, address, answer))
            except TransportError as error:
                done(error)

        command = self._wire.pull_request(mq, consumer_group, offset, max_messages, wait_ms)
        self._pool.request(connection, f"PULL_MESSAGE {mq}", command, pull_timeout(wait_ms), finished)

    # ------------------------------------------------------------------ the pool's: closing

    def close(self, timeout: float | None = None) -> bool:
        """Close every connection (what waits on one fails at once, and nothing is sent after this), then wait
        up to ``timeout`` (None: the call timeout) for the reader and the work pool to end; True when they did."""
        return self._pool.close(timeout)

    def keep_to_cpu(self, cpu: int) -> None:
        """The connections' reader, through which every pull's answer passes, runs on ``cpu`` only."""
        self._pool.keep_to_cpu(cpu)

    # ------------------------------------------------------------------ the inbound role's: what brokers ask of us

    def attach(self, client: BrokerRequests) -> None:
        """Answer brokers' requests about this consumer (running info, consume directly) from ``client``."""
        self._inbound.attach(client)

    def connect(self, broker: str, client_id: str, on_group: GroupNotified, on_end: StreamEnded) -> NotificationStream:
        """The broker's NOTIFY_CONSUMER_IDS_CHANGED requests on our connection to its master (while it is down, its
        slave: a connection that cannot open would count as a loss at every retry), until it closes."""
        _, address = self._pool.run(self._wire.reader(broker))
        return self._inbound.notifications(self._pool.connection(address), on_group, on_end)

    # ------------------------------------------------------------------ the admin role's: the operator's reads

    def consumer_connections(self, consumer_group: str) -> list[ConnectionRow]:
        return self._admin.consumer_connections(consumer_group)

    def topics(self) -> list[str]:
        return self._admin.topics()

    def consumer_groups(self) -> list[str]:
        return self._admin.consumer_groups()

    def consumer_report(self, consumer_group: str, client_id: str) -> ConsumerReport:
        return self._admin.consumer_report(consumer_group, client_id)

    def running_info(self, consumer_group: str, client_id: str) -> frozenset[MessageQueue]:
        return self._admin.running_info(consumer_group, client_id)

    def query_assignment(self, broker: str, topic: str, consumer_group: str, client_id: str) -> set[MessageQueue]:
        return self._admin.query_assignment(broker, topic, consumer_group, client_id)

    def consumer_progress(self, consumer_group: str, topic: str = "", owners: bool = True) -> list[ProgressRow]:
        return self._admin.consumer_progress(consumer_group, topic, owners)

    # ------------------------------------------------------------------ the producer role's

    send = blocking_op(RemotingCalls.send)  # one message after another

    def create_topic(self, topic: str, queue_nums: int, brokers: Sequence[str] = ()) -> None:
        self._producer.create_topic(topic, queue_nums, brokers)
