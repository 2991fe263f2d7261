"""A broker set's master dies under traffic (issue 39, item 4), on a real RocketMQ 5.3.3: one set of two brokers
on loopback, ``broker-a`` master (brokerId 0, ASYNC_MASTER) and its slave (brokerId 1, SLAVE), both with
``slaveReadEnable=true`` (without it a slave refuses every pull as busy, Java's consumer's included).

Each scenario produces to every queue, lets a slow consumer begin (it stays behind: two messages per pull, a pull
threshold of two), kills the master, and checks: every message is consumed while the master is down (read from
the slave), the offsets are committed on the slave; then the master comes back, more is produced, everything is
consumed, and the master holds the final offsets. A Java consumer goes through the same checks (the positive
control). An orderly consumer hands out nothing of the set while its master is down (no lock without a master),
and everything, in order, once it is back.

One cluster for the module (a name server, the master and the slave); the scenarios take one topic each, created
on the master and on the slave (a slave copies the master's topics only every 60 s)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from rocket_rebalance.lab.mixed_group import new_topic
from rocket_rebalance.lab.rocketmq import JavaPeer, RocketMQCluster
from rocket_rebalance.lab.wait import wait_until
from rocket_rebalance.model import ConsumeFromWhere, MessageQueue
from rocket_rebalance.runtime.async_consumer import AsyncPushConsumer
from rocket_rebalance.runtime.consumer import ConsumerBase, PushConsumer
from rocket_rebalance.runtime.pulling import SLAVE_READS_KIND
from rocket_rebalance.runtime.settings import EngineSettings
from rocket_rebalance.runtime.transport import Message
from tests.rocketmq.conftest import start_cluster

pytestmark = pytest.mark.rocketmq

BROKER = "broker-a"
QUEUES = 4
PER_QUEUE = 12  # messages per queue in each phase
WORK = 0.3  # seconds per message: the consumer is still behind when the master dies
FAST: dict[str, Any] = {
    "rebalance_interval": 2.0,
    "persist_interval": 0.5,
    "route_refresh_interval": 1.0,
    "consume_from_where": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    "settings": EngineSettings(pull_batch_size=2, pull_threshold_for_queue=2),
}
SCENARIOS = ("Python", "Asyncio", "Java", "Orderly")


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RocketMQCluster, dict[str, str]]]:
    cluster = start_cluster(
        tmp_path_factory.mktemp("rocketmq-slave"), (BROKER,), broker_settings={"slaveReadEnable": "true"}
    )
    try:
        cluster.start_slave(BROKER)
        topics = {name: new_topic(cluster, f"Slave{name}", QUEUES) for name in SCENARIOS}
        yield cluster, topics
    finally:
        cluster.stop()


class Deliveries:
    """(queue, offset) of every message handed out to the members, in order."""

    def __init__(self) -> None:
        self.seen: list[tuple[MessageQueue, int]] = []
        self._lock = threading.Lock()

    def note(self, messages: list[Message]) -> None:
        """A threaded listener: noted as handed out, then consumed slowly."""
        self.handed_out(messages)
        time.sleep(WORK * len(messages))

    def handed_out(self, messages: list[Message]) -> None:
        with self._lock:
            self.seen += [(m.queue, m.queue_offset) for m in messages]

    def all(self, java: list[JavaPeer], topic: str) -> list[tuple[MessageQueue, int]]:
        with self._lock:
            seen = list(self.seen)
        for peer in java:
            seen += [(MessageQueue(topic, e["broker"], e["queue"]), e["offset"]) for e in peer.consumed()]
        return seen


def produce(cluster: RocketMQCluster, queues: list[MessageQueue]) -> None:
    transport = cluster.transport()
    try:
        for mq in queues:
            transport.send(mq.topic, mq.broker_name, [b"m"] * PER_QUEUE, mq.queue_id)
    finally:
        transport.close()


def committed(cluster: RocketMQCluster, group: str, queues: list[MessageQueue]) -> dict[MessageQueue, int | None]:
    """The group's offsets as a fresh client reads them: at the master, or while it is down at the slave."""
    transport = cluster.transport()
    try:
        transport.route(queues[0].topic)
        return transport.query_offsets(BROKER, group, queues)
    finally:
        transport.close()


def masterless(cluster: RocketMQCluster, topic: str) -> bool:
    transport = cluster.transport()
    try:
        return BROKER in transport.route(topic).masterless
    finally:
        transport.close()


def active(consumer: PushConsumer, topic: str) -> list[str]:
    """The consumer's queues of ``topic`` that are started (``describe()``'s queue states)."""
    states: dict[str, str] = consumer.describe()["queues"]  # type: ignore[assignment]
    return [mq for mq, state in states.items() if topic in mq and state.endswith("ACTIVE")]


Started = tuple[Callable[[], object], list[JavaPeer], ConsumerBase[Any] | None]
"""How to stop the scenario's member, the Java ones, and ours (for its health)."""
Members = Callable[[RocketMQCluster, Path, str, str, Deliveries], Started]


def python_members(orderly: bool) -> Members:
    def start(cluster: RocketMQCluster, tmp_path: Path, group: str, topic: str, deliveries: Deliveries) -> Started:
        consumer = PushConsumer(
            cluster.namesrv_address,
            group,
            topics=[topic],
            listener=deliveries.note,
            client_id=f"127.0.0.1@py-{group}",
            consume_orderly=orderly,
            **FAST,
        )
        consumer.start()
        return partial(consumer.shutdown, 15), [], consumer

    return start


