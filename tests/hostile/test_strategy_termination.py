"""Every strategy that takes a hash function ends on every input, whatever the hash does.

Probe 2026-11-24 section 2: when two replica keys hash to one ring point the later put wins, so a consumer can hold
no point at all (two client IDs whose MD5 prefixes collide, with one virtual node; or a user's hash function that
maps many keys to one value). CONSISTENT_HASH_BOUNDED's walk then skipped full consumers forever, looking for one
with room that was not on the ring. Here hash functions with forced collisions meet every strategy that accepts
one; each must return a plan in which every queue has exactly one owner (and, bounded, nobody above the cap).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from rocket_rebalance.model import MessageQueue, java_md5_hash
from rocket_rebalance.plan import plan
from rocket_rebalance.strategies import AllocateMessageQueueStrategy, create_strategy
from rocket_rebalance.testing import (
    RebalanceCase,
    check_bounded_load,
    check_full_coverage,
    check_no_double_owner,
    rebalance_inputs,
)
from tests.hostile.cli import run_cli

# Two client IDs whose "<id>-0" replica keys have the same 32-bit MD5 ring point (found by the probe).
COLLIDING_IDS = ("10.0.41.238@10734", "10.0.66.194@17090")


def few_values(values: int) -> Callable[[str], int]:
    """A stable hash onto ``values`` points only, so most ring points and queue keys collide."""
    return lambda key: int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big") % values


def hash_strategies(hash_function: Callable[[str], int], nodes: int, eps: float) -> list[AllocateMessageQueueStrategy]:
    """Every strategy that can be given a hash function, directly or through its inner strategy."""
    bounded = create_strategy("CONSISTENT_HASH_BOUNDED", eps=eps, virtual_node_count=nodes, hash_function=hash_function)
    plain = create_strategy("CONSISTENT_HASH", virtual_node_count=nodes, hash_function=hash_function)
    return [
        plain,
        bounded,
        create_strategy("CROSS_TOPIC", inner=bounded),
        create_strategy("MACHINE_ROOM_NEARBY", inner=plain),
        create_strategy("MACHINE_ROOM_NEARBY", inner=bounded),
    ]


def test_the_probes_colliding_ids_really_collide_on_one_virtual_node() -> None:
    first, second = (java_md5_hash(f"{cid}-0") for cid in COLLIDING_IDS)
    assert first == second


def test_bounded_hash_with_a_consumer_missing_from_the_ring_gives_every_queue_an_owner() -> None:
    queues = [MessageQueue("TopicTest", "broker-a", q) for q in range(4)]
    for eps in (0.0, 0.25):
        strategy = create_strategy("CONSISTENT_HASH_BOUNDED", eps=eps, virtual_node_count=1)
        shares = plan(strategy, "G", queues, list(COLLIDING_IDS))
        check_full_coverage(shares, queues)
        check_no_double_owner(shares)
        check_bounded_load(strategy, shares)
        assert all(shares[cid] for cid in COLLIDING_IDS), shares  # the consumer off the ring still gets its share


def test_allocate_mq_with_the_colliding_ids_answers(tmp_path: Path) -> None:
    route = tmp_path / "route.json"
    route.write_text(
        json.dumps({"queueDatas": [{"brokerName": "broker-a", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}]})
    )
    done = run_cli(
        "allocate-mq", "-t", "TopicTest", "-i", ",".join(COLLIDING_IDS), "--route", route,
        "--strategy", "CONSISTENT_HASH_BOUNDED", "--virtual-nodes", "1", "--eps", "0",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    owned = json.loads(done.stdout)["result"]
    assert sorted(len(queues) for queues in owned.values()) == [2, 2], owned


def test_a_constant_hash_function_still_gives_every_queue_one_owner() -> None:
    queues = [MessageQueue("T", "broker-a", q) for q in range(7)]
    cids = ["c1", "c2", "c3"]
    for strategy in hash_strategies(lambda key: 7, nodes=3, eps=0.0):
        shares = plan(strategy, "G", queues, cids)
        check_full_coverage(shares, queues)
        check_no_double_owner(shares)


@given(
    rebalance_inputs(max_queues=24, max_consumers=6),
    st.integers(1, 4),
    st.integers(1, 4),
    st.sampled_from([0.0, 0.25, 1.0]),
)
def test_every_hash_strategy_ends_with_one_owner_per_queue_under_collisions(
    case: RebalanceCase, values: int, nodes: int, eps: float
) -> None:
    for strategy in hash_strategies(few_values(values), nodes, eps):
        shares = plan(strategy, "G", case.mq_all, case.cid_all)
        check_no_double_owner(shares)
        check_full_coverage(shares, case.mq_all)
        if strategy.name == "CONSISTENT_HASH_BOUNDED":
            check_bounded_load(strategy, shares)
