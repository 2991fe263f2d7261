"""How a consumer talks to the name server and brokers: one interface, and its gRPC implementation.

The runtime codes against :class:`Transport` only, so another wire (RocketMQ's own remoting protocol, say) is one
more class, with nothing in ``core`` or the consumer changing. :class:`GrpcTransport` talks to ``nameserver_stub``
(every logical broker is served at the name server's address). Every call raises :class:`TransportError` on
failure, with a message naming the call and the address.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import grpc

from rocket_rebalance._proto.v1 import broker_pb2, broker_pb2_grpc, common_pb2, namesrv_pb2, namesrv_pb2_grpc
from rocket_rebalance.model import MessageQueue
from rocket_rebalance.route import QueueData, TopicRoute

__all__ = [
    "GrpcTransport",
    "GroupRegistration",
    "Message",
    "NotificationStream",
    "PullResult",
    "PullStatus",
    "Transport",
    "TransportError",
    "route_from_wire",
]

T = TypeVar("T")


class TransportError(OSError):
    """A call to the name server or a broker failed; ``code`` is the gRPC status name when there is one."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Message:
    """One pulled message (the parts a listener needs of RocketMQ's ``MessageExt``)."""

    mq: MessageQueue
    queue_offset: int
    msg_id: str
    body: bytes
    tags: str = ""
    keys: str = ""
    properties: Mapping[str, str] = field(default_factory=dict)


