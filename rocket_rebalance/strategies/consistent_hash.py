"""CONSISTENT_HASH: queues go to the consumer whose virtual node follows the queue's hash on a ring.

The ring matches Java's ``ConsistentHashRouter`` point for point:

* for each client ID in list order, replicas ``<id>-<k>`` for k = e .. e+V-1, where e is the number of ring
  points that ID already holds (so a repeated ID continues its numbering, as in Java);
* a point whose hash is already on the ring replaces the earlier one (Java's ``TreeMap.put``);
* a queue (key: Java's ``MessageQueue.toString()``) goes to the first point at or after its hash, wrapping to the
  smallest point; an empty ring (V = 0) owns nothing.

Java rebuilds the ring on every call and counts existing replicas by scanning the whole ring, which is why it is
slow (consumers x ring size). Here the replica count is a dictionary and the ring, a pair of sorted arrays, is
cached per distinct consumer list (bounded, least recently used), because a consumer asks with the same list
round after round. With the default hash, the points of each client ID's replicas are remembered too, once per
process (:data:`REPLICA_POINTS`, bounded): a join or a leave changes the list, and so the ring, but every other
consumer's points are the ones already computed, and CONSISTENT_HASH (10 replicas) and CONSISTENT_HASH_BOUNDED
(40) share the first ten of each ID's points.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import chain, compress, repeat
from operator import eq, ne
from typing import NamedTuple

from rocket_rebalance.model import (
    MAX_VIRTUAL_NODES,
    MessageQueue,
    java_md5_hash,
    java_md5_hashes,
    queue_md5_hashes,
)
from rocket_rebalance.strategies.base import AllocationError, CheckedStrategy, Owners, check_group_args, shares_of

__all__ = [
    "MAX_RING_POINTS",
    "REPLICA_POINTS",
    "AllocateMessageQueueConsistentHash",
    "HashRing",
    "ReplicaPoints",
    "arcs",
    "build_ring",
    "neighbour_ring",
]

HashFunction = Callable[[str], int]

MAX_RING_POINTS = 1_000_000
"""Most points (consumers x virtual nodes) a ring may have. Each factor has its own limit, but their product does
not: 7,000 consumers at 10,000 nodes is 70 million keys and gigabytes. A million is 10,000 consumers (the group
limit) at 100 nodes, ten times Java's default; it takes one to two seconds and about 200 MB to build."""


class HashRing(NamedTuple):
    """Ring points in ascending hash order and the client ID owning each point."""

    points: list[int]
    owners: list[str]

    def owner_of(self, key_hash: int) -> str | None:
        """The owner of the first point at or after ``key_hash``, wrapping around; ``None`` on an empty ring."""
        if not self.points:
            return None
        position = bisect_left(self.points, key_hash)
        return self.owners[position if position < len(self.points) else 0]


@lru_cache(maxsize=64)
def _replica_numbers(count: int) -> tuple[bytes, ...]:
    """``b"0"``, ``b"1"``, ... ``count - 1``: the replica numbers of ring keys, made once per count."""
    return tuple(b"%d" % replica for replica in range(count))


