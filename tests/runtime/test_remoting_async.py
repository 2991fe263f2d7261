"""The asyncio remoting transport's own rules, against scripted servers on loopback (real sockets, the real codec):
multiplexing by opaque, deadlines, lost connections and the reconnect backoff, GO_AWAY, cancelled calls, close,
servers of another kind, and the requests a broker sends us. The real broker is in
``tests/rocketmq/test_async_remoting.py``; these are the faults a real broker cannot be made to produce on demand.

Each test runs its coroutine with :func:`tests.aio.run` (``asyncio.run`` under a bound, so a hang fails the test
instead of stalling the suite).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocket_rebalance.lab.certs import LabCertificates, make_certificates
from rocket_rebalance.model import AclCredentials, ConsumeFromWhere, MessageModel, MessageQueue, TlsSettings
from rocket_rebalance.remoting import RemotingCommand, RequestCode, ResponseCode, bodies, message, request, response_to
from rocket_rebalance.remoting.acl import ACCESS_KEY, SIGNATURE, signature
from rocket_rebalance.runtime.transport import (
    AsyncTransport,
    GroupRegistration,
    Message,
    PullResult,
    PullStatus,
    RunningInfo,
    SubscriptionRefusedError,
    TransportError,
)
from rocket_rebalance.runtime.transport.remoting_async import AsyncRemotingTransport
from rocket_rebalance.subscription import SQL92, SubscriptionExpression
from tests.aio import run
from tests.runtime.test_remoting_transport import MQ, SILENCE, _Client, broker_like, serve
from tests.runtime.test_tls_transport import MANY, PLAINTEXT_ANSWERS, _Plain, many_messages, server_context
from tests.scripted_server import Handler, ScriptedServer
from tests.stub.conftest import StartStub

__all__ = ["serve"]  # the fixture, used by name

T = TypeVar("T")
Serve = Callable[[Handler], ScriptedServer]


def transport_at(server: ScriptedServer, timeout: float = 2.0, **options: Any) -> AsyncRemotingTransport:
    return AsyncRemotingTransport([server.address], timeout=timeout, **options)


def ours() -> list[str]:
    return [thread.name for thread in threading.enumerate() if thread.name.startswith("rr-")]


def registration(**expressions: SubscriptionExpression) -> GroupRegistration:
    return GroupRegistration(
        "G", True, MessageModel.CLUSTERING, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, ("TopicT",), 0, expressions
    )


def test_it_is_an_async_transport_and_its_calls_go_on_one_connection_without_a_thread(serve: Serve) -> None:
    server = serve(broker_like())
    before = ours()

    async def calls() -> None:
        transport: AsyncTransport = transport_at(server)  # mypy checks the interface here
        try:
            assert [d.read_queue_nums for d in (await transport.route("TopicT")).queue_datas] == [2]
            queues = [MessageQueue("TopicT", "broker-a", q) for q in range(3)]
            assert await transport.query_offsets("broker-a", "G", queues) == {mq: mq.queue_id for mq in queues}
            await transport.heartbeat("broker-a", "c1", registration())
            assert ours() == before  # no thread: the loop's streams and tasks only
        finally:
            assert await transport.close()

    run(calls())
    assert server.accepted == 1
    sent = next(c for c in server.received if c.code == RequestCode.HEART_BEAT)
    subscriptions = json.loads(sent.body)["consumerDataSet"][0]["subscriptionDataSet"]
    assert sorted(s["topic"] for s in subscriptions) == ["%RETRY%G", "TopicT"]  # the retry topic, as Java


@settings(max_examples=15, deadline=None)
@given(order=st.permutations(range(5)))
def test_answers_are_matched_by_opaque_in_any_order(order: list[int]) -> None:
    held: list[RemotingCommand] = []

    def hold(command: RemotingCommand) -> RemotingCommand | None:
        if command.code != RequestCode.QUERY_CONSUMER_OFFSET:
            return None
        held.append(command)
        if len(held) == len(order):
            for index in order:
                answer = held[index]
                server.push(
                    response_to(answer, ResponseCode.SUCCESS, ext={"offset": str(100 + int(answer.ext["queueId"]))})
                )
        return SILENCE

    server = ScriptedServer(broker_like(hold))
    server.handler.box["address"] = server.address  # type: ignore[attr-defined]
    queues = [MessageQueue("TopicT", "broker-a", q) for q in range(len(order))]

    async def query() -> dict[MessageQueue, int | None]:
        transport = transport_at(server)
        try:
            await transport.route("TopicT")
            return await transport.query_offsets("broker-a", "G", queues)
        finally:
            await transport.close()

    try:
        assert run(query()) == {mq: 100 + mq.queue_id for mq in queues}
    finally:
        server.close()


def test_an_unanswered_call_fails_at_its_deadline_and_the_next_goes_on_a_new_connection(serve: Serve) -> None:
    silent = [True]

    def maybe_silent(command: RemotingCommand) -> RemotingCommand | None:
        if command.code == RequestCode.GET_MAX_OFFSET:
            return SILENCE if silent[0] else response_to(command, ResponseCode.SUCCESS, ext={"offset": "42"})
        return None

    server = serve(broker_like(maybe_silent))

    async def calls() -> None:
        transport = transport_at(server, timeout=0.3)
        try:
            await transport.route("TopicT")
            with pytest.raises(TransportError) as raised:
                await transport.max_offset(MQ)
            assert raised.value.code == "DEADLINE_EXCEEDED" and "GET_MAX_OFFSET" in str(raised.value)
            silent[0] = False
            assert await transport.max_offset(MQ) == 42
        finally:
            await transport.close()

    run(calls())
    assert server.accepted == 2  # the one that timed out was closed, as Java's clientCloseSocketIfTimeout


def test_a_connection_closed_by_the_server_fails_what_waits_and_the_next_call_reconnects(serve: Serve) -> None:
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
        if command.code == RequestCode.GET_MAX_OFFSET:
            return response_to(command, ResponseCode.SUCCESS, ext={"offset": "7"})
        return None

    server = serve(broker_like(drop))
    ends: list[TransportError | None] = []

    async def calls() -> None:
        transport = transport_at(server)
        try:
            await transport.route("TopicT")
            await transport.connect("broker-a", "c1", lambda group: None, ends.append)
            waiting = [asyncio.create_task(transport.max_offset(MQ)) for _ in range(3)]
            failures = await asyncio.gather(*waiting, return_exceptions=True)
            assert all(isinstance(f, TransportError) and f.code == "UNAVAILABLE" for f in failures), failures
            assert await transport.max_offset(MessageQueue("TopicT", "broker-a", 1)) == 7
        finally:
            await transport.close()

    run(calls())
    assert server.accepted == 2
    assert len(ends) == 1 and isinstance(ends[0], TransportError) and ends[0].code == "UNAVAILABLE"


def test_an_address_that_refused_is_tried_again_only_after_the_backoff() -> None:
    placeholder = socket.create_server(("127.0.0.1", 0))
    port = placeholder.getsockname()[1]
    placeholder.close()  # nothing listens there now: connecting is refused
    address = f"127.0.0.1:{port}"
    servers: list[ScriptedServer] = []

    async def calls() -> None:
        transport = AsyncRemotingTransport([address], timeout=2.0)
        try:
            with pytest.raises(TransportError, match=f"cannot connect to {address}") as first:
                await transport.route("TopicT")
            # at once: within the 0.2 s backoff nothing is tried (a try would be refused: "cannot connect"); the
            # server starts after it, as its start took longer than the backoff on a busy machine
            with pytest.raises(TransportError, match=r"next try in 0\.[0-9] s") as second:
                await transport.route("TopicT")
            assert first.value.code == second.value.code == "UNAVAILABLE"
            handler = broker_like()
            servers.append(ScriptedServer(handler, port=port))
            handler.box["address"] = address  # type: ignore[attr-defined]
            while True:
                try:
                    await transport.route("TopicT")
                    break
                except TransportError as error:
                    assert "next try in" in str(error)
                    await asyncio.sleep(0.05)
        finally:
            await transport.close()

    try:
        run(calls())
        assert servers[0].accepted == 1
    finally:
        for server in servers:
            server.close()


@pytest.mark.parametrize("call", ["max_offset", "pull"])
def test_go_away_retires_the_connection_and_the_request_goes_again(serve: Serve, call: str) -> None:
    asked: list[int] = []

    def go_away_once(command: RemotingCommand) -> RemotingCommand | None:
        if command.code in (RequestCode.GET_MAX_OFFSET, RequestCode.PULL_MESSAGE):
            asked.append(command.opaque)
            if len(asked) == 1:
                return response_to(command, ResponseCode.GO_AWAY)
            return response_to(command, ResponseCode.PULL_NOT_FOUND, ext={"nextBeginOffset": "3", "offset": "42"})
        return None

    server = serve(broker_like(go_away_once))

    async def calls() -> object:
        transport = transport_at(server)
        try:
            await transport.route("TopicT")
            if call == "pull":
                return await transport.pull(MQ, "G", 3, 32, 0)
            with pytest.raises(TransportError, match="PULL_NOT_FOUND"):  # the second answer is read as any other
                await transport.max_offset(MQ)
            return None
        finally:
            await transport.close()

    result = run(calls())
    assert len(asked) == 2 and server.accepted == 2  # the route's connection, retired, then a new one
    if call == "pull":
        assert result == PullResult(PullStatus.NO_NEW_MSG, 3)


def test_a_cancelled_calls_late_answer_is_dropped_and_the_connection_goes_on(
    serve: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    held: list[RemotingCommand] = []

    def hold_the_first(command: RemotingCommand) -> RemotingCommand | None:
        if command.code == RequestCode.GET_MAX_OFFSET:
            if not held:
                held.append(command)
                return SILENCE
            return response_to(command, ResponseCode.SUCCESS, ext={"offset": "8"})
        return None

    server = serve(broker_like(hold_the_first))

    async def calls() -> None:
        transport = transport_at(server, timeout=5.0)
        try:
            await transport.route("TopicT")
            waiting = asyncio.create_task(transport.max_offset(MQ))
            while not held:
                await asyncio.sleep(0.01)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            server.push(response_to(held[0], ResponseCode.SUCCESS, ext={"offset": "99"}))  # the late answer
            assert await transport.max_offset(MQ) == 8  # read after the late one, on the same connection
        finally:
            await transport.close()

    with caplog.at_level(logging.WARNING, logger="rocket_rebalance.runtime.remoting"):
        run(calls())
    assert server.accepted == 1
    assert not [r for r in caplog.records if r.name.startswith("rocket_rebalance")]  # dropped quietly: it was asked for


def test_close_fails_what_waits_ends_the_streams_and_the_readers_and_sends_nothing_after(serve: Serve) -> None:
    server = serve(broker_like(lambda c: SILENCE if c.code == RequestCode.GET_MAX_OFFSET else None))
    ends: list[TransportError | None] = []

    async def calls() -> None:
        transport = transport_at(server, timeout=30.0)
        await transport.route("TopicT")
        await transport.connect("broker-a", "c1", lambda group: None, ends.append)
        waiting = [asyncio.create_task(transport.max_offset(MQ)) for _ in range(2)]
        await asyncio.to_thread(
            server.wait_for, lambda got: sum(c.code == RequestCode.GET_MAX_OFFSET for c in got) == 2
        )
        readers = set(transport._readers)
        assert readers and await transport.close(timeout=5.0)
        assert all(task.done() for task in readers)
        failures = await asyncio.gather(*waiting, return_exceptions=True)
        assert all(isinstance(f, TransportError) and f.code == "UNAVAILABLE" for f in failures), failures
        before = len(server.received)
        with pytest.raises(TransportError) as raised:
            await transport.max_offset(MQ)
        assert raised.value.code == "UNAVAILABLE" and "closed" in str(raised.value)
        await asyncio.sleep(0.2)
        assert len(server.received) == before

    run(calls())
    assert ends == [None]


def test_the_real_stub_is_named_as_a_grpc_server_in_one_line(start_stub: StartStub) -> None:
    stub = start_stub()

    async def calls() -> TransportError:
        transport = AsyncRemotingTransport([stub.address], timeout=5.0)
        try:
            with pytest.raises(TransportError) as raised:
                await transport.route("TopicTest")
            return raised.value
        finally:
            await transport.close()

    error = run(calls())
    assert error.code == "FAILED_PRECONDITION" and "\n" not in str(error)
    assert str(error) == (
        f"the server at {stub.address} is not a RocketMQ name server or broker: it seems to be a gRPC (HTTP/2) "
        f"server, e.g. nameserver_stub: use grpc://{stub.address}"
    )


def test_a_server_closing_without_a_word_may_want_tls() -> None:
    server = _Plain()

    async def calls() -> None:
        transport = AsyncRemotingTransport([server.address], timeout=5.0)
        try:
            with pytest.raises(TransportError, match=r"it may require TLS .*use --tls, or tls=True"):
                await transport.route("TopicT")
        finally:
            await transport.close()

    try:
        run(calls())
    finally:
        server.close()


class _AsyncClient:
    """A consumer whose consume-directly listener waits for the test to let it go."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.consumed: list[Message] = []
        self.resets: list[tuple[str, dict[MessageQueue, int], asyncio.AbstractEventLoop]] = []

    def running_info(self) -> RunningInfo:
        return _Client().running_info()

    async def consume_directly(self, message_: Message) -> tuple[bool, str]:
        self.consumed.append(message_)
        await self.release.wait()
        return True, "done"

    def reset_offsets(self, consumer_group: str, offsets: Mapping[MessageQueue, int]) -> None:
        self.resets.append((consumer_group, dict(offsets), asyncio.get_running_loop()))

    def consumer_status(self, consumer_group: str, topic: str) -> dict[MessageQueue, int]:
        return {MQ: 12}


