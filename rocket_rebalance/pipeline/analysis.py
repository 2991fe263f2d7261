"""The per-group analysis: plain Python over the library's own plan, movement and balance.

Spark executors and the single-process reference both call :func:`analyze_group` on the same input shape (one dict
per consumer group, nested lists of routes, members and settings, and the group's offsets), so the pipeline equals
the library group by group by construction; Spark only moves the groups around. No pyspark here, and no I/O.

Input row (the ``group input``)::

    {"group": str,
     "before": side | None, "after": side | None,       # side: see below; "after" unused with a scenario
     "offsets": Offsets | None}                         # see offsets_from_rows
    side = {"settings": [{"strategy", "message_model", "options"}] | None,   # more than one row is an error
            "topics": [str] | None,                                          # the group's subscriptions
            "routes": [{"topic", "broker", "read_queue_nums", "perm"}] | None, # routes of those topics
            "members": [{"client_id", "view": [str] | None}] | None}         # one entry per consumer process

Output: a dict with ``group`` and one list of rows per output table. A row is a tuple of the table's columns in the
order of :data:`rocket_rebalance.pipeline.schema.OUTPUT_TABLES` (a fleet has tens of millions of rows: tuples are
cheap to build and turn into Arrow columns in one transposition); :func:`as_dicts` names the columns.
"""

from __future__ import annotations

import gc
import hashlib
import json
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

from rocket_rebalance.model import (
    MAX_GROUP_MEMBERS,
    PERM_READ,
    ClientIdList,
    DuplicateClientIdWarning,
    MessageModel,
    MessageQueue,
    QueueList,
    RebalanceInput,
    java_string_key,
    prepare_rebalance_input,
    sort_client_ids,
)
from rocket_rebalance.plan import Movement, Plan, balance, movement, plan
from rocket_rebalance.strategies import AllocateMessageQueueStrategy, create_strategy

__all__ = [
    "COMPARED_STRATEGIES",
    "Offsets",
    "PERM_READ",
    "Scenario",
    "ScenarioError",
    "analyze_group",
    "apply_scenario",
    "as_dicts",
    "empty_output",
    "exposure",
    "gc_paused",
    "joiner_ids",
    "load_scenario",
    "offsets_from_rows",
    "parse_strategy",
    "view_digest",
]

DEFAULT_PERM = 6
CLUSTERING = MessageModel.CLUSTERING.value
BROADCASTING = MessageModel.BROADCASTING.value
MESSAGE_MODELS = (CLUSTERING, BROADCASTING)

COMPARED_STRATEGIES = ("AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH")
"""Strategies every clustering group is compared under (default options), beside its own current strategy."""

Row = tuple[Any, ...]
"""An output row: its table's columns in schema order (``group`` excluded)."""
Tables = dict[str, list[Row]]
Data = Mapping[str, Any]
"""An input dict: a group input row or one side of it (see the module doc)."""


# ---- settings --------------------------------------------------------------------------------------------------

_strategy_cache: dict[tuple[str, str], AllocateMessageQueueStrategy] = {}


def parse_strategy(name: str | None, options: str | None) -> AllocateMessageQueueStrategy:
    """The configured strategy of a group; ``options`` is a JSON object of ``create_strategy`` options.

    ``message_queues`` (CONFIG) is a list of ``{"topic", "brokerName", "queueId"}`` objects. Strategies are cached
    per (name, options): a CONSISTENT_HASH strategy keeps its rings, which thousands of groups share.
    """
    key = (name or "", options or "")
    cached = _strategy_cache.get(key)
    if cached is not None:
        return cached
    if not name:
        raise ValueError("strategy is missing")
    try:
        parsed = json.loads(options) if options else {}
    except json.JSONDecodeError as error:
        raise ValueError(f"options are not JSON: {error}") from None
    if not isinstance(parsed, dict):
        raise ValueError("options must be a JSON object")
    if "message_queues" in parsed and parsed["message_queues"] is not None:
        parsed["message_queues"] = [MessageQueue.from_dict(item) for item in parsed["message_queues"]]
    if "consumer_idcs" in parsed and isinstance(parsed["consumer_idcs"], list):
        parsed["consumer_idcs"] = set(parsed["consumer_idcs"])
    strategy = create_strategy(name, **parsed)
    if len(_strategy_cache) > 4096:
        _strategy_cache.clear()
    _strategy_cache[key] = strategy
    return strategy


