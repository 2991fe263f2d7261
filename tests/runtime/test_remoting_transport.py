"""The remoting transport's own rules, against a scripted server on loopback: multiplexing by opaque, inbound
requests, deadlines, GO_AWAY, reconnects, bad frames, name-server failover.

The real-broker behaviour is tested in ``tests/rocketmq``; these are the faults a real broker cannot be made to
produce on demand. The server speaks the real codec over real sockets.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor

import pytest

from rocket_rebalance.model import ConsumeFromWhere, MessageModel, MessageQueue
from rocket_rebalance.remoting import (
    RemotingCommand,
    RequestCode,
    ResponseCode,
    bodies,
    request,
    response_to,
)
from rocket_rebalance.runtime.transport import (
    Message,
    PullResult,
    PullStatus,
    QueueRunInfo,
    RunningInfo,
    TopicConsumeStatus,
    TransportError,
)
from rocket_rebalance.runtime.transport.connection import Connection, Reactor
from rocket_rebalance.runtime.transport.remoting import RemotingTransport
from rocket_rebalance.subscription import SQL92, SubscriptionExpression
from tests.scripted_server import Handler, ScriptedServer

MQ = MessageQueue("TopicT", "broker-a", 0)
SILENCE = RemotingCommand(code=-1)  # what a handler returns to leave a request unanswered


def route_body(address: str) -> bytes:
    """A route in fastjson's old form (unquoted integer key), as servers older than 4.9.4 write it."""
    broker_data = '{"brokerAddrs":{0:"' + address + '"},"brokerName":"broker-a","cluster":"c"}'
    queue_data = '{"brokerName":"broker-a","perm":6,"readQueueNums":2,"writeQueueNums":2,"topicSysFlag":0}'
    return ('{"brokerDatas":[' + broker_data + '],"queueDatas":[' + queue_data + "]}").encode()


def broker_like(extra: Handler | None = None) -> Handler:
    """Answers routes (pointing at this server itself) and offset queries; ``extra`` first."""
    box: dict[str, str] = {}

    def handler(command: RemotingCommand) -> RemotingCommand | None:
        if extra is not None:
            answer = extra(command)
            if answer is not None:
                return None if answer is SILENCE else answer
        if command.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            return response_to(command, ResponseCode.SUCCESS, body=route_body(box["address"]))
        if command.code == RequestCode.QUERY_CONSUMER_OFFSET:
            return response_to(command, ResponseCode.SUCCESS, ext={"offset": command.ext["queueId"]})
        return response_to(command, ResponseCode.SUCCESS)

    handler.box = box  # type: ignore[attr-defined]
    return handler


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], ScriptedServer]]:
    servers: list[ScriptedServer] = []

    def start(handler: Handler) -> ScriptedServer:
        server = ScriptedServer(handler)
        if hasattr(handler, "box"):
            handler.box["address"] = server.address
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def connected(server: ScriptedServer, timeout: float = 2.0) -> RemotingTransport:
    transport = RemotingTransport([server.address], timeout=timeout)
    transport.route("TopicT")  # learns broker-a at the server's own address
    return transport


def test_a_route_in_fastjsons_old_form_is_read(serve: Callable[[Handler], ScriptedServer]) -> None:
    server = serve(broker_like())
    transport = connected(server)
    try:
        assert [d.read_queue_nums for d in transport.route("TopicT").queue_datas] == [2]
        sent = [c for c in server.received if c.code == RequestCode.GET_ROUTEINFO_BY_TOPIC][0]
        assert sent.ext == {"topic": "TopicT", "acceptStandardJsonOnly": "true"} and sent.language == "PYTHON"
    finally:
        transport.close()


def test_answers_are_matched_by_opaque_in_any_order(serve: Callable[[Handler], ScriptedServer]) -> None:
    held: list[RemotingCommand] = []

    def hold_queries(command: RemotingCommand) -> RemotingCommand | None:
        if command.code != RequestCode.QUERY_CONSUMER_OFFSET:
            return None
        held.append(command)
        if len(held) < 3:
            return SILENCE
        for earlier in [command, *reversed(held[:-1])]:  # the last first, then the others backwards
            server.push(
                response_to(earlier, ResponseCode.SUCCESS, ext={"offset": str(100 + int(earlier.ext["queueId"]))})
            )
        return SILENCE

    server = serve(broker_like(hold_queries))
    transport = connected(server)
    try:
        queues = [MessageQueue("TopicT", "broker-a", q) for q in (0, 1, 2)]
        assert transport.query_offsets("broker-a", "G", queues) == {mq: 100 + mq.queue_id for mq in queues}
    finally:
        transport.close()