def test_a_reset_reaches_the_consumer_on_the_loop_and_its_status_is_answered(serve: Serve) -> None:
    """RESET_CONSUMER_CLIENT_OFFSET (oneway, not answered) goes to the consumer on the loop; a status request is
    answered with its offsets (issue 39)."""
    server = serve(broker_like())

    async def calls() -> _AsyncClient:
        transport = transport_at(server)
        client = _AsyncClient()
        transport.attach(client)
        try:
            await transport.route("TopicT")
            body = b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"TopicT"}:3}}'
            ext = {"topic": "TopicT", "group": "G", "timestamp": "0", "isForce": "true"}
            server.push(request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, ext, body, oneway=True))
            server.push(RemotingCommand(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, opaque=8, ext={"group": "G"}))
            await asyncio.to_thread(server.wait_for, lambda got: 8 in {c.opaque for c in got if c.is_response})
            assert client.resets and client.resets[0][2] is asyncio.get_running_loop()
        finally:
            await transport.close()
        return client

    client = run(calls())
    assert [(group, offsets) for group, offsets, _ in client.resets] == [("G", {MQ: 3})]
    responses = [c for c in server.received if c.is_response]
    assert [c.opaque for c in responses] == [8]  # the oneway reset is not answered
    assert responses[0].body.endswith(b":12}}")


