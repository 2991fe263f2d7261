"""The NameServer gRPC service: topic routes."""

from __future__ import annotations

from typing import Any

from nameserver_stub import validate
from nameserver_stub.cluster import Cluster
from nameserver_stub.rpc import unary
from rocket_rebalance._proto.v1 import namesrv_pb2 as pb
from rocket_rebalance._proto.v1 import namesrv_pb2_grpc


class NameServerService(namesrv_pb2_grpc.NameServerServicer):
    def __init__(self, cluster: Cluster, cluster_name: str) -> None:
        self._cluster = cluster
        self._cluster_name = cluster_name

    @unary
    def GetRouteInfoByTopic(self, request: pb.GetRouteInfoByTopicRequest, context: Any) -> pb.TopicRouteData:
        route = self._cluster.route(validate.topic(request.topic))
        return pb.TopicRouteData(
            topic=route.topic,
            queue_datas=[
                pb.QueueData(
                    broker_name=queues.broker_name,
                    read_queue_nums=queues.read_queue_nums,
                    write_queue_nums=queues.write_queue_nums,
                    perm=queues.perm,
                )
                for queues in route.queues
            ],
            broker_datas=[
                pb.BrokerData(
                    cluster=self._cluster_name,
                    broker_name=queues.broker_name,
                    broker_addrs={0: self._cluster.address},
                )
                for queues in route.queues
            ],
        )
