"""A full disk: clients are told "disk full" (RESOURCE_EXHAUSTED, naming the data directory), not SQLite's
"cannot rollback - no transaction is active", and nothing acknowledged is lost.

The disk is made full for real SQLite with ``max_db_bytes`` (``PRAGMA max_page_count``): SQLite answers
SQLITE_FULL exactly as on a full disk, on the same code path. No tmpfs, which would need root.
"""

from __future__ import annotations

from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2

from nameserver_stub.server import StubServer
from rocket_rebalance._proto.v1 import admin_pb2, broker_pb2, namesrv_pb2
from tests.stub.conftest import StartStub, start_stub
from tests.stub.harness import WAIT, commit, connect_clients, pull, query, status_of

__all__ = ["start_stub"]

TOPIC_SPEC = "TopicTest:broker-a=64"


def send_until_full(stub: object, broker: str, body: bytes) -> tuple[dict[int, list[bytes]], grpc.RpcError]:
    """Send one message at a time round the queues until a send fails; returns what was acknowledged."""
    acknowledged: dict[int, list[bytes]] = {}
    for number in range(10_000):
        request = broker_pb2.SendMessageRequest(
            broker_name=broker,
            topic="TopicTest",
            queue_id=number % 64,
            messages=[broker_pb2.MessageToSend(body=body + str(number).encode())],
        )
        try:
            stub.broker.SendMessage(request, timeout=WAIT)  # type: ignore[attr-defined]
        except grpc.RpcError as error:
            return acknowledged, error
        acknowledged.setdefault(number % 64, []).append(body + str(number).encode())
    raise AssertionError("the database never filled up")


def test_disk_full_is_said_and_nothing_acknowledged_is_lost(start_stub: StartStub, tmp_path: Path) -> None:
    data_dir = tmp_path / "small"
    server = start_stub(data_dir=data_dir, topics=(TOPIC_SPEC,), max_db_bytes=256 * 1024)
    with connect_clients(server.address) as stub:
        commit(stub, "broker-a", "G1", {("TopicTest", 0): 0})
        acknowledged, error = send_until_full(stub, "broker-a", b"x" * 2000)
        assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED, error.details()
        details = error.details() or ""
        assert "disk full" in details and str(data_dir) in details and "nothing of this request was stored" in details
        assert "no transaction is active" not in details

        # offsets: a commit that needs new pages is refused the same way, and the stored offsets stay
        before = query(stub, "broker-a", "G1", *[("TopicTest", q) for q in range(64)])
        wide = broker_pb2.UpdateConsumerOffsetRequest(
            broker_name="broker-a",
            consumer_group="G" + "w" * 200,
            offsets=[
                {"queue": {"topic": "TopicTest", "broker_name": "broker-a", "queue_id": q}, "offset": 0}
                for q in range(64)
            ],
        )
        try:
            for group_number in range(200):
                wide.consumer_group = f"G{group_number:03d}" + "w" * 200
                stub.broker.UpdateConsumerOffset(wide, timeout=WAIT)
            raise AssertionError("offset commits never filled the database")
        except grpc.RpcError as refused:
            assert refused.code() is grpc.StatusCode.RESOURCE_EXHAUSTED and "disk full" in (refused.details() or "")
        assert query(stub, "broker-a", "G1", *[("TopicTest", q) for q in range(64)]) == before

        # a topic the admin creates is refused too, and does not appear half-made
        refused_topic = ""
        try:
            for topic_number in range(500):
                refused_topic = f"T{topic_number:03d}" + "t" * 100
                stub.admin.CreateOrUpdateTopic(
                    admin_pb2.CreateOrUpdateTopicRequest(
                        broker_name="broker-a", topic=refused_topic, read_queue_nums=1, write_queue_nums=1
                    ),
                    timeout=WAIT,
                )
            raise AssertionError("topics never filled the database")
        except grpc.RpcError as refused:
            assert refused.code() is grpc.StatusCode.RESOURCE_EXHAUSTED and "disk full" in (refused.details() or "")
        code, _ = status_of(
            stub.namesrv.GetRouteInfoByTopic, namesrv_pb2.GetRouteInfoByTopicRequest(topic=refused_topic)
        )
        assert code is grpc.StatusCode.NOT_FOUND
        assert stub.health.Check(health_pb2.HealthCheckRequest(), timeout=WAIT).status == 1  # still serving
        assert query(stub, "broker-a", "G1", ("TopicTest", 0)) == [0]
    server.stop()

    # restart without the cap: every acknowledged message is there, in order, and nothing else
    restarted = StubServer(server.config.__class__(listen="127.0.0.1:0", data_dir=data_dir)).start()
    try:
        with connect_clients(restarted.address) as stub:
            for queue_id in range(64):
                stored = pull(stub, "broker-a", "TopicTest", queue_id, 0, max_msg_nums=1024)
                assert [m.body for m in stored.messages] == acknowledged.get(queue_id, [])
                assert stored.max_offset == len(acknowledged.get(queue_id, []))
            assert query(stub, "broker-a", "G1", ("TopicTest", 0)) == [0]
    finally:
        restarted.stop()


def test_the_cap_is_named_when_one_is_set(start_stub: StartStub, tmp_path: Path) -> None:
    server = start_stub(data_dir=tmp_path / "capped", topics=(TOPIC_SPEC,), max_db_bytes=128 * 1024)
    with connect_clients(server.address) as stub:
        _, error = send_until_full(stub, "broker-a", b"y" * 3000)
    assert "its cap of 131072 bytes" in (error.details() or "")