def test_a_brokers_requests_are_answered_on_the_loop(serve: Serve) -> None:
    server = serve(broker_like())
    groups: list[tuple[str, bool]] = []
    stored = message.StoredMessage("TopicT", 1, 5, 4242, b"direct", {"TAGS": "A"})

    async def calls() -> None:
        transport = transport_at(server)
        client = _AsyncClient()
        transport.attach(client)
        try:
            await transport.route("TopicT")
            loop = asyncio.get_running_loop()

            def on_group(group: str) -> None:
                groups.append((group, asyncio.get_running_loop() is loop))

            await transport.connect("broker-a", "c1", on_group, lambda error: None)
            server.push(request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "G"}, oneway=True))
            body = message.encode_stored_message(stored)
            server.push(
                RemotingCommand(
                    RequestCode.CONSUME_MESSAGE_DIRECTLY, opaque=6, ext={"brokerName": "broker-a"}, body=body
                )
            )
            while not client.consumed:
                await asyncio.sleep(0.01)
            # the listener is still awaiting: the reader goes on reading and answering meanwhile
            server.push(RemotingCommand(RequestCode.GET_CONSUMER_RUNNING_INFO, opaque=5, ext={"consumerGroup": "G"}))
            server.push(RemotingCommand(code=9999, opaque=77))
            assert await transport.query_offsets("broker-a", "G", [MQ]) == {MQ: 0}
            await asyncio.to_thread(server.wait_for, lambda got: {5, 77} <= {c.opaque for c in got if c.is_response})
            client.release.set()
            await asyncio.to_thread(server.wait_for, lambda got: 6 in {c.opaque for c in got if c.is_response})
            assert (
                client.consumed[0].mq == MessageQueue("TopicT", "broker-a", 1) and client.consumed[0].body == b"direct"
            )
        finally:
            await transport.close()

    run(calls())
    assert groups == [("G", True)]
    answers = {c.opaque: c for c in server.received if c.is_response}
    assert answers[77].code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert answers[5].code == ResponseCode.SUCCESS
    info = bodies.parse_running_info(answers[5].body)
    assert set(info.queues) == {MQ} and info.properties["PROP_THREADPOOL_CORE_SIZE"] == "20"
    assert {s.topic: (s.expression_type, s.sub_string) for s in info.subscriptions}["TopicS"] == (SQL92, "a > 5")
    assert answers[6].code == ResponseCode.SUCCESS
    assert (
        json.loads(answers[6].body)["consumeResult"] == "CR_SUCCESS" and json.loads(answers[6].body)["remark"] == "done"
    )


