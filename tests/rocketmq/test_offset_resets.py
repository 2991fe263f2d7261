"""An operator resets a running group's offsets (``mqadmin resetOffsetByTime``) on a real RocketMQ 5.3.3, with the
broker's default ``useServerSideResetOffset=true`` (the broker keeps the reset and answers the next pull with
PULL_OFFSET_MOVED, core rule O2) and with ``false`` (it sends each client RESET_CONSUMER_CLIENT_OFFSET, which we
dropped before issue 39, and our periodic write put the old position back; rule O5).

Each scenario consumes a first half of the topic, notes the time, consumes a second half, resets the group to that
time, and checks: every message of the second half is consumed again, the broker's committed offsets end at the
max offsets, and the broker never holds the old position again once it held the reset's, until the messages
between were consumed again (sampled every 0.1 s): what a write of the old position landing over the reset would
show. A Java consumer in the same group goes through the same reset (the positive control) where the scenario has
one."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rocket_rebalance.lab.mixed_group import new_topic
from rocket_rebalance.lab.rocketmq import JavaPeer, RocketMQCluster, mqadmin
from rocket_rebalance.lab.wait import wait_until
from rocket_rebalance.model import ConsumeFromWhere, MessageQueue
from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.pull_consumer import PullConsumer
from rocket_rebalance.runtime.transport import Message
from tests.rocketmq.conftest import start_cluster

pytestmark = pytest.mark.rocketmq

HALF = 5  # messages per queue in each half
FAST: dict[str, Any] = {
    "rebalance_interval": 2.0,
    "persist_interval": 0.5,
    "route_refresh_interval": 1.0,
    "consume_from_where": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
}


@pytest.fixture(scope="module")
def client_side_rocketmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RocketMQCluster]:
    """One broker that leaves resets to its clients (``useServerSideResetOffset=false``)."""
    cluster = start_cluster(
        tmp_path_factory.mktemp("rocketmq-reset"), ("broker-a",), broker_settings={"useServerSideResetOffset": "false"}
    )
    yield cluster
    cluster.stop()


class Deliveries:
    """(queue, offset, wall time) of every delivery to the group's members, Python's and Java's."""

    def __init__(self) -> None:
        self.seen: list[tuple[MessageQueue, int, float]] = []
        self.lock = threading.Lock()
        self.pause = 0.0  # seconds a Python member spends on each message

    def note(self, messages: list[Message]) -> None:
        now = time.time()
        with self.lock:
            self.seen += [(m.queue, m.queue_offset, now) for m in messages]
        time.sleep(self.pause * len(messages))

    def since(self, start: float, java: list[JavaPeer], topic: str) -> dict[tuple[MessageQueue, int], float]:
        """The first delivery of each message at or after ``start`` (wall time), by any member."""
        with self.lock:
            seen = list(self.seen)
        for peer in java:
            seen += [
                (MessageQueue(topic, e["broker"], e["queue"]), e["offset"], e["t0"])
                for e in peer.consumed()
                if e["topic"] == topic
            ]
        first: dict[tuple[MessageQueue, int], float] = {}
        for mq, offset, at in sorted(seen, key=lambda item: item[2]):
            if mq.topic == topic and at >= start:
                first.setdefault((mq, offset), at)
        return first


class Sampler:
    """The broker's committed offset of each queue, every 0.1 s, with the wall time."""

    def __init__(self, cluster: RocketMQCluster, group: str, queues: list[MessageQueue]) -> None:
        self.samples: list[tuple[float, MessageQueue, int | None]] = []
        self._stop = threading.Event()
        self._transport = cluster.transport()
        self._thread = threading.Thread(target=self._run, args=(group, queues), daemon=True)
        self._thread.start()

    def _run(self, group: str, queues: list[MessageQueue]) -> None:
        while not self._stop.wait(0.1):
            for broker in sorted({mq.broker_name for mq in queues}):
                mine = [mq for mq in queues if mq.broker_name == broker]
                at = time.time()
                self.samples += [(at, mq, v) for mq, v in self._transport.query_offsets(broker, group, mine).items()]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._transport.close()


def produce_half(cluster: RocketMQCluster, queues: list[MessageQueue]) -> None:
    transport = cluster.transport()
    try:
        for mq in queues:
            transport.send(mq.topic, mq.broker_name, [f"{mq.queue_id}".encode()] * HALF, mq.queue_id)
    finally:
        transport.close()


def committed(cluster: RocketMQCluster, group: str, queues: list[MessageQueue]) -> dict[MessageQueue, int | None]:
    transport = cluster.transport()
    try:
        offsets: dict[MessageQueue, int | None] = {}
        for broker in sorted({mq.broker_name for mq in queues}):
            offsets.update(transport.query_offsets(broker, group, [mq for mq in queues if mq.broker_name == broker]))
        return offsets
    finally:
        transport.close()


Members = Callable[[RocketMQCluster, Path, str, str, Deliveries], tuple[list[Callable[[], object]], list[JavaPeer]]]
"""Starts a scenario's members: how to stop ours, and the Java ones."""


