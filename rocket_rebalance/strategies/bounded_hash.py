"""CONSISTENT_HASH_BOUNDED: consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam, 2016).

Plain consistent hashing moves few queues on a membership change but is badly skewed (with Java's 10 virtual
nodes the busiest consumer of 8 carries about 1.7 times the mean). This strategy caps every consumer at
``cap = ceil((1 + eps) * queues / consumers)`` (distinct consumers) and places the queues one by one:

* queues in the rebalance's sorted order (``mq_all`` as given), each hashed like CONSISTENT_HASH (MD5 of Java's
  ``MessageQueue.toString()`` by default);
* the ring is CONSISTENT_HASH's ring (``<cid>-<k>`` virtual nodes), and a queue goes to the first point at or
  after its hash whose consumer is below its cap, walking on past full consumers and wrapping around;
* a consumer can hold no point at all: when two replica keys hash alike the later put wins (Java's ring), which a
  1-node ring or a colliding ``hash_function`` makes likely. Such consumers take queues only when a full lap of
  the ring found everyone on it full, in list order, so the walk ends on every input;
* ``eps = 0`` is perfect balance: the cap is ``ceil(queues / consumers)`` for the first ``queues % consumers``
  consumers to reach it and ``queues // consumers`` for the rest, so loads differ by at most one.

Every consumer computes the same walk from the same sorted inputs, so they agree without talking, as with every
other strategy. The price of the cap is some extra movement: a join lowers the cap, and queues above it cascade
to the next consumers on the ring. ``benchmarks/strategies.py`` measures both sides (RESULTS.md): with 40 virtual
nodes per consumer (the default) and ``eps = 0.25`` a join moves 1.05 to 1.4 times the least a balanced split must
move, where plain consistent hashing's busiest consumer carries 1.3 to 2.4 times the mean; ``eps = 0`` moves more.

Python only: no Java client has this strategy, so a group that runs it must have no Java consumers (the runtime
warns when the broker lists other members).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache
from itertools import repeat
from typing import NamedTuple

from rocket_rebalance.model import MessageQueue
from rocket_rebalance.strategies.base import (
    AllocationError,
    CheckedStrategy,
    Owners,
    check_group_args,
    check_sizes,
    first_positions,
    shares_of,
)
from rocket_rebalance.strategies.consistent_hash import AllocateMessageQueueConsistentHash, HashFunction, HashRing

__all__ = ["AllocateMessageQueueConsistentHashBounded", "load_cap"]


@lru_cache(maxsize=4096)
def load_cap(queues: int, consumers: int, eps: float) -> int:
    """``ceil((1 + eps) * queues / consumers)``, computed exactly (``eps`` read as the decimal it prints as).

    Remembered per (queues, consumers, eps): the exact fraction costs about as much as a small group's ring walk,
    and a fleet has few distinct shapes."""
    if consumers <= 0:
        return 0
    return math.ceil((1 + Fraction(repr(float(eps)))) * queues / consumers)


class _Walk(NamedTuple):
    """Each queue's owner in ``mq_all`` order, and the distinct consumers in list order."""

    mq_all: Sequence[MessageQueue]
    cid_all: Sequence[str]
    owners: Owners


