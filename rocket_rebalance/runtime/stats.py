"""A consumer's consume statistics, computed as the Java client's ``ConsumerStatsManager`` computes them.

What ``mqadmin consumerStatus``, the RocketMQ dashboard and rocketmq-exporter read from a consumer's running info
(its ``statusTable``, one ``ConsumeStatus`` per subscribed topic): pull RT and TPS, consume RT, consume OK and
failed TPS, and the failed messages of the last hour. Java keeps, per ``topic@group``, five ``StatsItem``s (a sum
and a count each) and samples every item's running totals on a scheduler: every 10 s into a minute window of 7
samples, every 10 minutes into an hour window of 7. A rate is (last - first) / (last time - first time) over a
window's samples, an RT the window's sum over its count, in milliseconds; an item's first sample is preceded by a
zero one 10 s (10 min) earlier. The figures are the same here, with the same names and units.

No thread samples here: the sample due at each tick is taken by the first call after it (a record or a read),
from the totals as they stood at the tick, since nothing was recorded in between without that call sampling
first. So the windows hold exactly what Java's scheduler would have put in them, and a consumer that records
nothing costs nothing.

The engine records once per pulled batch and once per consumed batch (never per message), under one lock.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from rocket_rebalance.model import MessageQueue
from rocket_rebalance.runtime.transport import TopicConsumeStatus

__all__ = ["MINUTE_SAMPLING", "ConsumeStats", "Tally", "Window", "WindowFigures", "elapsed_ms"]

MINUTE_SAMPLING = 10.0
"""Seconds between the samples of the minute window (Java's ``samplingInSeconds``)."""
HOUR_SAMPLING = 600.0
"""Seconds between the samples of the hour window (Java's ``samplingInMinutes``)."""
WINDOW_SAMPLES = 7
"""Samples a window keeps (Java: ``csListMinute.size() > 7`` drops the first), so it spans six intervals."""


@dataclass(frozen=True)
class WindowFigures:
    """Java's ``StatsSnapshot`` of one window: the sum over it, per second, and per recorded call (``avgpt``)."""

    sum: float = 0.0
    tps: float = 0.0
    avgpt: float = 0.0


@dataclass
class Window:
    """One window's samples, (time, calls, sum) of the running totals, oldest first."""

    interval: float
    samples: deque[tuple[float, int, float]] = field(default_factory=lambda: deque(maxlen=WINDOW_SAMPLES))

    def sample(self, at: float, calls: int, total: float) -> None:
        if not self.samples:
            self.samples.append((at - self.interval, 0, 0.0))
        self.samples.append((at, calls, total))

    def figures(self) -> WindowFigures:
        if not self.samples:
            return WindowFigures()
        first, last = self.samples[0], self.samples[-1]
        total = last[2] - first[2]
        calls = last[1] - first[1]
        return WindowFigures(total, total / (last[0] - first[0]), total / calls if calls > 0 else 0.0)


@dataclass
class _Item:
    """One ``StatsItem``: running totals and their two windows."""

    calls: int = 0
    total: float = 0.0
    minute: Window = field(default_factory=lambda: Window(MINUTE_SAMPLING))
    hour: Window = field(default_factory=lambda: Window(HOUR_SAMPLING))


_PULL_RT, _PULL_TPS, _CONSUME_RT, _CONSUME_OK, _CONSUME_FAILED = range(5)


class ConsumeStats:
    """Java's consume statistics of one consumer, per topic, and each queue's last consumption (``ProcessQueue``'s
    ``lastConsumeTimestamp``). Thread-safe: pulls are recorded on the service thread, consumptions on the consume
    pool. ``clock`` (seconds, monotonic) and ``wall`` (seconds since the epoch) are there for tests."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._wall = wall
        self._lock = threading.Lock()
        self._items: dict[tuple[str, int], _Item] = {}
        started = clock()
        self._next_minute_sample = started  # Java's schedulers sample at once, then at fixed rates
        self._next_hour_sample = started
        self._last_consumed: dict[MessageQueue, int] = {}
        self._started: dict[MessageQueue, int] = {}

    def pulled(self, mq: MessageQueue, count: int, rt_ms: float) -> None:
        """A pull answered FOUND with ``count`` messages after ``rt_ms`` (Java counts the RT of every FOUND answer,
        and the messages of one that carried any)."""
        with self._lock:
            self._sample(self._clock())
            self._add(mq.topic, _PULL_RT, rt_ms)
            if count:
                self._add(mq.topic, _PULL_TPS, count)

    def consumed(self, mq: MessageQueue, ok: int, failed: int, rt_ms: float, calls: int = 1) -> None:
        """The listener finished ``calls`` batches in ``rt_ms`` altogether: ``ok`` messages consumed, ``failed``
        not (the runtime hands several batches to a task and records them at once; Java's consume RT is per
        batch, so it is counted as ``calls`` batches)."""
        with self._lock:
            self._sample(self._clock())
            self._add(mq.topic, _CONSUME_RT, rt_ms, calls)
            self._add(mq.topic, _CONSUME_OK, ok)
            self._add(mq.topic, _CONSUME_FAILED, failed)
            self._last_consumed[mq] = int(self._wall() * 1000)

    def queue_started(self, mq: MessageQueue) -> None:
        """A queue entered the process-queue table: Java's ``ProcessQueue`` starts its last consumption at its
        creation, so a new queue is not taken for a blocked one (``analyzeProcessQueue``)."""
        with self._lock:
            self._last_consumed[mq] = self._started[mq] = int(self._wall() * 1000)

    def queue_dropped(self, mq: MessageQueue) -> None:
        with self._lock:
            self._last_consumed.pop(mq, None)
            self._started.pop(mq, None)

    def started_ms(self, mq: MessageQueue) -> int:
        """When the queue entered the process-queue table, in epoch milliseconds (Java's ``ProcessQueue`` starts
        its ``lastLockTimestamp`` there too); 0 when unknown."""
        with self._lock:
            return self._started.get(mq, 0)

    def last_consume_ms(self, mq: MessageQueue) -> int:
        """When the queue's last batch was consumed (or it started), in epoch milliseconds; 0 when unknown."""
        with self._lock:
            return self._last_consumed.get(mq, 0)

    def status(self, topic: str) -> TopicConsumeStatus:
        """The topic's ``ConsumeStatus`` as Java's ``ConsumerStatsManager.consumeStatus`` computes it: rates and
        RTs over the minute window (consume RT over the hour when the minute saw no batch), failed messages over
        the hour."""
        with self._lock:
            self._sample(self._clock())
            minute = {kind: self._figures(topic, kind, hour=False) for kind in range(5)}
            consume_rt = minute[_CONSUME_RT]
            if consume_rt.sum == 0:
                consume_rt = self._figures(topic, _CONSUME_RT, hour=True)
            return TopicConsumeStatus(
                pull_rt=minute[_PULL_RT].avgpt,
                pull_tps=minute[_PULL_TPS].tps,
                consume_rt=consume_rt.avgpt,
                consume_ok_tps=minute[_CONSUME_OK].tps,
                consume_failed_tps=minute[_CONSUME_FAILED].tps,
                consume_failed_msgs=round(self._figures(topic, _CONSUME_FAILED, hour=True).sum),
            )

    def _figures(self, topic: str, kind: int, hour: bool) -> WindowFigures:
        item = self._items.get((topic, kind))
        if item is None:
            return WindowFigures()
        return (item.hour if hour else item.minute).figures()

    def _add(self, topic: str, kind: int, value: float, calls: int = 1) -> None:
        item = self._items.get((topic, kind))
        if item is None:
            item = self._items[topic, kind] = _Item()
        item.calls += calls
        item.total += value

    def _sample(self, now: float) -> None:
        """Take every sample due by ``now`` at its own tick. Totals have not moved since the first due tick (each
        record samples first), so every due tick sees the same totals; only the last ``WINDOW_SAMPLES`` ticks can
        still be in a window, so a long idle stretch costs at most that many."""
        if now >= self._next_minute_sample:
            self._next_minute_sample = self._take(now, self._next_minute_sample, MINUTE_SAMPLING, hour=False)
        if now >= self._next_hour_sample:
            self._next_hour_sample = self._take(now, self._next_hour_sample, HOUR_SAMPLING, hour=True)

    def _take(self, now: float, due: float, interval: float, hour: bool) -> float:
        ticks = int((now - due) // interval) + 1
        first = due + max(0, ticks - WINDOW_SAMPLES) * interval
        for tick in range(min(ticks, WINDOW_SAMPLES)):
            at = first + tick * interval
            for item in self._items.values():
                (item.hour if hour else item.minute).sample(at, item.calls, item.total)
        return due + ticks * interval


def elapsed_ms(started: float) -> float:
    """Milliseconds since ``started`` (a ``time.monotonic()`` reading): the RT of a pull or a batch."""
    return (time.monotonic() - started) * 1000


class Tally:
    """Messages consumed so far (``Consumer.consumed``), added to by the consume threads and by ``poll()``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.total = 0

    def add(self, count: int) -> None:
        with self._lock:
            self.total += count
