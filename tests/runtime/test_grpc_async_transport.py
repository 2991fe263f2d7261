"""AsyncGrpcTransport, the grpc.aio twin of GrpcTransport, against real stubs (in-process servers, and stub
processes where a test stops one): every call of AsyncTransport, streams and their end, the running-info relay,
token auth, cancellation, close, and the same answers as the threaded transport to the same calls.

pytest-asyncio is not a dependency: each test runs its scenario with ``asyncio.run`` (one loop per test, as an
application's ``asyncio.run(main())``).
"""

from __future__ import annotations

import asyncio
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nameserver_stub.errors import NotFound
from nameserver_stub.server import StubServer
from rocket_rebalance.model import ConsumeFromWhere, MessageModel, MessageQueue
from rocket_rebalance.runtime.transport import (
    AsyncTransport,
    GroupRegistration,
    GroupSubscription,
    Message,
    PullResult,
    PullStatus,
    QueueRunInfo,
    RunningInfo,
    SubscriptionRefusedError,
    TopicConsumeStatus,
    TransportError,
)
from rocket_rebalance.runtime.transport.grpc import GrpcTransport
from rocket_rebalance.runtime.transport.grpc_async import AsyncGrpcTransport
from rocket_rebalance.subscription import SQL92, SubscriptionExpression
from tests.stub.conftest import SpawnStub, StartStub, spawn_stub_process
from tests.stub.harness import WAIT

__all__ = ["spawn_stub_process"]  # the fixture, used by name

ROOT = Path(__file__).resolve().parents[2]
GROUP = "GID_async"
TOPIC = "TopicTest"


def registration(group: str = GROUP, expression: SubscriptionExpression | None = None) -> GroupRegistration:
    return GroupRegistration(
        group,
        True,
        MessageModel.CLUSTERING,
        ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        (TOPIC,),
        expressions={TOPIC: expression} if expression else {},
    )


def opened(address: str, token: str | None = None, timeout: float = 5.0) -> AsyncTransport:
    """The transport as the runtime holds it: typed by the interface, so mypy checks that it is one."""
    return AsyncGrpcTransport(address, token=token, timeout=timeout)


def run_with(address: str, scenario: Callable[..., Awaitable[None]], transports: int = 1) -> None:
    """Run ``scenario(*transports)`` on a loop of its own (as an application's ``asyncio.run``) with that many
    fresh transports to ``address``, each closed afterwards and required to have ended everything it ran."""

    async def main() -> None:
        fresh = [opened(address) for _ in range(transports)]
        try:
            await scenario(*fresh)
        finally:
            closed = [await transport.close() for transport in fresh]
        assert all(closed)

    asyncio.run(main())


async def eventually(condition: Callable[[], bool]) -> None:
    """Wait (a generous bound, never an assertion about speed) until ``condition`` holds."""
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


async def parked(server: StubServer, transport: AsyncTransport, mq: MessageQueue) -> asyncio.Task[PullResult]:
    """A long poll of ``mq`` from offset 0 (waiting up to 25 s for a message), once the stub holds it parked."""
    polling = asyncio.create_task(transport.pull(mq, GROUP, 0, 32, 25_000))
    await eventually(lambda: server.cluster.parked_pulls() == 1)
    return polling


def connected(server: StubServer, broker: str, client_id: str, group: str = GROUP) -> bool:
    """The stub has ``client_id``'s notification stream at ``broker`` open (the client heartbeated there)."""
    try:
        views = server.cluster.consumer_connection(group, broker)
    except NotFound:  # the group is not online there (any more)
        return False
    return any(view.connected and view.member.client_id == client_id for view in views)


@dataclass(frozen=True)
class Failed:
    """A call's failure as the differential test compares it."""

    kind: str
    code: str
    text: str

    @classmethod
    def of(cls, error: TransportError) -> Failed:
        return cls(type(error).__name__, error.code, str(error))


def outcome(work: Callable[[], Any]) -> Any:
    """A call's answer, or its :class:`Failed`."""
    try:
        return work()
    except TransportError as error:
        return Failed.of(error)


async def outcome_async(work: Awaitable[Any]) -> Any:
    try:
        return await work
    except TransportError as error:
        return Failed.of(error)


def expressions(table: dict[str, GroupSubscription]) -> dict[str, SubscriptionExpression]:
    return {topic: row.expression for topic, row in table.items()}


