"""``allocate-mq`` (who will own what) and ``simulate`` (what a change will move), for operators.

Both take one topic or several (``-t`` repeated, with a route each): several topics are planned the way the group's
consumers plan them (:func:`rocket_rebalance.whatif.plan_topics`: each on its own, or all in one call for a strategy
that spans topics) and loads are shown per consumer over all of them, which is where balancing each topic on its
own shows its skew. A strategy Java consumers cannot run gets a note in the output (not an error: previewing it is
what one does before choosing it). ``--format png --output FILE`` draws the same answer as ownership grids
(:mod:`rocket_rebalance.pictures`): per topic, its queues by the consumers that own them, the moved ones marked.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rocket_rebalance.commands import CommandError
from rocket_rebalance.commands.options import (
    NAMESRV_HELP,
    acl_credentials,
    add_connection_options,
    add_namespace_option,
    add_strategy_options,
    build_strategies,
    build_strategy,
    group_name,
    tls_settings,
    topic_name,
    wire_names,
)
from rocket_rebalance.inputs import read_input_text
from rocket_rebalance.model import MAX_GROUP_MEMBERS, MessageQueue, printable, word_choices
from rocket_rebalance.mqadmin import (
    MQADMIN_GROUP,
    allocate_mq,
    mqadmin_allocate_mq,
    parse_id_list,
    parse_mqadmin_id_list,
    to_mqadmin_json,
)
from rocket_rebalance.pictures import (
    OwnershipGrid,
    grid_figure,
    ownership_grid,
    plan_owners,
    png_bytes,
    require_matplotlib,
)
from rocket_rebalance.plan import Plan
from rocket_rebalance.route import TopicRoute
from rocket_rebalance.strategies import AllocateMessageQueueStrategy, java_compatible
from rocket_rebalance.whatif import Change, Outcome, TopicPlans, over_topics, plan_topics, simulate

__all__ = ["register"]


def _add_source_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-t",
        "--topic",
        required=True,
        action="append",
        type=topic_name,
        metavar="TOPIC",
        help="topic to plan; repeat for every topic the group subscribes to (its %%RETRY%% topic too): CROSS_TOPIC "
        "plans them all in one call, other strategies each on its own, and loads are shown over all of them",
    )
    add_connection_options(parser, required=False, what=f"read the routes (and members) from this {NAMESRV_HELP}")
    parser.add_argument(
        "--route",
        type=Path,
        action="append",
        metavar="FILE",
        help="read the route from a TopicRouteData JSON file: one per -t, in the same order, or one for every topic",
    )
    parser.add_argument("-g", "--group", type=group_name, help="consumer group (passed to the strategy)")
    add_namespace_option(parser)


def load_routes(args: argparse.Namespace) -> list[TopicRoute]:
    """Each topic's route, from ``--route FILE`` (one per topic, or one shared by all) or from the name server.
    Under ``--namespace``, ``-t`` and ``-g`` become the server's names first (the strategy is given the wrapped
    group, as a Java consumer's is) and the plans name the queues as the server does."""
    wire_names(args)
    topics: list[str] = args.topic
    repeated = sorted(topic for topic, count in Counter(topics).items() if count > 1)
    if repeated:
        raise CommandError(f"topic given more than once: {', '.join(repeated)}")
    files: list[Path] = args.route or []
    if bool(files) == (args.namesrv is not None):
        raise CommandError("give the route source: either -n ADDRESS or --route FILE")
    if files:
        if len(files) not in (1, len(topics)):
            raise CommandError(
                f"{len(topics)} topics and {len(files)} route files: give one --route per -t, in the same order, "
                "or one for every topic"
            )
        paths = files * len(topics) if len(files) == 1 else files
        return [
            TopicRoute.from_json(topic, read_input_text(path, "--route"), str(path))
            for topic, path in zip(topics, paths, strict=True)
        ]
    from rocket_rebalance.admin.reads import fetch_route  # a wire is loaded only for a server

    credentials, tls = acl_credentials(args), tls_settings(args)
    return [fetch_route(args.namesrv, topic, token=args.token, credentials=credentials, tls=tls) for topic in topics]


def java_note(strategies: Sequence[AllocateMessageQueueStrategy]) -> str | None:
    """What to tell about the strategies Java consumers cannot run (``None`` when they all can): a group that uses
    one must be all Python consumers, or Java members split their topics another way."""
    own = list(dict.fromkeys(strategy.name for strategy in strategies if not java_compatible(strategy)))
    if not own:
        return None
    it, verb = ("it", "is") if len(own) == 1 else ("them", "are")
    return (
        f"{', '.join(own)} {verb} this library's own: Java consumers cannot run {it}, so a group using {it} must "
        "have no Java consumer"
    )


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


def _warn_unowned(queues: Mapping[str, Sequence[MessageQueue]], plans: TopicPlans) -> None:
    total = sum(len(set(topic_queues)) for topic_queues in queues.values())
    owned = len({mq for topic_plan in plans.values() for share in topic_plan.values() for mq in share})
    if owned < total:
        print(f"rocket-rebalance: warning: {total - owned} of {total} queues are owned by nobody", file=sys.stderr)


