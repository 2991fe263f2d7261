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

Beside the last rounds, :class:`RoundTotals` counts everything since the start (rounds by trigger, failed rounds
by the kind of their failure, queues assigned, revoked and lost, refused locks, and how long applied rounds
took), so that metrics read at any interval see every round, not only the last :data:`HISTORY_ROUNDS`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from rocket_rebalance.model import MessageQueue

__all__ = [
    "HISTORY_ROUNDS",
    "LATENCY_BOUNDS",
    "MAX_PROBLEMS",
    "Failure",
    "RoundHistory",
    "RoundRecord",
    "RoundTotals",
    "Trigger",
]

HISTORY_ROUNDS = 32
"""Rounds kept: with the 1 s retry of an unbalanced group that is half a minute of trouble, or ten minutes of
periodic rounds."""
MAX_PROBLEMS = 8
"""Problems kept per round (a refusal per queue would otherwise grow without bound); ``problems_dropped`` counts
the rest."""
LATENCY_BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
"""Upper bounds (seconds, inclusive) of the buckets an applied round's latency is counted in: a round that only
reads a list takes milliseconds; one that waits for a drain or a lock takes seconds to minutes (the broker's lock
lifetime is 60 s)."""


class Trigger:
    """Why a round ran (the first reason asked for it, when several came before it could start)."""

    START = "start"
    NOTIFY = "notify"
    TIMER = "timer"
    ROUTE = "route change"
    SUBSCRIPTION = "subscription change"
    RETRY = "retry"


class Failure:
    """What kept a round's table from its allocation (core rules R3, L2, L7, L9), in a few kinds: a failed round is
    counted under each kind it met, and a retry round names the kind that asked for it."""

    MEMBER_LIST = "member list not read"
    ALLOCATION = "allocation error"
    OFFSET = "offset not read"
    LOCK_REFUSED = "lock refused"
    LOCK_LOST = "lock lost"
    CONNECTION = "connection lost"
    NOT_PULLED = "queue not pulled"
    RELEASING = "queue still being released"
    WANTED_BACK = "queue released and wanted back"
    RELEASE_IN_DOUBT = "release of a gone member's locks in doubt"


@dataclass
class RoundRecord:
    """One round. ``members`` maps each topic whose list was asked for to the list read (None: not read)."""

    number: int
    trigger: str
    started_at: float
    retry_reason: str = ""
    retry_kind: str = ""
    """A retry round's :class:`Failure` kind (its ``retry_reason`` names the queue or broker too)."""
    requested_at: float | None = None
    """When the trigger came (or the round was due): the round starts then, or once the minimum interval since
    the previous one has passed. None: at ``started_at``."""
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
    members_changed: bool = False
    """A list read differs from the one read before for its topic (the first list read counts as a change)."""
    kinds: set[str] = field(default_factory=set)
    """The :class:`Failure` kinds of its problems."""
    seen: set[str] = field(default_factory=set, repr=False)  # every problem reported, kept or not

    @property
    def failed(self) -> bool:
        return bool(self.problems)

    @property
    def cause(self) -> str:
        """What the round answered, in a few words (librdkafka's ``rebalance_reason``): the start, a retry and its
        kind, a change of routes or of subscriptions, and for a notification or the timer a change of members (a
        list read differs from the last one) or nothing seen to change."""
        if self.trigger == Trigger.START:
            return "start"
        if self.trigger == Trigger.RETRY:
            return f"retry: {self.retry_kind}" if self.retry_kind else "retry"
        if self.trigger == Trigger.ROUTE:
            return "routes changed"
        if self.trigger == Trigger.SUBSCRIPTION:
            return "subscription changed"
        return "members changed" if self.members_changed else "no change seen"

    @property
    def latency(self) -> float | None:
        """Seconds from the trigger to the applied table; None while not applied."""
        if self.applied_at is None:
            return None
        return self.applied_at - min(self.started_at, self.requested_at if self.requested_at is not None else _INF)

    def problem(self, reason: str, kind: str) -> bool:
        """Note a problem; True when its kind is new to this round."""
        new_kind = kind not in self.kinds
        self.kinds.add(kind)
        if reason in self.seen:
            return new_kind
        self.seen.add(reason)
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(reason)
        else:
            self.problems_dropped += 1
        return new_kind


_INF = float("inf")


def _count(counts: dict[str, int], key: str) -> None:
    counts[key] = counts.get(key, 0) + 1


