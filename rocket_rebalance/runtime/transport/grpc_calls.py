"""The stub's wire written once, for both gRPC transports to ``nameserver_stub``: :class:`.grpc.GrpcTransport`
(threads) and :class:`.grpc_async.AsyncGrpcTransport` (asyncio).

Everything above the channel lives here: which method each call is, the request it sends, how long it may take,
what its answer means, how a failure is named (:func:`rpc_error`), the token's call metadata, and the reading of a
``Connect`` stream. Each call is a :class:`StubCall` built by :class:`StubCalls`; a transport only carries it over
its channel (a blocking call, a callback future or an ``await``) and hands the reply to ``answer`` or the failure to
``recover``. So the two transports cannot drift apart in what they send or make of an answer: they share every line
but the carrying.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, NoReturn, TypeVar

import grpc

from rocket_rebalance._proto.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    broker_pb2,
    broker_pb2_grpc,
    common_pb2,
    namesrv_pb2,
    namesrv_pb2_grpc,
)
from rocket_rebalance.model import ConsumeFromWhere, MessageModel, MessageQueue
from rocket_rebalance.route import QueueData, RouteError, TopicRoute
from rocket_rebalance.runtime.transport import (
    GRPC_SCHEME,
    AsyncBrokerRequests,
    BrokerRequests,
    ConnectionRow,
    ConsumerReport,
    GroupNotified,
    GroupRegistration,
    GroupSubscription,
    Message,
    ProgressRow,
    PullResult,
    PullStatus,
    QueueRunInfo,
    StreamEnd,
    StreamEnded,
    SubscriptionRefusedError,
    TopicConsumeStatus,
    TransportError,
    reported_expression,
    running_info_properties,
)
from rocket_rebalance.subscription import TAG, SubscriptionExpression

__all__ = [
    "ConnectStream",
    "Service",
    "StubCall",
    "StubCalls",
    "call_metadata",
    "closed_error",
    "read_connect_stream",
    "route_from_wire",
    "rpc_error",
    "service_stubs",
]

log = logging.getLogger("rocket_rebalance.runtime.grpc")

T = TypeVar("T")
Service = Literal["namesrv", "broker", "admin"]
_REPORT_GRACE = 2.0  # seconds our deadline exceeds the stub's wait, so its DEADLINE_EXCEEDED (naming who) arrives

_CONSUME_FROM = {
    ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET: common_pb2.CONSUME_FROM_LAST_OFFSET,
    ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET: common_pb2.CONSUME_FROM_FIRST_OFFSET,
    ConsumeFromWhere.CONSUME_FROM_TIMESTAMP: common_pb2.CONSUME_FROM_TIMESTAMP,
}
_MESSAGE_MODEL = {
    common_pb2.MESSAGE_MODEL_CLUSTERING: "CLUSTERING",
    common_pb2.MESSAGE_MODEL_BROADCASTING: "BROADCASTING",
}
_PULL_STATUS = {
    broker_pb2.FOUND: PullStatus.FOUND,
    broker_pb2.NO_NEW_MSG: PullStatus.NO_NEW_MSG,
    broker_pb2.NO_MATCHED_MSG: PullStatus.NO_MATCHED_MSG,
    broker_pb2.OFFSET_ILLEGAL: PullStatus.OFFSET_ILLEGAL,
}


def call_metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    """The call metadata that carries the stub's shared token (none without one). gRPC metadata is printable
    ASCII: a token with another character is refused here, naming its position, never the secret itself."""
    if token is None:
        return ()
    bad = next((i for i, ch in enumerate(token) if not " " <= ch <= "~"), None)
    if bad is not None:
        raise ValueError(f"the token has a character gRPC cannot send at position {bad + 1}: use ASCII")
    return (("authorization", f"Bearer {token}"),) if token else ()


def service_stubs(channel: grpc.Channel | grpc.aio.Channel) -> dict[Service, Any]:
    """The stub's three services on ``channel``: the generated stubs make blocking or awaitable methods according
    to the channel they are given, so both transports look a :class:`StubCall`'s method up the same way."""
    return {
        "namesrv": namesrv_pb2_grpc.NameServerStub(channel),
        "broker": broker_pb2_grpc.BrokerStub(channel),
        "admin": admin_pb2_grpc.AdminStub(channel),
    }