async def expressions_async(table: Awaitable[dict[str, GroupSubscription]]) -> dict[str, SubscriptionExpression]:
    return expressions(await table)


def pull_now(transport: GrpcTransport, mq: MessageQueue, offset: int, max_messages: int) -> PullResult:
    """The threaded transport's callback pull, waited for: its answer, or its failure raised."""
    done: queue.Queue[PullResult | TransportError] = queue.Queue()
    transport.pull(mq, GROUP, offset, max_messages, 0, done.put)
    result = done.get(timeout=WAIT)
    if isinstance(result, TransportError):
        raise result
    return result


def test_mypy_takes_it_for_an_AsyncTransport() -> None:
    """``opened`` above assigns the transport to the interface; mypy says whether every call and signature fits
    (a Protocol is checked by its shape: a missing call or a changed argument fails here, not in production)."""
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", __file__],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_name_server_and_the_registry_answer(start_stub: StartStub) -> None:
    server = start_stub(topics=("TopicTest:broker-a=4,broker-b=4",))

    async def scenario(transport: AsyncTransport, other: AsyncTransport) -> None:
        route = await transport.route(TOPIC)
        assert [(d.broker_name, d.read_queue_nums) for d in route.queue_datas] == [("broker-a", 4), ("broker-b", 4)]
        with pytest.raises(TransportError) as unknown:
            await transport.route("NoSuchTopic")
        assert unknown.value.code == "NOT_FOUND"

        assert await transport.subscription_table("broker-a", GROUP) == {}  # not online: no table
        await transport.heartbeat("broker-a", "a", registration(expression=SubscriptionExpression("TagA || TagB")))
        await other.heartbeat("broker-a", "b", registration())
        assert await transport.consumer_list("broker-a", GROUP) == ["a", "b"]
        table = await transport.subscription_table("broker-a", GROUP)
        assert set(table) == {TOPIC} and table[TOPIC].expression.expression_type == "TAG"
        assert not table[TOPIC].ours  # the last heartbeat, b's, wrote the row: b sees its own version there
        assert (await other.subscription_table("broker-a", GROUP))[TOPIC].ours

        await other.unregister("broker-a", "b", GROUP)
        assert await transport.consumer_list("broker-a", GROUP) == ["a"]
        with pytest.raises(TransportError) as nowhere:
            await transport.consumer_list("broker-x", GROUP)
        assert nowhere.value.code == "NOT_FOUND" and "broker-x" in str(nowhere.value)

    run_with("grpc://" + server.address, scenario, transports=2)  # the form wire.py is given


def test_tag_expressions_filter_pulls_and_sql92_is_refused_without_a_call(start_stub: StartStub) -> None:
    server = start_stub()

    async def scenario(transport: AsyncTransport) -> None:
        sql = SubscriptionExpression("a > 1", SQL92)
        with pytest.raises(SubscriptionRefusedError, match="filters by tags only") as refused:
            await transport.check_subscription("broker-a", GROUP, "a", TOPIC, sql)
        assert refused.value.code == "UNIMPLEMENTED"
        with pytest.raises(SubscriptionRefusedError):
            await transport.heartbeat("broker-a", "a", registration(expression=sql))
        await transport.check_subscription("broker-a", GROUP, "a", TOPIC, SubscriptionExpression("TagA"))

        await transport.send(TOPIC, "broker-a", [b"a"], 0, tags="TagA")
        await transport.send(TOPIC, "broker-a", [b"b"], 0, tags="TagB", keys="k1 k2", properties={"p": "v"})
        await transport.heartbeat("broker-a", "a", registration(expression=SubscriptionExpression("TagB")))
        result = await transport.pull(MessageQueue(TOPIC, "broker-a", 0), GROUP, 0, 32, 0)
        assert [(m.body, m.tags, m.keys, m.properties.get("p")) for m in result.messages] == [
            (b"b", "TagB", "k1 k2", "v")
        ]
        assert result.next_begin_offset == 2

    run_with(server.address, scenario)


