"""The gRPC transport to ``nameserver_stub`` (chosen with a ``grpc://host:port`` address).

Every logical broker is served at the stub's own address, so one channel carries every call; broker names travel
in the requests. Failures become :class:`TransportError` with the gRPC status name as ``code``.

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
import concurrent.futures
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TypeVar

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
    BrokerRequests,
    ConnectionRow,
    ConsumerReport,
    GroupNotified,
    GroupRegistration,
    GroupSubscription,
    Message,
    NotificationStream,
    ProgressRow,
    PullResult,
    PullStatus,
    QueueRunInfo,
    StreamEnded,
    SubscriptionRefusedError,
    TopicConsumeStatus,
    TransportError,
    reported_expression,
    running_info_properties,
)
from rocket_rebalance.runtime.workers import DaemonPool
from rocket_rebalance.subscription import TAG, SubscriptionExpression

__all__ = ["GrpcTransport", "route_from_wire"]

log = logging.getLogger("rocket_rebalance.runtime.grpc")

T = TypeVar("T")
_ANSWER_THREADS = 2  # running-info answers in flight at once; the stub bounds how many it asks for
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


class _GrpcNotifications:
    """One ``Connect`` stream, read on the transport's stream loop (:class:`_Streams`): group names go to
    ``on_group``, running-info requests to ``asked(request_id, consumer_group)`` (both must return at once), the
    ``connected`` greeting nowhere, and the stream's end to ``on_end``, once."""

    def __init__(self, on_group: GroupNotified, on_end: StreamEnded, asked: Callable[[str, str], None]) -> None:
        self._on_group = on_group
        self._on_end = on_end
        self._asked = asked
        self._ended = False
        self._lock = threading.Lock()
        self.future: concurrent.futures.Future[None] | None = None

    def deliver(self, notification: broker_pb2.BrokerNotification) -> None:
        kind = notification.WhichOneof("notification")
        if kind == "consumer_ids_changed":
            self._on_group(notification.consumer_ids_changed.consumer_group)
        elif kind == "running_info_request":
            request = notification.running_info_request
            self._asked(request.request_id, request.consumer_group)

    def end(self, error: TransportError | None) -> None:
        with self._lock:
            if self._ended:
                return
            self._ended = True
        self._on_end(error)

    def cancel(self) -> None:
        self.end(None)  # at once: a stream cancelled before the loop began it would never say so itself
        if self.future is not None:
            self.future.cancel()


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

    def open(self, request: broker_pb2.ConnectRequest, stream: _GrpcNotifications) -> None:
        with self._lock:
            if self._closed:
                raise TransportError(f"Connect at {self._address}: the transport is closed", "UNAVAILABLE")
            stream.future = asyncio.run_coroutine_threadsafe(self._read(request, stream), _streams_loop())

    async def _read(self, request: broker_pb2.ConnectRequest, stream: _GrpcNotifications) -> None:
        ended: TransportError | None = None
        if self._closed:  # closed after open() scheduled this: close()'s stop() did not see it
            stream.end(None)
            return
        task = asyncio.current_task()
        assert task is not None  # a coroutine run by the loop always has its task
        self._tasks.add(task)
        try:
            if self._channel is None:  # an asyncio channel belongs to the loop it was made on
                self._channel = grpc.aio.insecure_channel(self._address)
            call = broker_pb2_grpc.BrokerStub(self._channel).Connect(request, metadata=self._metadata)
            async for notification in call:
                try:
                    stream.deliver(notification)
                except Exception:  # a failing callback must not end the stream
                    log.exception("handling a notification from %s failed", request.broker_name)
        except asyncio.CancelledError:
            pass  # cancel() or close(): the stream already said it ended, or says so below
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.CANCELLED:
                ended = _error("Connect", self._address, error)
        finally:
            self._tasks.discard(task)
        stream.end(ended)

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


