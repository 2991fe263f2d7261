"""A route that names many brokers (probe 2026-11-24, finding 11): a consumer's threads stay fixed, an unknown broker
costs no cluster-info look-up of its own, a failure at many brokers is one health kind and one log line, a route
past the limit is refused, and ``shutdown(timeout)`` keeps to its timeout, leaving no request and no thread behind.

Before, a route of 10,000 one-queue brokers (within the queue limit) took 8 s to start with 8,540 threads (one
reader per connection, one notification thread per broker), asked the name server for the cluster info once per
unknown broker per heartbeat, logged 28,445 warnings, and ``shutdown(timeout=5)`` took 36 s (an unregister pool of
one thread per broker, after the timeout was spent) while heartbeats went on after it had returned.

The name server and the brokers are a fake on the real remoting wire, served by one selector thread of its own,
so the thread counts below are the consumer's."""

from __future__ import annotations

import heapq
import itertools
import json
import logging
import selectors
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from rocket_rebalance.model import MAX_ROUTE_BROKERS, ConsumeFromWhere, MessageModel, MessageQueue
from rocket_rebalance.remoting import FrameDecoder, RemotingCommand, RequestCode, ResponseCode, encode, response_to
from rocket_rebalance.route import QueueData, TooManyBrokersError, TopicRoute
from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.transport import GroupRegistration, PullResult, TransportError
from rocket_rebalance.runtime.transport.remoting import RemotingTransport

TOPIC = "TopicMany"
GROUP = "GID_many"
CLIENT = "127.0.0.1@many"
Answer = Callable[[str, RemotingCommand], tuple[RemotingCommand, float] | None]