# ---------------------------------------------------------------------------------------------------- ACL and TLS

SECRET = "s3cr3t-async-never-shown"


def test_every_request_is_signed_and_a_refusal_names_the_access_key_not_the_secret(serve: Serve) -> None:
    def refuse_heartbeats(command: RemotingCommand) -> RemotingCommand | None:
        if command.code == RequestCode.HEART_BEAT:
            return response_to(command, ResponseCode.NO_PERMISSION, remark="no permission to access Group:G")
        return None

    server = serve(broker_like(refuse_heartbeats))

    async def calls() -> TransportError:
        transport = transport_at(server, credentials=AclCredentials("reader", SECRET))
        try:
            await transport.route("TopicT")
            await transport.query_offsets("broker-a", "G", [MQ, MessageQueue("TopicT", "broker-a", 1)])
            with pytest.raises(TransportError) as raised:
                await transport.heartbeat("broker-a", "c1", registration())
            assert SECRET not in repr(transport)
            return raised.value
        finally:
            await transport.close()

    refusal = run(calls())
    requests = [c for c in server.received if not c.is_response]
    assert len(requests) == 4 and all(c.ext[ACCESS_KEY] == "reader" for c in requests)
    assert all(c.ext[SIGNATURE] == signature(c.ext, c.body, SECRET) for c in requests)
    line = str(refusal)
    assert refusal.code == "PERMISSION_DENIED" and "HEART_BEAT" in line and "Group:G (access key reader)" in line
    assert SECRET not in line


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> LabCertificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