# ---- scenarios -------------------------------------------------------------------------------------------------


class ScenarioError(ValueError):
    """A scenario file that cannot be applied: unknown action or a missing field."""


ACTIONS = ("join", "leave", "broker_down", "strategy")


@dataclass(frozen=True)
class Scenario:
    """A change to apply to every group of a snapshot; see :func:`load_scenario` for the file format."""

    changes: tuple[Mapping[str, Any], ...]
    name: str = "scenario"


def _check_change(position: int, change: object) -> Mapping[str, Any]:
    where = f"scenario change {position}"
    if not isinstance(change, dict):
        raise ScenarioError(f"{where}: must be a JSON object")
    action = change.get("action")
    if action not in ACTIONS:
        raise ScenarioError(f"{where}: unknown action {action!r}; valid: {', '.join(ACTIONS)}")
    group = change.get("group", "*")
    if not (isinstance(group, str) or (isinstance(group, list) and all(isinstance(g, str) for g in group))):
        raise ScenarioError(f"{where}: group must be a name, a list of names or '*'")
    if action in ("join", "leave"):
        ids, count = change.get("client_ids"), change.get("count")
        if ids is None and count is None:
            raise ScenarioError(f"{where}: {action} needs client_ids or count")
        if ids is not None and not (isinstance(ids, list) and all(isinstance(c, str) and c for c in ids)):
            raise ScenarioError(f"{where}: client_ids must be a list of non-empty strings")
        if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 0):
            raise ScenarioError(f"{where}: count must be a non-negative integer")
        if len(ids or ()) > MAX_GROUP_MEMBERS or (count or 0) > MAX_GROUP_MEMBERS:
            # every executor would build the joiners of every group: a typed extra digit must not exhaust them
            raise ScenarioError(f"{where}: at most {MAX_GROUP_MEMBERS} consumers join or leave a group at once")
    elif action == "broker_down":
        if not isinstance(change.get("broker"), str) or not change["broker"]:
            raise ScenarioError(f"{where}: broker_down needs a broker name")
    else:
        options = change.get("options")
        try:
            parse_strategy(change.get("strategy"), json.dumps(options) if options else None)
        except (ValueError, TypeError) as error:
            raise ScenarioError(f"{where}: {error}") from None
    return change


def load_scenario(data: Mapping[str, Any] | str) -> Scenario:
    """Check a scenario (a parsed JSON object or its text) before any work starts.

    ``{"name": "...", "changes": [change, ...]}`` where each change has an ``action`` and, except
    ``broker_down``, a ``group`` (a name, a list of names, or ``"*"`` for the whole fleet; default ``"*"``):

    * ``join``: ``client_ids`` (list) or ``count`` (generated IDs ``10.254.x.y@scenario#k``) join the group;
    * ``leave``: ``client_ids`` leave, or the last ``count`` consumers in Java order (all, in a smaller group);
    * ``broker_down``: ``broker``: its queues vanish from every route;
    * ``strategy``: ``strategy`` and optional ``options`` (an object) replace the group's settings.

    ``"notified": false`` on a join or leave keeps the consumers already there on the old member list (a split
    view: the window before NOTIFY_CONSUMER_IDS_CHANGED arrives); by default everybody sees the new list.
    """
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as error:
            raise ScenarioError(f"scenario is not JSON: {error}") from None
    if not isinstance(data, dict) or not isinstance(data.get("changes"), list):
        raise ScenarioError('a scenario is a JSON object with a list of changes: {"changes": [...]}')
    changes = tuple(_check_change(position, change) for position, change in enumerate(data["changes"]))
    return Scenario(changes, str(data.get("name", "scenario")))


