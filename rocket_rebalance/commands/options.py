"""Command-line options shared by several commands: choosing a strategy and its settings."""

from __future__ import annotations

import argparse

from rocket_rebalance.commands import CommandError
from rocket_rebalance.model import MessageQueue
from rocket_rebalance.strategies import STRATEGY_NAMES, AllocateMessageQueueStrategy, create_strategy

__all__ = ["NAMESRV_HELP", "add_connection_options", "add_strategy_options", "build_strategy"]

NAMESRV_HELP = (
    "name server: a RocketMQ list HOST:PORT[;HOST:PORT...] (RocketMQ's remoting protocol), "
    "or grpc://HOST:PORT for nameserver_stub"
)


def add_connection_options(parser: argparse.ArgumentParser, required: bool, what: str = NAMESRV_HELP) -> None:
    """``-n`` and ``--token``, the same for every command that talks to a server."""
    parser.add_argument("-n", "--namesrv", required=required, metavar="ADDRESS", help=what)
    parser.add_argument("--token", help="nameserver_stub's shared token, when it requires one")


# Which strategies each strategy option applies to (MACHINE_ROOM_NEARBY passes them to its inner strategy).
_OPTION_USERS = {
    "virtual_nodes": ("CONSISTENT_HASH",),
    "idcs": ("MACHINE_ROOM",),
    "inner": ("MACHINE_ROOM_NEARBY",),
    "config_queues": ("CONFIG",),
}


def add_strategy_options(parser: argparse.ArgumentParser, repeatable: bool) -> None:
    parser.add_argument(
        "--strategy",
        action="append" if repeatable else "store",
        choices=STRATEGY_NAMES,
        metavar="NAME",
        help=f"allocation strategy, one of {', '.join(STRATEGY_NAMES)}"
        + (" (repeat to compare)" if repeatable else ""),
    )
    parser.add_argument("--virtual-nodes", type=int, metavar="N", help="CONSISTENT_HASH virtual nodes (default 10)")
    parser.add_argument("--idcs", metavar="ROOM,...", help="MACHINE_ROOM: the machine rooms to consume from")
    parser.add_argument("--inner", choices=("AVG", "CONSISTENT_HASH"), help="MACHINE_ROOM_NEARBY's inner strategy")
    parser.add_argument("--config-queues", metavar="BROKER:ID,...", help="CONFIG: the queues every consumer takes")


def build_strategy(name: str, args: argparse.Namespace) -> AllocateMessageQueueStrategy:
    """The strategy ``name`` with the command-line options that apply to it; a misplaced option is an error."""
    inner_name = args.inner or "AVG"
    for option, users in _OPTION_USERS.items():
        applies = name in users or (name == "MACHINE_ROOM_NEARBY" and inner_name in users)
        if getattr(args, option) is not None and not applies:
            flag = "--" + option.replace("_", "-")
            raise CommandError(f"{flag} does not apply to strategy {name} (it is for {', '.join(users)})")

    def configure(strategy_name: str) -> AllocateMessageQueueStrategy:
        if strategy_name == "CONSISTENT_HASH" and args.virtual_nodes is not None:
            return create_strategy(strategy_name, virtual_node_count=args.virtual_nodes)
        if strategy_name == "MACHINE_ROOM":
            if not args.idcs:
                raise CommandError("strategy MACHINE_ROOM needs --idcs ROOM,... (the rooms to consume from)")
            return create_strategy(strategy_name, consumer_idcs={room.strip() for room in args.idcs.split(",")})
        if strategy_name == "CONFIG":
            if not args.config_queues:
                raise CommandError("strategy CONFIG needs --config-queues BROKER:ID,...")
            return create_strategy(strategy_name, message_queues=_config_queues(args.topic, args.config_queues))
        if strategy_name == "MACHINE_ROOM_NEARBY":
            return create_strategy(strategy_name, inner=configure(inner_name))
        return create_strategy(strategy_name)

    return configure(name)


def _config_queues(topic: str, spec: str) -> list[MessageQueue]:
    queues = []
    for item in spec.split(","):
        broker, _, queue_id = item.strip().rpartition(":")
        if not broker or not queue_id.isdigit():
            raise CommandError(f"--config-queues item {item!r} is not BROKER:QUEUE_ID")
        queues.append(MessageQueue(topic, broker, int(queue_id)))
    return queues
