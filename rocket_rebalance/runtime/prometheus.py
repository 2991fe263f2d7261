"""Our consumers' metrics in Prometheus' form (``pip install 'rocket-rebalance[metrics]'``): a collector that
reads each consumer when scraped, and the ``/metrics`` server of ``consume --metrics-port``.

Loaded only when metrics are asked for (``PushConsumer(metrics=...)``): ``import rocket_rebalance`` and a
consumer without metrics never load ``prometheus_client``. Nothing is pushed into metric objects as things
happen: each scrape reads the core's totals on the service thread and what :class:`ConsumeMetrics` recorded
(see :mod:`rocket_rebalance.runtime.metrics`). Names and labels:

``rocket_rebalance_*`` (labels ``group``, ``strategy``, ``client``, and ``topic`` where the figure is per topic)
    ``rebalances_total{trigger}``, ``rebalances_failed_total{reason}``, ``rebalance_latency_seconds`` (histogram,
    trigger to table applied), ``last_rebalance_seconds_ago``, ``last_rebalance_info{trigger,reason}``,
    ``assigned_queues{topic}``, ``queues_assigned_total{topic}``, ``queues_revoked_total{topic}``,
    ``queues_lost_total{topic}``, ``lock_failures_total{topic}``, ``offset_persist_seconds`` (histogram),
    ``offset_persist_failures_total``, ``rebalance_listener_seconds{callback}`` (histogram: how long each
    ``on_queues_assigned``, ``on_queues_revoked`` and ``on_queues_lost`` took; with the fence a revoke holds up
    the queue's next owner for that long); with message trace on, ``trace_lines_total{outcome}`` (trace lines
    ``written``, ``dropped`` because the bounded buffer was full, ``lost`` because a send was refused or the
    shutdown's time ran out: each a consumed message whose trace ``queryMsgTraceById`` will not show) and
    ``trace_waiting_records`` (records buffered, not yet sent).
``rocketmq_*``: the RocketMQ 5 client's consumer metrics, with its names, units (ms) and labels (``topic``,
    ``consumer_group``, ``client_id``), so its dashboards read ours unchanged
    ``process_time{invocation_status}`` and ``await_time`` (histograms with its buckets),
    ``consumer_cached_messages``, ``consumer_cached_bytes``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from prometheus_client import REGISTRY, CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from rocket_rebalance.runtime.driver import Driver
from rocket_rebalance.runtime.metrics import ConsumeMetrics, Histogram

__all__ = ["ConsumerSource", "add_consumer", "serve"]

_OURS = ("group", "strategy", "client")
_JAVA = ("topic", "consumer_group", "client_id")


@dataclass(frozen=True)
class ConsumerSource:
    """One consumer as the collector reads it: its names, its engine once started, what it recorded."""

    group: str
    client: str
    strategy: str
    engine: Callable[[], Driver | None]
    recorded: ConsumeMetrics


class _Families:
    """The families of one scrape, created on first use and yielded in a fixed order."""

    def __init__(self) -> None:
        self._families: dict[str, Metric] = {}

    def counter(self, name: str, doc: str, labels: Sequence[str]) -> CounterMetricFamily:
        family = self._families.setdefault(name, CounterMetricFamily(name, doc, labels=labels))
        assert isinstance(family, CounterMetricFamily)
        return family

    def gauge(self, name: str, doc: str, labels: Sequence[str]) -> GaugeMetricFamily:
        family = self._families.setdefault(name, GaugeMetricFamily(name, doc, labels=labels))
        assert isinstance(family, GaugeMetricFamily)
        return family

    def histogram(self, name: str, doc: str, labels: Sequence[str], values: Sequence[str], hist: Histogram) -> None:
        family = self._families.setdefault(name, HistogramMetricFamily(name, doc, labels=labels))
        assert isinstance(family, HistogramMetricFamily)
        buckets: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip([*map(str, hist.bounds), "+Inf"], hist.counts, strict=True):
            running += count
            buckets.append((bound, running))
        family.add_metric(list(values), buckets, hist.sum)

    def __iter__(self) -> Iterator[Metric]:
        return iter(self._families.values())


def _describe() -> list[Metric]:
    """Every family this collector yields, empty: what a registry checks names against when registering."""
    names = [
        ("counter", "rocket_rebalance_rebalances"),
        ("counter", "rocket_rebalance_rebalances_failed"),
        ("histogram", "rocket_rebalance_rebalance_latency_seconds"),
        ("gauge", "rocket_rebalance_last_rebalance_seconds_ago"),
        ("gauge", "rocket_rebalance_last_rebalance_info"),
        ("gauge", "rocket_rebalance_assigned_queues"),
        ("counter", "rocket_rebalance_queues_assigned"),
        ("counter", "rocket_rebalance_queues_revoked"),
        ("counter", "rocket_rebalance_queues_lost"),
        ("counter", "rocket_rebalance_lock_failures"),
        ("histogram", "rocket_rebalance_offset_persist_seconds"),
        ("counter", "rocket_rebalance_offset_persist_failures"),
        ("histogram", "rocket_rebalance_rebalance_listener_seconds"),
        ("counter", "rocket_rebalance_trace_lines"),
        ("gauge", "rocket_rebalance_trace_waiting_records"),
        ("histogram", "rocketmq_process_time"),
        ("histogram", "rocketmq_await_time"),
        ("gauge", "rocketmq_consumer_cached_messages"),
        ("gauge", "rocketmq_consumer_cached_bytes"),
    ]
    return [Metric(name, "", kind) for kind, name in names]


def _collect_one(families: _Families, source: ConsumerSource) -> None:
    ours = [source.group, source.strategy, source.client]
    java = (source.group, source.client)
    persist, persist_failures = source.recorded.persist_times()
    families.histogram(
        "rocket_rebalance_offset_persist_seconds", "Offset writes, answered or failed", _OURS, ours, persist
    )
    families.counter(
        "rocket_rebalance_offset_persist_failures", "Offset writes that failed or left queues unstored", _OURS
    ).add_metric(ours, persist_failures)
    for name, hist in sorted(source.recorded.callback_times().items()):
        families.histogram(
            "rocket_rebalance_rebalance_listener_seconds",
            "Rebalance listener callbacks (assigned, revoked, lost), seconds each took",
            (*_OURS, "callback"),
            (*ours, name),
            hist,
        )
    for (topic, success), hist in sorted(source.recorded.process_times().items()):
        status = "success" if success else "failure"
        families.histogram(
            "rocketmq_process_time",
            "Listener time of each message, ms (RocketMQ 5 client)",
            (*_JAVA, "invocation_status"),
            (topic, *java, status),
            hist,
        )
    for topic, hist in sorted(source.recorded.await_times().items()):
        families.histogram(
            "rocketmq_await_time",
            "Time a listener call's messages waited in the client after their pull, ms (RocketMQ 5 client)",
            _JAVA,
            (topic, *java),
            hist,
        )
    engine = source.engine()
    view = None if engine is None else engine.metrics_view()
    if view is None:
        return  # not started, or its service thread does not answer: only what was recorded
    totals = view.totals
    rounds = families.counter("rocket_rebalance_rebalances", "Rounds started, by trigger", (*_OURS, "trigger"))
    for trigger, count in sorted(totals.rounds.items()):
        rounds.add_metric([*ours, trigger], count)
    failed = families.counter(
        "rocket_rebalance_rebalances_failed",
        "Rounds whose table was kept from the allocation, by reason (a round counts once under each reason)",
        (*_OURS, "reason"),
    )
    for reason, count in sorted(totals.failed.items()):
        failed.add_metric([*ours, reason], count)
    families.histogram(
        "rocket_rebalance_rebalance_latency_seconds",
        "Applied rounds, from the trigger (or the time the round was due) to the process-queue table applied",
        _OURS,
        ours,
        view.latency,
    )
    if view.last_applied_ago is not None:
        families.gauge(
            "rocket_rebalance_last_rebalance_seconds_ago", "Seconds since the last round's table was applied", _OURS
        ).add_metric(ours, view.last_applied_ago)
    if view.last_trigger:
        families.gauge(
            "rocket_rebalance_last_rebalance_info",
            "The last round that changed the allocation or failed: its trigger and what it answered",
            (*_OURS, "trigger", "reason"),
        ).add_metric([*ours, view.last_trigger, view.last_cause], 1)
    per_topic = (*_OURS, "topic")
    assigned = families.gauge("rocket_rebalance_assigned_queues", "Queues allocated to this consumer now", per_topic)
    for topic, count in sorted(view.assigned.items()):
        assigned.add_metric([*ours, topic], count)
    for name, doc, counts in (
        ("rocket_rebalance_queues_assigned", "Queues rounds allocated to this consumer", totals.assigned),
        ("rocket_rebalance_queues_revoked", "Queues rounds took away, released with their offsets", totals.revoked),
        ("rocket_rebalance_queues_lost", "Queues dropped without a handover (lock or connection lost)", totals.lost),
        ("rocket_rebalance_lock_failures", "Queue locks refused or unanswered", totals.lock_refusals),
    ):
        family = families.counter(name, doc, per_topic)
        for topic, count in sorted(counts.items()):
            family.add_metric([*ours, topic], count)
    if view.trace is not None:
        lines = families.counter(
            "rocket_rebalance_trace_lines",
            "Message trace lines (one per record and message): written, or dropped (buffer full) or lost (send "
            "refused, shutdown) and so never shown by queryMsgTraceById",
            (*_OURS, "outcome"),
        )
        for outcome in ("written", "dropped", "lost"):
            lines.add_metric([*ours, outcome], view.trace[outcome])
        families.gauge(
            "rocket_rebalance_trace_waiting_records", "Message trace records buffered, not yet sent", _OURS
        ).add_metric(ours, view.trace["waiting"])
    for name, doc, values in (
        ("rocketmq_consumer_cached_messages", "Messages pulled and not yet consumed", view.cached_messages),
        ("rocketmq_consumer_cached_bytes", "Bytes of the messages pulled and not yet consumed", view.cached_bytes),
    ):
        gauge = families.gauge(name, f"{doc} (RocketMQ 5 client)", _JAVA)
        for topic, value in sorted(values.items()):
            gauge.add_metric([topic, *java], value)


class ConsumersCollector:
    """Every consumer registered with one registry: families are shared, so several consumers of a process can
    be scraped together (a registry refuses two collectors that name the same families)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sources: list[ConsumerSource] = []

    def add(self, source: ConsumerSource) -> None:
        with self._lock:
            self._sources.append(source)

    def remove(self, source: ConsumerSource) -> None:
        with self._lock:
            self._sources.remove(source)

    def describe(self) -> Iterable[Metric]:
        return _describe()

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            sources = list(self._sources)
        families = _Families()
        for source in sources:
            _collect_one(families, source)
        return list(families)


_collectors: dict[CollectorRegistry, ConsumersCollector] = {}  # one per registry
_collectors_lock = threading.Lock()


def add_consumer(source: ConsumerSource, registry: CollectorRegistry | None = None) -> Callable[[], None]:
    """Scrape ``source`` through ``registry`` (prometheus_client's default one when None); returns what removes
    it again."""
    registry = REGISTRY if registry is None else registry
    with _collectors_lock:
        collector = _collectors.get(registry)
        if collector is None:
            collector = _collectors[registry] = ConsumersCollector()
            registry.register(collector)
    collector.add(source)
    return lambda: collector.remove(source)


def serve(port: int, address: str, registry: CollectorRegistry) -> tuple[Callable[[], None], int]:
    """Serve ``registry`` on ``http://address:port/metrics`` (port 0: a free one) from a daemon thread; returns
    what stops the server, and the port it listens on. An address or port that cannot be bound raises OSError."""
    server, thread = start_http_server(port, address, registry)

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(5)

    return stop, server.server_port
