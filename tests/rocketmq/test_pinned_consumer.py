"""``EngineSettings(pin_cpu=...)`` on a real RocketMQ 5.3.3: a pinned ``PushConsumer`` consumes every message once,
and each thread a message passes through (the connections' reader, the service thread, the listener's) runs on the
pinned CPU, while the application's thread keeps its own CPUs; the same consumer unpinned, as the control, leaves
its threads wherever the system may place them."""

from __future__ import annotations

import os
import threading

import pytest

from rocket_rebalance import PushConsumer
from rocket_rebalance.lab.mixed_group import new_topic
from rocket_rebalance.lab.rocketmq import RocketMQCluster
from rocket_rebalance.lab.wait import wait_until
from rocket_rebalance.runtime.settings import EngineSettings
from rocket_rebalance.runtime.transport import Message
from tests.rocketmq.test_async_consumers import FAST, produce

pytestmark = pytest.mark.rocketmq

ALLOWED = frozenset(os.sched_getaffinity(0))
CPU = max(ALLOWED)
THREADS = (
    "rr-remoting",
    "rebalance-service",
    "rr-consume",
)  # the reader (not its work pool), the service, the listener's


def consumed_on(cluster: RocketMQCluster, pin_cpu: int | None) -> tuple[dict[str, set[frozenset[int]]], int, int]:
    """Drain a fresh topic with one PushConsumer: the CPU sets its threads may run on, by kind of thread, seen while
    it consumed; how many messages were produced; how many distinct ones it consumed."""
    topic = new_topic(cluster, f"Pinned{pin_cpu}", 4)
    total = produce(cluster, topic, 25)
    seen: set[tuple[str, int, int]] = set()
    lock = threading.Lock()

    def listener(batch: list[Message]) -> None:
        with lock:
            seen.update((m.mq.broker_name, m.mq.queue_id, m.queue_offset) for m in batch)

    before = set(threading.enumerate())
    consumer = PushConsumer(
        cluster.namesrv_address,
        f"GID_{topic}",
        topics=[topic],
        listener=listener,
        settings=EngineSettings(pin_cpu=pin_cpu),
        **FAST,  # type: ignore[arg-type]
    )
    consumer.start()
    try:
        wait_until(lambda: len(seen) >= total, 60, "every message consumed")
        affinities: dict[str, set[frozenset[int]]] = {}
        for thread in threading.enumerate():
            kind = thread.name.split("_")[0]
            if thread not in before and kind in THREADS and thread.native_id is not None:
                affinities.setdefault(kind, set()).add(frozenset(os.sched_getaffinity(thread.native_id)))
        affinities["application"] = {frozenset(os.sched_getaffinity(0))}
    finally:
        assert consumer.shutdown()
    return affinities, total, len(seen)


def test_a_pinned_consumer_runs_on_its_cpu_and_consumes_everything(rocketmq: RocketMQCluster) -> None:
    affinities, total, consumed = consumed_on(rocketmq, CPU)
    assert consumed == total
    assert affinities == {kind: {frozenset({CPU})} for kind in THREADS} | {"application": {ALLOWED}}


def test_unpinned_its_threads_run_where_the_system_places_them(rocketmq: RocketMQCluster) -> None:
    affinities, total, consumed = consumed_on(rocketmq, None)
    assert consumed == total
    assert affinities == {kind: {ALLOWED} for kind in [*THREADS, "application"]}