def _print_table(result: Plan) -> None:
    names = {cid: printable(cid) for cid in result}
    width = max([len("consumer"), *(len(name) for name in names.values())])
    print(f"{'consumer':<{width}}  queues  owned")
    for cid, queues in result.items():
        owned = " ".join(f"{printable(mq.broker_name)}:{mq.queue_id}" for mq in queues) or "-"
        print(f"{names[cid]:<{width}}  {len(queues):>6}  {owned}")
    print(f"{len(result)} consumers, {sum(len(q) for q in result.values())} queues assigned")


def _print_topic_table(plans: TopicPlans) -> None:
    """Several topics: each consumer's queue count per topic and its total, the balance the topics add up to."""
    totals = over_topics(plans)
    names = {cid: printable(cid) for cid in totals}
    width = max([len("consumer"), *(len(name) for name in names.values())])
    titles = {topic: printable(topic) for topic in plans}
    widths = {topic: max(6, len(title)) for topic, title in titles.items()}
    print(f"{'consumer':<{width}}  " + "  ".join(f"{titles[t]:>{widths[t]}}" for t in plans) + "   total")
    for cid, queues in totals.items():
        counts = "  ".join(f"{len(plans[t].get(cid, ())):>{widths[t]}}" for t in plans)
        print(f"{names[cid]:<{width}}  {counts}  {len(queues):>6}")
    loads = [len(queues) for queues in totals.values()]
    print(
        f"{len(totals)} consumers, {sum(loads)} queues assigned over {len(plans)} topics; "
        f"totals {min(loads)} to {max(loads)}"
    )


def _mqadmin_order(args: argparse.Namespace, routes: Sequence[TopicRoute]) -> Plan:
    """What mqadmin prints for one topic, with a note on stderr for the IDs real consumers would give other queues."""
    if len(routes) > 1:
        raise CommandError("--mqadmin-order reproduces mqadmin allocateMQ, which takes one topic")
    if args.strategy not in (None, "AVG"):
        raise CommandError("--mqadmin-order reproduces mqadmin, which only knows AVG")
    (route,) = routes
    ids = _checked_members(parse_mqadmin_id_list(args.ip_list))
    result = mqadmin_allocate_mq(route, ids)
    real = allocate_mq(route, ids, group=args.group or "")
    differing = [cid for cid in result if set(result[cid]) != set(real.get(cid, ()))]
    if differing:
        print(
            f"rocket-rebalance: note: consumers with these IDs would really own other queues than mqadmin "
            f"shows, for {', '.join(differing)} (run without --mqadmin-order to see theirs)",
            file=sys.stderr,
        )
    return result


def _check_picture(args: argparse.Namespace, command: str) -> None:
    """Refuse a picture without a file, a file without a picture, or a picture without matplotlib, before any
    route is read (each a one-line error)."""
    if args.format == "png":
        if args.output is None:
            raise CommandError(f"{command} --format png writes a file: give --output FILE")
        require_matplotlib(f"{command} --format png")
    elif args.output is not None:
        raise CommandError(
            f"--output is where --format png writes its picture; {command} --format {args.format} prints"
        )


def _write_grids(grids: Sequence[OwnershipGrid], output: Path, compare: bool) -> None:
    output.write_bytes(png_bytes(grid_figure(grids, compare)))
    print(f"wrote {printable(str(output))}: {len(grids)} ownership grid{'s' if len(grids) != 1 else ''}")


def _run_allocate_mq(args: argparse.Namespace) -> int:
    _check_picture(args, "allocate-mq")
    routes = load_routes(args)
    queues = {route.topic: route.subscribe_queues() for route in routes}
    empty = [topic for topic, topic_queues in queues.items() if not topic_queues]
    if empty:
        raise CommandError(f"topic {empty[0]} has no readable queue")
    note = None
    if args.mqadmin_order:
        plans = {routes[0].topic: _mqadmin_order(args, routes)}
    else:
        strategy = build_strategy(args.strategy or "AVG", args)
        members = _checked_members(parse_id_list(args.ip_list))
        plans = plan_topics(strategy, args.group or MQADMIN_GROUP, queues, members)
        note = java_note([strategy])
    _warn_unowned(queues, plans)
    if args.format == "png":
        grids = [
            ownership_grid(f"{topic}: who owns which queue ({args.strategy or 'AVG'})", plan_owners(p), plan_owners(p))
            for topic, p in plans.items()
        ]
        _write_grids(grids, args.output, compare=False)
        return 0
    if args.format == "table":
        if len(plans) == 1:
            _print_table(next(iter(plans.values())))
        else:
            _print_topic_table(plans)
        if note:
            print(f"note: {note}")
        return 0
    merged = over_topics(plans)
    extra: dict[str, Any] = {}
    if len(plans) > 1:
        extra["totals"] = {cid: len(share) for cid, share in merged.items()}
    if note:
        extra.update(javaCompatible=False, note=note)
    print(to_mqadmin_json(merged, extra))
    return 0


