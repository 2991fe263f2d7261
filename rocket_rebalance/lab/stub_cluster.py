"""A whole cluster on this machine, as real processes: a ``nameserver_stub`` and ``rocket-rebalance consume``
consumers, for the live demo and the end-to-end tests.

Every consumer is a separate process that prints one JSON line per event (``owned``, ``consumed``, ``stopped``)
and records each consumed message in a file, so what is checked is what real processes did: who owns which queue,
whether every produced message was consumed, and which were consumed twice.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocket_rebalance.admin.reads import consumer_progress
from rocket_rebalance.model import MessageQueue, prepare_rebalance_input
from rocket_rebalance.plan import plan
from rocket_rebalance.runtime.transport import GRPC_SCHEME
from rocket_rebalance.strategies import AllocateMessageQueueStrategy, create_strategy

__all__ = ["ConsumerProcess", "Delivery", "LocalCluster", "StubProcess", "start_consume_process"]


def _python_module(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


class StubProcess:
    """``python -m nameserver_stub`` on a free loopback port, restartable on the same port and data."""

    def __init__(self, data_dir: Path, topics: Sequence[str], extra: Sequence[str] = ()) -> None:
        self.data_dir = data_dir
        self._topics = list(topics)
        self._extra = list(extra)
        self.address = ""
        self._process: subprocess.Popen[str] | None = None

    def start(self) -> str:
        listen = self.address or "127.0.0.1:0"
        args = ["--listen", listen, "--data-dir", str(self.data_dir), "--log-level", "WARNING", *self._extra]
        for topic in self._topics:
            args += ["--topic", topic]
        self._process = subprocess.Popen(
            _python_module("nameserver_stub", *args), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        line = self._process.stdout.readline().strip() if self._process.stdout else ""
        if not line:
            raise RuntimeError(f"nameserver_stub did not start (exit {self._process.wait(5)})")
        self.address = line
        return line

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None

    def restart(self) -> None:
        self.stop()
        self.start()


@dataclass
class ConsumerProcess:
    """One ``rocket-rebalance consume`` process and the events it printed."""

    client_id: str
    process: subprocess.Popen[str]
    record: Path
    events: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    follower: threading.Thread = field(init=False)

    def __post_init__(self) -> None:
        self.follower = threading.Thread(target=self.follow, daemon=True)
        self.follower.start()

    def follow(self) -> None:
        for line in self.process.stdout or ():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                self.events.append(event)

    def owned(self, topic: str) -> set[str] | None:
        """The queues (``broker:id``) last reported for ``topic``; ``None`` before the first report."""
        with self.lock:
            for event in reversed(self.events):
                if event.get("event") == "owned" and event.get("topic") == topic:
                    return set(event["queues"])
        return None

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 30.0) -> dict[str, Any] | None:
        """Graceful leave (SIGTERM): returns the ``stopped`` event. The process's end is not its last line read:
        the follower reads the pipe to its end first (on a busy machine it may not have run since the line came)."""
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout)
        self.follower.join(timeout)
        with self.lock:
            return next((e for e in reversed(self.events) if e.get("event") == "stopped"), None)

    def kill(self) -> None:
        """A crash (SIGKILL): no shutdown, in-flight work lost, the connection closes."""
        self.process.kill()
        self.process.wait()


def start_consume_process(
    work_dir: Path, address: str, group: str, topics: Sequence[str], client_id: str, extra: Sequence[str] = ()
) -> ConsumerProcess:
    """Start ``rocket-rebalance consume`` against any cluster (``address`` picks the wire), recording every
    consumed message in ``work_dir/consumed-<id>.jsonl`` and its log in ``work_dir/consumer-<id>.log``."""
    safe = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "-_.") else "_" for ch in client_id)
    record = work_dir / f"consumed-{safe}.jsonl"
    args = ["consume", "-n", address, "-g", group]
    for topic in topics:
        args += ["-t", topic]
    args += ["--client-id", client_id, "--consume-from", "first", "--record", str(record), "--report-interval", "1"]
    with (work_dir / f"consumer-{safe}.log").open("a") as log:  # the child keeps its own handle
        process = subprocess.Popen(
            _python_module("rocket_rebalance", *args, *extra),
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONIOENCODING": "utf-8"},
            encoding="utf-8",
        )
    return ConsumerProcess(client_id, process, record)


@dataclass(frozen=True)
class Delivery:
    """Consumption as recorded by every consumer: how often each (queue, offset) was consumed."""

    counts: Counter[tuple[str, str, int, int]]

    @property
    def duplicates(self) -> int:
        return sum(count - 1 for count in self.counts.values() if count > 1)

    def missing(self, expected: dict[tuple[str, str, int], int]) -> int:
        """Messages below each queue's max offset that nobody consumed."""
        return sum(
            1
            for (topic, broker, queue), end in expected.items()
            for offset in range(end)
            if (topic, broker, queue, offset) not in self.counts
        )