def test_offsets_are_stored_and_read_back(start_stub: StartStub) -> None:
    server = start_stub()
    queues = [MessageQueue(TOPIC, "broker-a", q) for q in range(3)]

    async def scenario(transport: AsyncTransport) -> None:
        assert await transport.query_offsets("broker-a", GROUP, queues) == dict.fromkeys(queues)
        for mq in queues[:2]:
            await transport.send(TOPIC, "broker-a", [b"m"] * 8, mq.queue_id)
        stored = await transport.update_offsets("broker-a", GROUP, "a", {queues[0]: 5, queues[1]: 7})
        assert stored == {queues[0]: 5, queues[1]: 7}
        assert await transport.update_offsets("broker-a", GROUP, "a", {queues[0]: 3}) == {queues[0]: 5}
        with pytest.raises(TransportError, match="beyond the queue's max offset 8") as beyond:
            await transport.update_offsets("broker-a", GROUP, "a", {queues[0]: 9})
        assert beyond.value.code == "INVALID_ARGUMENT"
        assert await transport.query_offsets("broker-a", GROUP, queues) == {
            queues[0]: 5,
            queues[1]: 7,
            queues[2]: None,
        }

    run_with(server.address, scenario)


def test_a_lock_is_held_against_a_second_client_until_unlocked(start_stub: StartStub) -> None:
    server = start_stub()
    queues = [MessageQueue(TOPIC, "broker-a", q) for q in range(2)]

    async def scenario(first: AsyncTransport, second: AsyncTransport) -> None:
        assert await first.lock("broker-a", GROUP, "a", queues) == set(queues)
        assert await second.lock("broker-a", GROUP, "b", queues) == set()
        await first.unlock("broker-a", GROUP, "a", queues[:1])
        assert await second.lock("broker-a", GROUP, "b", queues) == {queues[0]}

    run_with(server.address, scenario, transports=2)


def test_sends_pulls_and_offsets_of_a_queue(start_stub: StartStub) -> None:
    server = start_stub()
    mq = MessageQueue(TOPIC, "broker-b", 2)

    async def scenario(transport: AsyncTransport) -> None:
        before_ms = int(time.time() * 1000)
        assert await transport.send(TOPIC, "broker-b", [b"m0", b"m1", b"m2"], 2) == (2, [0, 1, 2])
        assert await transport.max_offset(mq) == 3
        assert await transport.search_offset(mq, before_ms - 60_000) == 0
        assert await transport.search_offset(mq, before_ms + 3_600_000) == 3
        result = await transport.pull(mq, GROUP, 1, 1, 0)
        assert (result.status, result.next_begin_offset) == (PullStatus.FOUND, 2)
        assert [(m.mq, m.queue_offset, m.body) for m in result.messages] == [(mq, 1, b"m1")]
        empty = await transport.pull(mq, GROUP, 3, 32, 0)
        assert (empty.status, empty.messages) == (PullStatus.NO_NEW_MSG, ())
        illegal = await transport.pull(mq, GROUP, 99, 32, 0)
        assert illegal.status == PullStatus.OFFSET_ILLEGAL
        queue_id, offsets = await transport.send(TOPIC, "broker-b", [b"any"])
        assert 0 <= queue_id < 4 and len(offsets) == 1  # the broker picks the queue
        with pytest.raises(TransportError, match="keeps no retry topics") as send_back:
            await transport.send_back(GROUP, result.messages[0], 16, 0)
        assert send_back.value.code == "UNIMPLEMENTED"

    run_with(server.address, scenario)


def test_a_long_poll_returns_when_a_message_is_sent_meanwhile(start_stub: StartStub) -> None:
    server = start_stub()
    mq = MessageQueue(TOPIC, "broker-a", 1)

    async def scenario(transport: AsyncTransport) -> None:
        polling = await parked(server, transport, mq)
        assert not polling.done()
        await transport.send(TOPIC, "broker-a", [b"late"], 1)
        result = await asyncio.wait_for(polling, WAIT)
        assert result.status == PullStatus.FOUND and [m.body for m in result.messages] == [b"late"]

    run_with(server.address, scenario)