def rpc_error(call: str, address: str, error: grpc.RpcError) -> TransportError:
    """A failed gRPC call as :class:`TransportError`, with the status name as ``code`` (either channel's error)."""
    if isinstance(error, grpc.Call | grpc.aio.AioRpcError):
        code = error.code()
        details = error.details() or ""
        if code == grpc.StatusCode.UNAVAILABLE and "failed to connect" in details and "Socket closed" in details:
            # The server took the TCP connection and hung up on HTTP/2's first bytes: what a RocketMQ name server or
            # broker does (its frame decoder reads them as a frame longer than 16 MiB and closes the channel). A
            # connection lost once it was up ("Stream removed (Socket closed)": a stub that died) is UNAVAILABLE.
            return TransportError(
                f"the server at {address} is not nameserver_stub: it closed the connection on gRPC's first bytes, "
                f"as a RocketMQ name server or broker does (for RocketMQ, give {address} without grpc://)",
                "FAILED_PRECONDITION",
            )
        return TransportError(f"{call} at {address}: {code.name} {details}", code.name)
    return TransportError(f"{call} at {address}: {error}")


def closed_error(call: str, address: str, code: str = "") -> TransportError:
    """A call made after the transport closed: no request leaves any more."""
    return TransportError(f"{call} at {address}: the transport is closed", code)


def route_from_wire(topic: str, answer: namesrv_pb2.TopicRouteData) -> TopicRoute:
    """A GetRouteInfoByTopic answer as the library's :class:`TopicRoute`."""
    datas = tuple(QueueData(d.broker_name, d.read_queue_nums, d.write_queue_nums, d.perm) for d in answer.queue_datas)
    try:
        return TopicRoute(topic, datas)
    except RouteError as error:
        raise TransportError(f"the name server's route is unusable: {error}", "OUT_OF_RANGE") from None


def _wire_queue(mq: MessageQueue) -> common_pb2.MessageQueue:
    return common_pb2.MessageQueue(topic=mq.topic, broker_name=mq.broker_name, queue_id=mq.queue_id)


def _queue(wire: common_pb2.MessageQueue) -> MessageQueue:
    return MessageQueue(wire.topic, wire.broker_name, wire.queue_id)


def _wire_row(mq: MessageQueue, row: QueueRunInfo) -> common_pb2.QueueRunningInfo:
    return common_pb2.QueueRunningInfo(
        queue=_wire_queue(mq),
        commit_offset=row.commit_offset,
        cached_count=row.cached_count,
        cached_min_offset=row.cached_min_offset,
        cached_max_offset=row.cached_max_offset,
        locked=row.locked,
        dropped=row.dropped,
        last_pull_timestamp_ms=row.last_pull_ms,
        last_consume_timestamp_ms=row.last_consume_ms,
        cached_size_mib=row.cached_size_mib,
        transaction_min_offset=row.transaction_min_offset,
        transaction_max_offset=row.transaction_max_offset,
        transaction_count=row.transaction_count,
        try_unlock_times=row.try_unlock_times,
        last_lock_timestamp_ms=row.last_lock_ms,
    )


def _wire_status(topic: str, status: TopicConsumeStatus) -> common_pb2.TopicConsumeStatus:
    return common_pb2.TopicConsumeStatus(topic=topic, **dataclasses.asdict(status))


def _status(wire: common_pb2.TopicConsumeStatus) -> TopicConsumeStatus:
    return TopicConsumeStatus(
        wire.pull_rt,
        wire.pull_tps,
        wire.consume_rt,
        wire.consume_ok_tps,
        wire.consume_failed_tps,
        wire.consume_failed_msgs,
    )


def _raise(error: TransportError) -> NoReturn:
    raise error


def _nothing(_answer: object) -> None:
    return None


@dataclass(frozen=True)
class StubCall(Generic[T]):
    """One unary call to the stub, ready to carry: ``service``'s ``method`` with ``request`` and a deadline of
    ``timeout`` seconds; ``answer`` makes the library's result of the reply, ``recover`` of a failure (by
    default it raises the failure)."""

    service: Service
    method: str
    request: Any
    answer: Callable[[Any], T]
    timeout: float
    recover: Callable[[TransportError], T] = _raise


