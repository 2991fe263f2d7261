"""The remoting transports side by side on a real RocketMQ broker: the threaded ``RemotingTransport``, the asyncio
``AsyncRemotingTransport``, and (with ``--base DIR``, a checkout of an older commit) the threaded transport as it
was there, so that sharing the wire between the runtimes is seen to cost the threaded one nothing.

Two measures, each in a fresh process per repetition, the transports interleaved and each first in turn, so that
a noisy neighbour or a warming broker hits them alike:

* ``calls``: GET_MAX_OFFSET round trips one after another (what a call costs above the network);
* ``drain``: every message of the topic's queues pulled, the queues at once, 32 messages a pull.

Prints a table of medians and each kind's ratio to the threaded transport of this tree, same run.

    .venv/bin/python benchmarks/remoting_async.py [--namesrv HOST:PORT] [--base DIR] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rocket_rebalance.runtime.transport import GroupRegistration

TOPIC_QUEUES = 4
MESSAGES = 5000  # a queue's
CALLS = 3000
ROOT = Path(__file__).resolve().parents[1]


def _registration(group: str, topic: str) -> GroupRegistration:
    """The group the drain pulls for: the broker serves pulls only to a group it has had a heartbeat of."""
    from rocket_rebalance.model import ConsumeFromWhere, MessageModel
    from rocket_rebalance.runtime.transport import GroupRegistration

    return GroupRegistration(group, True, MessageModel.CLUSTERING, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, (topic,))


def _measure_threaded(namesrv: str, topic: str, kind: str) -> float:
    from rocket_rebalance.model import MessageQueue
    from rocket_rebalance.runtime.transport import PullResult, TransportError
    from rocket_rebalance.runtime.transport.remoting import RemotingTransport

    transport = RemotingTransport([namesrv])
    queues = [MessageQueue(topic, "broker-a", q) for q in range(TOPIC_QUEUES)]
    try:
        transport.route(topic)
        if kind == "calls":
            transport.max_offset(queues[0])
            started = time.perf_counter()
            for _ in range(CALLS):
                transport.max_offset(queues[0])
            return CALLS / (time.perf_counter() - started)
        transport.heartbeat("broker-a", "127.0.0.1@bench", _registration("GID_bench_threaded", topic))
        done = threading.Semaphore(0)
        count = [0]
        failures: list[TransportError] = []

        def pull_from(mq: MessageQueue, offset: int) -> None:
            def finished(result: PullResult | TransportError) -> None:
                if isinstance(result, TransportError):
                    failures.append(result)
                    done.release()
                    return
                count[0] += len(result.messages)
                if result.next_begin_offset >= MESSAGES:
                    done.release()
                else:
                    pull_from(mq, result.next_begin_offset)

            transport.pull(mq, "GID_bench_threaded", offset, 32, 0, finished)

        started = time.perf_counter()
        for mq in queues:
            pull_from(mq, 0)
        for _ in queues:
            done.acquire()
        if failures:
            raise failures[0]
        assert count[0] == MESSAGES * TOPIC_QUEUES, count
        return count[0] / (time.perf_counter() - started)
    finally:
        transport.close()


async def _measure_async(namesrv: str, topic: str, kind: str) -> float:
    from rocket_rebalance.model import MessageQueue
    from rocket_rebalance.runtime.transport.remoting_async import AsyncRemotingTransport

    transport = AsyncRemotingTransport([namesrv])
    queues = [MessageQueue(topic, "broker-a", q) for q in range(TOPIC_QUEUES)]
    try:
        await transport.route(topic)
        if kind == "calls":
            await transport.max_offset(queues[0])
            started = time.perf_counter()
            for _ in range(CALLS):
                await transport.max_offset(queues[0])
            return CALLS / (time.perf_counter() - started)

        await transport.heartbeat("broker-a", "127.0.0.1@bench", _registration("GID_bench_async", topic))

        async def drain(mq: MessageQueue) -> int:
            offset, count = 0, 0
            while offset < MESSAGES:
                result = await transport.pull(mq, "GID_bench_async", offset, 32, 0)
                count += len(result.messages)
                offset = result.next_begin_offset
            return count

        started = time.perf_counter()
        counts = await asyncio.gather(*(drain(mq) for mq in queues))
        assert sum(counts) == MESSAGES * TOPIC_QUEUES, counts
        return sum(counts) / (time.perf_counter() - started)
    finally:
        await transport.close()


def _one(tree: Path, transport: str, kind: str, namesrv: str, topic: str) -> float:
    """One measure in a fresh process whose package is ``tree``'s."""
    code = (
        f"import sys; sys.path.insert(0, {str(tree)!r}); sys.path.insert(0, {str(ROOT / 'benchmarks')!r})\n"
        "import asyncio, remoting_async as b\n"
        f"args = ({namesrv!r}, {topic!r}, {kind!r})\n"
        f"print(b._measure_threaded(*args) if {transport == 'threaded'!r} else asyncio.run(b._measure_async(*args)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tree, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{transport} {kind} in {tree} failed: {done.stderr.strip().splitlines()[-1:]}")
    return float(done.stdout.strip().splitlines()[-1])


def _fill(namesrv: str) -> str:
    from rocket_rebalance.runtime.transport.remoting import RemotingTransport

    topic = f"BenchAsync_{int(time.time())}"
    transport = RemotingTransport([namesrv], timeout=30)
    try:
        transport.create_topic(topic, TOPIC_QUEUES, ["broker-a"])
        for q in range(TOPIC_QUEUES):
            for _ in range(MESSAGES // 500):
                transport.send(topic, "broker-a", [b"x" * 256] * 500, q)
    finally:
        transport.close()
    return topic


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--namesrv", help="a running cluster with a broker-a (default: start one)")
    parser.add_argument("--base", type=Path, help="a checkout of an older commit: its threaded transport too")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    cluster = None
    if args.namesrv is None:
        from rocket_rebalance.lab.rocketmq import RocketMQCluster

        cluster = RocketMQCluster(Path(tempfile.mkdtemp(prefix="bench-async-")), ("broker-a",))
        namesrv = cluster.start()
    else:
        namesrv = args.namesrv
    try:
        topic = _fill(namesrv)
        runs = [("threaded", ROOT), ("async", ROOT)] + ([("threaded (base)", args.base)] if args.base else [])
        figures: dict[tuple[str, str], list[float]] = {}
        for repetition in range(args.repeat):
            turn = repetition % len(runs)  # each run first in turn: no kind gains from a warmer broker
            for kind in ("calls", "drain"):
                for name, tree in runs[turn:] + runs[:turn]:
                    transport = "async" if name == "async" else "threaded"
                    figures.setdefault((kind, name), []).append(_one(tree, transport, kind, namesrv, topic))
        print(f"{'measure':<8} {'transport':<16} {'median /s':>11} {'min':>9} {'max':>9} {'/ threaded':>10}")
        for kind in ("calls", "drain"):
            reference = statistics.median(figures[(kind, "threaded")])
            for name, _ in runs:
                values = figures[(kind, name)]
                median = statistics.median(values)
                print(
                    f"{kind:<8} {name:<16} {median:>11,.0f} {min(values):>9,.0f} {max(values):>9,.0f} "
                    f"{median / reference:>10.2f}"
                )
        print(json.dumps({"load": os.getloadavg(), "repeat": args.repeat, "messages": MESSAGES * TOPIC_QUEUES}))
    finally:
        if cluster is not None:
            cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