def _applies(change: Mapping[str, Any], group: str) -> bool:
    target = change.get("group", "*")
    return target == "*" or target == group or (isinstance(target, list) and group in target)


def joiner_ids(count: int) -> list[str]:
    """Client IDs for ``count`` generated joiners, in the Java client's ``ip@pid#nanotime`` shape."""
    return [f"10.254.{k // 250}.{k % 250 + 1}@scenario#{k}" for k in range(count)]


def apply_scenario(group: str, before: Data | None, scenario: Scenario) -> dict[str, Any] | None:
    """The group's ``after`` side: ``before`` with the scenario's changes; consumers see the new member list."""
    if before is None:
        return None
    members = [dict(m) for m in before.get("members") or ()]
    routes = list(before.get("routes") or ())
    settings = list(before.get("settings") or ())
    old_ids = sort_client_ids(m["client_id"] for m in members)
    stale = False
    for change in scenario.changes:
        action = change["action"]
        if action == "broker_down":
            routes = [r for r in routes if r["broker"] != change["broker"]]
            continue
        if not _applies(change, group):
            continue
        if action == "join":
            ids = change.get("client_ids") or joiner_ids(change.get("count") or 0)
            members.extend({"client_id": cid, "view": None, "_new": True} for cid in ids)
        elif action == "leave":
            if change.get("client_ids") is not None:
                gone = set(change["client_ids"])
            else:
                live = sort_client_ids({m["client_id"] for m in members})
                gone = set(live[max(0, len(live) - change["count"]) :]) if change["count"] else set()
            members = [m for m in members if m["client_id"] not in gone]
        else:
            options = change.get("options")
            model = settings[0].get("message_model") if len(settings) == 1 else None
            settings = [
                {
                    "strategy": change["strategy"],
                    "message_model": model,
                    "options": json.dumps(options, sort_keys=True) if options else None,
                }
            ]
        if action in ("join", "leave") and change.get("notified") is False:
            stale = True
    for member in members:
        new = member.pop("_new", False)
        member["view"] = list(old_ids) if stale and not new else None
        member["view_digest"] = None  # the scenario decides every view after the change
    return {"settings": settings, "topics": before.get("topics"), "routes": routes, "members": members}


# ---- views given by digest ----------------------------------------------------------------------------------


def view_digest(client_ids: Iterable[str]) -> str:
    """The digest that stands for a member list in a snapshot's ``view_digest`` column.

    Hex MD5 of the client IDs in Java order (duplicates kept), each followed by a newline, in UTF-8: a collector
    that records what each consumer last received can store this instead of the whole list.
    """
    text = "".join(f"{cid}\n" for cid in sort_client_ids(client_ids))
    return hashlib.md5(text.encode("utf-8", "surrogatepass")).hexdigest()


