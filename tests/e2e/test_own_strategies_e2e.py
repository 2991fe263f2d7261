"""CROSS_TOPIC in real consumer processes against a real stub: three consumers of two topics converge on one plan
over both topics and the retry topic (core rule R6), each consumer's total within one queue of the others', and
they consume everything; after a crash the survivors take the dead consumer's queues."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocket_rebalance.admin.reads import consumer_progress
from rocket_rebalance.lab.stub_cluster import ConsumerProcess, StubProcess, start_consume_process
from rocket_rebalance.lab.wait import wait_until
from rocket_rebalance.model import MessageQueue, prepare_rebalance_input, retry_topic
from rocket_rebalance.plan import plan
from rocket_rebalance.runtime.transport import GRPC_SCHEME, TransportError
from rocket_rebalance.runtime.transport.wire import open_transport
from rocket_rebalance.strategies import create_strategy

pytestmark = pytest.mark.e2e

GROUP = "GID_cross"
TOPICS = {"TopicA": "broker-a=3,broker-b=2", "TopicB": "broker-a=2"}
STRATEGY = create_strategy("CROSS_TOPIC", inner="CONSISTENT_HASH_BOUNDED")
ARGS = ["--strategy", "CROSS_TOPIC", "--inner", "CONSISTENT_HASH_BOUNDED", "--rebalance-interval", "2"]


@pytest.fixture
def stub(tmp_path: Path) -> Iterator[str]:
    process = StubProcess(tmp_path / "stub-data", [f"{topic}:{spec}" for topic, spec in TOPICS.items()])
    process.start()
    try:
        yield GRPC_SCHEME + process.address
    finally:
        process.stop()


def every_queue(address: str) -> list[MessageQueue]:
    """The queues of both topics and of the retry topic (which the stub creates at the first heartbeat)."""
    transport = open_transport(address)
    try:
        queues: list[MessageQueue] = []
        for topic in [*TOPICS, retry_topic(GROUP)]:
            try:
                queues += transport.route(topic).subscribe_queues()
            except TransportError:
                pass  # not created yet
        return queues
    finally:
        transport.close()


def owned(consumer: ConsumerProcess) -> set[str]:
    return {f"{topic}/{queue}" for topic in [*TOPICS, retry_topic(GROUP)] for queue in consumer.owned(topic) or ()}


def expected(queues: list[MessageQueue], live: list[ConsumerProcess]) -> dict[str, set[str]]:
    ready = prepare_rebalance_input(queues, [c.client_id for c in live])
    shares = plan(STRATEGY, GROUP, ready.mq_all, ready.cid_all)
    return {cid: {f"{mq.topic}/{mq.broker_name}:{mq.queue_id}" for mq in share} for cid, share in shares.items()}


def test_cross_topic_consumers_agree_on_one_plan_over_every_topic(stub: str, tmp_path: Path) -> None:
    consumers = [start_consume_process(tmp_path, stub, GROUP, list(TOPICS), f"10.0.0.{i}@{i}", ARGS) for i in (1, 2, 3)]
    try:
        wait_until(lambda: retry_topic(GROUP) in {mq.topic for mq in every_queue(stub)}, 30, "the retry topic")
        queues = every_queue(stub)

        def settled() -> bool:
            live = [c for c in consumers if c.alive]
            return {c.client_id: owned(c) for c in live} == expected(queues, live)

        wait_until(settled, 60, "every consumer owns its share of the plan over all topics")
        totals = sorted(len(owned(c)) for c in consumers)
        assert totals[-1] - totals[0] <= 1 and sum(totals) == len(queues) == 9  # 5 + 2 + one retry queue per broker
        for topic in TOPICS:
            produced = subprocess.run(
                [sys.executable, "-m", "rocket_rebalance", "produce", "-n", stub, "-t", topic, "--count", "60"],
                capture_output=True,
                timeout=60,
            )
            assert produced.returncode == 0, produced.stderr

        def caught_up() -> bool:
            rows = [row for topic in TOPICS for row in consumer_progress(stub, GROUP, topic)]
            return bool(rows) and all(row.diff == 0 for row in rows)

        wait_until(caught_up, 60, "everything produced to both topics is consumed")
        consumers[0].kill()
        wait_until(settled, 60, "the survivors take the dead consumer's queues, by the same plan")
    finally:
        for consumer in consumers:
            if consumer.alive:
                consumer.kill()