class StubCalls:
    """Every call a transport makes to the stub at ``address``, as :class:`StubCall` values, and the little state
    those calls share: the subscription version our heartbeats carry, and each subscription's tag expression
    (the stub's pull names it, where a RocketMQ broker reads it from the heartbeat). ``timeout`` is each call's
    deadline (a pull's: the time it may wait at the stub on top)."""

    def __init__(self, address: str, timeout: float) -> None:
        self.address = address
        self.timeout = timeout
        self.sub_version = time.time_ns() // 1000  # as Java's millisecond version, finer: consumers of one process
        self._tag_expressions: dict[tuple[str, str], str] = {}  # (group, topic) -> sub_string, from heartbeats

    def _call(
        self,
        service: Service,
        method: str,
        request: Any,
        answer: Callable[[Any], T],
        timeout: float | None = None,
        recover: Callable[[TransportError], T] = _raise,
    ) -> StubCall[T]:
        return StubCall(service, method, request, answer, self.timeout if timeout is None else timeout, recover)

    def route(self, topic: str) -> StubCall[TopicRoute]:
        request = namesrv_pb2.GetRouteInfoByTopicRequest(topic=topic)
        return self._call("namesrv", "GetRouteInfoByTopic", request, lambda answer: route_from_wire(topic, answer))

    def heartbeat(self, broker: str, client_id: str, group: GroupRegistration) -> StubCall[None]:
        data = broker_pb2.ConsumerData(
            group_name=group.consumer_group,
            consume_type=common_pb2.CONSUME_TYPE_PUSH if group.push else common_pb2.CONSUME_TYPE_PULL,
            message_model=common_pb2.MESSAGE_MODEL_CLUSTERING
            if group.message_model is MessageModel.CLUSTERING
            else common_pb2.MESSAGE_MODEL_BROADCASTING,
            consume_from_where=_CONSUME_FROM[group.consume_from_where],
            subscriptions=[
                common_pb2.SubscriptionData(
                    topic=topic, sub_string=self._tag_expression(group, topic), sub_version=self.sub_version
                )
                for topic in group.topics
            ],
        )
        request = broker_pb2.HeartbeatRequest(broker_name=broker, client_id=client_id, consumer_datas=[data])
        return self._call("broker", "HeartBeat", request, _nothing)

    def _tag_expression(self, group: GroupRegistration, topic: str) -> str:
        """The stub filters by tags as a broker does; the pulls of ``topic`` name the expression (the stub's pull
        carries it, where a RocketMQ broker reads it from the heartbeat)."""
        expression = group.expression(topic)
        self.check_subscription(topic, expression)
        self._tag_expressions[(group.consumer_group, topic)] = expression.sub_string
        return expression.sub_string

    def check_subscription(self, topic: str, expression: SubscriptionExpression) -> None:
        """Tag expressions pass (the stub filters by them); SQL92 is refused in one line, without a call."""
        if expression.expression_type != TAG:
            raise SubscriptionRefusedError(
                f"subscription of {topic} at {self.address}: nameserver_stub filters by tags only, "
                f"not by {expression.expression_type} ({expression.expression!r})",
                "UNIMPLEMENTED",
            )

    def refuse_send_back(self) -> NoReturn:
        """The stub keeps no retry topics: sending a message back is refused without a call."""
        raise TransportError(
            f"send back at {self.address}: nameserver_stub keeps no retry topics; the message is retried locally",
            "UNIMPLEMENTED",
        )

    def unregister(self, broker: str, client_id: str, consumer_group: str) -> StubCall[None]:
        request = broker_pb2.UnregisterClientRequest(
            broker_name=broker, client_id=client_id, consumer_group=consumer_group
        )
        return self._call("broker", "UnregisterClient", request, _nothing)

    def subscription_table(self, broker: str, consumer_group: str) -> StubCall[dict[str, GroupSubscription]]:
        where = f"ConsumerConnection {consumer_group} at {broker}"

        def answer(reply: admin_pb2.ConsumerConnectionResponse) -> dict[str, GroupSubscription]:
            return {
                s.topic: GroupSubscription(
                    reported_expression(s.sub_string, s.expression_type, where), s.sub_version == self.sub_version
                )
                for s in reply.subscription_table
            }

        def offline(error: TransportError) -> dict[str, GroupSubscription]:
            if error.code == "NOT_FOUND":
                return {}  # the group is not online there
            raise error

        request = admin_pb2.ConsumerConnectionRequest(consumer_group=consumer_group, broker_name=broker)
        return self._call("admin", "ConsumerConnection", request, answer, recover=offline)

    def consumer_list(self, broker: str, consumer_group: str) -> StubCall[list[str]]:
        request = broker_pb2.GetConsumerListByGroupRequest(broker_name=broker, consumer_group=consumer_group)
        return self._call("broker", "GetConsumerListByGroup", request, lambda answer: list(answer.consumer_id_list))

    def query_offsets(
        self, broker: str, consumer_group: str, queues: Sequence[MessageQueue]
    ) -> StubCall[dict[MessageQueue, int | None]]:
        request = broker_pb2.QueryConsumerOffsetRequest(
            broker_name=broker, consumer_group=consumer_group, queues=[_wire_queue(mq) for mq in queues]
        )

        def answer(reply: broker_pb2.QueryConsumerOffsetResponse) -> dict[MessageQueue, int | None]:
            return {_queue(o.queue): (o.offset if o.found else None) for o in reply.offsets}

        return self._call("broker", "QueryConsumerOffset", request, answer)

    def update_offsets(
        self, broker: str, consumer_group: str, client_id: str, offsets: Mapping[MessageQueue, int]
    ) -> StubCall[dict[MessageQueue, int]]:
        request = broker_pb2.UpdateConsumerOffsetRequest(
            broker_name=broker,
            consumer_group=consumer_group,
            client_id=client_id,
            offsets=[common_pb2.QueueOffset(queue=_wire_queue(mq), offset=offset) for mq, offset in offsets.items()],
        )

        def answer(reply: broker_pb2.UpdateConsumerOffsetResponse) -> dict[MessageQueue, int]:
            return {_queue(r.queue): r.stored_offset for r in reply.results}

        return self._call("broker", "UpdateConsumerOffset", request, answer)

    def lock(
        self, broker: str, consumer_group: str, client_id: str, queues: Sequence[MessageQueue]
    ) -> StubCall[set[MessageQueue]]:
        request = broker_pb2.LockBatchMQRequest(
            broker_name=broker,
            consumer_group=consumer_group,
            client_id=client_id,
            queues=[_wire_queue(q) for q in queues],
        )
        return self._call("broker", "LockBatchMQ", request, lambda answer: {_queue(q) for q in answer.locked_queues})

    def unlock(
        self, broker: str, consumer_group: str, client_id: str, queues: Sequence[MessageQueue]
    ) -> StubCall[None]:
        request = broker_pb2.UnlockBatchMQRequest(
            broker_name=broker,
            consumer_group=consumer_group,
            client_id=client_id,
            queues=[_wire_queue(q) for q in queues],
        )
        return self._call("broker", "UnlockBatchMQ", request, _nothing)

    def pull(
        self, mq: MessageQueue, consumer_group: str, offset: int, max_messages: int, wait_ms: int
    ) -> StubCall[PullResult]:
        """A pull's deadline is the call timeout on top of the time it may wait at the stub."""
        request = broker_pb2.PullMessageRequest(
            broker_name=mq.broker_name,
            consumer_group=consumer_group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=offset,
            max_msg_nums=max_messages,
            max_wait_ms=wait_ms,
            sub_expression=self._tag_expressions.get((consumer_group, mq.topic), ""),
        )

        def answer(reply: broker_pb2.PullMessageResponse) -> PullResult:
            messages = tuple(
                Message(mq, m.queue_offset, m.msg_id, m.body, m.tags, m.keys, dict(m.properties))
                for m in reply.messages
            )
            return PullResult(_PULL_STATUS.get(reply.status, PullStatus.NO_NEW_MSG), reply.next_begin_offset, messages)

        return self._call("broker", "PullMessage", request, answer, self.timeout + wait_ms / 1000)

    def max_offset(self, mq: MessageQueue) -> StubCall[int]:
        request = broker_pb2.GetMaxOffsetRequest(broker_name=mq.broker_name, topic=mq.topic, queue_id=mq.queue_id)
        return self._call("broker", "GetMaxOffset", request, lambda answer: int(answer.offset))

    def min_offset(self, mq: MessageQueue) -> StubCall[int]:
        request = broker_pb2.GetMinOffsetRequest(broker_name=mq.broker_name, topic=mq.topic, queue_id=mq.queue_id)
        return self._call("broker", "GetMinOffset", request, lambda answer: int(answer.offset))

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> StubCall[int]:
        request = broker_pb2.SearchOffsetByTimestampRequest(
            broker_name=mq.broker_name, topic=mq.topic, queue_id=mq.queue_id, timestamp_ms=timestamp_ms
        )
        return self._call("broker", "SearchOffsetByTimestamp", request, lambda answer: int(answer.offset))

    def send(
        self,
        topic: str,
        broker: str,
        bodies: Sequence[bytes],
        queue_id: int | None = None,
        tags: str = "",
        keys: str = "",
        properties: Mapping[str, str] | None = None,
    ) -> StubCall[tuple[int, list[int]]]:
        user = dict(properties or {})
        request = broker_pb2.SendMessageRequest(
            broker_name=broker,
            topic=topic,
            messages=[broker_pb2.MessageToSend(body=body, tags=tags, keys=keys, properties=user) for body in bodies],
        )
        if queue_id is not None:
            request.queue_id = queue_id

        def answer(reply: broker_pb2.SendMessageResponse) -> tuple[int, list[int]]:
            return reply.queue_id, [result.queue_offset for result in reply.results]

        return self._call("broker", "SendMessage", request, answer)

    def running_info_report(
        self,
        client: BrokerRequests | AsyncBrokerRequests | None,
        broker: str,
        client_id: str,
        request_id: str,
        consumer_group: str,
        closed: Callable[[], bool],
    ) -> StubCall[None] | None:
        """The answer to one running-info request the stub relayed on our ``Connect`` stream to ``broker``, from
        ``client``'s running info; None where there is nothing to send (no client attached, or its running info
        could not be built: logged, and the operator's call ends by its timeout). A failed answer is logged too,
        except once the transport is ``closed`` (closing ends the channel under an answer in flight)."""
        if client is None:
            log.warning("%s asked %s for its running info, but no consumer is attached to answer", broker, client_id)
            return None
        try:
            info = client.running_info()
        except Exception:
            log.exception("running info for %s could not be built", broker)
            return None
        request = broker_pb2.ReportRunningInfoRequest(
            broker_name=broker,
            client_id=client_id,
            request_id=request_id,
            consumer_group=consumer_group,
            queues=[_wire_row(mq, row) for mq, row in info.queues.items()],
            properties=running_info_properties(info, GRPC_SCHEME + self.address),
            status=[_wire_status(topic, status) for topic, status in info.status.items()],
        )

        def failed(error: TransportError) -> None:
            if not closed():
                log.warning("answering %s's running-info request failed: %s", broker, error)

        return self._call("broker", "ReportRunningInfo", request, _nothing, recover=failed)

    # -- the operator's calls (the threaded transport's AdminTransport) ------------------------------------------

    def create_topic(self, broker: str, topic: str, queue_nums: int) -> StubCall[None]:
        request = admin_pb2.CreateOrUpdateTopicRequest(
            broker_name=broker, topic=topic, read_queue_nums=queue_nums, write_queue_nums=queue_nums
        )
        return self._call("admin", "CreateOrUpdateTopic", request, _nothing)

    def brokers(self) -> StubCall[dict[str, str]]:
        def answer(reply: admin_pb2.GetBrokerClusterInfoResponse) -> dict[str, str]:
            return {b.broker_name: b.address for b in reply.brokers if b.up}

        return self._call("admin", "GetBrokerClusterInfo", admin_pb2.GetBrokerClusterInfoRequest(), answer)

    def consumer_progress(self, consumer_group: str, topic: str) -> StubCall[list[ProgressRow]]:
        request = admin_pb2.ConsumerProgressRequest(consumer_group=consumer_group, topic=topic)

        def answer(reply: admin_pb2.ConsumerProgressResponse) -> list[ProgressRow]:
            return [
                ProgressRow(_queue(q.queue), q.broker_offset, q.consumer_offset, q.diff, q.last_owner, q.lock_owner)
                for q in reply.queues
            ]

        return self._call("admin", "ConsumerProgress", request, answer)

    def consumer_connections(self, consumer_group: str) -> StubCall[list[ConnectionRow]]:
        request = admin_pb2.ConsumerConnectionRequest(consumer_group=consumer_group)

        def answer(reply: admin_pb2.ConsumerConnectionResponse) -> list[ConnectionRow]:
            return [
                ConnectionRow(
                    c.client_id,
                    c.broker_name,
                    c.connected,
                    c.last_heartbeat_ms_ago,
                    tuple(s.topic for s in c.subscriptions),
                    message_model=_MESSAGE_MODEL.get(c.message_model, ""),
                    subscriptions=tuple(
                        (s.topic, reported_expression(s.sub_string, s.expression_type, f"connection of {c.client_id}"))
                        for s in c.subscriptions
                    ),
                )
                for c in reply.connections
            ]

        return self._call("admin", "ConsumerConnection", request, answer)

    def topics(self) -> StubCall[list[str]]:
        return self._call("admin", "ListTopics", admin_pb2.ListTopicsRequest(), lambda answer: list(answer.topics))

    def consumer_groups(self) -> StubCall[list[str]]:
        request = admin_pb2.ListConsumerGroupsRequest()
        return self._call("admin", "ListConsumerGroups", request, lambda answer: list(answer.consumer_groups))

    def consumer_report(self, consumer_group: str, client_id: str) -> StubCall[ConsumerReport]:
        """The stub relays the question on the consumer's stream and waits our timeout for the answer: NOT_FOUND
        when the consumer has no open connection, DEADLINE_EXCEEDED when it does not answer in time, UNAVAILABLE
        when its connection closes first. Our own deadline is longer, so that the stub's DEADLINE_EXCEEDED, naming
        who did not answer, arrives."""
        request = admin_pb2.ConsumerRunningInfoRequest(
            consumer_group=consumer_group, client_id=client_id, timeout_ms=max(1, round(self.timeout * 1000))
        )

        def answer(reply: admin_pb2.ConsumerRunningInfoResponse) -> ConsumerReport:
            held = frozenset(_queue(row.queue) for row in reply.queues if not row.dropped)
            status = {row.topic: _status(row) for row in reply.status}
            return ConsumerReport(client_id, held, dict(reply.properties), status=status)

        return self._call("admin", "ConsumerRunningInfo", request, answer, self.timeout + _REPORT_GRACE)