class AllocateMessageQueueConsistentHashBounded(CheckedStrategy[_Walk]):
    """CONSISTENT_HASH_BOUNDED: the consistent-hash ring, with no consumer above ``ceil((1+eps)*queues/consumers)``.

    Options: ``eps`` (default 0.25; 0 is perfect balance), ``virtual_node_count`` (default 40, at least 1: the walk
    needs a ring), ``hash_function`` (default Java's MD5 hash, as CONSISTENT_HASH). The ring is built from the
    distinct client IDs and cached like CONSISTENT_HASH's.
    """

    name = "CONSISTENT_HASH_BOUNDED"
    java_compatible = False

    def __init__(
        self,
        eps: float = 0.25,
        virtual_node_count: int = 40,
        hash_function: HashFunction | None = None,
        ring_cache_size: int = 16,
    ) -> None:
        if not isinstance(eps, int | float) or isinstance(eps, bool):
            raise TypeError(f"eps must be a number, got {type(eps).__name__}")
        if not math.isfinite(eps) or eps < 0:
            raise AllocationError(f"eps must be a finite number >= 0, got {eps}")
        self._rings = AllocateMessageQueueConsistentHash(virtual_node_count, hash_function, ring_cache_size)
        if virtual_node_count < 1:
            raise AllocationError(f"CONSISTENT_HASH_BOUNDED needs at least 1 virtual node, got {virtual_node_count}")
        self.eps = float(eps)
        self.virtual_node_count = virtual_node_count
        self.hash_function = hash_function

    def cap(self, queues: int, consumers: int) -> int:
        """The most queues any one of ``consumers`` distinct consumers may hold."""
        return load_cap(queues, consumers, self.eps)

    def _walk(self, mq_all: Sequence[MessageQueue], cids: Sequence[str], sizes: Sequence[int] | None) -> Owners:
        """Each queue's owner: the first consumer clockwise from its hash with room left.

        ``sizes`` (one per distinct consumer) are exact capacities summing to the queue count, as the cross-topic
        wrapper asks for; without them the cap applies, and with ``eps = 0`` only ``queues % consumers``
        consumers may go above ``queues // consumers``.
        """
        ring: HashRing = self._rings.ring(cids)
        points, ring_owners, size = ring.points, ring.owners, len(ring.points)
        load = dict.fromkeys(cids, 0)
        floor, remainder = divmod(len(mq_all), len(cids))
        if sizes is not None:
            check_sizes(mq_all, cids, sizes)
            room = dict(zip(cids, sizes, strict=True))
            floor = 0  # each consumer fills exactly its own size
        else:
            room = dict.fromkeys(cids, self.cap(len(mq_all), len(cids)))
        limited = sizes is None and self.eps == 0 and remainder > 0
        big_slots = remainder if limited else len(cids)  # how many more consumers may go above the floor
        hashes = self._rings.queue_hashes(mq_all)
        if not limited:
            # big_slots never runs out and every room is at least the floor: room left is simply load < room. The
            # walk of nearly every group (the pipeline compares every group under this strategy), so it is kept
            # apart from the general one below.
            return self._walk_unlimited(hashes, points, ring_owners, cids, room, load)

        def has_room(cid: str) -> bool:
            held = load[cid]
            return held < floor or (held < room[cid] and big_slots > 0)

        owners: Owners = []
        for key_hash in hashes:
            position = bisect_left(points, key_hash)
            for step in range(size):
                owner = ring_owners[(position + step) % size]
                if has_room(owner):
                    break
            else:
                # A full lap and everyone on the ring is full: the room left is with consumers that hold no point
                # (a later put took each of theirs). The caps always leave room for every queue, so one exists.
                owner = next(cid for cid in cids if has_room(cid))
            held = load[owner]
            load[owner] = held + 1
            if limited and held == floor:  # this consumer just went above the floor
                big_slots -= 1
            owners.append(owner)
        return owners

    @staticmethod
    def _walk_unlimited(
        hashes: list[int],
        points: list[int],
        ring_owners: list[str],
        cids: Sequence[str],
        room: dict[str, int],
        load: dict[str, int],
    ) -> Owners:
        """:meth:`_walk` when every consumer may fill its whole room: the first consumer clockwise below it.

        Each queue's first choice (the owner of its point, as plain consistent hashing has it) is looked up for
        all queues at once, in C; the walk then only counts, and steps on past a full consumer."""
        size = len(points)
        positions = list(map(bisect_left, repeat(points), hashes))
        wrapped = [*ring_owners, ring_owners[0]]  # past the last point wraps to the first
        owners: Owners = list(map(wrapped.__getitem__, positions))
        for index, owner in enumerate(owners):
            assert owner is not None  # a first choice is a ring point's owner
            if load[owner] >= room[owner]:
                position = positions[index]
                for step in range(1, size):
                    owner = ring_owners[(position + step) % size]
                    if load[owner] < room[owner]:
                        break
                else:  # a full lap: the room left is with consumers that hold no point (see _walk)
                    owner = next(cid for cid in cids if load[cid] < room[cid])
                owners[index] = owner
            load[owner] += 1
        return owners

    def place(
        self, mq_all: Sequence[MessageQueue], cids: Sequence[str], sizes: Sequence[int]
    ) -> list[list[MessageQueue]]:
        """Each of the distinct ``cids`` filled to exactly its size by the ring walk (for CROSS_TOPIC)."""
        return list(shares_of(mq_all, cids, self._walk(mq_all, cids, sizes)).values())

    def prepare(self, consumer_group: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> _Walk:
        return _Walk(mq_all, cid_all, self._walk(mq_all, list(first_positions(cid_all)), None))

    def share(self, prepared: _Walk, index: int) -> list[MessageQueue]:
        current = prepared.cid_all[index]
        return [mq for mq, owner in zip(prepared.mq_all, prepared.owners, strict=True) if owner == current]

    def owners(
        self, consumer_group: str, mq_all: Sequence[MessageQueue] | None, cid_all: Sequence[str] | None
    ) -> Owners:
        """Each queue's owner by the walk (:func:`~rocket_rebalance.strategies.base.plan_owners`)."""
        check_group_args(mq_all, cid_all)
        assert mq_all is not None and cid_all is not None
        return self._walk(mq_all, list(first_positions(cid_all)), None)

    def plan_all(
        self, consumer_group: str, mq_all: Sequence[MessageQueue] | None, cid_all: Sequence[str] | None
    ) -> dict[str, list[MessageQueue]]:
        """Walk once and group by owner."""
        owners = self.owners(consumer_group, mq_all, cid_all)
        assert mq_all is not None and cid_all is not None
        return shares_of(mq_all, cid_all, owners)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} eps={self.eps} virtual_node_count={self.virtual_node_count}>"
