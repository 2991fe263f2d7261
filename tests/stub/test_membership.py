"""Consumer registry and NOTIFY_CONSUMER_IDS_CHANGED: join, leave, stream close, subscription change, expiry.

Notifications are awaited with a generous bound (they must come); "no notification" is checked after a later
event whose own notification proves the stream has been read past the point in question, so no test depends
on timing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import grpc
import pytest

from nameserver_stub.clock import ManualClock
from nameserver_stub.server import StubServer
from rocket_rebalance._proto.v1 import broker_pb2, common_pb2
from tests.stub.conftest import StartStub
from tests.stub.harness import Listener, StubClients, connect_clients, consumer_data, consumer_ids, heartbeat


@pytest.fixture
def listeners() -> Iterator[list[Listener]]:
    opened: list[Listener] = []
    yield opened
    for listener in opened:
        listener.close()


def listen(opened: list[Listener], stub: StubClients, broker: str, client_id: str) -> Listener:
    listener = Listener(stub, broker, client_id)
    opened.append(listener)
    return listener


def test_join_notifies_every_connected_member_including_the_joiner(
    stub: StubClients, listeners: list[Listener]
) -> None:
    c1 = listen(listeners, stub, "broker-a", "c1")
    heartbeat(stub, "broker-a", "c1", consumer_data("G1", "TopicTest"))
    assert c1.next() == "G1"
    c2 = listen(listeners, stub, "broker-a", "c2")
    heartbeat(stub, "broker-a", "c2", consumer_data("G1", "TopicTest"))
    assert c1.next() == "G1" and c2.next() == "G1"
    assert consumer_ids(stub, "broker-a", "G1") == ["c1", "c2"]


def test_consumer_list_is_in_join_order_not_sorted(stub: StubClients) -> None:
    for client in ("zeta", "alpha", "mid"):
        heartbeat(stub, "broker-a", client, consumer_data("G1", "TopicTest"))
    assert consumer_ids(stub, "broker-a", "G1") == ["zeta", "alpha", "mid"]
    assert consumer_ids(stub, "broker-a", "Unknown") == []


def test_a_repeated_heartbeat_does_not_notify(stub: StubClients, listeners: list[Listener]) -> None:
    c1 = listen(listeners, stub, "broker-a", "c1")
    heartbeat(stub, "broker-a", "c1", consumer_data("G1", "TopicTest"))
    assert c1.next() == "G1"
    heartbeat(stub, "broker-a", "c1", consumer_data("G1", "TopicTest"))
    heartbeat(stub, "broker-a", "c1", consumer_data("G1", "TopicTest"))
    heartbeat(stub, "broker-a", "c1", consumer_data("G2", "TopicTest"))  # a marker: joining G2 does notify
    assert c1.next() == "G2"
    assert c1.pending() == []


def test_subscription_topic_change_notifies_but_a_new_tag_expression_does_not(
    stub: StubClients, listeners: list[Listener]
) -> None:
    c1 = listen(listeners, stub, "broker-a", "c1")
    heartbeat(stub, "broker-a", "c1", consumer_data("G1", "TopicTest"))
    assert c1.next() == "G1"
    tagged = consumer_data("G1", "TopicTest")
    tagged.subscriptions[0].sub_string = "TagA || TagB"
    heartbeat(stub, "broker-a", "c1", tagged)
    heartbeat(stub, "broker-a", "c1", consumer_data("G1", "TopicTest", "%RETRY%G1"))
    assert c1.next() == "G1"
    assert c1.pending() == []  # only the topic change notified


def test_unregister_notifies_the_rest_and_leaves_other_groups(stub: StubClients, listeners: list[Listener]) -> None:
    c1 = listen(listeners, stub, "broker-a", "c1")
    heartbeat(stub, "broker-a", "c1", consumer_data("G1", "TopicTest"))
    heartbeat(stub, "broker-a", "c2", consumer_data("G1", "TopicTest"), consumer_data("G2", "TopicTest"))
    assert [c1.next(), c1.next()] == ["G1", "G1"]
    stub.broker.UnregisterClient(
        broker_pb2.UnregisterClientRequest(broker_name="broker-a", client_id="c2", consumer_group="G1")
    )
    assert c1.next() == "G1"
    assert consumer_ids(stub, "broker-a", "G1") == ["c1"]
    assert consumer_ids(stub, "broker-a", "G2") == ["c2"]
    stub.broker.UnregisterClient(broker_pb2.UnregisterClientRequest(broker_name="broker-a", client_id="c2"))
    assert consumer_ids(stub, "broker-a", "G2") == []


def test_closing_the_stream_is_leaving(stub: StubClients, listeners: list[Listener]) -> None:
    c1 = listen(listeners, stub, "broker-a", "c1")
    c2 = listen(listeners, stub, "broker-a", "c2")
    heartbeat(stub, "broker-a", "c1", consumer_data("G1", "TopicTest"))
    heartbeat(stub, "broker-a", "c2", consumer_data("G1", "TopicTest"))
    assert [c1.next(), c1.next(), c2.next()] == ["G1", "G1", "G1"]
    c2.close()
    assert c1.next() == "G1"
    assert consumer_ids(stub, "broker-a", "G1") == ["c1"]


def test_a_client_leaves_when_its_last_stream_closes(stub: StubClients, listeners: list[Listener]) -> None:
    watcher = listen(listeners, stub, "broker-a", "watcher")
    heartbeat(stub, "broker-a", "watcher", consumer_data("G1", "TopicTest"))
    assert watcher.next() == "G1"
    first = listen(listeners, stub, "broker-a", "c2")
    second = listen(listeners, stub, "broker-a", "c2")
    heartbeat(stub, "broker-a", "c2", consumer_data("G1", "TopicTest"))
    assert watcher.next() == "G1" and first.next() == "G1" and second.next() == "G1"
    first.close()
    heartbeat(stub, "broker-a", "marker", consumer_data("G1", "TopicTest"))
    assert watcher.next() == "G1"  # the marker's join, not a leave of c2
    assert consumer_ids(stub, "broker-a", "G1") == ["watcher", "c2", "marker"]
    second.close()
    assert watcher.next() == "G1"
    assert consumer_ids(stub, "broker-a", "G1") == ["watcher", "marker"]


def test_closing_a_channel_without_cancel_is_leaving(
    stub_server: StubServer, stub: StubClients, listeners: list[Listener]
) -> None:
    watcher = listen(listeners, stub, "broker-a", "watcher")
    heartbeat(stub, "broker-a", "watcher", consumer_data("G1", "TopicTest"))
    assert watcher.next() == "G1"
    other = connect_clients(stub_server.address)
    gone = Listener(other, "broker-a", "gone")
    heartbeat(other, "broker-a", "gone", consumer_data("G1", "TopicTest"))
    assert watcher.next() == "G1"
    other.close()  # the whole connection goes away, as when a client process dies
    assert watcher.next() == "G1"
    assert consumer_ids(stub, "broker-a", "G1") == ["watcher"]
    gone.wait_ended()


def test_brokers_keep_separate_registries(stub: StubClients, listeners: list[Listener]) -> None:
    a = listen(listeners, stub, "broker-a", "c1")
    b = listen(listeners, stub, "broker-b", "c1")
    heartbeat(stub, "broker-a", "c1", consumer_data("G1", "TopicTest"))
    assert a.next() == "G1"
    assert consumer_ids(stub, "broker-b", "G1") == []
    heartbeat(stub, "broker-b", "c1", consumer_data("G2", "TopicTest"))
    assert b.next() == "G2"
    assert a.pending() == []
    a.close()  # leaving broker-a does not leave broker-b
    assert consumer_ids(stub, "broker-a", "G1") == []
    assert consumer_ids(stub, "broker-b", "G2") == ["c1"]


def test_members_without_a_stream_are_registered_but_not_told(stub: StubClients, listeners: list[Listener]) -> None:
    c1 = listen(listeners, stub, "broker-a", "c1")
    heartbeat(stub, "broker-a", "quiet", consumer_data("G1", "TopicTest"))
    heartbeat(stub, "broker-a", "c1", consumer_data("G1", "TopicTest"))
    assert c1.next() == "G1"
    assert consumer_ids(stub, "broker-a", "G1") == ["quiet", "c1"]


def test_expiry_with_a_manual_clock(
    start_stub: StartStub, manual_clock: ManualClock, listeners: list[Listener]
) -> None:
    server = start_stub(clock=manual_clock, client_expiry=120.0, sweep_interval=3600.0)
    with connect_clients(server.address) as stub:
        c1 = listen(listeners, stub, "broker-a", "c1")
        heartbeat(stub, "broker-a", "c1", consumer_data("G1", "TopicTest"))
        heartbeat(stub, "broker-a", "c2", consumer_data("G1", "TopicTest"), consumer_data("G2", "TopicTest"))
        assert [c1.next(), c1.next()] == ["G1", "G1"]
        manual_clock.advance(60)
        heartbeat(stub, "broker-a", "c1", consumer_data("G1", "TopicTest"))
        heartbeat(stub, "broker-a", "c2", consumer_data("G2", "TopicTest"))  # refreshes G2 only
        manual_clock.advance(60)
        assert server.cluster.sweep() == 0  # exactly 120 s is not yet expired
        manual_clock.advance(0.001)
        assert server.cluster.sweep() == 1  # c2 in G1: its last G1 heartbeat is 120.001 s old
        assert c1.next() == "G1"
        assert consumer_ids(stub, "broker-a", "G1") == ["c1"]
        assert consumer_ids(stub, "broker-a", "G2") == ["c2"]
        manual_clock.advance(200)
        assert server.cluster.sweep() == 2
        assert consumer_ids(stub, "broker-a", "G1") == [] and consumer_ids(stub, "broker-a", "G2") == []


def test_expiry_by_the_sweeper_thread(start_stub: StartStub, listeners: list[Listener]) -> None:
    """Real clock, short expiry: the silent client is dropped by the background sweep and the group told."""
    server = start_stub(client_expiry=1.0, sweep_interval=0.05)
    with connect_clients(server.address) as stub:
        watcher = listen(listeners, stub, "broker-a", "watcher")
        heartbeat(stub, "broker-a", "silent", consumer_data("G1", "TopicTest"))
        heartbeat(stub, "broker-a", "watcher", consumer_data("G1", "TopicTest"))
        assert watcher.next() == "G1"  # its own join
        for _ in range(1000):  # bounded; ends after about a second, when "silent" expires
            if "silent" not in consumer_ids(stub, "broker-a", "G1"):
                break
            heartbeat(stub, "broker-a", "watcher", consumer_data("G1", "TopicTest"))
            time.sleep(0.02)
        assert watcher.next() == "G1"  # the expiry
        assert consumer_ids(stub, "broker-a", "G1") == ["watcher"]


def test_unknown_broker_and_down_broker(stub: StubClients) -> None:
    from tests.stub.harness import status_of

    request = broker_pb2.HeartbeatRequest(broker_name="broker-z", client_id="c1")
    code, details = status_of(stub.broker.HeartBeat, request)
    assert code is grpc.StatusCode.NOT_FOUND and "unknown broker 'broker-z'" in details
    code, _ = status_of(
        lambda *a, **k: list(stub.broker.Connect(broker_pb2.ConnectRequest(broker_name="broker-z", client_id="c"), **k))
    )
    assert code is grpc.StatusCode.NOT_FOUND


def test_consume_settings_are_recorded(stub: StubClients) -> None:
    from rocket_rebalance._proto.v1 import admin_pb2

    heartbeat(
        stub,
        "broker-a",
        "c1",
        consumer_data(
            "G1",
            "TopicTest",
            consume_type=common_pb2.CONSUME_TYPE_PULL,
            message_model=common_pb2.MESSAGE_MODEL_BROADCASTING,
            consume_from_where=common_pb2.CONSUME_FROM_TIMESTAMP,
        ),
    )
    view = stub.admin.ConsumerConnection(admin_pb2.ConsumerConnectionRequest(consumer_group="G1"))
    (connection,) = view.connections
    assert connection.consume_type == common_pb2.CONSUME_TYPE_PULL
    assert connection.message_model == common_pb2.MESSAGE_MODEL_BROADCASTING
    assert connection.consume_from_where == common_pb2.CONSUME_FROM_TIMESTAMP
    assert not connection.connected
