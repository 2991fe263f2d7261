"""The engine's part that talks to the brokers: routes, member lists, heartbeats, locks, offsets, unregister, and
each broker's notification stream.

Every request the core asks for (``FetchRoutes``, ``FetchConsumerList``, ``LockQueues`` ...) runs as steps on the
I/O pool and is answered with a core event, posted to the service context. Heartbeats go to every broker a route
names on a pool of :data:`~rocket_rebalance.runtime.settings.BROKER_CALL_THREADS`; a failure at many brokers is
one health kind naming them. Every broker a route names has a notification stream (NOTIFY_CONSUMER_IDS_CHANGED
wakes a round at once, as does a reconnect), reopened with backoff when lost. A server that is down or restarting
is retried; the consumer keeps its queues meanwhile.

This part owns the brokers known, the heartbeats under way, each broker's connection losses (core rule L9's
epochs) and its stream; the first three are read from pool threads too, under one lock.

(The module is not called ``broker_requests``: :class:`~rocket_rebalance.runtime.transport.BrokerRequests` names
the requests a broker sends us.)
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial

from rocket_rebalance.core import (
    BrokerConnectionLost,
    BrokerRegistered,
    ConsumerIdsChanged,
    ConsumerListFetched,
    DeadHoldersChecked,
    LockResult,
    OffsetLookupFailed,
    OffsetQueried,
    OffsetRead,
    OffsetsPersisted,
    OffsetsPersistFailed,
    QueuesUnlocked,
    RouteUpdated,
)
from rocket_rebalance.core.events import Event
from rocket_rebalance.model import MAX_GROUP_MEMBERS, RETRY_GROUP_TOPIC_PREFIX, MessageQueue, first_few
from rocket_rebalance.route import TopicRoute
from rocket_rebalance.runtime.members import MemberLanguages
from rocket_rebalance.runtime.metrics import ConsumeMetrics
from rocket_rebalance.runtime.offset_store import (
    BrokerOffsets,
    OffsetStore,
    OffsetStoreError,
    persist_steps,
    read_steps,
)
from rocket_rebalance.runtime.service import Pool, Service
from rocket_rebalance.runtime.settings import MemberListTooLongError, ReleaseInDoubtError, SubscriptionMismatchError
from rocket_rebalance.runtime.steps import Steps, call
from rocket_rebalance.runtime.transport import (
    GroupRegistration,
    NotificationStream,
    Transport,
    TransportError,
)
from rocket_rebalance.subscription import SubscriptionExpression

__all__ = ["DEAD_HOLDERS_IN_DOUBT_KIND", "DEAD_HOLDERS_KIND", "Brokers"]

log = logging.getLogger("rocket_rebalance.runtime")

NOTIFICATIONS_UNEXPECTED = "notifications: unexpected error"
DEAD_HOLDERS_KIND = "release of a gone member's locks"
DEAD_HOLDERS_IN_DOUBT_KIND = "release of a gone member's locks: unlock in doubt"


class Brokers:
    """Our side of every broker: the core's requests carried out, heartbeats, notification streams."""

    def __init__(
        self,
        service: Service,
        offset_store: OffsetStore | BrokerOffsets,
        languages: MemberLanguages,
        metrics: ConsumeMetrics | None,
    ) -> None:
        self._service = service
        self._offset_store = offset_store
        self._languages = languages
        self._metrics = metrics
        self.topics = service.core.topics  # what heartbeats announce; refreshed from each SendHeartbeat
        self._lock = threading.Lock()
        self._known: set[str] = set()  # every broker a route named (under _lock)
        self._heartbeating: set[str] = set()  # brokers with a heartbeat under way (under _lock)
        self._heartbeat_again: set[str] = set()  # brokers asked for one while one was under way (under _lock)
        self._losses: dict[str, int] = {}  # broker -> connections to it lost so far (core rule L9's epochs)
        self._listening: set[str] = set()  # brokers whose notification stream is kept open (service context)
        self._listen_backoff: dict[str, float] = {}  # each broker's next reconnect delay (service context)
        self.streams: dict[str, NotificationStream] = {}  # each broker's open stream, cancelled at shutdown

    def known(self) -> list[str]:
        """Every broker any route has named (read from pool threads too, hence the lock)."""
        with self._lock:
            return sorted(self._known)

    # ------------------------------------------------------------------ the core's requests

    def _io_call(self, what: str, steps: Steps[Event | None]) -> None:
        """Run ``steps`` on the I/O pool and post the event they return. An exception they did not expect (a
        codec error a wire let through, say) is reported under a kind of its own: otherwise it would vanish, and the
        core would only see a request that never answered."""
        kind = f"{what}: unexpected error"
        service = self._service

        def answered(event: Event | None) -> None:
            service.health.ok(kind)
            if event is not None:
                service.post(event)

        if not service.closing.is_set():
            service.spawn("io", kind, steps, answered)

    def fetch_routes(self, topics: Iterable[str]) -> None:
        for topic in topics:
            self._io_call(f"route of {topic}", self.fetch_route(topic, self.post_if_event))

    def fetch_consumer_list(self, topic: str, broker: str | None) -> None:
        self._io_call(f"member list for {topic}", self._fetch_consumers(topic, broker))

    def send_heartbeat(self, topics: tuple[str, ...]) -> None:
        self.topics = topics
        self.heartbeat(topics)  # on the broker pool: it does not wait here

    def lock(self, broker: str, queues: tuple[MessageQueue, ...], epoch: int) -> None:
        self._io_call(f"lock at {broker}", self._lock_steps(broker, queues, epoch))

    def release_dead_holders(
        self, broker: str, holders: tuple[str, ...], queues: tuple[MessageQueue, ...], request: int, deadline: float
    ) -> None:
        self._io_call(DEAD_HOLDERS_KIND, self._release_dead_holders(broker, holders, queues, request, deadline))

    def unlock(self, broker: str, queues: tuple[MessageQueue, ...]) -> None:
        self._io_call(f"unlock at {broker}", self._unlock(broker, queues))

    def read_offset(self, mq: MessageQueue, request: int) -> None:
        stored = read_steps(self._offset_store, mq)
        self._io_call(f"offset of {mq}", self._lookup(mq, request, stored, OffsetRead))

    def query_max_offset(self, mq: MessageQueue, request: int) -> None:
        highest = call(Transport.max_offset, mq)
        self._io_call(f"max offset of {mq}", self._lookup(mq, request, highest, OffsetQueried))

    def search_offset(self, mq: MessageQueue, request: int, timestamp_ms: int) -> None:
        search = call(Transport.search_offset, mq, timestamp_ms)
        self._io_call(f"offset search of {mq}", self._lookup(mq, request, search, OffsetQueried))

    def persist(self, offsets: Mapping[MessageQueue, int], epochs: Mapping[str, int]) -> None:
        """Write ``offsets``; a broker named in ``epochs`` whose connection was lost since (core rule O6) gets none
        of it: its queues are answered as not stored, and the core, which hears of the loss first, drops them."""
        with self._lock:
            stale = {broker for broker, epoch in epochs.items() if self._losses.get(broker, 0) != epoch}
        if stale:
            left_out = {mq: offset for mq, offset in offsets.items() if mq.broker_name in stale}
            log.debug("offset write not sent to %s: its connection was lost since the write was decided", stale)
            self._service.post(OffsetsPersistFailed(left_out))
            offsets = {mq: offset for mq, offset in offsets.items() if mq.broker_name not in stale}
            if not offsets:
                return
        self._io_call("persist offsets", self._persist(dict(offsets)))

    # ------------------------------------------------------------------ routes and member lists

    def post_if_event(self, event: Event | None) -> None:
        if event is not None:
            self._service.post(event)

    def fetch_route(self, topic: str, report: Callable[[Event | None], None]) -> Steps[None]:
        """Fetch a route and ``report`` its ``RouteUpdated`` (None when it failed), once. A broker seen for the
        first time is sent a heartbeat before the route is reported, so this client is a member there before any
        round asks it for the member list (the periodic heartbeat is 30 s away); the heartbeats run on the broker
        pool, and the new brokers' streams are opened and the route reported after the last."""
        health = self._service.health
        try:
            route: TopicRoute = yield from call(Transport.route, topic)
        except TransportError as error:
            if error.code == "NOT_FOUND" and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                log.debug("route of %s: %s (the broker creates it at our first heartbeat)", topic, error)
            else:
                health.failed(f"route of {topic}", error)
            report(None)
            return
        health.ok(f"route of {topic}")
        with self._lock:
            new = [broker for broker in dict.fromkeys(route.brokers()) if broker not in self._known]
            self._known.update(new)
        queues = frozenset(route.subscribe_queues())
        updated = RouteUpdated(topic, queues, route.member_list_broker(), route.masterless)

        def known() -> None:
            self._service.post(partial(self._listen_to, new))
            report(updated)

        if new:
            self.heartbeat(self.topics, new, then=known)
        else:
            known()

    def _listen_to(self, new_brokers: list[str]) -> None:
        """Open a notification stream to each broker seen for the first time."""
        for broker in new_brokers:
            if broker not in self._listening and not self._service.closing.is_set():
                self._listening.add(broker)
                self._open_stream(broker)

    def _fetch_consumers(self, topic: str, broker: str | None) -> Steps[Event]:
        """The group's member list for ``topic`` from ``broker`` (the core's choice: None when the topic's route
        names no broker, which counts as a failed list)."""
        if broker is None:
            return ConsumerListFetched(topic, None)
        service = self._service
        group = service.config.consumer_group
        try:
            ids: list[str] = yield from call(Transport.consumer_list, broker, group)
        except TransportError as error:
            service.health.failed(f"member list for {topic}", error)
            return ConsumerListFetched(topic, None)
        if len(ids) > MAX_GROUP_MEMBERS:
            # Sorting and allocating it, let alone building a hash ring of it, would hold the service context and
            # gigabytes; no real group comes near. Refused as a failed list (core rule R3), and said loudly.
            refusal = MemberListTooLongError(
                f"{len(ids)} members of group {group} listed by {broker}; "
                f"the limit is {MAX_GROUP_MEMBERS} per group, so this consumer keeps its queues and does not rebalance"
            )
            service.health.failed(f"member list for {topic}", refusal, logging.ERROR)
            return ConsumerListFetched(topic, None)
        service.health.ok(f"member list for {topic}")
        yield from self._languages.members_seen(ids)
        return ConsumerListFetched(topic, tuple(ids))

    # ------------------------------------------------------------------ heartbeats

    def heartbeat(
        self, topics: tuple[str, ...], brokers: Sequence[str] | None = None, then: Callable[[], None] | None = None
    ) -> None:
        """Register at ``brokers`` (every broker a route named, by default) on the broker pool, without waiting:
        ``then`` is called once each has answered or failed. A broker whose heartbeat is still under way is not sent
        another (a round of unresponsive brokers must not queue up behind the last)."""
        config = self._service.config
        registration = GroupRegistration(
            config.consumer_group,
            push=config.push_consumer,
            message_model=config.message_model,
            consume_from_where=config.consume_from_where,
            topics=topics,
            expressions=self._service.expressions,
        )
        with self._lock:
            wanted = sorted(self._known) if brokers is None else brokers
            targets = [broker for broker in wanted if broker not in self._heartbeating]
            self._heartbeat_again.update(broker for broker in wanted if broker in self._heartbeating)
            self._heartbeating.update(targets)
        self._at_brokers("broker", "heartbeat task", targets, partial(self._heartbeat_one, registration), then)

    def _heartbeat_one(self, registration: GroupRegistration, broker: str) -> Steps[None]:
        """One heartbeat, and once more if another was asked for meanwhile (a reconnect's must not be lost behind
        a periodic one under way on the connection that closed). A success is told to the core with the number
        of connection losses before it was sent (rule L9: only one sent after the last loss lists us again), and
        only if it was sent while our stream to ``broker`` listed us (core rule L6): a broker lists a client ID
        once per connection, so a heartbeat sent before ours was confirmed (the start's, sent before any stream
        opens; or one while the gRPC stream awaits its greeting) finds the ID listed once for a clone's
        connection, and a round that read that list would take the clone's queues and, by the shared ID, its
        locks. Such a heartbeat is followed by another once the stream lists us (:meth:`_heartbeat_once_listed`)."""
        service = self._service
        again = True
        while again:
            if service.closing.is_set():
                break
            with self._lock:
                epoch = self._losses.get(broker, 0)
            stream = self.streams.get(broker)
            listed = stream is not None and stream.lists_us
            try:
                yield from self._check_subscriptions(broker, registration.topics)
                yield from call(Transport.heartbeat, broker, service.config.client_id, registration)
            except TransportError as error:
                service.health.failed("heartbeat", error, at=broker)
            else:
                service.health.ok("heartbeat", at=broker)
                if listed:
                    service.post(BrokerRegistered(broker, epoch))
                else:
                    service.post(partial(self._heartbeat_once_listed, broker))
            with self._lock:
                again = broker in self._heartbeat_again
                self._heartbeat_again.discard(broker)
                if not again:
                    self._heartbeating.discard(broker)

    def _heartbeat_once_listed(self, broker: str) -> None:
        """(Service context.) After a heartbeat that could not register us (L6), heartbeat ``broker`` again as soon
        as its stream lists us, looking every shortest reconnect wait while the stream awaits the broker's
        confirmation. Nothing while no stream is open: its opening sends a heartbeat of its own."""
        stream = self.streams.get(broker)
        if stream is None or stream.ended or self._service.closing.is_set():
            return
        if stream.lists_us:
            self.heartbeat(self.topics, [broker])
        else:
            self._service.later(
                self._service.settings.reconnect_backoff[0], partial(self._heartbeat_once_listed, broker)
            )

    def _at_brokers(
        self,
        pool: Pool,
        what: str,
        brokers: Sequence[str],
        steps: Callable[[str], Steps[None]],
        then: Callable[[], None] | None = None,
    ) -> None:
        """``steps(broker)`` for each broker on ``pool``; ``then`` is called once all of them have ended (or were
        refused: the engine is shut down)."""
        left = [len(brokers)]
        lock = threading.Lock()

        def finished() -> None:
            with lock:
                left[0] -= 1
                last = left[0] == 0
            if last and then is not None:
                then()

        def one(broker: str) -> Steps[None]:
            try:
                yield from steps(broker)
            finally:
                finished()

        if not brokers:
            left[0] = 1
            finished()
        for broker in brokers:
            if not self._service.spawn(pool, what, one(broker)):
                finished()

    def _check_subscriptions(self, broker: str, topics: Iterable[str]) -> Steps[None]:
        """Compare the group's subscription table at ``broker`` with ours, just before our heartbeat rewrites it:
        the broker filters every member's pulls by that one table, so a member subscribing otherwise (``*`` beside
        ``TagA``, or other tags) makes the broker withhold messages from some members, which are then lost to the
        group. Reported per topic and broker until a later look there finds another member's row alike
        (RocketMQ's "inconsistent subscription"; mqadmin only says "different subscription", this names what
        differs)."""
        service = self._service
        group = service.config.consumer_group
        try:
            table = yield from call(Transport.subscription_table, broker, group)
        except TransportError as error:
            # advisory: an unreachable broker is the heartbeat's failure to report, and a user allowed to consume
            # may not be allowed this read (ACL), which must not make a working consumer look unhealthy
            log.debug("subscription check at %s skipped: %s", broker, error)
            return
        for topic in topics:
            ours = service.expressions.get(topic) or SubscriptionExpression()
            row = table.get(topic)
            topic_kind = f"subscription of {topic}"
            if row is None or (row.expression.filters_like(ours) and not row.ours):
                service.health.ok(topic_kind, at=broker)  # nobody else's row, or another member's and alike
                continue
            if row.expression.filters_like(ours):
                continue  # our own heartbeat's row: it says nothing of the other members, so a report stands
            service.health.failed(
                topic_kind,
                SubscriptionMismatchError(
                    f"group {group} subscribes {topic} with {str(row.expression)!r} at "
                    f"{broker}, this consumer with {str(ours)!r}: the broker filters every member's pulls by one of "
                    "them, so messages that only one expression accepts are lost to the group; subscribe every "
                    "member alike"
                ),
                logging.ERROR,
                at=broker,  # each broker has its table: one where it agrees clears nothing at another
            )

    # ------------------------------------------------------------------ locks

    def _lock_steps(self, broker: str, queues: tuple[MessageQueue, ...], epoch: int) -> Steps[Event]:
        service = self._service
        config = service.config
        try:
            granted = yield from call(Transport.lock, broker, config.consumer_group, config.client_id, queues)
        except TransportError as error:
            service.health.failed(f"lock at {broker}", error)
            granted = set()
        else:
            service.health.ok(f"lock at {broker}")
        return LockResult(frozenset(queues), frozenset(granted), epoch)

    def _release_dead_holders(
        self, broker: str, holders: tuple[str, ...], queues: tuple[MessageQueue, ...], request: int, deadline: float
    ) -> Steps[Event]:
        """Core rule L9: ask the broker whom it lists, and release the locks of ``queues`` held by each of
        ``holders`` it does not list, at once, all by ``deadline`` (``time.monotonic()``, the core's clock): a list
        that comes later is not acted on, no unlock is sent after it, and an unlock not answered by then is in
        doubt. The deadline is what makes a release safe: a holder that registered again after the list was read
        locks only its ``rejoin_delay`` later, after every unlock answered by the deadline was carried out; an
        unlock unanswered by then may be carried out any time later, also after the holder locked again, which
        the core guards against (rule L9 (c)) and is reported here at ERROR."""
        service = self._service
        group = service.config.consumer_group
        nothing = DeadHoldersChecked(broker, request, frozenset(queues))
        if time.monotonic() >= deadline:
            log.info("release at %s not begun before its deadline: no locks released", broker)
            return nothing
        try:
            listed = set((yield from call(Transport.consumer_list, broker, group)))
        except TransportError as error:
            service.health.failed(DEAD_HOLDERS_KIND, error, at=broker)
            return nothing
        if time.monotonic() > deadline:
            log.info("member list of %s came after the release's deadline: no locks released on its word", broker)
            return nothing
        released: set[str] = set()
        in_doubt: dict[str, str] = {}  # holder -> why its unlock is in doubt
        for holder in holders:
            if holder in listed or holder == service.config.client_id:
                continue
            if time.monotonic() >= deadline:
                log.info("release at %s: its deadline passed before the unlock of %s was sent", broker, holder)
                break
            try:
                yield from call(Transport.unlock, broker, group, holder, queues)
            except TransportError as error:
                in_doubt[holder] = str(error)
                continue
            if time.monotonic() > deadline:
                in_doubt[holder] = "answered after the release's deadline"
                continue
            released.add(holder)
        service.health.ok(DEAD_HOLDERS_KIND, at=broker)
        if in_doubt:
            self._report_in_doubt(broker, queues, in_doubt)
        elif released:  # the broker carries out releases in time again
            service.health.ok(DEAD_HOLDERS_IN_DOUBT_KIND, at=broker)
        if released:
            log.warning(
                "released the locks %s held on %d queue(s) of %s (%s): it is no longer a member there, so it "
                "stopped consuming them when the broker dropped it",
                ", ".join(sorted(released)),
                len(queues),
                broker,
                first_few(queues),
            )
        return DeadHoldersChecked(broker, request, frozenset(queues), frozenset(released), frozenset(in_doubt))

    def _report_in_doubt(self, broker: str, queues: Sequence[MessageQueue], in_doubt: Mapping[str, str]) -> None:
        """Core rule L9 (c)'s remainder, said at ERROR (a kind of its own, so a failed list logged just before
        cannot keep it out of the log): an unlock on a gone member's behalf that may be carried out after the
        member came back and locked its queues again. Cleared by the next release at that broker answered in
        time."""
        for holder, why in sorted(in_doubt.items()):
            error = ReleaseInDoubtError(
                f"the unlock of {holder}'s locks on {len(queues)} queue(s) of {broker} ({first_few(queues)}) was not "
                f"answered in time ({why}): if {broker} carries it out after {holder} registered again and locked "
                f"them again, another consumer may consume them beside it until its next lock renewal is refused; "
                f"this consumer does not lock them for the broker's lock lifetime"
            )
            self._service.health.failed(DEAD_HOLDERS_IN_DOUBT_KIND, error, logging.ERROR, at=broker)

    def _unlock(self, broker: str, queues: tuple[MessageQueue, ...]) -> Steps[Event]:
        service = self._service
        config = service.config
        try:
            yield from call(Transport.unlock, broker, config.consumer_group, config.client_id, queues)
        except TransportError as error:
            service.health.failed(f"unlock at {broker}", error)
        else:
            service.health.ok(f"unlock at {broker}")
        return QueuesUnlocked(frozenset(queues))

    def unregister(self, deadline: float, broker: str) -> Steps[None]:
        """Tell ``broker`` we leave (at shutdown; nothing once ``deadline`` has passed)."""
        if time.monotonic() >= deadline:
            return  # abandoned: the shutdown's time is spent
        config = self._service.config
        try:
            yield from call(Transport.unregister, broker, config.client_id, config.consumer_group)
        except TransportError as error:
            self._service.health.failed("unregister", error, at=broker)

    # ------------------------------------------------------------------ offsets

    def _lookup(
        self,
        mq: MessageQueue,
        request: int,
        read: Steps[int | None],
        answer: Callable[[MessageQueue, int, int], Event],
    ) -> Steps[Event]:
        health = self._service.health
        try:
            offset = yield from read
        except (TransportError, OffsetStoreError) as error:
            health.failed(f"offset look-up at {mq.broker_name}", error)
            return OffsetLookupFailed(mq, request)
        health.ok(f"offset look-up at {mq.broker_name}")
        if offset is None and answer is OffsetRead:
            return OffsetRead(mq, None, request)
        if offset is None:
            return OffsetLookupFailed(mq, request)
        return answer(mq, offset, request)

    def _persist(self, offsets: Mapping[MessageQueue, int]) -> Steps[Event]:
        service, metrics = self._service, self._metrics
        started = time.monotonic()
        try:
            stored = yield from persist_steps(self._offset_store, offsets)
        except OffsetStoreError as error:
            if metrics is not None:
                metrics.persisted(time.monotonic() - started, ok=False)
            service.health.failed("persist offsets", error, logging.ERROR)  # consumed work is not saved meanwhile
            return OffsetsPersistFailed(offsets)
        missing = {mq: offset for mq, offset in offsets.items() if mq not in stored}
        if metrics is not None:
            metrics.persisted(time.monotonic() - started, ok=not missing)
        if missing:
            failed = OffsetStoreError(f"{len(missing)} queues not stored: {', '.join(sorted(map(str, missing))[:3])}")
            service.health.failed("persist offsets", failed, logging.ERROR)
            service.post(OffsetsPersistFailed(missing))
        else:
            service.health.ok("persist offsets")
        return OffsetsPersisted(stored)

    # ------------------------------------------------------------------ notifications

    def _open_stream(self, broker: str) -> None:
        """Open the broker's notification stream on the I/O pool (refused once the engine shuts down: nothing to
        reopen then)."""
        self._service.spawn("io", NOTIFICATIONS_UNEXPECTED, self._listen(broker))

    def _listen(self, broker: str) -> Steps[None]:
        """Open this broker's notification stream; what it says, and its end, come back by the transport's
        callbacks, posted to the service context. Any failure to open it is reported and the stream tried again
        after the backoff: a broker whose stream is given up would have its notifications unheard for good."""
        service = self._service
        if service.closing.is_set():
            return
        ended = threading.Event()  # this attempt's stream has ended: what comes after it is stale
        try:
            stream = yield from call(
                Transport.connect,
                broker,
                service.config.client_id,
                partial(self._notified, broker),
                partial(self._stream_ended, broker, ended),
            )
        except Exception as error:
            if service.closing.is_set():
                return  # the shutdown closed the transport under it
            if isinstance(error, TransportError):
                service.health.failed("broker connection", error, at=broker)
            else:
                service.health.failed(NOTIFICATIONS_UNEXPECTED, error, logging.ERROR, traceback=True, at=broker)
            service.post(partial(self._reconnect_later, broker))
            return
        service.health.ok(NOTIFICATIONS_UNEXPECTED, at=broker)  # a new stream: whatever broke is past
        self.streams[broker] = stream
        if service.closing.is_set():  # shutdown began while connecting
            stream.cancel()
            return
        if not ended.is_set():
            service.health.ok("broker connection", at=broker)
        # A (re)connected broker may have restarted and forgotten us: register before rebalancing.
        self.heartbeat(self.topics, [broker], then=lambda: service.post(ConsumerIdsChanged()))

    def _notified(self, broker: str, group: str) -> None:
        """(On the transport's thread or loop.) A notification: the stream is good, and a round is due if ours."""
        self._service.post(partial(self._heard, broker, group))

    def _heard(self, broker: str, group: str) -> None:
        self._listen_backoff.pop(broker, None)  # a good connection: the next one is tried after the shortest wait
        if group == self._service.config.consumer_group:
            self._service.handle(ConsumerIdsChanged())

    def _stream_ended(self, broker: str, ended: threading.Event, error: TransportError | None) -> None:
        """(On the transport's thread or loop, or in ``connect`` itself.) Report the loss and reconnect after the
        backoff; nothing of it when it is the shutdown that ended the stream."""
        ended.set()
        service = self._service
        if service.closing.is_set():
            return
        if error is not None:
            service.health.failed("broker connection", error, at=broker)
        with self._lock:
            epoch = self._losses[broker] = self._losses.get(broker, 0) + 1
        service.post(BrokerConnectionLost(broker, epoch))
        service.post(partial(self._reconnect_later, broker))

    def _reconnect_later(self, broker: str) -> None:
        """Open the broker's stream again after its backoff, which doubles up to the longest until it hears."""
        low, high = self._service.settings.reconnect_backoff
        delay = self._listen_backoff.get(broker, low)
        self._listen_backoff[broker] = min(high, delay * 2)
        self._service.later(delay, partial(self._open_stream, broker))
