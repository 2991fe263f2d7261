"""What a push consumer's listener answers, and what becomes of its batch (issue 38): Java's meanings of
``CONSUME_SUCCESS``, ``RECONSUME_LATER``, ``ackIndex``, the delay level, an orderly queue's suspend and its retry
limit, a mistaken return value, and the consume timeout, threaded and asyncio, against the stub with a transport
that takes send-backs as a broker does (the real broker's side is tests/rocketmq/test_listener_results.py)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocket_rebalance.model import MessageQueue
from rocket_rebalance.runtime.async_consumer import AsyncPushConsumer
from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.dispatch import CONSUME_TIMEOUT_KIND, _answer
from rocket_rebalance.runtime.listener import ConsumeResult, Reconsume
from rocket_rebalance.runtime.settings import (
    ConsumeTimeoutError,
    EngineSettings,
    ListenerError,
    ListenerResultError,
)
from rocket_rebalance.runtime.transport import GRPC_SCHEME, Message
from rocket_rebalance.runtime.transport.grpc import GrpcTransport
from rocket_rebalance.runtime.transport.grpc_async import AsyncGrpcTransport
from tests.aio import run
from tests.runtime.test_consumer import FAST, wait_for
from tests.stub.conftest import StartStub

GROUP = "GID_answers"
MQ = MessageQueue("TopicTest", "broker-a", 0)


class SendsBack(GrpcTransport):
    """Takes each send-back as a broker does, and keeps (offset, delay level, max reconsume times)."""

    def __init__(self, address: str) -> None:
        super().__init__(address)
        self.sent: list[tuple[int, int, int]] = []
        self.sent_lock = threading.Lock()

    def send_back(self, consumer_group: str, message: Message, max_reconsume_times: int, delay_level: int) -> None:
        with self.sent_lock:
            self.sent.append((message.queue_offset, delay_level, max_reconsume_times))


class AsyncSendsBack(AsyncGrpcTransport):
    def __init__(self, address: str) -> None:
        super().__init__(address)
        self.sent: list[tuple[int, int, int]] = []

    async def send_back(
        self, consumer_group: str, message: Message, max_reconsume_times: int, delay_level: int
    ) -> None:
        self.sent.append((message.queue_offset, delay_level, max_reconsume_times))


def produce(address: str, count: int) -> None:
    """``count`` messages in queue 0 of broker-a, the one queue with messages."""
    transport = GrpcTransport(address)
    try:
        transport.send(MQ.topic, MQ.broker_name, [f"m{i}".encode() for i in range(count)], MQ.queue_id)
    finally:
        transport.close()


def committed(transport: GrpcTransport) -> int | None:
    return transport.query_offsets(MQ.broker_name, GROUP, [MQ])[MQ]


def consumer(
    transport: GrpcTransport, listener: Any, errors: list[tuple[str, Exception]], **options: Any
) -> PushConsumer:
    return PushConsumer(
        transport.address,
        GROUP,
        topics=["TopicTest"],
        listener=listener,
        client_id="c1",
        transport=transport,
        on_error=lambda kind, error: errors.append((kind, error)),
        **{**FAST, **options},
    )


@given(
    size=st.integers(1, 40),
    value=st.one_of(
        st.none(),
        st.sampled_from(list(ConsumeResult)),
        st.builds(Reconsume, st.integers(0, 50), st.integers(-1, 18), st.none() | st.floats(0.01, 30)),
    ),
)
def test_an_answer_consumes_a_prefix_of_its_batch(size: int, value: ConsumeResult | Reconsume | None) -> None:
    """None and SUCCESS consume the whole batch; RECONSUME_LATER and SUSPEND none of it; Reconsume(consumed=n) the
    first n (Java's ackIndex n - 1, clamped to the batch as Java clamps it), the rest going its delay level's way."""
    answer = _answer(value, size)
    assert answer is not None
    if isinstance(value, Reconsume):
        assert answer.consumed == min(value.consumed, size) and answer.delay_level == value.delay_level
        assert answer.suspend == value.suspend
    else:
        assert answer.consumed == (size if value in (None, ConsumeResult.SUCCESS) else 0)


@pytest.mark.parametrize("value", [False, True, 0, "SUCCESS", "RECONSUME_LATER", [], object()])
def test_anything_else_is_not_an_answer(value: object) -> None:
    assert _answer(value, 3) is None


@pytest.mark.parametrize(
    "arguments",
    [{"consumed": -1}, {"consumed": True}, {"delay_level": -2}, {"suspend": 0.0}, {"suspend": 31.0}, {"suspend": "1"}],
)
def test_reconsume_refuses_what_it_cannot_mean(arguments: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(arguments))):
        Reconsume(**arguments)


def test_reconsume_later_sends_the_batch_back_and_the_queue_moves_on(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    produce(address, 5)
    transport = SendsBack(address)
    errors: list[tuple[str, Exception]] = []
    c = consumer(transport, lambda batch: ConsumeResult.RECONSUME_LATER, errors)
    c.start()
    try:
        wait_for(lambda: len(transport.sent) == 5 and committed(transport) == 5)
        assert sorted(transport.sent) == [(offset, 0, 16) for offset in range(5)]  # the broker picks the delay
        assert not errors and c.healthy  # the listener's own answer is not a failure
    finally:
        c.shutdown(10)


def test_a_listener_that_raised_is_healthy_again_once_it_consumes(start_stub: StartStub) -> None:
    """The failure is a problem of health (``on_error``, ``describe()``) until the listener consumes a batch again."""
    address = GRPC_SCHEME + start_stub().address
    produce(address, 1)
    transport = SendsBack(address)
    errors: list[tuple[str, Exception]] = []

    def listener(batch: list[Message]) -> None:
        if batch[0].queue_offset == 0:
            raise RuntimeError("the first message fails")

    c = consumer(transport, listener, errors)
    c.start()
    try:
        wait_for(lambda: any(kind == "listener on TopicTest" for kind, _ in errors))  # after the problem's record
        assert all(isinstance(e, ListenerError) for kind, e in errors if kind == "listener on TopicTest")
        assert "listener on TopicTest" in c.describe()["problems"]  # type: ignore[operator]
        assert transport.sent == [(0, 0, 16)]
        produce(address, 2)
        wait_for(lambda: committed(transport) == 3)
        wait_for(lambda: c.healthy)
    finally:
        c.shutdown(10)


def test_partial_success_sends_back_exactly_the_rest_its_way(start_stub: StartStub) -> None:
    """Reconsume(consumed=1, delay_level=-1) of a batch of 4: the first consumed, the other three straight to the
    dead-letter queue (delay level -1), each once."""
    address = GRPC_SCHEME + start_stub().address
    produce(address, 4)
    transport = SendsBack(address)
    batches: list[list[int]] = []

    def listener(batch: list[Message]) -> Reconsume:
        batches.append([m.queue_offset for m in batch])
        return Reconsume(consumed=1, delay_level=-1)

    c = consumer(transport, listener, [], settings=EngineSettings(consume_message_batch_max_size=4))
    c.start()
    try:
        wait_for(lambda: committed(transport) == 4)
        expected = [(offset, -1, 16) for batch in batches for offset in batch[1:]]
        assert sorted(transport.sent) == sorted(expected) and sum(map(len, batches)) == 4
        assert any(len(batch) > 1 for batch in batches)  # one pull brought the four together
    finally:
        c.shutdown(10)


def test_a_mistaken_return_is_said_once_and_consumed_again(start_stub: StartStub) -> None:
    """``return False`` (a RocketMQ user's "reconsume later") counted as consumed, silently, before: now each such
    batch goes back to the retry topic, and on_error hears once that the listener returns no answer."""
    address = GRPC_SCHEME + start_stub().address
    produce(address, 5)
    transport = SendsBack(address)
    errors: list[tuple[str, Exception]] = []
    c = consumer(transport, lambda batch: False, errors)
    c.start()
    try:
        wait_for(lambda: len(transport.sent) == 5 and committed(transport) == 5)
        mistakes = [e for _, e in errors if isinstance(e.__cause__, ListenerResultError)]
        assert len(mistakes) == 1 and "returned False" in str(mistakes[0]), errors
        assert "sent back to the retry topic" in str(mistakes[0])
    finally:
        c.shutdown(10)


def test_an_orderly_message_past_its_retry_limit_goes_to_the_dead_letter_queue_and_the_queue_moves_on(
    start_stub: StartStub,
) -> None:
    """Java's checkReconsumeTimes: each failed attempt counts in the message's reconsume times; past
    max_reconsume_times it goes to the dead-letter queue and the next messages are consumed, in order."""
    address = GRPC_SCHEME + start_stub().address
    produce(address, 4)
    transport = SendsBack(address)
    calls: list[tuple[int, int]] = []

    def listener(batch: list[Message]) -> ConsumeResult:
        (message,) = batch
        calls.append((message.queue_offset, message.reconsume_times))
        return ConsumeResult.SUSPEND_CURRENT_QUEUE_A_MOMENT if message.queue_offset == 1 else ConsumeResult.SUCCESS

    settings = EngineSettings(max_reconsume_times=2, suspend_current_queue_time=0.05)
    c = consumer(transport, listener, [], consume_orderly=True, settings=settings)
    c.start()
    try:
        wait_for(lambda: committed(transport) == 4)
        assert calls == [(0, 0), (1, 0), (1, 1), (1, 2), (2, 0), (3, 0)]
        assert transport.sent == [(1, -1, 2)]  # the dead-letter queue, at once
    finally:
        c.shutdown(10)


def test_an_orderly_listener_can_send_a_poison_message_to_the_dead_letter_queue(start_stub: StartStub) -> None:
    """Without a retry limit (Java's default for orderly: none), Reconsume(delay_level=-1) is how a listener gives
    up on one message without holding its queue forever."""
    address = GRPC_SCHEME + start_stub().address
    produce(address, 3)
    transport = SendsBack(address)
    calls: list[int] = []

    def listener(batch: list[Message]) -> Reconsume | None:
        calls.append(batch[0].queue_offset)
        return Reconsume(delay_level=-1) if batch[0].queue_offset == 1 else None

    c = consumer(transport, listener, [], consume_orderly=True)
    c.start()
    try:
        wait_for(lambda: committed(transport) == 3)
        assert calls == [0, 1, 2] and transport.sent == [(1, -1, 2**31 - 1)]
    finally:
        c.shutdown(10)


def test_a_listener_stuck_past_the_consume_timeout_gives_its_message_back_and_the_queue_moves_on(
    start_stub: StartStub,
) -> None:
    """A thread cannot be stopped: the stuck call's batch is sent back (delay level 3, as Java's cleanExpiredMsg),
    the committed offset moves past it while the call still runs, health names the queue and offset until it
    returns; nothing else is held back behind it."""
    address = GRPC_SCHEME + start_stub().address
    produce(address, 6)
    transport = SendsBack(address)
    errors: list[tuple[str, Exception]] = []
    release = threading.Event()
    consumed: list[int] = []

    def listener(batch: list[Message]) -> None:
        if batch[0].queue_offset == 0:
            release.wait(60)
        consumed.extend(m.queue_offset for m in batch)

    c = consumer(transport, listener, errors, settings=EngineSettings(consume_timeout=1.0))
    c.start()
    try:
        wait_for(lambda: committed(transport) == 6)
        assert transport.sent == [(0, 3, 16)] and sorted(consumed) == [1, 2, 3, 4, 5]
        timeouts = [e for kind, e in errors if kind == CONSUME_TIMEOUT_KIND]
        assert timeouts and isinstance(timeouts[0], ConsumeTimeoutError)
        assert f"{MQ} offsets [0]" in str(timeouts[0]) and "past consume_timeout 1 s" in str(timeouts[0])
        assert CONSUME_TIMEOUT_KIND in c.describe()["problems"]  # type: ignore[operator]
        release.set()
        wait_for(lambda: CONSUME_TIMEOUT_KIND not in c.describe()["problems"])  # type: ignore[operator]
        assert committed(transport) == 6 and transport.sent == [(0, 3, 16)]  # its late answer changes nothing
        assert c.shutdown(10)  # the late call's task has ended: it counted nothing as consumed
        assert c.consumed == 5
    finally:
        release.set()
        c.shutdown(10)


def test_an_async_listener_is_cancelled_at_the_consume_timeout(start_stub: StartStub) -> None:
    """The asyncio consumer's stuck ``async def`` call is cancelled at the timeout (a thread's cannot be), and its
    message goes back as a timed-out one does."""

    async def scenario(address: str) -> None:
        transport = AsyncSendsBack(address)
        cancelled = asyncio.Event()
        errors: list[Exception] = []

        async def listener(batch: list[Message]) -> None:
            if batch[0].queue_offset == 0 and batch[0].reconsume_times == 0:
                try:
                    await asyncio.sleep(60)
                except asyncio.CancelledError:
                    cancelled.set()
                    raise

        settings = EngineSettings(consume_timeout=1.0)
        async with AsyncPushConsumer(
            address,
            GROUP,
            topics=["TopicTest"],
            listener=listener,
            client_id="c1",
            transport=transport,
            settings=settings,
            on_error=lambda kind, error: errors.append(error),
            **FAST,
        ):
            await asyncio.wait_for(cancelled.wait(), 30)
            while not transport.sent:
                await asyncio.sleep(0.05)
            assert transport.sent == [(0, 3, 16)]
            heard = [e for e in errors if isinstance(e, ConsumeTimeoutError | ListenerError)]
            assert heard and "consume_timeout 1 s" in str(heard[0])

    address = GRPC_SCHEME + start_stub().address
    produce(address, 3)
    run(scenario(address))