def test_a_large_pull_answer_arrives_whole_over_tls_beside_other_calls(certs: LabCertificates) -> None:
    handler = broker_like(many_messages)
    server = ScriptedServer(handler, tls=server_context(certs))
    handler.box["address"] = server.address  # type: ignore[attr-defined]

    async def calls() -> tuple[PullResult, dict[MessageQueue, int | None]]:
        transport = transport_at(server, timeout=10.0, tls=TlsSettings(ca_file=str(certs.ca)))
        try:
            await transport.route("TopicT")
            queues = [MessageQueue("TopicT", "broker-a", q) for q in range(20)]
            pulled, offsets = await asyncio.gather(
                transport.pull(MQ, "G", 0, 32, 0), transport.query_offsets("broker-a", "G", queues)
            )
            return pulled, offsets
        finally:
            await transport.close()

    try:
        pulled, offsets = run(calls())
    finally:
        server.close()
    assert pulled.status == PullStatus.FOUND and len(pulled.messages) == MANY
    assert [m.queue_offset for m in pulled.messages] == list(range(MANY))
    assert all(m.body == bytes([m.queue_offset % 251]) * 1000 for m in pulled.messages)
    assert offsets == {MessageQueue("TopicT", "broker-a", q): q for q in range(20)}
    assert server.accepted == 1


