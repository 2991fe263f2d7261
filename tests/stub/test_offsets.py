"""Consumer offsets: batched query/update, never backwards, admin reset, and the progress view."""

from __future__ import annotations

import grpc

from nameserver_stub.clock import ManualClock
from rocket_rebalance._proto.v1 import admin_pb2, broker_pb2, common_pb2
from tests.stub.conftest import StartStub
from tests.stub.harness import (
    StubClients,
    commit,
    connect_clients,
    consumer_data,
    heartbeat,
    lock,
    query,
    queue_of,
    send,
    status_of,
)


def fill(stub: StubClients, broker: str, queue_id: int, count: int, topic: str = "TopicTest") -> None:
    send(stub, broker, topic, *[b"m%d" % i for i in range(count)], queue_id=queue_id)


def test_never_committed_is_not_found(stub: StubClients) -> None:
    response = stub.broker.QueryConsumerOffset(
        broker_pb2.QueryConsumerOffsetRequest(
            broker_name="broker-a", consumer_group="G1", queues=[queue_of("TopicTest", "", 2)]
        )
    )
    (entry,) = response.offsets
    assert not entry.found and entry.offset == -1
    assert (entry.queue.topic, entry.queue.broker_name, entry.queue.queue_id) == ("TopicTest", "broker-a", 2)


def test_batched_update_and_query(stub: StubClients) -> None:
    for queue_id in range(4):
        fill(stub, "broker-a", queue_id, 10)
    response = commit(stub, "broker-a", "G1", {("TopicTest", 0): 3, ("TopicTest", 1): 10, ("TopicTest", 3): 0})
    assert [(r.queue.queue_id, r.stored_offset, r.updated) for r in response.results] == [
        (0, 3, True),
        (1, 10, True),
        (3, 0, True),
    ]
    assert query(stub, "broker-a", "G1", *[("TopicTest", q) for q in range(4)]) == [3, 10, -1, 0]
    assert query(stub, "broker-a", "G2", ("TopicTest", 0)) == [-1]  # groups are separate
    assert query(stub, "broker-b", "G1", ("TopicTest", 0)) == [-1]  # and brokers too


def test_offsets_never_move_backwards(stub: StubClients) -> None:
    fill(stub, "broker-a", 0, 10)
    commit(stub, "broker-a", "G1", {("TopicTest", 0): 7})
    response = commit(stub, "broker-a", "G1", {("TopicTest", 0): 5})
    assert [(r.stored_offset, r.updated) for r in response.results] == [(7, False)]
    assert [(r.stored_offset, r.updated) for r in commit(stub, "broker-a", "G1", {("TopicTest", 0): 7}).results] == [
        (7, False)
    ]
    assert query(stub, "broker-a", "G1", ("TopicTest", 0)) == [7]
    assert [r.updated for r in commit(stub, "broker-a", "G1", {("TopicTest", 0): 9}).results] == [True]


def test_a_bad_item_rejects_the_whole_batch(stub: StubClients) -> None:
    fill(stub, "broker-a", 0, 5)
    code, details = status_of(
        stub.broker.UpdateConsumerOffset,
        broker_pb2.UpdateConsumerOffsetRequest(
            broker_name="broker-a",
            consumer_group="G1",
            offsets=[
                common_pb2.QueueOffset(queue=queue_of("TopicTest", "broker-a", 0), offset=2),
                common_pb2.QueueOffset(queue=queue_of("TopicTest", "broker-a", 1), offset=1),
            ],
        ),
    )
    assert code is grpc.StatusCode.INVALID_ARGUMENT and "beyond the queue's max offset 0" in details
    assert query(stub, "broker-a", "G1", ("TopicTest", 0)) == [-1]


def test_offset_refusals(stub: StubClients) -> None:
    fill(stub, "broker-a", 0, 5)

    def update(*items: tuple[common_pb2.MessageQueue, int]) -> tuple[grpc.StatusCode, str]:
        return status_of(
            stub.broker.UpdateConsumerOffset,
            broker_pb2.UpdateConsumerOffsetRequest(
                broker_name="broker-a",
                consumer_group="G1",
                offsets=[common_pb2.QueueOffset(queue=q, offset=o) for q, o in items],
            ),
        )

    q0 = queue_of("TopicTest", "broker-a", 0)
    assert update((q0, -1)) == (grpc.StatusCode.INVALID_ARGUMENT, "offsets[0].offset -1 is negative")
    code, details = update((q0, 1), (q0, 2))
    assert code is grpc.StatusCode.INVALID_ARGUMENT and "repeats queue TopicTest/0" in details
    code, details = update((queue_of("TopicTest", "broker-b", 0), 1))
    assert code is grpc.StatusCode.INVALID_ARGUMENT and "differs from the broker" in details
    code, details = update((queue_of("TopicTest", "broker-a", 4), 0))
    assert code is grpc.StatusCode.INVALID_ARGUMENT and "queue_id 4 is out of range" in details
    code, details = update((queue_of("Nope", "broker-a", 0), 0))
    assert code is grpc.StatusCode.NOT_FOUND and "'Nope' is not hosted by broker 'broker-a'" in details


