"""What a change to a group will do: who owns what before and after, what moves, and the window in between.

One group and one or more of the topics it subscribes to: the current routes and member list, then a change
(consumers join or leave, brokers go down), planned under one or more strategies so they can be compared. Each
strategy plans the topics the way the group's consumers do (:func:`plan_topics`): topic by topic, or, for a
strategy that spans topics (CROSS_TOPIC), every topic's queues in one call. Loads are per consumer over all the
given topics, so a comparison shows the skew that balancing each topic on its own piles onto the same consumers.
Everything here is composed from :mod:`rocket_rebalance.plan`; the ``simulate`` and ``allocate-mq`` commands only
print it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

from rocket_rebalance.model import MAX_GROUP_MEMBERS, MessageQueue, prepare_rebalance_input, sort_queues
from rocket_rebalance.plan import (
    Balance,
    Movement,
    Plan,
    SplitView,
    balance,
    by_topic,
    movement,
    plan,
    split_view,
    transition_views,
)
from rocket_rebalance.route import RouteError, TopicRoute
from rocket_rebalance.strategies import AllocateMessageQueueStrategy, java_compatible, spans_topics

__all__ = ["Change", "Outcome", "TopicPlans", "over_topics", "plan_topics", "simulate"]

TopicPlans = dict[str, Plan]
"""Each topic's plan by topic: every distinct consumer, with its share of that topic (possibly none)."""


@dataclass(frozen=True)
class Change:
    """Membership and route changes applied together, as one rebalance would see them."""

    joins: tuple[str, ...] = ()
    leaves: tuple[str, ...] = ()
    brokers_down: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for kind, names in (("join", self.joins), ("leave", self.leaves), ("take down", self.brokers_down)):
            if any(not name.strip() for name in names):
                raise ValueError(f"cannot {kind}: an empty name")
            repeated = sorted(name for name, count in Counter(names).items() if count > 1)
            if repeated:
                raise ValueError(f"cannot {kind}: {', '.join(repeated)} given twice")
        if len(self.joins) > MAX_GROUP_MEMBERS:
            raise ValueError(f"cannot join {len(self.joins)} consumers; the limit is {MAX_GROUP_MEMBERS} per group")

    def members_after(self, members: Sequence[str]) -> list[str]:
        """The member list after the change; leaving an absent member or joining a present one is an error."""
        absent = [cid for cid in self.leaves if cid not in members]
        if absent:
            raise ValueError(f"cannot leave: {', '.join(absent)} not in the group")
        present = [cid for cid in self.joins if cid in members]
        if present:
            raise ValueError(f"cannot join: {', '.join(present)} already in the group")
        return [cid for cid in members if cid not in self.leaves] + list(self.joins)


@dataclass(frozen=True)
class Outcome:
    """One strategy's answer to the change: plans, balance and moves over all the topics; ``topics`` has each
    topic's plans before and after; ``java_compatible`` says whether Java consumers could run the strategy."""

    strategy: str
    before: Plan
    after: Plan
    balance_before: Balance
    balance_after: Balance
    movement: Movement
    split_view: SplitView | None = field(default=None)
    topics: dict[str, tuple[Plan, Plan]] = field(default_factory=dict)
    java_compatible: bool = True

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: queue counts per consumer (over all topics, and per topic), balance, moves and the
        split-view counts."""
        consumers = list(dict.fromkeys([*self.before, *self.after]))
        return {
            "strategy": self.strategy,
            "javaCompatible": self.java_compatible,
            "consumers": [
                {
                    "clientId": cid,
                    "before": len(self.before.get(cid, ())),
                    "after": len(self.after.get(cid, ())),
                    "topics": {
                        topic: {"before": len(old.get(cid, ())), "after": len(new.get(cid, ()))}
                        for topic, (old, new) in self.topics.items()
                    },
                }
                for cid in consumers
            ],
            "balanceBefore": self.balance_before._asdict(),
            "balanceAfter": self.balance_after._asdict(),
            "moved": len(self.movement.moved),
            "minimumMoves": self.movement.minimum,
            "movedQueues": [mq.to_dict() for mq in self.movement.moved],
            "splitView": None
            if self.split_view is None
            else {
                "doubleOwned": [mq.to_dict() for mq in self.split_view.double_owned],
                "unowned": [mq.to_dict() for mq in self.split_view.unowned],
            },
        }


def _plan_calls(
    strategy: AllocateMessageQueueStrategy, queues: Mapping[str, Sequence[MessageQueue]]
) -> list[list[MessageQueue]]:
    """The queue lists the group's consumers hand the strategy: one per topic that has queues, or, for a strategy
    that spans topics, one holding all of them."""
    filled = [list(topic_queues) for topic_queues in queues.values() if topic_queues]
    if spans_topics(strategy) and filled:
        return [list(chain.from_iterable(filled))]
    return filled


def plan_topics(
    strategy: AllocateMessageQueueStrategy,
    consumer_group: str,
    queues: Mapping[str, Sequence[MessageQueue]],
    members: Sequence[str],
) -> TopicPlans:
    """Each topic's plan as the group's consumers compute it, from the lists sorted as the rebalance sorts them.

    A strategy that spans topics is given every topic's queues in one call, as its consumers give it (the totals
    over the topics are what it balances), and each topic's plan is cut out of its answer; any other strategy plans
    each topic on its own. A topic with no queue gets an empty plan (consumers skip it), and so does every topic
    when there is no member. Errors are the strategy's own (e.g. ``AllocationError``).
    """
    plans: TopicPlans = {topic: {} for topic in queues}
    for call in _plan_calls(strategy, queues):
        ready = prepare_rebalance_input(call, members, warn=False)  # the commands warn
        whole = plan(strategy, consumer_group, ready.mq_all, ready.cid_all) if ready.cid_all else {}
        plans.update(by_topic(whole, list(dict.fromkeys(mq.topic for mq in call))))
    return plans


def over_topics(plans: TopicPlans) -> Plan:
    """Each consumer's queues over every topic, consumers in the order they first appear."""
    merged: Plan = {}
    for topic_plan in plans.values():
        for cid, share in topic_plan.items():
            merged.setdefault(cid, []).extend(share)
    return merged


