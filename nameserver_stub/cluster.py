"""The stub's domain: a NameServer's routes and several logical brokers over one store.

The gRPC services translate requests into calls here and results back; everything that depends on the state
(does the broker exist and is it up, does it host the topic, is the queue ID in range, is the offset within the
queue) is checked here, under one lock. Names and numbers that can be checked without state were already checked
by :mod:`nameserver_stub.validate`. The store is called outside the lock where it can be, and long polling waits
outside it, so a waiting pull never blocks anyone.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

from nameserver_stub.arrivals import ArrivalBoard
from nameserver_stub.broker import BrokerState
from nameserver_stub.clock import Clock
from nameserver_stub.config import MAX_QUEUE_NUMS, PERM_READ_WRITE, StubConfig, TopicQueues
from nameserver_stub.connections import Connection
from nameserver_stub.errors import FailedPrecondition, InvalidArgument, NotFound, Unavailable
from nameserver_stub.faults import Fault
from nameserver_stub.registry import GroupMembership, Member, Subscription
from nameserver_stub.store import NewMessage, OffsetRecord, QueueKey, Store, StoredMessage
from rocket_rebalance.model import PERM_READ, PERM_WRITE, MessageQueue, check_topic_name, retry_topic, sort_queues

MESSAGE_MODEL_CLUSTERING = 1  # the wire's MessageModel value
RETRY_QUEUE_NUMS = 1


class PullStatus(IntEnum):
    """Same numbers as the wire's PullStatus."""

    FOUND = 1
    NO_NEW_MSG = 2
    NO_MATCHED_MSG = 3
    OFFSET_ILLEGAL = 4


@dataclass(frozen=True)
class Route:
    topic: str
    queues: tuple[TopicQueues, ...]  # live brokers only, by broker name


@dataclass(frozen=True)
class PullResult:
    status: PullStatus
    next_offset: int
    min_offset: int
    max_offset: int
    messages: tuple[StoredMessage, ...] = ()


@dataclass(frozen=True)
class QueueProgress:
    queue: MessageQueue
    broker_offset: int
    consumer_offset: int  # -1: never committed
    last_owner: str
    lock_owner: str
    updated_ms: int

    @property
    def diff(self) -> int:
        return self.broker_offset - max(self.consumer_offset, 0)


@dataclass(frozen=True)
class ConnectionView:
    broker_name: str
    member: Member
    connected: bool
    heartbeat_age: float


@dataclass(frozen=True)
class BrokerView:
    name: str
    up: bool


def tag_filter(expression: str) -> frozenset[str] | None:
    """The tags a RocketMQ TAG expression accepts, or ``None`` for every message ("*" or empty)."""
    text = expression.strip()
    if text in ("", "*"):
        return None
    return frozenset(tag.strip() for tag in text.split("||") if tag.strip())


