"""``allocate-mq`` (who will own what) and ``simulate`` (what a change will move), for operators."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from rocket_rebalance.commands import CommandError, printable
from rocket_rebalance.commands.options import NAMESRV_HELP, add_connection_options, add_strategy_options, build_strategy
from rocket_rebalance.model import MAX_GROUP_MEMBERS
from rocket_rebalance.mqadmin import (
    allocate_mq,
    mqadmin_allocate_mq,
    parse_id_list,
    parse_mqadmin_id_list,
    to_mqadmin_json,
)
from rocket_rebalance.plan import Plan
from rocket_rebalance.route import TopicRoute
from rocket_rebalance.whatif import Change, Outcome, simulate

__all__ = ["register"]


def _add_source_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-t", "--topic", required=True, help="topic to preview")
    add_connection_options(parser, required=False, what=f"read the route (and members) from this {NAMESRV_HELP}")
    parser.add_argument("--route", type=Path, metavar="FILE", help="read the route from a TopicRouteData JSON file")
    parser.add_argument("-g", "--group", default="", help="consumer group (passed to the strategy)")


def load_route(args: argparse.Namespace) -> TopicRoute:
    """The topic's route from ``--route FILE`` or, with ``-n``, from the name server."""
    if (args.route is None) == (args.namesrv is None):
        raise CommandError("give the route source: either -n ADDRESS or --route FILE")
    if args.route is not None:
        return TopicRoute.from_json(args.topic, args.route.read_text(encoding="utf-8"), str(args.route))
    from rocket_rebalance.runtime.admin import fetch_route  # a wire is loaded only for a server

    return fetch_route(args.namesrv, args.topic, token=args.token)


def _checked_members(client_ids: list[str]) -> list[str]:
    """The member list of a preview, bounded; a repeated ID is warned about, since it is what real consumers
    sharing an ID would do (they take the same queues and leave others unconsumed), so it is shown, not fixed."""
    if len(client_ids) > MAX_GROUP_MEMBERS:
        raise CommandError(f"{len(client_ids)} client IDs; the limit is {MAX_GROUP_MEMBERS} per group")
    repeated = [cid for cid, count in Counter(client_ids).items() if count > 1]
    if repeated:
        print(
            f"rocket-rebalance: warning: client ID given more than once: {printable(', '.join(repeated))}; consumers "
            "sharing an ID take the same queues and leave others owned by nobody",
            file=sys.stderr,
        )
    return client_ids


def _warn_unowned(route: TopicRoute, result: Plan) -> None:
    queues = len(set(route.subscribe_queues()))
    owned = len({mq for owned in result.values() for mq in owned})
    if owned < queues:
        print(f"rocket-rebalance: warning: {queues - owned} of {queues} queues are owned by nobody", file=sys.stderr)


def _print_table(result: Plan) -> None:
    names = {cid: printable(cid) for cid in result}
    width = max([len("consumer"), *(len(name) for name in names.values())])
    print(f"{'consumer':<{width}}  queues  owned")
    for cid, queues in result.items():
        owned = " ".join(f"{printable(mq.broker_name)}:{mq.queue_id}" for mq in queues) or "-"
        print(f"{names[cid]:<{width}}  {len(queues):>6}  {owned}")
    print(f"{len(result)} consumers, {sum(len(q) for q in result.values())} queues assigned")


def _run_allocate_mq(args: argparse.Namespace) -> int:
    route = load_route(args)
    if args.mqadmin_order:
        if args.strategy not in (None, "AVG"):
            raise CommandError("--mqadmin-order reproduces mqadmin, which only knows AVG")
        ids = _checked_members(parse_mqadmin_id_list(args.ip_list))
        result = mqadmin_allocate_mq(route, ids)
        real = allocate_mq(route, ids, group=args.group)
        differing = [cid for cid in result if set(result[cid]) != set(real.get(cid, ()))]
        if differing:
            print(
                f"rocket-rebalance: note: consumers with these IDs would really own other queues than mqadmin "
                f"shows, for {', '.join(differing)} (run without --mqadmin-order to see theirs)",
                file=sys.stderr,
            )
    else:
        strategy = build_strategy(args.strategy or "AVG", args)
        result = allocate_mq(route, _checked_members(parse_id_list(args.ip_list)), strategy, args.group)
    _warn_unowned(route, result)
    if args.format == "table":
        _print_table(result)
    else:
        print(to_mqadmin_json(result))
    return 0