def _refused_over_tls(address: str, tls: TlsSettings) -> TransportError:
    async def calls() -> TransportError:
        transport = AsyncRemotingTransport([address], timeout=5.0, tls=tls)
        try:
            with pytest.raises(TransportError) as raised:
                await transport.route("TopicT")
            return raised.value
        finally:
            await transport.close()

    return run(calls())


def test_a_certificate_from_another_ca_is_refused_in_the_threaded_transports_line(certs: LabCertificates) -> None:
    handler = broker_like()
    server = ScriptedServer(handler, tls=server_context(certs))
    try:
        error = _refused_over_tls(server.address, TlsSettings(ca_file=str(certs.other_ca)))
    finally:
        server.close()
    line = str(error)
    assert line.startswith(f"the name server {server.address}'s certificate did not verify against {certs.other_ca}: ")
    assert "unable to get local issuer certificate" in line and error.code == "FAILED_PRECONDITION"


@pytest.mark.parametrize(("reply", "expected"), PLAINTEXT_ANSWERS)
def test_a_plaintext_server_is_one_line_when_tls_is_on(reply: bytes, expected: str) -> None:
    server = _Plain(reply)
    try:
        error = _refused_over_tls(server.address, TlsSettings(verify=False))
    finally:
        server.close()
    assert expected in str(error) and "\n" not in str(error) and error.code == "FAILED_PRECONDITION"


# ---------------------------------------------------------------------------------------------------- the wire's rules


def test_a_pull_carries_the_heartbeats_expression_type_and_subscription_version(serve: Serve) -> None:
    server = serve(
        broker_like(
            lambda c: (
                response_to(c, ResponseCode.PULL_NOT_FOUND, ext={"nextBeginOffset": "0"})
                if c.code == RequestCode.PULL_MESSAGE
                else None
            )
        )
    )

    async def calls() -> None:
        transport = transport_at(server)
        try:
            await transport.route("TopicT")
            await transport.heartbeat("broker-a", "c1", registration(TopicT=SubscriptionExpression("a > 5", SQL92)))
            assert await transport.pull(MQ, "G", 0, 32, 0) == PullResult(PullStatus.NO_NEW_MSG, 0)
        finally:
            await transport.close()

    run(calls())
    beat = next(c for c in server.received if c.code == RequestCode.HEART_BEAT)
    subscription = json.loads(beat.body)["consumerDataSet"][0]["subscriptionDataSet"]
    versions = {s["topic"]: s["subVersion"] for s in subscription}
    pulled = next(c for c in server.received if c.code == RequestCode.PULL_MESSAGE)
    assert pulled.ext["expressionType"] == "SQL92" and pulled.ext["subVersion"] == str(versions["TopicT"])