class LocalCluster:
    """A stub and any number of consumer processes in one group, under ``work_dir``."""

    def __init__(
        self,
        work_dir: Path,
        topic: str = "TopicTest",
        brokers: Sequence[tuple[str, int]] = (("broker-a", 4), ("broker-b", 4)),
        group: str = "GID_local",
        stub_args: Sequence[str] = (),
        consumer_args: Sequence[str] = ("--rebalance-interval", "2", "--persist-interval", "0.5"),
        strategy: AllocateMessageQueueStrategy | None = None,
    ) -> None:
        self.work_dir = work_dir
        self.topic = topic
        self.group = group
        self.queues = [MessageQueue(topic, broker, q) for broker, count in brokers for q in range(count)]
        spec = f"{topic}:" + ",".join(f"{broker}={count}" for broker, count in brokers)
        self.stub = StubProcess(work_dir / "stub-data", [spec], stub_args)
        self.consumer_args = list(consumer_args)
        self.strategy = strategy or create_strategy("AVG")  # the consumers' strategy (``consume``'s default)
        self.consumers: dict[str, ConsumerProcess] = {}

    def __enter__(self) -> LocalCluster:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.stub.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for consumer in self.consumers.values():
            if consumer.alive:
                consumer.kill()
        self.stub.stop()

    @property
    def address(self) -> str:
        """The address consumers and commands are given: the stub's, marked for the gRPC wire."""
        return GRPC_SCHEME + self.stub.address

    def run_cli(self, *args: str) -> str:
        done = subprocess.run(
            _python_module("rocket_rebalance", *args), capture_output=True, text=True, timeout=60, check=True
        )
        return done.stdout

    def produce(self, count: int) -> None:
        self.run_cli("produce", "-n", self.address, "-t", self.topic, "--count", str(count))

    def start_consumer(self, client_id: str, *extra: str) -> ConsumerProcess:
        consumer = start_consume_process(
            self.work_dir, self.address, self.group, [self.topic], client_id, [*self.consumer_args, *extra]
        )
        self.consumers[client_id] = consumer
        return consumer

    def live(self) -> list[ConsumerProcess]:
        return [c for c in self.consumers.values() if c.alive]

    def ownership(self) -> dict[str, set[str]]:
        """Each live consumer's last reported queues of the topic."""
        return {c.client_id: c.owned(self.topic) or set() for c in self.live()}

    def expected_ownership(self) -> dict[str, set[str]]:
        """What the live consumers should own once settled: the library's plan over the live members."""
        ready = prepare_rebalance_input(self.queues, [c.client_id for c in self.live()])
        shares = plan(self.strategy, self.group, ready.mq_all, ready.cid_all) if ready.cid_all else {}
        return {cid: {f"{mq.broker_name}:{mq.queue_id}" for mq in queues} for cid, queues in shares.items()}

    def balanced(self) -> bool:
        """Settled: every live consumer reports exactly its share of the plan (so each queue has one owner)."""
        return self.ownership() == self.expected_ownership()

    def single_owners(self) -> bool:
        """Safe, if not balanced: each queue has exactly one live owner (one that never reported owns nothing)."""
        owners = Counter(queue for queues in self.ownership().values() for queue in queues)
        expected = {f"{mq.broker_name}:{mq.queue_id}" for mq in self.queues}
        return set(owners) == expected and all(count == 1 for count in owners.values())

    def caught_up(self) -> bool:
        """Every queue's committed offset has reached its max offset."""
        rows = [row for row in consumer_progress(self.address, self.group, self.topic)]
        return bool(rows) and all(row.diff == 0 for row in rows)

    def max_offsets(self) -> dict[tuple[str, str, int], int]:
        return {
            (row.mq.topic, row.mq.broker_name, row.mq.queue_id): row.broker_offset
            for row in consumer_progress(self.address, self.group, self.topic)
        }

    def delivery(self) -> Delivery:
        counts: Counter[tuple[str, str, int, int]] = Counter()
        for consumer in self.consumers.values():
            if consumer.record.exists():
                for line in consumer.record.read_text(encoding="utf-8").splitlines():
                    item = json.loads(line)
                    counts[(item["topic"], item["broker"], item["queue"], item["offset"])] += 1
        return Delivery(counts)
