"""The asyncio engine: the :class:`~rocket_rebalance.runtime.driver.Driver` on an event loop and an
:class:`~rocket_rebalance.runtime.transport.AsyncTransport`.

The loop is the service context: events and callbacks run as loop callbacks, one at a time, so the core is never
touched concurrently; timers and the core's ``WakeAt`` are the loop's own (``call_later``). Steps run as tasks,
each pool a semaphore of the threaded engine's size (``io_threads`` requests, four broker calls, ``consume_threads``
listener calls, one rebalance callback at a time, in order); the wire is the transport's streams, so a consumer
runs no thread of its own. Two things leave the loop: blocking local work that asyncio has no API for (an offset
file written and fsynced, an application's own synchronous offset store) goes to the loop's default executor, and
a plain (not ``async def``) listener is called in place on the loop, so it must be quick.

``shutdown(timeout)`` keeps to its timeout as a whole, as the threaded one does: drain, persist, unlock,
unregister, close the transport; tasks still running at the deadline (a listener that does not return) are
cancelled, and it returns True only when everything ended in time.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any

from rocket_rebalance.core import ShutdownRequested, Started, Tick
from rocket_rebalance.core.events import Event
from rocket_rebalance.model import MessageQueue
from rocket_rebalance.runtime.driver import Driver
from rocket_rebalance.runtime.service import Pool, PullDone
from rocket_rebalance.runtime.settings import BROKER_CALL_THREADS
from rocket_rebalance.runtime.steps import Steps, run_async
from rocket_rebalance.runtime.transport import AsyncTransport, Message, PullResult, TransportError

__all__ = ["AsyncEngine"]


class AsyncEngine(Driver):
    """Drives one consumer's core on the running event loop; ``await start()``, then ``await shutdown()``. The
    constructor's arguments are :class:`~rocket_rebalance.runtime.driver.Driver`'s, with an asyncio transport."""

    transport: AsyncTransport
    calls_on_loop = True

    def _init_runtime(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._wake: asyncio.TimerHandle | None = None
        self._timers: set[asyncio.TimerHandle] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        sizes: dict[Pool, int] = {
            "io": self.settings.io_threads,
            "consume": self.settings.consume_threads,
            "broker": BROKER_CALL_THREADS,
            "callback": 1,
        }
        self._slots = {pool: asyncio.Semaphore(size) for pool, size in sizes.items()}
        self._shutdown_done = asyncio.Event()
        self._stopped = False  # finish_shutdown ran: nothing more is spawned
        self.ready = asyncio.Event()  # poll: set when messages or callbacks may be waiting

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """As the threaded engine's ``start()``: learn the routes and register at their brokers first, then
        rebalance at once. The engine lives on the loop this is awaited on."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self.transport.attach(self)
        reports: list[asyncio.Future[Event | None]] = []
        for topic in self.brokers.topics:
            report: asyncio.Future[Event | None] = self._loop.create_future()
            reports.append(report)
            await run_async(self.brokers.fetch_route(topic, partial(_settle, report)), self.transport)
        for report in reports:  # each reports once, after its new brokers' heartbeats (bounded by their timeouts)
            self.brokers.post_if_event(await report)
        self.post(Started())

    async def shutdown(self, timeout: float = 15.0) -> bool:
        """Stop taking messages, let in-flight ones finish, persist, unlock, unregister, close: all within
        ``timeout``; True when clean (see the module docstring)."""
        deadline = time.monotonic() + timeout
        self.begin_shutdown()
        try:
            await asyncio.wait_for(self._shutdown_done.wait(), timeout)
            clean = True
        except TimeoutError:
            clean = False
        return await self.finish_shutdown(deadline) and clean

    def shutdown_soon(self, timeout: float = 15.0) -> bool:
        """Schedule :meth:`shutdown` on the engine's loop, from anywhere (a dropped consumer's finalizer): True
        when the loop still runs to carry it out (the unregister included, if the loop lives that long)."""
        loop = self._loop
        if loop is None or loop.is_closed() or not loop.is_running():
            return False

        async def shutdown() -> None:
            await self.shutdown(timeout)  # its answer is for no one: the consumer is gone

        loop.call_soon_threadsafe(lambda: self._track(shutdown()))
        return True

    def begin_shutdown(self) -> None:
        """Ask the core to release every queue (the first half of :meth:`shutdown`, for a consumer that must run
        callbacks itself while it waits: a pull consumer's ``close()``)."""
        self.post(ShutdownRequested())

    @property
    def shut_down(self) -> asyncio.Event:
        """Set once the core released every queue."""
        return self._shutdown_done

    async def finish_shutdown(self, deadline: float) -> bool:
        """The second half of :meth:`shutdown`: unregister, close the transport, end every task by ``deadline``."""
        self.closing.set()  # no new request, heartbeat, pull or reconnect from here
        clean = await self._unregister_all(deadline)
        await self._flush_trace(deadline)
        for stream in list(self.brokers.streams.values()):
            stream.cancel()  # closing the connection: the brokers notify the rest of the group at once
        clean = await self.transport.close(max(0.0, deadline - time.monotonic())) and clean
        self._stopped = True
        self._end_service()
        for handle in [self._wake, *self._timers]:
            if handle is not None:
                handle.cancel()
        current = asyncio.current_task()
        left = {task for task in self._tasks if task is not current}
        if left:
            _, left = await asyncio.wait(left, timeout=max(0.0, deadline - time.monotonic()))
            for task in left:
                task.cancel()  # a listener still running at the deadline: its batch goes to the next owner
        return clean and not left

    async def _flush_trace(self, deadline: float) -> None:
        """Send the trace records still waiting, by ``deadline``; what is left then is counted lost."""
        tracing = self.tracing
        if tracing is None or not len(tracing.buffer):
            return
        try:
            steps = tracing.send_waiting(deadline)
            await asyncio.wait_for(run_async(steps, self.transport), max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            pass  # abandoned below
        except Exception as error:
            self.unexpected("message trace flush", error)
        tracing.abandon()

    def _shutdown_complete(self) -> None:
        self._shutdown_done.set()
        self.ready.set()  # a pull consumer's close() waits on it while it runs the revoke callbacks

    def owns_current_task(self) -> bool:
        """Is the caller one of this engine's tasks (a listener, a rebalance callback)? Such a task cannot wait
        for the shutdown: the shutdown waits for it."""
        return asyncio.current_task() in self._tasks

    async def _unregister_all(self, deadline: float) -> bool:
        """Tell every broker we leave, :data:`BROKER_CALL_THREADS` at a time, until ``deadline``; True when every
        broker answered or failed by then (the rest are abandoned: the transport is closed next)."""
        brokers = self.brokers.known()
        if not brokers:
            return True
        slots = asyncio.Semaphore(BROKER_CALL_THREADS)

        async def one(broker: str) -> None:
            async with slots:
                try:
                    await run_async(self.brokers.unregister(deadline, broker), self.transport)
                except Exception as error:
                    self.unexpected("unregister task", error)

        tasks = [asyncio.ensure_future(one(broker)) for broker in brokers]
        _, pending = await asyncio.wait(tasks, timeout=max(0.0, deadline - time.monotonic()))
        for task in pending:
            task.cancel()
        return not pending

    # ------------------------------------------------------------------ what the driver asks of a runtime

    def post(self, item: Event | Callable[[], None]) -> None:
        loop = self._loop
        assert loop is not None, "the engine is not started"
        if threading.get_ident() == self._loop_thread:
            loop.call_soon(self._serve, item)
            return
        try:
            loop.call_soon_threadsafe(self._serve, item)
        except RuntimeError:  # the loop is closed: the engine ended with it, and nothing is left to tell
            pass

    def later(self, delay: float, callback: Callable[[], None]) -> None:
        assert self._loop is not None
        if self._stopped:
            return
        handle: asyncio.TimerHandle | None = None

        def fire() -> None:
            self._timers.discard(handle)
            self._serve(callback)

        handle = self._loop.call_later(delay, fire)
        self._timers.add(handle)

    def _set_wake(self, at: float | None) -> None:
        assert self._loop is not None
        if self._wake is not None:
            self._wake.cancel()
        self._wake_at = at
        self._wake = None if at is None else self._loop.call_later(max(0.0, at - time.monotonic()), self._tick)

    def _tick(self) -> None:
        self._wake = None
        self._serve(Tick())

    def spawn(self, pool: Pool, what: str, steps: Steps[Any], then: Callable[[Any], None] | None = None) -> bool:
        if self._stopped:
            steps.close()
            return False

        async def work() -> None:
            async with self._slots[pool]:
                try:
                    outcome = await run_async(steps, self.transport)
                except Exception as error:
                    self.unexpected(what, error)
                    return
            if then is not None:
                then(outcome)

        self._track(work())
        return True

    def _track(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` as a task the shutdown waits for (and cancels at its deadline)."""
        assert self._loop is not None
        task = self._loop.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def start_pull(self, mq: MessageQueue, offset: int, wait_ms: int, done: PullDone) -> None:
        async def pull() -> None:
            result: PullResult | TransportError
            try:
                result = await self.transport.pull(
                    mq, self.config.consumer_group, offset, self.settings.pull_batch_size, wait_ms
                )
            except TransportError as error:
                result = error
            except Exception as error:  # a wire's bug must not end the queue's pulls for good: retried, and said
                self.unexpected("pull: unexpected error", error)
                result = TransportError(f"pull of {mq}: {type(error).__name__}: {error}", "INTERNAL")
            self._serve(partial(done, result))

        self._track(pull())

    def _in_service(self) -> bool:
        return threading.get_ident() == self._loop_thread

    def _wait_for(self, done: threading.Event, timeout: float) -> bool:
        return done.wait(timeout)

    def messages_ready(self) -> None:
        self.ready.set()

    def _describe_runtime(self) -> dict[str, object]:
        return {"tasks": len(self._tasks), "timers": len(self._timers)}

    async def consume_directly(self, message: Message) -> tuple[bool, str]:
        """CONSUME_MESSAGE_DIRECTLY (AsyncBrokerRequests): the listener awaited on one message."""
        return await run_async(self.consume_directly_steps(message), self.transport)


def _settle(future: asyncio.Future[Event | None], event: Event | None) -> None:
    """A route's report, from the loop (steps or a broker task's end)."""
    if not future.done():
        future.set_result(event)
