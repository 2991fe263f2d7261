"""What a consumer's metrics are made of, without any metrics library: read at scrape time, recorded rarely.

Most figures are read when a scraper asks (:func:`take_view`, on the service thread): the core's round history
keeps totals since the start (rounds by trigger, failed rounds by kind, queues assigned, revoked and lost, refused
locks, applied-round latencies: :class:`~rocket_rebalance.core.history.RoundTotals`), and the process-queue
table says what is held and cached now. What only a moment knows is recorded by :class:`ConsumeMetrics`, which
the engine holds only when metrics are on: one call per consume task (the RocketMQ 5 client's process and await
times) and one per offset write (its latency). Distributions are kept as bucket counts with a weight, so a task
that consumed many messages is one call however many messages it counts.

The export (``prometheus_client``) is :mod:`rocket_rebalance.runtime.prometheus`, loaded only when metrics are
asked for.
"""

from __future__ import annotations

import bisect
import copy
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from rocket_rebalance.core import RebalanceCore
from rocket_rebalance.core.history import LATENCY_BOUNDS, RoundTotals
from rocket_rebalance.model import MessageQueue

__all__ = [
    "AWAIT_TIME_BOUNDS_MS",
    "CALLBACK_BOUNDS",
    "PERSIST_BOUNDS",
    "PROCESS_TIME_BOUNDS_MS",
    "ConsumeMetrics",
    "Histogram",
    "MetricsView",
    "take_view",
]

PROCESS_TIME_BOUNDS_MS = (1.0, 5.0, 10.0, 100.0, 1000.0, 10_000.0, 60_000.0)
"""``rocketmq_process_time``'s buckets in the RocketMQ 5 Java client (``HistogramEnum.PROCESS_TIME``), in ms."""
AWAIT_TIME_BOUNDS_MS = (1.0, 5.0, 20.0, 100.0, 1000.0, 5000.0, 10_000.0)
"""``rocketmq_await_time``'s buckets in the same client (``HistogramEnum.AWAIT_TIME``), in ms."""
PERSIST_BOUNDS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Seconds: an offset write is one round trip to each broker (a request times out after 3 s)."""
CALLBACK_BOUNDS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 15.0, 60.0)
"""Seconds a rebalance listener's callback took (a revoke is waited for up to ``revoke_timeout``, 15 s)."""


