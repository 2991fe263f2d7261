"""Strategy behaviour beyond the golden vectors: bad input, options, the ring cache, user hooks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocket_rebalance.model import MessageQueue, QueueList, java_md5_hash
from rocket_rebalance.strategies import (
    STRATEGY_NAMES,
    AllocateMessageQueueStrategy,
    AllocationError,
    ConsumerIdcsNotSetError,
    MessageQueuesNotSetError,
    UnknownStrategyError,
    build_ring,
    create_strategy,
)
from rocket_rebalance.strategies.consistent_hash import (
    AllocateMessageQueueConsistentHash,
    ReplicaPoints,
    _build_ring_with_repeats,
)

QUEUES = [MessageQueue("T", "broker-a", i) for i in range(6)]
CIDS = ["c1", "c2", "c3"]


@pytest.mark.parametrize("name", [n for n in STRATEGY_NAMES if n not in ("CONFIG", "MACHINE_ROOM_NEARBY")])
@pytest.mark.parametrize(
    ("current", "queues", "cids", "error", "text"),
    [
        ("c1", [*QUEUES[:2], "T:b:2"], CIDS, TypeError, r"mq_all\[2\] must be a MessageQueue"),
        ("c1", QUEUES, ["c1", 7], TypeError, r"cid_all\[1\] must be a str"),
        (5, QUEUES, CIDS, TypeError, "current_cid must be a str"),
        ("c1", "T:b:1", CIDS, TypeError, "mq_all must be a list or tuple"),
        ("c1", QUEUES, "c1", TypeError, "cid_all must be a list or tuple"),
        (None, QUEUES, CIDS, AllocationError, "currentCID is empty"),
        ("c1", [], CIDS, AllocationError, "mqAll is null or mqAll empty"),
        ("c1", QUEUES, None, AllocationError, "cidAll is null or cidAll empty"),
    ],
)
def test_bad_arguments_are_named(
    name: str, current: object, queues: object, cids: object, error: type[Exception], text: str
) -> None:
    strategy = create_strategy(name, **({"consumer_idcs": {"x"}} if name == "MACHINE_ROOM" else {}))
    with pytest.raises(error, match=text):
        strategy.allocate("g", current, queues, cids)  # type: ignore[arg-type]


def test_allocation_error_is_a_value_error() -> None:
    assert issubclass(AllocationError, ValueError)
    assert issubclass(ConsumerIdcsNotSetError, ValueError)


def test_unknown_name_lists_valid_names() -> None:
    with pytest.raises(UnknownStrategyError, match="valid names: AVG, AVG_BY_CIRCLE, CONSISTENT_HASH"):
        create_strategy("ROUND_ROBIN")


def test_unknown_option_lists_valid_options() -> None:
    with pytest.raises(ValueError, match="has no option virtual_nodes; its options: virtual_node_count"):
        create_strategy("CONSISTENT_HASH", virtual_nodes=3)
    with pytest.raises(ValueError, match="AVG has no option x; its options: none"):
        create_strategy("AVG", x=1)


def test_negative_virtual_nodes_is_javas_error() -> None:
    with pytest.raises(AllocationError, match="^illegal virtualNodeCnt :-3$"):
        create_strategy("CONSISTENT_HASH", virtual_node_count=-3)


def test_machine_room_without_rooms_is_a_clear_error() -> None:
    strategy = create_strategy("MACHINE_ROOM")
    with pytest.raises(ConsumerIdcsNotSetError, match="no consumer_idcs configured"):
        strategy.allocate("g", "c1", [MessageQueue("T", "hz@broker-a", 0)], CIDS)


def test_nearby_needs_an_inner_strategy() -> None:
    with pytest.raises(TypeError):
        create_strategy("MACHINE_ROOM_NEARBY")
    with pytest.raises(TypeError, match="inner must be an allocation strategy"):
        create_strategy("MACHINE_ROOM_NEARBY", inner=42)
    assert create_strategy("MACHINE_ROOM_NEARBY", inner="CONSISTENT_HASH").name == "MACHINE_ROOM_NEARBY-CONSISTENT_HASH"


def test_nearby_uses_a_custom_resolver() -> None:
    class ByQueueParity:
        def broker_room(self, mq: MessageQueue) -> str:
            return "even" if mq.queue_id % 2 == 0 else "odd"

        def consumer_room(self, client_id: str) -> str:
            return client_id.split(":")[0]

    strategy = create_strategy("MACHINE_ROOM_NEARBY", inner=create_strategy("AVG"), resolver=ByQueueParity())
    cids = ["even:1", "odd:1"]
    assert strategy.allocate("g", "even:1", QUEUES, cids) == QUEUES[0::2]
    assert strategy.allocate("g", "odd:1", QUEUES, cids) == QUEUES[1::2]


def test_ring_is_built_once_per_consumer_list_and_evicted_when_full() -> None:
    strategy = AllocateMessageQueueConsistentHash(ring_cache_size=2)
    first = strategy.ring(CIDS)
    assert strategy.ring(list(CIDS)) is first
    strategy.ring(["a"])
    strategy.ring(["b"])
    assert strategy.ring(CIDS) is not first
    assert strategy.ring(CIDS) == first


def test_custom_hash_function_decides_placement() -> None:
    # Every key hashes to 0 except c2's nodes, which sit at 5: all queues (hash 0) go to the first point >= 0.
    def hash_function(key: str) -> int:
        return 5 if key.startswith("c2-") else 0

    strategy = create_strategy("CONSISTENT_HASH", virtual_node_count=2, hash_function=hash_function)
    # c1's and c3's points collide at 0 and the later one (c3) keeps it, as in Java's TreeMap.put.
    assert strategy.allocate("g", "c3", QUEUES, CIDS) == QUEUES
    assert strategy.allocate("g", "c1", QUEUES, CIDS) == []


@given(st.lists(st.lists(st.sampled_from([f"10.0.0.{k}@1#{k}" for k in range(8)]), min_size=1, max_size=6), max_size=5))
def test_remembered_replica_points_give_the_rings_of_a_fresh_strategy(lists: list[list[str]]) -> None:
    """One strategy through joins and leaves (replica points remembered) rings like a new one for each list."""
    kept = AllocateMessageQueueConsistentHash(virtual_node_count=4, ring_cache_size=1)
    for cids in lists:
        assert kept.ring(cids) == AllocateMessageQueueConsistentHash(virtual_node_count=4).ring(cids)
        assert kept.ring(cids) == build_ring(cids, 4, java_md5_hash)


@given(
    st.lists(
        st.tuples(st.lists(st.sampled_from([f"10.0.0.{k}@1#{k}" for k in range(6)]), max_size=5), st.integers(0, 12)),
        max_size=8,
    ),
    st.integers(1, 4),
    st.integers(0, 12),
)
def test_remembered_replica_points_equal_fresh_hashes(
    asks: list[tuple[list[str], int]], ids: int, most_replicas: int
) -> None:
    """Points asked for in any order and count (more, fewer, past a full cache, past the most remembered) are the
    IDs' own hashes, and a ring built through them is the ring built with the hash called key by key."""
    remembered = ReplicaPoints(ids, most_replicas)
    for cids, count in asks:
        assert remembered(cids, count) == [[java_md5_hash(f"{cid}-{k}") for k in range(count)] for cid in cids]
        assert build_ring(cids, count) == build_ring(cids, count, java_md5_hash)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([f"10.0.0.{k}@1#{k}" for k in range(9)]), max_size=7),
    st.lists(st.tuples(st.booleans(), st.sampled_from([f"10.0.0.{k}@1#{k}" for k in range(9)])), max_size=6),
    st.integers(1, 12),
    st.sampled_from([None, 7, 97]),
)
def test_a_ring_after_a_join_or_leave_is_the_ring_built_anew(
    start: list[str], changes: list[tuple[bool, str]], nodes: int, buckets: int | None
) -> None:
    """A ring derived from the one before a join or a leave (neighbour_ring) is the ring build_ring makes, with
    repeated IDs and with points on one hash (a hash of few values) too, where it must refuse."""
    hashing = None if buckets is None else (lambda key: java_md5_hash(key) % buckets)
    strategy = AllocateMessageQueueConsistentHash(virtual_node_count=nodes, hash_function=hashing)
    cids = list(start)
    for joins, cid in changes:
        strategy.ring(cids)  # the ring before the change is the one remembered last
        if joins:
            cids.insert(len(cids) // 2, cid)
        elif cid in cids:
            cids.remove(cid)
        assert strategy.ring(cids) == build_ring(cids, nodes, hashing or java_md5_hash)


def test_a_joiners_ring_is_derived_not_rebuilt() -> None:
    """The derivation happens (the test above would pass if it never did): a join asks for one ID's points."""
    cids = [f"10.0.0.{k}@1#{k}" for k in range(5)]
    asked: list[str] = []
    strategy = AllocateMessageQueueConsistentHash(
        virtual_node_count=3, hash_function=lambda key: asked.append(key) or java_md5_hash(key)
    )
    strategy.ring(cids)
    asked.clear()
    assert strategy.ring([*cids, "10.0.0.9@1#9"]) == build_ring([*cids, "10.0.0.9@1#9"], 3, java_md5_hash)
    assert asked == ["10.0.0.9@1#9-0", "10.0.0.9@1#9-1", "10.0.0.9@1#9-2"]


def test_repeated_client_id_continues_replica_numbering() -> None:
    seen: list[str] = []

    def recording_hash(key: str) -> int:
        seen.append(key)
        return len(seen)

    build_ring(["a", "a"], 2, recording_hash)
    assert seen == ["a-0", "a-1", "a-2", "a-3"]


def test_config_returns_its_list_and_ignores_arguments() -> None:
    strategy = create_strategy("CONFIG", message_queues=QUEUES[:2])
    assert strategy.allocate("g", None, None, None) == QUEUES[:2]
    unset = create_strategy("CONFIG")
    with pytest.raises(MessageQueuesNotSetError, match="^CONFIG has no message_queues configured"):
        unset.allocate("g", "c1", QUEUES, CIDS)
    with pytest.raises(MessageQueuesNotSetError):
        unset.plan_all("g", QUEUES, CIDS)  # type: ignore[attr-defined]


def test_checked_queue_list_is_accepted_without_rescanning() -> None:
    strategy = create_strategy("AVG")
    assert strategy.allocate("g", "c2", QueueList(QUEUES), tuple(CIDS)) == QUEUES[2:4]


def test_user_strategies_fit_the_protocol() -> None:
    class Everything:
        name = "EVERYTHING"

        def allocate(
            self, consumer_group: str, current_cid: str | None, mq_all: object, cid_all: object
        ) -> list[MessageQueue]:
            return list(QUEUES)

    assert isinstance(Everything(), AllocateMessageQueueStrategy)
    for name in STRATEGY_NAMES:
        options = {"inner": create_strategy("AVG")} if name == "MACHINE_ROOM_NEARBY" else {}
        assert isinstance(create_strategy(name, **options), AllocateMessageQueueStrategy)


def test_ring_lookup_takes_the_next_point_and_wraps_around() -> None:
    points = {"a-0": 100, "b-0": 200}
    ring = build_ring(["a", "b"], 1, points.__getitem__)
    assert ring.owner_of(100) == "a"  # a point equal to the hash owns it
    assert ring.owner_of(150) == "b"
    assert ring.owner_of(201) == "a"  # past the last point: wrap to the first
    assert build_ring([], 10, points.__getitem__).owner_of(5) is None


@given(st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=20, unique=True), st.integers(0, 12))
def test_fast_ring_build_equals_javas_walk_even_with_collisions(cids: list[str], nodes: int) -> None:
    def tiny_hash(key: str) -> int:  # 40 possible points: collisions on nearly every ring
        return java_md5_hash(key) % 40

    points = _build_ring_with_repeats(cids, nodes, tiny_hash)
    expected = sorted(points.items())
    ring = build_ring(cids, nodes, tiny_hash)
    assert list(zip(ring.points, ring.owners, strict=True)) == expected


