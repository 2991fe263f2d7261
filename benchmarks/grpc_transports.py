"""The threaded and the asyncio gRPC transports to ``nameserver_stub`` side by side: same run, same stub process.

Run: ``.venv/bin/python benchmarks/grpc_transports.py [--calls 2000] [--pulls 64] [--rounds 5]``. Both transports
build every request and read every answer with the same code (:mod:`rocket_rebalance.runtime.transport.grpc_calls`),
so the table shows what carrying a call costs on each: a blocking channel on the caller's thread (and callback
futures for pulls), or one ``grpc.aio`` channel awaited on the loop. Per workload, the median of ``rounds``:

- sequential calls: ``consumer_list`` one after another, calls per second;
- concurrent pulls: ``pulls`` pulls of 32 messages (100-byte bodies) in flight at once, one per queue offset, until
  all answered (the threaded transport's callback pulls, or ``asyncio.gather``), messages per second.

The stub runs as a subprocess (its own interpreter), so its work is not charged to either transport; the machine
is shared: compare the two columns of one run, not figures of different runs.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from rocket_rebalance.model import MessageQueue
from rocket_rebalance.runtime.transport import PullResult, TransportError
from rocket_rebalance.runtime.transport.grpc import GrpcTransport
from rocket_rebalance.runtime.transport.grpc_async import AsyncGrpcTransport

BROKER = "broker-a"
TOPIC = "BenchTopic"
GROUP = "BenchGroup"
BATCH = 32


def start_stub(data_dir: Path) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, "-m", "nameserver_stub", "--listen", "127.0.0.1:0", "--data-dir", str(data_dir)]
    command += ["--topic", f"{TOPIC}:{BROKER}=1", "--log-level", "WARNING"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    address = process.stdout.readline().strip()
    if not address:
        raise RuntimeError("the stub did not start")
    return process, address


def timed(work: Callable[[], None]) -> float:
    began = time.perf_counter()
    work()
    return time.perf_counter() - began


def threaded_calls(transport: GrpcTransport, calls: int) -> None:
    for _ in range(calls):
        transport.consumer_list(BROKER, GROUP)


def threaded_pulls(transport: GrpcTransport, pulls: int) -> None:
    mq = MessageQueue(TOPIC, BROKER, 0)
    left = [pulls]
    lock, done = threading.Lock(), threading.Event()
    failures: list[TransportError] = []

    def answered(result: PullResult | TransportError) -> None:
        with lock:
            if isinstance(result, TransportError):
                failures.append(result)
            left[0] -= 1
            if left[0] == 0:
                done.set()

    for i in range(pulls):
        transport.pull(mq, GROUP, i * BATCH, BATCH, 0, answered)
    if not done.wait(60) or failures:
        raise RuntimeError(f"pulls did not all answer: {failures[:1]}")


async def async_calls(transport: AsyncGrpcTransport, calls: int) -> None:
    for _ in range(calls):
        await transport.consumer_list(BROKER, GROUP)


async def async_pulls(transport: AsyncGrpcTransport, pulls: int) -> None:
    mq = MessageQueue(TOPIC, BROKER, 0)
    results = await asyncio.gather(*(transport.pull(mq, GROUP, i * BATCH, BATCH, 0) for i in range(pulls)))
    assert all(len(result.messages) == BATCH for result in results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--pulls", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rows: dict[str, tuple[list[float], list[float]]] = {"sequential calls/s": ([], []), "pulled messages/s": ([], [])}
    with tempfile.TemporaryDirectory() as folder, asyncio.Runner() as runner:
        process, address = start_stub(Path(folder) / "data")
        threaded = GrpcTransport(address, timeout=30)
        transport = AsyncGrpcTransport(address, timeout=30)  # its channel opens on the runner's loop
        try:
            for start in range(0, args.pulls * BATCH, 256):
                threaded.send(TOPIC, BROKER, [b"x" * 100] * min(256, args.pulls * BATCH - start), 0)
            runner.run(transport.consumer_list(BROKER, GROUP))  # connected before the clock runs
            for _ in range(args.rounds):  # alternating, so both see the same moments of a shared machine
                calls, pulled = rows["sequential calls/s"], rows["pulled messages/s"]
                calls[0].append(args.calls / timed(lambda: threaded_calls(threaded, args.calls)))
                calls[1].append(args.calls / timed(lambda: runner.run(async_calls(transport, args.calls))))
                pulled[0].append(args.pulls * BATCH / timed(lambda: threaded_pulls(threaded, args.pulls)))
                pulled[1].append(args.pulls * BATCH / timed(lambda: runner.run(async_pulls(transport, args.pulls))))
        finally:
            runner.run(transport.close())
            threaded.close()
            process.terminate()
            process.wait(30)
    print(f"{'workload':<22}{'threaded':>12}{'asyncio':>12}{'asyncio/threaded':>18}")
    for name, (sync_rates, async_rates) in rows.items():
        sync_rate, async_rate = statistics.median(sync_rates), statistics.median(async_rates)
        print(f"{name:<22}{sync_rate:>12,.0f}{async_rate:>12,.0f}{async_rate / sync_rate:>18.2f}")


if __name__ == "__main__":
    main()