def test_connect_hears_another_client_join_and_a_failing_callback_does_not_end_the_stream(
    start_stub: StartStub,
) -> None:
    server = start_stub()

    async def scenario() -> None:
        transport, other = opened(server.address), opened(server.address)
        groups: asyncio.Queue[str] = asyncio.Queue()
        ends: list[TransportError | None] = []
        calls = 0

        def on_group(group: str) -> None:
            nonlocal calls
            calls += 1
            groups.put_nowait(group)
            if calls == 1:
                raise RuntimeError("a listener that fails once")

        try:
            await transport.heartbeat("broker-a", "a", registration())
            stream = await transport.connect("broker-a", "a", on_group, ends.append)
            await eventually(lambda: connected(server, "broker-a", "a"))
            await other.heartbeat("broker-a", "b", registration())
            assert await asyncio.wait_for(groups.get(), WAIT) == GROUP
            await other.unregister("broker-a", "b", GROUP)  # the stream goes on after the failing callback
            assert await asyncio.wait_for(groups.get(), WAIT) == GROUP
            assert ends == []
            stream.cancel()
            assert ends == [None]  # at once, and once
            await eventually(lambda: not connected(server, "broker-a", "a"))
        finally:
            await transport.close()
            await other.close()
        assert ends == [None]

    asyncio.run(scenario())


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, None), (signal.SIGKILL, "UNAVAILABLE")])
def test_the_stream_ends_when_the_stub_stops(
    spawn_stub_process: SpawnStub, signum: signal.Signals, code: str | None
) -> None:
    """A stub that stops ends its streams with OK (``on_end(None)``); one that dies leaves an UNAVAILABLE (not
    taken for a server of another kind), on the asyncio transport's stream as on the threaded one's."""
    process = spawn_stub_process()
    threaded = GrpcTransport(process.address)
    threaded_ended: queue.Queue[TransportError | None] = queue.Queue()

    def both_connected() -> bool:
        rows = threaded.consumer_connections(GROUP)
        return {row.client_id for row in rows if row.connected} == {"a", "t"}

    async def scenario() -> None:
        transport = opened(process.address)
        ended: asyncio.Future[TransportError | None] = asyncio.get_running_loop().create_future()
        try:
            await transport.heartbeat("broker-a", "a", registration())
            await transport.connect("broker-a", "a", lambda group: None, ended.set_result)
            threaded.heartbeat("broker-a", "t", registration())
            threaded.connect("broker-a", "t", lambda group: None, threaded_ended.put)
            deadline = time.monotonic() + WAIT
            while not await asyncio.to_thread(both_connected):
                assert time.monotonic() < deadline, "the streams did not open"
                await asyncio.sleep(0.05)
            await asyncio.to_thread(process.stop, signum)
            error = await asyncio.wait_for(ended, WAIT)
            assert (error.code if error else None) == code, error
        finally:
            assert await transport.close()

    try:
        asyncio.run(scenario())
        error = threaded_ended.get(timeout=WAIT)
        assert (error.code if error else None) == code, error
    finally:
        threaded.close()


class Reporting:
    """An asyncio consumer's side of the running-info relay: what it holds, read in place on the loop."""

    def __init__(self) -> None:
        self.asked_on: list[asyncio.AbstractEventLoop] = []
        self.info = RunningInfo(
            consume_type="CONSUME_PASSIVELY",
            message_model="CLUSTERING",
            consume_from_where="CONSUME_FROM_LAST_OFFSET",
            consume_orderly=False,
            start_timestamp_ms=1_700_000_000_000,
            topics=(TOPIC,),
            queues={
                MessageQueue(TOPIC, "broker-a", 0): QueueRunInfo(commit_offset=4, cached_count=2),
                MessageQueue(TOPIC, "broker-a", 1): QueueRunInfo(commit_offset=9, dropped=True),
            },
            strategy="org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely",
            status={TOPIC: TopicConsumeStatus(pull_tps=2.5, consume_ok_tps=1.5, consume_failed_msgs=3)},
        )

    def running_info(self) -> RunningInfo:
        self.asked_on.append(asyncio.get_running_loop())
        return self.info

    async def consume_directly(self, message: Message) -> tuple[bool, str]:
        return True, ""

    def reset_offsets(self, consumer_group: str, offsets: Mapping[MessageQueue, int]) -> None:
        pass

    def consumer_status(self, consumer_group: str, topic: str) -> dict[MessageQueue, int]:
        return {}


def test_an_operator_reads_the_running_info_of_an_async_attached_client(start_stub: StartStub) -> None:
    server = start_stub()
    admin = GrpcTransport(server.address)
    client = Reporting()

    async def scenario() -> None:
        transport = AsyncGrpcTransport(server.address)
        transport.attach(client)
        try:
            await transport.heartbeat("broker-a", "a", registration())
            await transport.connect("broker-a", "a", lambda group: None, lambda error: None)
            await eventually(lambda: connected(server, "broker-a", "a"))
            report = await asyncio.to_thread(admin.consumer_report, GROUP, "a")  # the loop answers meanwhile
            assert report.queues == {MessageQueue(TOPIC, "broker-a", 0)}  # the dropped one is handed on already
            assert report.properties["PROP_CLIENT_LANGUAGE"] == "PYTHON"
            assert report.properties["PROP_NAMESERVER_ADDR"] == "grpc://" + server.address
            assert report.properties["allocateMessageQueueStrategy"] == client.info.strategy
            assert report.status == {TOPIC: TopicConsumeStatus(pull_tps=2.5, consume_ok_tps=1.5, consume_failed_msgs=3)}
            assert client.asked_on == [asyncio.get_running_loop()]
        finally:
            assert await transport.close()

    try:
        asyncio.run(scenario())
    finally:
        admin.close()
    assert server.relay.waiting == 0


