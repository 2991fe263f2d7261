"""The asyncio consumers: :class:`AsyncPushConsumer` and :class:`AsyncPullConsumer`.

The same core, rules and engine logic as the threaded consumers (:mod:`rocket_rebalance.runtime.driver`), on the
running event loop (:class:`~rocket_rebalance.runtime.async_engine.AsyncEngine`): the wire is asyncio streams to
RocketMQ (or ``grpc.aio`` to the stub), timers are the loop's, listeners and rebalance callbacks may be ``async
def`` and are awaited there. Build a consumer anywhere; ``await start()`` (or ``async with``) binds it to the
running loop, where it stays. Options are the threaded consumers' (:class:`~rocket_rebalance.runtime.consumer.
ConsumerBase`).

A plain (not ``async def``) listener or callback is called in place on the loop: keep it quick, or make it a
coroutine function.
"""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from types import TracebackType
from typing import Unpack

from rocket_rebalance.model import MessageQueue, check_duration
from rocket_rebalance.runtime.async_engine import AsyncEngine
from rocket_rebalance.runtime.consumer import ConsumerBase
from rocket_rebalance.runtime.offset_store import read_steps
from rocket_rebalance.runtime.options import ConsumerOptions, PushOptions
from rocket_rebalance.runtime.pull_consumer import PullBase, _check_poll
from rocket_rebalance.runtime.settings import MessageListener, QueueListener
from rocket_rebalance.runtime.steps import run_async
from rocket_rebalance.runtime.transport import AsyncTransport, Message

__all__ = ["AsyncPullConsumer", "AsyncPushConsumer"]


def _dropped(consumer: ConsumerBase[AsyncEngine], shutting_down: bool) -> None:
    """A consumer garbage-collected while started and not shut down (``asyncio.run()`` ended without
    ``shutdown()``, or the object was let go): a ``ResourceWarning``, as asyncio gives for an unclosed transport,
    and the shutdown scheduled on its loop when that still runs, so the brokers hear it leave (else they drop it
    after their channel expiry, two minutes, and the group rebalances only then). When ``asyncio.run()`` is what
    ends, the loop is still running here, but ``asyncio.run()`` cancels the scheduled shutdown with every other
    task: the warning is all that is left to give then."""
    engine = getattr(consumer, "_engine", None)  # None too when the constructor raised
    if engine is None or shutting_down:
        return
    then = (
        "its shutdown is scheduled on its loop"
        if engine.shutdown_soon()
        else "its loop has ended: the brokers drop it after their channel expiry"
    )
    warnings.warn(
        f"unclosed {type(consumer).__name__} {consumer.client_id} of {consumer.config.consumer_group} ({then}): "
        "await shutdown(), or use async with",
        ResourceWarning,
        source=consumer,
        stacklevel=2,
    )


async def _wait(
    consumer: ConsumerBase[AsyncEngine], timeout: float, pause: Callable[[float], Awaitable[object]]
) -> dict[str, frozenset[MessageQueue]]:
    """An asyncio consumer's ``wait_for_assignment``: the threaded :func:`~rocket_rebalance.runtime.consumer.
    wait_blocking`, each pause awaited."""
    looks = consumer._looks(timeout)
    try:
        while True:
            await pause(next(looks))
    except StopIteration as ready:
        return ready.value  # type: ignore[no-any-return]


