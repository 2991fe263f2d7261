"""``rocket-rebalance demo``: how each strategy splits a sample topic, and what one join moves.

A first look for a new user, with no server: two brokers of eight queues, three consumers, a fourth joining.
"""

from __future__ import annotations

import argparse

from rocket_rebalance.model import MessageQueue, prepare_rebalance_input
from rocket_rebalance.plan import balance, movement, plan
from rocket_rebalance.strategies import AllocateMessageQueueStrategy, create_strategy

__all__ = ["register", "sample_strategies", "show_allocations"]

TOPIC = "TopicTest"
QUEUES = [MessageQueue(TOPIC, broker, queue_id) for broker in ("hz@broker-a", "sh@broker-b") for queue_id in range(8)]
CONSUMERS = ["hz@10.0.0.1@4101", "hz@10.0.0.2@4102", "sh@10.0.0.3@4103"]
JOINER = "sh@10.0.0.4@4104"


def sample_strategies() -> list[AllocateMessageQueueStrategy]:
    """One configured instance of each of the six strategies, as an operator might set them up."""
    return [
        create_strategy("AVG"),
        create_strategy("AVG_BY_CIRCLE"),
        create_strategy("CONSISTENT_HASH"),
        create_strategy("CONFIG", message_queues=QUEUES[:2]),
        create_strategy("MACHINE_ROOM", consumer_idcs={"hz"}),
        create_strategy("MACHINE_ROOM_NEARBY", inner=create_strategy("AVG")),
    ]


def _short(queues: list[MessageQueue]) -> str:
    return " ".join(f"{mq.broker_name.split('@')[-1][-1]}{mq.queue_id}" for mq in queues) or "-"


def show_allocations() -> str:
    """The demo text: per strategy, each consumer's queues before and after the join, and the moves."""
    before = prepare_rebalance_input(QUEUES, CONSUMERS)
    after = prepare_rebalance_input(QUEUES, [*CONSUMERS, JOINER])
    lines = [
        f"topic {TOPIC}: {len(QUEUES)} queues on 2 brokers (a0 = hz@broker-a queue 0); "
        f"consumers {', '.join(CONSUMERS)}; then {JOINER} joins",
    ]
    for strategy in sample_strategies():
        old = plan(strategy, "demo_group", before.mq_all, before.cid_all)
        new = plan(strategy, "demo_group", after.mq_all, after.cid_all)
        moved = movement(old, new)
        stats = balance(new)
        lines.append("")
        lines.append(
            f"{strategy.name}: {len(moved.moved)} queues move on the join "
            f"(a balanced split needs {moved.minimum}); max/avg after = {stats.max_over_avg:.2f}"
        )
        for cid in after.cid_all:
            lines.append(f"  {cid:<20} before: {_short(old.get(cid, [])):<26} after: {_short(new[cid])}")
    return "\n".join(lines)


def _run(args: argparse.Namespace) -> int:
    print(show_allocations())
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("demo", help="show how each strategy splits a sample topic")
    parser.set_defaults(handler=_run)
