"""Benchmark the nameserver stub: notification fan-out, offset commits, pull throughput. Prints a table.

The stub runs as a subprocess (its own interpreter and GIL), the clients here, over loopback, as a consumer
fleet would use it. Run: ``python benchmarks/stub.py`` (about half a minute on 2 cores).

- fan-out: 200 clients of one group hold a Connect stream; a new client joins (HeartBeat); the time from sending
  that heartbeat until every one of the 200 has its NOTIFY_CONSUMER_IDS_CHANGED, over several rounds.
- offset commits: UpdateConsumerOffset calls per second from one client (1 queue per call, and 8 per call).
- pulls: messages per second pulled (32 per call, 100-byte bodies) by 1 puller and by 8 concurrent pullers.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc

from rocket_rebalance._proto.v1 import broker_pb2, broker_pb2_grpc, common_pb2

BROKER = "broker-a"
TOPIC = "BenchTopic"
QUEUES = 8


def start_stub(data_dir: Path) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nameserver_stub",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            str(data_dir),
            "--topic",
            f"{TOPIC}:{BROKER}={QUEUES}",
            "--log-level",
            "WARNING",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    address = process.stdout.readline().strip()
    if not address:
        raise RuntimeError("the stub did not start")
    return process, address


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def consumer(group: str) -> broker_pb2.ConsumerData:
    return broker_pb2.ConsumerData(
        group_name=group,
        consume_type=common_pb2.CONSUME_TYPE_PUSH,
        message_model=common_pb2.MESSAGE_MODEL_CLUSTERING,
        consume_from_where=common_pb2.CONSUME_FROM_LAST_OFFSET,
        subscriptions=[common_pb2.SubscriptionData(topic=TOPIC, sub_string="*")],
    )


async def fan_out(address: str, clients: int, rounds: int) -> list[float]:
    """Seconds from a join's heartbeat until all ``clients`` members were notified, per round."""
    group = "FanOutGroup"
    channels = [grpc.aio.insecure_channel(address) for _ in range(8)]
    stubs = [broker_pb2_grpc.BrokerStub(channel) for channel in channels]
    for i in range(clients):  # register first: joins with no stream open notify nobody
        await stubs[i % 8].HeartBeat(
            broker_pb2.HeartbeatRequest(broker_name=BROKER, client_id=f"member-{i}", consumer_datas=[consumer(group)])
        )
    arrivals: list[float] = []
    everyone = asyncio.Event()
    connected = 0
    all_connected = asyncio.Event()

    async def member(i: int) -> None:
        nonlocal connected
        call = stubs[i % 8].Connect(broker_pb2.ConnectRequest(broker_name=BROKER, client_id=f"member-{i}"))
        async for note in call:
            if note.HasField("connected"):
                connected += 1
                if connected == clients:
                    all_connected.set()
                continue
            arrivals.append(time.perf_counter())
            if len(arrivals) == clients:
                everyone.set()

    tasks = [asyncio.create_task(member(i)) for i in range(clients)]
    await all_connected.wait()
    samples: list[float] = []
    for round_ in range(rounds * 2):
        arrivals.clear()
        everyone.clear()
        joining = round_ % 2 == 0  # alternate: a join (measured), then the leave that resets the group
        started = time.perf_counter()
        if joining:
            await stubs[0].HeartBeat(
                broker_pb2.HeartbeatRequest(broker_name=BROKER, client_id="joiner", consumer_datas=[consumer(group)])
            )
        else:
            await stubs[0].UnregisterClient(
                broker_pb2.UnregisterClientRequest(broker_name=BROKER, client_id="joiner", consumer_group=group)
            )
        await asyncio.wait_for(everyone.wait(), 30)
        if joining:
            samples.append(max(arrivals) - started)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for channel in channels:
        await channel.close()
    return samples


