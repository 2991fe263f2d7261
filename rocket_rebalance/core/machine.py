"""The rebalance state machine of one consumer: events in, actions out, ``now`` passed in.

Modelled on h11: this module never sleeps, reads no clock, does no I/O and starts no thread. The runtime feeds it
events with :meth:`RebalanceCore.handle` and carries out the actions it returns, in order. The rules:

Rounds
  R1. A round balances every subscribed topic on its own. In CLUSTERING the core subscribes ``%RETRY%<group>``
      too, fetches the group's client IDs per topic (``FetchConsumerList``), sorts queues and IDs like Java
      (``model.prepare_rebalance_input``) and asks the strategy for its share. In BROADCASTING every queue of the
      route is ours and no list is fetched. A topic without a route yet is skipped. The list is asked of the
      broker the topic's latest route names (``RouteUpdated.member_broker``, ``TopicRoute.member_list_broker``:
      the route's first, so every consumer of this library reads the same broker's view; Java asks a random
      one); a route that names no broker gives ``FetchConsumerList(topic, None)``, which fails at once (R3).
  R2. Rounds start at ``Started``, every ``rebalance_interval`` (20 s), at once on NOTIFY_CONSUMER_IDS_CHANGED,
      a route change or a subscription change, and never less than ``rebalance_min_interval`` (1 s) apart; only
      one round is in flight at a time, and a request during it starts the next one after it.
  R3. A round whose result is not fully applied is *unbalanced* and another round follows after
      ``unbalanced_retry_interval`` (1 s): a failed or missing consumer list, an ``AllocationError`` (that
      topic keeps its previous queues, as in Java), a refused lock, a failed offset look-up, a queue still being
      released that we want back, a queue dropped because its lock lapsed.
  R4. An unchanged assignment is a no-op. A changed one emits ``QueuesChanged(topic, mq_all, mq_divided)`` (the
      user's MessageQueueListener) and a ``SendHeartbeat`` at once.
  R5. Queues of topics no longer subscribed are released.
  R6. A strategy that spans topics (CROSS_TOPIC: each consumer's total over the topics balanced) is asked once
      per round, when every topic's list has come, with the queues of every routed topic and the union of the
      lists; its share is then applied topic by topic. A missing or failed list, or an ``AllocationError``,
      leaves every topic as it was (R3), since one topic's queue count moves the others' shares. L6 applies to
      all topics at once: our ID listed twice in any topic's list.

Process-queue table
  T1. A queue no longer assigned is released; so is an active queue of a push consumer not pulled for
      ``pull_expiry`` (120 s), checked at each round (it is added again by a later round).
  T2. A new queue gets its start offset from the offset store (``ReadOffset``). With no stored offset,
      consume-from-where decides: LAST -> 0 for a retry topic, else the broker's max offset; FIRST -> 0;
      TIMESTAMP -> the max offset for a retry topic (as Java), else a search at ``consume_timestamp_ms``.
      A failed look-up skips the queue until the next round: it never starts from a guessed offset.
  T3. A queue is released only after its offset is persisted (acknowledged by the store, with no older write for
      it still on the way), and then ``DropQueue`` is emitted and, if locked, ``UnlockQueues``.

Locks and the fence
  L1. Queues are locked on the broker when consuming orderly, or when ``fenced_handover`` is on (default), in
      CLUSTERING only. A queue is locked before its offset is read and it only starts while the lock is held;
      a refused lock is retried every ``lock_retry_interval`` (500 ms).
  L2. A lock is valid on the client for ``client_lock_lifetime`` (30 s) after each grant, shorter than the
      broker's 60 s; held locks are renewed every ``lock_all_interval`` (20 s). A queue whose lock lapses or is
      refused on renewal is dropped at once *without* persisting (someone else may own it now) and acquired
      again by a later round, which re-reads its offset.
  L3. Release with locks (the fence): stop handing out messages (``StopQueue``), wait up to
      ``handover_drain_timeout`` for those already handed out (orderly: without limit, as Java's consume lock),
      persist the smallest offset still in flight, then unlock. Without locks (fence off, Java): stop and
      persist at once; what was in flight is re-delivered.
  L4. A queue is not locked again while an unlock of it may still be on the way (until ``QueuesUnlocked``).
  L5. Offsets are persisted only while the lock is valid, so a consumer that lost its lock cannot rewind the
      offset of the consumer that took the queue over.
  L6. A broker locks a queue for a client ID, so two consumers sharing our ID would both "hold" every lock and
      consume the same queues. When a topic's member list shows our ID more than once, ``ClientIdShared`` says
      so (and again when the count changes, 1 meaning resolved); with locks, the topic is allocated nothing
      until the list shows our ID once: its queues are released as in L3, and the next round after the other
      consumer leaves (NOTIFY or the periodic round) takes them again. Without locks the share is Java's.
      The count holds only once the broker lists us: with locks, a topic's member list is read only from a broker
      that answered a heartbeat of ours sent after our last connection loss there and while our own connection
      there was listed (``BrokerRegistered``: the runtime reports no other), since before that the one entry of
      our ID is the other consumer's, whose queues would be ours too and whose locks the broker would grant us. A
      broker lists an ID once per connection, so the answer to a heartbeat sent before our connection was listed
      (the start's, sent before any notification stream opens; on the gRPC wire, one sent before the stream's
      greeting) proves nothing: such a list showed a joining clone its ID once, and it took every queue. A round
      in which no list can be read yet is not a round (as R1): the registration starts it; one in which some can
      is, and the others count as not read (R3).
  L7. A queue allocated to us whose lock the broker refuses is listed by ``lock_waits()`` with the time of the
      first refusal, until it is granted or the queue is no longer ours, so the runtime can say which queues wait
      and for how long (a holder that was killed keeps its lock until the broker's lock lifetime lapses).
  L8. A release is bounded even when its offset cannot be saved: a queue in ``PERSISTING`` whose write failed
      (or went unanswered) is listed by ``stuck_releases()`` with the first failure's time and the count, and
      after ``handover_persist_attempts`` failures it is dropped and unlocked all the same, with
      ``HandoverWithoutOffset``: the next owner re-delivers from the last saved offset (at-least-once), which is
      better than a queue nobody consumes while its holder runs. Writes that fail while a queue is active do not
      count: the periodic write repairs those (O1).
  L9. A holder that is gone gives way, and only one that is gone (``recover_dead_holders``). A broker drops a
      member from its list when the member's connection closes (a killed process) or idles out (120 s), but
      keeps its locks for its lock lifetime (60 s). So: (a) *new owner*: a queue of broker b allocated to us
      whose lock b refuses, while some client ID we saw listed has been missing from every member list since for
      ``dead_holder_grace``, emits ``ReleaseDeadHolders(b, those IDs, b's refused queues, deadline)``, the
      deadline ``dead_holder_window`` (W, 1 s) from now; the runtime fetches b's own list and unlocks the queues
      on behalf of each ID b does not list, back to back, sending nothing after the deadline. An unlock answered
      by the deadline is *released*; one sent and not answered by then (failed, timed out, answered late) is *in
      doubt*. The check's queues are not locked while it is on the way; after ``DeadHoldersChecked`` with
      releases and none in doubt they are locked again at once. At most one check per broker is on the way, and
      the next waits four lock retries, but after one that released, a refused queue it did not name (a later
      batch) is checked at once. An ID b still lists (alive, or frozen: its connection stays open) is never
      unlocked, so its queues stay fenced. (b) *holder*: on ``BrokerConnectionLost(b)`` every queue of b is
      dropped without persisting (it may be released by someone else from now on; L5) and nothing is locked at b
      until ``rejoin_delay`` after a heartbeat to b sent after that loss succeeded (``BrokerRegistered`` of the
      same epoch); lock answers to requests sent before the loss (an older epoch) are ignored. (c) *timing*: a
      client cannot bound when b carries out a request (b runs them on thread pools), only how long it waits for
      the answer, and an answer proves the request was carried out before it. A released unlock was carried out
      before t0 + W (t0: the check's emission, before b read its list); a member b did not list then registers
      there again after that, and locks only ``rejoin_delay`` after that registration's answer: after every
      released unlock, since W < ``rejoin_delay`` (the config requires it; a second lock by the holder later
      would only lengthen its delay). An unlock in doubt may be carried out at any time, also after its holder
      came back and locked again, freeing that fresh lock: once a check is known in doubt (answered so, or
      unanswered ``request_timeout`` after its deadline, or b's connection lost meanwhile) we neither lock its
      queues nor keep a grant of them for ``broker_lock_lifetime``, as long as the holder's own lock would have
      kept them without L9. Together: when b releases a member's locks, that member had stopped handing out b's
      messages when b dropped it (at least ``dead_holder_grace`` earlier), and re-locks only after every released
      unlock, so no two consumers hand out one queue's messages at once; offsets stay monotonic (O1-O3, L5).
      What remains needs the broker (UNLOCK_BATCH_MQ names a client ID, not one grant of a lock): an unlock in
      doubt carried out after its holder locked again lets a consumer whose allocation still misses the holder's
      return (another one, or we after the lifetime) lock the queue beside it until the holder's next renewal is
      refused (L2); the runtime reports every unlock in doubt at ERROR. A holder we never saw listed (it died
      before we joined) is not known, and its locks lapse on their own.
  L10. Revoke before release (``confirm_revoke``: the consumer has a rebalance listener). A started queue being
      released goes from its drain (L3: nothing of it handed out any more, or the drain's bound passed) to
      ``REVOKING``: ``RevokeQueues`` (one action for the queues of one ``handle`` call) asks the runtime to call
      ``on_queues_revoked``; on ``QueuesRevoked``, or after ``revoke_timeout``, the release goes on (the final
      offset frozen then, so what the listener committed counts; then T3's persist, drop and unlock). Messages
      consumed while revoking still move the commit offset; nothing is handed out. A queue dropped without its
      offset (L2, L9, also while revoking) is ``DropQueue(lost=True)``: every ``StartQueue`` is followed by
      exactly one ``RevokeQueues`` naming the queue or one lost drop, before its ``DropQueue``.

  L11. A broker set whose master is down (the route names only its slaves: ``RouteUpdated.masterless``) grants no
      lock, and its slave serves reads. An orderly queue of it is not handed out (its lock lapses and is not
      renewed or granted: L2, as Java's orderly consumer stops). A queue locked only for the fence (concurrent,
      ``fenced_handover``) goes on unlocked, as Java's concurrent consumer reads from the slave: one started
      keeps its messages flowing and its offsets written (they go to the slave), one waiting for a lock has its
      offset read at once (``master down``), and a connection loss there drops nothing; the fence is off for the
      set until its master is back. When the master is back, each such started queue is locked at once: granted,
      it goes on fenced; refused (another member locked it first), it is lost as in L2.

Offsets
  O1. Commit offset = smallest offset in flight (pulled and not yet consumed), else the next offset to pull;
      it only moves forward. A message is handed out (``MessagesDispatched``) until it is consumed
      (``MessagesConsumed``) or comes back undelivered (``MessagesReturned``: a runtime that gives a task several
      batches stops before one once the queue is released or its lock lapses); a release waits for every
      handed-out message of the queue and no other. Every ``persist_interval`` (5 s) the commit offset of every
      queue held is written in one batch, changed or not, as Java's ``persistAll`` does: a write the broker
      acknowledged but that was lost or overtaken on its way (a timed-out write is answered later), or a stale
      holder's rewind, is repaired at the next interval instead of standing until the queue moves again.
  O2. OFFSET_ILLEGAL freezes the offset at the broker's suggested next offset (the one place the broker may move
      it backwards, as in Java), persists it, releases the queue and asks for an immediate round.
  O3. At most one offset write per queue is on the way at a time (the next waits for its answer), so writes of
      one queue cannot overtake each other on the network and rewind the stored offset.
  O4. A pull consumer moves the application's way: ``QueueSeeked(mq, offset)`` forgets an active queue's messages
      in flight and pulls from ``offset`` next; the commit offset still never moves back (O1), so a seek backwards
      re-delivers what lies between without rewinding the stored offset, and a seek forward moves the commit
      offset up to it. ``PersistRequested`` (``commit()``) writes every held queue's commit offset at once, as the
      periodic write does (L5 and O3 apply).

  O5. An operator's reset (``OffsetsReset``: a broker with ``useServerSideResetOffset=false`` sends it to every
      member; with the broker's default, ``true``, the next pull answers OFFSET_ILLEGAL at the reset offset and
      O2 applies) is the one backward move of an offset that no write of ours may undo. Each named queue we hold
      takes the reset offset as the offset its release freezes at: an active queue is released for it (L3's drain,
      then the reset offset persisted, then taken again by the next round, which reads it back); one already
      releasing freezes at it instead (a frozen one writes it after the write on the way, O3); one being acquired
      (fenced: once its lock is ours) starts at it and writes it at once. ``OffsetResetApplied`` says from where
      to where. Every write of the queue after the reset's carries the reset offset or one after it: the old
      position is never written again, the handover's and the shutdown's final writes included. A queue we do not
      hold is its holder's to reset (Java ignores those too), and so is a fenced one whose lock we are still
      asking for: its holder applies the reset and may consume on from it before it lets go, so applying it again
      when our lock comes would move the offset back and deliver again what it consumed.

  O6. A write of a fenced queue goes out only on the connection the core knows: ``PersistOffsets`` names, for
      each broker with such queues in it, the connection losses heard of (L9's epoch), and the runtime sends no
      part of it on a newer connection (answered ``OffsetsPersistFailed``). A write decided from an answer that
      came just before the connection closed (O3's next write, a reset's, O5) would otherwise go out on the next
      connection before the core hears of the loss, and could land after a new owner's writes, rewinding them.

Time
  M1. Every timer is a deadline compared with ``now``; after each event the core emits ``WakeAt(t)`` when its
      earliest deadline changed (and after every ``Tick``), and expects a ``Tick`` then; an early Tick is
      harmless. A request unanswered after ``request_timeout`` counts as failed.
  M2. ``ShutdownRequested`` stops rounds and releases every queue as in T3/L3; ``ShutdownComplete`` follows once
      every unlock sent has been answered (``QueuesUnlocked``) or timed out, so the runtime closes no connection
      under an unlock on its way (the next owner would wait for the lock to lapse).

History
  H1. ``history`` keeps the last rounds (``core.history``): each round's trigger (the earliest request names it:
      start, notify, timer, route change, subscription change, retry with the reason R3 gave), the member lists
      read, the queues gained and lost, every reason the table was kept from the allocation (R3, L2, L7, L9),
      and when its lists came, its queues were started and dropped, and its table was applied. Its totals count
      since the start: rounds by trigger, failed rounds by the kind of failure, queues assigned, revoked (released
      with their offsets) and lost (dropped without: L2, L9), refused locks, applied rounds' latencies (from the
      request, or the time a round was due, to the applied table), and the latest round that changed something.

Queue life
  A queue of the process-queue table lives by ``QUEUE_TRANSITIONS`` (below the imports), in the manner of h11's
  transition tables: for each ``QueueState`` (None: no entry, before it is allocated and after it is dropped),
  the causes that move it, named in these rules' words ("lock granted", "drained", "lock lapsed", ...), the
  state each leads to, and the rule each comes from. The code changes a state, and adds or removes an entry,
  only by such a move (``_move``, which raises ``QueueMoveError`` on one the table lacks); the tests in
  ``tests/core/test_transitions.py`` hold the code to the table, and random runs to making every move in it.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from rocket_rebalance.core.actions import (
    Action,
    ClientIdShared,
    DropQueue,
    FetchConsumerList,
    FetchRoutes,
    HandoverWithoutOffset,
    LockQueues,
    OffsetResetApplied,
    PersistOffsets,
    QueryMaxOffset,
    QueuesChanged,
    ReadOffset,
    ReleaseDeadHolders,
    RevokeQueues,
    SearchOffset,
    SendHeartbeat,
    ShutdownComplete,
    StartQueue,
    StopQueue,
    UnlockQueues,
    WakeAt,
)
from rocket_rebalance.core.config import RebalanceConfig
from rocket_rebalance.core.events import (
    BrokerConnectionLost,
    BrokerRegistered,
    ConsumerIdsChanged,
    ConsumerListFetched,
    DeadHoldersChecked,
    Event,
    LockResult,
    MessagesConsumed,
    MessagesDispatched,
    MessagesPulled,
    MessagesReturned,
    OffsetIllegal,
    OffsetLookupFailed,
    OffsetQueried,
    OffsetRead,
    OffsetsPersisted,
    OffsetsPersistFailed,
    OffsetsReset,
    PersistRequested,
    QueueSeeked,
    QueuesRevoked,
    QueuesUnlocked,
    RouteUpdated,
    ShutdownRequested,
    Started,
    SubscriptionChanged,
    Tick,
)
from rocket_rebalance.core.history import Failure, RoundHistory, Trigger
from rocket_rebalance.core.process_queue import ProcessQueue
from rocket_rebalance.model import (
    RETRY_GROUP_TOPIC_PREFIX,
    ConsumeFromWhere,
    MessageModel,
    MessageQueue,
    prepare_rebalance_input,
    retry_topic,
    sort_queues,
)
from rocket_rebalance.strategies import AllocationError, spans_topics

__all__ = ["QUEUE_TRANSITIONS", "QueueCause", "QueueMoveError", "QueueState", "RebalanceCore"]

_NEVER = math.inf
_DEAD_CHECK_BACKOFF = 4  # L9: lock retries between two checks of one broker that released nothing


class QueueState(enum.Enum):
    """Where one queue of the process-queue table is in its life."""

    LOCKING = "locking"  # LockQueues sent, answer awaited
    LOCK_WAIT = "lock_wait"  # lock refused (or unlock still on the way); retried at the entry's deadline
    READING = "reading"  # ReadOffset sent
    QUERYING = "querying"  # QueryMaxOffset / SearchOffset sent
    LOOKUP_WAIT = "lookup_wait"  # offset look-up failed (the next round tries again), or not begun yet (a new queue)
    ACTIVE = "active"  # StartQueue emitted: pulling and consuming
    DRAINING = "draining"  # StopQueue emitted; waiting for messages handed out to finish
    REVOKING = "revoking"  # L10: RevokeQueues emitted; waiting for the application's on_queues_revoked
    PERSISTING = "persisting"  # offset frozen; waiting for the store to acknowledge it


QueueCause = Literal[
    "allocated",
    "look-up begun",
    "lock sent",
    "lock deferred",
    "lock granted",
    "lock refused",
    "offset read",
    "no stored offset",
    "offset queried",
    "look-up failed",
    "released",
    "offset illegal",
    "offset reset",
    "drained",
    "revoke asked",
    "revoked",
    "revoke timed out",
    "offset persisted",
    "handed over without offset",
    "lock lapsed",
    "connection lost",
    "master down",
]
"""What moves a queue: an answer or event, or the core's decision, in the rules' words (see ``QUEUE_TRANSITIONS``)."""

_LOST: Mapping[QueueCause, None] = {
    "lock refused": None,  # L2: refused on renewal: DropQueue(lost=True), without persisting; a later round re-reads
    "lock lapsed": None,  # L2: the client lock lapsed (L5: also found when the release's offset is to be frozen)
    "connection lost": None,  # L9 (b): lost at once; nothing is locked at its broker until the rejoin delay passed
}
_CANCELLED: Mapping[QueueCause, None] = {
    "released": None,  # T1: no longer allocated (or R5, L6, M2): the acquisition is dropped, unlocked if locked
    "connection lost": None,  # L9 (b): a later round acquires it again, behind the broker's rejoin gate
}

QUEUE_TRANSITIONS: Mapping[QueueState | None, Mapping[QueueCause, QueueState | None]] = {
    None: {  # no entry
        "allocated": QueueState.LOOKUP_WAIT,  # T2: a new queue; its look-up begins in the same event (as below)
    },
    QueueState.LOOKUP_WAIT: {
        "look-up begun": QueueState.READING,  # T2: ReadOffset, with no locks or a lock still valid (L1)
        "lock sent": QueueState.LOCKING,  # L1: locked before its offset is read
        "lock deferred": QueueState.LOCK_WAIT,  # L4: an unlock of it is on the way; L9: its broker's rejoin gate
        "look-up failed": QueueState.LOOKUP_WAIT,  # T2: a late failure of the look-up that failed already (M1)
        **_CANCELLED,
    },
    QueueState.LOCKING: {
        "lock granted": QueueState.READING,  # L1: then ReadOffset
        "lock refused": QueueState.LOCK_WAIT,  # L1, L7: retried after lock_retry_interval (no answer in time: M1)
        "look-up failed": QueueState.LOOKUP_WAIT,  # T2: a late failure of a look-up sent before its lock lapsed
        "master down": QueueState.READING,  # L11: the set lost its master: read the offset without a lock
        **_CANCELLED,
    },
    QueueState.LOCK_WAIT: {
        "lock sent": QueueState.LOCKING,  # L1: the retry; L4: QueuesUnlocked; L9: DeadHoldersChecked released
        "lock deferred": QueueState.LOCK_WAIT,  # L4, L9: the gate is still closed
        "lock granted": QueueState.READING,  # L1: a grant answering an earlier request
        "lock refused": QueueState.LOCK_WAIT,  # L1: a refusal answering an earlier request
        "look-up failed": QueueState.LOOKUP_WAIT,  # T2: a late failure of a look-up sent before its lock lapsed
        "master down": QueueState.READING,  # L11, as from LOCKING
        **_CANCELLED,
    },
    QueueState.READING: {
        "offset read": QueueState.ACTIVE,  # T2: StartQueue at the stored offset (FIRST, or LAST of a retry topic: 0)
        "no stored offset": QueueState.QUERYING,  # T2: LAST asks the max offset, TIMESTAMP searches by time
        "look-up failed": QueueState.LOOKUP_WAIT,  # T2: skipped until the next round (no answer in time: M1)
        "lock sent": QueueState.LOCKING,  # L1: the lock lapsed while the offset was read: locked and read again
        "lock deferred": QueueState.LOCK_WAIT,  # L1 with L4, L9
        **_CANCELLED,  # T1 also when the offset comes after the queue was taken away, or during shutdown
    },
    QueueState.QUERYING: {
        "offset queried": QueueState.ACTIVE,  # T2: StartQueue at the broker's offset
        "look-up failed": QueueState.LOOKUP_WAIT,  # T2: never started from a guess (no answer in time: M1)
        "lock sent": QueueState.LOCKING,  # L1, as from READING
        "lock deferred": QueueState.LOCK_WAIT,  # L1 with L4, L9
        **_CANCELLED,
    },
    QueueState.ACTIVE: {
        "released": QueueState.DRAINING,  # T1, L3: StopQueue (no longer allocated, not pulled, R5, L6, M2)
        "offset illegal": QueueState.DRAINING,  # O2: StopQueue; the release freezes at the broker's next offset
        "offset reset": QueueState.DRAINING,  # O5: StopQueue; released (L3) to freeze at the operator's offset
        **_LOST,
    },
    QueueState.DRAINING: {
        "drained": QueueState.PERSISTING,  # L3, T3: nothing handed out any more, or the bound passed (O2: at once)
        "revoke asked": QueueState.REVOKING,  # L10: drained as above, and RevokeQueues before the persist
        **_LOST,
    },
    QueueState.REVOKING: {
        "revoked": QueueState.PERSISTING,  # L10: QueuesRevoked; the offset frozen now, then T3
        "revoke timed out": QueueState.PERSISTING,  # L10: revoke_timeout passed
        **_LOST,
    },
    QueueState.PERSISTING: {
        "offset persisted": None,  # T3: acknowledged: DropQueue, then UnlockQueues if locked
        "handed over without offset": None,  # L8: handover_persist_attempts writes failed: dropped and unlocked
        "lock lapsed": None,  # L5: no further write without the lock: dropped as lost
        "connection lost": None,  # L9 (b)
    },
}
"""The queue's life, state -> {cause: next state} (None: no entry); the only moves :meth:`RebalanceCore._move`
makes (rules' "Queue life")."""


class QueueMoveError(AssertionError):
    """A move the queue's transition table lacks: a bug of the core, whatever the runtime sent."""


_ACQUIRING = frozenset(
    {QueueState.LOCKING, QueueState.LOCK_WAIT, QueueState.READING, QueueState.QUERYING, QueueState.LOOKUP_WAIT}
)
_RELEASING = frozenset({QueueState.DRAINING, QueueState.REVOKING, QueueState.PERSISTING})
_STARTED = frozenset({QueueState.ACTIVE, QueueState.DRAINING, QueueState.REVOKING})  # started, offset not frozen
_MESSAGE_EVENTS: frozenset[type[Event]] = frozenset(
    {MessagesPulled, MessagesDispatched, MessagesConsumed, MessagesReturned}
)


@dataclass(eq=False)
class _Entry:
    """One row of the process-queue table, with whatever request or deadline it is waiting on."""

    mq: MessageQueue
    state: QueueState = field(init=False)  # set by RebalanceCore._move only, from QUEUE_TRANSITIONS
    deadline: float = _NEVER
    holds_lock: bool = False
    locked_until: float = -_NEVER
    request_id: int = 0
    pq: ProcessQueue | None = None
    acked: int | None = None  # the offset the store is known to hold for this queue
    frozen_offset: int | None = None
    persist_in_flight: bool = False  # O3: at most one offset write per queue on the way
    persist_again: bool = False
    in_flight_offset: int | None = None
    last_persist_sent: float = -_NEVER
    refused_since: float | None = None  # L7: when the broker first refused the lock we are still waiting for
    release_failures: int = 0  # L8: failed writes of the release's frozen offset
    reset_to: int | None = None  # O5: an operator's reset offset, which the release freezes at (or the start takes)
    release_stuck_since: float | None = None  # L8: when the first of them failed
    release_offset: int | None = None  # O2: the offset the release freezes at, once revoked (L10)


@dataclass(frozen=True)
class _DeadCheck:
    """A ``ReleaseDeadHolders`` on its way (L9): its queues are not locked until it is answered, or known in doubt
    at ``answer_by``."""

    request_id: int
    queues: frozenset[MessageQueue]
    answer_by: float


class RebalanceCore:
    """One consumer's rebalance engine (see the module rules). Not thread-safe: the runtime serialises calls.

    Drive it like this: ``actions = core.handle(Started(), now)``; carry out each action; answer requests with
    their events via ``handle(event, now)``; when a ``WakeAt(t)`` comes, send ``Tick()`` at ``t``. Before handing
    a message to the user's listener, check :meth:`is_dispatchable` and report ``MessagesDispatched`` under the
    same lock, so a queue being handed over never gives out another message.
    """

    def __init__(self, config: RebalanceConfig, topics: Iterable[str] = ()) -> None:
        self.config = config
        self._user_topics: frozenset[str] = frozenset(topics)
        self._routes: dict[str, frozenset[MessageQueue]] = {}
        self._member_brokers: dict[str, str | None] = {}  # topic -> the broker asked for its member list (R1)
        self._masterless: dict[str, frozenset[str]] = {}  # topic -> its route's sets whose master is down (L11)
        self._allocated: dict[str, frozenset[MessageQueue]] = {}
        self._shared_id: dict[str, int] = {}  # topic -> how many consumers use our client ID there (L6), when > 1
        self._entries: dict[MessageQueue, _Entry] = {}
        self._unlocking: dict[MessageQueue, float] = {}  # mq -> deadline of the outstanding unlock
        # L9: client IDs seen in member lists -> since when missing from every list (None: listed in the last one)
        self._members_seen: dict[str, float | None] = {}
        self._epochs: dict[str, int] = {}  # broker -> connection losses seen (L9)
        self._rejoin_at: dict[str, float] = {}  # broker -> when locking there may resume after a loss (L9)
        self._registered: set[str] = set()  # brokers that listed us since our last connection loss there (L6)
        # L6: the brokers a round waits for (their lists were not read), and the trigger of the round it put off
        self._awaiting: set[str] = set()
        self._put_off: tuple[str, str, str] | None = None
        # L9: broker -> until when no check follows there, and the queues of the last one if it released (then a
        # refused queue it did not name may be checked before)
        self._dead_checks: dict[str, tuple[float, frozenset[MessageQueue]]] = {}
        self._dead_checks_open: dict[str, _DeadCheck] = {}  # broker -> its ReleaseDeadHolders on the way (L9)
        self._releases_in_doubt: dict[MessageQueue, float] = {}  # mq -> until when it is not locked (L9 (c))
        self._started = False
        self._started_at = -_NEVER
        self._shutting_down = False
        self._shutdown_done = False
        self._round_pending: set[str] = set()
        self._round_lists: dict[str, tuple[str, ...]] = {}  # R6: this round's lists, kept until all have come
        self._round_failed = False  # R6: a list of this round failed
        self._round_deadline = _NEVER
        self._round_requested_at = _NEVER
        self._last_round_at = -_NEVER
        self._rounds = 0
        # why the round requested next runs, and a retry's reason and its Failure kind
        self._round_trigger = (Trigger.TIMER, "", "")
        self.history = RoundHistory()  # the last rounds, for describe() (rocket_rebalance.core.history)
        self._next_route_at = _NEVER
        self._next_heartbeat_at = _NEVER
        self._last_heartbeat_at = -_NEVER
        self._next_persist_at = _NEVER
        self._next_lock_all_at = _NEVER
        self._next_request_id = 0
        self._announced_wakeup: float | None = None
        # Per-call output buffers, flushed in a fixed order at the end of handle().
        self._out: list[Action] = []
        self._out_persist: dict[MessageQueue, int] = {}
        self._out_lock: dict[str, set[MessageQueue]] = {}
        self._out_unlock: dict[str, set[MessageQueue]] = {}
        self._out_revoke: set[MessageQueue] = set()
        self._out_heartbeat = False
        self._handlers: dict[type[Event], Callable[[Any, float], None]] = {
            Started: self._on_started,
            Tick: self._on_tick,
            SubscriptionChanged: self._on_subscription_changed,
            RouteUpdated: self._on_route_updated,
            ConsumerListFetched: self._on_consumer_list,
            ConsumerIdsChanged: self._on_notification,
            LockResult: self._on_lock_result,
            BrokerConnectionLost: self._on_connection_lost,
            BrokerRegistered: self._on_registered,
            DeadHoldersChecked: self._on_dead_holders_checked,
            QueuesUnlocked: self._on_unlocked,
            QueuesRevoked: self._on_revoked,
            OffsetRead: self._on_offset_read,
            OffsetQueried: self._on_offset_queried,
            OffsetLookupFailed: self._on_lookup_failed,
            OffsetsPersisted: self._on_persisted,
            OffsetsPersistFailed: self._on_persist_failed,
            MessagesPulled: self._on_pulled,
            MessagesDispatched: self._on_dispatched,
            MessagesConsumed: self._on_handed_back,
            MessagesReturned: self._on_handed_back,
            OffsetIllegal: self._on_offset_illegal,
            OffsetsReset: self._on_offsets_reset,
            QueueSeeked: self._on_seeked,
            PersistRequested: self._on_persist_requested,
            ShutdownRequested: self._on_shutdown,
        }

    # ------------------------------------------------------------------ public API

    def handle(self, event: Event, now: float) -> list[Action]:
        """Apply one event at time ``now`` and return the actions to carry out, in order."""
        handler = self._handlers.get(type(event))
        if handler is None:
            raise TypeError(f"not a rebalance event: {event!r}")
        handler(event, now)
        if type(event) in _MESSAGE_EVENTS and not (
            self._out or self._out_persist or self._out_unlock or self._out_revoke
        ):
            return []  # the hot path: bookkeeping only, no timer moved (transitions always emit something)
        self._maybe_start_round(now)
        self._check_shutdown_complete()
        return self._flush(now, announce=isinstance(event, Tick))

    @property
    def topics(self) -> tuple[str, ...]:
        """Every topic balanced: the user's, plus ``%RETRY%<group>`` in clustering; sorted."""
        topics = set(self._user_topics)
        if self.config.message_model is MessageModel.CLUSTERING:
            topics.add(retry_topic(self.config.consumer_group))
        return tuple(sorted(topics))

    @property
    def next_wakeup(self) -> float | None:
        """When the core next wants a ``Tick`` (``None``: nothing scheduled)."""
        wake = self._compute_wakeup()
        return None if wake == _NEVER else wake

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    @property
    def rounds(self) -> int:
        """How many rounds have started (for tests and metrics)."""
        return self._rounds

    def allocated(self, topic: str) -> frozenset[MessageQueue]:
        """The topic's queues as last allocated to us (what the listener was last told)."""
        return self._allocated.get(topic, frozenset())

    def state_of(self, mq: MessageQueue) -> QueueState | None:
        entry = self._entries.get(mq)
        return None if entry is None else entry.state

    def process_queue(self, mq: MessageQueue) -> ProcessQueue | None:
        entry = self._entries.get(mq)
        return None if entry is None else entry.pq

    def active_queues(self) -> frozenset[MessageQueue]:
        """Queues started and not being released."""
        return frozenset(mq for mq, e in self._entries.items() if e.state is QueueState.ACTIVE)

    def held_queues(self) -> frozenset[MessageQueue]:
        """Every queue in the process-queue table, in any state."""
        return frozenset(self._entries)

    def lock_waits(self) -> dict[MessageQueue, float]:
        """L7: each queue allocated to us whose lock the broker refuses, with when it first refused it."""
        return {
            mq: entry.refused_since
            for mq, entry in self._entries.items()
            if entry.refused_since is not None and entry.state is QueueState.LOCK_WAIT
        }

    def stored_offset(self, mq: MessageQueue) -> int | None:
        """The offset the store is known to hold for ``mq`` (read at its start, or acknowledged since); None when
        not held or not known."""
        entry = self._entries.get(mq)
        return None if entry is None else entry.acked

    def stuck_releases(self) -> dict[MessageQueue, tuple[float, int]]:
        """L8: each queue being released whose offset write failed: when it first failed, and how often."""
        return {
            mq: (entry.release_stuck_since, entry.release_failures)
            for mq, entry in self._entries.items()
            if entry.release_stuck_since is not None
        }

    def holds_lock(self, mq: MessageQueue, now: float) -> bool:
        """Is ``mq`` locked by us on its broker, as far as the client knows (L2)?"""
        entry = self._entries.get(mq)
        return entry is not None and entry.holds_lock and now < entry.locked_until

    def lock_deadline(self, mq: MessageQueue) -> float:
        """Until when messages of ``mq`` may be handed out as far as its lock goes: when the client-side lock
        lapses (L2), or infinity when this consumer takes no locks. A runtime that hands out several batches at
        once starts none of them after it."""
        if not self._needs_lock(mq):
            return math.inf
        entry = self._entries.get(mq)
        return entry.locked_until if entry is not None and entry.holds_lock else -math.inf

    def last_lock_grant(self, mq: MessageQueue) -> float | None:
        """When the broker last granted our lock of ``mq`` (None: never, or the queue is not held); running info
        reports it as Java's ``lastLockTimestamp``."""
        entry = self._entries.get(mq)
        if entry is None or entry.locked_until == -_NEVER:
            return None
        return entry.locked_until - self.config.client_lock_lifetime

    def is_dispatchable(self, mq: MessageQueue, now: float) -> bool:
        """May a message of ``mq`` be handed to the listener now? Active, and with locks, a valid lock (L2)."""
        entry = self._entries.get(mq)
        if entry is None or entry.state is not QueueState.ACTIVE:
            return False
        return not self._needs_lock(mq) or (entry.holds_lock and now < entry.locked_until)

    # ------------------------------------------------------------------ output helpers

    def _emit(self, action: Action) -> None:
        self._out.append(action)

    def _flush(self, now: float, announce: bool = False) -> list[Action]:
        """Emit the batched actions in a fixed order, then ``WakeAt`` if the earliest deadline moved (or after
        every ``Tick``, so a runtime that keeps only the latest ``WakeAt`` is never left without one)."""
        out = self._out
        if self._out_revoke:
            out.append(RevokeQueues(tuple(sort_queues(self._out_revoke))))
        if self._out_persist:
            offsets = dict(sorted(self._out_persist.items(), key=lambda kv: kv[0].sort_key))
            fenced = {mq.broker_name for mq in offsets if self._needs_lock(mq)}  # O6
            out.append(PersistOffsets(offsets, {broker: self._epochs.get(broker, 0) for broker in sorted(fenced)}))
        for broker in sorted(self._out_lock):
            out.append(LockQueues(broker, tuple(sort_queues(self._out_lock[broker])), self._epochs.get(broker, 0)))
        for broker in sorted(self._out_unlock):
            out.append(UnlockQueues(broker, tuple(sort_queues(self._out_unlock[broker]))))
        if self._out_heartbeat and not self._shutting_down:
            out.append(SendHeartbeat(self.topics))
            self._last_heartbeat_at = now
            self._next_heartbeat_at = now + self.config.heartbeat_interval
        wake = self._compute_wakeup()
        announced = None if wake == _NEVER else wake
        if announced is not None and (announce or announced != self._announced_wakeup):
            out.append(WakeAt(announced))
        self._announced_wakeup = announced
        self._out = []
        self._out_persist = {}
        self._out_lock = {}
        self._out_unlock = {}
        self._out_revoke = set()
        self._out_heartbeat = False
        return out

    def _compute_wakeup(self) -> float:
        times = [self._next_persist_at, self._next_lock_all_at]
        if not self._shutting_down:
            times += [self._next_route_at, self._next_heartbeat_at]
            if self._round_pending:
                times.append(self._round_deadline)
            elif self._started and self._round_requested_at != _NEVER:
                times.append(max(self._round_requested_at, self._last_round_at + self.config.rebalance_min_interval))
        times.extend(self._unlocking.values())
        times.extend(check.answer_by for check in self._dead_checks_open.values())
        for entry in self._entries.values():
            times.append(entry.deadline)
            if entry.holds_lock:
                times.append(entry.locked_until)
            if entry.persist_in_flight:
                times.append(entry.last_persist_sent + self.config.request_timeout)
        return min(times, default=_NEVER)

    def _move(self, entry: _Entry, cause: QueueCause) -> None:
        """Move ``entry`` by ``cause`` as ``QUEUE_TRANSITIONS`` says: the one place a queue's state changes and its
        entry enters or leaves the process-queue table, so the table is the whole of the queue's life."""
        current = entry.state if self._entries.get(entry.mq) is entry else None
        moves = QUEUE_TRANSITIONS.get(current, {})
        if cause not in moves or (current is None and entry.mq in self._entries):
            raise QueueMoveError(f"{entry.mq}: no move from {current} by {cause!r}")
        target = moves[cause]
        if target is None:
            del self._entries[entry.mq]
            return
        if current is None:
            self._entries[entry.mq] = entry
        entry.state = target

    def _new_request_id(self) -> int:
        self._next_request_id += 1
        return self._next_request_id

    # ------------------------------------------------------------------ rounds (R1-R5)

    def _request_round(self, at: float, trigger: str, reason: str = "", kind: str = "") -> None:
        """Ask for a round at ``at``; the earliest request names the round's trigger (a retry's reason and kind).
        A round put off for a registration (L6) keeps the name of the request it was put off from: the start's,
        usually, whose round it still is when a route comes meanwhile."""
        if not self._shutting_down and at < self._round_requested_at:
            self._round_requested_at = at
            self._round_trigger = self._put_off or (trigger, reason, kind)

    def _mark_unbalanced(self, now: float, kind: str, reason: str) -> None:
        """R3: the table is not what the allocation says; ``reason`` (of a :class:`Failure` kind) goes to the
        history and the retry round."""
        self.history.problem(reason, kind)
        self._request_round(now + self.config.unbalanced_retry_interval, Trigger.RETRY, reason, kind)

    def _maybe_start_round(self, now: float) -> None:
        if not self._started or self._shutting_down or self._round_pending:
            return
        if self._round_requested_at == _NEVER:
            return
        if now < max(self._round_requested_at, self._last_round_at + self.config.rebalance_min_interval):
            return
        requested_at, self._round_requested_at = self._round_requested_at, _NEVER
        routed = [topic for topic in self.topics if topic in self._routes]
        unregistered = {topic for topic in routed if self._awaits_registration(topic)}
        self._awaiting = {broker for topic in unregistered if (broker := self._member_brokers[topic]) is not None}
        if unregistered:
            self._heartbeat_again(now)
        if routed and len(unregistered) == len(routed) and now < self._started_at + self.config.request_timeout:
            # L6: not a round yet; the registration starts it, or a later try (after another heartbeat)
            self._put_off = self._round_trigger
            self._request_round(now + self.config.unbalanced_retry_interval, *self._put_off)
            return
        self._put_off = None
        if not routed:
            # R1: nothing to balance yet. Not counted as a round, so the first RouteUpdated balances at once.
            self._request_round(now + self.config.rebalance_interval, Trigger.TIMER)
            return
        self._last_round_at = now
        self._rounds += 1
        trigger, reason, kind = self._round_trigger
        self.history.started(self._rounds, trigger, reason, now, kind, requested_at)
        for topic in routed:
            if self.config.message_model is MessageModel.BROADCASTING:
                self._apply_allocation(topic, self._routes[topic], now)
            elif topic in unregistered:
                self._list_failed(topic, now, f": {self._member_brokers[topic]} has not listed us yet")
            else:
                self._round_pending.add(topic)
                self._emit(FetchConsumerList(topic, self._member_brokers.get(topic)))
        if self._round_pending:
            self._round_deadline = now + self.config.request_timeout
        else:
            self._finish_round(now)

    def _heartbeat_again(self, now: float) -> None:
        """L6: a round waits for a registration: heartbeat again, unless one went out within the retry interval
        (the start's, usually), so a failed heartbeat does not hold the rounds until the next periodic one."""
        if now - self._last_heartbeat_at >= self.config.unbalanced_retry_interval:
            self._out_heartbeat = True

    def _awaits_registration(self, topic: str) -> bool:
        """L6: with locks, ``topic``'s list is not read from a broker that has not listed us since our last loss."""
        broker = self._member_brokers.get(topic)
        return self.config.uses_locks and broker is not None and broker not in self._registered

    def _finish_round(self, now: float) -> None:
        self._round_pending.clear()
        self._round_lists.clear()
        self._round_failed = False
        self._round_deadline = _NEVER
        self._request_round(self._last_round_at + self.config.rebalance_interval, Trigger.TIMER)
        held = {mq for mqs in self._allocated.values() for mq in mqs}
        waiting = [mq for mq in held if self.state_of(mq) is not QueueState.ACTIVE]
        self.history.finished(waiting + [mq for mq in self._entries if mq not in held], now)

    def _on_consumer_list(self, event: ConsumerListFetched, now: float) -> None:
        if event.topic not in self._round_pending:
            return  # an answer from an abandoned round: its view may be stale
        self._round_pending.discard(event.topic)
        if event.client_ids is None:
            self._list_failed(event.topic, now)
        else:
            self.history.list_read(event.topic, event.client_ids, now)
            self._note_members(event.client_ids, now)
            if event.topic in self._routes and event.topic in self.topics:
                if spans_topics(self.config.strategy):
                    self._round_lists[event.topic] = event.client_ids
                else:
                    self._rebalance_clustering(event.topic, event.client_ids, now)
        self._maybe_finish_round(now)

    def _list_failed(self, topic: str, now: float, why: str = "") -> None:
        """R3: ``topic``'s list of this round was not read (``why``: L6, it was not asked for)."""
        self.history.list_read(topic, None, now, why)
        self._round_failed = True
        self._mark_unbalanced(now, Failure.MEMBER_LIST, f"member list of {topic} not read{why}")

    def _maybe_finish_round(self, now: float) -> None:
        if not self._round_pending:
            if self._round_lists and not self._round_failed:
                self._rebalance_across_topics(now)
            self._finish_round(now)

    def _rebalance_clustering(self, topic: str, client_ids: tuple[str, ...], now: float) -> None:
        cfg = self.config
        if self._id_shared(topic, client_ids.count(cfg.client_id)) and cfg.uses_locks:
            self._apply_allocation(topic, frozenset(), now)  # L6: the locks cannot tell us apart
            return
        try:
            # a shared ID is reported as ClientIdShared for our own; other consumers report theirs
            prepared = prepare_rebalance_input(self._routes[topic], client_ids, warn=False)
            share = cfg.strategy.allocate(cfg.consumer_group, cfg.client_id, prepared.mq_all, prepared.cid_all)
        except AllocationError as error:
            # R3: keep this topic's previous queues
            self._mark_unbalanced(now, Failure.ALLOCATION, f"allocation of {topic}: {error}")
            return
        self._apply_allocation(topic, frozenset(share or ()), now)

    def _rebalance_across_topics(self, now: float) -> None:
        """R6: one call for every routed topic, with the union of the round's member lists."""
        cfg = self.config
        lists = {topic: ids for topic, ids in self._round_lists.items() if topic in self._routes}
        shared = [self._id_shared(topic, ids.count(cfg.client_id)) for topic, ids in lists.items()]
        if any(shared) and cfg.uses_locks:
            for topic in lists:
                self._apply_allocation(topic, frozenset(), now)  # L6 for every topic: the totals span them all
            return
        members = {cid for ids in lists.values() for cid in ids}
        queues = [mq for topic in lists for mq in self._routes[topic]]
        try:
            prepared = prepare_rebalance_input(queues, members, warn=False)
            share = cfg.strategy.allocate(cfg.consumer_group, cfg.client_id, prepared.mq_all, prepared.cid_all)
        except AllocationError as error:
            # R3: every topic keeps its previous queues
            self._mark_unbalanced(now, Failure.ALLOCATION, f"allocation across topics: {error}")
            return
        for topic in lists:
            self._apply_allocation(topic, frozenset(mq for mq in share or () if mq.topic == topic), now)

    def _id_shared(self, topic: str, consumers: int) -> bool:
        """L6: is our client ID used by more than one consumer of ``topic``? Reported when the count changes."""
        consumers = max(consumers, 1)  # absent (our heartbeat not seen yet) is not shared
        if consumers != self._shared_id.get(topic, 1):
            self._emit(ClientIdShared(topic, self.config.client_id, consumers, self.config.uses_locks))
        if consumers > 1:
            self._shared_id[topic] = consumers
        else:
            self._shared_id.pop(topic, None)
        return consumers > 1

    def _apply_allocation(self, topic: str, allocated: frozenset[MessageQueue], now: float) -> None:
        """T1/T2: bring the process-queue table of ``topic`` to ``allocated``; R4: tell the listener if changed."""
        previous = self._allocated.get(topic, frozenset())
        self._allocated[topic] = allocated
        for entry in [e for e in self._entries.values() if e.mq.topic == topic]:
            if entry.mq not in allocated:
                self._release(entry, now)
            elif (
                self.config.push_consumer
                and entry.state is QueueState.ACTIVE
                and entry.pq is not None
                and now - entry.pq.last_pull > self.config.pull_expiry
            ):
                self._release(entry, now)
                expired = f"{entry.mq} not pulled for {self.config.pull_expiry:g} s"
                self._mark_unbalanced(now, Failure.NOT_PULLED, expired)
        for mq in sort_queues(allocated):
            current = self._entries.get(mq)
            if current is None:
                self._acquire(mq, now)
            elif current.state is QueueState.LOOKUP_WAIT:
                self._begin_acquisition_step(current, now)
            elif current.state in _RELEASING:
                self._mark_unbalanced(now, Failure.RELEASING, f"{mq} wanted back while still being released")
        if allocated != previous:
            self.history.allocated(allocated - previous, previous - allocated)
            mq_all = tuple(sort_queues(self._routes.get(topic, ())))
            self._emit(QueuesChanged(topic, mq_all, tuple(sort_queues(allocated))))
            self._out_heartbeat = True

    # ------------------------------------------------------------------ acquisition (T2, L1)

    def _acquire(self, mq: MessageQueue, now: float) -> None:
        entry = _Entry(mq)
        self._move(entry, "allocated")
        self._begin_acquisition_step(entry, now)

    def _lock_valid(self, entry: _Entry, now: float) -> bool:
        return entry.holds_lock and now < entry.locked_until

    def _begin_acquisition_step(self, entry: _Entry, now: float) -> None:
        """Lock first when locks are used (L1), else (or once locked) read the stored offset."""
        if self._needs_lock(entry.mq) and not self._lock_valid(entry, now):
            self._send_lock(entry, now)
        else:
            self._send_read(entry, "look-up begun", now)

    def _send_lock(self, entry: _Entry, now: float) -> None:
        if entry.mq in self._unlocking:  # L4
            self._move(entry, "lock deferred")
            entry.deadline = self._unlocking[entry.mq]
            return
        rejoin = self._rejoin_at.get(entry.mq.broker_name, -_NEVER)
        if now < rejoin:  # L9: not at a broker we lost touch with until it lists us again, and a while after
            self._move(entry, "lock deferred")
            entry.deadline = rejoin
            return
        held = self._dead_holder_hold(entry.mq, now)
        if now < held:  # L9 (c): a release of it is on the way, or in doubt
            self._move(entry, "lock deferred")
            entry.deadline = held
            return
        self._move(entry, "lock sent")
        entry.deadline = now + self.config.request_timeout
        self._out_lock.setdefault(entry.mq.broker_name, set()).add(entry.mq)

    def _send_read(self, entry: _Entry, cause: QueueCause, now: float) -> None:
        self._move(entry, cause)
        entry.request_id = self._new_request_id()
        entry.deadline = now + self.config.request_timeout
        self._emit(ReadOffset(entry.mq, entry.request_id, self.config.consume_from_where))

    def _lookup_failed(self, entry: _Entry, now: float) -> None:
        self._move(entry, "look-up failed")
        entry.deadline = _NEVER
        self._mark_unbalanced(now, Failure.OFFSET, f"offset of {entry.mq} not read")

    def _lookup_entry(self, mq: MessageQueue, request_id: int, state: QueueState) -> _Entry | None:
        entry = self._entries.get(mq)
        if entry is None or entry.state is not state or entry.request_id != request_id:
            return None  # a late answer to an abandoned look-up
        return entry

    def _on_offset_read(self, event: OffsetRead, now: float) -> None:
        entry = self._lookup_entry(event.mq, event.request_id, QueueState.READING)
        if entry is None:
            return
        if event.offset is not None and event.offset >= 0:
            entry.acked = event.offset
            self._activate(entry, "offset read", event.offset, now)
            return
        where = self.config.consume_from_where
        is_retry = event.mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        if where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
            self._activate(entry, "offset read", 0, now)
        elif where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET:
            if is_retry:
                self._activate(entry, "offset read", 0, now)
            else:
                self._send_query(entry, now, None)
        else:
            self._send_query(entry, now, None if is_retry else self.config.consume_timestamp_ms)

    def _send_query(self, entry: _Entry, now: float, timestamp_ms: int | None) -> None:
        self._move(entry, "no stored offset")
        entry.request_id = self._new_request_id()
        entry.deadline = now + self.config.request_timeout
        if timestamp_ms is None:
            self._emit(QueryMaxOffset(entry.mq, entry.request_id))
        else:
            self._emit(SearchOffset(entry.mq, entry.request_id, timestamp_ms))

    def _on_offset_queried(self, event: OffsetQueried, now: float) -> None:
        entry = self._lookup_entry(event.mq, event.request_id, QueueState.QUERYING)
        if entry is None:
            return
        if event.offset < 0:
            self._lookup_failed(entry, now)
        else:
            self._activate(entry, "offset queried", event.offset, now)

    def _on_lookup_failed(self, event: OffsetLookupFailed, now: float) -> None:
        entry = self._entries.get(event.mq)
        if entry is None or entry.request_id != event.request_id or entry.state not in _ACQUIRING:
            return
        self._lookup_failed(entry, now)

    def _activate(self, entry: _Entry, cause: QueueCause, offset: int, now: float) -> None:
        """Start the queue, but with locks only while the lock is still valid (L1); else lock and read again."""
        if self._needs_lock(entry.mq) and not self._lock_valid(entry, now):
            entry.holds_lock = False
            self._send_lock(entry, now)
            return
        if self._shutting_down or entry.mq not in self._allocated.get(entry.mq.topic, frozenset()):
            self._release(entry, now)
            return
        self._move(entry, cause)
        entry.deadline = _NEVER
        reset, entry.reset_to = entry.reset_to, None
        entry.pq = ProcessQueue(entry.mq, offset if reset is None else reset, now)
        self._emit(StartQueue(entry.mq, entry.pq.commit_offset))
        self.history.queue_started(entry.mq, now)
        if reset is not None:  # O5: reset while it was being acquired: the store has the old offset until now
            self._send_persist(entry, reset, now)

    # ------------------------------------------------------------------ locks (L1, L2, L4)

    def _on_lock_result(self, event: LockResult, now: float) -> None:
        queues = event.requested | event.granted
        broker = next(iter(queues)).broker_name if queues else ""
        if event.epoch != self._epochs.get(broker, 0):
            return  # L9: sent before the connection was lost; its entries were dropped then
        refused = False
        for mq in sort_queues(queues):
            entry = self._entries.get(mq)
            granted = mq in event.granted
            if entry is None:
                if granted:  # a late grant for a queue we no longer want: give it back
                    self._send_unlock(mq, now)
                continue
            if granted and entry.state in (QueueState.LOCKING, QueueState.LOCK_WAIT):
                if now < self._dead_holder_hold(mq, now):  # L9 (c): the grant may stand beside a holder's
                    self._send_unlock(mq, now)
                    continue
            if granted:
                entry.holds_lock = True
                entry.refused_since = None
                entry.locked_until = now + self.config.client_lock_lifetime
                if entry.state in (QueueState.LOCKING, QueueState.LOCK_WAIT):
                    self._send_read(entry, "lock granted", now)
            else:
                self._lock_refused(entry, now)
                refused = refused or entry.state is QueueState.LOCK_WAIT
        if refused:
            self._check_dead_holders(broker, now)

    def _lock_refused(self, entry: _Entry, now: float) -> None:
        self.history.lock_refused(entry.mq)
        entry.holds_lock = False
        if entry.state in (QueueState.LOCKING, QueueState.LOCK_WAIT):
            self._move(entry, "lock refused")
            entry.deadline = now + self.config.lock_retry_interval
            if entry.refused_since is None:
                entry.refused_since = now
            self._mark_unbalanced(now, Failure.LOCK_REFUSED, f"lock refused at {entry.mq.broker_name}")
        elif entry.state in _STARTED:
            self._lose(entry, "lock refused", now)
        # READING / QUERYING / LOOKUP_WAIT: _activate re-locks; PERSISTING: the write was sent while valid (L5).

    def _lose(self, entry: _Entry, cause: QueueCause, now: float) -> None:
        """L2: the lock is gone; drop the queue without persisting and let a later round take it again."""
        if entry.state is QueueState.ACTIVE:
            self._emit(StopQueue(entry.mq))
        self._emit(DropQueue(entry.mq, lost=True))
        self.history.queue_lost(entry.mq, now)
        self._move(entry, cause)
        self._mark_unbalanced(now, Failure.LOCK_LOST, f"lock of {entry.mq} lost")

    def _send_unlock(self, mq: MessageQueue, now: float) -> None:
        self._out_unlock.setdefault(mq.broker_name, set()).add(mq)
        self._unlocking[mq] = now + self.config.request_timeout

    def _on_unlocked(self, event: QueuesUnlocked, now: float) -> None:
        for mq in event.queues:
            if self._unlocking.pop(mq, None) is not None:
                entry = self._entries.get(mq)
                if entry is not None and entry.state is QueueState.LOCK_WAIT:
                    self._send_lock(entry, now)

    def _lock_all(self, now: float) -> None:
        for entry in self._entries.values():
            if entry.holds_lock and entry.state is not QueueState.LOCKING and self._needs_lock(entry.mq):
                self._out_lock.setdefault(entry.mq.broker_name, set()).add(entry.mq)

    # ------------------------------------------------------------------ holders that are gone (L9)

    def _note_members(self, client_ids: tuple[str, ...], now: float) -> None:
        """Keep when each client ID seen went missing from the member lists; forget one missing so long that the
        broker's own lock lifetime has freed its locks."""
        listed = set(client_ids)
        forget_before = now - self.config.broker_lock_lifetime - self.config.dead_holder_grace
        for cid in listed:
            self._members_seen[cid] = None
        for cid, since in list(self._members_seen.items()):
            if cid in listed:
                continue
            if since is None:
                self._members_seen[cid] = now
            elif since < forget_before:
                del self._members_seen[cid]

    def _dead_holder_candidates(self, now: float) -> tuple[str, ...]:
        grace = self.config.dead_holder_grace
        return tuple(
            sorted(
                cid
                for cid, since in self._members_seen.items()
                if since is not None and now - since >= grace and cid != self.config.client_id
            )
        )

    def _check_dead_holders(self, broker: str, now: float) -> None:
        """L9: one ``ReleaseDeadHolders`` for every queue of ``broker`` whose lock is refused (the refusals come
        in several batches; a dead holder may hold any of them), when someone is missing and none is on the way."""
        cfg = self.config
        if not cfg.recover_dead_holders or self._shutting_down or broker in self._dead_checks_open:
            return
        candidates = self._dead_holder_candidates(now)
        if not candidates:
            return
        refused = [
            entry.mq
            for entry in self._entries.values()
            if entry.mq.broker_name == broker
            and entry.state is QueueState.LOCK_WAIT
            and entry.refused_since is not None
            and now >= self._releases_in_doubt.get(entry.mq, -_NEVER)
        ]
        until, released = self._dead_checks.get(broker, (-_NEVER, frozenset()))
        if not refused or (now < until and not (released and set(refused) - released)):
            return  # the holder is alive, one we cannot name, or (refused again after a release) listed
        request_id = self._new_request_id()
        deadline = now + cfg.dead_holder_window
        self._dead_checks_open[broker] = _DeadCheck(request_id, frozenset(refused), deadline + cfg.request_timeout)
        self._emit(ReleaseDeadHolders(broker, candidates, tuple(sort_queues(refused)), request_id, deadline))

    def _dead_holder_hold(self, mq: MessageQueue, now: float) -> float:
        """L9 (c): until when ``mq`` is not locked: while a check naming it is on the way, and for the broker's lock
        lifetime after one was in doubt (-inf: no hold)."""
        check = self._dead_checks_open.get(mq.broker_name)
        on_the_way = check.answer_by if check is not None and mq in check.queues else -_NEVER
        return max(on_the_way, self._releases_in_doubt.get(mq, -_NEVER))

    def _on_dead_holders_checked(self, event: DeadHoldersChecked, now: float) -> None:
        """The next check waits the dead-holder backoff, but after a release a refused queue it did not name may be
        checked at once (a missing member may hold it). Its own queues, refused again after a release, are held
        by someone b lists, or one we cannot name: checked again at once, they would loop at the broker's pace. An
        answer to a check already given up (in doubt, L9 (c)) changes nothing."""
        broker = event.broker_name
        check = self._dead_checks_open.get(broker)
        if check is None or check.request_id != event.request_id:
            return
        del self._dead_checks_open[broker]
        if event.in_doubt:
            self._release_in_doubt(broker, check, now, f"unlock of {', '.join(sorted(event.in_doubt))} unanswered")
        released = bool(event.released) and not event.in_doubt
        backoff = now + _DEAD_CHECK_BACKOFF * self.config.lock_retry_interval
        self._dead_checks[broker] = (backoff, check.queues if released else frozenset())
        for mq in sort_queues(check.queues):
            entry = self._entries.get(mq)
            if entry is None or entry.state is not QueueState.LOCK_WAIT:
                continue
            if released:
                self._send_lock(entry, now)  # at once: its lock is free
            else:  # the retry, which the hold had put off (or the hold of a release in doubt)
                entry.deadline = min(entry.deadline, now + self.config.lock_retry_interval)

    def _release_in_doubt(self, broker: str, check: _DeadCheck, now: float, why: str) -> None:
        """L9 (c): an unlock of the check's queues may be carried out at any time: none of them is locked for the
        broker's lock lifetime (forgotten at a tick after that)."""
        until = now + self.config.broker_lock_lifetime
        for mq in check.queues:
            self._releases_in_doubt[mq] = max(until, self._releases_in_doubt.get(mq, -_NEVER))
        self.history.problem(f"release at {broker} in doubt: {why}", Failure.RELEASE_IN_DOUBT)

    def _on_connection_lost(self, event: BrokerConnectionLost, now: float) -> None:
        broker = event.broker_name
        if event.epoch <= self._epochs.get(broker, 0):
            return
        self._epochs[broker] = event.epoch
        self._registered.discard(broker)
        check = self._dead_checks_open.pop(broker, None)
        if check is not None:  # its unlocks may have been sent on the lost connection; its answer may never come
            self._release_in_doubt(broker, check, now, "connection lost")
        if not self.config.uses_locks:
            return
        self._rejoin_at[broker] = _NEVER
        for entry in [e for e in self._entries.values() if e.mq.broker_name == broker and self._needs_lock(e.mq)]:
            if entry.state in _RELEASING or entry.state is QueueState.ACTIVE:
                self._lose(entry, "connection lost", now)
            else:
                self._move(entry, "connection lost")  # an acquisition: the next round starts it again, behind the gate
        self._mark_unbalanced(now, Failure.CONNECTION, f"connection to {broker} lost")

    def _on_registered(self, event: BrokerRegistered, now: float) -> None:
        broker = event.broker_name
        if event.epoch != self._epochs.get(broker, 0):
            return  # registered before the last loss
        self._registered.add(broker)
        if broker in self._awaiting:  # L6: a round waits for this broker's list
            self._awaiting.clear()
            trigger, reason, kind = self._put_off or (Trigger.RETRY, "", Failure.MEMBER_LIST)
            self._put_off = None
            self._request_round(now, trigger, reason, kind)
        if self._rejoin_at.get(broker) != _NEVER:
            return  # no loss to recover from
        rejoin = self._rejoin_at[broker] = now + self.config.rejoin_delay
        for entry in self._entries.values():
            if entry.mq.broker_name == broker and entry.state is QueueState.LOCK_WAIT:
                entry.deadline = min(entry.deadline, rejoin)  # _send_lock checks the gate again then

    # ------------------------------------------------------------------ release (T3, L3)

    def _release(self, entry: _Entry, now: float, cause: QueueCause = "released") -> None:
        """Begin giving ``entry`` back: cancel an acquisition, or drain / persist / unlock an active queue (by
        ``cause``: no longer ours, or an operator's reset, O5)."""
        if entry.state in _RELEASING:
            return
        if entry.state in _ACQUIRING:
            self._move(entry, "released")
            if entry.holds_lock:
                self._send_unlock(entry.mq, now)
            return
        self._emit(StopQueue(entry.mq))
        self._move(entry, cause)
        if self.config.drains_on_release and entry.pq is not None and entry.pq.dispatched_count:
            # Orderly waits for the message being consumed however long it takes (as Java's consume lock does):
            # two consumers must never process one queue at once. The concurrent fence waits a bounded time.
            bounded = not self.config.consume_orderly
            entry.deadline = now + self.config.handover_drain_timeout if bounded else _NEVER
        else:
            self._drained(entry, now)

    def _drained(self, entry: _Entry, now: float, offset: int | None = None) -> None:
        """Nothing of the queue is handed out any more (or the drain's bound passed): revoke it first when the
        application is told (L10), else persist at once. ``offset``: the offset to freeze at (O2)."""
        if not self.config.confirm_revoke:
            self._persist_for_release(entry, "drained", now, offset)
            return
        self._move(entry, "revoke asked")
        entry.release_offset = offset
        entry.deadline = now + self.config.revoke_timeout
        self._out_revoke.add(entry.mq)

    def _on_revoked(self, event: QueuesRevoked, now: float) -> None:
        for mq in sort_queues(event.queues):
            entry = self._entries.get(mq)
            if entry is not None and entry.state is QueueState.REVOKING:
                self._persist_for_release(entry, "revoked", now, entry.release_offset)

    def _persist_for_release(self, entry: _Entry, cause: QueueCause, now: float, offset: int | None) -> None:
        """Freeze the release's offset (at ``offset``, O2, else the commit offset) and write it (T3), moving by
        ``cause`` (drained, revoked or revoke timed out), unless the lock lapsed meanwhile (L5)."""
        assert entry.pq is not None
        if self._needs_lock(entry.mq) and not self._lock_valid(entry, now):
            self._lose(entry, "lock lapsed", now)  # L5: never write an offset without the lock
            return
        entry.frozen_offset = entry.pq.freeze(offset if entry.reset_to is None else entry.reset_to)
        self._move(entry, cause)
        entry.deadline = _NEVER
        if entry.acked == entry.frozen_offset and not entry.persist_in_flight:
            self._finish_release(entry, "offset persisted", now)
        else:
            self._send_persist(entry, entry.frozen_offset, now)

    def _send_persist(self, entry: _Entry, offset: int, now: float) -> None:
        """O3: write ``offset`` unless a write of this queue is already on the way (then write after its answer).
        O5: while an operator's reset waits for the queue's release, every write carries the reset offset."""
        if entry.reset_to is not None:
            offset = entry.reset_to
        if entry.persist_in_flight and entry.mq not in self._out_persist:
            entry.persist_again = True
            return
        self._out_persist[entry.mq] = offset
        entry.in_flight_offset = offset
        entry.persist_in_flight = True
        entry.persist_again = False
        entry.last_persist_sent = now

    def _persist_answered(self, entry: _Entry, now: float, ok: bool) -> None:
        """The queue's write came back (or timed out): finish a release, or send the write that waited for it."""
        entry.persist_in_flight = False
        answered, entry.in_flight_offset = entry.in_flight_offset, None
        if entry.state is QueueState.PERSISTING:
            if entry.acked == entry.frozen_offset:
                self._finish_release(entry, "offset persisted", now)
            elif ok and entry.frozen_offset is not None and answered != entry.frozen_offset:
                self._send_persist(entry, entry.frozen_offset, now)  # that was an older write; now ours
            elif not ok and self._release_failed(entry, now):
                return
            else:
                entry.deadline = min(entry.deadline, now + self.config.release_retry_interval)
        elif entry.persist_again and entry.pq is not None and entry.pq.commit_offset != entry.acked:
            if not self._needs_lock(entry.mq) or self._lock_valid(entry, now):
                self._send_persist(entry, entry.pq.commit_offset, now)

    def _release_failed(self, entry: _Entry, now: float) -> bool:
        """L8: count a failed write of the release's offset; at the bound, hand the queue over without it."""
        entry.release_failures += 1
        if entry.release_stuck_since is None:
            entry.release_stuck_since = now
        attempts = self.config.handover_persist_attempts
        if entry.release_failures < attempts or entry.frozen_offset is None:
            return False
        self._emit(HandoverWithoutOffset(entry.mq, entry.frozen_offset, entry.acked, attempts))
        self._finish_release(entry, "handed over without offset", now)
        return True

    def _finish_release(self, entry: _Entry, cause: QueueCause, now: float) -> None:
        self._move(entry, cause)
        self._emit(DropQueue(entry.mq))
        self.history.queue_dropped(entry.mq, now)
        if entry.holds_lock:
            self._send_unlock(entry.mq, now)
        if entry.mq in self._allocated.get(entry.mq.topic, frozenset()):
            # wanted again (or OFFSET_ILLEGAL, O2, or an operator's reset, O5): take it back at once
            why = "released and wanted again" if entry.reset_to is None else f"reset to {entry.reset_to}: taken again"
            self._request_round(now, Trigger.RETRY, f"{entry.mq} {why}", Failure.WANTED_BACK)

    def _on_persisted(self, event: OffsetsPersisted, now: float) -> None:
        for mq, offset in event.offsets.items():
            entry = self._entries.get(mq)
            if entry is None:
                continue
            entry.acked = offset
            self._persist_answered(entry, now, ok=True)

    def _on_persist_failed(self, event: OffsetsPersistFailed, now: float) -> None:
        for mq in event.offsets:
            entry = self._entries.get(mq)
            if entry is not None:
                self._persist_answered(entry, now, ok=False)

    # ------------------------------------------------------------------ messages and offsets (O1, O2)

    def _on_pulled(self, event: MessagesPulled, now: float) -> None:
        entry = self._entries.get(event.mq)
        if entry is not None and entry.state is QueueState.ACTIVE and entry.pq is not None:
            entry.pq.on_pulled(event.offsets, event.next_offset, now)

    def _on_dispatched(self, event: MessagesDispatched, now: float) -> None:
        entry = self._entries.get(event.mq)
        if entry is not None and entry.state in (QueueState.ACTIVE, QueueState.DRAINING) and entry.pq is not None:
            entry.pq.on_dispatched(event.offsets)

    def _on_handed_back(self, event: MessagesConsumed | MessagesReturned, now: float) -> None:
        """Messages back from the listener, consumed or never delivered: a queue being released goes on to its
        persist once none of its messages is out any more."""
        entry = self._entries.get(event.mq)
        if entry is None or entry.pq is None:
            return
        if isinstance(event, MessagesConsumed):
            entry.pq.on_consumed(event.offsets)
        else:
            entry.pq.on_returned(event.offsets)
        if entry.state is QueueState.DRAINING and entry.pq.dispatched_count == 0:
            self._drained(entry, now)

    def _on_offset_illegal(self, event: OffsetIllegal, now: float) -> None:
        entry = self._entries.get(event.mq)
        if entry is None or entry.pq is None or entry.state not in (QueueState.ACTIVE, QueueState.DRAINING):
            return
        if entry.state is QueueState.ACTIVE:
            self._emit(StopQueue(entry.mq))
            self._move(entry, "offset illegal")
        self._drained(entry, now, max(0, event.next_offset))  # the round follows the release (T3)

    def _on_offsets_reset(self, event: OffsetsReset, now: float) -> None:
        """O5: each named queue we hold goes on from the operator's offset, and nothing of ours writes the old one
        after it."""
        for mq in sort_queues(event.offsets):
            entry = self._entries.get(mq)
            if entry is None or (self._needs_lock(mq) and not entry.holds_lock):
                continue  # not ours (yet): the holder of its lock resets it, and our start reads what it wrote
            offset = max(0, event.offsets[mq])
            self._emit(OffsetResetApplied(mq, entry.acked if entry.pq is None else entry.pq.commit_offset, offset))
            entry.reset_to = offset
            if entry.state is QueueState.ACTIVE:
                self._release(entry, now, "offset reset")  # then taken again by the round its release asks for
            elif entry.state is QueueState.PERSISTING and entry.pq is not None:
                entry.frozen_offset = entry.pq.freeze(offset)
                self._send_persist(entry, offset, now)  # after the write on the way, if one is (O3)

    def _on_seeked(self, event: QueueSeeked, now: float) -> None:
        entry = self._entries.get(event.mq)
        if entry is not None and entry.state is QueueState.ACTIVE and entry.pq is not None:
            entry.pq.seek(event.offset)

    def _on_persist_requested(self, event: PersistRequested, now: float) -> None:
        self._persist_all(now)

    def _persist_all(self, now: float) -> None:
        for entry in self._entries.values():
            if entry.state not in _STARTED or entry.pq is None:
                continue
            if self._needs_lock(entry.mq) and not self._lock_valid(entry, now):
                continue  # L5
            self._send_persist(entry, entry.pq.commit_offset, now)  # O1: unchanged ones too

    # ------------------------------------------------------------------ other events

    def _on_started(self, event: Event, now: float) -> None:
        if self._started:
            return
        self._started = True
        self._started_at = now
        cfg = self.config
        self._emit(FetchRoutes(self.topics))
        self._out_heartbeat = True
        self._next_route_at = now + cfg.route_refresh_interval
        self._next_persist_at = now + cfg.persist_interval
        if cfg.uses_locks:
            self._next_lock_all_at = now + cfg.lock_all_interval
        self._round_requested_at = _NEVER  # whatever asked for a round before the start is the start's round
        self._request_round(now, Trigger.START)

    def _on_subscription_changed(self, event: SubscriptionChanged, now: float) -> None:
        old_topics = set(self.topics)
        self._user_topics = frozenset(event.topics)
        new_topics = set(self.topics)
        if old_topics == new_topics:
            return
        for topic in old_topics - new_topics:  # R5
            self._allocated.pop(topic, None)
        for entry in [e for e in self._entries.values() if e.mq.topic not in new_topics]:
            self._release(entry, now)
        added = tuple(sorted(new_topics - old_topics))
        if added and self._started:
            self._emit(FetchRoutes(added))
        if self._started:
            self._out_heartbeat = True
            self._request_round(now, Trigger.SUBSCRIPTION)

    def _on_route_updated(self, event: RouteUpdated, now: float) -> None:
        # the latest route names the broker asked, even when its queues are unchanged (no round for that alone)
        self._member_brokers[event.topic] = event.member_broker
        self._masterless_changed(event.topic, event.masterless, now)
        if self._routes.get(event.topic) == event.queues:
            return
        self._routes[event.topic] = frozenset(event.queues)
        if event.topic in self.topics:
            # we rebalance at once on a route change (Java waits for the next round)
            self._request_round(now, Trigger.ROUTE)

    def _needs_lock(self, mq: MessageQueue) -> bool:
        """L1, and L11: a set without a master grants no lock, so only an orderly queue still waits for one."""
        if not self.config.uses_locks:
            return False
        return self.config.consume_orderly or all(mq.broker_name not in sets for sets in self._masterless.values())

    def _masterless_changed(self, topic: str, masterless: frozenset[str], now: float) -> None:
        """L11: a set that lost its master lets its fenced queues go on unlocked (those waiting for a lock are
        looked up at once); one whose master is back has its started queues locked again at once."""
        before = {mq.broker_name: self._needs_lock(mq) for mq in self._entries}
        if masterless:
            self._masterless[topic] = masterless
        else:
            self._masterless.pop(topic, None)
        for entry in list(self._entries.values()):
            needs = self._needs_lock(entry.mq)
            if needs == before[entry.mq.broker_name]:
                continue
            if not needs and entry.state in (QueueState.LOCKING, QueueState.LOCK_WAIT):
                self._send_read(entry, "master down", now)
            elif needs and entry.state in _STARTED and not self._lock_valid(entry, now):
                self._out_lock.setdefault(entry.mq.broker_name, set()).add(entry.mq)

    def _on_notification(self, event: Event, now: float) -> None:
        self._request_round(now, Trigger.NOTIFY)

    def _on_shutdown(self, event: Event, now: float) -> None:
        if self._shutting_down:
            return
        self._shutting_down = True
        self._round_requested_at = _NEVER
        self._round_pending.clear()
        self._round_lists.clear()
        self._round_deadline = _NEVER
        for entry in list(self._entries.values()):
            self._release(entry, now)

    def _check_shutdown_complete(self) -> None:
        """M2: complete once every queue is released and every unlock answered (or timed out): a runtime that
        closes its connections on ``ShutdownComplete`` must not cut an unlock off, or the next owner waits."""
        if self._shutting_down and not self._shutdown_done and not self._entries and not self._unlocking:
            self._shutdown_done = True
            self._next_persist_at = _NEVER
            self._next_lock_all_at = _NEVER
            self._emit(ShutdownComplete())

    # ------------------------------------------------------------------ timers (M1)

    def _on_tick(self, event: Event, now: float) -> None:
        cfg = self.config
        if self._round_pending and now >= self._round_deadline:
            self._round_pending.clear()  # consumer lists never came: M1
            self._mark_unbalanced(now, Failure.MEMBER_LIST, "member lists not answered in time")
            self._finish_round(now)
        if not self._shutting_down:
            if now >= self._next_route_at:
                self._emit(FetchRoutes(self.topics))
                self._next_route_at = now + cfg.route_refresh_interval
            if now >= self._next_heartbeat_at:
                self._out_heartbeat = True
        if now >= self._next_persist_at:
            self._persist_all(now)
            self._next_persist_at = now + cfg.persist_interval
        if now >= self._next_lock_all_at:
            self._lock_all(now)
            self._next_lock_all_at = now + cfg.lock_all_interval
        for broker, check in [(b, c) for b, c in self._dead_checks_open.items() if now >= c.answer_by]:
            del self._dead_checks_open[broker]
            self._release_in_doubt(broker, check, now, "no answer in time")
        for mq in [mq for mq, until in self._releases_in_doubt.items() if now >= until]:
            del self._releases_in_doubt[mq]
        for mq in [mq for mq, deadline in self._unlocking.items() if now >= deadline]:
            del self._unlocking[mq]
            entry = self._entries.get(mq)
            if entry is not None and entry.state is QueueState.LOCK_WAIT:
                entry.deadline = now
        for entry in list(self._entries.values()):
            if self._entries.get(entry.mq) is not entry:
                continue
            self._tick_entry(entry, now)

    def _tick_entry(self, entry: _Entry, now: float) -> None:
        cfg = self.config
        if entry.persist_in_flight and now >= entry.last_persist_sent + cfg.request_timeout:
            self._persist_answered(entry, now, ok=False)  # the answer is lost: as failed (M1)
            if self._entries.get(entry.mq) is not entry:
                return
        if entry.holds_lock and now >= entry.locked_until:
            entry.holds_lock = False  # L2: the client lock lapsed
            if entry.state in _STARTED and self._needs_lock(entry.mq):
                self._lose(entry, "lock lapsed", now)
                return
        if now < entry.deadline:
            return
        entry.deadline = _NEVER
        state = entry.state
        if state is QueueState.LOCKING:
            self._lock_refused(entry, now)  # no answer: as refused
        elif state is QueueState.LOCK_WAIT:
            self._send_lock(entry, now)
        elif state in (QueueState.READING, QueueState.QUERYING):
            self._lookup_failed(entry, now)
        elif state is QueueState.DRAINING:
            self._drained(entry, now)  # L3: the bounded wait is over
        elif state is QueueState.REVOKING:
            self._persist_for_release(entry, "revoke timed out", now, entry.release_offset)  # L10: time is up
        elif state is QueueState.PERSISTING and entry.frozen_offset is not None:
            if entry.persist_in_flight:
                return
            if self._needs_lock(entry.mq) and not self._lock_valid(entry, now):
                self._lose(entry, "lock lapsed", now)  # L5
            else:
                self._send_persist(entry, entry.frozen_offset, now)