class AsyncPushConsumer(ConsumerBase[AsyncEngine]):
    """A member of a consumer group whose messages go to ``listener``, on the running event loop (see the module
    docstring). ``async with AsyncPushConsumer(...) as consumer:`` starts it and shuts it down."""

    transport: AsyncTransport

    def __init__(
        self,
        namesrv_addr: str,
        consumer_group: str,
        *,
        listener: MessageListener | None = None,
        queue_listener: QueueListener | None = None,
        transport: AsyncTransport | None = None,
        **options: Unpack[PushOptions],
    ) -> None:
        super().__init__(
            namesrv_addr, consumer_group, asynchronous=True, push=listener is not None, transport=transport, **options
        )
        self._listener = listener
        self._queue_listener = queue_listener
        self._stopping: asyncio.Task[bool] | None = None

    def __del__(self) -> None:
        _dropped(self, getattr(self, "_stopping", None) is not None)

    async def __aenter__(self) -> AsyncPushConsumer:
        await self.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        """Shut down; after a cancellation at once, not waiting for listener calls in flight (the shutdown would
        otherwise wait up to its timeout for an ``async def`` listener that the cancelled application no longer
        waits for): they are cancelled and their batches go back, as at a consume timeout."""
        engine = self._engine
        if isinstance(error, asyncio.CancelledError) and engine is not None and engine.dispatch is not None:
            engine.dispatch.cut_short()
        await self.shutdown()

    async def start(self) -> None:
        if self._stopping is not None:
            self._closed = True
        self._starting()
        await run_async(self._check_subscriptions(), self.transport)
        listener = self._named_listener(self._listener)
        engine = AsyncEngine(listener=listener, queue_listener=self._queue_listener, **self._engine_args())
        self._started(engine)
        await engine.start()

    async def wait_for_assignment(self, timeout: float) -> dict[str, frozenset[MessageQueue]]:
        """The threaded :meth:`~rocket_rebalance.PushConsumer.wait_for_assignment`, awaited."""
        return await _wait(self, timeout, asyncio.sleep)

    async def shutdown(self, timeout: float = 15.0) -> bool:
        """Stop taking messages, finish in-flight ones (bounded), persist offsets, unregister, close; True when
        every queue was released cleanly within ``timeout``. A later call waits for the same shutdown. Awaited from
        the consumer's own listener or callback, it cannot wait for the shutdown, which waits for that very call:
        it starts the shutdown and returns False at once."""
        check_duration("timeout", timeout, zero=True)
        engine = self._engine
        if engine is None:
            return True
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self._stop(engine, timeout))
        if engine.owns_current_task():
            return False
        return await asyncio.shield(self._stopping)

    async def _stop(self, engine: AsyncEngine, timeout: float) -> bool:
        try:
            return await engine.shutdown(timeout)
        finally:
            self._ended()