@given(
    st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), min_size=1, max_size=8),
    st.integers(0, 6),
    st.lists(st.integers(0, 5), min_size=1, max_size=30, unique=True),
    st.data(),
)
def test_one_consumers_share_from_its_arcs_is_its_part_of_the_owners(
    cids: list[str], nodes: int, queue_ids: list[int], data: st.DataObject
) -> None:
    """``allocate`` looks a queue up among the consumer's arc ends (``arcs``), ``owners`` among every ring point;
    with a small hash (points on equal hashes, queues on points, wrapping) and repeated IDs both must agree."""

    def tiny_hash(key: str) -> int:
        return java_md5_hash(key) % 12

    strategy = AllocateMessageQueueConsistentHash(nodes, tiny_hash)
    queues = sorted(MessageQueue("T", "broker-a", q) for q in queue_ids)
    current = data.draw(st.sampled_from(cids))
    owners = strategy.owners("g", queues, cids)
    expected = [mq for mq, owner in zip(queues, owners, strict=True) if owner == current]
    assert strategy.allocate("g", current, queues, cids) == expected


@given(st.lists(st.tuples(st.lists(st.sampled_from(CIDS), max_size=4), st.booleans()), min_size=1, max_size=6))
def test_config_plans_of_member_lists_in_turn_each_give_every_member_the_configured_list(
    lists: list[tuple[list[str], bool]],
) -> None:
    """CONFIG keeps its last plan for the next plan of an equal list: lists and tuples, equal and not, in turn,
    each plan has exactly that list's members, each with the configured queues."""
    strategy = create_strategy("CONFIG", message_queues=QUEUES[:2])
    for members, as_tuple in lists:
        found = strategy.plan_all("g", QUEUES, tuple(members) if as_tuple else members)  # type: ignore[attr-defined]
        assert found == {cid: QUEUES[:2] for cid in members}
