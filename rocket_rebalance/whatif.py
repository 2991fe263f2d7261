"""What a change to a group will do: who owns what before and after, what moves, and the window in between.

One group, one topic: the current route and member list, then a change (consumers join or leave, brokers go
down), planned under one or more strategies so they can be compared. Everything here is composed from
:mod:`rocket_rebalance.plan`; the ``simulate`` command only prints it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rocket_rebalance.model import MAX_GROUP_MEMBERS, prepare_rebalance_input
from rocket_rebalance.plan import (
    Balance,
    Movement,
    Plan,
    SplitView,
    balance,
    movement,
    plan,
    split_view,
    transition_views,
)
from rocket_rebalance.route import TopicRoute
from rocket_rebalance.strategies import AllocateMessageQueueStrategy

__all__ = ["Change", "Outcome", "simulate"]


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
    """One strategy's answer to the change."""

    strategy: str
    before: Plan
    after: Plan
    balance_before: Balance
    balance_after: Balance
    movement: Movement
    split_view: SplitView | None = field(default=None)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: queue counts per consumer, balance, moves and the split-view counts."""
        consumers = list(dict.fromkeys([*self.before, *self.after]))
        return {
            "strategy": self.strategy,
            "consumers": [
                {"clientId": cid, "before": len(self.before.get(cid, ())), "after": len(self.after.get(cid, ()))}
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


def simulate(
    strategies: Sequence[AllocateMessageQueueStrategy],
    consumer_group: str,
    route: TopicRoute,
    members: Sequence[str],
    change: Change,
    with_split_view: bool = False,
) -> list[Outcome]:
    """Plan the group before and after ``change`` under each strategy (lists sorted as consumers sort them).

    The split view models the window after the change in which every other live consumer still sees the old
    member list (the new queue list is seen by all).
    """
    new_members = change.members_after(members)
    new_route = route.without_brokers(change.brokers_down)
    before = prepare_rebalance_input(route.subscribe_queues(), members, warn=False)  # the command warns
    after = prepare_rebalance_input(new_route.subscribe_queues(), new_members, warn=False)
    for label, ready in (("before", before), ("after", after)):
        if not ready.mq_all:
            raise ValueError(f"topic {route.topic} has no readable queue {label} the change")
    outcomes = []
    for strategy in strategies:
        old_plan = plan(strategy, consumer_group, before.mq_all, before.cid_all) if before.cid_all else {}
        new_plan = plan(strategy, consumer_group, after.mq_all, after.cid_all) if after.cid_all else {}
        window = None
        if with_split_view:
            views = transition_views(before.cid_all, after.cid_all)
            window = split_view(strategy, consumer_group, after.mq_all, views)
        outcomes.append(
            Outcome(
                strategy.name,
                old_plan,
                new_plan,
                balance(old_plan),
                balance(new_plan),
                movement(old_plan, new_plan),
                window,
            )
        )
    return outcomes
