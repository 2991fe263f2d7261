"""Wake-ups for long polling: a pull that found no new message waits here until one arrives in its queue.

Each queue has a version that a send bumps. A puller reads the version *before* looking for messages and then
waits for it to change, so a message stored between the look and the wait is never missed.

A parked pull holds a gRPC worker thread while it waits, so at most ``limit`` may wait at once; the next one is
refused with RESOURCE_EXHAUSTED (a client retries a failed pull after a pause), never left to starve plain calls.
"""

from __future__ import annotations

import threading
import time

from nameserver_stub.errors import ResourceExhausted

QueueId = tuple[str, str, int]  # (broker, topic, queue_id)


class ArrivalBoard:
    """Per-queue arrival versions with a shared condition; thread-safe."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._cond = threading.Condition()
        self._versions: dict[QueueId, int] = {}
        self._closed = False
        self._waiting = 0

    @property
    def waiting(self) -> int:
        """How many pulls are parked right now (for tests and benchmarks)."""
        with self._cond:
            return self._waiting

    def version(self, queue: QueueId) -> int:
        with self._cond:
            return self._versions.get(queue, 0)

    def arrived(self, queue: QueueId) -> None:
        """Messages were appended to ``queue``: wake its pollers."""
        with self._cond:
            self._versions[queue] = self._versions.get(queue, 0) + 1
            self._cond.notify_all()

    def wait(self, queue: QueueId, seen: int, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for ``queue`` to move past version ``seen``; False on timeout/close.

        Raises :class:`ResourceExhausted` when ``limit`` pulls are waiting already.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            if self._waiting >= self._limit:
                raise ResourceExhausted(
                    f"too many long polls: {self._waiting} pulls are already waiting for messages, the stub's limit "
                    "(max_parked_pulls, --max-parked-pulls), as each holds a worker thread; retry the pull later"
                )
            self._waiting += 1
            try:
                while not self._closed and self._versions.get(queue, 0) == seen:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    self._cond.wait(remaining)
                return not self._closed
            finally:
                self._waiting -= 1

    def close(self) -> None:
        """Wake every poller for good (the server is stopping)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