def test_a_notification_wakes_the_stream_and_is_never_answered(serve: Callable[[Handler], ScriptedServer]) -> None:
    server = serve(broker_like())
    transport = connected(server)
    try:
        groups: list[str] = []
        ends: list[TransportError | None] = []
        stream = transport.connect("broker-a", "127.0.0.1@py", groups.append, ends.append)
        server.push(request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "G"}, oneway=True))
        server.push(RemotingCommand(code=9999, opaque=77))  # a request that expects an answer, after the oneway
        server.wait_for(lambda got: any(c.is_response for c in got))
        answers = [c for c in server.received if c.is_response]
        assert [(c.opaque, c.code) for c in answers] == [(77, ResponseCode.REQUEST_CODE_NOT_SUPPORTED)]
        stream.cancel()
        assert groups == ["G"] and ends == [None]
    finally:
        transport.close()


def test_a_lost_connection_ends_the_notification_stream_with_an_error(
    serve: Callable[[Handler], ScriptedServer],
) -> None:
    server = serve(broker_like())
    transport = connected(server)
    try:
        ended = threading.Event()
        ends: list[TransportError | None] = []
        transport.connect("broker-a", "127.0.0.1@py", lambda group: None, lambda e: (ends.append(e), ended.set()))
        for conn in server.connections:
            conn.shutdown(socket.SHUT_RDWR)
        assert ended.wait(5)
        [error] = ends
        assert isinstance(error, TransportError) and error.code == "UNAVAILABLE"
    finally:
        transport.close()


class _Client:
    def running_info(self) -> RunningInfo:
        return RunningInfo(
            "CONSUME_PASSIVELY",
            "CLUSTERING",
            "CONSUME_FROM_LAST_OFFSET",
            False,
            1_700_000_000_000,
            ("TopicT", "TopicS", "TopicU"),
            {MQ: QueueRunInfo(commit_offset=12, cached_size_mib=3, locked=True, last_lock_ms=1_700_000_000_500)},
            expressions={
                "TopicT": SubscriptionExpression("TagA || TagB"),
                "TopicS": SubscriptionExpression("a > 5", SQL92),
            },
            status={"TopicT": TopicConsumeStatus(pull_rt=2.5, consume_ok_tps=100.25, consume_failed_msgs=7)},
            settings={"pullBatchSize": "32"},
            consume_threads=20,
        )

    def consume_directly(self, message: Message) -> tuple[bool, str]:
        return True, ""

    def __init__(self) -> None:
        self.resets: list[tuple[str, dict[MessageQueue, int]]] = []

    def reset_offsets(self, consumer_group: str, offsets: Mapping[MessageQueue, int]) -> None:
        self.resets.append((consumer_group, dict(offsets)))

    def consumer_status(self, consumer_group: str, topic: str) -> dict[MessageQueue, int]:
        return {MQ: 12} if (consumer_group, topic) == ("G", MQ.topic) else {}


def test_a_reset_of_offsets_reaches_the_consumer_and_its_status_is_answered(
    serve: Callable[[Handler], ScriptedServer],
) -> None:
    """A broker with ``useServerSideResetOffset=false`` sends RESET_CONSUMER_CLIENT_OFFSET oneway (it was logged
    at DEBUG and dropped before, issue 39); ``mqadmin getConsumerStatus`` asks GET_CONSUMER_STATUS_FROM_CLIENT."""
    server = serve(broker_like())
    transport = connected(server)
    client = _Client()
    transport.attach(client)
    try:
        body = b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"TopicT"}:3}}'
        ext = {"topic": "TopicT", "group": "G", "timestamp": "1700000000000", "isForce": "true"}
        server.push(request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, ext, body, oneway=True))
        server.push(
            RemotingCommand(
                RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, opaque=6, ext={"group": "G", "topic": "TopicT"}
            )
        )
        server.wait_for(lambda got: any(c.is_response and c.opaque == 6 for c in got))
        answer = next(c for c in server.received if c.is_response and c.opaque == 6)
        assert answer.code == ResponseCode.SUCCESS
        assert (
            answer.body
            == b'{"consumerTable":{},"messageQueueTable":{{"brokerName":"broker-a","queueId":0,"topic":"TopicT"}:12}}'
        )
        assert client.resets == [("G", {MQ: 3})]  # handed on by the reader, before the status request after it
        assert not any(
            c.is_response and c.code != ResponseCode.SUCCESS for c in server.received
        )  # no answer to a oneway
    finally:
        transport.close()


