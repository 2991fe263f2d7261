"""The threaded engine: the :class:`~rocket_rebalance.runtime.driver.Driver` on threads and a blocking transport.

One thread (``rebalance-service``, after Java's RebalanceService) is the service context: every event and callback,
from any thread, goes through its inbox, so the core is never touched concurrently. Steps run on fixed pools of
daemon threads (:class:`~rocket_rebalance.runtime.workers.DaemonPool`): requests on the I/O pool, heartbeats and
unregisters on small broker pools, the listener on the consume pool, rebalance callbacks on a pool of one (so they
come in order). Pulls hold no thread while they wait: the transport calls back on its own reader. The service
thread sleeps until the core's ``WakeAt`` or its own next timer, and feeds ``Tick`` then. A consumer's thread count
is fixed by its settings, whatever the routes say.

``shutdown(timeout)`` keeps to its timeout as a whole: the unregister gets what the drain left of it, then the
transport is closed, so no request of this consumer reaches a broker after ``shutdown()`` returned, and every
thread of the engine is joined within what is left; it returns True only when all of that was done in time.
"""

from __future__ import annotations

import heapq
import itertools
import queue
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from rocket_rebalance.core import ShutdownRequested, Started, Tick
from rocket_rebalance.core.events import Event
from rocket_rebalance.model import MessageQueue
from rocket_rebalance.runtime.driver import Driver, ServiceQuery
from rocket_rebalance.runtime.service import Pool, PullDone
from rocket_rebalance.runtime.settings import BROKER_CALL_THREADS
from rocket_rebalance.runtime.steps import Steps, run
from rocket_rebalance.runtime.transport import Message, PullResult, Transport, TransportError
from rocket_rebalance.runtime.workers import DaemonPool, keep_to_cpu

__all__ = ["Engine"]


