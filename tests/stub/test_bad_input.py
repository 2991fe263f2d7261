"""Bad input: each malformed field gets INVALID_ARGUMENT saying what was wrong, and no request at all, however
random, can crash the server, make it answer UNKNOWN/INTERNAL to a well-formed message, or move an offset back.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor as pb_descriptor
from google.protobuf import message as pb_message
from google.protobuf import message_factory
from grpc_health.v1 import health_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nameserver_stub.server import StubServer
from rocket_rebalance._proto.v1 import admin_pb2, broker_pb2, common_pb2, namesrv_pb2
from tests.stub.harness import StubClients, commit, connect_clients, consumer_data, send, status_of

INVALID = grpc.StatusCode.INVALID_ARGUMENT


def hb(client_id: str = "c1", *datas: broker_pb2.ConsumerData) -> broker_pb2.HeartbeatRequest:
    return broker_pb2.HeartbeatRequest(broker_name="broker-a", client_id=client_id, consumer_datas=list(datas))


def sub_data(**fields: Any) -> broker_pb2.ConsumerData:
    data = consumer_data("G1", "TopicTest")
    for name, value in fields.items():
        setattr(data.subscriptions[0], name, value)
    return data


BAD_REQUESTS: list[tuple[str, str, pb_message.Message, str]] = [
    ("broker", "HeartBeat", hb(""), "client_id is empty"),
    ("broker", "HeartBeat", hb("x" * 1025), "client_id is 1025 characters long"),
    ("broker", "HeartBeat", broker_pb2.HeartbeatRequest(client_id="c1"), "broker_name is empty"),
    ("broker", "HeartBeat", hb("c1", consumer_data("bad group!")), "has characters outside"),
    ("broker", "HeartBeat", hb("c1", consumer_data("")), "consumer_datas[0].group_name: consumer group is empty"),
    ("broker", "HeartBeat", hb("c1", consumer_data("G" * 256)), "at most 255 allowed"),
    ("broker", "HeartBeat", hb("c1", consumer_data("G1", consume_type=0)), "consume_type 0 is not a known value"),
    ("broker", "HeartBeat", hb("c1", consumer_data("G1", message_model=7)), "message_model 7 is not a known value"),
    ("broker", "HeartBeat", hb("c1", consumer_data("G1", consume_from_where=9)), "consume_from_where 9"),
    ("broker", "HeartBeat", hb("c1", consumer_data("G1"), consumer_data("G1")), "appears twice in one heartbeat"),
    ("broker", "HeartBeat", hb("c1", consumer_data("G1", "T", "T")), "subscriptions[1].topic 'T' appears twice"),
    ("broker", "HeartBeat", hb("c1", consumer_data("G1", "T" * 128)), "at most 127 allowed"),
    ("broker", "HeartBeat", hb("c1", sub_data(expression_type="SQL92")), "only TAG filtering"),
    ("broker", "UnregisterClient", broker_pb2.UnregisterClientRequest(broker_name="broker-a"), "client_id is empty"),
    (
        "broker",
        "UnregisterClient",
        broker_pb2.UnregisterClientRequest(broker_name="broker-a", client_id="c", consumer_group="a b"),
        "outside",
    ),
    (
        "broker",
        "GetConsumerListByGroup",
        broker_pb2.GetConsumerListByGroupRequest(broker_name="broker-a"),
        "consumer group is empty",
    ),
    (
        "broker",
        "QueryConsumerOffset",
        broker_pb2.QueryConsumerOffsetRequest(
            broker_name="broker-a",
            consumer_group="G1",
            queues=[common_pb2.MessageQueue(topic="TopicTest", queue_id=-3)],
        ),
        "queues[0].queue_id -3 is negative",
    ),
    (
        "broker",
        "QueryConsumerOffset",
        broker_pb2.QueryConsumerOffsetRequest(
            broker_name="broker-a", consumer_group="G1", queues=[common_pb2.MessageQueue(topic="", queue_id=0)]
        ),
        "queues[0].topic: topic is empty",
    ),
    (
        "broker",
        "LockBatchMQ",
        broker_pb2.LockBatchMQRequest(
            broker_name="broker-a", consumer_group="G1", queues=[common_pb2.MessageQueue(topic="TopicTest")]
        ),
        "client_id is empty",
    ),
    (
        "broker",
        "LockBatchMQ",
        broker_pb2.LockBatchMQRequest(
            broker_name="broker-a",
            consumer_group="G1",
            client_id="c1",
            queues=[common_pb2.MessageQueue(topic="TopicTest", queue_id=99)],
        ),
        "queue_id 99 is out of range",
    ),
    (
        "broker",
        "GetMaxOffset",
        broker_pb2.GetMaxOffsetRequest(broker_name="broker-a", topic="TopicTest", queue_id=-1),
        "queue_id -1 is negative",
    ),
    (
        "broker",
        "SearchOffsetByTimestamp",
        broker_pb2.SearchOffsetByTimestampRequest(broker_name="broker-a", topic="Topic Test"),
        "characters outside",
    ),
    ("namesrv", "GetRouteInfoByTopic", namesrv_pb2.GetRouteInfoByTopicRequest(topic=""), "topic is empty"),
    ("admin", "ConsumerProgress", admin_pb2.ConsumerProgressRequest(consumer_group="G|1?"), "characters outside"),
]


@pytest.mark.parametrize(
    ("service", "method", "request_message", "fragment"),
    BAD_REQUESTS,
    ids=[f"{m}-{i}" for i, (_, m, _, _) in enumerate(BAD_REQUESTS)],
)
def test_invalid_argument_says_what_was_wrong(
    stub: StubClients, service: str, method: str, request_message: pb_message.Message, fragment: str
) -> None:
    call = getattr(getattr(stub, service), method)
    code, details = status_of(call, request_message)
    assert code is INVALID, details
    assert fragment in details


def test_connect_refuses_an_empty_client_id(stub: StubClients) -> None:
    code, details = status_of(
        lambda **k: list(stub.broker.Connect(broker_pb2.ConnectRequest(broker_name="broker-a"), **k))
    )
    assert code is INVALID and "client_id is empty" in details


# -- fuzzing --------------------------------------------------------------------------------------------------

POOL_STRINGS = [
    "",
    "TopicTest",
    "broker-a",
    "broker-b",
    "broker-x",
    "G1",
    "G2",
    "%RETRY%G1",
    "c1",
    "c2",
    "bad name",
    "*",
    "TagA || TagB",
    "x" * 128,
    "é",
    "TAG",
    "SQL92",
]
STRINGS = st.one_of(st.sampled_from(POOL_STRINGS), st.text(max_size=12))
INT32 = st.one_of(st.sampled_from([0, 1, 2, 3, 4, 5, -1, 2**31 - 1, -(2**31)]), st.integers(-(2**31), 2**31 - 1))
INT64 = st.one_of(st.sampled_from([0, 1, 3, 5, 10, -1, 2**63 - 1, -(2**63)]), st.integers(-(2**63), 2**63 - 1))
SMALL_WAIT = st.integers(-3, 20)  # long-poll waits stay short so fuzzing never parks for long
FD = pb_descriptor.FieldDescriptor


# mostly valid values per field name, so that requests get past validation and reach the state
LIKELY: dict[str, st.SearchStrategy[Any]] = {
    "broker_name": st.sampled_from(["broker-a", "broker-b"]),
    "topic": st.sampled_from(["TopicTest", "TopicTest", "%RETRY%G1", "Other"]),
    "group_name": st.sampled_from(["G1", "G2"]),
    "consumer_group": st.sampled_from(["G1", "G2"]),
    "client_id": st.sampled_from(["c1", "c2", "c3"]),
    "queue_id": st.integers(0, 4),
    "offset": st.integers(0, 8),
    "queue_offset": st.integers(0, 8),
    "max_msg_nums": st.integers(0, 40),
    "read_queue_nums": st.integers(1, 8),
    "write_queue_nums": st.integers(1, 8),
    "perm": st.integers(0, 7),
    "expression_type": st.sampled_from(["", "TAG"]),
    "body": st.binary(min_size=1, max_size=32),
}


def scalar(field: pb_descriptor.FieldDescriptor) -> st.SearchStrategy[Any]:
    if field.name in ("max_wait_ms", "delay_ms"):
        return SMALL_WAIT
    likely = LIKELY.get(field.name)
    if likely is not None:
        return st.one_of(likely, likely, likely, likely, likely, any_scalar(field))
    if field.type == FD.TYPE_ENUM:  # mostly known values
        known = st.sampled_from([v.number for v in field.enum_type.values if v.number])
        return st.one_of(known, known, known, any_scalar(field))
    return any_scalar(field)


def any_scalar(field: pb_descriptor.FieldDescriptor) -> st.SearchStrategy[Any]:
    if field.type == FD.TYPE_STRING:
        return STRINGS
    if field.type == FD.TYPE_BYTES:
        return st.binary(max_size=32)
    if field.type == FD.TYPE_BOOL:
        return st.booleans()
    if field.type == FD.TYPE_ENUM:
        return st.one_of(st.sampled_from([v.number for v in field.enum_type.values]), st.integers(-3, 9))
    if field.type in (FD.TYPE_INT64, FD.TYPE_SINT64, FD.TYPE_SFIXED64):
        return INT64
    return INT32


def messages(descriptor: pb_descriptor.Descriptor, depth: int = 0) -> st.SearchStrategy[pb_message.Message]:
    """Random instances of a message type: pool strings, edge numbers, unknown enum values, nested, repeated."""
    cls = message_factory.GetMessageClass(descriptor)
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for field in descriptor.fields:
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            fields[field.name] = st.dictionaries(STRINGS, STRINGS, max_size=2)
            continue
        if field.message_type is not None:
            if depth >= 2:
                continue
            value: st.SearchStrategy[Any] = messages(field.message_type, depth + 1)
        else:
            value = scalar(field)
        if field.is_repeated:
            fields[field.name] = st.lists(value, max_size=3)
        else:
            fields[field.name] = value if field.name in LIKELY else st.one_of(value, value, value, st.none())

    def build(values: dict[str, Any]) -> pb_message.Message:
        instance = cls()
        for name, value in values.items():
            if value is None:
                continue
            field = descriptor.fields_by_name[name]
            if field.message_type is not None and field.message_type.GetOptions().map_entry:
                getattr(instance, name).update(value)
            elif field.is_repeated:
                getattr(instance, name).extend(value)
            elif field.message_type is not None:
                getattr(instance, name).CopyFrom(value)
            else:
                setattr(instance, name, value)
        return instance

    return st.fixed_dictionaries(fields).map(build)


SERVICES = [
    namesrv_pb2.DESCRIPTOR.services_by_name["NameServer"],
    broker_pb2.DESCRIPTOR.services_by_name["Broker"],
    admin_pb2.DESCRIPTOR.services_by_name["Admin"],
]
# an admin reset is the one legitimate way back; everything else must keep offsets monotone
METHODS = [
    (service, method) for service in SERVICES for method in service.methods if method.name != "ResetConsumerOffset"
]
CALLS = st.sampled_from(METHODS).flatmap(
    lambda sm: messages(sm[1].input_type).map(lambda request: (sm[0], sm[1], request))
)
ALLOWED = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.UNAVAILABLE,
}


@pytest.fixture(scope="module")
def fuzz_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StubServer, StubClients]]:
    from nameserver_stub.config import StubConfig, parse_topic_spec

    server = StubServer(
        StubConfig(
            listen="127.0.0.1:0",
            data_dir=tmp_path_factory.mktemp("fuzz"),
            topics=(parse_topic_spec("TopicTest:broker-a=4,broker-b=4"),),
            enable_faults=True,
            max_long_poll=0.02,
        )
    ).start()
    clients = connect_clients(server.address)
    for broker in ("broker-a", "broker-b"):
        for queue_id in range(4):
            send(clients, broker, "TopicTest", *[b"m"] * 6, queue_id=queue_id)
        commit(clients, broker, "G1", {("TopicTest", q): 3 for q in range(4)}, client_id="c1")
    yield server, clients
    clients.close()
    server.stop(grace=1)


def invoke(
    clients: StubClients,
    service: pb_descriptor.ServiceDescriptor,
    method: pb_descriptor.MethodDescriptor,
    payload: bytes,
) -> grpc.StatusCode:
    path = f"/{service.full_name}/{method.name}"
    try:
        if method.server_streaming:
            call = clients.channel.unary_stream(path)(payload, timeout=10)
            next(iter(call), None)  # the first message (connected) or the refusal
            call.cancel()
        else:
            clients.channel.unary_unary(path)(payload, timeout=10)
    except grpc.RpcError as error:
        return error.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


def restore(clients: StubClients) -> None:
    for broker in ("broker-a", "broker-b"):
        clients.admin.SetBrokerState(admin_pb2.SetBrokerStateRequest(broker_name=broker, up=True), timeout=10)
    clients.admin.ClearFaults(admin_pb2.ClearFaultsRequest(), timeout=10)


def check_survived(server: StubServer, clients: StubClients, before: dict[tuple[str, str, str, int], int]) -> None:
    assert clients.health.Check(health_pb2.HealthCheckRequest(), timeout=10).status == 1
    after = server.store.all_offsets()
    for key, offset in before.items():
        assert after[key] >= offset, f"offset {key} moved back from {offset} to {after[key]}"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=st.lists(CALLS, min_size=1, max_size=4))
def test_random_well_formed_requests(
    fuzz_target: tuple[StubServer, StubClients],
    calls: list[tuple[pb_descriptor.ServiceDescriptor, pb_descriptor.MethodDescriptor, pb_message.Message]],
) -> None:
    server, clients = fuzz_target
    before = server.store.all_offsets()
    try:
        for service, method, request in calls:
            code = invoke(clients, service, method, request.SerializeToString())
            assert code in ALLOWED, f"{method.full_name}({request}) -> {code}"
    finally:
        restore(clients)
    check_survived(server, clients, before)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(method=st.sampled_from(METHODS), payload=st.binary(max_size=80))
def test_random_bytes(
    fuzz_target: tuple[StubServer, StubClients],
    method: tuple[pb_descriptor.ServiceDescriptor, pb_descriptor.MethodDescriptor],
    payload: bytes,
) -> None:
    server, clients = fuzz_target
    before = server.store.all_offsets()
    try:
        invoke(clients, method[0], method[1], payload)  # any status; the server must just survive
    finally:
        restore(clients)
    check_survived(server, clients, before)


def test_fuzzing_reaches_the_offsets(fuzz_target: tuple[StubServer, StubClients]) -> None:
    """The invariant above is not vacuous: the fuzz target has committed offsets to protect."""
    server, _ = fuzz_target
    assert len(server.store.all_offsets()) >= 8
