"""What a consumer observes holding, asked through the stub (Admin.ConsumerRunningInfo relayed on the consumer's
Connect stream, answered with Broker.ReportRunningInfo), and the stub's topic and group listings.

Real gRPC over loopback against an in-process stub; the consumer is a real in-process ``PushConsumer``, or a raw
stream client where the test needs one that misbehaves (never answers, forges answers).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import grpc
import pytest

from nameserver_stub.connections import CloseReason, Connection, RunningInfoAsk
from nameserver_stub.errors import DeadlineExceeded, InvalidArgument, NotFound, ResourceExhausted, Unavailable
from nameserver_stub.relay import RunningInfoRelay
from nameserver_stub.server import StubServer
from rocket_rebalance._proto.v1 import admin_pb2, broker_pb2, common_pb2
from rocket_rebalance.model import ConsumeFromWhere, MessageQueue
from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.transport import GRPC_SCHEME, ConsumerReport, TransportError
from rocket_rebalance.runtime.transport.grpc import GrpcTransport
from tests.stub.conftest import StartStub
from tests.stub.harness import WAIT, StubClients, commit, connect_clients, consumer_data, heartbeat, queue_of, status_of

GROUP = "GID_ri"


def wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.05)


@pytest.fixture
def server(start_stub: StartStub) -> StubServer:
    return start_stub(topics=("TopicTest:broker-a=4,broker-b=4", "OnlyB:broker-b=2"))


@pytest.fixture
def clients(server: StubServer) -> Iterator[StubClients]:
    with connect_clients(server.address) as bundle:
        yield bundle


@pytest.fixture
def admin(server: StubServer) -> Iterator[GrpcTransport]:
    """An admin whose questions wait as long as ``WAIT``: a consumer on a loaded machine answers in its own time."""
    transport = GrpcTransport(server.address, timeout=WAIT)
    yield transport
    transport.close()


@pytest.fixture
def impatient(server: StubServer) -> Iterator[GrpcTransport]:
    """An admin that gives a consumer 1 s to answer (the stub ends the relayed call at the asker's deadline)."""
    transport = GrpcTransport(server.address, timeout=1.0)
    yield transport
    transport.close()


class RawClient:
    """A member of ``GROUP`` at broker-a with an open Connect stream whose messages land in a queue: it answers
    running-info requests only when the test makes it."""

    def __init__(self, clients: StubClients, client_id: str) -> None:
        self.client_id = client_id
        heartbeat(clients, "broker-a", client_id, consumer_data(GROUP, "TopicTest"))
        self._call = clients.broker.Connect(broker_pb2.ConnectRequest(broker_name="broker-a", client_id=client_id))
        self._items: queue.Queue[broker_pb2.BrokerNotification] = queue.Queue()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        assert self._items.get(timeout=WAIT).HasField("connected")

    def _read(self) -> None:
        try:
            for item in self._call:
                self._items.put(item)
        except grpc.RpcError:
            pass  # cancelled at close

    def next_request(self) -> broker_pb2.RunningInfoRequest:
        """The next running-info request on the stream (notifications before it are skipped)."""
        while True:
            item = self._items.get(timeout=WAIT)
            if item.HasField("running_info_request"):
                return item.running_info_request

    def close(self) -> None:
        self._call.cancel()
        self._thread.join(WAIT)


@pytest.fixture
def raw(clients: StubClients) -> Iterator[Callable[[str], RawClient]]:
    opened: list[RawClient] = []

    def open_client(client_id: str) -> RawClient:
        opened.append(RawClient(clients, client_id))
        return opened[-1]

    yield open_client
    for client in opened:
        client.close()


def report(
    client_id: str, request: broker_pb2.RunningInfoRequest, *queue_ids: int, **fields: Any
) -> broker_pb2.ReportRunningInfoRequest:
    values: dict[str, Any] = {
        "broker_name": "broker-a",
        "client_id": client_id,
        "request_id": request.request_id,
        "consumer_group": request.consumer_group,
        "queues": [
            common_pb2.QueueRunningInfo(queue=queue_of("TopicTest", "broker-a", q), commit_offset=q) for q in queue_ids
        ],
        "properties": {"PROP_CLIENT_LANGUAGE": "JAVA"},
    }
    values.update(fields)
    return broker_pb2.ReportRunningInfoRequest(**values)


def test_the_stub_relays_the_question_to_a_real_consumer_which_reports_what_it_holds(
    server: StubServer, admin: GrpcTransport
) -> None:
    address = GRPC_SCHEME + server.address
    consumers = [
        PushConsumer(address, GROUP, topics=["TopicTest"], queue_listener=lambda *_: None, client_id=cid)
        for cid in ("a", "b")
    ]
    for consumer in consumers:
        consumer.start()
    try:

        def held(consumer: PushConsumer) -> frozenset[MessageQueue]:
            return frozenset().union(*consumer.owned_queues().values())

        wait_for(lambda: all(len([q for q in held(c) if q.topic == "TopicTest"]) == 4 for c in consumers))
        reports: dict[str, ConsumerReport] = {}

        def reported_as_held() -> bool:  # "a" reports what it gives up to "b" as dropped until its offsets are saved
            reports.update((cid, admin.consumer_report(GROUP, cid)) for cid in ("a", "b"))
            return reports["a"].queues == held(consumers[0]) and reports["b"].queues == held(consumers[1])

        def settled_apart() -> bool:  # each as it holds once the handover ended: a loaded machine reads mid-handover
            return reported_as_held() and reports["a"].queues.isdisjoint(reports["b"].queues)

        wait_for(settled_apart)
        properties = reports["a"].properties
        assert properties["PROP_CLIENT_LANGUAGE"] == "PYTHON" and properties["messageModel"] == "CLUSTERING"
        assert properties["allocateMessageQueueStrategy"].rsplit(".", 1)[-1] == "AllocateMessageQueueAveragely"
        assert properties["PROP_NAMESERVER_ADDR"] == address
        consumers[0].shutdown()
        with pytest.raises(TransportError, match="consumer 'a' of group 'GID_ri' has no open connection") as offline:
            admin.consumer_report(GROUP, "a")
        assert offline.value.code == "NOT_FOUND"
        assert admin.consumer_report(GROUP, "b").client_id == "b"  # the stream still answers after a round
    finally:
        for consumer in consumers:
            consumer.shutdown()
    assert server.relay.waiting == 0


def test_a_consumer_reports_its_consume_statistics_through_the_stub(server: StubServer, admin: GrpcTransport) -> None:
    """The statusTable of Java's running info on the stub's wire: per subscribed topic, once the minute window has
    sampled the consumption (its first sample comes 10 s after the consumer started, as in Java)."""
    consumed: list[int] = []
    consumer = PushConsumer(
        GRPC_SCHEME + server.address,
        GROUP,
        topics=["OnlyB"],
        listener=lambda b: consumed.append(len(b)),
        client_id="s",
        # From the first offset: a queue owned but not yet started when the messages come (its offset not read yet,
        # a window a busy machine widens) would otherwise start at their end and never see them (CI, 2026-11-28).
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.start()
    try:
        wait_for(lambda: len(consumer.owned_queues().get("OnlyB", ())) == 2)
        admin.send("OnlyB", "broker-b", [b"m"] * 20, 0)
        wait_for(lambda: sum(consumed) == 20)
        report = admin.consumer_report(GROUP, "s")
        assert set(report.status) == {"OnlyB", f"%RETRY%{GROUP}"}
        deadline = time.monotonic() + 2 * WAIT
        while report.status["OnlyB"].consume_ok_tps == 0 and time.monotonic() < deadline:
            time.sleep(0.5)
            report = admin.consumer_report(GROUP, "s")
        status = report.status["OnlyB"]
        assert status.consume_ok_tps > 0 and status.pull_tps > 0 and status.consume_failed_tps == 0, status
        assert report.properties["PROP_THREADPOOL_CORE_SIZE"] == "20"  # the default consume pool, as Java's
    finally:
        consumer.shutdown()


def test_a_consumer_that_never_answers_ends_the_call_in_its_timeout_and_leaves_nothing_waiting(
    server: StubServer, impatient: GrpcTransport, raw: Callable[[str], RawClient]
) -> None:
    silent = raw("silent")
    with pytest.raises(TransportError, match="consumer 'silent' did not answer within 1 s") as timed_out:
        impatient.consumer_report(GROUP, "silent")
    assert timed_out.value.code == "DEADLINE_EXCEEDED"
    request = silent.next_request()  # it was asked, and did not answer
    assert server.relay.waiting == 0
    stale = report("silent", request, 0)
    with connect_clients(server.address) as clients:  # a late answer finds nobody waiting, and is refused
        code, details = status_of(clients.broker.ReportRunningInfo, stale)
    assert code == grpc.StatusCode.NOT_FOUND and "is waiting" in details


def test_reports_for_requests_not_sent_to_the_reporter_are_refused_and_change_nothing(
    clients: StubClients, admin: GrpcTransport, raw: Callable[[str], RawClient]
) -> None:
    asked = raw("asked")
    raw("other")  # a real member with its own stream: its client ID still cannot answer for "asked"
    with ThreadPoolExecutor(1) as pool:
        pending: Future[ConsumerReport] = pool.submit(admin.consumer_report, GROUP, "asked")
        request = asked.next_request()
        refusals = [
            (report("other", request, 9), grpc.StatusCode.INVALID_ARGUMENT),  # another client's ID
            (report("asked", request, 9, consumer_group="GID_else"), grpc.StatusCode.INVALID_ARGUMENT),
            (report("asked", request, 9, broker_name="broker-b"), grpc.StatusCode.INVALID_ARGUMENT),
            (report("asked", request, 9, request_id="0" * 32), grpc.StatusCode.NOT_FOUND),  # never sent
            (report("asked", request, 1, 1), grpc.StatusCode.INVALID_ARGUMENT),  # a queue twice
        ]
        for forged, expected in refusals:
            assert status_of(clients.broker.ReportRunningInfo, forged)[0] == expected, forged
        assert not pending.done()
        clients.broker.ReportRunningInfo(report("asked", request, 2, 3), timeout=WAIT)
        answer = pending.result(WAIT)
    assert answer == ConsumerReport(
        "asked",
        frozenset({MessageQueue("TopicTest", "broker-a", 2), MessageQueue("TopicTest", "broker-a", 3)}),
        {"PROP_CLIENT_LANGUAGE": "JAVA"},
    )
    code, _ = status_of(clients.broker.ReportRunningInfo, report("asked", request, 0))  # answered already
    assert code == grpc.StatusCode.NOT_FOUND


def test_consumer_running_info_bad_input(clients: StubClients, server: StubServer) -> None:
    cases = [
        (admin_pb2.ConsumerRunningInfoRequest(consumer_group=GROUP, client_id="a", timeout_ms=-1), "timeout_ms -1"),
        (admin_pb2.ConsumerRunningInfoRequest(consumer_group=GROUP, client_id="a", timeout_ms=60001), "0..60000"),
        (admin_pb2.ConsumerRunningInfoRequest(consumer_group=GROUP), "client_id is empty"),
        (admin_pb2.ConsumerRunningInfoRequest(client_id="a"), "consumer_group"),
    ]
    for request, message in cases:
        code, details = status_of(clients.admin.ConsumerRunningInfo, request)
        assert code == grpc.StatusCode.INVALID_ARGUMENT and message in details, (request, details)
    code, details = status_of(
        clients.admin.ConsumerRunningInfo, admin_pb2.ConsumerRunningInfoRequest(consumer_group=GROUP, client_id="x")
    )
    assert code == grpc.StatusCode.NOT_FOUND and "no open connection" in details
    assert server.relay.waiting == 0


def test_the_relay_bounds_waiting_requests_and_takes_back_unanswered_ones() -> None:
    """Directly on the relay: a stream nobody reads keeps nothing after a timeout; a closed one ends the wait;
    past the limit a request is refused at once."""
    relay: RunningInfoRelay[str] = RunningInfoRelay(limit=1)
    unread = Connection("broker-a", "c1")
    with pytest.raises(DeadlineExceeded, match="did not answer within 0.1 s"):
        relay.ask(unread, GROUP, 0.1)
    assert relay.waiting == 0 and unread.pending == 0

    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(relay.ask, unread, GROUP, WAIT)
        wait_for(lambda: relay.waiting == 1)
        with pytest.raises(ResourceExhausted, match="already waiting"):
            relay.ask(Connection("broker-a", "c2"), GROUP, WAIT)
        ask = unread.next()
        assert isinstance(ask, RunningInfoAsk) and ask.consumer_group == GROUP
        with pytest.raises(InvalidArgument):
            relay.answer("broker-a", "c2", ask.request_id, GROUP, "forged")
        with pytest.raises(NotFound):
            relay.answer("broker-a", "c1", "unknown", GROUP, "forged")
        relay.answer("broker-a", "c1", ask.request_id, GROUP, "the report")
        assert waiting.result(WAIT) == "the report"

        closing = Connection("broker-a", "c3")
        waiting = pool.submit(relay.ask, closing, GROUP, WAIT)
        wait_for(lambda: closing.pending == 1)
        closing.close(CloseReason.CLIENT)
        with pytest.raises(Unavailable, match="closed its connection"):
            waiting.result(WAIT)
    assert relay.waiting == 0


def test_topics_and_groups_are_listed(clients: StubClients, server: StubServer, admin: GrpcTransport) -> None:
    heartbeat(clients, "broker-a", "m1", consumer_data("GID_member", "TopicTest"))
    heartbeat(clients, "broker-b", "m2", consumer_data("GID_on_b", "OnlyB"))
    commit(clients, "broker-a", "GID_stored", {("TopicTest", 0): 0})  # offsets only, no member
    assert admin.topics() == ["%RETRY%GID_member", "%RETRY%GID_on_b", "OnlyB", "TopicTest"]
    assert admin.consumer_groups() == ["GID_member", "GID_on_b", "GID_stored"]
    clients.admin.SetBrokerState(admin_pb2.SetBrokerStateRequest(broker_name="broker-b", up=False), timeout=WAIT)
    assert admin.topics() == ["%RETRY%GID_member", "TopicTest"]  # as routes: nothing only a down broker hosts
    assert admin.consumer_groups() == ["GID_member", "GID_stored"]
