"""NameServer routes and topic administration."""

from __future__ import annotations

import grpc

from rocket_rebalance._proto.v1 import admin_pb2, namesrv_pb2
from tests.stub.harness import StubClients, consumer_data, heartbeat, status_of


def route(stub: StubClients, topic: str) -> namesrv_pb2.TopicRouteData:
    response: namesrv_pb2.TopicRouteData = stub.namesrv.GetRouteInfoByTopic(
        namesrv_pb2.GetRouteInfoByTopicRequest(topic=topic), timeout=10
    )
    return response


def summary(data: namesrv_pb2.TopicRouteData) -> list[tuple[str, int, int, int]]:
    return [(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in data.queue_datas]


def test_route_of_a_configured_topic(stub: StubClients) -> None:
    data = route(stub, "TopicTest")
    assert data.topic == "TopicTest"
    assert summary(data) == [("broker-a", 4, 4, 6), ("broker-b", 4, 4, 6)]
    assert [b.broker_name for b in data.broker_datas] == ["broker-a", "broker-b"]
    assert all(b.cluster == "DefaultCluster" and b.broker_addrs[0] for b in data.broker_datas)


def test_unknown_topic_is_not_found(stub: StubClients) -> None:
    code, details = status_of(stub.namesrv.GetRouteInfoByTopic, namesrv_pb2.GetRouteInfoByTopicRequest(topic="Nope"))
    assert code is grpc.StatusCode.NOT_FOUND and "'Nope' does not exist" in details


def test_create_and_update_topic(stub: StubClients) -> None:
    create = admin_pb2.CreateOrUpdateTopicRequest
    stub.admin.CreateOrUpdateTopic(
        create(broker_name="broker-b", topic="Orders", read_queue_nums=8, write_queue_nums=8)
    )
    assert summary(route(stub, "Orders")) == [("broker-b", 8, 8, 6)]
    stub.admin.CreateOrUpdateTopic(
        create(broker_name="broker-b", topic="Orders", read_queue_nums=2, write_queue_nums=3, perm=4)
    )
    stub.admin.CreateOrUpdateTopic(
        create(broker_name="broker-a", topic="Orders", read_queue_nums=1, write_queue_nums=1)
    )
    assert summary(route(stub, "Orders")) == [("broker-a", 1, 1, 6), ("broker-b", 2, 3, 4)]


def test_create_topic_refusals(stub: StubClients) -> None:
    create = admin_pb2.CreateOrUpdateTopicRequest
    code, details = status_of(
        stub.admin.CreateOrUpdateTopic, create(broker_name="broker-z", topic="T", read_queue_nums=1, write_queue_nums=1)
    )
    assert code is grpc.StatusCode.NOT_FOUND and "unknown broker 'broker-z'" in details
    code, details = status_of(
        stub.admin.CreateOrUpdateTopic, create(broker_name="broker-a", topic="T", read_queue_nums=0, write_queue_nums=1)
    )
    assert code is grpc.StatusCode.INVALID_ARGUMENT and "read_queue_nums 0" in details
    code, details = status_of(
        stub.admin.CreateOrUpdateTopic,
        create(broker_name="broker-a", topic="T?", read_queue_nums=1, write_queue_nums=1),
    )
    assert code is grpc.StatusCode.INVALID_ARGUMENT and "characters outside" in details
    code, details = status_of(
        stub.admin.CreateOrUpdateTopic,
        create(broker_name="broker-a", topic="T", read_queue_nums=1, write_queue_nums=1, perm=9),
    )
    assert code is grpc.StatusCode.INVALID_ARGUMENT and "perm 9" in details


def test_broker_down_leaves_every_route_and_comes_back(stub: StubClients) -> None:
    stub.admin.CreateOrUpdateTopic(
        admin_pb2.CreateOrUpdateTopicRequest(
            broker_name="broker-b", topic="OnlyB", read_queue_nums=2, write_queue_nums=2
        )
    )
    stub.admin.SetBrokerState(admin_pb2.SetBrokerStateRequest(broker_name="broker-b", up=False))
    assert summary(route(stub, "TopicTest")) == [("broker-a", 4, 4, 6)]
    assert [b.broker_name for b in route(stub, "TopicTest").broker_datas] == ["broker-a"]
    code, details = status_of(stub.namesrv.GetRouteInfoByTopic, namesrv_pb2.GetRouteInfoByTopicRequest(topic="OnlyB"))
    assert code is grpc.StatusCode.NOT_FOUND and "no broker hosting topic 'OnlyB' is up" in details
    info = stub.admin.GetBrokerClusterInfo(admin_pb2.GetBrokerClusterInfoRequest())
    assert [(b.broker_name, b.up) for b in info.brokers] == [("broker-a", True), ("broker-b", False)]
    stub.admin.SetBrokerState(admin_pb2.SetBrokerStateRequest(broker_name="broker-b", up=True))
    assert summary(route(stub, "TopicTest")) == [("broker-a", 4, 4, 6), ("broker-b", 4, 4, 6)]
    assert summary(route(stub, "OnlyB")) == [("broker-b", 2, 2, 6)]


def test_clustering_heartbeat_creates_the_retry_topic_on_that_broker(stub: StubClients) -> None:
    heartbeat(stub, "broker-a", "c1", consumer_data("G1", "TopicTest"))
    assert summary(route(stub, "%RETRY%G1")) == [("broker-a", 1, 1, 6)]
    heartbeat(stub, "broker-b", "c1", consumer_data("G1", "TopicTest"))
    assert summary(route(stub, "%RETRY%G1")) == [("broker-a", 1, 1, 6), ("broker-b", 1, 1, 6)]


def test_broadcasting_heartbeat_creates_no_retry_topic(stub: StubClients) -> None:
    heartbeat(stub, "broker-a", "c1", consumer_data("GB", "TopicTest", message_model=2))
    code, _ = status_of(stub.namesrv.GetRouteInfoByTopic, namesrv_pb2.GetRouteInfoByTopicRequest(topic="%RETRY%GB"))
    assert code is grpc.StatusCode.NOT_FOUND
