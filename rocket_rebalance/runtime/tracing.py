"""The engine's part that writes message trace (``enable_trace``): SubBefore and SubAfter records of each listener
call, batched, to the trace topic, so that ``mqadmin queryMsgTraceById`` and the dashboard show who consumed a
message, when, how long it took and whether it succeeded, as for a Java member with ``enableMsgTrace``.

What Java does (``ConsumeMessageTraceHookImpl``, ``AsyncTraceDispatcher``, 5.3.3), and so do we: before a call, a
SubBefore record of its messages (those whose ``TRACE_ON`` property is not ``false``; the broker's region from
``MSG_REGION``, and no record at all without one, as Java drops it); after it, a SubAfter record with the call's
time divided by its messages, success (every message consumed) and how it ended; records wait in a bounded buffer
(Java's 2048) and go out :data:`~rocket_rebalance.trace.TRACE_BATCH_NUM` at a time, when that many wait or
:data:`TRACE_FLUSH_INTERVAL` after the first one came, to a broker of the trace topic's route, brokers in turn. A
pull consumer writes both records when ``poll()`` hands out a queue's messages, successful and at once, as Java's
``DefaultLitePullConsumer`` does.

Never in the listener's way: a consume thread only appends to the buffer under a short lock, and when the buffer
is full the record is dropped, counted and reported (health kind :data:`TRACE_DROP_KIND`, rate-limited like every
kind), never waited for. One send runs at a time, on the engine's I/O pool (a task under asyncio); a failed send
loses its records, counted and reported too (:data:`TRACE_SEND_KIND`). At shutdown, what is left is sent within
what the shutdown's timeout leaves, after the listener's last call (see the engines' ``finish_shutdown``).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from rocket_rebalance.model import without_namespace
from rocket_rebalance.route import TopicRoute
from rocket_rebalance.runtime.service import Service
from rocket_rebalance.runtime.steps import Steps, call
from rocket_rebalance.runtime.transport import Message, Transport, TransportError
from rocket_rebalance.trace import (
    FIELD_SEPARATOR,
    ConsumeReturnType,
    SubAfter,
    SubBefore,
    TraceBean,
    TraceRecord,
    trace_messages,
)

__all__ = [
    "TRACE_BUFFER_SIZE",
    "TRACE_DROP_KIND",
    "TRACE_FLUSH_INTERVAL",
    "TRACE_SEND_KIND",
    "TraceBuffer",
    "TraceDroppedError",
    "Traced",
    "Tracing",
]

TRACE_BUFFER_SIZE = 2048  # Java's traceContextQueue: records waiting to be sent
TRACE_FLUSH_INTERVAL = 5.0  # Java's flushTraceInterval: a record waits at most this long for its batch to fill
TRACE_ROUTE_EVERY = 30.0  # the trace topic's route is looked up again after this (Java's route refresh)
TRACE_DROP_KIND = "message trace buffer"
TRACE_SEND_KIND = "message trace"
REGION_PROPERTY = "MSG_REGION"  # the broker's regionId, set on every message it stores
TRACE_SWITCH_PROPERTY = "TRACE_ON"  # the broker's traceOn: "false" means its messages are not traced


class TraceDroppedError(Exception):
    """Trace records were not written (the buffer was full, a send failed, or the shutdown's time ran out): the
    messages they describe were consumed, but ``queryMsgTraceById`` will not show it."""


class TraceBuffer:
    """Records waiting to be sent, at most ``capacity``: :meth:`offer` never blocks and refuses (and counts) a
    record that does not fit. Thread-safe: consume threads offer, the sender takes."""

    def __init__(self, capacity: int = TRACE_BUFFER_SIZE) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity must be a whole number of at least 1, got {capacity!r}")
        self.capacity = capacity
        self.dropped = 0  # trace lines (one per record and message) refused because the buffer was full
        self._records: deque[TraceRecord] = deque()
        self._lock = threading.Lock()

    def offer(self, record: TraceRecord) -> tuple[bool, int]:
        """Append ``record`` if there is room: (taken, records waiting now)."""
        with self._lock:
            if len(self._records) >= self.capacity:
                self.dropped += len(record.beans)
                return False, len(self._records)
            self._records.append(record)
            return True, len(self._records)

    def take(self, most: int) -> list[TraceRecord]:
        """Up to ``most`` of the oldest records, removed."""
        with self._lock:
            return [self._records.popleft() for _ in range(min(most, len(self._records)))]

    def __len__(self) -> int:
        return len(self._records)


@dataclass(frozen=True, slots=True)
class Traced:
    """A listener call's SubBefore record, kept for its SubAfter: the call began at ``began`` (monotonic s)."""

    before: SubBefore
    began: float


def _lines(records: Sequence[TraceRecord]) -> int:
    """Trace lines (one per record and message) in ``records``: what ``queryMsgTraceById`` would have shown."""
    return sum(len(record.beans) for record in records)


class Tracing:
    """A consumer's message trace (see the module docstring): ``before`` and ``after`` from consume threads, the
    rest in the service context or on the I/O pool."""

    def __init__(self, service: Service) -> None:
        self._service = service
        settings = service.settings
        self.topic = settings.trace_topic
        self._batch = settings.trace_batch_size
        self.buffer = TraceBuffer()
        self.written = 0  # trace lines the broker took
        self.lost = 0  # trace lines sent and refused, or left at shutdown
        self._lock = threading.Lock()
        self._sending = False  # a send runs, or one is due (the service context starts it)
        self._waiting = False  # a flush timer runs
        self._route: tuple[TopicRoute, float] | None = None
        self._turn = 0  # the broker the next trace message goes to, in turn

    # ------------------------------------------------------------------ from the consume threads

    def before(self, batch: Sequence[Message]) -> Traced | None:
        """The SubBefore record of a call about to consume ``batch``, buffered; None when nothing of it is traced
        (every message's ``TRACE_ON`` is ``false``, or the broker set no region: Java drops such records too)."""
        beans: list[TraceBean] = []
        region: str | None = None
        for message in batch:
            if message.properties.get(TRACE_SWITCH_PROPERTY) == "false":
                continue
            region = message.properties.get(REGION_PROPERTY)
            keys = message.keys or None  # Java's getKeys() is null without KEYS, written "null"
            beans.append(TraceBean(message.msg_id, keys, message.reconsume_times, message.topic))
        if not beans or region is None:
            return None
        group = without_namespace(self._service.config.consumer_group, batch[0].namespace)  # Java's, as written
        before = SubBefore(int(time.time() * 1000), region, group, uuid.uuid4().hex.upper(), tuple(beans))
        self._offer(before)
        return Traced(before, time.monotonic())

    def after(self, traced: Traced, size: int, success: bool, ended: ConsumeReturnType) -> None:
        """The SubAfter record of the call ``traced`` on ``size`` messages, buffered: its time divided by ``size``
        (in whole ms, as Java divides), whether it consumed them, and how it ended (an answer given after
        ``consume_timeout`` ended in ``TIME_OUT``, as Java's ``consumeRT`` check says)."""
        took = time.monotonic() - traced.began
        answered = ended in (ConsumeReturnType.SUCCESS, ConsumeReturnType.FAILED)
        if answered and took >= self._service.settings.consume_timeout:
            ended = ConsumeReturnType.TIME_OUT
        before = traced.before
        cost = int(took * 1000) // max(size, 1)
        now_ms = int(time.time() * 1000)
        self._offer(SubAfter(before.request_id, before.beans, cost, success, int(ended), now_ms, before.group))

    def polled(self, batch: Sequence[Message]) -> None:
        """A pull consumer's ``poll()`` handed out ``batch`` (one queue's): both records, successful, at once."""
        traced = self.before(batch)
        if traced is not None:
            self.after(traced, len(batch), True, ConsumeReturnType.SUCCESS)

    def _offer(self, record: TraceRecord) -> None:
        taken, waiting = self.buffer.offer(record)
        if not taken:
            self._service.health.failed(
                TRACE_DROP_KIND,
                TraceDroppedError(
                    f"the trace buffer is full ({self.buffer.capacity} records): {self.buffer.dropped} trace "
                    f"lines dropped so far, their messages consumed without trace; is {self.topic} writable?"
                ),
            )
            return
        with self._lock:
            if self._sending or (self._waiting and waiting < self._batch):
                return
            if waiting >= self._batch:
                self._sending = True
            else:
                self._waiting = True
        self._service.post(self._send if self._sending else self._wait)

    # ------------------------------------------------------------------ the sender (service context, I/O pool)

    def _wait(self) -> None:
        self._service.later(TRACE_FLUSH_INTERVAL, self._due)

    def _due(self) -> None:
        """The flush timer: send what waits, unless a send already runs."""
        with self._lock:
            self._waiting = False
            if self._sending or not len(self.buffer):
                return
            self._sending = True
        self._send()

    def _send(self) -> None:
        if not self._service.spawn("io", "message trace send", self._sending_steps()):
            with self._lock:  # the engine is shut down: its finish_shutdown sends what is left
                self._sending = False

    def _sending_steps(self) -> Steps[None]:
        """One send of what waits; whatever becomes of it (an unexpected error too, which the pool reports), the
        next may start."""
        try:
            yield from self.send_waiting(None)
        finally:
            self._service.post(self._sent)

    def _sent(self) -> None:
        """A send ended: another at once if a batch is full again, else a timer for what is left."""
        waiting = len(self.buffer)
        with self._lock:
            self._sending = waiting >= self._batch
            wait = not self._sending and waiting > 0 and not self._waiting
            self._waiting = self._waiting or wait
        if self._sending:
            self._send()
        elif wait:
            self._wait()

    def send_waiting(self, deadline: float | None) -> Steps[None]:
        """Send the records waiting now, :attr:`_batch` at a time (split by origin topic and size as Java
        splits them); with a ``deadline`` (the shutdown's), what is left at it is counted lost and reported."""
        while True:
            if deadline is not None and time.monotonic() >= deadline:
                self.abandon()
                return
            records = self.buffer.take(self._batch)
            if not records:
                return
            for body, keys in trace_messages(records):
                yield from self._send_one(body, keys)

    def _send_one(self, body: str, keys: list[str]) -> Steps[None]:
        lines = body.count(FIELD_SEPARATOR)
        try:
            broker = yield from self._next_broker()
            yield from call(Transport.send, self.topic, broker, [body.encode("utf-8")], None, "", " ".join(keys))
        except TransportError as error:
            self._route = None  # looked up again: the broker may have left the route
            self.lost += lines
            self._service.health.failed(
                TRACE_SEND_KIND,
                TraceDroppedError(f"{lines} trace records not written to {self.topic} ({self.lost} so far): {error}"),
            )
            return
        self.written += lines
        self._service.health.ok(TRACE_SEND_KIND)
        self._service.health.ok(TRACE_DROP_KIND)  # the sender keeps up again: the buffer empties

    def _next_broker(self) -> Steps[str]:
        """A broker of the trace topic that takes writes, each in turn (Java's producer takes the route's queues
        in turn); the route is looked up every :data:`TRACE_ROUTE_EVERY`."""
        now = time.monotonic()
        if self._route is None or now - self._route[1] >= TRACE_ROUTE_EVERY:
            self._route = (yield from call(Transport.route, self.topic)), now
        writable = sorted(d.broker_name for d in self._route[0].queue_datas if d.writable and d.write_queue_nums > 0)
        if not writable:
            raise TransportError(f"no broker takes writes to {self.topic} in its route", "NOT_FOUND")
        self._turn += 1
        return writable[self._turn % len(writable)]

    def abandon(self) -> None:
        """(At shutdown, its time run out.) What still waits is lost: counted and reported."""
        lines = _lines(self.buffer.take(len(self.buffer)))
        if lines:
            self.lost += lines
            self._service.health.failed(
                TRACE_SEND_KIND,
                TraceDroppedError(f"{lines} trace records not written to {self.topic}: the shutdown's time ran out"),
            )

    def describe(self) -> dict[str, int]:
        """Trace lines written, dropped (buffer full) and lost (sends refused, shutdown), records waiting."""
        return {
            "written": self.written,
            "dropped": self.buffer.dropped,
            "lost": self.lost,
            "waiting": len(self.buffer),
        }