class ReplicaPoints:
    """The default hash's points of each client ID's replicas ``<id>-0``, ``<id>-1``, ..., remembered per ID.

    Profiling the fleet pipeline (benchmarks/RESULTS.md) found ring building the largest single cost of a group's
    analysis: each ring hashed or looked up every one of its keys, formatting each key first, though a join changes
    one ID of the list and CONSISTENT_HASH's ten replicas are the first ten of CONSISTENT_HASH_BOUNDED's forty. Here
    an ID's points are a list computed once, extended when more replicas are asked for. Bounded: at most ``ids``
    IDs (cleared when full: a worker moves from group to group, so old IDs are rarely asked for again), and an ID
    asked for more than ``most_replicas`` points is not remembered. Lists handed out are never changed afterwards
    and the dictionary is used only through single operations (each atomic in CPython), so threads need no lock:
    at worst a point list is computed twice.
    """

    def __init__(self, ids: int, most_replicas: int) -> None:
        self.ids = ids
        self.most_replicas = most_replicas
        self._points: dict[str, list[int]] = {}

    def __call__(self, cids: Sequence[str], count: int) -> list[list[int]]:
        """The points of replicas ``0 .. count-1`` of each of ``cids``, in replica order.

        The points not known yet are hashed in one batch (:func:`~rocket_rebalance.model.java_md5_hashes`): a cold
        ring of 1,000 consumers is then one call, not 1,000."""
        known = self._points
        found = [known.get(cid) or [] for cid in cids]
        missing = {cid: have for cid, have in zip(cids, found, strict=True) if len(have) < count}
        if missing:
            keys: list[bytes] = []
            numbers = _replica_numbers(count)
            for cid, have in missing.items():
                # key f"{cid}-{replica}", encoded as java_md5_hash does; joined in C (map) rather than formatted
                keys += map((cid.encode("utf-8", "surrogatepass") + b"-").__add__, numbers[len(have) :])
            hashes = java_md5_hashes(keys)
            end = 0
            for cid, have in missing.items():
                start, end = end, end + count - len(have)
                missing[cid] = have + hashes[start:end]
            found = [missing.get(cid, have) for cid, have in zip(cids, found, strict=True)]
            if count <= self.most_replicas and len(missing) <= self.ids:
                if len(known) + len(missing) > self.ids:
                    known.clear()
                known.update(missing)
        return [points if len(points) == count else points[:count] for points in found]

    def clear(self) -> None:
        """Forget every point (what a new process starts with: benchmarks/allocation.py's cold ring)."""
        self._points.clear()


REPLICA_POINTS = ReplicaPoints(ids=16_384, most_replicas=64)
"""The process's replica points under the default hash: 16,384 client IDs of up to 64 points (at most about 38 MB;
6 MB for a ring of 10,000 consumers at the default 10 points, or 16,384 IDs at CONSISTENT_HASH_BOUNDED's 40)."""


def build_ring(cid_all: Sequence[str], virtual_node_count: int, hash_function: HashFunction | None = None) -> HashRing:
    """Build the ring exactly as Java's ``ConsistentHashRouter`` would for ``cid_all`` (see module doc); without a
    ``hash_function``, Java's default MD5 hash through :data:`REPLICA_POINTS`.

    A ring above :data:`MAX_RING_POINTS` is refused before any key is hashed (``AllocationError``)."""
    size = len(cid_all) * virtual_node_count
    if size > MAX_RING_POINTS:
        raise AllocationError(
            f"{len(cid_all)} consumers x {virtual_node_count} virtual nodes = {size} ring points; "
            f"the limit is {MAX_RING_POINTS} (fewer virtual nodes, or fewer consumers)"
        )
    ring: dict[int, str]
    if len(set(cid_all)) != len(cid_all):
        ring = _build_ring_with_repeats(cid_all, virtual_node_count, hash_function or java_md5_hash)
    elif hash_function is None:
        # No repeated ID, so every replica numbering starts at 0 and "the later put wins" is what a dict filled in
        # list order does.
        points_of = REPLICA_POINTS(cid_all, virtual_node_count)
        owners = chain.from_iterable(map(repeat, cid_all, map(len, points_of)))
        ring = dict(zip(chain.from_iterable(points_of), owners, strict=True))
    else:
        keys = [f"{cid}-{replica}" for cid in cid_all for replica in range(virtual_node_count)]
        owner_of_key = [cid for cid in cid_all for _ in range(virtual_node_count)]
        ring = dict(zip(map(hash_function, keys), owner_of_key, strict=True))
    points = sorted(ring)
    return HashRing(points, list(map(ring.__getitem__, points)))


