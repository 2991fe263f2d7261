"""What the runtime tells the core: answers to its actions, pushes from the broker, and the passing of time.

Every event is handed to :meth:`RebalanceCore.handle` together with ``now``. Answers name the queue or topic they
answer; offset look-ups also echo the ``request_id`` of the action they answer, so a late answer to an abandoned
look-up is recognised and ignored instead of starting a queue from a stale offset.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from rocket_rebalance.model import MessageQueue

__all__ = [
    "BrokerConnectionLost",
    "BrokerRegistered",
    "ConsumerIdsChanged",
    "ConsumerListFetched",
    "DeadHoldersChecked",
    "Event",
    "LockResult",
    "MessagesConsumed",
    "MessagesReturned",
    "MessagesDispatched",
    "MessagesPulled",
    "OffsetIllegal",
    "OffsetsReset",
    "OffsetLookupFailed",
    "OffsetQueried",
    "OffsetRead",
    "OffsetsPersistFailed",
    "OffsetsPersisted",
    "PersistRequested",
    "QueueSeeked",
    "QueuesRevoked",
    "QueuesUnlocked",
    "RouteUpdated",
    "ShutdownRequested",
    "Started",
    "SubscriptionChanged",
    "Tick",
]


class Event:
    """Base class of everything :meth:`RebalanceCore.handle` accepts."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Started(Event):
    """The consumer starts: fetch routes, send a heartbeat, rebalance at once (Java's ``start``)."""


@dataclass(frozen=True, slots=True)
class Tick(Event):
    """Time passed; the core fires whatever timers are due at ``now``. Send one when a ``WakeAt`` time comes."""


@dataclass(frozen=True, slots=True)
class SubscriptionChanged(Event):
    """The user's subscribed topics (without the retry topic, which the core adds in clustering)."""

    topics: frozenset[str]


@dataclass(frozen=True, slots=True)
class RouteUpdated(Event):
    """A topic's readable queues, from a route fetch. Send only on success: a failed fetch keeps the old route.

    ``member_broker`` is the broker the core names in ``FetchConsumerList`` for this topic: the route's
    :meth:`~rocket_rebalance.route.TopicRoute.member_list_broker` (None when the route names no broker), so the
    broker asked is the one of the route the core balances on, with no second route table in the runtime."""

    topic: str
    queues: frozenset[MessageQueue]
    member_broker: str | None
    masterless: frozenset[str] = frozenset()
    """The route's broker sets whose master is down (a slave serves their reads: rule L11)."""


@dataclass(frozen=True, slots=True)
class ConsumerListFetched(Event):
    """The group's client IDs for ``topic`` as a broker sees them; ``None`` when the fetch failed."""

    topic: str
    client_ids: tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class ConsumerIdsChanged(Event):
    """A broker pushed NOTIFY_CONSUMER_IDS_CHANGED for our group: rebalance at once (at least 1 s apart)."""


@dataclass(frozen=True, slots=True)
class LockResult(Event):
    """The answer to one ``LockQueues``: which of the ``requested`` queues we now hold (empty on error).

    ``epoch`` echoes the action's: an answer to a request sent before the connection to the broker was lost is
    ignored (rule L9), since the grant may have come before the broker listed us again."""

    requested: frozenset[MessageQueue]
    granted: frozenset[MessageQueue]
    epoch: int = 0


@dataclass(frozen=True, slots=True)
class BrokerConnectionLost(Event):
    """Our connection to ``broker_name`` ended (the ``epoch``-th time): the broker has dropped us from its member
    lists, so another member may now release our locks there (L9). ``epoch`` counts the losses, from 1."""

    broker_name: str
    epoch: int


@dataclass(frozen=True, slots=True)
class BrokerRegistered(Event):
    """A heartbeat to ``broker_name`` succeeded that was sent after the ``epoch``-th connection loss there (0:
    none yet), on a connection the broker had confirmed, so the broker lists us again (L6, L9). A heartbeat sent
    before our connection was listed proves nothing to a consumer whose ID another process uses: the broker lists
    the ID once per connection, and the one entry it had was the other process's."""

    broker_name: str
    epoch: int


