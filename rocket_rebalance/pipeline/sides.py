"""One side (before or after) of one group: what each consumer takes from its own view, and what goes wrong.

The steps, in order: check the group's settings (:func:`_check_settings`), drop members of a group with no
subscription, resolve views given by digest, expand each subscribed topic's route into the queues a consumer sees
(the route model's :class:`~rocket_rebalance.route.TopicRoute`), then per topic plan every distinct view once
(:class:`ViewPlans`: for a strategy that spans topics, CROSS_TOPIC, every topic's queues in one call, as its
consumers plan) and report the queues with no owner or two, and the consumers left idle (per topic, or for a
strategy that spans topics, with no queue of any topic); finally each consumer's skew over all topics.
The returned :class:`Side` keeps what movement and the strategy comparison need, so nothing is planned twice.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress, repeat
from operator import attrgetter, ne
from typing import Any

from rocket_rebalance.model import (
    ClientIdList,
    MessageQueue,
    QueueList,
    RebalanceInput,
    java_string_key,
    prepare_rebalance_input,
    sort_client_ids,
)
from rocket_rebalance.pipeline.placement import TopicPlan
from rocket_rebalance.pipeline.rows import BalanceRow, RejectedRow, Tables, ViolationRow
from rocket_rebalance.pipeline.settings import BROADCASTING, CLUSTERING, MESSAGE_MODELS, parse_strategy
from rocket_rebalance.pipeline.views import resolve_views
from rocket_rebalance.plan import Plan, by_topic, plan
from rocket_rebalance.route import QueueData, RouteError, TopicRoute
from rocket_rebalance.strategies import AllocateMessageQueueStrategy, spans_topics
from rocket_rebalance.strategies.base import Owners, plan_owners

__all__ = [
    "DEFAULT_PERM",
    "MORE_CONSUMERS_THAN_QUEUES",
    "Data",
    "Side",
    "ViewPlans",
    "analyze_side",
    "topic_queues",
]

MORE_CONSUMERS_THAN_QUEUES = "more consumers than queues"
"""The reason of an idle consumer that no strategy could give a queue (an audit expects it on retry topics)."""

DEFAULT_PERM = 6
"""A route row without a perm is readable and writable, as a broker creates a topic."""

Data = Mapping[str, Any]
"""One side of a group input row (see :mod:`rocket_rebalance.pipeline.analysis`)."""

_broker = attrgetter("broker_name")
_queue_id = attrgetter("queue_id")


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
    shares: dict[str, TopicPlan] = field(default_factory=dict)  # per topic: what each live consumer takes
    unowned: dict[str, int] = field(default_factory=dict)
    violations: int = 0
    queues: int = 0
    true_plans: dict[str, TopicPlan] = field(default_factory=dict)  # per topic: the plan on the true member list
    true_errors: dict[str, str] = field(default_factory=dict)
    plans: ViewPlans | None = None  # every member list planned so far under the side's strategy (clustering)


def _row_json(row: Mapping[str, Any]) -> str:
    return json.dumps({k: v for k, v in row.items() if not k.startswith("_")}, sort_keys=True, default=str)


def reject(out: Tables, side: str, table: str, reason: str, rows: Iterable[Mapping[str, Any]]) -> None:
    """Input rows that a whole-group rule refuses, as ``rejected`` rows of this side."""
    for row in rows:
        out["rejected"].append(RejectedRow(side=side, table=table, reason=reason, row=_row_json(row)))


# ---- routes ------------------------------------------------------------------------------------------------------

_queue_cache: dict[tuple[str, tuple[tuple[str, int, int], ...], frozenset[str]], QueueList] = {}


def topic_queues(topic: str, routes: Sequence[Mapping[str, Any]], down: Iterable[str] = ()) -> QueueList:
    """The topic's queues as a consumer sees them, sorted: its route rows as the route model's
    :class:`~rocket_rebalance.route.TopicRoute` (readable brokers only, without the brokers ``down``).

    Many groups subscribe to one topic, so the sorted list (and the hashes its queues cache) is prepared once per
    worker and shared between the groups it analyses, keyed by the route rows themselves: building the route
    model for every group cost a fifth of the analysis. Raises :class:`~rocket_rebalance.route.RouteError` for a
    route of more readable queues than a topic may have.
    """
    rows = tuple(
        sorted(
            (r["broker"], r["read_queue_nums"], DEFAULT_PERM if r.get("perm") is None else r["perm"]) for r in routes
        )
    )
    key = (topic, rows, frozenset(down).intersection(row[0] for row in rows))
    queues = _queue_cache.get(key)
    if queues is None:
        if key[2]:
            queues = _without_brokers(topic, routes, key[2])
        else:
            route = TopicRoute(topic, tuple(QueueData(broker, count, count, perm) for broker, count, perm in rows))
            queues = prepare_rebalance_input(route.subscribe_queues(), (), warn=False).mq_all
        if len(_queue_cache) > 100_000:
            _queue_cache.clear()
        _queue_cache[key] = queues
    return queues


def _without_brokers(topic: str, routes: Sequence[Mapping[str, Any]], down: frozenset[str]) -> QueueList:
    """The topic's queues without the brokers ``down``, cut out of the whole route's list: the same queue objects
    on both sides of a broker-down scenario, so movement's lookups match by identity and each queue's ring hash is
    computed once (the profile found both sides' queues built and hashed apart). A route refused whole is refused
    here too, as the route model checks the whole route before brokers leave it."""
    return QueueList.trusted([mq for mq in topic_queues(topic, routes) if mq.broker_name not in down])


# ---- settings ----------------------------------------------------------------------------------------------------


def _check_settings(group: str, side: Side, settings: list[Mapping[str, Any]], out: Tables) -> str | None:
    """Set the side's strategy and model from its one settings row; otherwise why the group cannot be analysed."""
    if not settings:
        return "the group has no settings row"
    if len(settings) > 1:
        reason = f"the group has {len(settings)} settings rows"
        reject(out, side.name, "groups", reason, ({"group": group, **s} for s in settings))
        return reason
    row = settings[0]
    model = row.get("message_model") or CLUSTERING
    try:
        if model not in MESSAGE_MODELS:
            raise ValueError(f"unknown message model {model!r}; valid: {', '.join(MESSAGE_MODELS)}")
        side.strategy = parse_strategy(row.get("strategy"), row.get("options"))
    except (ValueError, TypeError) as error:
        reject(out, side.name, "groups", str(error), [{"group": group, **row}])
        return "group settings rejected"
    side.model = model
    side.label = side.strategy.name
    return None


# ---- violations ----------------------------------------------------------------------------------------------------


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


class ViewPlans:
    """Each distinct member list planned once per topic (as :func:`rocket_rebalance.plan.split_view` does), the way
    the group's consumers plan: each topic on its own, or, for a strategy that spans topics (CROSS_TOPIC), the
    queues of all the topics in ``queues`` in one call, each topic's plan cut out of the answer.

    A list the strategy refuses (Java throws and the consumer keeps nothing new) plans to nobody; the error is kept
    for every topic of the refused call. ``queues`` are each topic's queues, sorted as the rebalance sorts them.
    Plans are :class:`~rocket_rebalance.pipeline.placement.TopicPlan`: by owner per queue position when the
    strategy says each queue's owner (every compared strategy does), so movement compares them by position.
    """

    def __init__(
        self, strategy: AllocateMessageQueueStrategy, group: str, queues: Mapping[str, Sequence[MessageQueue]]
    ) -> None:
        self.strategy, self.group, self.queues = strategy, group, queues
        self.spans = spans_topics(strategy)
        self.plans: dict[tuple[tuple[str, ...], str], TopicPlan] = {}
        self.errors: dict[tuple[tuple[str, ...], str], str] = {}

    def __call__(self, key: tuple[str, ...], topic: str) -> TopicPlan:
        found = self.plans.get((key, topic))
        if found is None:
            self._plan(key, list(self.queues) if self.spans else [topic])
            found = self.plans[(key, topic)]
        return found

    def checked(self, key: tuple[str, ...], topic: str) -> TopicPlan:
        """The plan of ``topic`` on the list ``key``; the strategy's refusal raised as ``ValueError``."""
        found = self(key, topic)
        error = self.errors.get((key, topic))
        if error is not None:
            raise ValueError(error)
        return found

    def _plan(self, key: tuple[str, ...], topics: list[str]) -> None:
        if len(topics) > 1:  # sorted topics of sorted queues: one sorted list, as the consumers' own sort makes it
            topics = sorted(topics, key=java_string_key)
        mq_all = (
            self.queues[topics[0]]
            if len(topics) == 1
            else QueueList.trusted(chain.from_iterable(self.queues[topic] for topic in topics))
        )
        owners: Owners | None = None
        whole: Plan = {}
        if key:
            try:
                owners = plan_owners(self.strategy, self.group, mq_all, key)
                if owners is None:
                    whole = plan(self.strategy, self.group, mq_all, key)
            except (ValueError, TypeError) as error:
                self.errors.update({(key, topic): str(error) for topic in topics})
        if owners is not None:
            end = 0
            for topic in topics:
                queues = self.queues[topic]
                start, end = end, end + len(queues)
                self.plans[(key, topic)] = TopicPlan.placed(queues, key, owners[start:end])
        else:
            for topic, part in by_topic(whole, topics).items():
                self.plans[(key, topic)] = TopicPlan.given(self.queues[topic], part)


# ---- the side --------------------------------------------------------------------------------------------------


class _SideWork:
    """The state one side's topics share: the members (views resolved), their multiplicity, skew totals, and the
    plans of every member list (over all the topics that have queues, for a strategy that spans topics)."""

    def __init__(
        self, group: str, side: Side, members: list[dict[str, Any]], out: Tables, queues: Mapping[str, QueueList]
    ) -> None:
        self.group, self.side, self.members, self.out = group, side, members, out
        assert side.strategy is not None
        self.plans = side.plans = ViewPlans(side.strategy, group, queues)
        self.multiplicity: Counter[str | None] = Counter(side.members)
        self.member_input = prepare_rebalance_input((), side.members, warn=False)  # the same list for every topic
        self.skew_totals: dict[str, int] = dict.fromkeys(side.members, 0)
        self.unknown: dict[str, str] = {}

    def violation(self, **columns: Any) -> None:
        self.out["violations"].append(ViolationRow(side=self.side.name, **columns))

    def about(self, topic: str | None, count: int) -> dict[str, Iterable[Any]]:
        """The ``side`` and ``topic`` columns of ``count`` rows of this side about ``topic``."""
        return {"side": repeat(self.side.name, count), "topic": repeat(topic, count)}

    def assign(self, topic: str, held: list[tuple[str, list[MessageQueue]]]) -> None:
        """An assignment row for each queue each consumer process takes, in member order, added column by column."""
        queues = list(chain.from_iterable(share for _, share in held))
        count = len(queues)
        self.out["assignments"].extend_columns(
            count,
            **self.about(topic, count),
            broker=map(_broker, queues),
            queue_id=map(_queue_id, queues),
            owner=chain.from_iterable(repeat(cid, len(share)) for cid, share in held),
        )

    def balance_row(self, topic: str, shares: TopicPlan) -> None:
        self.out["balance"].append(BalanceRow(self.side.name, topic, *shares.balance()))  # Balance's fields are columns

    def topic(self, topic: str, mq_all: QueueList) -> None:
        """Plan one topic, record what each consumer takes and what goes wrong."""
        side = self.side
        true_input = RebalanceInput(mq_all, self.member_input.cid_all, self.member_input.duplicate_client_ids)
        side.inputs[topic] = true_input
        side.queues += len(mq_all)
        if side.model == BROADCASTING:
            self.broadcast(topic, mq_all)
            return
        true_key = true_input.cid_all  # a ClientIdList: its items were checked once, plans skip the rescan
        true_plan = self.plans(true_key, topic)
        plan_error = self.plans.errors.get((true_key, topic)) if side.members else None
        side.true_plans[topic] = true_plan
        if plan_error is not None:
            side.true_errors[topic] = plan_error
        held, effective, split = self.held(topic, true_key)
        # everyone planned on the true list: the same shares, and one object to compare
        whole = not split and plan_error is None
        shares = true_plan if whole else TopicPlan.given(mq_all, effective)
        side.shares[topic] = shares
        self.ownership(topic, mq_all, held, true_plan, plan_error, true_plan.owners if whole else None)
        if plan_error is None and not self.plans.spans:
            self.idle(topic, len(mq_all), lambda cid: bool(effective.get(cid)))
        self.balance_row(topic, shares)
        for cid, load in zip(shares.consumers, shares.loads(), strict=True):
            self.skew_totals[cid] += load

    def broadcast(self, topic: str, mq_all: QueueList) -> None:
        """Every consumer of a broadcasting group reads every queue: no violation, nothing to plan."""
        shares: Plan = {cid: list(mq_all) for cid in self.side.members}
        self.assign(topic, [(cid, shares[cid]) for cid in self.side.members])
        for cid in self.side.members:
            self.skew_totals[cid] += len(mq_all)
        self.side.shares[topic] = placed = TopicPlan.given(mq_all, shares)
        self.balance_row(topic, placed)

    def held(self, topic: str, true_key: ClientIdList) -> tuple[list[tuple[str, list[MessageQueue]]], Plan, bool]:
        """What each consumer process takes from its own view, in member order; the effective plan; whether any
        consumer planned on a list of its own (a split view)."""
        held: list[tuple[str, list[MessageQueue]]] = []
        effective: Plan = {}
        true_shares = self.plans(true_key, topic).shares
        view_shares: dict[tuple[str, ...], Plan] = {}  # a stale view is usually shared by many members
        for member in self.members:
            cid = member["client_id"]
            view = member.get("view")
            if view is None:
                shares = true_shares
            else:
                raw = tuple(view)
                found = view_shares.get(raw)
                if found is None:
                    key = prepare_rebalance_input((), raw, warn=False).cid_all
                    found = view_shares[raw] = self.plans(key, topic).shares
                shares = found
            share = shares.get(cid, [])
            effective.setdefault(cid, share)
            held.append((cid, share))
        self.assign(topic, held)
        return held, effective, bool(view_shares)

    def ownership(
        self,
        topic: str,
        mq_all: QueueList,
        held: list[tuple[str, list[MessageQueue]]],
        true_plan: TopicPlan,
        plan_error: str | None,
        owners: Owners | None,
    ) -> None:
        """A violation row for each queue with no owner or more than one, with the reason it has. ``owners``:
        each queue's owner when every consumer took its share of the true plan, whose holders are then the copies
        of that owner (counted without a dictionary of queues)."""
        if owners is not None:
            # a queue is held by the copies of its owner (an unowned queue's owner, None, has none)
            odd = list(compress(mq_all, map(ne, map(self.multiplicity.get, owners), repeat(1))))
        else:
            holder_count = Counter(chain.from_iterable(share for _, share in held))
            odd = [mq for mq in mq_all if holder_count.get(mq) != 1]  # usually none: holders are listed for these
        taken: dict[MessageQueue, list[str]] = {mq: [] for mq in odd}
        true_count: Counter[MessageQueue] = Counter()
        if odd:
            for cid, share in held:
                for mq in share:
                    if mq in taken:
                        taken[mq].append(cid)
            for cid, share in true_plan.shares.items():
                for mq in share:
                    true_count[mq] += self.multiplicity[cid]
        unowned = 0
        for mq in odd:
            holders = taken[mq]
            unowned += not holders
            self.side.violations += 1
            reason = (
                "no live consumer"
                if not self.side.members
                else _violation_reason(self.side, holders, true_count[mq], plan_error)
            )
            self.violation(
                topic=topic,
                broker=mq.broker_name,
                queue_id=mq.queue_id,
                kind="unowned" if not holders else "double_owned",
                owners=holders,
                client_id=None,
                reason=reason,
            )
        self.side.unowned[topic] = unowned

    def idle(self, topic: str | None, queues: int, holds: Callable[[str], bool]) -> None:
        """An ``idle_consumer`` row for each consumer that ``holds`` nothing of ``queues`` queues, and why: those of
        one topic (``topic``), or for a strategy that spans topics those of all of them (``topic`` None)."""
        true_key = self.member_input.cid_all
        seen_sets: dict[tuple[str, ...], frozenset[str]] = {}
        true_seen = frozenset(true_key)
        idle: list[str] = []
        reasons: list[str] = []
        for member in self.members:
            cid = member["client_id"]
            if holds(cid) or cid in self.unknown:
                continue
            view = member.get("view")
            raw: tuple[str, ...]
            if view is None:
                raw, seen = true_key, true_seen
            else:
                raw = tuple(view)
                seen = seen_sets.get(raw) or seen_sets.setdefault(raw, frozenset(raw))
            if cid not in seen:
                why = "the consumer is missing from its own view of the members"
            elif len(seen) > queues:
                why = MORE_CONSUMERS_THAN_QUEUES
            elif len(raw) > queues:  # Java counts a listed ID as often as it is listed
                why = f"duplicate client ID: {len(raw)} members listed for {queues} queues, {len(seen)} distinct"
            else:
                why = "the strategy gives the consumer no queue"
            idle.append(cid)
            reasons.append(why)
        count = len(idle)
        self.out["violations"].extend_columns(
            count,
            **self.about(topic, count),
            broker=repeat(None, count),
            queue_id=repeat(None, count),
            kind=repeat("idle_consumer", count),
            owners=[[] for _ in idle],
            client_id=idle,
            reason=reasons,
        )

    def idle_over_topics(self) -> None:
        """For a strategy that spans topics (CROSS_TOPIC): one ``idle_consumer`` row (no topic) for each consumer
        that takes no queue of any of the group's topics. Such a strategy balances each consumer's total, so one
        without a queue of some topic while holding others' is the plan working, not a fault (and per topic, a
        balanced group of 1,000 topics and 2,000 consumers would be two million rows). Not after the strategy
        refused the true member list: as per topic, what it refused is reported, not the idleness it causes."""
        side = self.side
        if side.model == BROADCASTING or side.true_errors or not side.inputs:
            return
        totals = self.skew_totals  # each consumer's queues over all topics, from its own view
        self.idle(None, sum(len(i.mq_all) for i in side.inputs.values()), lambda cid: totals[cid] > 0)

    def skew(self) -> None:
        """Each consumer's queues over all topics against the group's mean: topics balanced one by one can pile
        extra queues onto the same consumer."""
        totals = self.skew_totals
        if not totals:
            return
        mean = sum(totals.values()) / len(totals)
        cids = sort_client_ids(totals)
        queues = list(map(totals.__getitem__, cids))
        count = len(cids)
        self.out["skew"].extend_columns(
            count,
            side=repeat(self.side.name, count),
            client_id=cids,
            queues=queues,
            fair_share=repeat(mean, count),
            skew=[total / mean for total in queues] if mean else repeat(1.0, count),
        )


def analyze_side(group: str, name: str, data: Data | None, out: Tables, known: Sequence[Sequence[str]] = ()) -> Side:
    """One side of a group: check its settings, then per topic what each consumer takes from its own view.

    ``known`` are member lists a ``view_digest`` may name besides the side's own (see
    :func:`~rocket_rebalance.pipeline.views.resolve_views`). Appends assignments, violations, balance and skew rows
    to ``out``.
    """
    side = Side(name)
    if data is None:
        return side
    topics = sorted(set(data.get("topics") or ()), key=java_string_key)
    members = sorted(
        data.get("members") or (),
        key=lambda m: (java_string_key(m["client_id"]), tuple(m.get("view") or ()), m.get("view_digest") or ""),
    )
    reason = _check_settings(group, side, list(data.get("settings") or ()), out)
    if reason is not None:
        reject(out, name, "members", reason, ({"group": group, **m} for m in members))
        reject(out, name, "subscriptions", reason, ({"group": group, "topic": t} for t in topics))
        return side
    if members and not topics:
        reject(out, name, "members", "member of a group with no subscription", ({"group": group, **m} for m in members))
        members = []
    side.ok = True
    side.members = [m["client_id"] for m in members]
    members, unknown = resolve_views(members, side.members, known)
    queues, skipped = _side_queues(topics, data)
    work = _SideWork(group, side, members, out, queues)
    work.unknown = unknown
    for cid, digest in unknown.items():
        why = f"its member list (digest {digest}) matches no list known for the group: its share cannot be computed"
        work.violation(
            topic=None, broker=None, queue_id=None, kind="unknown_view", owners=[], client_id=cid, reason=why
        )
    for topic in topics:
        if topic in queues:
            work.topic(topic, queues[topic])
        else:
            work.violation(
                topic=topic, broker=None, queue_id=None, kind="no_route", owners=[], client_id=None,
                reason=skipped[topic],
            )  # fmt: skip
    if work.plans.spans:
        work.idle_over_topics()
    work.skew()
    return side


def _side_queues(topics: Sequence[str], data: Data) -> tuple[dict[str, QueueList], dict[str, str]]:
    """Each topic's queues as consumers see them, for the topics that have some (in ``topics`` order), and why
    each other topic is skipped. All are known before any topic is planned: a strategy that spans topics plans
    them together."""
    routes: dict[str, list[Mapping[str, Any]]] = {}
    for row in data.get("routes") or ():
        routes.setdefault(row["topic"], []).append(row)
    down = data.get("brokers_down") or ()
    queues: dict[str, QueueList] = {}
    skipped: dict[str, str] = {}
    for topic in topics:
        try:
            mq_all = topic_queues(topic, routes.get(topic, ()), down)
        except RouteError as error:
            skipped[topic] = f"route refused: {error}; consumers skip it"
            continue
        if mq_all:
            queues[topic] = mq_all
        else:
            skipped[topic] = "the topic has no readable queue; consumers skip it"
    return queues, skipped