def _read_members(args: argparse.Namespace) -> list[str]:
    if args.ip_list is not None:
        return parse_id_list(args.ip_list)
    if args.members is not None:
        text = read_input_text(args.members, "--members")
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
        from rocket_rebalance.admin.reads import fetch_members

        return fetch_members(
            args.namesrv,
            args.topic[0],
            args.group,
            token=args.token,
            credentials=acl_credentials(args),
            tls=tls_settings(args),
        )  # one list for all topics
    raise CommandError("give the members: -i ID,..., --members FILE, or -n ADDRESS with -g GROUP")


def _describe(outcome: Outcome, topics: Sequence[str]) -> list[str]:
    before, after = outcome.balance_before, outcome.balance_after
    where = topics[0] if len(topics) == 1 else f"{len(topics)} topics ({', '.join(topics)})"
    totals = "" if len(topics) == 1 else "; queues per consumer over all the topics"
    lines = [
        f"{outcome.strategy}: {printable(where)}, {before.consumers} -> {after.consumers} consumers{totals}",
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
    if args.json:
        if args.format not in ("text", "json"):
            raise CommandError(f"--json is --format json; give one of --json and --format {args.format}")
        args.format = "json"
    _check_picture(args, "simulate")
    routes = load_routes(args)
    members = _checked_members(_read_members(args))
    change = Change(tuple(args.join), tuple(args.leave), tuple(args.broker_down))
    strategies = build_strategies(args.strategy or ["AVG"], args)
    outcomes = simulate(strategies, args.group or "simulated_group", routes, members, change, args.split_view)
    topics = [route.topic for route in routes]
    note = java_note(strategies)
    if args.format == "png":
        grids = [
            ownership_grid(f"{outcome.strategy}, topic {topic}", plan_owners(before), plan_owners(after))
            for outcome in outcomes
            for topic, (before, after) in outcome.topics.items()
        ]
        _write_grids(grids, args.output, compare=True)
        return 0
    if args.format == "json":
        single = {"topic": topics[0]} if len(topics) == 1 else {}  # the shape from before several topics were taken
        document = {**single, "topics": topics, "outcomes": [o.to_dict() for o in outcomes], "note": note}
        print(json.dumps(document, ensure_ascii=False))
    else:
        blocks = ["\n".join(_describe(outcome, topics)) for outcome in outcomes]
        print("\n\n".join([*blocks, *([f"note: {note}"] if note else [])]))
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    allocate = subparsers.add_parser(
        "allocate-mq",
        help="who will own which queue (mqadmin allocateMQ, computed the way consumers compute it)",
        description="Print each client ID's queues as real consumers would compute them (sorted input, any strategy). "
        "With several topics (-t repeated) the queues of all of them are planned as the group's consumers plan them, "
        "and --format table shows each consumer's count per topic and its total; JSON adds the totals.",
    )
    _add_source_options(allocate)
    allocate.add_argument("-i", "--ipList", dest="ip_list", required=True, metavar="ID,...", help="client IDs")
    add_strategy_options(allocate, repeatable=False)
    allocate.add_argument(
        "--format",
        **word_choices(("json", "table", "png")),
        default="json",
        help="mqadmin JSON, a table, or a PNG picture of who owns which queue (needs --output and the spark extra)",
    )
    allocate.add_argument("--output", type=Path, metavar="FILE", help="where --format png writes its picture")
    allocate.add_argument(
        "--mqadmin-order", action="store_true", help="reproduce mqadmin's unsorted answer and say where it differs"
    )
    allocate.set_defaults(handler=_run_allocate_mq)

    sim = subparsers.add_parser(
        "simulate",
        help="what a join, leave, broker outage or strategy switch will move",
        description="Plan one group's topics before and after a change, per strategy (repeat --strategy to compare). "
        "With several topics (-t repeated), each consumer's queues, the balance and the moves are over all of them, "
        "so the skew that planning each topic on its own leaves is seen beside CROSS_TOPIC, which removes it.",
    )
    _add_source_options(sim)
    sim.add_argument("-i", "--ipList", dest="ip_list", metavar="ID,...", help="current members")
    sim.add_argument("--members", type=Path, metavar="FILE", help="current members, one per line or a JSON list")
    sim.add_argument("--join", action="append", default=[], metavar="ID", help="a consumer that joins (repeatable)")
    sim.add_argument("--leave", action="append", default=[], metavar="ID", help="a consumer that leaves (repeatable)")
    sim.add_argument("--broker-down", action="append", default=[], metavar="NAME", help="a broker that goes down")
    add_strategy_options(sim, repeatable=True)
    sim.add_argument("--split-view", action="store_true", help="also show the window while views disagree")
    sim.add_argument(
        "--format",
        **word_choices(("text", "json", "png")),
        default="text",
        help="text, JSON, or a PNG picture per strategy and topic of who owns which queue before and after, the "
        "moved queues marked (needs --output and the spark extra)",
    )
    sim.add_argument("--json", action="store_true", help="print JSON (the same as --format json)")
    sim.add_argument("--output", type=Path, metavar="FILE", help="where --format png writes its picture")
    sim.set_defaults(handler=_run_simulate)