@dataclass(frozen=True, slots=True)
class DeadHoldersChecked(Event):
    """The answer to ``ReleaseDeadHolders``: whose locks of ``queues`` were released (``released``: the client
    IDs the broker did not list whose unlock was answered by the deadline; empty when it listed them all, or on
    error) and whose unlock was sent and not answered by then (``in_doubt``: it may still land)."""

    broker_name: str
    request_id: int
    queues: frozenset[MessageQueue]
    released: frozenset[str] = frozenset()
    in_doubt: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class QueuesUnlocked(Event):
    """An ``UnlockQueues`` was carried out (or failed: the broker lock then lapses on its own)."""

    queues: frozenset[MessageQueue]


@dataclass(frozen=True, slots=True)
class QueuesRevoked(Event):
    """The application's ``on_queues_revoked`` returned for these queues (answers ``RevokeQueues``; L10)."""

    queues: frozenset[MessageQueue]


@dataclass(frozen=True, slots=True)
class OffsetRead(Event):
    """The stored offset of ``mq`` (``offset`` is ``None`` when none is stored: consume-from-where decides)."""

    mq: MessageQueue
    offset: int | None
    request_id: int


@dataclass(frozen=True, slots=True)
class OffsetQueried(Event):
    """The answer to ``QueryMaxOffset`` or ``SearchOffset``: the offset to start ``mq`` from."""

    mq: MessageQueue
    offset: int
    request_id: int


@dataclass(frozen=True, slots=True)
class OffsetLookupFailed(Event):
    """A ``ReadOffset``, ``QueryMaxOffset`` or ``SearchOffset`` failed (broker error, timeout): skip the queue."""

    mq: MessageQueue
    request_id: int


@dataclass(frozen=True, slots=True)
class OffsetsPersisted(Event):
    """The offset store acknowledged these offsets (echo the ``PersistOffsets`` mapping, or the part that stuck)."""

    offsets: Mapping[MessageQueue, int] = field(hash=False)


@dataclass(frozen=True, slots=True)
class OffsetsPersistFailed(Event):
    """Persisting these offsets failed; queues waiting to be released retry shortly."""

    offsets: Mapping[MessageQueue, int] = field(hash=False)


@dataclass(frozen=True, slots=True)
class MessagesPulled(Event):
    """A pull of ``mq`` returned: the offsets of the messages now buffered, and the next offset to pull.

    An empty pull counts too (it keeps the queue from expiring, and ``next_offset`` may move past filtered ones).
    """

    mq: MessageQueue
    offsets: tuple[int, ...]
    next_offset: int


@dataclass(frozen=True, slots=True)
class MessagesDispatched(Event):
    """These buffered messages were handed to the user's listener (check ``is_dispatchable`` first, atomically)."""

    mq: MessageQueue
    offsets: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class MessagesConsumed(Event):
    """The listener finished these messages (success, or sent back for retry): they leave the in-flight set."""

    mq: MessageQueue
    offsets: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class MessagesReturned(Event):
    """These dispatched messages never reached the listener after all (the runtime hands out several batches at
    once and stopped before these: the queue was being released, its lock ran out, or an orderly batch before
    them failed): they are in flight again, not handed out, and a release no longer waits for them."""

    mq: MessageQueue
    offsets: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class QueueSeeked(Event):
    """The application moved ``mq`` to ``offset`` (a pull consumer's seek): its messages in flight are forgotten and
    the runtime pulls from ``offset`` next (O4)."""

    mq: MessageQueue
    offset: int


@dataclass(frozen=True, slots=True)
class PersistRequested(Event):
    """Write every held queue's commit offset now, as the periodic write does (a pull consumer's ``commit()``; O4)."""


@dataclass(frozen=True, slots=True)
class OffsetIllegal(Event):
    """A pull answered OFFSET_ILLEGAL; ``next_offset`` is the broker's suggested offset for the queue."""

    mq: MessageQueue
    next_offset: int


@dataclass(frozen=True, slots=True)
class OffsetsReset(Event):
    """An operator reset the group's offsets of these queues (RESET_CONSUMER_CLIENT_OFFSET: a broker with
    ``useServerSideResetOffset=false`` asks each member to apply it, rule O5)."""

    offsets: Mapping[MessageQueue, int]


@dataclass(frozen=True, slots=True)
class ShutdownRequested(Event):
    """Release every queue (drain, persist, unlock); ``ShutdownComplete`` follows when all are released."""