class ConnectStream(StreamEnd):
    """One ``Connect`` stream, read by :func:`read_connect_stream` on an asyncio loop (the threaded transport's
    streams loop, or the asyncio transport's own): group names go to ``on_group``, running-info requests to
    ``asked(request_id, consumer_group)`` (both must return at once), the ``connected`` greeting to
    :meth:`confirm` (the broker lists the client ID once per open stream, from then on), and the
    stream's end to ``on_end``, once. ``future`` is what reads it (a thread-safe future of the streams loop, or a
    task), cancelled by :meth:`cancel`."""

    def __init__(self, on_group: GroupNotified, on_end: StreamEnded, asked: Callable[[str, str], None]) -> None:
        super().__init__(on_end, confirmed=False)
        self._on_group = on_group
        self._asked = asked
        self.future: concurrent.futures.Future[None] | asyncio.Future[None] | None = None

    def deliver(self, notification: broker_pb2.BrokerNotification) -> None:
        kind = notification.WhichOneof("notification")
        if kind == "connected":
            self.confirm()
        elif kind == "consumer_ids_changed":
            self._on_group(notification.consumer_ids_changed.consumer_group)
        elif kind == "running_info_request":
            request = notification.running_info_request
            self._asked(request.request_id, request.consumer_group)

    def cancel(self) -> None:
        self.end(None)  # at once: a stream cancelled before the loop began it would never say so itself
        if self.future is not None:
            self.future.cancel()