class FakeCluster:
    """A name server and brokers on loopback ports, all served by one thread: the name server answers on every
    port, and ``answer(address, request)`` gives each reply and how long to hold it (None: no reply at all).
    Every request is recorded with the time it arrived."""

    def __init__(self, ports: int, answer: Answer) -> None:
        self.answer = answer
        self.received: list[tuple[float, str, int]] = []  # (time.monotonic(), address, request code)
        self._lock = threading.Lock()
        self._selector = selectors.DefaultSelector()
        self.addresses: list[str] = []
        for _ in range(ports):
            listener = socket.create_server(("127.0.0.1", 0))
            listener.setblocking(False)
            address = f"127.0.0.1:{listener.getsockname()[1]}"
            self._selector.register(listener, selectors.EVENT_READ, (address, None))
            self.addresses.append(address)
        self._held: list[tuple[float, int, socket.socket, bytes]] = []
        self._order = itertools.count()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="fake-cluster", daemon=True)
        self._thread.start()

    def codes(self, since: float = 0.0) -> list[int]:
        with self._lock:
            return [code for at, _, code in self.received if at > since]

    def _run(self) -> None:
        while not self._stopped:
            timeout = 0.05 if not self._held else max(0.0, min(0.05, self._held[0][0] - time.monotonic()))
            for key, _ in self._selector.select(timeout):
                address, decoder = key.data
                if decoder is None:
                    conn, _ = key.fileobj.accept()  # type: ignore[union-attr]
                    conn.setblocking(False)
                    self._selector.register(conn, selectors.EVENT_READ, (address, FrameDecoder()))
                else:
                    self._read(key.fileobj, address, decoder)  # type: ignore[arg-type]
            now = time.monotonic()
            while self._held and self._held[0][0] <= now:
                _, _, conn, data = heapq.heappop(self._held)
                try:
                    conn.sendall(data)
                except OSError:
                    pass

    def _read(self, conn: socket.socket, address: str, decoder: FrameDecoder) -> None:
        try:
            chunk = conn.recv(1 << 16)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._selector.unregister(conn)
            conn.close()
            return
        for command in decoder.feed(chunk):
            with self._lock:
                self.received.append((time.monotonic(), address, command.code))
            if command.is_response or command.is_oneway:
                continue
            reply = self.answer(address, command)
            if reply is not None:
                answer, delay = reply
                due = time.monotonic() + delay
                heapq.heappush(self._held, (due, next(self._order), conn, encode(answer)))

    def close(self) -> None:
        self._stopped = True
        self._thread.join(5)
        for key in list(self._selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        self._selector.close()


def route_body(brokers: Sequence[str], addresses: Sequence[str] | None) -> bytes:
    """A route of one queue at each broker; each broker at ``addresses`` in turn, or at no address at all."""
    broker_datas = (
        []
        if addresses is None
        else [
            {"brokerAddrs": {"0": addresses[i % len(addresses)]}, "brokerName": b, "cluster": "c"}
            for i, b in enumerate(brokers)
        ]
    )
    queue_datas = [
        {"brokerName": b, "perm": 6, "readQueueNums": 1, "writeQueueNums": 1, "topicSysFlag": 0} for b in brokers
    ]
    return json.dumps({"brokerDatas": broker_datas, "queueDatas": queue_datas}).encode()


def cluster_answers(
    brokers: Sequence[str], addresses: Sequence[str] | None, slow: dict[int, float] | None = None
) -> Answer:
    """What a name server and healthy brokers answer to a pull-style consumer of TOPIC; ``slow`` holds the answers
    of some request codes that long (``inf``: never answered)."""
    delays = slow or {}

    def answer(address: str, command: RemotingCommand) -> tuple[RemotingCommand, float] | None:
        delay = delays.get(command.code, 0.0)
        if delay == float("inf"):
            return None
        if command.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            if command.ext.get("topic") != TOPIC:
                return response_to(command, ResponseCode.TOPIC_NOT_EXIST, remark="no such topic"), delay
            return response_to(command, ResponseCode.SUCCESS, body=route_body(brokers, addresses)), delay
        if command.code == RequestCode.GET_BROKER_CLUSTER_INFO:
            body = {"brokerAddrTable": {}, "clusterAddrTable": {}}  # the brokers without an address are unknown
            return response_to(command, ResponseCode.SUCCESS, body=json.dumps(body).encode()), delay
        if command.code == RequestCode.GET_CONSUMER_LIST_BY_GROUP:
            body = {"consumerIdList": [CLIENT]}
            return response_to(command, ResponseCode.SUCCESS, body=json.dumps(body).encode()), delay
        if command.code == RequestCode.QUERY_CONSUMER_OFFSET:
            return response_to(command, ResponseCode.SUCCESS, ext={"offset": "0"}), delay
        if command.code == RequestCode.GET_CONSUMER_CONNECTION_LIST:  # the subscription check before a heartbeat
            return response_to(command, ResponseCode.CONSUMER_NOT_ONLINE, remark="not online yet"), delay
        return response_to(command, ResponseCode.SUCCESS), delay

    return answer


class Recorded(RemotingTransport):
    """The remoting transport, noting when each call that reaches for a broker began."""

    def __init__(self, namesrv: str, timeout: float = 2.0) -> None:
        super().__init__([namesrv], timeout=timeout)
        self.calls: list[tuple[float, str]] = []

    def _note(self, name: str) -> None:
        self.calls.append((time.monotonic(), name))

    def heartbeat(self, broker: str, client_id: str, group: GroupRegistration) -> None:
        self._note("heartbeat")
        super().heartbeat(broker, client_id, group)

    def unregister(self, broker: str, client_id: str, consumer_group: str) -> None:
        self._note("unregister")
        super().unregister(broker, client_id, consumer_group)

    def pull(
        self,
        mq: MessageQueue,
        consumer_group: str,
        offset: int,
        max_messages: int,
        wait_ms: int,
        done: Callable[[PullResult | TransportError], None],
    ) -> None:
        self._note("pull")
        super().pull(mq, consumer_group, offset, max_messages, wait_ms, done)

    def connect(self, broker: str, client_id: str, *callbacks: Any) -> Any:
        self._note("connect")
        return super().connect(broker, client_id, *callbacks)

    def after(self, moment: float) -> list[str]:
        return [name for at, name in list(self.calls) if at > moment]


@pytest.fixture
def clusters() -> Iterator[Callable[[int, Answer], FakeCluster]]:
    started: list[FakeCluster] = []

    def start(ports: int, answer: Answer) -> FakeCluster:
        started.append(FakeCluster(ports, answer))
        return started[-1]

    yield start
    for cluster in started:
        cluster.close()


def consumer(transport: RemotingTransport, errors: list[tuple[str, Exception]], **config: Any) -> PushConsumer:
    """A pull-style consumer (told its queues, pulling nothing itself) of TOPIC: the brokers' side of a consumer
    (routes, heartbeats, streams, member lists, offsets, the unregister) without the messages."""
    return PushConsumer(
        transport.address,
        GROUP,
        topics=[TOPIC],
        queue_listener=lambda topic, mq_all, mine: None,
        client_id=CLIENT,
        transport=transport,
        on_error=lambda kind, error: errors.append((kind, error)),
        fenced_handover=False,
        message_model=MessageModel.CLUSTERING,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        **config,
    )


def ours() -> list[str]:
    """The threads of this library's consumers and transports (the fake cluster's is not one of them)."""
    return [t.name for t in threading.enumerate() if t.name.startswith(("rr-", "rebalance-service"))]


def wait(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.05)


def names(count: int) -> list[str]:
    return [f"b{i:04d}" for i in range(count)]


# ---------------------------------------------------------------------------------------------------- the limit


def test_a_route_of_the_limit_is_taken_and_one_more_broker_is_refused_by_name() -> None:
    at_limit = tuple(QueueData(b, 1, 1) for b in names(MAX_ROUTE_BROKERS))
    assert len(TopicRoute(TOPIC, at_limit).brokers()) == MAX_ROUTE_BROKERS
    with pytest.raises(TooManyBrokersError, match=f"names 1025 brokers; the limit is {MAX_ROUTE_BROKERS}"):
        TopicRoute(TOPIC, (*at_limit, QueueData("one-more", 1, 1)))
    twice = tuple(QueueData("b", 0, 0) for _ in range(MAX_ROUTE_BROKERS + 1))  # no queues, but a datum each
    with pytest.raises(TooManyBrokersError, match=r"1025 queue datas \(1 brokers\)"):
        TopicRoute(TOPIC, twice)


def test_a_name_servers_route_over_the_limit_is_a_health_problem_and_no_broker_is_contacted(
    clusters: Callable[[int, Answer], FakeCluster],
) -> None:
    brokers = names(MAX_ROUTE_BROKERS + 1)
    fake = clusters(1, cluster_answers(brokers, None))
    fake.answer = cluster_answers(brokers, fake.addresses)
    errors: list[tuple[str, Exception]] = []
    c = consumer(Recorded(fake.addresses[0]), errors, route_refresh_interval=0.5)
    c.start()
    try:
        wait(lambda: any(kind == f"route of {TOPIC}" for kind, _ in errors))
        problem = c.describe()["problems"][f"route of {TOPIC}"]  # type: ignore[index]
        assert f"names {len(brokers)} brokers; the limit is {MAX_ROUTE_BROKERS} brokers per route" in problem
        assert "\n" not in problem and not c.healthy
        assert RequestCode.HEART_BEAT not in fake.codes()
    finally:
        assert c.shutdown(10)


# ---------------------------------------------------------------------------------------------------- threads


def test_a_thousand_brokers_at_two_hundred_addresses_cost_no_thread_each(
    clusters: Callable[[int, Answer], FakeCluster],
) -> None:
    """One reader for every connection, no thread per notification stream, heartbeats on a small pool.

    The fake's one thread answers every request of a thousand brokers (a heartbeat round is 2,000 of them, with
    each heartbeat's subscription check): on a busy machine it falls seconds behind, which is the fake's speed,
    not the consumer's failure, so the calls here may wait long (the thread counts do not depend on it); a CI run
    beside three others had 2 s calls time out at 0.5 s heartbeats."""
    brokers = names(1000)
    fake = clusters(200, cluster_answers(brokers, None))
    fake.answer = cluster_answers(brokers, fake.addresses)
    errors: list[tuple[str, Exception]] = []
    transport = Recorded(fake.addresses[0], timeout=60.0)
    c = consumer(transport, errors, heartbeat_interval=2.0)
    before = threading.active_count()
    c.start()
    try:
        # every broker's notification stream opened, and a heartbeat at each broker after that
        wait(lambda: [name for _, name in transport.calls].count("connect") >= len(brokers), 120)
        wait(lambda: fake.codes().count(RequestCode.HEART_BEAT) >= 2 * len(brokers), 120)
        assert threading.active_count() - before <= 30, sorted(ours())
        assert errors == []
    finally:
        assert c.shutdown(30)


# ---------------------------------------------------------------------------------------------------- unknown brokers


def test_unknown_brokers_cost_one_cluster_info_look_up_not_one_each(
    clusters: Callable[[int, Answer], FakeCluster],
) -> None:
    brokers = names(500)
    fake = clusters(1, cluster_answers(brokers, None))  # the route gives no broker an address
    transport = RemotingTransport([fake.addresses[0]], timeout=2.0)
    transport.CLUSTER_INFO_EVERY = 3600.0  # so that the count below does not depend on how fast this machine is
    registration = GroupRegistration(
        GROUP, False, MessageModel.CLUSTERING, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, (TOPIC,)
    )
    try:
        transport.route(TOPIC)
        failures = []
        for broker in brokers:  # a heartbeat round
            with pytest.raises(TransportError) as raised:
                transport.heartbeat(broker, CLIENT, registration)
            failures.append(raised.value.code)
        assert failures == ["NOT_FOUND"] * len(brokers)
        assert fake.codes().count(RequestCode.GET_BROKER_CLUSTER_INFO) == 1
    finally:
        transport.close()


def test_a_failure_at_every_broker_is_one_kind_and_one_line_naming_them(
    clusters: Callable[[int, Answer], FakeCluster], caplog: pytest.LogCaptureFixture
) -> None:
    brokers = names(500)
    fake = clusters(1, cluster_answers(brokers, None))
    errors: list[tuple[str, Exception]] = []
    transport = Recorded(fake.addresses[0])
    transport.CLUSTER_INFO_EVERY = 3600.0
    caplog.set_level(logging.WARNING, "rocket_rebalance")
    c = consumer(transport, errors)
    c.start()
    try:
        wait(lambda: {"heartbeat", "broker connection", f"member list for {TOPIC}"} <= {kind for kind, _ in errors})
        wait(lambda: len([kind for kind, _ in errors if kind == "broker connection"]) >= len(brokers))
        problems = c.describe()["problems"]
        assert isinstance(problems, dict)
        assert "heartbeat" in problems and "broker connection" in problems
        assert not any(kind.startswith(("heartbeat to", "connection to")) for kind in problems)
        assert "b0000, b0001, b0002, b0003, b0004 and 495 more" in problems["heartbeat"]
        said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        kinds = sorted(line.split(" failing")[0] for line in said)  # each once: the first failure of its kind
        assert kinds == ["broker connection", "heartbeat", f"member list for {TOPIC}"], said[:5]
        assert fake.codes().count(RequestCode.GET_BROKER_CLUSTER_INFO) == 1
    finally:
        c.shutdown(10)


# ---------------------------------------------------------------------------------------------------- shutdown


def test_nothing_reaches_a_broker_after_shutdown_returned_and_no_thread_is_left(
    clusters: Callable[[int, Answer], FakeCluster],
) -> None:
    """Heartbeat rounds run back to back (each heartbeat takes 2 ms at the broker), so the shutdown comes in the
    middle of one: before, that round went on after ``shutdown()`` had returned."""
    brokers = names(1000)
    fake = clusters(1, cluster_answers(brokers, None))
    fake.answer = cluster_answers(brokers, fake.addresses, slow={RequestCode.HEART_BEAT: 0.002})
    errors: list[tuple[str, Exception]] = []
    transport = Recorded(fake.addresses[0])
    c = consumer(transport, errors, heartbeat_interval=0.2)
    c.start()
    wait(lambda: [name for _, name in transport.calls].count("heartbeat") >= 3 * len(brokers))
    assert c.shutdown(20) is True
    returned = time.monotonic()
    assert ours() == []  # every thread of the consumer and its transport ended before it returned
    time.sleep(1.0)  # time for anything still running to show itself
    assert fake.codes(since=returned) == []
    assert transport.after(returned) == []
    assert fake.codes().count(RequestCode.UNREGISTER_CLIENT) == len(brokers)


def test_a_shutdown_whose_unregister_is_not_answered_says_so_and_leaves_nothing_running(
    clusters: Callable[[int, Answer], FakeCluster],
) -> None:
    """Brokers that never answer UNREGISTER_CLIENT: the unregister gets what the timeout has left, then the
    connections close (a broker drops a client whose connection closed). Before, each broker's unregister waited
    its full call timeout after the shutdown's own had been spent, and the shutdown still said it was clean."""
    brokers = names(50)
    fake = clusters(1, cluster_answers(brokers, None))
    fake.answer = cluster_answers(brokers, fake.addresses, slow={RequestCode.UNREGISTER_CLIENT: float("inf")})
    errors: list[tuple[str, Exception]] = []
    transport = Recorded(fake.addresses[0])
    c = consumer(transport, errors)
    c.start()
    wait(lambda: fake.codes().count(RequestCode.HEART_BEAT) >= 2 * len(brokers))
    assert c.shutdown(1.0) is False
    returned = time.monotonic()
    time.sleep(1.0)
    assert fake.codes(since=returned) == []
    assert transport.after(returned) == []