def _error(call: str, address: str, error: grpc.RpcError) -> TransportError:
    if isinstance(error, grpc.Call | grpc.aio.AioRpcError):
        code = error.code()
        details = error.details() or ""
        if code == grpc.StatusCode.UNAVAILABLE and "Socket closed" in details:
            # The server took the TCP connection and hung up on HTTP/2's first bytes: what a RocketMQ name server or
            # broker does (its frame decoder reads them as a frame longer than 16 MiB and closes the channel).
            return TransportError(
                f"the server at {address} is not nameserver_stub: it closed the connection on gRPC's first bytes, "
                f"as a RocketMQ name server or broker does (for RocketMQ, give {address} without grpc://)",
                "FAILED_PRECONDITION",
            )
        return TransportError(f"{call} at {address}: {code.name} {details}", code.name)
    return TransportError(f"{call} at {address}: {error}")


class GrpcTransport:
    """The gRPC transport to ``nameserver_stub`` at ``address`` (``host:port`` or ``grpc://host:port``), with an
    optional shared token."""

    def __init__(self, address: str, token: str | None = None, timeout: float = 5.0) -> None:
        address = address.removeprefix(GRPC_SCHEME)
        if token is not None:
            bad = next((i for i, ch in enumerate(token) if not " " <= ch <= "~"), None)
            if bad is not None:  # gRPC metadata is printable ASCII; the position, never the secret itself
                raise ValueError(f"the token has a character gRPC cannot send at position {bad + 1}: use ASCII")
        self.address = address
        self.long_poll_ms = 1000
        self._timeout = timeout
        self._sub_version = time.time_ns() // 1000  # as Java's millisecond version, finer: consumers of one process
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self._channel = grpc.insecure_channel(address)
        self._namesrv = namesrv_pb2_grpc.NameServerStub(self._channel)
        self._broker = broker_pb2_grpc.BrokerStub(self._channel)
        self._admin = admin_pb2_grpc.AdminStub(self._channel)
        self._closed = threading.Event()
        self._client: BrokerRequests | None = None
        self._answers = DaemonPool(_ANSWER_THREADS, "rr-grpc-answer", self._answer_failed)
        self._streams = _Streams(address, self._metadata)
        self._tag_expressions: dict[tuple[str, str], str] = {}  # (group, topic) -> sub_string, from heartbeats

    def _call(self, name: str, method: Callable[..., T], request: object, timeout: float | None = None) -> T:
        try:
            return method(request, timeout=timeout or self._timeout, metadata=self._metadata)
        except grpc.RpcError as error:
            raise _error(name, self.address, error) from None
        except ValueError as error:  # a closed channel
            raise TransportError(f"{name} at {self.address}: {error}") from None

    def route(self, topic: str) -> TopicRoute:
        answer = self._call(
            "GetRouteInfoByTopic",
            self._namesrv.GetRouteInfoByTopic,
            namesrv_pb2.GetRouteInfoByTopicRequest(topic=topic),
        )
        return route_from_wire(topic, answer)

    def heartbeat(self, broker: str, client_id: str, group: GroupRegistration) -> None:
        data = broker_pb2.ConsumerData(
            group_name=group.consumer_group,
            consume_type=common_pb2.CONSUME_TYPE_PUSH if group.push else common_pb2.CONSUME_TYPE_PULL,
            message_model=common_pb2.MESSAGE_MODEL_CLUSTERING
            if group.message_model is MessageModel.CLUSTERING
            else common_pb2.MESSAGE_MODEL_BROADCASTING,
            consume_from_where=_CONSUME_FROM[group.consume_from_where],
            subscriptions=[
                common_pb2.SubscriptionData(
                    topic=topic, sub_string=self._tag_expression(group, topic), sub_version=self._sub_version
                )
                for topic in group.topics
            ],
        )
        request = broker_pb2.HeartbeatRequest(broker_name=broker, client_id=client_id, consumer_datas=[data])
        self._call("HeartBeat", self._broker.HeartBeat, request)

    def unregister(self, broker: str, client_id: str, consumer_group: str) -> None:
        request = broker_pb2.UnregisterClientRequest(
            broker_name=broker, client_id=client_id, consumer_group=consumer_group
        )
        self._call("UnregisterClient", self._broker.UnregisterClient, request)

    def _tag_expression(self, group: GroupRegistration, topic: str) -> str:
        """The stub filters by tags as a broker does; the pulls of ``topic`` name the expression (the stub's pull
        carries it, where a RocketMQ broker reads it from the heartbeat)."""
        expression = group.expression(topic)
        self._refuse_sql92(topic, expression)
        self._tag_expressions[(group.consumer_group, topic)] = expression.sub_string
        return expression.sub_string

    def _refuse_sql92(self, topic: str, expression: SubscriptionExpression) -> None:
        if expression.expression_type != TAG:
            raise SubscriptionRefusedError(
                f"subscription of {topic} at {self.address}: nameserver_stub filters by tags only, "
                f"not by {expression.expression_type} ({expression.expression!r})",
                "UNIMPLEMENTED",
            )

    def check_subscription(
        self, broker: str, consumer_group: str, client_id: str, topic: str, expression: SubscriptionExpression
    ) -> None:
        """Tag expressions pass (the stub filters by them); SQL92 is refused in one line."""
        self._refuse_sql92(topic, expression)

    def subscription_table(self, broker: str, consumer_group: str) -> dict[str, GroupSubscription]:
        request = admin_pb2.ConsumerConnectionRequest(consumer_group=consumer_group, broker_name=broker)
        try:
            answer = self._call("ConsumerConnection", self._admin.ConsumerConnection, request)
        except TransportError as error:
            if error.code == "NOT_FOUND":
                return {}  # the group is not online there
            raise
        where = f"ConsumerConnection {consumer_group} at {broker}"
        return {
            s.topic: GroupSubscription(
                reported_expression(s.sub_string, s.expression_type, where), s.sub_version == self._sub_version
            )
            for s in answer.subscription_table
        }

    def consumer_list(self, broker: str, consumer_group: str) -> list[str]:
        request = broker_pb2.GetConsumerListByGroupRequest(broker_name=broker, consumer_group=consumer_group)
        return list(self._call("GetConsumerListByGroup", self._broker.GetConsumerListByGroup, request).consumer_id_list)

    def query_offsets(
        self, broker: str, consumer_group: str, queues: Sequence[MessageQueue]
    ) -> dict[MessageQueue, int | None]:
        request = broker_pb2.QueryConsumerOffsetRequest(
            broker_name=broker, consumer_group=consumer_group, queues=[_wire_queue(mq) for mq in queues]
        )
        answer = self._call("QueryConsumerOffset", self._broker.QueryConsumerOffset, request)
        return {_queue(o.queue): (o.offset if o.found else None) for o in answer.offsets}

    def update_offsets(
        self, broker: str, consumer_group: str, client_id: str, offsets: Mapping[MessageQueue, int]
    ) -> dict[MessageQueue, int]:
        request = broker_pb2.UpdateConsumerOffsetRequest(
            broker_name=broker,
            consumer_group=consumer_group,
            client_id=client_id,
            offsets=[common_pb2.QueueOffset(queue=_wire_queue(mq), offset=offset) for mq, offset in offsets.items()],
        )
        answer = self._call("UpdateConsumerOffset", self._broker.UpdateConsumerOffset, request)
        return {_queue(r.queue): r.stored_offset for r in answer.results}

    def lock(
        self, broker: str, consumer_group: str, client_id: str, queues: Sequence[MessageQueue]
    ) -> set[MessageQueue]:
        request = broker_pb2.LockBatchMQRequest(
            broker_name=broker,
            consumer_group=consumer_group,
            client_id=client_id,
            queues=[_wire_queue(q) for q in queues],
        )
        return {_queue(q) for q in self._call("LockBatchMQ", self._broker.LockBatchMQ, request).locked_queues}

    def unlock(self, broker: str, consumer_group: str, client_id: str, queues: Sequence[MessageQueue]) -> None:
        request = broker_pb2.UnlockBatchMQRequest(
            broker_name=broker,
            consumer_group=consumer_group,
            client_id=client_id,
            queues=[_wire_queue(q) for q in queues],
        )
        self._call("UnlockBatchMQ", self._broker.UnlockBatchMQ, request)

    def pull(
        self,
        mq: MessageQueue,
        consumer_group: str,
        offset: int,
        max_messages: int,
        wait_ms: int,
        done: Callable[[PullResult | TransportError], None],
    ) -> None:
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

        def finished(future: grpc.Future) -> None:
            try:
                answer = future.result()
            except grpc.RpcError as error:
                done(_error("PullMessage", self.address, error))
                return
            except grpc.FutureCancelledError:
                done(TransportError(f"PullMessage at {self.address}: cancelled", "CANCELLED"))
                return
            messages = tuple(
                Message(mq, m.queue_offset, m.msg_id, m.body, m.tags, m.keys, dict(m.properties))
                for m in answer.messages
            )
            status = _PULL_STATUS.get(answer.status, PullStatus.NO_NEW_MSG)
            done(PullResult(status, answer.next_begin_offset, messages))

        try:
            call = self._broker.PullMessage.future(
                request, timeout=self._timeout + wait_ms / 1000, metadata=self._metadata
            )
        except ValueError as error:  # a closed channel
            done(TransportError(f"PullMessage at {self.address}: {error}"))
            return
        call.add_done_callback(finished)

    def max_offset(self, mq: MessageQueue) -> int:
        request = broker_pb2.GetMaxOffsetRequest(broker_name=mq.broker_name, topic=mq.topic, queue_id=mq.queue_id)
        return int(self._call("GetMaxOffset", self._broker.GetMaxOffset, request).offset)

    def min_offset(self, mq: MessageQueue) -> int:
        request = broker_pb2.GetMinOffsetRequest(broker_name=mq.broker_name, topic=mq.topic, queue_id=mq.queue_id)
        return int(self._call("GetMinOffset", self._broker.GetMinOffset, request).offset)

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        request = broker_pb2.SearchOffsetByTimestampRequest(
            broker_name=mq.broker_name, topic=mq.topic, queue_id=mq.queue_id, timestamp_ms=timestamp_ms
        )
        return int(self._call("SearchOffsetByTimestamp", self._broker.SearchOffsetByTimestamp, request).offset)

    def send(
        self,
        topic: str,
        broker: str,
        bodies: Sequence[bytes],
        queue_id: int | None = None,
        tags: str = "",
        keys: str = "",
        properties: Mapping[str, str] | None = None,
    ) -> tuple[int, list[int]]:
        user = dict(properties or {})
        request = broker_pb2.SendMessageRequest(
            broker_name=broker,
            topic=topic,
            messages=[broker_pb2.MessageToSend(body=body, tags=tags, keys=keys, properties=user) for body in bodies],
        )
        if queue_id is not None:
            request.queue_id = queue_id
        answer = self._call("SendMessage", self._broker.SendMessage, request)
        return answer.queue_id, [result.queue_offset for result in answer.results]

    def send_back(self, consumer_group: str, message: Message, max_reconsume_times: int) -> None:
        raise TransportError(
            f"send back at {self.address}: nameserver_stub keeps no retry topics; the message is retried locally",
            "UNIMPLEMENTED",
        )

    def attach(self, client: BrokerRequests) -> None:
        """Answer the stub's running-info requests (on our ``Connect`` streams) from ``client``."""
        self._client = client

    def _asked(self, broker: str, client_id: str, request_id: str, consumer_group: str) -> None:
        if not self._answers.submit(partial(self._report, broker, client_id, request_id, consumer_group)):
            # closed: the stub's wait for us ends by its timeout
            log.debug("running-info request %s at %s after close: not answered", request_id, broker)

    @staticmethod
    def _answer_failed(error: Exception) -> None:
        log.error("answering a running-info request failed unexpectedly", exc_info=error)

    def _report(self, broker: str, client_id: str, request_id: str, consumer_group: str) -> None:
        """Answer one running-info request; a failure is logged, and the operator's call ends by its timeout."""
        client = self._client
        if client is None:
            log.warning("%s asked %s for its running info, but no consumer is attached to answer", broker, client_id)
            return
        try:
            info = client.running_info()
        except Exception:
            log.exception("running info for %s could not be built", broker)
            return
        request = broker_pb2.ReportRunningInfoRequest(
            broker_name=broker,
            client_id=client_id,
            request_id=request_id,
            consumer_group=consumer_group,
            queues=[_wire_row(mq, row) for mq, row in info.queues.items()],
            properties=running_info_properties(info, GRPC_SCHEME + self.address),
            status=[_wire_status(topic, status) for topic, status in info.status.items()],
        )
        try:
            self._call("ReportRunningInfo", self._broker.ReportRunningInfo, request)
        except TransportError as error:
            if not self._closed.is_set():  # closing ends the channel under an answer in flight: nothing to report
                log.warning("answering %s's running-info request failed: %s", broker, error)

    def create_topic(self, topic: str, queue_nums: int, brokers: Sequence[str] = ()) -> None:
        for broker in brokers or self.brokers():
            request = admin_pb2.CreateOrUpdateTopicRequest(
                broker_name=broker, topic=topic, read_queue_nums=queue_nums, write_queue_nums=queue_nums
            )
            self._call("CreateOrUpdateTopic", self._admin.CreateOrUpdateTopic, request)

    def brokers(self) -> dict[str, str]:
        answer = self._call(
            "GetBrokerClusterInfo", self._admin.GetBrokerClusterInfo, admin_pb2.GetBrokerClusterInfoRequest()
        )
        return {b.broker_name: b.address for b in answer.brokers if b.up}

    def consumer_progress(self, consumer_group: str, topic: str = "", owners: bool = True) -> list[ProgressRow]:
        """The stub knows owners (last committer, lock holder) itself: ``owners`` costs nothing here."""
        request = admin_pb2.ConsumerProgressRequest(consumer_group=consumer_group, topic=topic)
        answer = self._call("ConsumerProgress", self._admin.ConsumerProgress, request)
        return [
            ProgressRow(_queue(q.queue), q.broker_offset, q.consumer_offset, q.diff, q.last_owner, q.lock_owner)
            for q in answer.queues
        ]

    def consumer_connections(self, consumer_group: str) -> list[ConnectionRow]:
        request = admin_pb2.ConsumerConnectionRequest(consumer_group=consumer_group)
        answer = self._call("ConsumerConnection", self._admin.ConsumerConnection, request)
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
            for c in answer.connections
        ]

    def topics(self) -> list[str]:
        return list(self._call("ListTopics", self._admin.ListTopics, admin_pb2.ListTopicsRequest()).topics)

    def consumer_groups(self) -> list[str]:
        request = admin_pb2.ListConsumerGroupsRequest()
        return list(self._call("ListConsumerGroups", self._admin.ListConsumerGroups, request).consumer_groups)

    def consumer_report(self, consumer_group: str, client_id: str) -> ConsumerReport:
        """The stub relays the question on the consumer's stream and waits our timeout for the answer: NOT_FOUND
        when the consumer has no open connection, DEADLINE_EXCEEDED when it does not answer in time, UNAVAILABLE
        when its connection closes first."""
        request = admin_pb2.ConsumerRunningInfoRequest(
            consumer_group=consumer_group, client_id=client_id, timeout_ms=max(1, round(self._timeout * 1000))
        )
        answer = self._call(
            "ConsumerRunningInfo", self._admin.ConsumerRunningInfo, request, self._timeout + _REPORT_GRACE
        )
        held = frozenset(_queue(row.queue) for row in answer.queues if not row.dropped)
        status = {row.topic: _status(row) for row in answer.status}
        return ConsumerReport(client_id, held, dict(answer.properties), status=status)

    def connect(self, broker: str, client_id: str, on_group: GroupNotified, on_end: StreamEnded) -> NotificationStream:
        """Returns at once: the stream is opened on the stream loop, and a broker that cannot be reached is
        told to ``on_end``."""
        stream = _GrpcNotifications(on_group, on_end, partial(self._asked, broker, client_id))
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
