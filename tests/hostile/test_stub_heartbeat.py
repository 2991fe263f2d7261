"""Oversized heartbeats are refused with INVALID_ARGUMENT naming the limit, and nothing of them is kept."""

from __future__ import annotations

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nameserver_stub.validate import MAX_HEARTBEAT_BYTES, MAX_HEARTBEAT_GROUPS, MAX_SUBSCRIPTIONS
from rocket_rebalance._proto.v1 import broker_pb2, common_pb2
from tests.stub.conftest import start_stub, stub, stub_server
from tests.stub.harness import StubClients, consumer_data, consumer_ids, heartbeat, status_of

__all__ = ["start_stub", "stub", "stub_server"]

INVALID = grpc.StatusCode.INVALID_ARGUMENT


def request(client_id: str, *datas: broker_pb2.ConsumerData) -> broker_pb2.HeartbeatRequest:
    return broker_pb2.HeartbeatRequest(broker_name="broker-a", client_id=client_id, consumer_datas=list(datas))


def test_a_15_mb_heartbeat_is_refused_and_not_kept(stub: StubClients) -> None:
    data = consumer_data("G1", "TopicTest")
    data.subscriptions[0].sub_string = " || ".join(f"tag{n}" for n in range(1_500_000))[: 15 * 1024 * 1024]
    code, details = status_of(stub.broker.HeartBeat, request("big", data))
    assert code is INVALID
    assert f"more than the {MAX_HEARTBEAT_BYTES}-byte (1 MiB) limit" in details
    assert consumer_ids(stub, "broker-a", "G1") == []


def test_too_many_groups_or_subscriptions(stub: StubClients) -> None:
    groups = [consumer_data(f"G{n}") for n in range(MAX_HEARTBEAT_GROUPS + 1)]
    code, details = status_of(stub.broker.HeartBeat, request("many-groups", *groups))
    assert code is INVALID and f"at most {MAX_HEARTBEAT_GROUPS} allowed" in details
    topics = [f"T{n}" for n in range(MAX_SUBSCRIPTIONS + 1)]
    code, details = status_of(stub.broker.HeartBeat, request("many-subs", consumer_data("G1", *topics)))
    assert code is INVALID and f"consumer_datas[0].subscriptions has {MAX_SUBSCRIPTIONS + 1} entries" in details
    assert consumer_ids(stub, "broker-a", "G1") == []
    heartbeat(stub, "broker-a", "ok", consumer_data("G1", *topics[:MAX_SUBSCRIPTIONS]))  # at the limit: fine
    assert consumer_ids(stub, "broker-a", "G1") == ["ok"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    groups=st.integers(1, 3),
    subscriptions=st.integers(1, 3),
    expression_bytes=st.integers(0, 2 * MAX_HEARTBEAT_BYTES // 3),
)
def test_accepted_exactly_when_within_the_byte_limit(
    stub: StubClients, groups: int, subscriptions: int, expression_bytes: int
) -> None:
    datas = []
    for g in range(groups):
        data = consumer_data(f"HB{g}")
        data.subscriptions.extend(
            common_pb2.SubscriptionData(topic=f"T{s}", sub_string="x" * expression_bytes) for s in range(subscriptions)
        )
        datas.append(data)
    message = request("hb-client", *datas)
    try:
        stub.broker.HeartBeat(message, timeout=30)
    except grpc.RpcError as error:
        assert message.ByteSize() > MAX_HEARTBEAT_BYTES, error.details()
        assert error.code() is INVALID and "(1 MiB) limit" in (error.details() or "")
    else:
        assert message.ByteSize() <= MAX_HEARTBEAT_BYTES
        assert "hb-client" in consumer_ids(stub, "broker-a", "HB0")
    stub.broker.UnregisterClient(
        broker_pb2.UnregisterClientRequest(broker_name="broker-a", client_id="hb-client"), timeout=30
    )


@pytest.mark.parametrize("max_bytes", [0, 2**31 - 1])
def test_a_pull_reply_stays_bounded_whatever_max_bytes_asks(stub: StubClients, max_bytes: int) -> None:
    body = b"b" * (4 * 1024 * 1024 - 64)
    for _ in range(6):
        stub.broker.SendMessage(
            broker_pb2.SendMessageRequest(
                broker_name="broker-a",
                topic="TopicTest",
                queue_id=0,
                messages=[broker_pb2.MessageToSend(body=body)],
            ),
            timeout=30,
        )
    reply = stub.broker.PullMessage(
        broker_pb2.PullMessageRequest(
            broker_name="broker-a",
            consumer_group="G1",
            topic="TopicTest",
            queue_id=0,
            max_msg_nums=1024,
            max_bytes=max_bytes,
        ),
        timeout=60,
    )
    assert 1 <= len(reply.messages) <= 2  # 8 MiB at most (4 MiB by default), never all 24 MiB
