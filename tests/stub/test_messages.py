"""The message log: send, pull (statuses, filters, limits, long polling), and offset look-ups."""

from __future__ import annotations

import threading
import time

import grpc
import pytest

from nameserver_stub.clock import ManualClock
from nameserver_stub.server import StubServer
from nameserver_stub.validate import MAX_MESSAGE_SIZE
from rocket_rebalance._proto.v1 import admin_pb2, broker_pb2
from tests.stub.conftest import StartStub
from tests.stub.harness import StubClients, connect_clients, pull, send, status_of


def test_send_to_a_queue_and_pull_back(stub: StubClients) -> None:
    response = stub.broker.SendMessage(
        broker_pb2.SendMessageRequest(
            broker_name="broker-a",
            topic="TopicTest",
            queue_id=2,
            messages=[
                broker_pb2.MessageToSend(
                    body=b"one", tags="TagA", keys="k1 k2", properties={"p": "v"}, born_timestamp_ms=42
                ),
                broker_pb2.MessageToSend(body=b"two"),
            ],
        )
    )
    assert response.queue_id == 2 and [r.queue_offset for r in response.results] == [0, 1]
    assert len({r.msg_id for r in response.results}) == 2
    result = pull(stub, "broker-a", "TopicTest", 2, 0)
    assert result.status == broker_pb2.FOUND
    assert (result.next_begin_offset, result.min_offset, result.max_offset) == (2, 0, 2)
    first, second = result.messages
    assert (first.topic, first.broker_name, first.queue_id, first.queue_offset) == ("TopicTest", "broker-a", 2, 0)
    assert (first.body, first.tags, first.keys, dict(first.properties)) == (b"one", "TagA", "k1 k2", {"p": "v"})
    assert first.born_timestamp_ms == 42 and first.store_timestamp_ms > 0
    assert first.msg_id == response.results[0].msg_id
    assert second.body == b"two" and second.queue_offset == 1


def test_send_without_a_queue_goes_round_robin(stub: StubClients) -> None:
    chosen = [send(stub, "broker-b", "TopicTest", b"x").queue_id for _ in range(8)]
    assert chosen == [0, 1, 2, 3, 0, 1, 2, 3]


def test_pull_statuses(stub: StubClients) -> None:
    empty = pull(stub, "broker-a", "TopicTest", 0, 0)
    assert (empty.status, empty.next_begin_offset, empty.max_offset) == (broker_pb2.NO_NEW_MSG, 0, 0)
    send(stub, "broker-a", "TopicTest", b"a", b"b", b"c", queue_id=0)
    at_end = pull(stub, "broker-a", "TopicTest", 0, 3)
    assert (at_end.status, at_end.next_begin_offset) == (broker_pb2.NO_NEW_MSG, 3)
    beyond = pull(stub, "broker-a", "TopicTest", 0, 9)
    assert (beyond.status, beyond.next_begin_offset) == (broker_pb2.OFFSET_ILLEGAL, 3)
    assert not beyond.messages
    middle = pull(stub, "broker-a", "TopicTest", 0, 1)
    assert middle.status == broker_pb2.FOUND and [m.body for m in middle.messages] == [b"b", b"c"]


def test_pull_limits(stub: StubClients) -> None:
    send(stub, "broker-a", "TopicTest", *[b"%03d" % i for i in range(50)], queue_id=1)
    default = pull(stub, "broker-a", "TopicTest", 1, 0)
    assert len(default.messages) == 32 and default.next_begin_offset == 32
    five = pull(stub, "broker-a", "TopicTest", 1, 10, max_msg_nums=5)
    assert [m.queue_offset for m in five.messages] == [10, 11, 12, 13, 14] and five.next_begin_offset == 15
    by_bytes = pull(stub, "broker-a", "TopicTest", 1, 0, max_bytes=7)  # 3 bytes each: two fit
    assert len(by_bytes.messages) == 2 and by_bytes.next_begin_offset == 2
    at_least_one = pull(stub, "broker-a", "TopicTest", 1, 0, max_bytes=1)
    assert len(at_least_one.messages) == 1


def test_tag_filter(stub: StubClients) -> None:
    send(stub, "broker-a", "TopicTest", b"a1", queue_id=3, tags="TagA")
    send(stub, "broker-a", "TopicTest", b"b1", queue_id=3, tags="TagB")
    send(stub, "broker-a", "TopicTest", b"c1", queue_id=3, tags="TagC")
    send(stub, "broker-a", "TopicTest", b"n1", queue_id=3)
    result = pull(stub, "broker-a", "TopicTest", 3, 0, sub_expression="TagA || TagC")
    assert result.status == broker_pb2.FOUND and [m.body for m in result.messages] == [b"a1", b"c1"]
    assert result.next_begin_offset == 4
    none = pull(stub, "broker-a", "TopicTest", 3, 0, sub_expression="TagZ", max_msg_nums=2)
    assert (none.status, none.next_begin_offset) == (broker_pb2.NO_MATCHED_MSG, 2)
    assert len(pull(stub, "broker-a", "TopicTest", 3, 0, sub_expression="*").messages) == 4


