"""Allocation speed: one consumer's view and the whole group's plan, for every strategy.

Run: ``.venv/bin/python benchmarks/allocation.py`` (``--quick`` for fewer repetitions). Prints one table with our
median, the Java figure recorded in ../shared/golden/README.md (JDK 17 on a 2-vCPU VM of this kind), the ratio,
and the target from the foundation issue. Machines here are noisy, so the plan rows also carry a same-run
baseline: the per-consumer loop (``allocate`` once per consumer) that a whole-group plan replaces.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from rocket_rebalance.model import MessageQueue, prepare_rebalance_input
from rocket_rebalance.plan import plan
from rocket_rebalance.strategies import AllocateMessageQueueStrategy, create_strategy

SIZES = [(1_000, 100), (10_000, 1_000)]

# (operation, queues, consumers) -> (Java median in seconds, our target in seconds or None)
JAVA: dict[tuple[str, int, int], float] = {
    ("AVG one view", 1_000, 100): 0.29e-6,
    ("AVG one view", 10_000, 1_000): 2.8e-6,
    ("CONSISTENT_HASH one view, cold ring", 1_000, 100): 1.08e-3,
    ("CONSISTENT_HASH one view, cold ring", 10_000, 1_000): 98e-3,
    ("AVG whole group", 10_000, 1_000): 2.2e-3,
    ("CONSISTENT_HASH whole group", 10_000, 1_000): 91.6,
}
TARGETS: dict[tuple[str, int], float] = {
    ("AVG one view", 10_000): 25e-6,
    ("CONSISTENT_HASH one view, cold ring", 10_000): 30e-3,
    ("CONSISTENT_HASH one view, warm ring", 10_000): 10e-3,
    ("CONSISTENT_HASH whole group", 10_000): 150e-3,
    ("AVG whole group", 10_000): 10e-3,
}


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
    args = parser.parse_args()
    repeat = 5 if args.quick else 21
    rows = [row for queues, consumers in SIZES for row in measure(queues, consumers, repeat)]
    print(
        f"{'operation':<38} {'queues x consumers':>18} {'ours':>10} {'Java':>10} {'ours/Java':>10} "
        f"{'target':>9} {'loop baseline':>14} {'loop/plan':>9}"
    )
    for operation, queues, consumers, seconds, baseline in rows:
        java = JAVA.get((operation, queues, consumers))
        target = TARGETS.get((operation, queues))
        verdict = "" if target is None else (" ok" if seconds <= target else " MISSED")
        print(
            f"{operation:<38} {f'{queues:,} x {consumers:,}':>18} {fmt(seconds):>10} {fmt(java):>10} "
            f"{(f'{seconds / java:.2f}' if java else '-'):>10} {fmt(target) + verdict:>9} {fmt(baseline):>14} "
            f"{(f'{baseline / seconds:.0f}x' if baseline else '-'):>9}"
        )


if __name__ == "__main__":
    main()
