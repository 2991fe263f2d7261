"""The last rounds of one consumer's rebalance, as the core saw them: what an operator reads in ``describe()``.

Java's client leaves only log lines of its rebalances, and its own check in running info always says "fine". Here
each round keeps: why it ran (the trigger), when, the member list each topic read (or that it could not be read),
the queues gained and lost, what went wrong (a refused lock, an unreadable list, an allocation error ...), and
when each step ended: the member lists came, the queues gained were started (locked and their offsets read), the
queues lost were dropped (drained, persisted, unlocked), and so the process-queue table was applied. Times are
the core's ``now``, which the runtime turns into wall-clock time. Pure like the rest of ``core``.

A round is applied once every queue the allocation holds is started and every queue it no longer holds is
dropped. A later round takes the watch over (the earlier one is then ``superseded``): a queue waiting for a lock
keeps its round unapplied, and the retry rounds that follow show it waiting too.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from rocket_rebalance.model import MessageQueue

__all__ = ["HISTORY_ROUNDS", "MAX_PROBLEMS", "RoundHistory", "RoundRecord", "Trigger"]

HISTORY_ROUNDS = 32
"""Rounds kept: with the 1 s retry of an unbalanced group that is half a minute of trouble, or ten minutes of
periodic rounds."""
MAX_PROBLEMS = 8
"""Problems kept per round (a refusal per queue would otherwise grow without bound); ``problems_dropped`` counts
the rest."""


class Trigger:
    """Why a round ran (the first reason asked for it, when several came before it could start)."""

    START = "start"
    NOTIFY = "notify"
    TIMER = "timer"
    ROUTE = "route change"
    SUBSCRIPTION = "subscription change"
    RETRY = "retry"


@dataclass
class RoundRecord:
    """One round. ``members`` maps each topic whose list was asked for to the list read (None: not read)."""

    number: int
    trigger: str
    started_at: float
    retry_reason: str = ""
    members: dict[str, tuple[str, ...] | None] = field(default_factory=dict)
    lists_at: float | None = None
    gained: set[MessageQueue] = field(default_factory=set)
    lost: set[MessageQueue] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)
    problems_dropped: int = 0
    acquired_at: float | None = None
    released_at: float | None = None
    applied_at: float | None = None
    superseded: bool = False
    waiting: set[MessageQueue] = field(default_factory=set)
    """Queues the table still has to start or drop for this round to be applied (known once it is decided)."""
    decided: bool = False
    seen: set[str] = field(default_factory=set, repr=False)  # every problem reported, kept or not

    @property
    def failed(self) -> bool:
        return bool(self.problems)

    def problem(self, reason: str) -> None:
        if reason in self.seen:
            return
        self.seen.add(reason)
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(reason)
        else:
            self.problems_dropped += 1


class RoundHistory:
    """The last :data:`HISTORY_ROUNDS` rounds; the core tells it of each step."""

    def __init__(self) -> None:
        self.rounds: deque[RoundRecord] = deque(maxlen=HISTORY_ROUNDS)
        self._watch: RoundRecord | None = None  # the latest round, until its table is applied

    @property
    def last(self) -> RoundRecord | None:
        return self.rounds[-1] if self.rounds else None

    def started(self, number: int, trigger: str, retry_reason: str, now: float) -> None:
        if self._watch is not None:
            self._watch.superseded = True
        self._watch = RoundRecord(number, trigger, now, retry_reason)
        self.rounds.append(self._watch)

    def list_read(self, topic: str, members: tuple[str, ...] | None, now: float) -> None:
        record = self.last
        if record is not None:
            record.members[topic] = members
            record.lists_at = now
            if members is None:
                record.problem(f"member list of {topic} not read")

    def allocated(self, gained: Iterable[MessageQueue], lost: Iterable[MessageQueue]) -> None:
        record = self.last
        if record is not None:
            record.gained.update(gained)
            record.lost.update(lost)

    def problem(self, reason: str) -> None:
        """Something kept the table from the allocation (it goes to the latest round, whose work it concerns)."""
        record = self.last
        if record is not None:
            record.problem(reason)

    def finished(self, waiting: Iterable[MessageQueue], now: float) -> None:
        """The round's decisions are made: ``waiting`` are the queues the table must still start or drop."""
        record = self._watch
        if record is not None:
            record.waiting = set(waiting)
            record.decided = True
            self._applied_if_done(record, now)

    def queue_started(self, mq: MessageQueue, now: float) -> None:
        """A queue became active (locked, its offset read); one the round gained, or waits for, ends a step."""
        record = self._watch
        if record is not None and (mq in record.waiting or mq in record.gained):
            record.waiting.discard(mq)
            record.acquired_at = now
            self._applied_if_done(record, now)

    def queue_dropped(self, mq: MessageQueue, now: float) -> None:
        """A queue left the table (released, or its lock lost)."""
        record = self._watch
        if record is not None and (mq in record.waiting or mq in record.lost):
            record.waiting.discard(mq)
            record.released_at = now
            self._applied_if_done(record, now)

    def _applied_if_done(self, record: RoundRecord, now: float) -> None:
        if record.decided and not record.waiting and record.applied_at is None:
            record.applied_at = now
            self._watch = None