@dataclass
class Histogram:
    """Bucket counts (not cumulative; the last one is above every bound), their sum and count."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    sum: float = 0.0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)

    @property
    def count(self) -> int:
        return sum(self.counts)

    def observe(self, value: float, weight: int = 1) -> None:
        """``weight`` observations of ``value`` (a bound includes its value, as Prometheus' ``le``)."""
        self.counts[bisect.bisect_left(self.bounds, value)] += weight
        self.sum += value * weight

    def copy(self) -> Histogram:
        return Histogram(self.bounds, list(self.counts), self.sum)


class ConsumeMetrics:
    """What the engine records for metrics, from any of its threads, under one lock.

    ``rocketmq_process_time`` is the RocketMQ 5 client's per-message figure: each message of a listener call is
    counted with the call's duration, by its outcome. A consume task makes several calls and is timed as a whole,
    so each of its messages is counted with the task's mean call time. ``rocketmq_await_time`` is counted once per
    listener call, as Java counts it: from the pull that brought the task's first message to the start of the
    task. Batches retried here after a failed send-back are not awaited again (Java counts their wait afresh)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: dict[tuple[str, bool], Histogram] = {}
        self._await: dict[str, Histogram] = {}
        self._persist = Histogram(PERSIST_BOUNDS)
        self._persist_failures = 0
        self._callbacks: dict[str, Histogram] = {}

    def consumed(self, topic: str, awaited_ms: float | None, call_ms: float, ok: int, failed: int, calls: int) -> None:
        """One consume task of ``topic``: ``calls`` listener calls of ``call_ms`` each (on average) after
        ``awaited_ms`` in the buffer (None: not known), ``ok`` messages consumed and ``failed`` not."""
        with self._lock:
            for success, weight in ((True, ok), (False, failed)):
                if weight:
                    process = self._process.get((topic, success))
                    if process is None:
                        process = self._process[topic, success] = Histogram(PROCESS_TIME_BOUNDS_MS)
                    process.observe(call_ms, weight)
            if awaited_ms is not None:
                waited = self._await.get(topic)
                if waited is None:
                    waited = self._await[topic] = Histogram(AWAIT_TIME_BOUNDS_MS)
                waited.observe(max(awaited_ms, 0.0), calls)

    def persisted(self, seconds: float, ok: bool) -> None:
        """One offset write, answered (or failed) after ``seconds``; not ``ok`` if any queue was not stored."""
        with self._lock:
            self._persist.observe(seconds)
            if not ok:
                self._persist_failures += 1

    def callback(self, name: str, seconds: float) -> None:
        """One rebalance listener callback (``assigned``, ``revoked`` or ``lost``) that took ``seconds``."""
        with self._lock:
            histogram = self._callbacks.get(name)
            if histogram is None:
                histogram = self._callbacks[name] = Histogram(CALLBACK_BOUNDS)
            histogram.observe(seconds)

    def callback_times(self) -> dict[str, Histogram]:
        """Each rebalance callback's durations, by name."""
        with self._lock:
            return {name: histogram.copy() for name, histogram in self._callbacks.items()}

    def process_times(self) -> dict[tuple[str, bool], Histogram]:
        """(topic, consumed) -> the process times of its messages."""
        with self._lock:
            return {key: histogram.copy() for key, histogram in self._process.items()}

    def await_times(self) -> dict[str, Histogram]:
        with self._lock:
            return {topic: histogram.copy() for topic, histogram in self._await.items()}

    def persist_times(self) -> tuple[Histogram, int]:
        """The offset writes' latencies and how many failed."""
        with self._lock:
            return self._persist.copy(), self._persist_failures


@dataclass(frozen=True)
class MetricsView:
    """What the core shows a scrape, copied on the service thread. ``last_applied_ago`` is seconds since the
    latest applied round (None: none yet); ``last_trigger`` and ``last_cause`` are those of the latest round that
    changed the allocation or failed (empty: none yet)."""

    totals: RoundTotals
    latency: Histogram
    assigned: dict[str, int]
    cached_messages: dict[str, int]
    cached_bytes: dict[str, int]
    last_applied_ago: float | None
    last_trigger: str
    last_cause: str
    trace: Mapping[str, int] | None = None  # the message trace's lines written, dropped, lost, waiting (None: off)


def take_view(
    core: RebalanceCore,
    cached_bytes: Mapping[MessageQueue, int],
    now: float,
    trace: Mapping[str, int] | None = None,
) -> MetricsView:
    """(Service thread.) The core's figures for a scrape; ``cached_bytes`` is each started queue's bodies pulled
    and not consumed (the engine keeps them), ``now`` the core's clock, ``trace`` what the message trace
    describes (None: trace is off)."""
    totals = core.history.totals
    messages: dict[str, int] = {}
    sizes: dict[str, int] = {}
    for mq in core.held_queues():
        pq = core.process_queue(mq)
        messages[mq.topic] = messages.get(mq.topic, 0) + (pq.in_flight_count if pq is not None else 0)
        sizes[mq.topic] = sizes.get(mq.topic, 0) + cached_bytes.get(mq, 0)
    change = totals.last_change
    return MetricsView(
        totals=copy.deepcopy(totals),
        latency=Histogram(LATENCY_BOUNDS, list(totals.latency_counts), totals.latency_sum),
        assigned={topic: len(core.allocated(topic)) for topic in core.topics},
        cached_messages=messages,
        cached_bytes=sizes,
        last_applied_ago=None if totals.last_applied_at is None else max(now - totals.last_applied_at, 0.0),
        last_trigger="" if change is None else change.trigger,
        last_cause="" if change is None else change.cause,
        trace=trace,
    )