def asyncio_members(
    cluster: RocketMQCluster, tmp_path: Path, group: str, topic: str, deliveries: Deliveries
) -> Started:
    """An AsyncPushConsumer on an event loop of its own thread (the test itself waits in threads)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def listener(batch: list[Message]) -> None:
        deliveries.handed_out(batch)
        await asyncio.sleep(WORK * len(batch))

    consumer = AsyncPushConsumer(
        cluster.namesrv_address, group, topics=[topic], listener=listener, client_id=f"127.0.0.1@py-{group}", **FAST
    )
    asyncio.run_coroutine_threadsafe(consumer.start(), loop).result(60)  # a hang bound

    def stop() -> None:
        asyncio.run_coroutine_threadsafe(consumer.shutdown(15), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()

    return stop, [], consumer


def java_members(cluster: RocketMQCluster, tmp_path: Path, group: str, topic: str, deliveries: Deliveries) -> Started:
    assert cluster.lib is not None
    extra = ["--pull-batch", "2", "--pull-threshold", "2"]
    peer = JavaPeer(
        cluster.lib,
        tmp_path,
        cluster.namesrv_address,
        group,
        f"java-{group}",
        [topic],
        work_ms=int(WORK * 1000),
        extra=extra,
    )
    return peer.stop, [peer], None


@pytest.mark.parametrize(
    ("name", "members"),
    [("Python", python_members(False)), ("Asyncio", asyncio_members), ("Java", java_members)],
    ids=("threaded", "asyncio", "java"),
)
def test_a_dead_masters_messages_are_read_from_its_slave_and_offsets_follow(
    pair: tuple[RocketMQCluster, dict[str, str]], tmp_path: Path, name: str, members: Members
) -> None:
    cluster, topics = pair
    topic, group = topics[name], f"GID_slave_{name}"
    queues = [MessageQueue(topic, BROKER, q) for q in range(QUEUES)]
    first = {(mq, offset) for mq in queues for offset in range(PER_QUEUE)}
    deliveries = Deliveries()
    produce(cluster, queues)
    stop, java, ours = members(cluster, tmp_path, group, topic, deliveries)
    try:
        wait_until(lambda: len(deliveries.all(java, topic)) >= QUEUES, 90, "consumption under way")
        cluster.brokers[BROKER].kill()
        behind = first - set(deliveries.all(java, topic))
        assert len(behind) > QUEUES * 4, "the consumer was not behind: the slave would have nothing to serve"
        wait_until(lambda: masterless(cluster, topic), 30, "the route without the master")
        try:
            wait_until(lambda: set(deliveries.all(java, topic)) >= first, 120, "everything consumed from the slave")
        except TimeoutError:
            missing = sorted(first - set(deliveries.all(java, topic)))
            state = None if ours is None else ours.describe()["queues"]
            raise AssertionError(f"not consumed from the slave: {missing}; queues {state}") from None
        if ours is not None:
            assert SLAVE_READS_KIND in ours.describe()["problems"]  # type: ignore[operator]
        wait_until(
            lambda: committed(cluster, group, queues) == dict.fromkeys(queues, PER_QUEUE), 60, "offsets on the slave"
        )
        assert masterless(cluster, topic)  # all of it happened while the master was down

        cluster.restart_broker(BROKER)
        produce(cluster, queues)
        everything = {(mq, offset) for mq in queues for offset in range(2 * PER_QUEUE)}
        wait_until(lambda: set(deliveries.all(java, topic)) >= everything, 120, "everything once the master is back")
        wait_until(
            lambda: committed(cluster, group, queues) == dict.fromkeys(queues, 2 * PER_QUEUE),
            60,
            "the final offsets on the master",
        )
        assert not masterless(cluster, topic)
        if ours is not None:
            wait_until(lambda: SLAVE_READS_KIND not in ours.describe()["problems"], 60, "reads from the master again")  # type: ignore[operator]
    finally:
        stop()
        if not cluster.brokers[BROKER].alive:
            cluster.restart_broker(BROKER)


def test_an_orderly_consumer_hands_out_nothing_of_a_set_without_master_and_all_in_order_after(
    pair: tuple[RocketMQCluster, dict[str, str]], tmp_path: Path
) -> None:
    cluster, topics = pair
    topic, group = topics["Orderly"], "GID_slave_Orderly"
    queues = [MessageQueue(topic, BROKER, q) for q in range(QUEUES)]
    deliveries = Deliveries()
    produce(cluster, queues)
    stop, _, ours = python_members(True)(cluster, tmp_path, group, topic, deliveries)
    assert ours is not None
    try:
        wait_until(lambda: len(deliveries.all([], topic)) >= QUEUES, 90, "consumption under way")
        cluster.brokers[BROKER].kill()
        wait_until(lambda: masterless(cluster, topic), 30, "the route without the master")
        # What was handed out when the master died finishes; after that nothing more, for many route refreshes
        # and lock retries (an absence, so a slow machine only makes it easier to pass).
        wait_until(lambda: not active(ours, topic), 60, "no queue of the set active without a lock")
        before = len(deliveries.all([], topic))
        time.sleep(5)
        assert len(deliveries.all([], topic)) == before, "an orderly message was handed out without the master's lock"
        assert before < QUEUES * PER_QUEUE

        cluster.restart_broker(BROKER)
        everything = [(mq, offset) for mq in queues for offset in range(PER_QUEUE)]
        wait_until(lambda: set(deliveries.all([], topic)) >= set(everything), 120, "everything once the master is back")
        for mq in queues:  # in order per queue (a message handed out again comes after those before it again)
            offsets = [offset for q, offset in deliveries.all([], topic) if q == mq]
            firsts = list(dict.fromkeys(offsets))
            assert firsts == sorted(firsts), f"{mq}: out of order {offsets}"
    finally:
        stop()
        if not cluster.brokers[BROKER].alive:
            cluster.restart_broker(BROKER)