def test_admin_reset_may_move_backwards(stub: StubClients) -> None:
    for queue_id in range(4):
        fill(stub, "broker-a", queue_id, 6)
        fill(stub, "broker-b", queue_id, 2)
    commit(stub, "broker-a", "G1", {("TopicTest", q): 6 for q in range(4)})
    response = stub.admin.ResetConsumerOffset(
        admin_pb2.ResetConsumerOffsetRequest(
            consumer_group="G1", topic="TopicTest", broker_name="broker-a", queue_id=1, offset=2
        )
    )
    assert [(o.queue.broker_name, o.queue.queue_id, o.offset) for o in response.offsets] == [("broker-a", 1, 2)]
    assert query(stub, "broker-a", "G1", *[("TopicTest", q) for q in range(4)]) == [6, 2, 6, 6]
    # every broker and queue, clamped to the queue's max offset
    response = stub.admin.ResetConsumerOffset(
        admin_pb2.ResetConsumerOffsetRequest(consumer_group="G1", topic="TopicTest", offset=4)
    )
    assert sorted((o.queue.broker_name, o.queue.queue_id, o.offset) for o in response.offsets) == [
        ("broker-a", q, 4) for q in range(4)
    ] + [("broker-b", q, 2) for q in range(4)]
    code, details = status_of(
        stub.admin.ResetConsumerOffset, admin_pb2.ResetConsumerOffsetRequest(consumer_group="G1", topic="TopicTest")
    )
    assert code is grpc.StatusCode.INVALID_ARGUMENT and "either offset or timestamp_ms" in details


def test_reset_by_timestamp(start_stub: StartStub, manual_clock: ManualClock) -> None:
    server = start_stub(clock=manual_clock)
    with connect_clients(server.address) as stub:
        fill(stub, "broker-a", 0, 3)  # stored at t0
        manual_clock.advance(10)
        middle = manual_clock.time_ms()
        fill(stub, "broker-a", 0, 2)  # stored at t0 + 10 s: offsets 3 and 4
        commit(stub, "broker-a", "G1", {("TopicTest", 0): 5})
        response = stub.admin.ResetConsumerOffset(
            admin_pb2.ResetConsumerOffsetRequest(
                consumer_group="G1", topic="TopicTest", broker_name="broker-a", queue_id=0, timestamp_ms=middle
            )
        )
        assert [o.offset for o in response.offsets] == [3]
        assert query(stub, "broker-a", "G1", ("TopicTest", 0)) == [3]


def test_consumer_progress(stub: StubClients) -> None:
    fill(stub, "broker-a", 0, 10)
    fill(stub, "broker-b", 3, 4)
    heartbeat(stub, "broker-a", "c1", consumer_data("G1", "TopicTest"))
    commit(stub, "broker-a", "G1", {("TopicTest", 0): 6}, client_id="c1")
    commit(stub, "broker-b", "G1", {("TopicTest", 3): 1}, client_id="c2")
    assert lock(stub, "broker-a", "G1", "c1", 0) == [0]
    progress = stub.admin.ConsumerProgress(admin_pb2.ConsumerProgressRequest(consumer_group="G1"))
    rows = [
        (
            p.queue.topic,
            p.queue.broker_name,
            p.queue.queue_id,
            p.broker_offset,
            p.consumer_offset,
            p.diff,
            p.last_owner,
            p.lock_owner,
        )
        for p in progress.queues
    ]
    # broker-a: the subscribed and committed topic; broker-b: the committed topic (c1 never heartbeated there)
    assert rows == [
        ("TopicTest", "broker-a", 0, 10, 6, 4, "c1", "c1"),
        ("TopicTest", "broker-a", 1, 0, -1, 0, "", ""),
        ("TopicTest", "broker-a", 2, 0, -1, 0, "", ""),
        ("TopicTest", "broker-a", 3, 0, -1, 0, "", ""),
        ("TopicTest", "broker-b", 0, 0, -1, 0, "", ""),
        ("TopicTest", "broker-b", 1, 0, -1, 0, "", ""),
        ("TopicTest", "broker-b", 2, 0, -1, 0, "", ""),
        ("TopicTest", "broker-b", 3, 4, 1, 3, "c2", ""),
    ]
    assert progress.total_diff == 7
    filtered = stub.admin.ConsumerProgress(admin_pb2.ConsumerProgressRequest(consumer_group="G1", topic="Other"))
    assert list(filtered.queues) == []