def test_without_an_attached_client_the_operator_hears_nobody_answered(
    start_stub: StartStub, caplog: pytest.LogCaptureFixture
) -> None:
    server = start_stub()
    admin = GrpcTransport(server.address, timeout=0.5)

    async def scenario() -> None:
        transport = opened(server.address)
        try:
            await transport.heartbeat("broker-a", "a", registration())
            await transport.connect("broker-a", "a", lambda group: None, lambda error: None)
            await eventually(lambda: connected(server, "broker-a", "a"))
            with pytest.raises(TransportError, match="did not answer") as silent:
                await asyncio.to_thread(admin.consumer_report, GROUP, "a")
            assert silent.value.code == "DEADLINE_EXCEEDED"
        finally:
            await transport.close()

    try:
        asyncio.run(scenario())
    finally:
        admin.close()
    assert "no consumer is attached to answer" in caplog.text


def test_the_token_is_sent_on_every_call_and_stream_and_never_shown(start_stub: StartStub) -> None:
    token = "s3cret-token"
    server = start_stub(token=token)

    async def scenario() -> None:
        right, wrong, none = (opened(server.address, token=t) for t in (token, "wrong-token", None))
        ends: asyncio.Queue[TransportError | None] = asyncio.Queue()
        try:
            assert (await right.route(TOPIC)).topic == TOPIC
            await right.heartbeat("broker-a", "a", registration())
            await right.connect("broker-a", "a", lambda group: None, ends.put_nowait)
            await eventually(lambda: connected(server, "broker-a", "a"))
            for refused in (wrong, none):
                with pytest.raises(TransportError) as denied:
                    await refused.route(TOPIC)
                assert denied.value.code == "UNAUTHENTICATED"
                assert token not in str(denied.value) and "wrong-token" not in str(denied.value)
                await refused.connect("broker-a", "x", lambda group: None, ends.put_nowait)
                error = await asyncio.wait_for(ends.get(), WAIT)
                assert error is not None and error.code == "UNAUTHENTICATED" and "wrong-token" not in str(error)
            assert ends.empty()  # the stream with the token goes on
        finally:
            for transport in (right, wrong, none):
                await transport.close()

    asyncio.run(scenario())
    with pytest.raises(ValueError, match="position 3") as bad:
        AsyncGrpcTransport(server.address, token="ab\ncd")
    assert "ab" not in str(bad.value)


def test_a_cancelled_call_drops_its_answer_and_the_transport_goes_on(start_stub: StartStub) -> None:
    server = start_stub()
    mq = MessageQueue(TOPIC, "broker-a", 3)

    async def scenario(transport: AsyncTransport) -> None:
        polling = await parked(server, transport, mq)
        polling.cancel()
        with pytest.raises(asyncio.CancelledError):
            await polling  # the caller's cancellation, not a transport failure
        await transport.send(TOPIC, "broker-a", [b"after"], 3)  # wakes the parked pull: its answer goes nowhere
        await eventually(lambda: server.cluster.parked_pulls() == 0)
        result = await transport.pull(mq, GROUP, 0, 32, 0)
        assert [m.body for m in result.messages] == [b"after"]
        with pytest.raises(TimeoutError):  # a caller's deadline is a cancellation too
            await asyncio.wait_for(transport.pull(mq, GROUP, 1, 32, 25_000), 0.2)
        assert await transport.max_offset(mq) == 1

    run_with(server.address, scenario)