def push_with_java(orderly: bool) -> Members:
    def start(
        cluster: RocketMQCluster, tmp_path: Path, group: str, topic: str, deliveries: Deliveries
    ) -> tuple[list[Callable[[], object]], list[JavaPeer]]:
        assert cluster.lib is not None
        ours = PushConsumer(
            cluster.namesrv_address,
            group,
            topics=[topic],
            listener=deliveries.note,
            client_id="127.0.0.1@py-reset",
            consume_orderly=orderly,
            **FAST,
        )
        ours.start()
        java = JavaPeer(cluster.lib, tmp_path, cluster.namesrv_address, group, "java-reset", [topic], orderly=orderly)
        return [lambda: ours.shutdown(10)], [java]

    return start


def pull(
    cluster: RocketMQCluster, tmp_path: Path, group: str, topic: str, deliveries: Deliveries
) -> tuple[list[Callable[[], object]], list[JavaPeer]]:
    consumer = PullConsumer(cluster.namesrv_address, group, topics=[topic], client_id="127.0.0.1@pull-reset", **FAST)
    consumer.start()
    stop = threading.Event()

    def loop() -> None:
        # one message a poll: polled messages count as consumed at once (auto-commit), so a larger batch would move
        # the offset past the replay before the broker's reset offset could be sampled; one at a time, with the
        # pause, the replay's progress stands for a while at each offset
        while not stop.is_set():
            deliveries.note(consumer.poll(max_messages=1, timeout=0.2))

    poller = threading.Thread(target=loop, daemon=True)
    poller.start()

    def close() -> None:
        stop.set()
        poller.join(10)
        consumer.close()

    return [close], []


def reset_scenario(cluster: RocketMQCluster, tmp_path: Path, name: str, members: Members) -> None:
    topic = new_topic(cluster, name, 2)
    group = f"GID_{name}"
    transport = cluster.transport()
    queues = sorted(MessageQueue(topic, d.broker_name, q) for d in transport.route(topic).queue_datas for q in range(2))
    transport.close()
    deliveries = Deliveries()
    produce_half(cluster, queues)
    stoppers, java = members(cluster, tmp_path, group, topic, deliveries)
    try:
        wait_until(lambda: set(committed(cluster, group, queues).values()) == {HALF}, 90, "the first half consumed")
        reset_ms = int(time.time() * 1000)
        time.sleep(0.05)  # the second half is stored after the reset's time
        produce_half(cluster, queues)
        wait_until(lambda: set(committed(cluster, group, queues).values()) == {2 * HALF}, 60, "the second half")
        sampler = Sampler(cluster, group, queues)
        # the replay takes a second per queue, so the broker holds an offset before the old position long enough to
        # be sampled (a quick one went back to the old position within a sample's gap on a loaded machine)
        deliveries.pause = 0.2
        reset_at = time.time()
        assert cluster.lib is not None
        mqadmin(
            cluster.lib, tmp_path / "mqadmin", "resetOffsetByTime", "-n", cluster.namesrv_address,
            "-g", group, "-t", topic, "-s", str(reset_ms),
        )  # fmt: skip
        second = {(mq, offset) for mq in queues for offset in range(HALF, 2 * HALF)}
        try:
            wait_until(lambda: set(deliveries.since(reset_at, java, topic)) >= second, 90, "the second half again")
        except TimeoutError:
            missing = sorted(second - set(deliveries.since(reset_at, java, topic)))
            raise AssertionError(
                f"not consumed again: {missing}; offsets {committed(cluster, group, queues)}"
            ) from None
        wait_until(lambda: set(committed(cluster, group, queues).values()) == {2 * HALF}, 60, "offsets at the end")
        sampler.stop()
        again = deliveries.since(reset_at, java, topic)
        for mq in queues:
            held = [(at, v) for at, q, v in sampler.samples if q == mq]
            # the reset offset, or the replay's progress from it: proof that the reset was written
            reset_seen = next((at for at, v in held if v is not None and HALF <= v < 2 * HALF), None)
            assert reset_seen is not None, f"{mq}: the broker never held the reset offset {HALF} or a later one: {held}"
            replayed = max(again[(mq, offset)] for offset in range(HALF, 2 * HALF))
            back = [(at, v) for at, v in held if reset_seen < at < replayed and v == 2 * HALF]
            assert not back, f"{mq}: the old position {2 * HALF} came back before the replay ended: {back}"
    finally:
        for stop in stoppers:
            stop()
        for peer in java:
            peer.stop()


@pytest.mark.parametrize(
    ("name", "members"),
    [("ResetPush", push_with_java(False)), ("ResetOrderly", push_with_java(True)), ("ResetPull", pull)],
)
def test_a_reset_the_broker_leaves_to_its_clients(
    client_side_rocketmq: RocketMQCluster, tmp_path: Path, name: str, members: Members
) -> None:
    reset_scenario(client_side_rocketmq, tmp_path, name, members)


@pytest.mark.parametrize(("name", "members"), [("SrvResetPush", push_with_java(False)), ("SrvResetPull", pull)])
def test_a_reset_the_broker_keeps(rocketmq: RocketMQCluster, tmp_path: Path, name: str, members: Members) -> None:
    reset_scenario(rocketmq, tmp_path, name, members)
