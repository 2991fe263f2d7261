"""One consumer group of Python (``rocket-rebalance consume``) and Java (``DefaultMQPushConsumer``) processes on a
real RocketMQ cluster, and what the tests and ``demo --rocketmq`` ask of it: who owns what, what each should own
(the library's plan, and the broker's own Java allocation), what was consumed.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rocket_rebalance.lab.rocketmq import JavaPeer, RocketMQCluster
from rocket_rebalance.lab.stub_cluster import ConsumerProcess, start_consume_process
from rocket_rebalance.model import MessageQueue, prepare_rebalance_input, retry_topic
from rocket_rebalance.plan import plan
from rocket_rebalance.runtime.transport import TransportError
from rocket_rebalance.strategies import create_strategy

__all__ = ["PYTHON_ARGS", "MixedGroup", "new_topic", "ownership_problems"]

Queue = tuple[str, int]  # (broker name, queue ID)
PYTHON_ARGS = (
    "--rebalance-interval",
    "2",
    "--persist-interval",
    "0.5",
    "--route-interval",
    "1",
    "--heartbeat-interval",
    "5",
)
_topics = itertools.count(1)


def new_topic(cluster: RocketMQCluster, prefix: str, queue_nums: int = 8) -> str:
    """A topic of the test's own, ``queue_nums`` queues on every broker."""
    topic = f"{prefix}_{next(_topics)}_{int(time.time() * 1000) % 100000}"
    cluster.create_topic(topic, queue_nums)
    return topic