def neighbour_ring(
    known: Sequence[str],
    ring: HashRing,
    cid_all: Sequence[str],
    virtual_node_count: int,
    hash_function: HashFunction | None = None,
) -> HashRing | None:
    """The ring of ``cid_all`` from ``ring``, the ring of ``known``, when the two lists differ by one client ID
    joining or leaving; ``None`` when they do not, or when the answer could differ from :func:`build_ring`'s.

    A join or a leave is what an analysis of membership changes asks right after the ring before it: the fleet
    pipeline plans every group before and after one consumer joins, and a group of 400 consumers has a ring of
    16,000 points under CONSISTENT_HASH_BOUNDED. Inserting the joiner's points into the sorted ring (or dropping
    the leaver's) costs a fraction of sorting it again. It is the same ring only without repeated IDs (a repeated
    ID numbers its replicas on) and without two points on one hash (which one wins depends on list order): the
    known ring must hold every point of its list, and a joiner's point must not fall on one already there."""
    if len(ring.points) != len(known) * virtual_node_count or abs(len(cid_all) - len(known)) != 1:
        return None
    before, after = set(known), set(cid_all)
    if len(before) != len(known) or len(after) != len(cid_all):
        return None
    if len(cid_all) < len(known):  # a leave: every other point stays
        (leaver,) = before - after if before > after else (None,)
        if leaver is None:
            return None
        kept = list(map(ne, ring.owners, repeat(leaver)))
        return HashRing(list(compress(ring.points, kept)), list(compress(ring.owners, kept)))
    (joiner,) = after - before if after > before else (None,)
    if joiner is None:
        return None
    if hash_function is None:
        (added,) = REPLICA_POINTS([joiner], virtual_node_count)
    else:
        added = [hash_function(f"{joiner}-{replica}") for replica in range(virtual_node_count)]
    points, owners = list(ring.points), list(ring.owners)
    for point in sorted(added):
        position = bisect_left(points, point)
        if position < len(points) and points[position] == point:
            return None  # two points on one hash: the ring's own build decides which one stays
        points.insert(position, point)
        owners.insert(position, joiner)
    return HashRing(points, owners)


def _build_ring_with_repeats(
    cid_all: Sequence[str], virtual_node_count: int, hash_function: HashFunction
) -> dict[int, str]:
    """Java's exact walk: a repeated ID numbers its replicas after the points it still holds on the ring."""
    ring: dict[int, str] = {}
    held: dict[str, int] = {}
    for cid in cid_all:
        existing = held.get(cid, 0)
        for replica in range(existing, existing + virtual_node_count):
            point = hash_function(f"{cid}-{replica}")
            replaced = ring.get(point)
            if replaced is not None:
                held[replaced] -= 1
            ring[point] = cid
            held[cid] = held.get(cid, 0) + 1
    return ring


def arcs(ring: HashRing, cid: str) -> tuple[list[int], list[bool]]:
    """The ring collapsed to ``cid``'s arcs: the last point of each run of points that are (or are not) ``cid``'s,
    and whether each run is; one more flag at the end for a hash past the last point (it wraps to the first run).

    A hash's first point at or after it lies in the run whose last point is the first of these at or after it, so
    a lookup among them (a few dozen for a consumer's default ten points) answers "is this queue ``cid``'s"."""
    flags = list(map(eq, ring.owners, repeat(cid)))
    last = len(flags) - 1
    ends = [*compress(range(last), map(ne, flags, flags[1:])), last]
    return [ring.points[k] for k in ends], [*map(flags.__getitem__, ends), flags[0]]


Routed = tuple[Sequence[MessageQueue], Sequence[str], HashRing]


