"""``rocket-rebalance demo``: a live group on this machine, and (``--static``) how each strategy splits a topic.

The live demo runs a real ``nameserver_stub`` and real consumer processes: three consumers and a producer, then a
fourth consumer joins, one leaves gracefully and one is killed. After each step it prints who owns which queue,
checks that every queue has exactly one owner and that every message was consumed, and exits 0 only if so.
The static part needs no server: two brokers of eight queues, three consumers, a fourth joining; then what each
strategy trades, balance against movement, measured on random groups (:mod:`rocket_rebalance.tradeoffs`) and drawn
as a chart (``--chart FILE`` draws it as a PNG too; ``make demo`` writes ``build/demo/tradeoffs.png``).
``--rocketmq`` runs the live part on a real Apache RocketMQ NameServer and brokers instead, with a Java consumer in
the group.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from rocket_rebalance.commands import CommandError
from rocket_rebalance.model import MessageQueue, prepare_rebalance_input, printable
from rocket_rebalance.pictures import png_bytes, require_matplotlib, tradeoff_figure
from rocket_rebalance.plan import balance, movement, plan
from rocket_rebalance.strategies import AllocateMessageQueueStrategy, create_strategy
from rocket_rebalance.tradeoffs import compare, default_strategies, format_chart, format_table

if TYPE_CHECKING:  # the lab (process harnesses) is loaded only when a live demo runs, never by other commands
    from rocket_rebalance.lab.mixed_group import MixedGroup
    from rocket_rebalance.lab.stub_cluster import LocalCluster

__all__ = ["live_demo", "register", "rocketmq_demo", "sample_strategies", "show_allocations", "show_tradeoffs"]

TOPIC = "TopicTest"
QUEUES = [MessageQueue(TOPIC, broker, queue_id) for broker in ("hz@broker-a", "sh@broker-b") for queue_id in range(8)]
CONSUMERS = ["hz@10.0.0.1@4101", "hz@10.0.0.2@4102", "sh@10.0.0.3@4103"]
JOINER = "sh@10.0.0.4@4104"
# The trade-off chart's groups: a common shape, and few enough groups that the demo stays quick (about 1 s).
TRADEOFF_QUEUES, TRADEOFF_CONSUMERS, TRADEOFF_GROUPS, TRADEOFF_SEED = 64, 8, 40, 1


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


TRADEOFF_TITLE = (
    f"Balance against movement: {TRADEOFF_GROUPS} random groups of {TRADEOFF_QUEUES} queues and "
    f"{TRADEOFF_CONSUMERS} consumers, one more joining (seed {TRADEOFF_SEED})"
)


def show_tradeoffs(chart: Path | None = None) -> str:
    """The demo's chart of balance against movement and its table, measured live on random groups (one example
    above says little about the hashing strategies; ``benchmarks/strategies.py`` has the figures for more sizes).
    With ``chart``, the same figures drawn as a PNG there too (a picture reads faster than letters on a grid)."""
    rows = compare(default_strategies(), TRADEOFF_QUEUES, TRADEOFF_CONSUMERS, TRADEOFF_GROUPS, TRADEOFF_SEED)
    drawn = []
    if chart is not None:
        chart.parent.mkdir(parents=True, exist_ok=True)
        chart.write_bytes(png_bytes(tradeoff_figure(rows, TRADEOFF_TITLE)))
        drawn = ["", f"(drawn as a picture too: {printable(str(chart))})"]
    return "\n".join(
        [
            f"# {TRADEOFF_TITLE}",
            "",
            format_chart(rows),
            "",
            format_table(rows),
            *drawn,
        ]
    )


def _report(
    title: str, waited: float, ownership: dict[str, set[str]], queues: int, consumed: int, missing: int, duplicates: int
) -> bool:
    """Print one settled step: who owns what, whether each queue has one owner, what was consumed."""
    print(f"\n== {title} (settled {waited:.1f} s after the step)")
    width = max((len(cid) for cid in ownership), default=4)
    for cid, owned in sorted(ownership.items()):
        print(f"  {cid:<{width}} owns {len(owned)}: {' '.join(sorted(owned))}")
    owners = [q for owned in ownership.values() for q in owned]
    print(
        f"  every queue has exactly one owner: {len(owners) == len(set(owners)) == queues}; "
        f"consumed {consumed} messages, missing {missing}, consumed twice {duplicates}"
    )
    return missing == 0


def _print_step(cluster: LocalCluster, title: str) -> bool:
    """Wait for the group to settle, print who owns what, and say whether every message was consumed once."""
    from rocket_rebalance.lab.wait import wait_until

    try:
        waited = wait_until(cluster.balanced, timeout=60)
        wait_until(cluster.caught_up, timeout=60)
    except TimeoutError as error:
        print(f"\n== {title}: did not settle ({error})")
        expected = cluster.expected_ownership()
        for cid, queues in sorted(cluster.ownership().items()):
            print(
                f"  {cid:<4} reports {' '.join(sorted(queues)) or '-'}; the plan says {' '.join(sorted(expected[cid]))}"
            )
        return False
    delivery = cluster.delivery()
    missing = delivery.missing(cluster.max_offsets())
    total = sum(delivery.counts.values())
    return _report(title, waited, cluster.ownership(), len(cluster.queues), total, missing, delivery.duplicates)


def live_demo(work_dir: Path) -> bool:
    """The live demo in ``work_dir``; True when every step settled with nothing lost."""
    from rocket_rebalance.lab.stub_cluster import LocalCluster

    ok = True
    with LocalCluster(work_dir, group="GID_demo") as cluster:
        print(f"nameserver_stub on {cluster.address}: topic {cluster.topic}, 2 brokers x 4 queues, group GID_demo")
        for name in ("c1", "c2", "c3"):
            cluster.start_consumer(name, "--work-ms", "2")
        cluster.produce(300)
        ok &= _print_step(cluster, "three consumers, 300 messages produced")
        cluster.start_consumer("c4", "--work-ms", "2")
        cluster.produce(200)
        ok &= _print_step(cluster, "c4 joined, 200 more messages")
        stopped = cluster.consumers["c2"].stop()
        print(f"\nc2 left gracefully: {stopped}")
        cluster.produce(200)
        ok &= _print_step(cluster, "c2 left, 200 more messages")
        cluster.consumers["c3"].kill()
        print("\nc3 was killed (SIGKILL)")
        cluster.produce(100)
        ok &= _print_step(cluster, "c3 killed, 100 more messages")
    return ok


def _mixed_step(group: MixedGroup, title: str) -> bool:
    """As :func:`_print_step`, for a group on a real RocketMQ."""
    from rocket_rebalance.lab.wait import wait_until

    try:
        waited = wait_until(group.settled, 90, "the group settles on the plan")
        wait_until(lambda: not group.missing(), 90, "every message consumed")
    except TimeoutError as error:
        print(f"\n== {title}: did not settle ({error}): {group.describe()}")
        return False
    owned = {cid: {f"{b}:{q}" for b, q in queues} for cid, queues in group.ownership().items()}
    counts = group.counts()
    twice = sum(n - 1 for n in counts.values() if n > 1)
    return _report(title, waited, owned, len(group.queues), sum(counts.values()), 0, twice)


def rocketmq_demo(work_dir: Path) -> bool:
    """The live demo on a real Apache RocketMQ: Python consumers and a Java one in one group."""
    from rocket_rebalance.lab.mixed_group import MixedGroup
    from rocket_rebalance.lab.rocketmq import RocketMQCluster

    ok = True
    with RocketMQCluster(work_dir / "cluster", ("broker-a", "broker-b")) as cluster:
        cluster.create_topic(TOPIC, 4)
        print(f"RocketMQ NameServer on {cluster.namesrv_address}, brokers {', '.join(cluster.broker_names)}")
        group = MixedGroup(cluster, work_dir / "group", "GID_demo", TOPIC)
        try:
            group.python("py-1")
            group.python("py-2")
            group.java("java-1")
            group.produce(40)
            ok &= _mixed_step(group, "two Python consumers and a Java one, 320 messages produced")
            group.python("py-3")
            group.produce(20)
            ok &= _mixed_step(group, "py-3 joined, 160 more messages")
            print(f"\npy-1 left gracefully: {group.python_members['127.0.0.1@py-1'].stop()}")
            group.produce(20)
            ok &= _mixed_step(group, "py-1 left, 160 more messages")
            group.java_members["127.0.0.1@java-1"].kill()
            print("\njava-1 was killed (SIGKILL)")
            group.produce(20)
            ok &= _mixed_step(group, "java-1 killed, 160 more messages")
        finally:
            group.close()
    return ok


def _run(args: argparse.Namespace) -> int:
    if not args.static and not args.rocketmq:  # said before the overview, not after it
        from rocket_rebalance.runtime.transport.wire import require_stub_extra

        require_stub_extra("the live demo (it runs nameserver_stub; --static needs nothing)")
    if args.chart is not None:
        require_matplotlib("demo --chart")
    print(show_allocations())
    print("\n")
    print(show_tradeoffs(args.chart))
    if args.static:
        return 0
    with tempfile.TemporaryDirectory(prefix="rocket-rebalance-demo-") as folder:
        if args.rocketmq:
            from rocket_rebalance.lab.rocketmq import RocketMQUnavailable

            print("\n\n# Live: a real Apache RocketMQ, Python and Java consumers on this machine\n")
            try:
                ok = rocketmq_demo(Path(folder))
            except RocketMQUnavailable as error:
                raise CommandError(f"demo --rocketmq: {error}") from None
        else:
            print("\n\n# Live: a stub and consumer processes on this machine\n")
            ok = live_demo(Path(folder))
    print("\ndemo " + ("passed: every queue had one owner after each step and nothing was lost" if ok else "FAILED"))
    return 0 if ok else 1


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("demo", help="a live group on this machine, and how each strategy splits a topic")
    parser.add_argument("--static", action="store_true", help="only the strategy overview (no processes)")
    parser.add_argument(
        "--rocketmq", action="store_true", help="the live part on a real Apache RocketMQ with a Java consumer"
    )
    parser.add_argument(
        "--chart",
        type=Path,
        metavar="FILE",
        help="also draw the balance-against-movement chart as a PNG into FILE (needs the spark extra)",
    )
    parser.set_defaults(handler=_run)
