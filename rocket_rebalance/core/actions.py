"""What the core asks the runtime to do. Carry them out in the order given; answer each request with its event.

Requests that need an answer: ``FetchConsumerList`` (``ConsumerListFetched``), ``LockQueues`` (``LockResult``),
``ReadOffset`` (``OffsetRead``), ``QueryMaxOffset`` / ``SearchOffset`` (``OffsetQueried``), any of the three
failing (``OffsetLookupFailed``), ``PersistOffsets`` (``OffsetsPersisted`` / ``OffsetsPersistFailed``),
``FetchRoutes`` (``RouteUpdated`` per topic that succeeded), ``UnlockQueues`` (``QueuesUnlocked``). The rest
are fire-and-forget. A request that gets no answer within ``request_timeout`` is treated as failed, so a lost
answer delays but never wedges the core.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from rocket_rebalance.model import ConsumeFromWhere, MessageQueue

__all__ = [
    "Action",
    "ClientIdShared",
    "DropQueue",
    "FetchConsumerList",
    "FetchRoutes",
    "HandoverWithoutOffset",
    "OffsetResetApplied",
    "LockQueues",
    "PersistOffsets",
    "QueryMaxOffset",
    "QueuesChanged",
    "ReadOffset",
    "ReleaseDeadHolders",
    "RevokeQueues",
    "SearchOffset",
    "SendHeartbeat",
    "ShutdownComplete",
    "StartQueue",
    "StopQueue",
    "UnlockQueues",
    "WakeAt",
]


class Action:
    """Base class of everything :meth:`RebalanceCore.handle` returns."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class FetchRoutes(Action):
    """Fetch these topics' routes from the NameServer; answer each success with ``RouteUpdated``."""

    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FetchConsumerList(Action):
    """Ask ``broker_name`` for the group's client IDs of ``topic``; answer with ``ConsumerListFetched``.

    ``broker_name`` is the ``member_broker`` of the topic's latest ``RouteUpdated`` (the route's first broker, the
    same for every consumer of the group). None: the route names no broker; answer at once with a failed list
    (``ConsumerListFetched(topic, None)``)."""

    topic: str
    broker_name: str | None


@dataclass(frozen=True, slots=True)
class SendHeartbeat(Action):
    """Send a heartbeat to every broker, registering the group with these topics (retry topic included)."""

    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class LockQueues(Action):
    """Lock these queues of one broker for our client ID (batch lock); answer with ``LockResult``, echoing
    ``epoch`` (L9)."""

    broker_name: str
    queues: tuple[MessageQueue, ...]
    epoch: int = 0


@dataclass(frozen=True, slots=True)
class ReleaseDeadHolders(Action):
    """L9: fetch the broker's own member list of the group and, for each of ``client_ids`` it does not list, unlock
    ``queues`` on that client's behalf (UNLOCK_BATCH_MQ names the client whose locks go), back to back, so the
    decision rests on the broker's present view. Everything by ``deadline`` (the core's clock): a list that comes
    later releases nothing, no unlock is sent after it, and an unlock not answered by then (failed, timed out or
    answered late) is *in doubt*: it may land at any later time. Answer with ``DeadHoldersChecked``, echoing
    ``request_id``."""

    broker_name: str
    client_ids: tuple[str, ...]
    queues: tuple[MessageQueue, ...]
    request_id: int
    deadline: float


@dataclass(frozen=True, slots=True)
class UnlockQueues(Action):
    """Unlock these queues of one broker; answer with ``QueuesUnlocked`` whether or not it worked.

    A failed unlock lapses with the broker lock lifetime. The answer matters because the core will not lock a
    queue again while its unlock may still be on the way (an unlock landing after a new lock would free it).
    """

    broker_name: str
    queues: tuple[MessageQueue, ...]


@dataclass(frozen=True, slots=True)
class ReadOffset(Action):
    """Read ``mq``'s stored offset from the offset store (not a cached one); answer with ``OffsetRead``.

    ``consume_from_where`` is for logging: what a missing offset will lead to is decided by the core.
    """

    mq: MessageQueue
    request_id: int
    consume_from_where: ConsumeFromWhere


@dataclass(frozen=True, slots=True)
class QueryMaxOffset(Action):
    """Ask the broker for ``mq``'s max offset (CONSUME_FROM_LAST with no stored offset); ``OffsetQueried``."""

    mq: MessageQueue
    request_id: int