class MixedGroup:
    """The members of ``group`` on ``topic``: Python and Java consumers, started and stopped by the test."""

    def __init__(self, cluster: RocketMQCluster, work_dir: Path, group: str, topic: str, strategy: str = "AVG") -> None:
        self.cluster = cluster
        self.work_dir = work_dir
        self.group = group
        self.topic = topic
        self.strategy_name = strategy
        self.strategy = create_strategy(strategy)
        self.python_members: dict[str, ConsumerProcess] = {}
        self.java_members: dict[str, JavaPeer] = {}
        self.transport = cluster.transport()
        self.queues = sorted(
            MessageQueue(topic, d.broker_name, q)
            for d in self.transport.route(topic).queue_datas
            for q in range(d.read_queue_nums)
        )
        work_dir.mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------------ members

    def python(self, instance: str, *extra: str, strategy: str | None = None) -> ConsumerProcess:
        """A Python consumer process of the group, with the group's strategy unless told (``consume`` takes one
        ``--strategy``)."""
        client_id = f"127.0.0.1@{instance}"
        args = [*PYTHON_ARGS, "--strategy", strategy or self.strategy_name, *extra]
        member = start_consume_process(
            self.work_dir, self.cluster.namesrv_address, self.group, [self.topic], client_id, args
        )
        self.python_members[client_id] = member
        return member

    def java(self, instance: str, orderly: bool = False, work_ms: int = 0, strategy: str | None = None) -> JavaPeer:
        """A Java consumer of the group, with the group's strategy unless told (a Java client has only Java's)."""
        if self.cluster.lib is None:
            raise RuntimeError("the cluster is not started: start() it before adding Java members")
        peer = JavaPeer(
            self.cluster.lib,
            self.work_dir,
            self.cluster.namesrv_address,
            self.group,
            instance,
            [self.topic],
            strategy=strategy or self.strategy_name,
            orderly=orderly,
            work_ms=work_ms,
        )
        self.java_members[peer.client_id] = peer
        return peer

    def live(self) -> list[str]:
        return [cid for cid, m in self.python_members.items() if m.alive] + [
            cid for cid, p in self.java_members.items() if p.alive
        ]

    def ownership(self, topic: str | None = None) -> dict[str, set[Queue]]:
        """Each live member's last reported queues of ``topic`` (the group's topic by default)."""
        topic = self.topic if topic is None else topic
        owned: dict[str, set[Queue]] = {}
        for cid, member in self.python_members.items():
            if member.alive:
                reported = member.owned(topic) or set()
                owned[cid] = {(name.rpartition(":")[0], int(name.rpartition(":")[2])) for name in reported}
        for cid, peer in self.java_members.items():
            if peer.alive:
                owned[cid] = set(peer.owned(topic))
        return owned

    def expected(self, queues: list[MessageQueue] | None = None) -> dict[str, set[Queue]]:
        """The strategy's plan of ``queues`` (the topic's by default) over the live members, in Java's orders."""
        ready = prepare_rebalance_input(self.queues if queues is None else queues, self.live())
        shares = plan(self.strategy, self.group, ready.mq_all, ready.cid_all) if ready.cid_all else {}
        return {cid: {(mq.broker_name, mq.queue_id) for mq in queues} for cid, queues in shares.items()}

    def settled(self) -> bool:
        """Every live member reports exactly its share of the plan (so each queue has exactly one owner)."""
        return self.ownership() == self.expected()

    def retry_settled(self) -> bool:
        """The same for the group's retry topic, which every member balances too (from the broker's route of it:
        brokers create it at the first heartbeat, so a group just started may not have it yet, or not settled)."""
        topic = retry_topic(self.group)
        try:
            queues = self.transport.route(topic).subscribe_queues()
        except TransportError:
            return False
        return bool(queues) and self.ownership(topic) == self.expected(queues)

    def members_known(self) -> bool:
        """Every broker's member list is exactly the live members (what every consumer will sort)."""
        live = sorted(self.live())
        try:
            lists = [sorted(self.transport.consumer_list(b, self.group)) for b in self.cluster.broker_names]
        except TransportError:  # "no consumer for this group" before the first heartbeat
            return False
        return all(ids == live for ids in lists)

    def oracle(self) -> dict[str, set[Queue]]:
        """What the broker's own Java AllocateMessageQueueAveragely gives each member (QUERY_ASSIGNMENT)."""
        broker = self.cluster.broker_names[0]
        return {
            cid: {
                (mq.broker_name, mq.queue_id)
                for mq in self.transport.query_assignment(broker, self.topic, self.group, cid)
            }
            for cid in self.live()
        }

    def describe(self) -> str:
        return json.dumps(
            {
                "owned": {k: sorted(v) for k, v in self.ownership().items()},
                "expected": {k: sorted(v) for k, v in self.expected().items()},
            },
            ensure_ascii=True,
        )

    # ------------------------------------------------------------------ messages

    def produce(self, per_queue: int) -> None:
        for mq in self.queues:
            self.transport.send(self.topic, mq.broker_name, [b"m"] * per_queue, mq.queue_id)

    @contextlib.contextmanager
    def traffic(self, interval: float) -> Iterator[None]:
        """Steady traffic while the block runs: one message to every queue each ``interval`` seconds (a send the
        broker refuses for a moment, as a busy broker does, is skipped rather than ending the traffic)."""
        stop = threading.Event()

        def send() -> None:
            while not stop.wait(interval):
                try:
                    self.produce(1)
                except TransportError:  # e.g. SYSTEM_BUSY: a loaded broker's flow control; the next tick sends
                    continue

        producer = threading.Thread(target=send, name="rr-traffic", daemon=True)
        producer.start()
        try:
            yield
        finally:
            stop.set()
            producer.join()

    def max_offsets(self) -> dict[Queue, int]:
        return {(mq.broker_name, mq.queue_id): self.transport.max_offset(mq) for mq in self.queues}

    def deliveries(self) -> list[dict[str, Any]]:
        """Every consumed message of the topic, by any member: client, broker, queue, offset, t0, t1."""
        found: list[dict[str, Any]] = []
        for member in self.python_members.values():
            if member.record.exists():
                found += [json.loads(line) for line in member.record.read_text(encoding="utf-8").splitlines()]
        for peer in self.java_members.values():
            found += peer.consumed()
        return [d for d in found if d["topic"] == self.topic]

    def counts(self) -> Counter[tuple[str, int, int]]:
        return Counter((d["broker"], d["queue"], d["offset"]) for d in self.deliveries())

    def missing(self) -> list[tuple[str, int, int]]:
        """Messages below each queue's max offset that nobody consumed."""
        counts = self.counts()
        return [
            (broker, queue, offset)
            for (broker, queue), end in self.max_offsets().items()
            for offset in range(end)
            if (broker, queue, offset) not in counts
        ]

    def close(self) -> None:
        for member in self.python_members.values():
            if member.alive:
                member.kill()
        for peer in self.java_members.values():
            if peer.alive:
                peer.kill()
        self.transport.close()


def ownership_problems(group: MixedGroup) -> list[str]:
    """What breaks "every queue of the topic is owned by exactly one live member", one line per queue (empty when
    the group is sound), so a test asserts on them and the demo prints them."""
    union = Counter(q for queues in group.ownership().values() for q in queues)
    topic = {(mq.broker_name, mq.queue_id) for mq in group.queues}
    problems = [f"{broker}:{queue_id} owned by nobody" for broker, queue_id in sorted(topic - set(union))]
    for (broker, queue_id), count in sorted(union.items()):
        if (broker, queue_id) not in topic:
            problems.append(f"{broker}:{queue_id} owned, but not a queue of {group.topic}")
        elif count > 1:
            problems.append(f"{broker}:{queue_id} owned by {count} members")
    return problems
