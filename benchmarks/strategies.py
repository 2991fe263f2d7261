"""What each strategy trades, over many random groups: balance, movement, orphans, split views, totals over topics.

Run: ``.venv/bin/python benchmarks/strategies.py`` (``--groups N`` random groups per size, default 200; ``--quick``
for 20). For each of four group sizes it prints ``rocket_rebalance.tradeoffs``'s table (every strategy on the same
groups: max/avg of loads, queues moved by one join and one graceful leave beside the least a balanced split moves,
what a kill leaves unconsumed until the broker notices, and the join window's double and orphan shares), then the
time of one whole-group plan per strategy against AVG's in the same run. Last, per-consumer totals over all the
topics of random multi-topic groups. Figures are kept in RESULTS.md.
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable, Sequence
from functools import partial

from rocket_rebalance.plan import plan
from rocket_rebalance.strategies import AllocateMessageQueueStrategy
from rocket_rebalance.tradeoffs import (
    GROUP,
    Group,
    compare,
    compare_topics,
    default_strategies,
    format_table,
    format_topic_table,
    random_groups,
)

SHAPES = [(64, 8), (64, 100), (1024, 8), (1024, 100)]
TOPIC_CONSUMERS = (4, 8, 32)


def seconds(run: Callable[[], object]) -> float:
    """Wall time of one call, with the garbage collector paused so that a collection is not charged to it."""
    gc.disable()
    try:
        start = time.perf_counter()
        run()
        return time.perf_counter() - start
    finally:
        gc.enable()


def plan_times(strategy: AllocateMessageQueueStrategy, groups: Sequence[Group]) -> tuple[float, float]:
    """Mean seconds per whole-group plan: cold (the first plan of new queue objects and a new member list, so
    queue hashes and the ring are computed, as after a membership change) and warm (the same plan again)."""
    cold = warm = 0.0
    for group in groups:
        call = partial(plan, strategy, GROUP, group.mq_all, group.cid_all)
        cold += seconds(call)
        warm += seconds(call)
    return cold / len(groups), warm / len(groups)


def format_times(queues: int, consumers: int, groups: int, seed: int) -> str:
    """Each default strategy's plan times on its own new copy of the same groups, against AVG's."""
    times = {
        label: plan_times(strategy, random_groups(queues, consumers, groups, seed))
        for label, strategy in default_strategies().items()
    }
    cold_avg, warm_avg = times["AVG"]
    width = max(len(label) for label in times)
    lines = [
        f"time per whole-group plan, mean of {groups} groups "
        "(cold: new queues and members, hashes and ring computed; warm: the same plan again)",
        f"{'strategy':<{width}}  {'cold':>9}{'vs AVG':>8}  {'warm':>9}{'vs AVG':>8}",
    ]
    for label, (cold, warm) in times.items():
        lines.append(
            f"{label:<{width}}  {cold * 1e6:>7.0f}us{cold / cold_avg:>7.1f}x  "
            f"{warm * 1e6:>7.0f}us{warm / warm_avg:>7.1f}x"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--groups", type=int, default=200, help="random groups per size (default 200)")
    parser.add_argument("--quick", action="store_true", help="20 groups per size")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    groups = 20 if args.quick else args.groups
    for queues, consumers in SHAPES:
        print(format_table(compare(default_strategies(), queues, consumers, groups, args.seed)))
        print()
        print(format_times(queues, consumers, groups, args.seed), end="\n\n", flush=True)
    for consumers in TOPIC_CONSUMERS:
        print(format_topic_table(compare_topics(default_strategies(), consumers, groups, args.seed)), end="\n\n")


if __name__ == "__main__":
    main()
