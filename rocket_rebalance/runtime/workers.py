"""A fixed number of daemon threads working through a queue: the runtime's pools (I/O, the listener, calls to
every broker, the transports' answers to brokers) are all of this kind, so a consumer's thread count is fixed by
its settings, never by what a server says (a route of a thousand brokers is a thousand queued calls, not a
thousand threads).

Why not ``ThreadPoolExecutor``: its threads are joined at interpreter exit, so one task that never returns (a
listener, a store that hangs) would keep the process alive after ``shutdown()`` returned; and it cannot join its
threads within a deadline, which is how a shutdown honours its timeout as a whole. Nobody waits on a task's result
here: a task reports its own outcome, and an exception it did not expect goes to ``on_failure``.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable

__all__ = ["DaemonPool", "keep_to_cpu"]

log = logging.getLogger("rocket_rebalance.runtime")


def keep_to_cpu(cpu: int | None, thread: threading.Thread | None = None) -> None:
    """Keep ``thread`` (None: the calling one) to ``cpu``, the setting ``pin_cpu`` (None: leave it where it is).
    A CPU taken away since the setting was checked leaves the thread where it was, and says so."""
    named = thread or threading.current_thread()
    native_id = 0 if thread is None else thread.native_id  # 0: the calling thread
    if cpu is None or native_id is None:  # a thread not started yet keeps itself to its CPU when it starts
        return
    try:
        os.sched_setaffinity(native_id, {cpu})
    except OSError as error:
        log.warning("thread %s not kept to CPU %d (%s): it runs where the system places it", named.name, cpu, error)


class DaemonPool:
    """``size`` daemon threads named ``<name>_<n>``, started at the first task."""

    def __init__(
        self,
        size: int,
        name: str,
        on_failure: Callable[[Exception], None],
        initializer: Callable[[], None] | None = None,
    ) -> None:
        self._size = size
        self._name = name
        self._initializer = initializer
        self._on_failure = on_failure
        self._tasks: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._lock = threading.Lock()

    def submit(self, work: Callable[[], None]) -> bool:
        """Queue ``work``; False (and the work dropped) once the pool is shut down."""
        with self._lock:
            if self._closed:
                return False
            if not self._threads:
                for number in range(self._size):
                    thread = threading.Thread(target=self._work, name=f"{self._name}_{number}", daemon=True)
                    self._threads.append(thread)
                    thread.start()
            self._tasks.put(work)
            return True

    def shutdown(self, drop: bool = True) -> None:
        """Take no more tasks and let each thread end: after its current task, dropping those not begun, or with
        ``drop=False`` after the queued ones too (tasks that see the shutdown and return at once, and that
        someone counts on to finish)."""
        with self._lock:
            self._closed = True
            while drop and not self._tasks.empty():
                self._tasks.get_nowait()
            for _ in self._threads:
                self._tasks.put(None)

    def join(self, deadline: float) -> bool:
        """After :meth:`shutdown`: wait until every thread ended, or until ``deadline`` (``time.monotonic()``);
        True when all did. The calling thread, if it is one of them, is not waited for (it cannot end while it
        waits) and counts as ended: it returns to its loop and takes the end marker next."""
        current = threading.current_thread()
        for thread in self._threads:
            if thread is not current:
                thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in self._threads if thread is not current)

    def _work(self) -> None:
        if self._initializer is not None:
            self._initializer()
        while (work := self._tasks.get()) is not None:
            try:
                work()
            except Exception as error:  # a task's own failures are handled in it; anything else is reported
                self._on_failure(error)