def _read_members(args: argparse.Namespace) -> list[str]:
    if args.ip_list is not None:
        return parse_id_list(args.ip_list)
    if args.members is not None:
        text = args.members.read_text(encoding="utf-8")
        if text.lstrip().startswith("["):
            try:
                members = json.loads(text)
            except (ValueError, RecursionError) as error:
                raise CommandError(f"{args.members}: not a JSON list of client IDs ({error})") from None
            if not isinstance(members, list) or not all(isinstance(cid, str) and cid for cid in members):
                raise CommandError(f"{args.members}: expected a JSON list of non-empty client ID strings")
            return members
        return [line.strip() for line in text.splitlines() if line.strip()]
    if args.namesrv is not None and args.group:
        from rocket_rebalance.runtime.admin import fetch_members

        return fetch_members(args.namesrv, args.topic, args.group, token=args.token)
    raise CommandError("give the members: -i ID,..., --members FILE, or -n ADDRESS with -g GROUP")


def _describe(outcome: Outcome, topic: str) -> list[str]:
    before, after = outcome.balance_before, outcome.balance_after
    lines = [
        f"{outcome.strategy}: {topic}, {before.consumers} -> {after.consumers} consumers",
        f"  {'consumer':<40} {'before':>6} {'after':>6}",
    ]
    for cid in dict.fromkeys([*outcome.before, *outcome.after]):
        lines.append(
            f"  {printable(cid):<40} {len(outcome.before.get(cid, ())):>6} {len(outcome.after.get(cid, ())):>6}"
        )
    lines.append(
        f"  max/avg {before.max_over_avg:.2f} -> {after.max_over_avg:.2f} (max {before.max} -> {after.max} queues); "
        f"{len(outcome.movement.moved)} of {outcome.movement.queues} queues move (a balanced split needs "
        f"{outcome.movement.minimum})"
    )
    if outcome.split_view is not None:
        lines.append(
            f"  while half the consumers still see the old member list: {len(outcome.split_view.double_owned)} "
            f"queues with two owners, {len(outcome.split_view.unowned)} with none"
        )
    return lines


def _run_simulate(args: argparse.Namespace) -> int:
    route = load_route(args)
    members = _checked_members(_read_members(args))
    change = Change(tuple(args.join), tuple(args.leave), tuple(args.broker_down))
    strategies = [build_strategy(name, args) for name in (args.strategy or ["AVG"])]
    outcomes = simulate(strategies, args.group or "simulated_group", route, members, change, args.split_view)
    if args.json:
        print(json.dumps({"topic": args.topic, "outcomes": [o.to_dict() for o in outcomes]}, ensure_ascii=False))
    else:
        print("\n\n".join("\n".join(_describe(outcome, args.topic)) for outcome in outcomes))
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    allocate = subparsers.add_parser(
        "allocate-mq",
        help="who will own which queue (mqadmin allocateMQ, computed the way consumers compute it)",
        description="Print each client ID's queues as real consumers would compute them (sorted input, any strategy).",
    )
    _add_source_options(allocate)
    allocate.add_argument("-i", "--ipList", dest="ip_list", required=True, metavar="ID,...", help="client IDs")
    add_strategy_options(allocate, repeatable=False)
    allocate.add_argument("--format", choices=("json", "table"), default="json", help="mqadmin JSON or a table")
    allocate.add_argument(
        "--mqadmin-order", action="store_true", help="reproduce mqadmin's unsorted answer and say where it differs"
    )
    allocate.set_defaults(handler=_run_allocate_mq)

    sim = subparsers.add_parser(
        "simulate",
        help="what a join, leave, broker outage or strategy switch will move",
        description="Plan one group's topic before and after a change, per strategy.",
    )
    _add_source_options(sim)
    sim.add_argument("-i", "--ipList", dest="ip_list", metavar="ID,...", help="current members")
    sim.add_argument("--members", type=Path, metavar="FILE", help="current members, one per line or a JSON list")
    sim.add_argument("--join", action="append", default=[], metavar="ID", help="a consumer that joins (repeatable)")
    sim.add_argument("--leave", action="append", default=[], metavar="ID", help="a consumer that leaves (repeatable)")
    sim.add_argument("--broker-down", action="append", default=[], metavar="NAME", help="a broker that goes down")
    add_strategy_options(sim, repeatable=True)
    sim.add_argument("--split-view", action="store_true", help="also show the window while views disagree")
    sim.add_argument("--json", action="store_true", help="print JSON")
    sim.set_defaults(handler=_run_simulate)
