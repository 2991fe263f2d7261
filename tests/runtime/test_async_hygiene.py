"""The asyncio consumers' manners: a task cancelled inside ``async with`` does not hold its shutdown for the
listener calls in flight (they are cancelled and their batches go back), and a consumer dropped unclosed says so
with a ``ResourceWarning`` and still leaves its group while its loop runs. No timing is asserted: the prompt exit
is shown by the shutdown's own answer (clean: it ended before its timeout, which cancels what still runs and
answers False) and by who cancelled the listener."""

from __future__ import annotations

import asyncio
import gc
import warnings

import pytest

from rocket_rebalance.model import ConsumeFromWhere
from rocket_rebalance.runtime.async_consumer import AsyncPullConsumer, AsyncPushConsumer
from rocket_rebalance.runtime.settings import ConsumeCancelledError, ListenerError
from rocket_rebalance.runtime.transport import GRPC_SCHEME, Message
from rocket_rebalance.runtime.transport.grpc import GrpcTransport
from tests.aio import run
from tests.runtime.test_consumer import produce
from tests.stub.conftest import StartStub

WAIT = 60.0  # hang bound


def test_a_cancelled_task_leaves_without_waiting_for_its_listener(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    produce(address, 1)
    errors: list[Exception] = []
    listener_cancelled: list[bool] = []

    async def scenario() -> bool:
        entered = asyncio.Event()

        async def stuck(batch: list[Message]) -> None:
            entered.set()
            try:
                await asyncio.Event().wait()  # never returns by itself
            except asyncio.CancelledError:
                listener_cancelled.append(True)
                raise

        consumer = AsyncPushConsumer(
            address,
            "GID_cancel",
            topics=["TopicTest"],
            listener=stuck,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            on_error=lambda kind, error: errors.append(error),
        )

        async def body() -> None:
            async with consumer:
                await asyncio.sleep(WAIT * 10)  # until cancelled

        task = asyncio.create_task(body())
        await entered.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await consumer.shutdown()  # the same shutdown's answer

    assert run(scenario(), WAIT) is True  # clean: nothing was left running at the deadline
    assert listener_cancelled
    cancelled = [e for e in errors if isinstance(e, ListenerError) and isinstance(e.__cause__, ConsumeCancelledError)]
    assert cancelled and "left to the queue's next owner" in str(cancelled[0])


@pytest.mark.parametrize("consumer_class", [AsyncPushConsumer, AsyncPullConsumer])
def test_a_consumer_dropped_unclosed_warns_and_leaves_its_group(
    start_stub: StartStub, consumer_class: type[AsyncPushConsumer] | type[AsyncPullConsumer]
) -> None:
    server = start_stub()
    members = GrpcTransport(server.address)

    async def scenario() -> list[str]:
        consumer = consumer_class(GRPC_SCHEME + server.address, "GID_dropped", topics=["TopicTest"])
        await consumer.start()
        await consumer.wait_for_assignment(WAIT)
        assert members.consumer_list("broker-a", "GID_dropped") == [consumer.client_id]
        with pytest.warns(ResourceWarning, match=rf"^unclosed {consumer_class.__name__} .* of GID_dropped \(its sh"):
            del consumer
            gc.collect()
        while listed := members.consumer_list("broker-a", "GID_dropped"):
            await asyncio.sleep(0.05)  # run()'s bound ends a wait that never ends
        return listed

    try:
        assert run(scenario(), WAIT) == []
    finally:
        members.close()


def test_a_consumer_shut_down_or_never_started_is_dropped_quietly(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address

    async def scenario() -> None:
        started = AsyncPushConsumer(address, "GID_quiet", topics=["TopicTest"])
        async with started:
            pass
        never = AsyncPullConsumer(address, "GID_quiet", topics=["TopicTest"])
        del started, never
        gc.collect()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run(scenario(), WAIT)
    assert [w for w in caught if "unclosed Async" in str(w.message)] == []
