"""The engine's part behind a pull consumer: what ``poll()``, ``commit()``, ``seek()``, ``pause()`` and the
rebalance callbacks run in ``poll()`` read and write.

Messages wait in their queue's buffer (:mod:`.pulling`) until ``poll()`` takes them, from the queues in turn. With
auto-commit they count as consumed at once (Java's ``DefaultLitePullConsumer``); else they stay the application's
until ``commit()``, which writes every held queue's commit offset and answers once the store acknowledged them
(core rule O4). Rebalance callbacks wait in :attr:`Polling.callbacks` for ``poll()`` to run them on the
application's thread. Everything here runs in the service context; it exists only in a pull consumer (a push
consumer has :mod:`.dispatch` instead).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable

from rocket_rebalance.core import (
    MessagesConsumed,
    MessagesDispatched,
    MessagesReturned,
    OffsetsPersisted,
    OffsetsPersistFailed,
    PersistRequested,
    QueueSeeked,
)
from rocket_rebalance.model import MessageQueue
from rocket_rebalance.runtime.pulling import Pulling, QueueRun
from rocket_rebalance.runtime.service import Service
from rocket_rebalance.runtime.settings import QueueNotAssignedError, SeekOffsetError
from rocket_rebalance.runtime.stats import Tally
from rocket_rebalance.runtime.steps import Steps
from rocket_rebalance.runtime.tracing import Tracing
from rocket_rebalance.runtime.transport import Message, body_bytes, offsets_of

__all__ = ["Polling", "check_seek_offset"]


def check_seek_offset(offset: int) -> None:
    """What a seek's offset must be before anyone is asked about it: a whole number, not negative."""
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset must be a whole number of at least 0, got {offset!r}")