def test_close_fails_pending_calls_ends_streams_and_refuses_what_comes_after(start_stub: StartStub) -> None:
    server = start_stub()
    mq = MessageQueue(TOPIC, "broker-a", 0)

    async def scenario() -> None:
        transport = opened(server.address)
        transport.attach(Reporting())
        ends: list[TransportError | None] = []
        await transport.heartbeat("broker-a", "a", registration())
        await transport.connect("broker-a", "a", lambda group: None, ends.append)
        await eventually(lambda: connected(server, "broker-a", "a"))
        polling = await parked(server, transport, mq)

        assert await transport.close(timeout=WAIT)
        assert ends == [None]
        with pytest.raises(TransportError) as pending:
            await asyncio.wait_for(polling, WAIT)
        assert pending.value.code == "CANCELLED"
        with pytest.raises(TransportError, match="closed") as after:
            await transport.route(TOPIC)
        assert after.value.code == ""
        with pytest.raises(TransportError, match="closed") as connect_after:
            await transport.connect("broker-a", "a", lambda group: None, ends.append)
        assert connect_after.value.code == "UNAVAILABLE"
        assert await transport.close()  # again: nothing left
        await eventually(lambda: not connected(server, "broker-a", "a"))

    asyncio.run(scenario())


def test_a_stream_closed_before_it_began_still_says_it_ended(start_stub: StartStub) -> None:
    server = start_stub()

    async def scenario() -> None:
        transport = opened(server.address)
        ends: list[TransportError | None] = []
        await transport.connect("broker-a", "a", lambda group: None, ends.append)
        assert await transport.close()  # before the stream's task took its first step
        assert ends == [None]

    asyncio.run(scenario())


def test_the_channel_belongs_to_one_loop(start_stub: StartStub) -> None:
    """Made outside a loop, the transport opens its channel on the loop of its first call; another loop is refused
    by name, as is a closed transport; one never used closes at once."""
    server = start_stub()
    transport = AsyncGrpcTransport(server.address)

    async def first() -> None:
        assert (await transport.route(TOPIC)).topic == TOPIC
        assert await transport.close()

    async def second() -> None:
        with pytest.raises(RuntimeError, match="another event loop"):
            await transport.route(TOPIC)

    asyncio.run(first())
    asyncio.run(second())
    unused = AsyncGrpcTransport(server.address)
    assert asyncio.run(unused.close())


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A TCP server that takes connections and never says a word: gRPC's calls wait there for their deadline."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield f"127.0.0.1:{listener.getsockname()[1]}"
    listener.close()
    for connection in held:
        connection.close()