def test_running_info_is_answered_in_javas_shape(serve: Callable[[Handler], ScriptedServer]) -> None:
    server = serve(broker_like())
    transport = connected(server)
    transport.attach(_Client())
    try:
        server.push(RemotingCommand(RequestCode.GET_CONSUMER_RUNNING_INFO, opaque=5, ext={"consumerGroup": "G"}))
        server.wait_for(lambda got: any(c.is_response and c.opaque == 5 for c in got))
        answer = next(c for c in server.received if c.is_response and c.opaque == 5)
        assert answer.code == ResponseCode.SUCCESS
        info = bodies.parse_running_info(answer.body)
        assert set(info.queues) == {MQ}
        assert info.properties["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
        assert int(info.properties["PROP_CONSUMER_START_TIMESTAMP"]) == 1_700_000_000_000
        assert info.properties["PROP_THREADPOOL_CORE_SIZE"] == "20" and info.properties["pullBatchSize"] == "32"
        assert info.status_table == {
            "TopicT": bodies.ConsumeStatus(pullRT=2.5, consumeOKTPS=100.25, consumeFailedMsgs=7)
        }  # the topics the consumer reports statistics for, as Java (one per subscription)
        row = info.mq_table[MQ]
        assert (row.cachedMsgSizeInMiB, row.lastLockTimestamp, row.locked) == (3, 1_700_000_000_500, True)
        assert b'{"brokerName":"broker-a","queueId":0,"topic":"TopicT"}:' in answer.body  # an object as map key
        # each topic's own expression, as Java's subscriptionSet carries it (a topic without one: "*")
        got = {s.topic: (s.expression_type, s.sub_string, s.tags_set) for s in info.subscriptions}
        assert got == {
            "TopicT": ("TAG", "TagA || TagB", ("TagA", "TagB")),
            "TopicS": ("SQL92", "a > 5", ()),
            "TopicU": ("TAG", "*", ()),
        }
    finally:
        transport.close()


def test_an_unanswered_request_fails_at_its_deadline(serve: Callable[[Handler], ScriptedServer]) -> None:
    server = serve(broker_like(lambda c: SILENCE if c.code == RequestCode.GET_MAX_OFFSET else None))
    transport = connected(server, timeout=0.3)
    try:
        started = time.monotonic()
        with pytest.raises(TransportError) as raised:
            transport.max_offset(MQ)
        assert raised.value.code == "DEADLINE_EXCEEDED" and "GET_MAX_OFFSET" in str(raised.value)
        assert time.monotonic() - started < 5
    finally:
        transport.close()


def test_an_answer_the_server_never_reads_closes_the_connection_at_the_timeout() -> None:
    """An answer to the server's request has no deadline of its own; written to a server that stopped reading, it
    blocks its thread (one of the few that answer every broker) in sendall, until the reader's sweep closes the
    connection because the write took longer than the timeout, which makes the sendall fail."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)  # so the kernel's buffers fill fast
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    address = f"127.0.0.1:{listener.getsockname()[1]}"
    reactor = Reactor()
    ended: list[TransportError] = []
    connection = Connection.open(address, 1.0, reactor, lambda c, r: None, lambda c, error: ended.append(error))
    held, _ = listener.accept()  # and never read
    answer = response_to(request(RequestCode.GET_CONSUMER_RUNNING_INFO), ResponseCode.SUCCESS, body=b"x" * (15 << 20))
    writer = ThreadPoolExecutor(1)
    try:
        started = time.monotonic()
        sending = writer.submit(connection.send, answer)
        with pytest.raises(TransportError, match=f"write to {address} failed"):
            sending.result(timeout=6)  # hung before: until the server closed
        assert time.monotonic() - started < 6
    finally:
        connection.close()
        reactor.close(5)
        held.close()
        listener.close()
        writer.shutdown(wait=False)
    assert ended and "a write to it did not finish in 1 s (the server is not reading)" in str(ended[0])


def test_go_away_retires_the_connection_and_the_request_goes_again(
    serve: Callable[[Handler], ScriptedServer],
) -> None:
    sent_away: list[int] = []

    def go_away_once(command: RemotingCommand) -> RemotingCommand | None:
        if command.code == RequestCode.GET_MAX_OFFSET:
            if not sent_away:
                sent_away.append(command.opaque)
                return response_to(command, ResponseCode.GO_AWAY)
            return response_to(command, ResponseCode.SUCCESS, ext={"offset": "42"})
        return None

    server = serve(broker_like(go_away_once))
    transport = connected(server)
    try:
        assert transport.max_offset(MQ) == 42
        assert server.accepted == 2  # the route's connection, retired, then a new one
    finally:
        transport.close()


def test_go_away_to_a_pull_retires_the_connection_and_the_pull_goes_again(
    serve: Callable[[Handler], ScriptedServer],
) -> None:
    """Pulls leave without a waiting thread (a callback): they follow GO_AWAY as calls do (probe finding 22)."""
    pulls: list[int] = []

    def go_away_once(command: RemotingCommand) -> RemotingCommand | None:
        if command.code == RequestCode.PULL_MESSAGE:
            pulls.append(command.opaque)
            if len(pulls) == 1:
                return response_to(command, ResponseCode.GO_AWAY)
            return response_to(command, ResponseCode.PULL_NOT_FOUND, ext={"nextBeginOffset": "3"})
        return None

    server = serve(broker_like(go_away_once))
    transport = connected(server)
    results: list[PullResult | TransportError] = []
    answered = threading.Event()
    try:
        transport.pull(MQ, "G", 3, 32, 0, lambda r: (results.append(r), answered.set()))
        assert answered.wait(5)
        assert results == [PullResult(PullStatus.NO_NEW_MSG, 3)] and len(pulls) == 2
        assert server.accepted == 2  # the route's connection, retired, then a new one
    finally:
        transport.close()


def test_a_bad_frame_from_the_server_is_one_error_not_a_hang(serve: Callable[[Handler], ScriptedServer]) -> None:
    def garbage(command: RemotingCommand) -> RemotingCommand | None:
        if command.code == RequestCode.GET_MAX_OFFSET:
            server.push(RemotingCommand(0))  # a valid frame first, then a length no frame may have
            with server._lock:
                server.connections[-1].sendall(b"\x7f\xff\xff\xff")
            return SILENCE
        return None

    server = serve(broker_like(garbage))
    transport = connected(server)
    try:
        with pytest.raises(TransportError) as raised:
            transport.max_offset(MQ)
        assert "bad frame" in str(raised.value)
    finally:
        transport.close()


def test_a_frame_stuck_half_read_costs_one_request_not_the_connection(
    serve: Callable[[Handler], ScriptedServer],
) -> None:
    """A length that promises 10 MB and 100 bytes of it: the decoder would swallow every later answer into that
    frame. The request times out, the connection is closed with it, and the next request works on a new one
    (probe finding 13; Java's clientCloseSocketIfTimeout)."""
    stuck: list[int] = []

    def wedge_once(command: RemotingCommand) -> RemotingCommand | None:
        if command.code == RequestCode.GET_MAX_OFFSET:
            if not stuck:
                stuck.append(command.opaque)
                with server._lock:
                    server.connections[-1].sendall((10_000_000).to_bytes(4, "big") + b"\0" * 100)
                return SILENCE
            return response_to(command, ResponseCode.SUCCESS, ext={"offset": "42"})
        return None

    server = serve(broker_like(wedge_once))
    transport = connected(server, timeout=0.5)
    try:
        with pytest.raises(TransportError) as raised:
            transport.max_offset(MQ)
        assert raised.value.code == "DEADLINE_EXCEEDED"
        deadline = time.monotonic() + 5
        while True:  # the pool backs off 0.2 s before it reconnects after a failure
            try:
                assert transport.max_offset(MQ) == 42
                break
            except TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        assert server.accepted == 2
    finally:
        transport.close()


def test_the_next_name_server_is_asked_when_one_is_down(serve: Callable[[Handler], ScriptedServer]) -> None:
    server = serve(broker_like())
    closed = socket.create_server(("127.0.0.1", 0))
    down = f"127.0.0.1:{closed.getsockname()[1]}"
    closed.close()
    for order in ([down, server.address], [server.address, down]):
        transport = RemotingTransport(order, timeout=1)
        transport._wire._namesrv_index = 0  # the list's first: a client starts at a random one, as Java's
        try:
            assert transport.route("TopicT").queue_datas[0].broker_name == "broker-a"
        finally:
            transport.close()


def test_a_broken_connection_fails_what_waits_and_the_next_call_reconnects(
    serve: Callable[[Handler], ScriptedServer],
) -> None:
    dropped: list[socket.socket] = []

    def drop(command: RemotingCommand) -> RemotingCommand | None:
        if command.code == RequestCode.GET_MAX_OFFSET and command.ext["queueId"] == "0":
            # the first shuts the latest connection, its own; the others get silence: on a busy machine one may
            # be handled after the client reconnected, when the latest connection is the new one
            with server._lock, contextlib.suppress(OSError):
                if not dropped:
                    dropped.append(server.connections[-1])
                    dropped[0].shutdown(socket.SHUT_RDWR)
            return SILENCE
        if command.code == RequestCode.GET_MAX_OFFSET and command.ext["queueId"] == "1":
            return response_to(command, ResponseCode.SUCCESS, ext={"offset": "7"})
        return None

    server = serve(broker_like(drop))
    transport = connected(server)
    try:
        with pytest.raises(TransportError) as raised:
            transport.max_offset(MQ)
        assert raised.value.code == "UNAVAILABLE"
        assert transport.max_offset(MessageQueue("TopicT", "broker-a", 1)) == 7
    finally:
        transport.close()


def test_heartbeats_carry_the_retry_topic_and_java_enum_names(serve: Callable[[Handler], ScriptedServer]) -> None:
    from rocket_rebalance.runtime.transport import GroupRegistration

    server = serve(broker_like())
    transport = connected(server)
    try:
        transport.heartbeat(
            "broker-a",
            "127.0.0.1@py",
            GroupRegistration(
                "G", True, MessageModel.CLUSTERING, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, ("TopicT",)
            ),
        )
        sent = next(c for c in server.received if c.code == RequestCode.HEART_BEAT)
        data = json.loads(sent.body)
        consumer = data["consumerDataSet"][0]
        assert consumer["consumeType"] == "CONSUME_PASSIVELY" and consumer["messageModel"] == "CLUSTERING"
        assert sorted(s["topic"] for s in consumer["subscriptionDataSet"]) == ["%RETRY%G", "TopicT"]
    finally:
        transport.close()


@pytest.mark.parametrize("ext", [{}, {"offset": "12x"}, {"offset": "99999999999999999999"}])
def test_a_malformed_number_in_an_answer_is_one_error(
    serve: Callable[[Handler], ScriptedServer], ext: dict[str, str]
) -> None:
    server = serve(
        broker_like(
            lambda c: response_to(c, ResponseCode.SUCCESS, ext=ext) if c.code == RequestCode.GET_MAX_OFFSET else None
        )
    )
    transport = connected(server)
    try:
        with pytest.raises(TransportError) as raised:
            transport.max_offset(MQ)
        assert (
            raised.value.code == "INTERNAL" and "GET_MAX_OFFSET" in str(raised.value) and "offset" in str(raised.value)
        )
    finally:
        transport.close()


def LIST(transport: RemotingTransport) -> object:  # noqa: N802 (a constant of the table below)
    return transport.consumer_list("broker-a", "G")


@pytest.mark.parametrize(
    ("code", "body", "call"),
    [
        (RequestCode.GET_CONSUMER_LIST_BY_GROUP, b"not json", LIST),
        (RequestCode.GET_CONSUMER_LIST_BY_GROUP, b'{"consumerIdList":null}', LIST),
        (RequestCode.LOCK_BATCH_MQ, b'{"lockOKMQSet":[{"topic":5}]}', lambda t: t.lock("broker-a", "G", "c", [MQ])),
    ],
    ids=["list not json", "list null", "lock set malformed"],
)
def test_a_success_answer_with_a_malformed_body_is_a_transport_error(
    serve: Callable[[Handler], ScriptedServer], code: int, body: bytes, call: Callable[[RemotingTransport], object]
) -> None:
    """The engine expects transport errors from every call; a codec error escaping (probe finding 4) vanished."""
    server = serve(broker_like(lambda c: response_to(c, ResponseCode.SUCCESS, body=body) if c.code == code else None))
    transport = connected(server)
    try:
        with pytest.raises(TransportError) as raised:
            call(transport)
        assert raised.value.code == "INTERNAL" and RequestCode(code).name in str(raised.value)
    finally:
        transport.close()


def test_one_offset_java_cannot_take_fails_only_its_own_write(serve: Callable[[Handler], ScriptedServer]) -> None:
    server = serve(broker_like())
    transport = connected(server)
    bad, good = MessageQueue("TopicT", "broker-a", 0), MessageQueue("TopicT", "broker-a", 1)
    try:
        stored = transport.update_offsets("broker-a", "G", "c", {bad: 2**63, good: 7})
        assert stored == {good: 7}
        writes = [c for c in server.received if c.code == RequestCode.UPDATE_CONSUMER_OFFSET]
        assert [(c.ext["queueId"], c.ext["commitOffset"]) for c in writes] == [("1", "7")]
    finally:
        transport.close()


def test_one_write_per_topic_is_answered_before_the_rest_are_sent(serve: Callable[[Handler], ScriptedServer]) -> None:
    """A RocketMQ 5.3.3 broker creates a topic's offset table for a group on its first write without a lock, so
    concurrent first writes lose queues (answered SUCCESS): the first write of each topic goes alone, the rest of
    the batch only after its answer. Here the server never answers: while the firsts wait, nothing else left."""
    server = serve(broker_like(lambda c: SILENCE if c.code == RequestCode.UPDATE_CONSUMER_OFFSET else None))
    transport = connected(server)
    offsets = {MessageQueue(topic, "broker-a", queue): 5 for topic in ("TopicT", "TopicU") for queue in range(4)}
    failed: list[BaseException] = []

    def write() -> None:
        try:
            transport.update_offsets("broker-a", "G", "c", offsets)
        except TransportError as error:
            failed.append(error)

    writer = threading.Thread(target=write)
    try:
        writer.start()
        server.wait_for(lambda got: sum(c.code == RequestCode.UPDATE_CONSUMER_OFFSET for c in got) >= 2)
        time.sleep(0.3)  # time for any other write to arrive, were it sent
        writes = [c for c in server.received if c.code == RequestCode.UPDATE_CONSUMER_OFFSET]
        assert sorted((c.ext["topic"], c.ext["queueId"]) for c in writes) == [("TopicT", "0"), ("TopicU", "0")]
    finally:
        writer.join(10)
        transport.close()
    assert failed  # nothing answered: the batch failed as a whole, to be written again by the core


def test_a_response_no_request_asked_for_is_a_warning(
    serve: Callable[[Handler], ScriptedServer], caplog: pytest.LogCaptureFixture
) -> None:
    """Probe 2026-11-24 #22: it was dropped at DEBUG. A request that timed out closes its connection, so such an
    answer is the server's mistake, and Java's client warns of it too."""
    server = serve(broker_like())
    transport = connected(server)
    try:
        groups: list[str] = []
        stream = transport.connect("broker-a", "127.0.0.1@py", groups.append, lambda _: None)
        stray = RemotingCommand(code=ResponseCode.SUCCESS, opaque=987_654, flag=1)
        with caplog.at_level(logging.WARNING, logger="rocket_rebalance.runtime.remoting"):
            server.push(stray)
            server.push(request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "G"}, oneway=True))
            deadline = time.monotonic() + 10
            while not groups and time.monotonic() < deadline:  # read in order: the stray answer came first
                time.sleep(0.02)
        assert groups == ["G"]
        assert any("opaque 987654, which no request used" in r.getMessage() for r in caplog.records), caplog.text
        stream.cancel()
    finally:
        transport.close()