@dataclass
class RoundTotals:
    """Counts since the start, for metrics: they grow by one round's worth at a time and never shrink."""

    rounds: dict[str, int] = field(default_factory=dict)
    """Rounds started, by :class:`Trigger`."""
    failed: dict[str, int] = field(default_factory=dict)
    """Failed rounds, by :class:`Failure` kind (a round that met two kinds counts under each)."""
    assigned: dict[str, int] = field(default_factory=dict)
    """Queues rounds allocated to us, by topic (Kafka's "assigned")."""
    revoked: dict[str, int] = field(default_factory=dict)
    """Queues rounds took from us, released with their offsets saved, by topic (Kafka's "revoked")."""
    lost: dict[str, int] = field(default_factory=dict)
    """Queues dropped without a handover, their lock lapsed or refused on renewal or their broker's connection
    lost (core rules L2, L9; Kafka's "lost"), by topic."""
    lock_refusals: dict[str, int] = field(default_factory=dict)
    """Queue locks a broker refused, by topic (each queue of each refused or unanswered lock request)."""
    applied: int = 0
    """Rounds whose table was applied; their latencies are counted in ``latency_counts`` and ``latency_sum``."""
    latency_counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BOUNDS) + 1))
    """Applied rounds per bucket of :data:`LATENCY_BOUNDS` (not cumulative; the last one is above them all)."""
    latency_sum: float = 0.0
    last_applied_at: float | None = None
    last_change: RoundRecord | None = None
    """The latest round that changed the allocation or failed: the last rebalance an operator asks about."""


class RoundHistory:
    """The last :data:`HISTORY_ROUNDS` rounds and the totals since the start; the core tells it of each step."""

    def __init__(self) -> None:
        self.rounds: deque[RoundRecord] = deque(maxlen=HISTORY_ROUNDS)
        self.totals = RoundTotals()
        self._watch: RoundRecord | None = None  # the latest round, until its table is applied
        self._members: dict[str, tuple[str, ...]] = {}  # each topic's last list read, sorted

    @property
    def last(self) -> RoundRecord | None:
        return self.rounds[-1] if self.rounds else None

    def started(
        self, number: int, trigger: str, retry_reason: str, now: float, retry_kind: str = "", requested_at: float = _INF
    ) -> None:
        if self._watch is not None:
            self._watch.superseded = True
        self._watch = RoundRecord(
            number, trigger, now, retry_reason, retry_kind, requested_at if requested_at < now else None
        )
        self.rounds.append(self._watch)
        _count(self.totals.rounds, trigger)

    def list_read(self, topic: str, members: tuple[str, ...] | None, now: float, why: str = "") -> None:
        """``topic``'s list as read (None: not read, ``why`` said after the problem's words)."""
        record = self.last
        if record is not None:
            record.members[topic] = members
            record.lists_at = now
            if members is None:
                self._problem(record, f"member list of {topic} not read{why}", Failure.MEMBER_LIST)
            else:
                listed = tuple(sorted(members))
                if self._members.get(topic) != listed:
                    self._members[topic] = listed
                    record.members_changed = True

    def allocated(self, gained: Iterable[MessageQueue], lost: Iterable[MessageQueue]) -> None:
        record = self.last
        if record is not None:
            gained, lost = set(gained), set(lost)
            record.gained.update(gained)
            record.lost.update(lost)
            for mq in gained:
                _count(self.totals.assigned, mq.topic)
            for mq in lost:
                _count(self.totals.revoked, mq.topic)
            if gained or lost:
                self.totals.last_change = record

    def problem(self, reason: str, kind: str) -> None:
        """Something kept the table from the allocation (it goes to the latest round, whose work it concerns)."""
        record = self.last
        if record is not None:
            self._problem(record, reason, kind)

    def _problem(self, record: RoundRecord, reason: str, kind: str) -> None:
        if record.problem(reason, kind):
            _count(self.totals.failed, kind)
        self.totals.last_change = record

    def lock_refused(self, mq: MessageQueue) -> None:
        _count(self.totals.lock_refusals, mq.topic)

    def queue_lost(self, mq: MessageQueue, now: float) -> None:
        """A queue dropped without its handover (its lock gone): a step of the watched round, and lost."""
        _count(self.totals.lost, mq.topic)
        self.queue_dropped(mq, now)

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
            totals = self.totals
            latency = record.latency or 0.0
            totals.applied += 1
            bucket = next((i for i, bound in enumerate(LATENCY_BOUNDS) if latency <= bound), len(LATENCY_BOUNDS))
            totals.latency_counts[bucket] += 1
            totals.latency_sum += latency
            totals.last_applied_at = now
