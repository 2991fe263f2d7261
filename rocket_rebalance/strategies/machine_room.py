"""MACHINE_ROOM and MACHINE_ROOM_NEARBY: strategies that read machine rooms out of names.

MACHINE_ROOM keeps only queues whose broker name is ``<room>@<broker>`` with a configured room, and shares those
among all consumers (their own rooms play no part). MACHINE_ROOM_NEARBY splits each room's queues among that
room's consumers with an inner strategy, and a room with queues but no consumers among everybody.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol

from rocket_rebalance.model import MessageQueue, java_string_key
from rocket_rebalance.strategies.base import (
    AllocateMessageQueueStrategy,
    AllocationError,
    CheckedStrategy,
    ConsumerIdcsNotSetError,
    check_group_args,
    plan_group,
)

__all__ = [
    "AllocateMachineRoomNearby",
    "AllocateMessageQueueByMachineRoom",
    "MachineRoomResolver",
    "PrefixMachineRoomResolver",
    "java_split",
]


def java_split(text: str, separator: str) -> list[str]:
    """Java's ``String.split`` for a one-character literal: like Python's, minus trailing empty pieces."""
    pieces = text.split(separator)
    while pieces and not pieces[-1]:
        pieces.pop()
    return pieces


Eligible = tuple[list[MessageQueue], int]


class AllocateMessageQueueByMachineRoom(CheckedStrategy[Eligible]):
    """MACHINE_ROOM: the eligible queues split into equal runs, leftovers taken from the tail, in Java's order.

    A queue is eligible when its broker name splits on ``@`` into exactly two pieces and the first is one of
    ``consumer_idcs``. With e eligible queues, c consumers, q = e // c and r = e % c, consumer i takes
    ``eligible[q*i : q*i + q]`` and, when i < r, also ``eligible[q*c + i]``. ``consumer_idcs=None`` means never
    configured: Java then fails with a NullPointerException as soon as a broker name has a room part.
    """

    name = "MACHINE_ROOM"

    def __init__(self, consumer_idcs: Iterable[str] | None = None) -> None:
        if isinstance(consumer_idcs, str):
            raise TypeError("consumer_idcs must be a collection of room names, not one str")
        self.consumer_idcs = None if consumer_idcs is None else frozenset(consumer_idcs)

    def prepare(self, consumer_group: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> Eligible:
        eligible: list[MessageQueue] = []
        for mq in mq_all:
            pieces = java_split(mq.broker_name, "@")
            if len(pieces) == 2:
                if self.consumer_idcs is None:
                    raise ConsumerIdcsNotSetError(
                        "MACHINE_ROOM has no consumer_idcs configured (Java fails with a NullPointerException); "
                        f"configure the machine rooms to consume from, e.g. {pieces[0]!r}"
                    )
                if pieces[0] in self.consumer_idcs:
                    eligible.append(mq)
        return (eligible, len(cid_all))

    def share(self, prepared: Eligible, index: int) -> list[MessageQueue]:
        eligible, consumers = prepared
        per_consumer, remainder = divmod(len(eligible), consumers)
        result = eligible[per_consumer * index : per_consumer * index + per_consumer]
        if index < remainder:
            result.append(eligible[per_consumer * consumers + index])
        return result

    def __repr__(self) -> str:
        rooms = "unset" if self.consumer_idcs is None else sorted(self.consumer_idcs, key=java_string_key)
        return f"<{type(self).__name__} {self.name} consumer_idcs={rooms}>"


class MachineRoomResolver(Protocol):
    """Tells which machine room a broker and a consumer are deployed in (Java's ``MachineRoomResolver``)."""

    def broker_room(self, mq: MessageQueue) -> str | None: ...

    def consumer_room(self, client_id: str) -> str | None: ...


class PrefixMachineRoomResolver:
    """The room is the text before the first ``@`` of the broker name or client ID, or the whole name."""

    def broker_room(self, mq: MessageQueue) -> str:
        return mq.broker_name.partition("@")[0]

    def consumer_room(self, client_id: str) -> str:
        return client_id.partition("@")[0]


class Rooms(NamedTuple):
    """Queues and consumers grouped by room, rooms in Java string order (Java uses a ``TreeMap``)."""

    consumer_group: str
    cid_all: Sequence[str]
    queues: dict[str, list[MessageQueue]]
    consumers: dict[str, list[str]]

    def orphans(self) -> list[str]:
        """Rooms that have queues but no consumer; everybody shares those."""
        return [room for room in self.queues if room not in self.consumers]


class AllocateMachineRoomNearby(CheckedStrategy[Rooms]):
    """MACHINE_ROOM_NEARBY: consume in your own room; rooms without consumers are shared by all.

    For the asking consumer: its room's queues split by ``inner`` among its room's consumers, then, for each room
    that has queues but no consumers (in Java string order of room name), that room's queues split by ``inner``
    among all consumers, appended. Every queue's and consumer's room must be non-empty.
    """

    def __init__(self, inner: AllocateMessageQueueStrategy, resolver: MachineRoomResolver | None = None) -> None:
        if inner is None:
            raise ValueError("MACHINE_ROOM_NEARBY needs an inner strategy (inner=...)")
        if not isinstance(inner, AllocateMessageQueueStrategy):
            raise TypeError(f"inner must be an allocation strategy, got {type(inner).__name__}")
        self.inner = inner
        self.resolver: MachineRoomResolver = resolver or PrefixMachineRoomResolver()

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"MACHINE_ROOM_NEARBY-{self.inner.name}"

    def prepare(self, consumer_group: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> Rooms:
        queues: dict[str, list[MessageQueue]] = {}
        for mq in mq_all:
            room = self.resolver.broker_room(mq)
            if not room:
                raise AllocationError(f"Machine room is null for mq {mq}")
            queues.setdefault(room, []).append(mq)
        consumers: dict[str, list[str]] = {}
        for cid in cid_all:
            room = self.resolver.consumer_room(cid)
            if not room:
                raise AllocationError(f"Machine room is null for consumer id {cid}")
            consumers.setdefault(room, []).append(cid)
        ordered = {room: queues[room] for room in sorted(queues, key=java_string_key)}
        return Rooms(consumer_group, cid_all, ordered, consumers)

    def share(self, prepared: Rooms, index: int) -> list[MessageQueue]:
        current = prepared.cid_all[index]
        room = self.resolver.consumer_room(current)
        assert room is not None
        group = prepared.consumer_group
        result: list[MessageQueue] = []
        if prepared.queues.get(room):
            result.extend(self.inner.allocate(group, current, prepared.queues[room], prepared.consumers[room]) or ())
        for orphan in prepared.orphans():
            result.extend(self.inner.allocate(group, current, prepared.queues[orphan], prepared.cid_all) or ())
        return result

    def plan_all(
        self, consumer_group: str, mq_all: Sequence[MessageQueue] | None, cid_all: Sequence[str] | None
    ) -> dict[str, list[MessageQueue]]:
        """Plan each room once with the inner strategy's own plan, then append the orphan rooms' plans."""
        check_group_args(mq_all, cid_all)
        assert mq_all is not None and cid_all is not None
        rooms = self.prepare(consumer_group, mq_all, cid_all)
        shares: dict[str, list[MessageQueue]] = {cid: [] for cid in cid_all}
        for room, room_consumers in rooms.consumers.items():
            if rooms.queues.get(room):
                for cid, queues in plan_group(self.inner, consumer_group, rooms.queues[room], room_consumers).items():
                    shares[cid].extend(queues)
        for orphan in rooms.orphans():
            for cid, queues in plan_group(self.inner, consumer_group, rooms.queues[orphan], cid_all).items():
                shares[cid].extend(queues)
        return shares

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"
