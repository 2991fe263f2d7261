"""A tiny in-memory broker and runtime that drive several :class:`RebalanceCore` instances for the tests.

The broker keeps routes, the group's registered client IDs, offsets (with their history), queue locks with a
lifetime, and a message log per queue. Each simulated consumer carries out its core's actions the way a runtime
would: local ones (start, stop, drop, listener, wake-up) at once, remote ones (routes, consumer lists, locks,
offsets) as pending requests that the test delivers, fails or lets expire in any order it likes. Requests older
than ``request_timeout`` expire unanswered when time passes, as an RPC deadline would, so a late write never
lands after its sender gave up on it.

The release of a gone holder's locks (core rule L9) is the exception the sim can make: with ``delayed_unlocks``
its member list is read when the request is delivered, but each unlock on a gone holder's behalf is on its way of
its own and lands when the test says (``land``), and with ``late_unlocks`` also after its sender stopped waiting
for it (a broker that processes a queued request late), which no RPC deadline prevents.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rocket_rebalance.core import (
    Action,
    BrokerConnectionLost,
    BrokerRegistered,
    ClientIdShared,
    ConsumerIdsChanged,
    ConsumerListFetched,
    DeadHoldersChecked,
    DropQueue,
    Event,
    FetchConsumerList,
    FetchRoutes,
    HandoverWithoutOffset,
    LockQueues,
    LockResult,
    MessagesConsumed,
    MessagesDispatched,
    MessagesPulled,
    OffsetIllegal,
    OffsetLookupFailed,
    OffsetQueried,
    OffsetRead,
    OffsetResetApplied,
    OffsetsPersisted,
    OffsetsPersistFailed,
    OffsetsReset,
    PersistOffsets,
    QueryMaxOffset,
    QueuesChanged,
    QueuesRevoked,
    QueuesUnlocked,
    ReadOffset,
    RebalanceConfig,
    RebalanceCore,
    ReleaseDeadHolders,
    RevokeQueues,
    RouteUpdated,
    SearchOffset,
    SendHeartbeat,
    ShutdownComplete,
    ShutdownRequested,
    Started,
    StartQueue,
    StopQueue,
    Tick,
    UnlockQueues,
    WakeAt,
)
from rocket_rebalance.core.machine import QUEUE_TRANSITIONS, QueueCause, QueueState
from rocket_rebalance.model import MessageQueue

Move = tuple[QueueState | None, QueueCause, QueueState | None]  # state before, cause, state after (None: no entry)


def watch_moves(core: RebalanceCore, made: set[Move], wrong: list[str]) -> None:
    """Record every move ``core`` makes along its queue transition table in ``made``, and in ``wrong`` each one the
    table does not have or that ends elsewhere than the table says (seen through ``state_of``, not the core's
    own check)."""
    move = core._move

    def watched(entry: Any, cause: QueueCause) -> None:  # the core's private _Entry
        mq = entry.mq
        before = core.state_of(mq)
        moves = QUEUE_TRANSITIONS.get(before, {})
        if cause not in moves:
            wrong.append(f"{core.config.client_id} {mq}: no move from {before} by {cause!r} in the table")
        move(entry, cause)
        after = core.state_of(mq)
        if cause in moves and after is not moves[cause]:
            wrong.append(f"{core.config.client_id} {mq}: {before} by {cause!r} went to {after}, not {moves[cause]}")
        made.add((before, cause, after))

    core._move = watched  # type: ignore[method-assign]


REMOTE = (
    FetchRoutes,
    FetchConsumerList,
    SendHeartbeat,
    LockQueues,
    UnlockQueues,
    ReadOffset,
    QueryMaxOffset,
    SearchOffset,
    PersistOffsets,
    ReleaseDeadHolders,
    RevokeQueues,  # the application's on_queues_revoked: it may return late, or (expiring) never (L10)
)


class Broker:
    """Routes, registry, offsets, locks and messages of one group, all in memory."""

    def __init__(
        self, routes: dict[str, Sequence[MessageQueue]], lock_lifetime: float = 60.0, keeps_locks: bool = False
    ) -> None:
        self.routes = {topic: frozenset(queues) for topic, queues in routes.items()}
        # the broker each route names for the member list: its first queue's, in the order given (route order)
        self.member_brokers = {topic: queues[0].broker_name if queues else None for topic, queues in routes.items()}
        self.lock_lifetime = lock_lifetime
        self.keeps_locks = keeps_locks  # RocketMQ: a closed connection's locks stay until their lifetime lapses
        self.registered: list[str] = []
        self.offsets: dict[MessageQueue, int] = {}
        self.offset_history: dict[MessageQueue, list[int]] = {}
        self.locks: dict[MessageQueue, tuple[str, float]] = {}
        self.max_offset: dict[MessageQueue, int] = {mq: 0 for qs in self.routes.values() for mq in qs}
        self.min_offset: dict[MessageQueue, int] = {mq: 0 for mq in self.max_offset}

    def lock(self, cid: str, queues: Iterable[MessageQueue], now: float) -> frozenset[MessageQueue]:
        granted = set()
        for mq in queues:
            holder = self.locks.get(mq)
            if holder is None or holder[0] == cid or holder[1] <= now:
                self.locks[mq] = (cid, now + self.lock_lifetime)
                granted.add(mq)
        return frozenset(granted)

    def unlock(self, cid: str, queues: Iterable[MessageQueue]) -> None:
        for mq in queues:
            holder = self.locks.get(mq)
            if holder is not None and holder[0] == cid:
                del self.locks[mq]

    def drop_client(self, cid: str, registered: bool) -> None:
        """The client's connection closed: it leaves the registry if it was in it (one entry per connection, as
        RocketMQ lists a client ID once per channel) and, once no connection of that ID is left, its locks go
        (the stub's behaviour; a RocketMQ broker, ``keeps_locks``, keeps them until their lifetime lapses)."""
        if registered:
            self.registered.remove(cid)
        if cid not in self.registered and not self.keeps_locks:
            for mq in [mq for mq, (holder, _) in self.locks.items() if holder == cid]:
                del self.locks[mq]

    def persist(self, offsets: dict[MessageQueue, int]) -> None:
        for mq, offset in offsets.items():
            self.offsets[mq] = offset
            self.offset_history.setdefault(mq, []).append(offset)


@dataclass
class Request:
    client: SimConsumer
    action: Action
    sent_at: float
    epoch: int = 0  # the sender's connection losses when it was sent: one sent before a loss went on the old one
    refused: bool = False  # not sent: a write decided before a connection loss its core had not heard of (O6)


@dataclass
class Release:
    """A ``ReleaseDeadHolders`` whose member list the broker has read (L9): its unlocks, one per gone holder, are
    on their way. The releaser's runtime counts an unlock answered by ``deadline`` as released; one not answered by
    then leaves the release in doubt (it may still land: ``late_unlocks``)."""

    client: SimConsumer
    action: ReleaseDeadHolders
    deadline: float
    waiting: set[str]  # holders whose unlock has not landed yet
    released: set[str] = field(default_factory=set)
    answered: bool = False  # DeadHoldersChecked is given


@dataclass
class Unlock:
    """One UNLOCK_BATCH_MQ a release sent on ``holder``'s behalf, not yet carried out by the broker."""

    release: Release
    holder: str


@dataclass
class SimConsumer:
    """One consumer process: its core plus the runtime-side state of its queues."""

    cid: str
    core: RebalanceCore
    sim: Sim
    alive: bool = True
    leaving: bool = False
    wake_at: float | None = None
    pulling: dict[MessageQueue, int] = field(default_factory=dict)
    buffered: dict[MessageQueue, list[int]] = field(default_factory=dict)
    dispatched: dict[MessageQueue, set[int]] = field(default_factory=dict)
    listener_calls: list[QueuesChanged] = field(default_factory=list)
    shared_id_reports: list[ClientIdShared] = field(default_factory=list)
    handovers_without_offset: list[HandoverWithoutOffset] = field(default_factory=list)
    resets_applied: list[OffsetResetApplied] = field(default_factory=list)
    shutdown_complete: bool = False
    registered: bool = False  # this consumer's connection is in the broker's registry
    assigned: set[MessageQueue] = field(default_factory=set)  # what a rebalance listener was told it owns (L10)
    epoch: int = 0  # how often its connection to the brokers was lost (L9)

    def feed(self, event: Event) -> list[Action]:
        actions = self.core.handle(event, self.sim.now)
        self.sim.observe(self, event, actions)
        for action in actions:
            self.carry_out(action)
        return actions

    def carry_out(self, action: Action) -> None:
        self._listen(action)
        if isinstance(action, PersistOffsets) and any(e != self.epoch for e in action.epochs.values()):
            # O6, as the runtime does it: a fenced broker's part of a write decided before a loss the core has not
            # heard of yet is not sent (answered failed, in any order with the rest)
            stale = {b for b, e in action.epochs.items() if e != self.epoch}
            refused = {mq: o for mq, o in action.offsets.items() if mq.broker_name in stale}
            self.sim.pending.append(Request(self, PersistOffsets(refused), self.sim.now, self.epoch, refused=True))
            action = PersistOffsets({mq: o for mq, o in action.offsets.items() if mq not in refused})
            if not action.offsets:
                return
        if isinstance(action, REMOTE):
            self.sim.pending.append(Request(self, action, self.sim.now, self.epoch))
        elif isinstance(action, StartQueue):
            self.pulling[action.mq] = action.offset
            self.buffered[action.mq] = []
        elif isinstance(action, StopQueue):
            self.pulling.pop(action.mq, None)
            self.buffered.pop(action.mq, None)
        elif isinstance(action, DropQueue):
            self.pulling.pop(action.mq, None)
            self.buffered.pop(action.mq, None)
        elif isinstance(action, QueuesChanged):
            self.listener_calls.append(action)
        elif isinstance(action, ClientIdShared):
            self.shared_id_reports.append(action)
        elif isinstance(action, HandoverWithoutOffset):
            self.handovers_without_offset.append(action)
        elif isinstance(action, OffsetResetApplied):
            self.resets_applied.append(action)
        elif isinstance(action, WakeAt):
            self.wake_at = action.time
        elif isinstance(action, ShutdownComplete):
            self.shutdown_complete = True
            self.sim.leave_done(self)
        else:  # pragma: no cover - a new action type the harness does not know
            raise AssertionError(f"unknown action {action!r}")

    def _listen(self, action: Action) -> None:
        """A rebalance listener's deltas (L10): every queue started is assigned once, then revoked or lost once, and
        a queue released with its offset was revoked first."""
        violations = self.sim.violations
        if isinstance(action, StartQueue):
            if action.mq in self.assigned:
                violations.append(f"{self.cid}: {action.mq} started while still assigned")
            self.assigned.add(action.mq)
        elif isinstance(action, RevokeQueues):
            for mq in action.queues:
                if mq not in self.assigned:
                    violations.append(f"{self.cid}: {mq} revoked but not assigned")
                self.assigned.discard(mq)
        elif isinstance(action, DropQueue):
            if action.mq in self.assigned and not action.lost and self.core.config.confirm_revoke:
                violations.append(f"{self.cid}: {action.mq} released with its offset, never revoked")
            self.assigned.discard(action.mq)
        elif isinstance(action, ShutdownComplete) and self.assigned:
            violations.append(f"{self.cid}: shut down with {sorted(map(str, self.assigned))} never revoked")

    # runtime-side consumption -------------------------------------------------------------

    def pull(self, mq: MessageQueue, batch: int = 3) -> None:
        broker = self.sim.broker
        start = self.pulling[mq]
        if start < broker.min_offset[mq] or start > broker.max_offset[mq]:
            self.pulling.pop(mq)  # the runtime stops pulling until the core decides
            low = start < broker.min_offset[mq]
            self.feed(OffsetIllegal(mq, broker.min_offset[mq] if low else broker.max_offset[mq]))
            return
        end = min(broker.max_offset[mq], start + batch)
        offsets = tuple(range(start, end))
        self.pulling[mq] = end
        self.buffered[mq].extend(offsets)
        self.feed(MessagesPulled(mq, offsets, end))

    def dispatch(self, mq: MessageQueue) -> bool:
        """Hand the next buffered message to the listener, if the core says the queue may give one out."""
        if not self.buffered.get(mq) or not self.core.is_dispatchable(mq, self.sim.now):
            return False
        offset = self.buffered[mq].pop(0)
        self.dispatched.setdefault(mq, set()).add(offset)
        self.sim.deliveries.append((self.cid, mq, offset))
        self.feed(MessagesDispatched(mq, (offset,)))
        return True

    def dispatch_any(self) -> bool:
        return any(self.dispatch(mq) for mq in list(self.buffered))

    def consume(self, mq: MessageQueue, offset: int) -> None:
        self.dispatched[mq].discard(offset)
        self.sim.consumed.add((mq, offset))
        self.feed(MessagesConsumed(mq, (offset,)))


class Sim:
    """The broker, the consumers and the clock; methods are the moves a test (or hypothesis) makes."""

    def __init__(
        self,
        routes: dict[str, Sequence[MessageQueue]],
        lock_lifetime: float = 60.0,
        keeps_locks: bool = False,
        delayed_unlocks: bool = False,
        late_unlocks: bool = False,
    ) -> None:
        self.broker = Broker(routes, lock_lifetime, keeps_locks)
        self.delayed_unlocks = delayed_unlocks  # a release's unlocks land when the test says, not with its list
        self.late_unlocks = late_unlocks  # ... and may land after their sender's deadline (else they never do)
        self.releases: list[Release] = []  # releases (L9) whose unlocks are on their way, not yet answered
        self.unlocks: list[Unlock] = []  # unlocks on a gone holder's behalf on their way to the broker
        self.in_doubt: list[tuple[float, str, str, frozenset[MessageQueue]]] = []  # (when, releaser, holder, queues)
        self.now = 0.0
        self.consumers: list[SimConsumer] = []
        self.pending: list[Request] = []
        self.notifications: list[SimConsumer] = []
        self.deliveries: list[tuple[str, MessageQueue, int]] = []
        self.consumed: set[tuple[MessageQueue, int]] = set()
        self.crashed: set[str] = set()
        self.commit_seen: dict[int, tuple[object, int]] = {}  # keeps each queue alive so ids are never reused
        self.violations: list[str] = []
        # operators' resets (rule O5): (queue, offset, writes of the queue before it, deliveries before it)
        self.resets: list[tuple[MessageQueue, int, int, int]] = []
        self.moves = 0  # StartQueue / StopQueue / DropQueue actions seen
        self.queue_moves: set[Move] = set()  # every move of the queue transition table the cores made
        self.wrong_moves: list[str] = []  # moves the table does not have (the core raises on them, too)

    # observation --------------------------------------------------------------------------

    def observe(self, consumer: SimConsumer, event: Event, actions: list[Action]) -> None:
        """Check after every step: core commit offsets never move backwards within one process queue."""
        self.moves += sum(isinstance(a, StartQueue | StopQueue | DropQueue) for a in actions)
        if isinstance(event, Tick):
            wake = consumer.core.next_wakeup
            if wake is not None and wake <= self.now:  # the runtime would tick again at once, forever
                self.violations.append(f"{consumer.cid}: wants a tick at {wake} right after one at {self.now}")
            if wake is not None and not any(isinstance(a, WakeAt) and a.time == wake for a in actions):
                self.violations.append(f"{consumer.cid}: no WakeAt({wake}) after a tick")
        for mq in consumer.core.held_queues():
            pq = consumer.core.process_queue(mq)
            if pq is None or pq.frozen:
                continue
            seen = self.commit_seen.get(id(pq))
            if seen is not None and pq.commit_offset < seen[1]:
                self.violations.append(f"{consumer.cid} {mq}: commit offset {seen[1]} -> {pq.commit_offset}")
            self.commit_seen[id(pq)] = (pq, pq.commit_offset)

    def live(self) -> list[SimConsumer]:
        return [c for c in self.consumers if c.alive]

    # membership ---------------------------------------------------------------------------

    def join(self, config: RebalanceConfig, topics: Iterable[str], registered: bool = False) -> SimConsumer:
        """Start a consumer; ``registered``: its start heartbeat is answered before its first round (else the
        heartbeat is a request on the way like any other, and the member list may be read before it lands)."""
        consumer = SimConsumer(config.client_id, RebalanceCore(config, topics), self)
        watch_moves(consumer.core, self.queue_moves, self.wrong_moves)
        self.consumers.append(consumer)
        if registered:
            self._register(consumer)
        consumer.feed(Started())
        if registered:
            for name in self.broker_names():
                consumer.feed(BrokerRegistered(name, 0))
        return consumer

    def _register(self, consumer: SimConsumer) -> None:
        consumer.registered = True
        self.broker.registered.append(consumer.cid)
        self._notify_group()

    def reset(self, mq: MessageQueue, offset: int) -> None:
        """An operator resets the group's offset of ``mq``: the broker (``useServerSideResetOffset=false``) tells
        every live member, each on its own connection, at once (RESET_CONSUMER_CLIENT_OFFSET is oneway)."""
        written = len(self.broker.offset_history.get(mq, []))
        self.resets.append((mq, offset, written, len(self.deliveries)))
        for consumer in self.live():
            consumer.feed(OffsetsReset({mq: offset}))

    def leave(self, consumer: SimConsumer) -> None:
        """Graceful shutdown: the core releases everything, then ``ShutdownComplete`` unregisters it."""
        consumer.leaving = True
        consumer.feed(ShutdownRequested())

    def leave_done(self, consumer: SimConsumer) -> None:
        consumer.alive = False
        self.pending = [r for r in self.pending if r.client is not consumer]
        self._drop(consumer)

    def crash(self, consumer: SimConsumer) -> None:
        consumer.alive = False
        self.crashed.add(consumer.cid)
        self.pending = [r for r in self.pending if r.client is not consumer]
        self.notifications = [c for c in self.notifications if c is not consumer]
        self._drop(consumer)

    def disconnect(self, consumer: SimConsumer) -> None:
        """The consumer's connection closes and it lives on: the broker drops it from the registry at once. What
        it had sent lands now, on a new connection (a lock may be granted again before it is listed again); then it
        learns of the loss (``BrokerConnectionLost`` for every broker), well within ``dead_holder_grace``."""
        consumer.epoch += 1
        self._drop(consumer)
        mine = [r for r in self.pending if r.client is consumer]
        self.pending = [r for r in self.pending if r.client is not consumer]
        for request in mine:
            request.epoch = consumer.epoch
            for event in self._execute(request, fail=False):
                if consumer.alive:
                    consumer.feed(event)
        for broker_name in self.broker_names():
            if consumer.alive:
                consumer.feed(BrokerConnectionLost(broker_name, consumer.epoch))

    def broker_names(self) -> list[str]:
        return sorted({mq.broker_name for queues in self.broker.routes.values() for mq in queues})

    def _drop(self, consumer: SimConsumer) -> None:
        self.broker.drop_client(consumer.cid, consumer.registered)
        consumer.registered = False
        self._notify_group()

    def _notify_group(self) -> None:
        for c in self.live():
            self.notifications.append(c)

    # requests -----------------------------------------------------------------------------

    def deliver(self, index: int, fail: bool = False) -> None:
        request = self.pending.pop(index)
        client = request.client
        if not client.alive:
            return
        if isinstance(request.action, RevokeQueues) and not fail:
            for mq in request.action.queues:  # the listener commits what it holds of them (a pull consumer)
                for offset in sorted(client.dispatched.get(mq, ())):
                    if client.alive:
                        client.consume(mq, offset)
        for event in self._execute(request, fail):
            if client.alive:
                client.feed(event)

    def _execute(self, request: Request, fail: bool) -> list[Event]:
        action, cid, broker, now = request.action, request.client.cid, self.broker, self.now
        if isinstance(action, FetchRoutes):
            if fail:
                return []
            return [
                RouteUpdated(t, broker.routes[t], broker.member_brokers[t]) for t in action.topics if t in broker.routes
            ]
        if isinstance(action, FetchConsumerList):
            failed = fail or action.broker_name is None  # a route naming no broker: failed at once, as the runtime
            return [ConsumerListFetched(action.topic, None if failed else tuple(broker.registered))]
        if isinstance(action, SendHeartbeat):
            if fail or request.epoch != request.client.epoch:
                return []  # failed, or sent on a connection that has closed since
            if not request.client.registered and not request.client.leaving:
                self._register(request.client)
            return [BrokerRegistered(name, request.epoch) for name in self.broker_names()]
        if isinstance(action, LockQueues):
            granted = frozenset() if fail else broker.lock(cid, action.queues, now)
            return [LockResult(frozenset(action.queues), granted, action.epoch)]
        if isinstance(action, ReleaseDeadHolders):
            return self._release(request, fail)
        if isinstance(action, UnlockQueues):
            if not fail:
                broker.unlock(cid, action.queues)
            return [QueuesUnlocked(frozenset(action.queues))]
        if isinstance(action, ReadOffset):
            if fail:
                return [OffsetLookupFailed(action.mq, action.request_id)]
            return [OffsetRead(action.mq, broker.offsets.get(action.mq), action.request_id)]
        if isinstance(action, QueryMaxOffset):
            if fail:
                return [OffsetLookupFailed(action.mq, action.request_id)]
            return [OffsetQueried(action.mq, broker.max_offset[action.mq], action.request_id)]
        if isinstance(action, SearchOffset):
            if fail:
                return [OffsetLookupFailed(action.mq, action.request_id)]
            return [OffsetQueried(action.mq, broker.min_offset[action.mq], action.request_id)]
        if isinstance(action, RevokeQueues):  # returned (fail: it raised, which the runtime answers the same)
            return [QueuesRevoked(frozenset(action.queues))]
        if isinstance(action, PersistOffsets):
            if fail or request.refused:
                return [OffsetsPersistFailed(dict(action.offsets))]
            broker.persist(dict(action.offsets))
            return [OffsetsPersisted(dict(action.offsets))]
        raise AssertionError(f"not a request: {action!r}")  # pragma: no cover

    def _release(self, request: Request, fail: bool) -> list[Event]:
        """The broker reads its member list now; each gone holder's unlock is sent and lands now, or (with
        ``delayed_unlocks``) when the test lands it: the answer waits for them, or for the release's deadline
        (the runtime's: a list that comes after it releases nothing)."""
        action = request.action
        assert isinstance(action, ReleaseDeadHolders)
        nothing = DeadHoldersChecked(action.broker_name, action.request_id, frozenset(action.queues))
        if fail or self.now > action.deadline:
            return [nothing]
        gone = sorted(c for c in action.client_ids if c not in self.broker.registered)
        if not gone:
            return [nothing]
        release = Release(request.client, action, action.deadline, set(gone))
        self.releases.append(release)
        unlocks = [Unlock(release, holder) for holder in gone]
        self.unlocks.extend(unlocks)
        if not self.delayed_unlocks:
            for unlock in unlocks:
                self.land(self.unlocks.index(unlock))
        return []  # answered when its unlocks are (land), or at its deadline (advance)

    def land(self, index: int) -> None:
        """The broker carries out an unlock on a gone holder's behalf now; answered in time, it counts as released."""
        unlock = self.unlocks.pop(index)
        release = unlock.release
        self.broker.unlock(unlock.holder, release.action.queues)
        if release.answered or self.now > release.deadline:
            return  # its sender stopped waiting: whatever it unlocked, nobody is told
        release.waiting.discard(unlock.holder)
        release.released.add(unlock.holder)
        if not release.waiting:
            self._answer(release)

    def _answer(self, release: Release) -> None:
        release.answered = True
        self.releases.remove(release)
        for holder in sorted(release.waiting):
            self.in_doubt.append((self.now, release.client.cid, holder, frozenset(release.action.queues)))
        if not self.late_unlocks:  # an unlock not answered by the deadline never lands
            self.unlocks = [u for u in self.unlocks if u.release is not release]
        action = release.action
        if release.client.alive:
            release.client.feed(
                DeadHoldersChecked(
                    action.broker_name,
                    action.request_id,
                    frozenset(action.queues),
                    frozenset(release.released),
                    frozenset(release.waiting),
                )
            )

    def deliver_notification(self, index: int, lose: bool = False) -> None:
        consumer = self.notifications.pop(index)
        if consumer.alive and not lose:
            consumer.feed(ConsumerIdsChanged())

    # time ---------------------------------------------------------------------------------

    def advance(self, dt: float, request_timeout: float) -> None:
        """Let ``dt`` seconds pass: expire requests past their deadline, then tick whoever asked to be woken."""
        self.now += dt
        self.pending = [r for r in self.pending if self.now < r.sent_at + request_timeout]
        for release in [r for r in self.releases if self.now > r.deadline]:
            self._answer(release)  # the runtime stops waiting: what is not answered is in doubt
        for consumer in list(self.live()):
            if consumer.wake_at is not None and self.now >= consumer.wake_at:
                consumer.feed(Tick())

    def settle(self, request_timeout: float, rounds: int = 200, step: float = 0.5) -> None:
        """Deliver everything, consume everything and let time pass until nothing is left to do."""
        for _ in range(rounds):
            for _ in range(1000):
                if self.pending:
                    self.deliver(0)
                elif self.unlocks:
                    self.land(0)
                elif self.notifications:
                    self.deliver_notification(0)
                else:
                    break
            self.consume_all()
            self.advance(step, request_timeout)

    def consume_all(self) -> None:
        for consumer in list(self.live()):
            for mq in list(consumer.dispatched):
                for offset in sorted(consumer.dispatched.get(mq, ())):
                    if consumer.alive:
                        consumer.consume(mq, offset)
            for mq in list(consumer.pulling):
                while consumer.alive and mq in consumer.pulling:
                    before = consumer.pulling[mq]
                    if before >= self.broker.max_offset[mq] and before >= self.broker.min_offset[mq]:
                        consumer.feed(MessagesPulled(mq, (), before))  # an empty pull keeps it fresh
                        break
                    consumer.pull(mq, batch=100)
                while consumer.alive and consumer.dispatch_any():
                    pass
                for m in list(consumer.dispatched):
                    for offset in sorted(consumer.dispatched.get(m, ())):
                        if consumer.alive:
                            consumer.consume(m, offset)