class PullStatus:
    """RocketMQ's pull statuses."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass(frozen=True)
class PullResult:
    status: str
    next_begin_offset: int
    messages: tuple[Message, ...] = ()


@dataclass(frozen=True)
class GroupRegistration:
    """What a heartbeat says about our group (RocketMQ's ``ConsumerData``)."""

    consumer_group: str
    push: bool
    clustering: bool
    consume_from_where: str  # CONSUME_FROM_LAST_OFFSET | CONSUME_FROM_FIRST_OFFSET | CONSUME_FROM_TIMESTAMP
    topics: tuple[str, ...]


class NotificationStream(Protocol):
    """A broker's notification stream: yields the groups whose members changed; ``cancel()`` closes it."""

    def __iter__(self) -> Iterator[str]: ...

    def cancel(self) -> None: ...


class Transport(Protocol):
    """Everything a consumer asks of the name server and brokers."""

    address: str

    def route(self, topic: str) -> TopicRoute: ...

    def heartbeat(self, broker: str, client_id: str, group: GroupRegistration) -> None: ...

    def unregister(self, broker: str, client_id: str, consumer_group: str) -> None: ...

    def consumer_list(self, broker: str, consumer_group: str) -> list[str]: ...

    def query_offsets(
        self, broker: str, consumer_group: str, queues: Sequence[MessageQueue]
    ) -> dict[MessageQueue, int | None]: ...

    def update_offsets(
        self, broker: str, consumer_group: str, client_id: str, offsets: Mapping[MessageQueue, int]
    ) -> dict[MessageQueue, int]: ...

    def lock(
        self, broker: str, consumer_group: str, client_id: str, queues: Sequence[MessageQueue]
    ) -> set[MessageQueue]: ...

    def unlock(self, broker: str, consumer_group: str, client_id: str, queues: Sequence[MessageQueue]) -> None: ...

    def pull(
        self,
        mq: MessageQueue,
        consumer_group: str,
        offset: int,
        max_messages: int,
        wait_ms: int,
        done: Callable[[PullResult | TransportError], None],
    ) -> None:
        """Start a (long-polling) pull and return at once; ``done`` gets the result or the error later, so an
        idle queue waiting for messages holds no thread."""
        ...

    def max_offset(self, mq: MessageQueue) -> int: ...

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int: ...

    def send(
        self, topic: str, broker: str, bodies: Sequence[bytes], queue_id: int | None = None
    ) -> tuple[int, list[int]]: ...

    def connect(self, broker: str, client_id: str) -> NotificationStream: ...

    def close(self) -> None: ...


_CONSUME_FROM = {
    "CONSUME_FROM_LAST_OFFSET": common_pb2.CONSUME_FROM_LAST_OFFSET,
    "CONSUME_FROM_FIRST_OFFSET": common_pb2.CONSUME_FROM_FIRST_OFFSET,
    "CONSUME_FROM_TIMESTAMP": common_pb2.CONSUME_FROM_TIMESTAMP,
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
    return TopicRoute(topic, datas)


def _wire_queue(mq: MessageQueue) -> common_pb2.MessageQueue:
    return common_pb2.MessageQueue(topic=mq.topic, broker_name=mq.broker_name, queue_id=mq.queue_id)


def _queue(wire: common_pb2.MessageQueue) -> MessageQueue:
    return MessageQueue(wire.topic, wire.broker_name, wire.queue_id)


class _GrpcNotifications:
    """A Connect stream as an iterator of group names (the ``connected`` greeting is swallowed)."""

    def __init__(self, call: grpc.Call, address: str) -> None:
        self._call = call
        self._address = address

    def __iter__(self) -> Iterator[str]:
        try:
            for notification in self._call:
                if notification.WhichOneof("notification") == "consumer_ids_changed":
                    yield notification.consumer_ids_changed.consumer_group
        except grpc.RpcError as error:
            if isinstance(error, grpc.Call) and error.code() == grpc.StatusCode.CANCELLED:
                return
            raise _error("Connect", self._address, error) from None

    def cancel(self) -> None:
        self._call.cancel()


def _error(call: str, address: str, error: grpc.RpcError) -> TransportError:
    if isinstance(error, grpc.Call):
        code = error.code()
        return TransportError(f"{call} at {address}: {code.name} {error.details()}", code.name)
    return TransportError(f"{call} at {address}: {error}")


class GrpcTransport:
    """The gRPC transport to ``nameserver_stub`` at ``address`` (``host:port``), with an optional shared token."""

    def __init__(self, address: str, token: str | None = None, timeout: float = 5.0) -> None:
        self.address = address
        self._timeout = timeout
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self._channel = grpc.insecure_channel(address)
        self._namesrv = namesrv_pb2_grpc.NameServerStub(self._channel)
        self._broker = broker_pb2_grpc.BrokerStub(self._channel)
        self._closed = threading.Event()

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
            if group.clustering
            else common_pb2.MESSAGE_MODEL_BROADCASTING,
            consume_from_where=_CONSUME_FROM[group.consume_from_where],
            subscriptions=[common_pb2.SubscriptionData(topic=topic, sub_string="*") for topic in group.topics],
        )
        request = broker_pb2.HeartbeatRequest(broker_name=broker, client_id=client_id, consumer_datas=[data])
        self._call("HeartBeat", self._broker.HeartBeat, request)

    def unregister(self, broker: str, client_id: str, consumer_group: str) -> None:
        request = broker_pb2.UnregisterClientRequest(
            broker_name=broker, client_id=client_id, consumer_group=consumer_group
        )
        self._call("UnregisterClient", self._broker.UnregisterClient, request)

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

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        request = broker_pb2.SearchOffsetByTimestampRequest(
            broker_name=mq.broker_name, topic=mq.topic, queue_id=mq.queue_id, timestamp_ms=timestamp_ms
        )
        return int(self._call("SearchOffsetByTimestamp", self._broker.SearchOffsetByTimestamp, request).offset)

    def send(
        self, topic: str, broker: str, bodies: Sequence[bytes], queue_id: int | None = None
    ) -> tuple[int, list[int]]:
        request = broker_pb2.SendMessageRequest(
            broker_name=broker, topic=topic, messages=[broker_pb2.MessageToSend(body=body) for body in bodies]
        )
        if queue_id is not None:
            request.queue_id = queue_id
        answer = self._call("SendMessage", self._broker.SendMessage, request)
        return answer.queue_id, [result.queue_offset for result in answer.results]

    def connect(self, broker: str, client_id: str) -> NotificationStream:
        request = broker_pb2.ConnectRequest(broker_name=broker, client_id=client_id)
        call = self._broker.Connect(request, metadata=self._metadata)
        return _GrpcNotifications(call, self.address)

    def close(self) -> None:
        if not self._closed.is_set():
            self._closed.set()
            self._channel.close()