class Engine(Driver):
    """Drives one consumer's core against a blocking transport and an offset store. ``start()``, then
    ``shutdown()``; the constructor's arguments are :class:`~rocket_rebalance.runtime.driver.Driver`'s."""

    transport: Transport

    def _init_runtime(self) -> None:
        self._inbox: queue.SimpleQueue[Event | Callable[[], None] | None] = queue.SimpleQueue()  # C: the hot path
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._sequence = itertools.count()
        self._shutdown_done = threading.Event()
        self._own = threading.local()  # marks the threads of this engine: they must never wait for its shutdown
        failed = self.unexpected
        self._pools: dict[Pool, DaemonPool] = {
            "io": DaemonPool(self.settings.io_threads, "rr-io", partial(failed, "I/O task"), self._mark),
            "consume": DaemonPool(
                self.settings.consume_threads, "rr-consume", partial(failed, "consume task"), self._mark
            ),
            "broker": DaemonPool(BROKER_CALL_THREADS, "rr-heartbeat", partial(failed, "heartbeat task"), self._mark),
            "callback": DaemonPool(1, "rr-rebalance-listener", partial(failed, "rebalance listener"), self._mark),
        }
        self._thread = threading.Thread(target=self._loop, name="rebalance-service", daemon=True)
        self.ready = threading.Event()  # poll: set when messages or callbacks may be waiting

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """As Java's ``start()``: learn the routes and register at their brokers first, then rebalance at once,
        so the first round already has queues and finds this client in the member list."""
        self.transport.attach(self)
        if self.settings.pin_cpu is not None:
            self.transport.keep_to_cpu(self.settings.pin_cpu)
        self._thread.start()
        routes: queue.SimpleQueue[Event | None] = queue.SimpleQueue()
        for topic in self.brokers.topics:
            run(self.brokers.fetch_route(topic, routes.put), self.transport)
        for _ in self.brokers.topics:  # each reports once, after its new brokers' heartbeats (bounded by timeouts)
            self.brokers.post_if_event(routes.get())
        self.post(Started())

    def shutdown(self, timeout: float = 15.0) -> bool:
        """Stop taking messages, let in-flight ones finish, persist, unlock, unregister, close: all within
        ``timeout``. True when clean: every queue released, every broker told, every thread of the engine and of
        its transport ended, in time. What is not done by then is abandoned, and the transport is closed before
        this returns, so nothing of it reaches a broker afterwards (see the module docstring)."""
        deadline = time.monotonic() + timeout
        self.begin_shutdown()
        clean = self._shutdown_done.wait(timeout)
        return self.finish_shutdown(deadline) and clean

    def begin_shutdown(self) -> None:
        """Ask the core to release every queue (the first half of :meth:`shutdown`, for a consumer that must run
        callbacks itself while it waits: a pull consumer's ``close()``)."""
        self.post(ShutdownRequested())

    @property
    def shut_down(self) -> threading.Event:
        """Set once the core released every queue."""
        return self._shutdown_done

    def finish_shutdown(self, deadline: float) -> bool:
        """The second half of :meth:`shutdown`: unregister, close the transport, join every thread by ``deadline``."""
        self.closing.set()  # no new request, heartbeat, pull or reconnect from here
        clean = self._unregister_all(deadline)
        self._flush_trace(deadline)
        for stream in list(self.brokers.streams.values()):
            stream.cancel()  # closing the connection: the brokers notify the rest of the group at once
        self._inbox.put(None)
        clean = self.transport.close(max(0.0, deadline - time.monotonic())) and clean
        if self._thread is not threading.current_thread():
            self._thread.join(max(0.0, deadline - time.monotonic()))
        for name, pool in self._pools.items():
            pool.shutdown(drop=name != "broker")  # each queued heartbeat sees the shutdown and returns at once
        ended = [pool.join(deadline) for pool in self._pools.values()]
        return clean and all(ended) and not self._thread.is_alive()

    def _flush_trace(self, deadline: float) -> None:
        """Send the trace records still waiting, by ``deadline``, on a thread of its own (the transport's close
        cuts a send still running then short); what is left is counted lost."""
        tracing = self.tracing
        if tracing is None or not len(tracing.buffer):
            return

        def flush() -> None:
            try:
                run(tracing.send_waiting(deadline), self.transport)
            except Exception as error:
                self.unexpected("message trace flush", error)

        sender = threading.Thread(target=flush, name="rr-trace-flush", daemon=True)
        sender.start()
        sender.join(max(0.0, deadline - time.monotonic()))
        tracing.abandon()

    def _shutdown_complete(self) -> None:
        self._shutdown_done.set()
        self.ready.set()  # a pull consumer's close() waits on it while it runs the revoke callbacks

    def _mark(self) -> None:
        """First thing on each of the engine's threads: it is the engine's own, kept to ``pin_cpu`` if set."""
        self._own.mine = True
        keep_to_cpu(self.settings.pin_cpu)

    def owns_current_thread(self) -> bool:
        """Is the caller one of this engine's threads (the listener's, the service thread, I/O, notification)?
        Such a thread cannot wait for the shutdown: the shutdown waits for it."""
        return bool(getattr(self._own, "mine", False))

    def _unregister_all(self, deadline: float) -> bool:
        """Tell every broker we leave, :data:`BROKER_CALL_THREADS` at a time (the group rebalances as soon as one
        of them says so), until ``deadline``; True when every broker answered or failed by then. Brokers not
        reached are abandoned: the transport is closed next, and a broker drops a client whose connection closed."""
        brokers = self.brokers.known()
        if not brokers:
            return True
        pool = DaemonPool(
            min(len(brokers), BROKER_CALL_THREADS), "rr-unregister", partial(self.unexpected, "unregister task")
        )

        def spawn(steps: Steps[None]) -> bool:
            return pool.submit(lambda: run(steps, self.transport))

        done = threading.Event()
        left = [len(brokers)]
        lock = threading.Lock()

        def one(broker: str) -> Steps[None]:
            try:
                yield from self.brokers.unregister(deadline, broker)
            finally:
                with lock:
                    left[0] -= 1
                    if left[0] == 0:
                        done.set()

        for broker in brokers:
            spawn(one(broker))
        finished = done.wait(max(0.0, deadline - time.monotonic()))
        pool.shutdown()
        return pool.join(deadline) and finished

    # ------------------------------------------------------------------ what the driver asks of a runtime

    def post(self, item: Event | Callable[[], None]) -> None:
        self._inbox.put(item)

    def later(self, delay: float, callback: Callable[[], None]) -> None:
        heapq.heappush(self._timers, (time.monotonic() + delay, next(self._sequence), callback))

    def _set_wake(self, at: float | None) -> None:
        self._wake_at = at

    def spawn(self, pool: Pool, what: str, steps: Steps[Any], then: Callable[[Any], None] | None = None) -> bool:
        def work() -> None:
            try:
                outcome = run(steps, self.transport)
            except Exception as error:
                self.unexpected(what, error)
                return
            if then is not None:
                then(outcome)

        return self._pools[pool].submit(work)

    def start_pull(self, mq: MessageQueue, offset: int, wait_ms: int, done: PullDone) -> None:
        def answered(result: PullResult | TransportError) -> None:  # on the transport's reader: post, do nothing else
            self.post(partial(done, result))

        self.transport.pull(mq, self.config.consumer_group, offset, self.settings.pull_batch_size, wait_ms, answered)

    def messages_ready(self) -> None:
        self.ready.set()

    def _in_service(self) -> bool:
        return threading.current_thread() is self._thread

    def _wait_for(self, done: threading.Event, timeout: float) -> bool:
        return done.wait(timeout)

    def _describe_runtime(self) -> dict[str, object]:
        return {"inbox": self._inbox.qsize(), "timers": len(self._timers), "alive": self._thread.is_alive()}

    def consume_directly(self, message: Message) -> tuple[bool, str]:
        """CONSUME_MESSAGE_DIRECTLY, on the transport's answering thread (BrokerRequests)."""
        return run(self.consume_directly_steps(message), self.transport)

    # ------------------------------------------------------------------ the service thread

    def _loop(self) -> None:
        self._mark()
        while True:
            deadline = min(
                [t for t in (self._wake_at, self._timers[0][0] if self._timers else None) if t is not None],
                default=None,
            )
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                item = self._inbox.get(timeout=timeout)
            except queue.Empty:
                item = Tick()
            if item is None:
                self._end_service()
                self._answer_queries()
                return
            now = time.monotonic()
            while self._timers and self._timers[0][0] <= now:
                self._serve(heapq.heappop(self._timers)[2])
            self._serve(item)

    def _answer_queries(self) -> None:
        """The last act of the service thread: readers posted before it ended are answered here (everything else
        left in the inbox is dropped: the engine is closed)."""
        while True:
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, ServiceQuery):
                item()
