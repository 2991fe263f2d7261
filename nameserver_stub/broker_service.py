"""The Broker gRPC service: each request names its logical broker; the cluster does the work."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc

from nameserver_stub import validate
from nameserver_stub.clock import Clock
from nameserver_stub.cluster import Cluster
from nameserver_stub.connections import CloseReason, RunningInfoAsk
from nameserver_stub.errors import StubError
from nameserver_stub.relay import RunningInfoRelay
from nameserver_stub.rpc import unary
from nameserver_stub.store import QueueKey, StoredMessage
from rocket_rebalance._proto.v1 import broker_pb2 as pb
from rocket_rebalance._proto.v1 import broker_pb2_grpc, common_pb2


def _queue(broker: str, key: QueueKey) -> common_pb2.MessageQueue:
    return common_pb2.MessageQueue(topic=key[0], broker_name=broker, queue_id=key[1])


def _message(message: StoredMessage) -> pb.MessageExt:
    return pb.MessageExt(
        topic=message.topic,
        broker_name=message.broker_name,
        queue_id=message.queue_id,
        queue_offset=message.queue_offset,
        msg_id=message.msg_id,
        body=message.body,
        tags=message.tags,
        keys=message.keys,
        properties=dict(message.properties),
        born_timestamp_ms=message.born_ms,
        store_timestamp_ms=message.store_ms,
    )


class BrokerService(broker_pb2_grpc.BrokerServicer):
    def __init__(self, cluster: Cluster, clock: Clock, relay: RunningInfoRelay[pb.ReportRunningInfoRequest]) -> None:
        self._cluster = cluster
        self._clock = clock
        self._relay = relay

    @unary
    def HeartBeat(self, request: pb.HeartbeatRequest, context: Any) -> pb.HeartbeatResponse:
        validate.heartbeat_size(request)
        broker = validate.broker_name(request.broker_name)
        client = validate.client_id(request.client_id)
        self._cluster.heartbeat(broker, client, validate.memberships(request.consumer_datas))
        return pb.HeartbeatResponse()

    @unary
    def UnregisterClient(self, request: pb.UnregisterClientRequest, context: Any) -> pb.UnregisterClientResponse:
        broker = validate.broker_name(request.broker_name)
        client = validate.client_id(request.client_id)
        self._cluster.unregister(broker, client, validate.optional_group(request.consumer_group))
        return pb.UnregisterClientResponse()

    @unary
    def GetConsumerListByGroup(
        self, request: pb.GetConsumerListByGroupRequest, context: Any
    ) -> pb.GetConsumerListByGroupResponse:
        broker = validate.broker_name(request.broker_name)
        ids = self._cluster.consumer_ids(broker, validate.group(request.consumer_group))
        return pb.GetConsumerListByGroupResponse(consumer_id_list=ids)

    @unary
    def QueryConsumerOffset(
        self, request: pb.QueryConsumerOffsetRequest, context: Any
    ) -> pb.QueryConsumerOffsetResponse:
        broker = validate.broker_name(request.broker_name)
        group = validate.group(request.consumer_group)
        keys = validate.queues(broker, request.queues)
        records = self._cluster.query_offsets(broker, group, keys)
        return pb.QueryConsumerOffsetResponse(
            offsets=[
                pb.ConsumerOffset(
                    queue=_queue(broker, key),
                    found=record is not None,
                    offset=-1 if record is None else record.offset,
                )
                for key, record in zip(keys, records, strict=True)
            ]
        )

    @unary
    def UpdateConsumerOffset(
        self, request: pb.UpdateConsumerOffsetRequest, context: Any
    ) -> pb.UpdateConsumerOffsetResponse:
        broker = validate.broker_name(request.broker_name)
        group = validate.group(request.consumer_group)
        client = validate.client_id(request.client_id) if request.client_id else ""
        offsets = validate.queue_offsets(broker, request.offsets)
        results = self._cluster.update_offsets(broker, group, client, offsets)
        return pb.UpdateConsumerOffsetResponse(
            results=[
                pb.OffsetUpdateResult(queue=_queue(broker, key), stored_offset=stored, updated=updated)
                for (key, _), (stored, updated) in zip(offsets, results, strict=True)
            ]
        )

    @unary
    def LockBatchMQ(self, request: pb.LockBatchMQRequest, context: Any) -> pb.LockBatchMQResponse:
        broker = validate.broker_name(request.broker_name)
        group = validate.group(request.consumer_group)
        client = validate.client_id(request.client_id)
        locked = self._cluster.lock(broker, group, client, validate.queues(broker, request.queues))
        return pb.LockBatchMQResponse(locked_queues=[_queue(broker, key) for key in locked])

    @unary
    def UnlockBatchMQ(self, request: pb.UnlockBatchMQRequest, context: Any) -> pb.UnlockBatchMQResponse:
        broker = validate.broker_name(request.broker_name)
        group = validate.group(request.consumer_group)
        client = validate.client_id(request.client_id)
        released = self._cluster.unlock(broker, group, client, validate.queues(broker, request.queues))
        return pb.UnlockBatchMQResponse(unlocked_queues=[_queue(broker, key) for key in released])

    @unary
    def SendMessage(self, request: pb.SendMessageRequest, context: Any) -> pb.SendMessageResponse:
        broker = validate.broker_name(request.broker_name)
        topic = validate.topic(request.topic)
        queue_id = validate.queue_id(request.queue_id) if request.HasField("queue_id") else None
        messages = validate.messages(request.messages, self._clock.time_ms())
        chosen, written = self._cluster.send(broker, topic, queue_id, messages)
        return pb.SendMessageResponse(
            queue_id=chosen,
            results=[pb.SendResult(msg_id=msg_id, queue_offset=offset) for offset, msg_id in written],
        )

    @unary
    def PullMessage(self, request: pb.PullMessageRequest, context: Any) -> pb.PullMessageResponse:
        broker = validate.broker_name(request.broker_name)
        validate.group(request.consumer_group)
        result = self._cluster.pull(
            broker,
            validate.topic(request.topic),
            validate.queue_id(request.queue_id),
            validate.non_negative(request.queue_offset, "queue_offset"),
            validate.pull_nums(request.max_msg_nums),
            validate.pull_bytes(request.max_bytes),
            validate.non_negative(request.max_wait_ms, "max_wait_ms") / 1000,
            request.sub_expression,
        )
        return pb.PullMessageResponse(
            status=result.status.name,
            next_begin_offset=result.next_offset,
            min_offset=result.min_offset,
            max_offset=result.max_offset,
            messages=[_message(message) for message in result.messages],
        )

    @unary
    def GetMaxOffset(self, request: pb.GetMaxOffsetRequest, context: Any) -> pb.GetMaxOffsetResponse:
        broker = validate.broker_name(request.broker_name)
        topic = validate.topic(request.topic)
        return pb.GetMaxOffsetResponse(
            offset=self._cluster.max_offset(broker, topic, validate.queue_id(request.queue_id))
        )

    @unary
    def GetMinOffset(self, request: pb.GetMinOffsetRequest, context: Any) -> pb.GetMinOffsetResponse:
        broker = validate.broker_name(request.broker_name)
        topic = validate.topic(request.topic)
        return pb.GetMinOffsetResponse(
            offset=self._cluster.min_offset(broker, topic, validate.queue_id(request.queue_id))
        )

    @unary
    def SearchOffsetByTimestamp(
        self, request: pb.SearchOffsetByTimestampRequest, context: Any
    ) -> pb.SearchOffsetByTimestampResponse:
        broker = validate.broker_name(request.broker_name)
        topic = validate.topic(request.topic)
        offset = self._cluster.search_offset(broker, topic, validate.queue_id(request.queue_id), request.timestamp_ms)
        return pb.SearchOffsetByTimestampResponse(offset=offset)

    @unary
    def ReportRunningInfo(self, request: pb.ReportRunningInfoRequest, context: Any) -> pb.ReportRunningInfoResponse:
        broker, client, request_id, group = validate.running_info_report(request)
        self._relay.answer(broker, client, request_id, group, request)
        return pb.ReportRunningInfoResponse()

    def Connect(self, request: pb.ConnectRequest, context: Any) -> Iterator[pb.BrokerNotification]:
        """The connection stream: registered, announced, then one message per notification until it closes."""
        try:
            broker = validate.broker_name(request.broker_name)
            client = validate.client_id(request.client_id)
            connection = self._cluster.connect(broker, client)
        except StubError as error:
            context.abort(error.code, error.message)
            return
        if not context.add_callback(lambda: self._cluster.disconnect(connection)):
            self._cluster.disconnect(connection)  # the RPC already ended
            return
        yield pb.BrokerNotification(connected=pb.Connected(broker_name=broker, client_id=client))
        while (item := connection.next()) is not None:
            if isinstance(item, RunningInfoAsk):
                yield pb.BrokerNotification(
                    running_info_request=pb.RunningInfoRequest(
                        request_id=item.request_id, consumer_group=item.consumer_group
                    )
                )
            else:
                yield pb.BrokerNotification(consumer_ids_changed=pb.NotifyConsumerIdsChanged(consumer_group=item))
        if connection.close_reason is CloseReason.BROKER_DOWN:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"broker {broker!r} went down")