def wait_parked(server: StubServer, count: int = 1) -> None:
    """Bounded wait until ``count`` pulls are parked at the server."""
    for _ in range(3000):
        if server.cluster.parked_pulls() >= count:
            return
        time.sleep(0.005)
    raise AssertionError("the pull never parked")


def test_long_poll_returns_when_a_message_arrives(stub_server: StubServer, stub: StubClients) -> None:
    results: list[broker_pb2.PullMessageResponse] = []
    waiting = threading.Thread(
        target=lambda: results.append(pull(stub, "broker-b", "TopicTest", 2, 0, max_wait_ms=20_000))
    )
    waiting.start()
    wait_parked(stub_server)
    send(stub, "broker-b", "TopicTest", b"other queue", queue_id=1)
    send(stub, "broker-b", "TopicTest", b"wake up", queue_id=2)
    waiting.join(30)
    assert not waiting.is_alive()
    (result,) = results
    assert result.status == broker_pb2.FOUND and [m.body for m in result.messages] == [b"wake up"]


def test_long_poll_without_message_answers_no_new_msg(start_stub: StartStub) -> None:
    server = start_stub(max_long_poll=0.05)  # caps the 60 s asked for
    with connect_clients(server.address) as stub:
        result = pull(stub, "broker-a", "TopicTest", 0, 0, max_wait_ms=60_000)
        assert result.status == broker_pb2.NO_NEW_MSG


def test_long_polls_end_when_the_server_stops(start_stub: StartStub) -> None:
    server = start_stub()
    stub = connect_clients(server.address)
    outcome: list[object] = []

    def poll() -> None:
        try:
            outcome.append(pull(stub, "broker-a", "TopicTest", 0, 0, max_wait_ms=25_000).status)
        except grpc.RpcError as error:
            outcome.append(error.code())

    waiting = threading.Thread(target=poll)
    waiting.start()
    wait_parked(server)
    server.stop(grace=10)
    waiting.join(30)
    stub.close()
    assert not waiting.is_alive()
    assert outcome in ([broker_pb2.NO_NEW_MSG], [grpc.StatusCode.UNAVAILABLE], [grpc.StatusCode.CANCELLED])


def test_max_min_and_search_offsets(start_stub: StartStub, manual_clock: ManualClock) -> None:
    server = start_stub(clock=manual_clock)
    with connect_clients(server.address) as stub:
        t0 = manual_clock.time_ms()
        send(stub, "broker-a", "TopicTest", b"a", b"b", queue_id=0)
        manual_clock.advance(5)
        send(stub, "broker-a", "TopicTest", b"c", queue_id=0)

        def search(ts: int) -> int:
            return int(
                stub.broker.SearchOffsetByTimestamp(
                    broker_pb2.SearchOffsetByTimestampRequest(
                        broker_name="broker-a", topic="TopicTest", queue_id=0, timestamp_ms=ts
                    )
                ).offset
            )

        assert search(0) == 0 and search(t0) == 0 and search(t0 + 1) == 2 and search(t0 + 5000) == 2
        assert search(t0 + 5001) == 3  # later than everything: the max offset
        request = {"broker_name": "broker-a", "topic": "TopicTest", "queue_id": 0}
        assert stub.broker.GetMaxOffset(broker_pb2.GetMaxOffsetRequest(**request)).offset == 3
        assert stub.broker.GetMinOffset(broker_pb2.GetMinOffsetRequest(**request)).offset == 0
        request["queue_id"] = 1
        assert stub.broker.GetMaxOffset(broker_pb2.GetMaxOffsetRequest(**request)).offset == 0


def test_message_size_limit(stub: StubClients) -> None:
    assert send(stub, "broker-a", "TopicTest", b"x" * MAX_MESSAGE_SIZE, queue_id=0).results[0].queue_offset == 0
    code, details = status_of(
        stub.broker.SendMessage,
        broker_pb2.SendMessageRequest(
            broker_name="broker-a",
            topic="TopicTest",
            queue_id=0,
            messages=[broker_pb2.MessageToSend(body=b"x" * (MAX_MESSAGE_SIZE + 1))],
        ),
    )
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert "messages[0].body is 4194305 bytes, more than the 4194304-byte (4 MiB) limit" in details
    pulled = pull(stub, "broker-a", "TopicTest", 0, 0)
    assert len(pulled.messages) == 1 and len(pulled.messages[0].body) == MAX_MESSAGE_SIZE
    assert pulled.max_offset == 1  # the refused message was not stored