def _resolve_views(
    members: list[dict[str, Any]], live: Sequence[str], known: Sequence[Sequence[str]]
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Members whose view is given only by digest get the list the digest names, when it names one we know.

    Known lists: the side's own member list, every view recorded in full in the group, and ``known`` (for the after
    side, the before side's list: the usual stale view right after a change). A recorded ``view`` wins over a
    digest. Returns the members, with the view of an unresolvable digest set to nothing, and those consumers'
    digests (what they take cannot be computed; they are reported, not guessed).
    """
    if not any(m.get("view_digest") for m in members):
        return members, {}
    own = view_digest(live)
    lists = {
        view_digest(ids): list(ids) for ids in (*known, *(m["view"] for m in members if m.get("view") is not None))
    }
    resolved: list[dict[str, Any]] = []
    unknown: dict[str, str] = {}
    for member in members:
        digest = member.get("view_digest")
        if member.get("view") is not None or not digest or digest == own:
            resolved.append(member)
        elif digest in lists:
            resolved.append({**member, "view": lists[digest]})
        else:
            resolved.append({**member, "view": []})
            unknown[member["client_id"]] = digest
    return resolved, unknown


# ---- one side of one group -------------------------------------------------------------------------------------


@dataclass
class Side:
    """What one side (before or after) of a group computes; kept for movement and the strategy comparison."""

    name: str
    ok: bool = False
    strategy: AllocateMessageQueueStrategy | None = None
    label: str | None = None
    model: str | None = None
    members: list[str] = field(default_factory=list)  # one entry per consumer process, Java order
    inputs: dict[str, RebalanceInput] = field(default_factory=dict)  # per topic, the true member list
    shares: dict[str, Plan] = field(default_factory=dict)  # per topic: what each live consumer takes
    unowned: dict[str, int] = field(default_factory=dict)
    violations: int = 0
    queues: int = 0
    true_plans: dict[str, Plan] = field(default_factory=dict)  # per topic: the plan on the true member list
    true_errors: dict[str, str] = field(default_factory=dict)


def _row_json(row: Mapping[str, Any]) -> str:
    return json.dumps({k: v for k, v in row.items() if not k.startswith("_")}, sort_keys=True, default=str)


def _reject(out: Tables, side: str, table: str, reason: str, rows: Iterable[Mapping[str, Any]]) -> None:
    for row in rows:
        out["rejected"].append((side, table, reason, _row_json(row)))


_queue_cache: dict[tuple[str, tuple[tuple[str, int], ...]], QueueList] = {}


def _topic_queues(topic: str, routes: Sequence[Mapping[str, Any]]) -> QueueList:
    """The topic's queues as a consumer sees them (read queues of brokers whose perm has the read bit), sorted.

    Many groups subscribe to one topic, so the sorted list (and the hashes its queues cache) is prepared once and
    shared between the groups a worker analyses.
    """
    readable = []
    for route in routes:
        perm = route.get("perm")
        if route["topic"] == topic and ((DEFAULT_PERM if perm is None else perm) & PERM_READ):
            readable.append((route["broker"], route["read_queue_nums"]))
    key = (topic, tuple(sorted(readable)))
    queues = _queue_cache.get(key)
    if queues is None:
        queues = prepare_rebalance_input(
            (MessageQueue(topic, broker, q) for broker, count in key[1] for q in range(count)), ()
        ).mq_all
        if len(_queue_cache) > 100_000:
            _queue_cache.clear()
        _queue_cache[key] = queues
    return queues


def _violation_reason(side: Side, owners_now: list[str], true_count: int, plan_error: str | None) -> str:
    count = len(owners_now)
    if plan_error is not None:
        return f"allocation failed: {plan_error}"
    if count != true_count:
        return "split view: consumers disagree on the member list"
    if count > 1 and len(set(owners_now)) < count:
        return "duplicate client ID: consumers sharing an ID compute the same share"
    name = side.strategy.name if side.strategy is not None else ""
    if name == "CONFIG":
        if count:
            return f"CONFIG overlap: the queue is configured for {count} consumers"
        return "CONFIG: the queue is configured for no consumer"
    if name == "MACHINE_ROOM" and not count:
        return "MACHINE_ROOM: the broker is not in one of the consumer_idcs machine rooms"
    if count:
        return f"the strategy gives the queue to {count} consumers"
    return "the strategy gives the queue to no consumer"


class _ViewPlans:
    """Each distinct member list planned once (as :func:`rocket_rebalance.plan.split_view` does).

    A list the strategy refuses (Java throws and the consumer keeps nothing new) plans to nobody; the error is kept.
    """

    def __init__(self, strategy: AllocateMessageQueueStrategy, group: str, mq_all: Sequence[MessageQueue]) -> None:
        self.strategy, self.group, self.mq_all = strategy, group, mq_all
        self.plans: dict[tuple[str, ...], Plan] = {}
        self.errors: dict[tuple[str, ...], str] = {}

    def __call__(self, key: tuple[str, ...]) -> Plan:
        found = self.plans.get(key)
        if found is None:
            found = {}
            if key:
                try:
                    found = plan(self.strategy, self.group, self.mq_all, key)
                except (ValueError, TypeError) as error:
                    self.errors[key] = str(error)
            self.plans[key] = found
        return found


def _analyze_side(group: str, name: str, data: Data | None, out: Tables, known: Sequence[Sequence[str]] = ()) -> Side:
    """One side of a group: check its settings, then per topic what each consumer takes from its own view.

    ``known`` are member lists a ``view_digest`` may name besides the side's own (see :func:`_resolve_views`).

    Appends assignments, violations, balance and skew rows to ``out``; the returned :class:`Side` keeps what the
    movement and the strategy comparison need, so nothing is planned twice.
    """
    side = Side(name)
    if data is None:
        return side
    settings = list(data.get("settings") or ())
    topics = sorted(set(data.get("topics") or ()), key=java_string_key)
    members = sorted(
        data.get("members") or (),
        key=lambda m: (java_string_key(m["client_id"]), tuple(m.get("view") or ()), m.get("view_digest") or ""),
    )
    routes = list(data.get("routes") or ())
    reason: str | None = None
    if not settings:
        reason = "the group has no settings row"
    elif len(settings) > 1:
        reason = f"the group has {len(settings)} settings rows"
        _reject(out, name, "groups", reason, ({"group": group, **s} for s in settings))
    else:
        row = settings[0]
        model = row.get("message_model") or CLUSTERING
        try:
            if model not in MESSAGE_MODELS:
                raise ValueError(f"unknown message model {model!r}; valid: {', '.join(MESSAGE_MODELS)}")
            side.strategy = parse_strategy(row.get("strategy"), row.get("options"))
        except (ValueError, TypeError) as error:
            reason = "group settings rejected"
            _reject(out, name, "groups", str(error), [{"group": group, **row}])
        else:
            side.model = model
            side.label = side.strategy.name
    if reason is not None:
        _reject(out, name, "members", reason, ({"group": group, **m} for m in members))
        _reject(out, name, "subscriptions", reason, ({"group": group, "topic": t} for t in topics))
        return side
    if members and not topics:
        no_subscription = "member of a group with no subscription"
        _reject(out, name, "members", no_subscription, ({"group": group, **m} for m in members))
        members = []
    side.ok = True
    assert side.strategy is not None
    strategy = side.strategy
    live = [m["client_id"] for m in members]
    side.members = live
    members, unknown = _resolve_views(members, live, known)
    for cid, digest in unknown.items():
        why = f"its member list (digest {digest}) matches no list known for the group: its share cannot be computed"
        out["violations"].append((name, None, None, None, "unknown_view", [], cid, why))
    multiplicity = Counter(live)
    member_input = prepare_rebalance_input((), live)  # the same sorted member list for every topic
    skew_totals: dict[str, int] = dict.fromkeys(live, 0)
    for topic in topics:
        mq_all = _topic_queues(topic, routes)
        if not mq_all:
            reason_text = "the topic has no readable queue; consumers skip it"
            out["violations"].append((name, topic, None, None, "no_route", [], None, reason_text))
            continue
        true_input = member_input._replace(mq_all=mq_all)
        side.inputs[topic] = true_input
        side.queues += len(mq_all)
        if side.model == BROADCASTING:
            shares: Plan = {cid: list(mq_all) for cid in live}
            for cid in live:
                out["assignments"].extend([(name, topic, mq.broker_name, mq.queue_id, cid) for mq in mq_all])
            side.shares[topic] = shares
            _balance_row(out, name, topic, shares)
            for cid in live:
                skew_totals[cid] += len(mq_all)
            continue
        true_key = true_input.cid_all  # a ClientIdList: its items were checked once, plans skip the rescan
        plan_of = _ViewPlans(strategy, group, mq_all)
        true_plan = plan_of(true_key)
        plan_error = plan_of.errors.get(true_key) if live else None
        side.true_plans[topic] = true_plan
        if plan_error is not None:
            side.true_errors[topic] = plan_error
        held: list[tuple[str, list[MessageQueue]]] = []  # what each consumer process takes, in member order
        effective: Plan = {}
        view_keys: dict[tuple[str, ...], ClientIdList] = {}  # a stale view is usually shared by many members
        for member in members:
            cid = member["client_id"]
            view = member.get("view")
            key: ClientIdList
            if view is None:
                key = true_key
            else:
                raw = tuple(view)
                key = view_keys.get(raw) or view_keys.setdefault(raw, prepare_rebalance_input((), raw).cid_all)
            share = plan_of(key).get(cid, [])
            effective.setdefault(cid, share)
            held.append((cid, share))
            out["assignments"].extend([(name, topic, mq.broker_name, mq.queue_id, cid) for mq in share])
        if not view_keys and plan_error is None:
            effective = true_plan  # everyone planned on the true list: the same shares, and one object to compare
        side.shares[topic] = effective
        holder_count = Counter(chain.from_iterable(share for _, share in held))
        odd = [mq for mq in mq_all if holder_count.get(mq) != 1]  # usually none: holders are listed for these only
        taken: dict[MessageQueue, list[str]] = {mq: [] for mq in odd}
        true_count: Counter[MessageQueue] = Counter()
        if odd:
            for cid, share in held:
                for mq in share:
                    if mq in taken:
                        taken[mq].append(cid)
            for cid, share in true_plan.items():
                for mq in share:
                    true_count[mq] += multiplicity[cid]
        unowned = 0
        for mq in odd:
            holders = taken[mq]
            kind = "unowned" if not holders else "double_owned"
            unowned += not holders
            side.violations += 1
            reason_text = (
                "no live consumer" if not live else _violation_reason(side, holders, true_count[mq], plan_error)
            )
            out["violations"].append((name, topic, mq.broker_name, mq.queue_id, kind, holders, None, reason_text))
        side.unowned[topic] = unowned
        if plan_error is None:
            seen_sets: dict[tuple[str, ...], frozenset[str]] = {}
            for member in members:
                cid = member["client_id"]
                if effective.get(cid) or cid in unknown:
                    continue
                view = member.get("view")
                raw = true_key if view is None else tuple(view)
                seen = seen_sets.get(raw) or seen_sets.setdefault(raw, frozenset(raw))
                if cid not in seen:
                    why = "the consumer is missing from its own view of the members"
                elif len(seen) > len(mq_all):
                    why = "more consumers than queues"
                else:
                    why = "the strategy gives the consumer no queue"
                out["violations"].append((name, topic, None, None, "idle_consumer", [], cid, why))
        _balance_row(out, name, topic, effective)
        for cid, share in effective.items():
            skew_totals[cid] += len(share)
    if skew_totals:
        mean = sum(skew_totals.values()) / len(skew_totals)
        for cid in sort_client_ids(skew_totals):
            total = skew_totals[cid]
            out["skew"].append((name, cid, total, mean, total / mean if mean else 1.0))
    return side


def _balance_row(out: Tables, side: str, topic: str, shares: Plan) -> None:
    out["balance"].append((side, topic, *balance(shares)))  # Balance's fields are the table's columns


# ---- before against after --------------------------------------------------------------------------------------

Offsets = dict[tuple[str, str, int], tuple[int, int]]
"""(topic, broker, queue ID) -> (committed offset, re-delivery exposure) of one group's queues."""


def exposure(committed: int, max_offset: int, in_flight: int | None) -> int:
    """What a new owner may consume a second time: committed up to the in-flight offset when known, else the max."""
    return max(0, (max_offset if in_flight is None else in_flight) - committed)


def offsets_from_rows(rows: Iterable[Mapping[str, Any]]) -> Offsets:
    """A group's offsets table rows (``topic``, ``broker``, ``queue_id``, ``max_offset``, ``committed_offset``,
    ``in_flight_offset``) as the analysis takes them."""
    return {
        (row["topic"], row["broker"], row["queue_id"]): (
            row["committed_offset"],
            exposure(row["committed_offset"], row["max_offset"], row.get("in_flight_offset")),
        )
        for row in rows
    }


def _exposure(offsets: Offsets, mq: MessageQueue) -> tuple[int | None, int]:
    return offsets.get((mq.topic, mq.broker_name, mq.queue_id), (None, 0))


class _Moves:
    """Movement and re-delivery exposure per pair of plans, computed once per group.

    Without split views a side's effective shares are its true plans (the same objects), so the movement table
    and the comparison's "current" row ask for the same pair; they share the answer.
    """

    def __init__(self, offsets: Offsets) -> None:
        self.offsets = offsets
        # keyed by the plans' ids; the entry keeps both plans alive, so an id cannot be reused by another plan
        self.found: dict[tuple[int, int], tuple[Plan, Plan, Movement, int]] = {}

    def __call__(self, old: Plan, new: Plan) -> tuple[Movement, int]:
        key = (id(old), id(new))
        found = self.found.get(key)
        if found is None:
            change = movement(old, new)
            found = (old, new, change, sum(_exposure(self.offsets, mq)[1] for mq in change.moved))
            self.found[key] = found
        return found[2], found[3]


def _compare_sides(before: Side, after: Side, moves: _Moves, out: Tables) -> tuple[int, int, int, int]:
    """Movement rows per topic; returns the group's (moved, minimum, exposure, paused)."""
    totals = [0, 0, 0, 0]
    broadcasting = BROADCASTING in (before.model, after.model)
    no_plan: Plan = {}
    for topic in sorted(set(before.inputs) | set(after.inputs), key=java_string_key):
        queues_after = len(after.inputs[topic].mq_all) if topic in after.inputs else 0
        removed = len(_queue_set(before, topic) - _queue_set(after, topic))
        # a broadcasting group has every consumer read every queue: nothing moves between consumers
        old, new = (no_plan, no_plan) if broadcasting else (before.shares.get(topic, {}), after.shares.get(topic, {}))
        change, exposure = moves(old, new)
        moved, minimum = change.moved, change.minimum
        for mq in moved:
            committed, exposed = _exposure(moves.offsets, mq)
            owner_before, owner_after = change.owner_before.get(mq), change.owner_after.get(mq)
            out["moved_queues"].append(
                (topic, mq.broker_name, mq.queue_id, owner_before, owner_after, committed, exposed)
            )
        paused = len(moved) + after.unowned.get(topic, 0)
        moved_share = len(moved) / queues_after if queues_after else 0.0
        minimum_share = minimum / queues_after if queues_after else 0.0
        out["movement"].append(
            (topic, queues_after, len(moved), minimum, moved_share, minimum_share, removed, paused, exposure)
        )
        for position, value in enumerate((len(moved), minimum, exposure, paused)):
            totals[position] += value
    return totals[0], totals[1], totals[2], totals[3]


def _true_plan(strategy: AllocateMessageQueueStrategy, group: str, side: Side, topic: str) -> Plan:
    """The plan of ``topic`` on the side's true member list under ``strategy`` (reused when it is the side's own)."""
    if strategy is side.strategy and topic in side.true_plans:
        if topic in side.true_errors:
            raise ValueError(side.true_errors[topic])
        return side.true_plans[topic]
    data = side.inputs.get(topic)
    if data is None or not data.mq_all or not data.cid_all:
        return {}
    return plan(strategy, group, data.mq_all, data.cid_all)


def _comparison(group: str, before: Side, after: Side, moves: _Moves, out: Tables) -> None:
    """The same membership and route change under each compared strategy and the group's current one."""
    if BROADCASTING in (before.model, after.model) or before.strategy is None or after.strategy is None:
        return
    candidates: list[tuple[str, bool, AllocateMessageQueueStrategy, AllocateMessageQueueStrategy]] = [
        (name, False, parse_strategy(name, None), parse_strategy(name, None)) for name in COMPARED_STRATEGIES
    ]
    candidates.append(("current", True, before.strategy, after.strategy))
    topics = sorted(set(before.inputs) | set(after.inputs), key=java_string_key)
    done: dict[tuple[int, int], tuple[Any, ...]] = {}  # figures per strategy pair, after the label columns
    for label, current, old_strategy, new_strategy in candidates:
        pair = (id(old_strategy), id(new_strategy))
        if pair not in done:  # else the group's current strategy is one of the compared ones: same figures
            queues = moved = minimum = exposure = 0
            worst = 1.0
            failed = False
            for topic in topics:
                try:
                    old = _true_plan(old_strategy, group, before, topic)
                    new = _true_plan(new_strategy, group, after, topic)
                except (ValueError, TypeError):
                    failed = True
                    continue
                change, exposed = moves(old, new)
                queues += len(after.inputs[topic].mq_all) if topic in after.inputs else 0
                moved += len(change.moved)
                minimum += change.minimum
                exposure += exposed
                worst = max(worst, balance(new).max_over_avg)
            done[pair] = (queues, moved, minimum, moved / queues if queues else 0.0, worst, exposure, failed)
        out["comparison"].append((label, current, *done[pair]))


def _queue_set(side: Side, topic: str) -> set[MessageQueue]:
    return set(side.inputs[topic].mq_all) if topic in side.inputs else set()


def empty_output(group: str) -> dict[str, Any]:
    """A group's result with every output table empty (the schema is imported here: it needs pyarrow)."""
    from rocket_rebalance.pipeline.schema import OUTPUT_TABLES

    result: dict[str, Any] = {name: [] for name in OUTPUT_TABLES}
    result["group"] = group
    return result


def as_dicts(result: Mapping[str, Any]) -> dict[str, Any]:
    """A group's result with each row as a dict of column names (for tests and readers, not the hot path)."""
    from rocket_rebalance.pipeline.schema import OUTPUT_TABLES

    named: dict[str, Any] = {"group": result["group"]}
    for name, fields in OUTPUT_TABLES.items():
        columns = [f.name for f in fields]
        named[name] = [dict(zip(columns, row, strict=True)) for row in result[name]]
    return named


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a batch of groups is analysed, then back on.

    The analysis allocates millions of small tuples and lists that are freed by reference counting (it builds no
    cycles); with the collector on, each allocation burst also walks every live object the worker holds (the
    batch, the queue and ring caches), which measured as a third of the whole run (benchmarks/RESULTS.md).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def analyze_group(row: Mapping[str, Any], scenario: Scenario | None = None, compare: bool = False) -> dict[str, Any]:
    """Everything the pipeline reports about one consumer group; ``compare`` when an after side is given.

    With a ``scenario``, the after side is the before side with the scenario applied (``row["after"]`` is
    ignored). Duplicate client IDs are reported as violations, so the library's warning is silenced here.
    """
    group = row["group"]
    out = empty_output(group)
    after_data = row.get("after")
    if scenario is not None:
        after_data = apply_scenario(group, row.get("before"), scenario)
        compare = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DuplicateClientIdWarning)
        before = _analyze_side(group, "before", row.get("before"), out)
        after = _analyze_side(group, "after", after_data, out, known=[before.members]) if compare else None
        if scenario is not None:  # the after side was derived from the before side: do not reject a row twice
            seen = {r[1:] for r in out["rejected"] if r[0] == "before"}  # rejected row: side, table, reason, row
            out["rejected"] = [r for r in out["rejected"] if r[0] == "before" or r[1:] not in seen]
        moved = minimum = exposure = paused = 0
        if after is not None and before.ok and after.ok:
            moves = _Moves(row.get("offsets") or {})
            moved, minimum, exposure, paused = _compare_sides(before, after, moves, out)
            _comparison(group, before, after, moves, out)
    rebalances = False
    if after is not None:
        topics = set(before.inputs) | set(after.inputs)
        rebalances = (
            moved > 0
            or Counter(before.members) != Counter(after.members)
            or any(_queue_set(before, t) != _queue_set(after, t) for t in topics)
        )
    if before.ok or (after is not None and after.ok):
        out["groups"].append(
            (
                before.label,
                after.label if after else None,
                (after.model if after is not None and after.ok else None) or before.model,
                len(before.members),
                len(after.members) if after else None,
                before.queues,
                after.queues if after else None,
                before.violations,
                after.violations if after else None,
                moved,
                minimum,
                exposure,
                paused,
                rebalances,
            )
        )
    return out