def test_a_refused_expression_is_one_line(serve: Serve) -> None:
    def refuse(command: RemotingCommand) -> RemotingCommand | None:
        if command.code == RequestCode.CHECK_CLIENT_CONFIG:
            return response_to(command, ResponseCode.SYSTEM_ERROR, remark="The broker does not support filtering")
        return None

    server = serve(broker_like(refuse))

    async def calls() -> None:
        transport = transport_at(server)
        try:
            await transport.route("TopicT")
            await transport.check_subscription("broker-a", "G", "c1", "TopicT", SubscriptionExpression("A||B"))
            with pytest.raises(SubscriptionRefusedError, match="enablePropertyFilter=true") as refused:
                await transport.check_subscription(
                    "broker-a", "G", "c1", "TopicT", SubscriptionExpression("a>5", SQL92)
                )
            assert refused.value.code == "FAILED_PRECONDITION"
        finally:
            await transport.close()

    run(calls())
    assert sum(c.code == RequestCode.CHECK_CLIENT_CONFIG for c in server.received) == 1  # TAG is never asked


def test_the_next_name_server_is_asked_when_one_is_down(serve: Serve) -> None:
    server = serve(broker_like())
    closed = socket.create_server(("127.0.0.1", 0))
    down = f"127.0.0.1:{closed.getsockname()[1]}"
    closed.close()

    async def route(order: list[str]) -> str:
        transport = AsyncRemotingTransport(order, timeout=1.0)
        transport._wire._namesrv_index = 0  # the list's first: a client starts at a random one, as Java's
        try:
            return (await transport.route("TopicT")).queue_datas[0].broker_name
        finally:
            await transport.close()

    for order in ([down, server.address], [server.address, down]):
        assert run(route(order)) == "broker-a"


def test_unknown_brokers_asked_at_once_cost_one_cluster_info_look_up(serve: Serve) -> None:
    def cluster(command: RemotingCommand) -> RemotingCommand | None:
        if command.code == RequestCode.GET_BROKER_CLUSTER_INFO:
            return response_to(command, ResponseCode.SUCCESS, body=b'{"brokerAddrTable":{},"clusterAddrTable":{}}')
        return None

    server = serve(broker_like(cluster))
    brokers = [f"broker-{n}" for n in range(50)]

    async def calls() -> list[BaseException | None]:
        transport = transport_at(server)
        transport.CLUSTER_INFO_EVERY = 3600.0  # the count below then does not depend on this machine's speed
        try:
            return await asyncio.gather(
                *(transport.heartbeat(broker, "c1", registration()) for broker in brokers), return_exceptions=True
            )
        finally:
            await transport.close()

    failures = run(calls())
    assert [getattr(f, "code", f) for f in failures] == ["NOT_FOUND"] * len(brokers)
    assert sum(c.code == RequestCode.GET_BROKER_CLUSTER_INFO for c in server.received) == 1


def test_a_bad_frame_from_the_server_is_one_error_not_a_hang(serve: Serve) -> None:
    def garbage(command: RemotingCommand) -> RemotingCommand | None:
        if command.code == RequestCode.GET_MAX_OFFSET:
            with server._lock:
                server.connections[-1].sendall(b"\x7f\xff\xff\xff")
            return SILENCE
        return None

    server = serve(broker_like(garbage))

    async def calls() -> None:
        transport = transport_at(server, timeout=30.0)
        try:
            await transport.route("TopicT")
            with pytest.raises(TransportError, match="bad frame") as raised:
                await transport.max_offset(MQ)
            assert raised.value.code == "INTERNAL"
        finally:
            await transport.close()

    run(calls())


def test_a_transport_refuses_a_second_event_loop(serve: Serve) -> None:
    server = serve(broker_like())
    transport = transport_at(server)
    run(transport.route("TopicT"))
    with pytest.raises(TransportError, match="belongs to another event loop") as raised:
        run(transport.route("TopicT"))
    assert raised.value.code == "FAILED_PRECONDITION"