def preload(stub: broker_pb2_grpc.BrokerStub, per_queue: int) -> None:
    body = b"x" * 100
    batch = [broker_pb2.MessageToSend(body=body, tags="TagA")] * 1000
    for queue_id in range(QUEUES):
        for _ in range(per_queue // 1000):
            stub.SendMessage(
                broker_pb2.SendMessageRequest(broker_name=BROKER, topic=TOPIC, queue_id=queue_id, messages=batch)
            )


def commits_per_second(stub: broker_pb2_grpc.BrokerStub, queues_per_call: int, seconds: float) -> float:
    group = f"CommitGroup{queues_per_call}"
    calls, offset = 0, 0
    deadline = time.perf_counter() + seconds
    started = time.perf_counter()
    while time.perf_counter() < deadline:
        offset += 1
        stub.UpdateConsumerOffset(
            broker_pb2.UpdateConsumerOffsetRequest(
                broker_name=BROKER,
                consumer_group=group,
                client_id="bench",
                offsets=[
                    common_pb2.QueueOffset(queue=common_pb2.MessageQueue(topic=TOPIC, queue_id=q), offset=offset)
                    for q in range(queues_per_call)
                ],
            )
        )
        calls += 1
    return calls / (time.perf_counter() - started)


def pulled_per_second(address: str, pullers: int, seconds: float, limit: int) -> float:
    counts = [0] * pullers
    stop = threading.Event()

    def pull(index: int) -> None:
        with grpc.insecure_channel(address) as channel:
            stub = broker_pb2_grpc.BrokerStub(channel)
            offset = 0
            while not stop.is_set() and offset < limit:
                response = stub.PullMessage(
                    broker_pb2.PullMessageRequest(
                        broker_name=BROKER,
                        consumer_group="PullGroup",
                        topic=TOPIC,
                        queue_id=index % QUEUES,
                        queue_offset=offset,
                        max_msg_nums=32,
                    )
                )
                counts[index] += len(response.messages)
                offset = response.next_begin_offset

    threads = [threading.Thread(target=pull, args=(i,)) for i in range(pullers)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    timer = threading.Timer(seconds, stop.set)
    timer.start()
    for thread in threads:
        thread.join()
    timer.cancel()
    return sum(counts) / (time.perf_counter() - started)


def timed(label: str, run: Callable[[], object]) -> object:
    print(f"... {label}", file=sys.stderr, flush=True)
    return run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of each throughput run")
    parser.add_argument("--messages-per-queue", type=int, default=20_000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="stub-bench-") as data:
        process, address = start_stub(Path(data))
        try:
            samples = timed("fan-out", lambda: asyncio.run(fan_out(address, args.clients, args.rounds)))
            assert isinstance(samples, list)
            with grpc.insecure_channel(address) as channel:
                stub = broker_pb2_grpc.BrokerStub(channel)
                timed("preload", lambda: preload(stub, args.messages_per_queue))
                one = commits_per_second(stub, 1, args.seconds)
                eight = commits_per_second(stub, 8, args.seconds)
            pull_one = pulled_per_second(address, 1, args.seconds, args.messages_per_queue)
            pull_eight = pulled_per_second(address, 8, args.seconds, args.messages_per_queue)
        finally:
            process.terminate()
            process.wait(30)
    rows = [
        (f"fan-out to {args.clients} clients after a join, p50", f"{statistics.median(samples) * 1000:.1f} ms"),
        (
            f"fan-out to {args.clients} clients after a join, p99 ({len(samples)} rounds)",
            f"{percentile(samples, 0.99) * 1000:.1f} ms",
        ),
        ("offset commits/s (1 queue per call, 1 client)", f"{one:,.0f}"),
        ("offset commits/s (8 queues per call, 1 client)", f"{eight:,.0f} calls = {eight * 8:,.0f} offsets"),
        ("pulled msgs/s, 1 puller (32 per pull, 100 B)", f"{pull_one:,.0f}"),
        ("pulled msgs/s, 8 concurrent pullers", f"{pull_eight:,.0f}"),
    ]
    width = max(len(label) for label, _ in rows)
    print(f"nameserver_stub, server in a subprocess, loopback, Python {sys.version.split()[0]}, {os.cpu_count()} cores")
    print(f"| {'measure'.ljust(width)} | value |")
    print(f"|{'-' * (width + 2)}|-------|")
    for label, value in rows:
        print(f"| {label.ljust(width)} | {value} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