class Polling:
    """A pull consumer's side of the engine (service context)."""

    def __init__(
        self, service: Service, pulling: Pulling, auto_commit: bool, tally: Tally, tracing: Tracing | None = None
    ) -> None:
        self._service = service
        self._tracing = tracing
        self._pulling = pulling
        self._runs = pulling.runs
        self._auto_commit = auto_commit
        self._tally = tally
        self._polled: dict[MessageQueue, list[Message]] = {}  # manual commit: taken and not yet committed
        self._rotation: deque[MessageQueue] = deque()  # the queues in the order they are taken from
        self.callbacks: deque[Steps[None]] = deque()  # rebalance callbacks for poll() to run, in order
        self._stored: dict[MessageQueue, int] = {}  # offsets the store acknowledged (commit(), committed())
        self._commits: list[tuple[dict[MessageQueue, int], Callable[[bool], None]]] = []  # commit() waiting
        self._lost_since_commit: set[MessageQueue] = set()
        pulling.hand_out = self._ready

    def _ready(self, mq: MessageQueue) -> None:
        self._service.messages_ready()

    def run_callback(self, steps: Steps[None], what: str) -> None:
        """A rebalance callback, for ``poll()`` to run on the application's thread, in order."""
        self.callbacks.append(steps)
        self._service.messages_ready()

    # ------------------------------------------------------------------ a queue's life

    def started(self, mq: MessageQueue) -> None:
        self._rotation.append(mq)

    def stopped(self, mq: MessageQueue) -> None:
        """A queue being released whose messages the application polled and has not committed: they are the
        application's now, in its own thread, so the release does not wait for them (the drain is for a push
        consumer's listener). They come back to the core as not handed out, so the revoke follows at once and
        reaches ``poll()`` after the application is done with its batch; what it commits until the offset is
        frozen (in its loop, or in ``on_queues_revoked``) still counts."""
        polled = self._polled.get(mq)
        if polled:
            self._service.handle(MessagesReturned(mq, offsets_of(polled)))

    def dropped(self, mq: MessageQueue, lost: bool) -> None:
        if lost and self._commits:
            self._lost_since_commit.add(mq)
            self._service.post(self._check_commits)
        self._polled.pop(mq, None)
        if mq in self._rotation:
            self._rotation.remove(mq)

    def persisted(self, event: OffsetsPersisted | OffsetsPersistFailed) -> None:
        """Offsets written (or not): what the store acknowledged, and the commits now settled."""
        if isinstance(event, OffsetsPersisted):
            for mq, offset in event.offsets.items():
                self._stored[mq] = max(offset, self._stored.get(mq, offset))

    def settle(self) -> None:
        """After the core took an offset write's answer: the commits it settles."""
        if self._commits:
            self._check_commits()

    # ------------------------------------------------------------------ poll and commit

    def take(self, max_messages: int) -> list[Message]:
        """Up to ``max_messages`` buffered messages for ``poll()``, taken from the queues in turn (each queue's in
        offset order), only from queues the core lets give messages out and the rebalance listener has heard of.
        With auto-commit they count as consumed at once (Java's ``DefaultLitePullConsumer``: the offset moves as
        soon as ``poll()`` returns them); else they stay handed out until :meth:`commit`."""
        taken: list[Message] = []
        now = time.monotonic()
        core = self._service.core
        for _ in range(len(self._rotation)):
            if len(taken) >= max_messages:
                break
            mq = self._rotation[0]
            self._rotation.rotate(-1)
            run = self._runs.get(mq)
            if run is None:
                self._rotation.remove(mq)
                continue
            if not run.buffered or run.paused or not run.announced or not core.is_dispatchable(mq, now):
                continue
            count = min(max_messages - len(taken), len(run.buffered))
            batch = [run.buffered.popleft() for _ in range(count)]
            offsets = offsets_of(batch)
            self._service.handle(MessagesDispatched(mq, offsets))
            if self._tracing is not None:
                self._tracing.polled(batch)
            if self._auto_commit:
                self._handed_back(mq, run, batch)
            else:
                self._polled.setdefault(mq, []).extend(batch)
            taken += batch
        return taken

    def _handed_back(self, mq: MessageQueue, run: QueueRun, batch: list[Message]) -> None:
        """Polled messages done with: consumed for the core, their bytes off the flow control."""
        run.cached_bytes -= body_bytes(batch)
        self._service.handle(MessagesConsumed(mq, offsets_of(batch)))
        self._tally.add(len(batch))

    def commit(self, done: Callable[[bool], None]) -> None:
        """Everything polled so far counts as consumed, and every held queue's commit offset is written now (core
        rule O4); ``done(True)`` once the store has acknowledged each of those offsets (a queue released meanwhile
        counts when its release wrote at least as far), ``done(False)`` when a queue was lost first. A caller that
        stops waiting simply never hears."""
        for mq, batch in self._polled.items():
            run = self._runs.get(mq)
            if run is not None:
                self._handed_back(mq, run, batch)
        self._polled.clear()
        core = self._service.core
        wanted = {}
        for mq in self._runs:
            pq = core.process_queue(mq)
            if pq is not None and pq.commit_offset != core.stored_offset(mq):
                wanted[mq] = pq.commit_offset
        if not wanted:
            done(True)
            return
        self._commits.append((wanted, done))
        self._service.handle(PersistRequested())

    def _check_commits(self) -> None:
        """(After offsets were written or queues lost.) Answer the commits now settled."""
        waiting = []
        for wanted, done in self._commits:
            if any(mq in self._lost_since_commit for mq in wanted):
                done(False)
            elif all(self._stored.get(mq, -1) >= offset for mq, offset in wanted.items()):
                done(True)
            else:
                waiting.append((wanted, done))
        self._commits = waiting
        self._lost_since_commit.clear()

    def committed(self, mq: MessageQueue) -> int | None:
        """The offset the store is known to hold for ``mq`` (None: not known here; read the store)."""
        return self._stored.get(mq, self._service.core.stored_offset(mq))

    # ------------------------------------------------------------------ where the application moves

    def _assigned_run(self, mq: MessageQueue) -> QueueRun:
        run = self._runs.get(mq)
        if run is None or run.stopped:
            raise QueueNotAssignedError(f"{mq} is not assigned to this consumer (poll() assigns queues)")
        return run

    def check_assigned(self, mq: MessageQueue) -> None:
        """Raises :class:`QueueNotAssignedError` when ``mq`` is not ours now (a seek's check before it asks the
        broker)."""
        self._assigned_run(mq)

    def seek(self, mq: MessageQueue, offset: int, offsets: tuple[int, int]) -> None:
        """``poll()`` returns ``mq``'s messages from ``offset`` next (core rule O4), when it lies in ``offsets``:
        the queue's min and max offset as its broker reported them for this seek (the max is the next offset to be
        written, so seeking there is seeking to the end). Raises :class:`QueueNotAssignedError` when the queue is
        not ours now and :class:`SeekOffsetError` when ``offset`` is outside (Java's "Seek offset illegal"): the
        commit offset, which a seek forward moves up to ``offset``, never exceeds what the broker reported."""
        check_seek_offset(offset)
        run = self._assigned_run(mq)
        low, high = offsets
        if not low <= offset <= high:
            raise SeekOffsetError(
                f"Seek offset illegal, seek offset = {offset}, min offset = {low}, max offset = {high}: {mq} "
                f"takes offsets from {low} to {high} (the next to be written), as its broker reports them now"
            )
        self._polled.pop(mq, None)
        self._pulling.move(mq, run, offset)
        self._service.handle(QueueSeeked(mq, offset))
        self._pulling.pull(mq)

    def position(self, mq: MessageQueue) -> int:
        """The offset of the next message ``poll()`` returns from ``mq``."""
        run = self._assigned_run(mq)
        return run.buffered[0].queue_offset if run.buffered else run.next_offset

    def pause(self, queues: Iterable[MessageQueue], paused: bool = True) -> None:
        """Neither pull nor poll ``queues`` until resumed (``paused=False``); a queue revoked meanwhile forgets it.
        Raises :class:`QueueNotAssignedError` for a queue not ours now."""
        runs = {mq: self._assigned_run(mq) for mq in queues}
        for mq, run in runs.items():
            run.paused = paused
            if not paused:
                self._pulling.pull(mq)
        if not paused:
            self._service.messages_ready()

    def assignment(self) -> frozenset[MessageQueue]:
        """The queues this consumer consumes now (started and not being released)."""
        return frozenset(mq for mq, run in self._runs.items() if not run.stopped)
