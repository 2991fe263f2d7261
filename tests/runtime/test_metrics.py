"""Metrics (``PushConsumer(metrics=...)``): the recorded distributions, the collector's families as a scraper parses
them, and a real consumer against an in-process stub: its rounds, queues, consumption and a refused lock."""

from __future__ import annotations

import bisect

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from rocket_rebalance.lab.wait import wait_until
from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.metrics import (
    AWAIT_TIME_BOUNDS_MS,
    PROCESS_TIME_BOUNDS_MS,
    ConsumeMetrics,
    Histogram,
)
from rocket_rebalance.runtime.prometheus import ConsumerSource, add_consumer
from rocket_rebalance.runtime.transport import GRPC_SCHEME, Message
from tests.runtime.test_consumer import FAST, produce
from tests.stub.conftest import StartStub
from tests.stub.harness import connect_clients, lock

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(registry: CollectorRegistry) -> Samples:
    """Every sample of a scrape, parsed back from the text format as Prometheus reads it."""
    text = generate_latest(registry).decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels`` (0 when none)."""
    wanted = set(labels.items())
    return sum(v for (n, got), v in samples.items() if n == name and wanted <= got)


@given(st.lists(st.tuples(st.floats(0, 100_000, allow_nan=False), st.integers(1, 50)), max_size=30))
def test_a_weighted_histogram_counts_each_observation_in_its_le_bucket(observed: list[tuple[float, int]]) -> None:
    hist = Histogram(PROCESS_TIME_BOUNDS_MS)
    for amount, weight in observed:
        hist.observe(amount, weight)
    for index, bound in enumerate(PROCESS_TIME_BOUNDS_MS):
        below = sum(weight for amount, weight in observed if amount <= bound)
        assert sum(hist.counts[: index + 1]) == below  # Prometheus' le: the bound itself is inside
    assert hist.count == sum(weight for _, weight in observed)
    assert abs(hist.sum - sum(a * w for a, w in observed)) <= 1e-6 * max(1.0, hist.sum)


def test_a_consume_task_counts_its_messages_by_outcome_and_its_calls_as_awaited() -> None:
    recorded = ConsumeMetrics()
    recorded.consumed("T", 12.0, 4.0, ok=30, failed=2, calls=4)
    recorded.consumed("T", None, 200.0, ok=1, failed=0, calls=1)  # arrival unknown: no await counted
    process = recorded.process_times()
    assert process["T", True].count == 31 and process["T", False].count == 2
    assert process["T", True].sum == 30 * 4.0 + 200.0
    waited = recorded.await_times()["T"]
    assert waited.count == 4 and waited.counts[bisect.bisect_left(AWAIT_TIME_BOUNDS_MS, 12.0)] == 4


def test_the_collector_exports_what_was_recorded_under_the_rocketmq_5_names_before_the_start() -> None:
    registry = CollectorRegistry()
    recorded = ConsumeMetrics()
    recorded.consumed("T", 3.0, 7.0, ok=5, failed=1, calls=2)
    recorded.persisted(0.02, ok=True)
    recorded.persisted(3.0, ok=False)
    remove = add_consumer(ConsumerSource("G", "c1", "AVG", lambda: None, recorded), registry)
    samples = scrape(registry)
    java = {"topic": "T", "consumer_group": "G", "client_id": "c1"}
    assert value(samples, "rocketmq_process_time_count", invocation_status="success", **java) == 5
    assert value(samples, "rocketmq_process_time_count", invocation_status="failure", **java) == 1
    assert value(samples, "rocketmq_process_time_bucket", invocation_status="success", le="5.0", **java) == 0
    assert value(samples, "rocketmq_process_time_bucket", invocation_status="success", le="10.0", **java) == 5
    assert value(samples, "rocketmq_await_time_count", **java) == 2
    ours = {"group": "G", "strategy": "AVG", "client": "c1"}
    assert value(samples, "rocket_rebalance_offset_persist_seconds_count", **ours) == 2
    assert value(samples, "rocket_rebalance_offset_persist_failures_total", **ours) == 1
    assert value(samples, "rocket_rebalance_rebalances_total") == 0  # not started: no core to read
    remove()
    assert scrape(registry) == {}


def test_a_consumer_shows_its_rounds_queues_and_consumption(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    produce(address, 5)
    registry = CollectorRegistry()
    consumed: list[int] = []

    def listener(batch: list[Message]) -> None:
        consumed.extend(m.queue_offset for m in batch)

    consumer = PushConsumer(
        address, "GID_metrics", topics=["TopicTest"], listener=listener, client_id="m1", metrics=registry, **FAST
    )
    other = PushConsumer(  # a second consumer of the process, scraped through the same registry
        address, "GID_metrics_b", topics=["TopicTest"], listener=lambda batch: None, client_id="m2", metrics=registry
    )
    consumer.start()
    other.start()
    try:
        wait_until(lambda: len(consumed) == 40, 15, "every message consumed")
        ours = {"group": "GID_metrics", "strategy": "AVG", "client": "m1"}
        java = {"topic": "TopicTest", "consumer_group": "GID_metrics", "client_id": "m1"}
        wait_until(
            lambda: value(scrape(registry), "rocket_rebalance_offset_persist_seconds_count", **ours) > 0,
            15,
            "an offset write",
        )
        samples = scrape(registry)
        assert value(samples, "rocket_rebalance_rebalances_total", **ours) >= 1
        assert value(samples, "rocket_rebalance_rebalances_failed_total", **ours) == 0
        assert value(samples, "rocket_rebalance_assigned_queues", topic="TopicTest", **ours) == 8
        assert value(samples, "rocket_rebalance_queues_assigned_total", topic="TopicTest", **ours) == 8
        assert value(samples, "rocket_rebalance_queues_revoked_total", **ours) == 0
        assert value(samples, "rocket_rebalance_rebalance_latency_seconds_count", **ours) >= 1
        assert value(samples, "rocket_rebalance_last_rebalance_seconds_ago", **ours) >= 0
        assert value(samples, "rocketmq_process_time_count", invocation_status="success", **java) == 40
        assert value(samples, "rocketmq_await_time_count", **java) == 40  # batches of one message: a call each
        assert value(samples, "rocketmq_consumer_cached_messages", **java) == 0
        assert value(samples, "rocketmq_consumer_cached_bytes", **java) == 0
        assert value(samples, "rocket_rebalance_assigned_queues", group="GID_metrics_b", topic="TopicTest") == 8
    finally:
        consumer.shutdown()
        other.shutdown()
    assert scrape(registry) == {}  # both left the registry


def test_a_refused_lock_shows_in_the_failure_and_lock_counters(start_stub: StartStub) -> None:
    server = start_stub()
    with connect_clients(server.address) as clients:
        assert lock(clients, "broker-a", "GID_metrics_lock", "127.0.0.1@holder", 0) == [0]  # never listed
    registry = CollectorRegistry()
    consumer = PushConsumer(
        GRPC_SCHEME + server.address,
        "GID_metrics_lock",
        topics=["TopicTest"],
        listener=lambda batch: None,
        client_id="me",
        metrics=registry,
    )
    consumer.start()
    try:
        ours = {"group": "GID_metrics_lock", "client": "me"}
        wait_until(
            lambda: value(scrape(registry), "rocket_rebalance_rebalances_failed_total", reason="lock refused") >= 1,
            15,
            "a failed round",
        )
        samples = scrape(registry)
        assert value(samples, "rocket_rebalance_lock_failures_total", topic="TopicTest", **ours) >= 1
        assert (
            value(samples, "rocket_rebalance_last_rebalance_info", reason="retry: lock refused", **ours)
            + value(samples, "rocket_rebalance_last_rebalance_info", trigger="start", **ours)
            == 1
        )  # the last round that failed: the first, or a retry it asked for
        wait_until(
            lambda: value(scrape(registry), "rocket_rebalance_rebalances_total", trigger="retry", **ours) >= 1,
            15,
            "a retry round",
        )
    finally:
        consumer.shutdown()