class Cluster:
    """Routes, brokers, offsets, locks and messages; thread-safe."""

    def __init__(self, config: StubConfig, store: Store, clock: Clock) -> None:
        self._config = config
        self._store = store
        self._clock = clock
        self._lock = threading.RLock()
        self._arrivals = ArrivalBoard(config.parked_pull_limit)
        self._round_robin: dict[tuple[str, str], int] = {}
        self._topics: dict[str, dict[str, TopicQueues]] = store.load_topics()
        names = set(config.broker_names())
        names.update(broker for brokers in self._topics.values() for broker in brokers)
        self._brokers = {name: BrokerState(name, clock) for name in sorted(names)}
        for spec in config.topics:
            for queues in spec.brokers:
                self._save_topic(spec.topic, queues)
        self.address = ""  # the served address, set once the server is bound (for BrokerData)

    # -- lookups (call with the lock held) ------------------------------------------------------------------

    def _broker(self, name: str, *, must_be_up: bool = True) -> BrokerState:
        broker = self._brokers.get(name)
        if broker is None:
            known = ", ".join(self._brokers)
            raise NotFound(f"unknown broker {name!r} (brokers: {known})")
        if must_be_up and not broker.up:
            raise Unavailable(f"broker {name!r} is down")
        return broker

    def _topic(self, broker: str, topic: str) -> TopicQueues:
        queues = self._topics.get(topic, {}).get(broker)
        if queues is None:
            raise NotFound(f"topic {topic!r} is not hosted by broker {broker!r}")
        return queues

    def _queue(self, broker: str, topic: str, queue_id: int, *, kind: str = "") -> TopicQueues:
        """Check the queue exists: ``kind`` "read"/"write" limits to those queues, else either count."""
        queues = self._topic(broker, topic)
        limit = {
            "read": queues.read_queue_nums,
            "write": queues.write_queue_nums,
        }.get(kind, max(queues.read_queue_nums, queues.write_queue_nums))
        if not 0 <= queue_id < limit:
            what = f"{kind} queues" if kind else "queues"
            raise InvalidArgument(
                f"queue_id {queue_id} is out of range: topic {topic!r} on broker {broker!r} has {limit} {what} "
                f"(0..{limit - 1})"
            )
        return queues

    def _save_topic(self, topic: str, queues: TopicQueues) -> None:
        self._store.save_topic(topic, queues)
        self._topics.setdefault(topic, {})[queues.broker_name] = queues

    # -- NameServer -----------------------------------------------------------------------------------------

    def route(self, topic: str) -> Route:
        with self._lock:
            brokers = self._topics.get(topic)
            if not brokers:
                raise NotFound(f"topic {topic!r} does not exist")
            live = tuple(brokers[name] for name in sorted(brokers) if self._brokers[name].up)
            if not live:
                raise NotFound(f"no broker hosting topic {topic!r} is up")
            return Route(topic, live)

    # -- Broker: membership ---------------------------------------------------------------------------------

    def heartbeat(self, broker_name: str, client_id: str, memberships: list[GroupMembership]) -> None:
        with self._lock:
            broker = self._broker(broker_name)
            if not broker.heartbeat(client_id, memberships):
                return
            for membership in memberships:
                if membership.message_model == MESSAGE_MODEL_CLUSTERING:
                    self._ensure_retry_topic(broker_name, membership.group)

    def _ensure_retry_topic(self, broker: str, group: str) -> None:
        """RocketMQ creates ``%RETRY%<group>`` on the broker a clustering consumer heartbeats to."""
        topic = retry_topic(group)
        if broker in self._topics.get(topic, {}):
            return
        try:
            check_topic_name(topic)
        except ValueError:
            return  # a group name near 255 characters gives a retry topic too long to exist
        self._save_topic(topic, TopicQueues(broker, RETRY_QUEUE_NUMS, RETRY_QUEUE_NUMS, PERM_READ_WRITE))

    def unregister(self, broker_name: str, client_id: str, group: str | None) -> None:
        with self._lock:
            self._broker(broker_name).leave(client_id, group)

    def consumer_ids(self, broker_name: str, group: str) -> list[str]:
        with self._lock:
            return self._broker(broker_name).client_ids(group)

    def connect(self, broker_name: str, client_id: str) -> Connection:
        with self._lock:
            return self._broker(broker_name).connect(client_id, self._config.max_streams_per_client)

    def disconnect(self, connection: Connection) -> None:
        with self._lock:
            self._brokers[connection.broker_name].disconnect(connection)

    def sweep(self) -> int:
        """Expire silent members at every live broker (the periodic scan); returns how many were removed."""
        with self._lock:
            return sum(len(b.expire(self._config.client_expiry)) for b in self._brokers.values() if b.up)

    # -- Broker: offsets ------------------------------------------------------------------------------------

    def query_offsets(self, broker: str, group: str, queues: Sequence[QueueKey]) -> list[OffsetRecord | None]:
        with self._lock:
            self._broker(broker)
            for topic, queue_id in queues:
                self._queue(broker, topic, queue_id)
        return self._store.query_offsets(broker, group, queues)

    def update_offsets(
        self, broker: str, group: str, client_id: str, offsets: Sequence[tuple[QueueKey, int]]
    ) -> list[tuple[int, bool]]:
        with self._lock:
            self._broker(broker)
            for (topic, queue_id), offset in offsets:
                self._queue(broker, topic, queue_id)
                max_offset = self._store.max_offset(broker, topic, queue_id)
                if offset > max_offset:
                    raise InvalidArgument(
                        f"offset {offset} of {topic}/{broker}/{queue_id} is beyond the queue's max offset {max_offset}"
                    )
        return self._store.commit_offsets(broker, group, client_id, offsets, self._clock.time_ms())

    # -- Broker: locks --------------------------------------------------------------------------------------

    def lock(self, broker: str, group: str, client_id: str, queues: Sequence[QueueKey]) -> list[QueueKey]:
        with self._lock:
            state = self._broker(broker)
            wanted = [self._message_queue(broker, topic, queue_id) for topic, queue_id in queues]
            locked = state.locks.try_lock(group, client_id, wanted, self._clock.monotonic(), self._config.lock_expiry)
            return [(queue.topic, queue.queue_id) for queue in locked]

    def unlock(self, broker: str, group: str, client_id: str, queues: Sequence[QueueKey]) -> list[QueueKey]:
        with self._lock:
            state = self._broker(broker)
            wanted = [self._message_queue(broker, topic, queue_id) for topic, queue_id in queues]
            return [(queue.topic, queue.queue_id) for queue in state.locks.unlock(group, client_id, wanted)]

    def _message_queue(self, broker: str, topic: str, queue_id: int) -> MessageQueue:
        self._queue(broker, topic, queue_id)
        return MessageQueue(topic, broker, queue_id)

    # -- Broker: messages -----------------------------------------------------------------------------------

    def send(
        self, broker: str, topic: str, queue_id: int | None, messages: Sequence[NewMessage]
    ) -> tuple[int, list[tuple[int, str]]]:
        with self._lock:
            self._broker(broker)
            queues = self._topic(broker, topic)
            if not queues.perm & PERM_WRITE:
                raise FailedPrecondition(f"topic {topic!r} on broker {broker!r} is not writable (perm {queues.perm})")
            if queue_id is None:
                turn = self._round_robin.get((broker, topic), 0)
                self._round_robin[(broker, topic)] = turn + 1
                queue_id = turn % queues.write_queue_nums
            else:
                self._queue(broker, topic, queue_id, kind="write")
            written = self._store.append(broker, topic, queue_id, messages, self._clock.time_ms())
        self._arrivals.arrived((broker, topic, queue_id))
        return queue_id, written

    def pull(
        self,
        broker: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        max_bytes: int,
        wait: float,
        expression: str,
    ) -> PullResult:
        with self._lock:
            self._broker(broker)
            queues = self._queue(broker, topic, queue_id, kind="read")
            if not queues.perm & PERM_READ:
                raise FailedPrecondition(f"topic {topic!r} on broker {broker!r} is not readable (perm {queues.perm})")
        key = (broker, topic, queue_id)
        tags = tag_filter(expression)
        deadline = time.monotonic() + min(wait, self._config.max_long_poll)
        while True:
            seen = self._arrivals.version(key)
            result = self._pull_once(broker, topic, queue_id, offset, max_count, max_bytes, tags)
            remaining = deadline - time.monotonic()
            if result.status is not PullStatus.NO_NEW_MSG or remaining <= 0:
                return result
            if not self._arrivals.wait(key, seen, remaining):
                return self._pull_once(broker, topic, queue_id, offset, max_count, max_bytes, tags)

    def _pull_once(
        self,
        broker: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        max_bytes: int,
        tags: frozenset[str] | None,
    ) -> PullResult:
        min_offset = self._store.min_offset(broker, topic, queue_id)
        max_offset = self._store.max_offset(broker, topic, queue_id)
        if offset < min_offset:
            return PullResult(PullStatus.OFFSET_ILLEGAL, min_offset, min_offset, max_offset)
        if offset > max_offset:
            return PullResult(PullStatus.OFFSET_ILLEGAL, max_offset, min_offset, max_offset)
        if offset == max_offset:
            return PullResult(PullStatus.NO_NEW_MSG, offset, min_offset, max_offset)
        scanned = self._store.read(broker, topic, queue_id, offset, max_count, max_bytes)
        next_offset = scanned[-1].queue_offset + 1 if scanned else offset
        matched = tuple(m for m in scanned if tags is None or m.tags in tags)
        status = PullStatus.FOUND if matched else PullStatus.NO_MATCHED_MSG
        return PullResult(status, next_offset, min_offset, max_offset, matched)

    def parked_pulls(self) -> int:
        """Pulls waiting for a message right now (long polling)."""
        return self._arrivals.waiting

    def max_offset(self, broker: str, topic: str, queue_id: int) -> int:
        with self._lock:
            self._broker(broker)
            self._queue(broker, topic, queue_id)
        return self._store.max_offset(broker, topic, queue_id)

    def min_offset(self, broker: str, topic: str, queue_id: int) -> int:
        with self._lock:
            self._broker(broker)
            self._queue(broker, topic, queue_id)
        return self._store.min_offset(broker, topic, queue_id)

    def search_offset(self, broker: str, topic: str, queue_id: int, timestamp_ms: int) -> int:
        with self._lock:
            self._broker(broker)
            self._queue(broker, topic, queue_id)
        return self._store.search_offset(broker, topic, queue_id, timestamp_ms)

    # -- Admin ----------------------------------------------------------------------------------------------

    def create_or_update_topic(self, broker: str, topic: str, read: int, write: int, perm: int) -> None:
        for name, count in (("read_queue_nums", read), ("write_queue_nums", write)):
            if not 1 <= count <= MAX_QUEUE_NUMS:
                raise InvalidArgument(f"{name} {count} is outside 1..{MAX_QUEUE_NUMS}")
        if not 0 <= perm <= 7:
            raise InvalidArgument(f"perm {perm} is not a PermName bit set (0..7)")
        with self._lock:
            self._broker(broker, must_be_up=False)
            self._save_topic(topic, TopicQueues(broker, read, write, perm or PERM_READ_WRITE))

    def brokers(self) -> list[BrokerView]:
        with self._lock:
            return [BrokerView(name, state.up) for name, state in self._brokers.items()]

    def consumer_progress(self, group: str, topic: str | None) -> list[QueueProgress]:
        rows: list[QueueProgress] = []
        with self._lock:
            now = self._clock.monotonic()
            for name, state in self._brokers.items():
                if not state.up:
                    continue
                offsets = self._store.group_offsets(name, group)
                topics = {t for t, _ in offsets}
                for member in state.registry.members(group):
                    topics.update(member.membership.topics())
                for t in sorted(topics):
                    queues = self._topics.get(t, {}).get(name)
                    if queues is None or (topic is not None and t != topic):
                        continue
                    for queue_id in range(queues.read_queue_nums):
                        queue = MessageQueue(t, name, queue_id)
                        record = offsets.get((t, queue_id))
                        rows.append(
                            QueueProgress(
                                queue,
                                self._store.max_offset(name, t, queue_id),
                                -1 if record is None else record.offset,
                                "" if record is None else record.last_client_id,
                                state.locks.owner(group, queue, now) or "",
                                0 if record is None else record.updated_ms,
                            )
                        )
        order = {queue: i for i, queue in enumerate(sort_queues(row.queue for row in rows))}
        return sorted(rows, key=lambda row: order[row.queue])

    def running_info_target(self, group: str, client_id: str) -> Connection:
        """The stream to ask ``client_id`` about ``group`` on: its latest at the first broker (up, by name) where
        it is a member of the group and connected, as RocketMQ's broker asks the channel it has for the client."""
        with self._lock:
            for state in self._brokers.values():
                if state.up and client_id in state.registry.client_ids(group):
                    connection = state.latest_connection(client_id)
                    if connection is not None:
                        return connection
        raise NotFound(f"consumer {client_id!r} of group {group!r} has no open connection")

    def topics(self) -> list[str]:
        """Every topic :meth:`route` answers for, sorted."""
        with self._lock:
            return sorted(topic for topic, brokers in self._topics.items() if any(self._brokers[b].up for b in brokers))

    def consumer_groups(self) -> list[str]:
        """Every group registered, or with committed offsets, at a broker that is up; sorted."""
        stored = self._store.offset_groups()
        with self._lock:
            up = {name for name, state in self._brokers.items() if state.up}
            groups = {group for broker, group in stored if broker in up}
            groups.update(group for name in up for group in self._brokers[name].registry.groups())
        return sorted(groups)

    def consumer_connection(self, group: str, broker: str | None) -> list[ConnectionView]:
        with self._lock:
            if broker is not None:
                self._broker(broker)
            now = self._clock.monotonic()
            views = [  # one row per stream, so processes sharing a client ID show as the several they are
                ConnectionView(name, member, state.is_connected(member.client_id), now - member.last_heartbeat)
                for name, state in self._brokers.items()
                if state.up and (broker is None or name == broker)
                for member in state.registry.members(group)
                for _ in range(state.listings(member.client_id))
            ]
        if not views:
            raise NotFound(f"consumer group {group!r} is not online")
        return views

    def reset_offsets(
        self,
        group: str,
        topic: str,
        broker: str | None,
        queue_id: int | None,
        offset: int | None,
        timestamp_ms: int | None,
    ) -> list[tuple[MessageQueue, int]]:
        """Admin reset: set offsets (clamped to [min, max]), backwards allowed."""
        with self._lock:
            hosts = self._topics.get(topic, {})
            if broker is not None:
                self._broker(broker, must_be_up=False)
                self._topic(broker, topic)
                names = [broker]
            else:
                if not hosts:
                    raise NotFound(f"topic {topic!r} does not exist")
                names = sorted(hosts)
            if queue_id is not None:
                for name in names:
                    self._queue(name, topic, queue_id)
            targets = [
                (name, qid)
                for name in names
                for qid in ([queue_id] if queue_id is not None else range(hosts[name].read_queue_nums))
            ]
        reset: list[tuple[MessageQueue, int]] = []
        for name, qid in targets:
            low = self._store.min_offset(name, topic, qid)
            high = self._store.max_offset(name, topic, qid)
            if timestamp_ms is not None:
                target = self._store.search_offset(name, topic, qid, timestamp_ms)
            else:
                target = min(max(offset or 0, low), high)
            stored, _ = self._store.commit_offsets(
                name, group, "", [((topic, qid), target)], self._clock.time_ms(), allow_backwards=True
            )[0]
            reset.append((MessageQueue(topic, name, qid), stored))
        return reset

    # -- Admin: fault injection -----------------------------------------------------------------------------

    def _check_faults_enabled(self) -> None:
        if not self._config.enable_faults:
            raise FailedPrecondition("fault injection is disabled; start the stub with --enable-faults")

    def set_broker_state(self, broker: str, up: bool) -> None:
        self._check_faults_enabled()
        with self._lock:
            state = self._broker(broker, must_be_up=False)
            if up:
                state.come_up()
            elif state.up:
                state.go_down()

    def inject_fault(self, broker: str, fault: Fault) -> list[Fault]:
        self._check_faults_enabled()
        with self._lock:
            state = self._broker(broker, must_be_up=False)
            state.faults.add(fault)
            return state.faults.faults()

    def clear_faults(self, broker: str | None) -> None:
        self._check_faults_enabled()
        with self._lock:
            states = [self._broker(broker, must_be_up=False)] if broker is not None else self._brokers.values()
            for state in states:
                state.faults.clear()
                state.release_held_notifications()

    # -- life -----------------------------------------------------------------------------------------------

    def subscriptions(self, group: str) -> list[Subscription]:
        """The group's subscription table over every live broker: latest heartbeat wins per topic."""
        table: dict[str, tuple[float, Subscription]] = {}
        with self._lock:
            for state in self._brokers.values():
                if not state.up:
                    continue
                for member in state.registry.members(group):
                    for sub in member.membership.subscriptions:
                        if sub.topic not in table or table[sub.topic][0] <= member.last_heartbeat:
                            table[sub.topic] = (member.last_heartbeat, sub)
        return [table[topic][1] for topic in sorted(table)]

    def close(self) -> None:
        """End every notification stream and long poll (the server is stopping)."""
        with self._lock:
            for state in self._brokers.values():
                state.shutdown()
        self._arrivals.close()
