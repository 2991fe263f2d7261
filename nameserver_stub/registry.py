"""One broker's consumer registry: which clients belong to which group, with what subscriptions.

Mirrors RocketMQ's ConsumerManager: a heartbeat refreshes only the groups it lists, each (group, client) pair
expires on its own, and a group's members change when a client joins, leaves or expires. Like RocketMQ, only a
change of the *set of subscribed topics* counts as a subscription change (a new tag expression does not change
who gets which queue). The registry is plain data; :mod:`nameserver_stub.broker` decides whom to notify.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Subscription:
    """One subscribed topic (RocketMQ's SubscriptionData)."""

    topic: str
    sub_string: str
    expression_type: str
    sub_version: int


@dataclass(frozen=True)
class GroupMembership:
    """What one heartbeat says about one consumer group (RocketMQ's ConsumerData)."""

    group: str
    consume_type: int
    message_model: int
    consume_from_where: int
    subscriptions: tuple[Subscription, ...]

    def topics(self) -> frozenset[str]:
        return frozenset(sub.topic for sub in self.subscriptions)


@dataclass
class Member:
    """A client in a group, as of its last heartbeat for that group."""

    client_id: str
    membership: GroupMembership
    last_heartbeat: float


class ConsumerRegistry:
    """Groups and their members at one broker. Not thread-safe: the cluster lock guards it."""

    def __init__(self) -> None:
        # group -> client_id -> member; dicts keep join order, which GetConsumerListByGroup reports
        self._groups: dict[str, dict[str, Member]] = {}

    def heartbeat(self, client_id: str, memberships: list[GroupMembership], now: float) -> list[str]:
        """Record a heartbeat; returns the groups whose members or subscribed topics changed."""
        changed: list[str] = []
        for membership in memberships:
            members = self._groups.setdefault(membership.group, {})
            old = members.get(client_id)
            if old is None or old.membership.topics() != membership.topics():
                changed.append(membership.group)
            members[client_id] = Member(client_id, membership, now)
        return changed

    def unregister(self, client_id: str, group: str | None = None) -> list[str]:
        """Remove the client from ``group`` (or from every group); returns the groups it left."""
        left: list[str] = []
        for name in [group] if group is not None else list(self._groups):
            members = self._groups.get(name)
            if members is not None and members.pop(client_id, None) is not None:
                left.append(name)
                if not members:
                    del self._groups[name]
        return left

    def expire(self, now: float, expiry: float) -> list[tuple[str, str]]:
        """Remove members whose last heartbeat for the group is older than ``expiry``; returns (group, client)."""
        expired = [
            (group, member.client_id)
            for group, members in self._groups.items()
            for member in members.values()
            if now - member.last_heartbeat > expiry
        ]
        for group, client_id in expired:
            self.unregister(client_id, group)
        return expired

    def client_ids(self, group: str) -> list[str]:
        """Members of the group in join order."""
        return list(self._groups.get(group, {}))

    def members(self, group: str) -> list[Member]:
        return list(self._groups.get(group, {}).values())

    def groups(self) -> list[str]:
        return list(self._groups)

    def clear(self) -> None:
        self._groups.clear()
