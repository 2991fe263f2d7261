"""The Admin gRPC service: operator views (mqadmin-style), topic admin, offset resets, fault injection."""

from __future__ import annotations

from typing import Any

from nameserver_stub import validate
from nameserver_stub.cluster import Cluster
from nameserver_stub.errors import InvalidArgument
from nameserver_stub.registry import Subscription
from nameserver_stub.relay import RunningInfoRelay
from nameserver_stub.rpc import unary
from rocket_rebalance._proto.v1 import admin_pb2 as pb
from rocket_rebalance._proto.v1 import admin_pb2_grpc, broker_pb2, common_pb2


def _subscription(sub: Subscription) -> common_pb2.SubscriptionData:
    return common_pb2.SubscriptionData(
        topic=sub.topic, sub_string=sub.sub_string, expression_type=sub.expression_type, sub_version=sub.sub_version
    )


class AdminService(admin_pb2_grpc.AdminServicer):
    def __init__(
        self, cluster: Cluster, cluster_name: str, relay: RunningInfoRelay[broker_pb2.ReportRunningInfoRequest]
    ) -> None:
        self._cluster = cluster
        self._cluster_name = cluster_name
        self._relay = relay

    @unary
    def CreateOrUpdateTopic(
        self, request: pb.CreateOrUpdateTopicRequest, context: Any
    ) -> pb.CreateOrUpdateTopicResponse:
        self._cluster.create_or_update_topic(
            validate.broker_name(request.broker_name),
            validate.topic(request.topic),
            request.read_queue_nums,
            request.write_queue_nums,
            request.perm,
        )
        return pb.CreateOrUpdateTopicResponse()

    @unary
    def GetBrokerClusterInfo(
        self, request: pb.GetBrokerClusterInfoRequest, context: Any
    ) -> pb.GetBrokerClusterInfoResponse:
        return pb.GetBrokerClusterInfoResponse(
            brokers=[
                pb.BrokerInfo(
                    broker_name=view.name, cluster=self._cluster_name, address=self._cluster.address, up=view.up
                )
                for view in self._cluster.brokers()
            ]
        )

    @unary
    def ConsumerProgress(self, request: pb.ConsumerProgressRequest, context: Any) -> pb.ConsumerProgressResponse:
        group = validate.group(request.consumer_group)
        topic = validate.topic(request.topic) if request.topic else None
        rows = self._cluster.consumer_progress(group, topic)
        return pb.ConsumerProgressResponse(
            queues=[
                pb.QueueProgress(
                    queue=common_pb2.MessageQueue(
                        topic=row.queue.topic, broker_name=row.queue.broker_name, queue_id=row.queue.queue_id
                    ),
                    broker_offset=row.broker_offset,
                    consumer_offset=row.consumer_offset,
                    diff=row.diff,
                    last_owner=row.last_owner,
                    lock_owner=row.lock_owner,
                    last_update_timestamp_ms=row.updated_ms,
                )
                for row in rows
            ],
            total_diff=sum(row.diff for row in rows),
        )

    @unary
    def ConsumerConnection(self, request: pb.ConsumerConnectionRequest, context: Any) -> pb.ConsumerConnectionResponse:
        group = validate.group(request.consumer_group)
        views = self._cluster.consumer_connection(group, request.broker_name or None)
        return pb.ConsumerConnectionResponse(
            connections=[
                pb.Connection(
                    client_id=view.member.client_id,
                    broker_name=view.broker_name,
                    connected=view.connected,
                    last_heartbeat_ms_ago=round(view.heartbeat_age * 1000),
                    subscriptions=[_subscription(sub) for sub in view.member.membership.subscriptions],
                    consume_type=common_pb2.ConsumeType.Name(view.member.membership.consume_type),
                    message_model=common_pb2.MessageModel.Name(view.member.membership.message_model),
                    consume_from_where=common_pb2.ConsumeFromWhere.Name(view.member.membership.consume_from_where),
                )
                for view in views
            ],
            subscription_table=[_subscription(sub) for sub in self._cluster.subscriptions(group)],
        )

    @unary
    def ConsumerRunningInfo(
        self, request: pb.ConsumerRunningInfoRequest, context: Any
    ) -> pb.ConsumerRunningInfoResponse:
        group = validate.group(request.consumer_group)
        client = validate.client_id(request.client_id)
        timeout = validate.running_info_timeout(request.timeout_ms)
        remaining = context.time_remaining()  # no use waiting past the caller's own deadline
        if remaining is not None:
            timeout = max(0.0, min(timeout, remaining))
        connection = self._cluster.running_info_target(group, client)
        report = self._relay.ask(connection, group, timeout)
        return pb.ConsumerRunningInfoResponse(
            client_id=client,
            broker_name=connection.broker_name,
            queues=report.queues,
            properties=report.properties,
            status=report.status,
        )

    @unary
    def ListTopics(self, request: pb.ListTopicsRequest, context: Any) -> pb.ListTopicsResponse:
        return pb.ListTopicsResponse(topics=self._cluster.topics())

    @unary
    def ListConsumerGroups(self, request: pb.ListConsumerGroupsRequest, context: Any) -> pb.ListConsumerGroupsResponse:
        return pb.ListConsumerGroupsResponse(consumer_groups=self._cluster.consumer_groups())

    @unary
    def ResetConsumerOffset(
        self, request: pb.ResetConsumerOffsetRequest, context: Any
    ) -> pb.ResetConsumerOffsetResponse:
        group = validate.group(request.consumer_group)
        topic = validate.topic(request.topic)
        target = request.WhichOneof("target")
        if target is None:
            raise InvalidArgument("give either offset or timestamp_ms to reset to")
        reset = self._cluster.reset_offsets(
            group,
            topic,
            request.broker_name or None,
            validate.queue_id(request.queue_id) if request.HasField("queue_id") else None,
            request.offset if target == "offset" else None,
            request.timestamp_ms if target == "timestamp_ms" else None,
        )
        return pb.ResetConsumerOffsetResponse(
            offsets=[
                common_pb2.QueueOffset(
                    queue=common_pb2.MessageQueue(
                        topic=queue.topic, broker_name=queue.broker_name, queue_id=queue.queue_id
                    ),
                    offset=offset,
                )
                for queue, offset in reset
            ]
        )

    @unary
    def SetBrokerState(self, request: pb.SetBrokerStateRequest, context: Any) -> pb.SetBrokerStateResponse:
        self._cluster.set_broker_state(validate.broker_name(request.broker_name), request.up)
        return pb.SetBrokerStateResponse()

    @unary
    def InjectFault(self, request: pb.InjectFaultRequest, context: Any) -> pb.InjectFaultResponse:
        broker = validate.broker_name(request.broker_name)
        faults = self._cluster.inject_fault(broker, validate.fault(request.fault))
        return pb.InjectFaultResponse(
            faults=[
                pb.Fault(kind=fault.kind.name, client_id=fault.client_id, delay_ms=fault.delay_ms) for fault in faults
            ]
        )

    @unary
    def ClearFaults(self, request: pb.ClearFaultsRequest, context: Any) -> pb.ClearFaultsResponse:
        self._cluster.clear_faults(request.broker_name or None)
        return pb.ClearFaultsResponse()