def _summed(movements: Sequence[Movement]) -> Movement:
    """Several topics' movements as one: the moves and the minimums add up (each topic is balanced on its own, so
    a balanced split needs each topic's fewest moves)."""
    return Movement(
        sort_queues(chain.from_iterable(change.moved for change in movements)),
        sum(change.minimum for change in movements),
        sum(change.queues for change in movements),
        {mq: cid for change in movements for mq, cid in change.owner_before.items()},
        {mq: cid for change in movements for mq, cid in change.owner_after.items()},
    )


def _subject(routes: Sequence[TopicRoute]) -> str:
    """``topic T has`` or ``topics T1, T2 have``: the start of an error about the given topics."""
    if len(routes) == 1:
        return f"topic {routes[0].topic} has"
    return f"topics {', '.join(route.topic for route in routes)} have"


def _routes_after(routes: Sequence[TopicRoute], brokers_down: Iterable[str]) -> list[TopicRoute]:
    """The routes once the brokers are down: a broker going down leaves every route it served; one that serves
    none of the topics is a typo, refused."""
    down = set(brokers_down)
    known = list(dict.fromkeys(broker for route in routes for broker in route.brokers()))
    unknown = sorted(down.difference(known))
    if unknown:
        raise RouteError(f"{_subject(routes)} no broker {', '.join(unknown)}; brokers: {', '.join(known)}")
    return [route.without_brokers(down.intersection(route.brokers())) for route in routes]


def _split_view(
    strategy: AllocateMessageQueueStrategy,
    consumer_group: str,
    queues: Mapping[str, Sequence[MessageQueue]],
    members_before: Sequence[str],
    members_after: Sequence[str],
) -> SplitView:
    """The window after the change in which every other live consumer still sees the old member list (the new
    queue lists are seen by all), over every call the consumers make."""
    views = transition_views(members_before, members_after)
    windows = [
        split_view(strategy, consumer_group, prepare_rebalance_input(call, (), warn=False).mq_all, views)
        for call in _plan_calls(strategy, queues)
    ]
    return SplitView(
        sort_queues(chain.from_iterable(window.double_owned for window in windows)),
        sort_queues(chain.from_iterable(window.unowned for window in windows)),
    )


def simulate(
    strategies: Sequence[AllocateMessageQueueStrategy],
    consumer_group: str,
    routes: Sequence[TopicRoute],
    members: Sequence[str],
    change: Change,
    with_split_view: bool = False,
) -> list[Outcome]:
    """Plan the group's ``routes`` (one per topic) before and after ``change`` under each strategy.

    Every topic must have a readable queue before the change, and one at least after it (a topic whose brokers all
    go down is skipped by consumers, as here). The split view models the window after the change in which every
    other live consumer still sees the old member list (the new queue lists are seen by all).
    """
    new_members = change.members_after(members)
    before = {route.topic: route.subscribe_queues() for route in routes}
    after = {route.topic: route.subscribe_queues() for route in _routes_after(routes, change.brokers_down)}
    empty = [route for route in routes if not before[route.topic]]
    if empty:
        raise ValueError(f"{_subject(empty)} no readable queue before the change")
    if not any(after.values()):
        raise ValueError(f"{_subject(routes)} no readable queue after the change")
    outcomes = []
    for strategy in strategies:
        old = plan_topics(strategy, consumer_group, before, members)
        new = plan_topics(strategy, consumer_group, after, new_members)
        old_all, new_all = over_topics(old), over_topics(new)
        window = _split_view(strategy, consumer_group, after, members, new_members) if with_split_view else None
        outcomes.append(
            Outcome(
                strategy.name,
                old_all,
                new_all,
                balance(old_all),
                balance(new_all),
                _summed([movement(old[topic], new[topic]) for topic in old]),
                window,
                {topic: (old[topic], new[topic]) for topic in old},
                java_compatible(strategy),
            )
        )
    return outcomes
