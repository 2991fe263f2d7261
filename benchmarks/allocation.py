"""Allocation speed: one consumer's view and the whole group's plan, for every strategy, beside Java's.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/allocation.py`` (``--quick`` for fewer repetitions). Prints one
table with our median, Java's median measured in the same run, the ratio and the target. Java's figures come from
``benchmarks/java/AllocationLoop.java``, run over the RocketMQ Maven jars (the jars the golden vectors were
recorded with, :func:`rocket_rebalance.lab.rocketmq.ensure_jars`; Java 17 and Maven, or the cache named by
``ROCKET_REBALANCE_ROCKETMQ_CACHE``): for a whole-group plan, Java's figure is the every-consumer loop (each consumer
calling ``allocate`` with the same lists, what a group of Java consumers computes between them in a rebalance),
which the plan must not be slower than; for one view, one consumer's call. ``--no-java`` leaves the Java column
empty. Machines here are noisy, so the plan rows also carry our own same-run baseline: our per-consumer loop.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import time
import warnings
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from rocket_rebalance.model import MessageQueue, prepare_rebalance_input
from rocket_rebalance.plan import plan
from rocket_rebalance.strategies import AllocateMessageQueueStrategy, create_strategy
from rocket_rebalance.strategies.consistent_hash import REPLICA_POINTS

SIZES = [(1_000, 100), (10_000, 1_000)]
JAVA_LOOPS = ("AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH", "CONFIG", "MACHINE_ROOM", "MACHINE_ROOM_NEARBY-AVG")
"""The strategies whose every-consumer loop the Java program times (MACHINE_ROOM_NEARBY with inner AVG)."""

JAVA_PROGRAM = Path(__file__).parent / "java" / "AllocationLoop.java"

# (operation, queue count) -> the most our time may be, as a multiple of Java's same-run time (issue 25)
JAVA_TARGETS: dict[tuple[str, int], float] = {
    ("CONSISTENT_HASH one view, cold ring", 10_000): 0.15,
    **{(f"{name} whole group", queues): 1.0 for name in JAVA_LOOPS for queues, _ in SIZES},
}


def java_figures(queues: int, consumers: int, repeat: int) -> dict[str, float]:
    """Java's medians for one size, by our operation name (a whole-group row gets Java's every-consumer loop)."""
    from rocket_rebalance.lab.rocketmq import ensure_jars

    lib = ensure_jars()
    done = subprocess.run(
        ["java", "-Xmx2g", "-cp", f"{lib}/*", str(JAVA_PROGRAM), str(queues), str(consumers), str(repeat)],
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    )
    found: dict[str, float] = {}
    for line in done.stdout.splitlines():
        if not line.startswith('{"operation"'):  # the jars' logback prints its configuration to stdout
            continue
        row = json.loads(line)
        operation = row["operation"].replace(" every-consumer loop", " whole group")
        found[operation] = row["seconds"]
        if "loop" in row["operation"] and row["sampled"] < consumers:
            print(f"(Java {row['operation']} at {queues:,} x {consumers:,}: {row['sampled']} consumers timed, scaled)")
    return found


def group(queues: int, consumers: int) -> tuple[tuple[MessageQueue, ...], tuple[str, ...]]:
    """A topic spread over brokers of 16 queues each, and consumers with realistic IDs, both Java-sorted."""
    mqs = [MessageQueue("BenchTopic", f"hz@broker-{i // 16}", i % 16) for i in range(queues)]
    cids = [f"hz@10.0.{i // 250}.{i % 250}@{4000 + i}" for i in range(consumers)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ready = prepare_rebalance_input(mqs, cids)
    return ready.mq_all, ready.cid_all


def median_seconds(run: Callable[[], Any], repeat: int, setup: Callable[[], Any] | None = None) -> float:
    """Median wall time of ``run`` over ``repeat`` runs (``setup`` before each, untimed); GC off while timing."""
    samples = []
    for _ in range(repeat):
        if setup is not None:
            setup()
        gc.disable()
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
        gc.enable()
    return statistics.median(samples)


def strategies_for_plan() -> list[AllocateMessageQueueStrategy]:
    return [
        create_strategy("AVG"),
        create_strategy("AVG_BY_CIRCLE"),
        create_strategy("CONSISTENT_HASH"),
        create_strategy("CONFIG", message_queues=[MessageQueue("BenchTopic", "hz@broker-0", 0)]),
        create_strategy("MACHINE_ROOM", consumer_idcs={"hz"}),
        create_strategy("MACHINE_ROOM_NEARBY", inner=create_strategy("AVG")),
    ]


def allocate_each(
    strategy: AllocateMessageQueueStrategy, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[list[MessageQueue] | None]:
    """The same-run baseline for a plan: every consumer computing its own share, as a group does in Java."""
    return [strategy.allocate("g", cid, mq_all, cid_all) for cid in cid_all]


def fmt(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


Row = tuple[str, int, int, float, float | None]


def measure(queues: int, consumers: int, repeat: int) -> list[Row]:
    """Every row of the table for one group size."""
    mq_all, cid_all = group(queues, consumers)
    middle = cid_all[consumers // 2]
    rows: list[Row] = []

    def record(operation: str, seconds: float, baseline: float | None = None) -> None:
        rows.append((operation, queues, consumers, seconds, baseline))

    record(
        "prepare input (set + Java sort)",
        median_seconds(lambda: prepare_rebalance_input(list(mq_all), list(cid_all)), repeat),
    )
    for name in ("AVG", "AVG_BY_CIRCLE"):
        strategy = create_strategy(name)
        one_view = median_seconds(partial(strategy.allocate, "g", middle, mq_all, cid_all), repeat * 50)
        record(f"{name} one view", one_view)

    # Cold: a new strategy (no ring cached) and new queue objects (no queue hash cached), as on a first round.
    fresh: dict[str, Any] = {}

    def cold_setup() -> None:
        REPLICA_POINTS.clear()  # the process-wide replica points too, as in a new process
        fresh["strategy"] = create_strategy("CONSISTENT_HASH")
        fresh["mq_all"] = tuple(MessageQueue(mq.topic, mq.broker_name, mq.queue_id) for mq in mq_all)

    cold = median_seconds(lambda: fresh["strategy"].allocate("g", middle, fresh["mq_all"], cid_all), repeat, cold_setup)
    record("CONSISTENT_HASH one view, cold ring", cold)
    warm = create_strategy("CONSISTENT_HASH")
    warm.allocate("g", middle, mq_all, cid_all)
    record(
        "CONSISTENT_HASH one view, warm ring",
        median_seconds(lambda: warm.allocate("g", middle, mq_all, cid_all), repeat),
    )

    for strategy in strategies_for_plan():
        whole = median_seconds(partial(plan, strategy, "g", mq_all, cid_all), repeat)
        slow = strategy.name.endswith("CONSISTENT_HASH") or queues * consumers > 10**6
        per_consumer = median_seconds(partial(allocate_each, strategy, mq_all, cid_all), 1 if slow else 3)
        record(f"{strategy.name} whole group", whole, per_consumer)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--no-java", action="store_true", help="do not run Java's side")
    args = parser.parse_args()
    repeat = 5 if args.quick else 21
    rows: list[Row] = []
    java: dict[tuple[str, int, int], float] = {}
    for queues, consumers in SIZES:  # Java's run and ours for one size one after the other: the same machine state
        if not args.no_java:
            java.update({(op, queues, consumers): t for op, t in java_figures(queues, consumers, repeat).items()})
        rows.extend(measure(queues, consumers, repeat))
    print(
        f"{'operation':<38} {'queues x consumers':>18} {'ours':>10} {'Java':>10} {'ours/Java':>10} "
        f"{'target':>9} {'loop baseline':>14} {'loop/plan':>9}"
    )
    for operation, queues, consumers, seconds, baseline in rows:
        java_seconds = java.get((operation, queues, consumers))
        limit = JAVA_TARGETS.get((operation, queues))
        target = f"<={limit:g}x" if limit is not None else "-"
        if limit is not None and java_seconds is not None:
            target += " ok" if seconds <= limit * java_seconds else " MISSED"
        print(
            f"{operation:<38} {f'{queues:,} x {consumers:,}':>18} {fmt(seconds):>10} {fmt(java_seconds):>10} "
            f"{(f'{seconds / java_seconds:.2f}' if java_seconds else '-'):>10} {target:>9} {fmt(baseline):>14} "
            f"{(f'{baseline / seconds:.0f}x' if baseline else '-'):>9}"
        )


if __name__ == "__main__":
    main()