class AsyncPullConsumer(PullBase[AsyncEngine]):
    """A member of a consumer group the application pulls from with ``await poll()``, on the running event loop:
    the threaded :class:`~rocket_rebalance.runtime.pull_consumer.PullConsumer`'s behaviour (see its module), with
    ``async with``, ``async for message in consumer`` and ``async def`` rebalance callbacks."""

    transport: AsyncTransport

    def __init__(
        self,
        namesrv_addr: str,
        consumer_group: str,
        *,
        auto_commit: bool = True,
        transport: AsyncTransport | None = None,
        **options: Unpack[ConsumerOptions],
    ) -> None:
        super().__init__(
            namesrv_addr, consumer_group, asynchronous=True, auto_commit=auto_commit, transport=transport, **options
        )
        self._callbacks_lock = asyncio.Lock()

    def __del__(self) -> None:
        _dropped(self, getattr(self, "_closed", True))

    async def __aenter__(self) -> AsyncPullConsumer:
        await self.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.close()

    async def __aiter__(self) -> AsyncIterator[Message]:
        while not self._closed:
            for message in await self.poll():
                yield message

    async def start(self) -> None:
        self._starting()
        await run_async(self._check_subscriptions(), self.transport)
        engine = AsyncEngine(**self._engine_args())
        self._started(engine)
        await engine.start()

    async def poll(self, max_messages: int = 32, timeout: float = 1.0) -> list[Message]:
        """Up to ``max_messages`` messages, waiting up to ``timeout`` seconds for the first; an empty list when none
        came. Runs (awaits) the rebalance callbacks that are due first."""
        _check_poll(max_messages, timeout)
        engine = self._running()
        deadline = time.monotonic() + timeout
        while True:
            await self._run_callbacks(engine)
            engine.ready.clear()
            taken = engine.polling_part().take(max_messages)  # on the loop: the service context itself
            if taken:
                return self._named(taken)
            if engine.polling_part().callbacks:
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                return []
            try:
                await asyncio.wait_for(engine.ready.wait(), left)
            except TimeoutError:
                return []

    async def wait_for_assignment(self, timeout: float) -> dict[str, frozenset[MessageQueue]]:
        """The threaded :meth:`~rocket_rebalance.PullConsumer.wait_for_assignment`,
        awaited: the rebalance callbacks due meanwhile are awaited here."""
        engine = self._running()

        async def pause(seconds: float) -> None:
            await self._run_callbacks(engine)
            await asyncio.sleep(seconds)

        return await _wait(self, timeout, pause)

    async def _run_callbacks(self, engine: AsyncEngine) -> None:
        async with self._callbacks_lock:
            while engine.polling_part().callbacks:
                await run_async(engine.polling_part().callbacks.popleft(), self.transport)

    async def commit(self, timeout: float = 5.0) -> bool:
        """Everything polled so far counts as consumed, and the offsets are written now; True once the store has
        them, False when it did not say so within ``timeout`` or a queue was lost first."""
        check_duration("timeout", timeout, zero=True)
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

        def answered(ok: bool) -> None:
            if not answer.done():
                answer.set_result(ok)

        self._service(lambda engine: engine.polling_part().commit(answered))
        try:
            return await asyncio.wait_for(asyncio.shield(answer), timeout)
        except TimeoutError:
            return False

    async def committed(self, queue: MessageQueue) -> int | None:
        """The offset stored for ``queue`` (None: none yet): what this consumer knows was written, else read."""
        queue = self._wire_queue(queue)
        known = self._committed_here(queue)
        return known if known is not None else await run_async(read_steps(self._offset_store, queue), self.transport)

    async def seek(self, queue: MessageQueue, offset: int) -> None:
        """The next ``poll()`` returns ``queue``'s messages from ``offset`` on, which must lie in the queue's
        offsets as its broker reports them now (awaited): the threaded consumer's ``seek``, with its checks and
        errors."""
        queue = self._wire_queue(queue)
        self._seek_checked(queue, offset)
        self._seek_within(queue, offset, await run_async(self._offsets(queue), self.transport))

    async def seek_to_beginning(self, queue: MessageQueue) -> None:
        queue = self._wire_queue(queue)
        self._seek_checked(queue)
        low, high = await run_async(self._offsets(queue), self.transport)
        self._seek_within(queue, low, (low, high))

    async def seek_to_end(self, queue: MessageQueue) -> None:
        queue = self._wire_queue(queue)
        self._seek_checked(queue)
        low, high = await run_async(self._offsets(queue), self.transport)
        self._seek_within(queue, high, (low, high))

    async def close(self, timeout: float = 15.0) -> bool:
        """Release every queue (awaiting ``on_queues_revoked``), write the offsets, unregister, close the wire, all
        within ``timeout``; True when clean."""
        check_duration("timeout", timeout, zero=True)
        engine = self._engine
        if engine is None or self._closed:
            self._closed = True
            return True
        deadline = time.monotonic() + timeout
        engine.begin_shutdown()
        while not engine.shut_down.is_set() and time.monotonic() < deadline:
            await self._run_callbacks(engine)
            engine.ready.clear()
            if not engine.polling_part().callbacks and not engine.shut_down.is_set():
                try:
                    await asyncio.wait_for(engine.ready.wait(), max(0.0, deadline - time.monotonic()))
                except TimeoutError:
                    break
        clean = engine.shut_down.is_set()
        self._closed = True
        clean = await engine.finish_shutdown(deadline) and clean
        self._ended()
        return clean

    shutdown = close