class AllocateMessageQueueConsistentHash(CheckedStrategy[Routed]):
    """CONSISTENT_HASH with ``virtual_node_count`` points per consumer (default 10, as in Java).

    ``hash_function`` replaces Java's default MD5 hash (first 4 digest bytes, big-endian, unsigned); it takes the
    key text and returns an int. ``ring_cache_size`` bounds how many distinct consumer lists keep their ring.
    """

    name = "CONSISTENT_HASH"

    def __init__(
        self,
        virtual_node_count: int = 10,
        hash_function: HashFunction | None = None,
        ring_cache_size: int = 16,
    ) -> None:
        if not isinstance(virtual_node_count, int) or isinstance(virtual_node_count, bool):
            raise TypeError(f"virtual_node_count must be an int, got {type(virtual_node_count).__name__}")
        if virtual_node_count < 0:
            raise AllocationError(f"illegal virtualNodeCnt :{virtual_node_count}")
        if virtual_node_count > MAX_VIRTUAL_NODES:
            # Java would try to build the ring and run out of memory; here it is a clear error up front.
            raise AllocationError(f"virtualNodeCnt {virtual_node_count} is above the limit of {MAX_VIRTUAL_NODES}")
        if hash_function is not None and not callable(hash_function):
            raise TypeError("hash_function must be callable (str) -> int")
        self.virtual_node_count = virtual_node_count
        self.hash_function = hash_function
        self._ring_cache_size = ring_cache_size
        self._rings: dict[tuple[str, ...], HashRing] = {}

    def ring(self, cid_all: Sequence[str]) -> HashRing:
        """The ring for this consumer list, from the cache when this list was seen recently.

        The cache is a plain dict used only through single operations (each atomic in CPython), so a strategy
        shared by threads needs no lock: at worst two threads build the same ring once.
        """
        key = tuple(cid_all)
        cached = self._rings.pop(key, None)
        if cached is None:
            recent = list(self._rings.items())[-1:]  # list(dict) is one atomic copy
            if recent:
                cached = neighbour_ring(*recent[0], key, self.virtual_node_count, self.hash_function)
            if cached is None:
                cached = build_ring(key, self.virtual_node_count, self.hash_function)
        self._rings[key] = cached  # (re)inserted last: the dict's order is least recently used first
        excess = len(self._rings) - self._ring_cache_size
        for oldest in list(self._rings)[: max(0, excess)]:  # list(dict) is one atomic copy
            self._rings.pop(oldest, None)
        return cached

    def queue_hashes(self, mq_all: Sequence[MessageQueue]) -> list[int]:
        """Each queue's point on this strategy's ring (its hash of ``MessageQueue.toString()``), in order."""
        if self.hash_function is None:
            return queue_md5_hashes(mq_all)
        return [self.hash_function(str(mq)) for mq in mq_all]

    def _owners(self, mq_all: Sequence[MessageQueue], ring: HashRing) -> list[str | None]:
        """The owner of every queue, in ``mq_all`` order (the lookup of :meth:`HashRing.owner_of`, inlined)."""
        if not ring.points:
            return [None] * len(mq_all)
        # past the last point wraps to the first: one more owner at the end, so both lookups run in C (map)
        wrapped = [*ring.owners, ring.owners[0]]
        return list(map(wrapped.__getitem__, map(bisect_left, repeat(ring.points), self.queue_hashes(mq_all))))

    def prepare(self, consumer_group: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> Routed:
        return (mq_all, cid_all, self.ring(cid_all))

    def share(self, prepared: Routed, index: int) -> list[MessageQueue]:
        """The queues on the consumer's arcs of the ring (:func:`arcs`): a lookup among a few arc ends per queue
        instead of among every ring point, and no owner list for the whole group (one consumer's view of a cold
        ring of 10,000 x 1,000, benchmarks/allocation.py)."""
        mq_all, cid_all, ring = prepared
        if not ring.points:
            return []
        ends, mine = arcs(ring, cid_all[index])
        return list(compress(mq_all, map(mine.__getitem__, map(bisect_left, repeat(ends), self.queue_hashes(mq_all)))))

    def owners(
        self, consumer_group: str, mq_all: Sequence[MessageQueue] | None, cid_all: Sequence[str] | None
    ) -> Owners:
        """Each queue's owner on the ring (:func:`~rocket_rebalance.strategies.base.plan_owners`)."""
        check_group_args(mq_all, cid_all)
        assert mq_all is not None and cid_all is not None
        return self._owners(mq_all, self.ring(cid_all))

    def plan_all(
        self, consumer_group: str, mq_all: Sequence[MessageQueue] | None, cid_all: Sequence[str] | None
    ) -> dict[str, list[MessageQueue]]:
        """Route every queue once and group by owner, instead of filtering the routes once per consumer."""
        owners = self.owners(consumer_group, mq_all, cid_all)
        assert mq_all is not None and cid_all is not None
        return shares_of(mq_all, cid_all, owners)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} virtual_node_count={self.virtual_node_count}>"