@pytest.fixture
def hang_up_server() -> Iterator[str]:
    """A TCP server that closes each connection on its first bytes, as a RocketMQ name server does to HTTP/2."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                connection = listener.accept()[0]
            except OSError:
                return
            with connection:
                connection.recv(1024)

    threading.Thread(target=serve, daemon=True).start()
    yield f"127.0.0.1:{listener.getsockname()[1]}"
    listener.close()


@pytest.mark.parametrize(
    ("server", "code"), [("silent_server", "DEADLINE_EXCEEDED"), ("hang_up_server", "FAILED_PRECONDITION")]
)
def test_both_transports_name_the_same_failures(request: pytest.FixtureRequest, server: str, code: str) -> None:
    """The error mapping is shared: a server that never answers is DEADLINE_EXCEEDED, one that hangs up on gRPC
    is named as not being the stub, for the threaded and the asyncio transport alike."""
    address: str = request.getfixturevalue(server)
    threaded = GrpcTransport(address, timeout=0.5)
    try:
        expected = outcome(lambda: threaded.route(TOPIC))
    finally:
        threaded.close()

    async def scenario() -> Any:
        transport = opened(address, timeout=0.5)
        try:
            return await outcome_async(transport.route(TOPIC))
        finally:
            await transport.close()

    assert isinstance(expected, Failed) and (expected.kind, expected.code) == ("TransportError", code)
    assert asyncio.run(scenario()) == expected


def test_the_threaded_and_async_transports_answer_alike(start_stub: StartStub) -> None:
    """The same calls with the same arguments, valid or not, give the same answers and the same failures (type,
    code and text) on both transports."""
    server = start_stub(topics=("TopicTest:broker-a=4,broker-b=4", "Other:broker-b=2"))
    threaded = GrpcTransport(server.address)
    brokers = st.sampled_from(["broker-a", "broker-b", "broker-x"])
    queues = st.builds(MessageQueue, st.sampled_from([TOPIC, "Other", "Nope"]), brokers, st.integers(0, 4))
    with asyncio.Runner() as runner:
        transport = AsyncGrpcTransport(server.address)  # made outside the loop: its channel opens on the runner's
        try:
            threaded.send(TOPIC, "broker-a", [b"x", b"y", b"z"], 1, tags="T")
            threaded.send("Other", "broker-b", [b"o"], 0)
            threaded.heartbeat("broker-a", "a", registration())
            threaded.update_offsets("broker-a", GROUP, "a", {MessageQueue(TOPIC, "broker-a", 1): 2})
            threaded.lock("broker-a", GROUP, "a", [MessageQueue(TOPIC, "broker-a", 0)])

            calls: dict[str, Callable[..., tuple[Callable[[], Any], Callable[[], Awaitable[Any]]]]] = {
                "route": lambda topic: (
                    lambda: threaded.route(topic),
                    lambda: transport.route(topic),
                ),
                "consumer_list": lambda broker, group: (
                    lambda: threaded.consumer_list(broker, group),
                    lambda: transport.consumer_list(broker, group),
                ),
                "subscription_table": lambda broker, group: (  # ``ours`` is each transport's own: not compared
                    lambda: expressions(threaded.subscription_table(broker, group)),
                    lambda: expressions_async(transport.subscription_table(broker, group)),
                ),
                "query_offsets": lambda broker, group, mqs: (
                    lambda: threaded.query_offsets(broker, group, mqs),
                    lambda: transport.query_offsets(broker, group, mqs),
                ),
                "update_offsets": lambda broker, group, mqs: (  # the same offsets again: an idempotent write
                    lambda: threaded.update_offsets(broker, group, "a", dict.fromkeys(mqs, 2)),
                    lambda: transport.update_offsets(broker, group, "a", dict.fromkeys(mqs, 2)),
                ),
                "lock": lambda broker, group, mqs: (  # the holder locking again: the same answer
                    lambda: threaded.lock(broker, group, "a", mqs),
                    lambda: transport.lock(broker, group, "a", mqs),
                ),
                "max_offset": lambda mq: (lambda: threaded.max_offset(mq), lambda: transport.max_offset(mq)),
                "search_offset": lambda mq, at: (
                    lambda: threaded.search_offset(mq, at),
                    lambda: transport.search_offset(mq, at),
                ),
                "pull": lambda mq, offset, most: (
                    lambda: pull_now(threaded, mq, offset, most),
                    lambda: transport.pull(mq, GROUP, offset, most, 0),
                ),
            }
            groups = st.sampled_from([GROUP, "GID_none"])
            arguments = {
                "route": st.tuples(st.sampled_from([TOPIC, "Other", "Nope", ""])),
                "consumer_list": st.tuples(brokers, groups),
                "subscription_table": st.tuples(brokers, groups),
                "query_offsets": st.tuples(brokers, groups, st.lists(queues, max_size=3)),
                "update_offsets": st.tuples(brokers, groups, st.lists(queues, max_size=3)),
                "lock": st.tuples(brokers, groups, st.lists(queues, max_size=3)),
                "max_offset": st.tuples(queues),
                "search_offset": st.tuples(queues, st.integers(-1, 2**62)),
                "pull": st.tuples(queues, st.integers(-1, 5), st.integers(0, 4)),
            }
            compared: set[str] = set()

            mq = MessageQueue(TOPIC, "broker-a", 1)
            answered = [  # one call of each kind that succeeds, always tried, so every kind's answer is compared
                ("route", (TOPIC,)),
                ("consumer_list", ("broker-a", GROUP)),
                ("subscription_table", ("broker-a", GROUP)),
                ("query_offsets", ("broker-a", GROUP, [mq])),
                ("update_offsets", ("broker-a", GROUP, [mq])),
                ("lock", ("broker-a", GROUP, [MessageQueue(TOPIC, "broker-a", 0)])),
                ("max_offset", (mq,)),
                ("search_offset", (mq, 0)),
                ("pull", (mq, 0, 2)),
                ("route", ("Nope",)),  # and a failure
            ]

            @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
            @given(st.sampled_from(sorted(calls)).flatmap(lambda name: st.tuples(st.just(name), arguments[name])))
            def same(call: tuple[str, tuple[Any, ...]]) -> None:
                name, args = call
                sync_call, async_call = calls[name](*args)
                expected = outcome(sync_call)
                assert runner.run(outcome_async(async_call())) == expected, (name, args)
                compared.add("failure" if isinstance(expected, Failed) else name)

            for call in answered:
                same = example(call)(same)
            same()
            assert compared == {*calls, "failure"}
        finally:
            runner.run(transport.close())
            threaded.close()