@pytest.mark.parametrize(
    ("change", "code", "fragment"),
    [
        ({"queue_id": 4}, grpc.StatusCode.INVALID_ARGUMENT, "queue_id 4 is out of range"),
        ({"queue_id": -1}, grpc.StatusCode.INVALID_ARGUMENT, "queue_id -1 is negative"),
        ({"topic": "Unknown"}, grpc.StatusCode.NOT_FOUND, "'Unknown' is not hosted by broker 'broker-a'"),
        ({"topic": "bad topic"}, grpc.StatusCode.INVALID_ARGUMENT, "characters outside"),
        ({"broker_name": "broker-x"}, grpc.StatusCode.NOT_FOUND, "unknown broker 'broker-x'"),
        ({"messages": []}, grpc.StatusCode.INVALID_ARGUMENT, "send at least one message"),
        ({"messages": [broker_pb2.MessageToSend()]}, grpc.StatusCode.INVALID_ARGUMENT, "body is empty"),
    ],
)
def test_send_refusals(stub: StubClients, change: dict[str, object], code: grpc.StatusCode, fragment: str) -> None:
    fields: dict[str, object] = {
        "broker_name": "broker-a",
        "topic": "TopicTest",
        "queue_id": 0,
        "messages": [broker_pb2.MessageToSend(body=b"x")],
    }
    fields.update(change)
    got, details = status_of(stub.broker.SendMessage, broker_pb2.SendMessageRequest(**fields))  # type: ignore[arg-type]
    assert got is code and fragment in details


def test_write_and_read_queue_counts_differ(stub: StubClients) -> None:
    stub.admin.CreateOrUpdateTopic(
        admin_pb2.CreateOrUpdateTopicRequest(
            broker_name="broker-a", topic="Shrunk", read_queue_nums=4, write_queue_nums=2
        )
    )
    code, details = status_of(
        stub.broker.SendMessage,
        broker_pb2.SendMessageRequest(
            broker_name="broker-a", topic="Shrunk", queue_id=3, messages=[broker_pb2.MessageToSend(body=b"x")]
        ),
    )
    assert code is grpc.StatusCode.INVALID_ARGUMENT and "2 write queues" in details
    assert pull(stub, "broker-a", "Shrunk", 3, 0).status == broker_pb2.NO_NEW_MSG  # still readable
    code, details = status_of(
        stub.broker.PullMessage,
        broker_pb2.PullMessageRequest(broker_name="broker-a", consumer_group="G1", topic="Shrunk", queue_id=4),
    )
    assert code is grpc.StatusCode.INVALID_ARGUMENT and "4 read queues" in details


def test_permissions(stub: StubClients) -> None:
    create = admin_pb2.CreateOrUpdateTopicRequest
    stub.admin.CreateOrUpdateTopic(
        create(broker_name="broker-a", topic="ReadOnly", read_queue_nums=1, write_queue_nums=1, perm=4)
    )
    code, details = status_of(
        stub.broker.SendMessage,
        broker_pb2.SendMessageRequest(
            broker_name="broker-a", topic="ReadOnly", messages=[broker_pb2.MessageToSend(body=b"x")]
        ),
    )
    assert code is grpc.StatusCode.FAILED_PRECONDITION and "not writable" in details
    stub.admin.CreateOrUpdateTopic(
        create(broker_name="broker-a", topic="WriteOnly", read_queue_nums=1, write_queue_nums=1, perm=2)
    )
    code, details = status_of(
        stub.broker.PullMessage,
        broker_pb2.PullMessageRequest(broker_name="broker-a", consumer_group="G1", topic="WriteOnly"),
    )
    assert code is grpc.StatusCode.FAILED_PRECONDITION and "not readable" in details


def test_pull_argument_refusals(stub: StubClients) -> None:
    base = {"broker_name": "broker-a", "consumer_group": "G1", "topic": "TopicTest"}
    for change, fragment in [
        ({"queue_offset": -1}, "queue_offset -1 is negative"),
        ({"max_msg_nums": -1}, "max_msg_nums -1 is negative"),
        ({"max_wait_ms": -5}, "max_wait_ms -5 is negative"),
        ({"max_bytes": -5}, "max_bytes -5 is negative"),
        ({"consumer_group": ""}, "consumer group is empty"),
    ]:
        code, details = status_of(stub.broker.PullMessage, broker_pb2.PullMessageRequest(**{**base, **change}))
        assert code is grpc.StatusCode.INVALID_ARGUMENT and fragment in details, (change, details)