@dataclass(frozen=True, slots=True)
class SearchOffset(Action):
    """Ask the broker for ``mq``'s offset at ``timestamp_ms`` (CONSUME_FROM_TIMESTAMP); ``OffsetQueried``."""

    mq: MessageQueue
    request_id: int
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class StartQueue(Action):
    """``mq`` is ours: create its process queue and pull from ``offset``, reporting pulls as ``MessagesPulled``."""

    mq: MessageQueue
    offset: int


@dataclass(frozen=True, slots=True)
class StopQueue(Action):
    """Stop pulling ``mq`` and stop handing its messages out; let those already handed out finish and report
    them with ``MessagesConsumed``. Buffered, never handed out messages are discarded (the next owner gets them).
    """

    mq: MessageQueue


@dataclass(frozen=True, slots=True)
class RevokeQueues(Action):
    """L10 (``confirm_revoke`` only): these queues are being released and none of their messages is handed out any
    more; call the application's ``on_queues_revoked(queues)`` and answer ``QueuesRevoked`` once it returned. Their
    final offsets are persisted and their locks released only after that answer (or ``revoke_timeout``)."""

    queues: tuple[MessageQueue, ...]


@dataclass(frozen=True, slots=True)
class DropQueue(Action):
    """``mq`` is released: forget its process queue entirely. ``lost``: dropped without its offset persisted (its
    lock lapsed or was refused, or the broker connection was lost: L2, L9), so another consumer may already own it
    and what this one consumed since the last persisted offset may be consumed again (a rebalance listener's
    ``on_queues_lost``); otherwise its offset was persisted (or given up on, L8) and its lock given back."""

    mq: MessageQueue
    lost: bool = False


@dataclass(frozen=True, slots=True)
class PersistOffsets(Action):
    """Write these commit offsets to the offset store (one batch); answer with ``OffsetsPersisted``.

    ``epochs``: for each broker whose queues here are fenced by their locks, its connection losses the core had
    heard of when it decided the write (L9, O6). A broker's part goes out only while its connection is still that
    one; after a loss the core has not heard of yet, it is not sent and is answered as failed
    (``OffsetsPersistFailed``)."""

    offsets: Mapping[MessageQueue, int] = field(hash=False)
    epochs: Mapping[str, int] = field(default_factory=dict, hash=False)


@dataclass(frozen=True, slots=True)
class QueuesChanged(Action):
    """Call the user's ``MessageQueueListener.message_queue_changed(topic, mq_all, mq_divided)``."""

    topic: str
    mq_all: tuple[MessageQueue, ...]
    mq_divided: tuple[MessageQueue, ...]


@dataclass(frozen=True, slots=True)
class ClientIdShared(Action):
    """Our client ID appears ``consumers`` times in ``topic``'s member list (1: no longer shared); fire-and-forget.

    Other consumers use our ID (containers cloned with one instance name, RocketMQ #1547/#2760). The runtime
    warns, naming the ID, and reports the consumer unhealthy until ``consumers`` is 1 again. ``withheld``: with
    locks the topic's queues are not consumed meanwhile (L6).
    """

    topic: str
    client_id: str
    consumers: int
    withheld: bool


@dataclass(frozen=True, slots=True)
class OffsetResetApplied(Action):
    """An operator's reset of ``mq`` is taken (rule O5): its commit offset ``previous`` becomes ``offset``, the one
    backward move (or a jump forward) no member undoes; fire-and-forget, for the log."""

    mq: MessageQueue
    previous: int | None
    offset: int


@dataclass(frozen=True, slots=True)
class HandoverWithoutOffset(Action):
    """A released queue was handed over although its offset ``offset`` could not be saved (L8); fire-and-forget.

    The store kept ``saved`` (``None``: nothing known), so the next owner re-delivers from there: at-least-once
    holds, exactly-once across this handover does not. Sent after ``attempts`` failed writes, as the lock held
    meanwhile kept the queue from everyone; the runtime reports it at ERROR.
    """

    mq: MessageQueue
    offset: int
    saved: int | None
    attempts: int


@dataclass(frozen=True, slots=True)
class WakeAt(Action):
    """Send a ``Tick`` at ``time`` (replaces any earlier ``WakeAt``; events may arrive before it, that is fine)."""

    time: float


@dataclass(frozen=True, slots=True)
class ShutdownComplete(Action):
    """Every queue is released: the runtime may unregister the client and close its connections."""