async def read_connect_stream(
    channel: grpc.aio.Channel,
    request: broker_pb2.ConnectRequest,
    metadata: tuple[tuple[str, str], ...],
    address: str,
    stream: ConnectStream,
) -> None:
    """Read one ``Connect`` stream on ``channel`` (an asyncio channel of the running loop) into ``stream`` until it
    ends, then tell ``stream`` how: None when cancelled (``cancel()``, or the transport's close), the error
    otherwise. Never raises: a failure that is no gRPC status still reaches ``on_end`` rather than vanishing."""
    ended: TransportError | None = None
    try:
        call = broker_pb2_grpc.BrokerStub(channel).Connect(request, metadata=metadata)
        async for notification in call:
            try:
                stream.deliver(notification)
            except Exception:  # a failing callback must not end the stream
                log.exception("handling a notification from %s failed", request.broker_name)
    except asyncio.CancelledError:
        pass  # cancel() or close(): the stream already said it ended, or says so below
    except grpc.aio.AioRpcError as error:
        if error.code() != grpc.StatusCode.CANCELLED:
            ended = rpc_error("Connect", address, error)
    except Exception as error:  # the channel closed under the call (grpc's UsageError), or worse: on_end hears it
        ended = TransportError(f"Connect at {address}: {error}")
    stream.end(ended)
