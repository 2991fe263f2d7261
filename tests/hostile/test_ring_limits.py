"""Sizes that are each within their limit must not multiply into gigabytes (probe 2026-11-24 sections 10 and 19).

A consistent-hash ring holds members x virtual nodes points: 7,000 IDs (below the 10,000-member limit) times
10,000 virtual nodes (the per-consumer limit) is 70 million keys and a MemoryError. The ring's own limit refuses
it up front with one line naming both numbers, in the API and in the commands that build rings.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocket_rebalance.model import MessageQueue
from rocket_rebalance.plan import plan
from rocket_rebalance.strategies import AllocationError, create_strategy
from rocket_rebalance.strategies.consistent_hash import MAX_RING_POINTS
from tests.hostile.cli import one_line_error, run_cli

PROBE_IDS = [f"10.{i // 256 % 256}.{i % 256}.1@{i}" for i in range(7000)]
QUEUES = [MessageQueue("TopicTest", "broker-a", q) for q in range(8)]


@pytest.mark.parametrize("name", ["CONSISTENT_HASH", "CONSISTENT_HASH_BOUNDED"])
def test_the_probes_ring_is_refused_naming_both_numbers(name: str) -> None:
    strategy = create_strategy(name, virtual_node_count=10_000)
    with pytest.raises(AllocationError, match=f"7000 consumers x 10000 virtual nodes.*limit is {MAX_RING_POINTS}"):
        plan(strategy, "G", QUEUES, PROBE_IDS)


def test_one_point_over_the_limit_is_refused_and_the_limit_itself_is_built() -> None:
    nodes = 1000
    members = [f"c{i}" for i in range(MAX_RING_POINTS // nodes)]
    strategy = create_strategy("CONSISTENT_HASH", virtual_node_count=nodes)
    assert sum(len(share) for share in plan(strategy, "G", QUEUES, members).values()) == len(QUEUES)
    with pytest.raises(AllocationError, match=f"limit is {MAX_RING_POINTS}"):
        strategy.allocate("G", "c0", QUEUES, [*members, "one-more"])


def test_the_limit_comfortably_exceeds_real_groups() -> None:
    """10,000 consumers (the group limit) at CONSISTENT_HASH_BOUNDED's default 40 points, with room to spare."""
    assert MAX_RING_POINTS >= 10_000 * 100


@pytest.fixture
def route(tmp_path: Path) -> Path:
    path = tmp_path / "route.json"
    path.write_text(json.dumps({"queueDatas": [{"brokerName": "broker-a", "readQueueNums": 8, "perm": 6}]}))
    return path


@pytest.mark.parametrize("name", ["CONSISTENT_HASH", "CONSISTENT_HASH_BOUNDED"])
def test_allocate_mq_refuses_the_probes_ring_in_one_line(route: Path, name: str) -> None:
    done = run_cli(
        "allocate-mq", "-t", "TopicTest", "--route", route, "-i", ",".join(PROBE_IDS),
        "--strategy", name, "--virtual-nodes", "10000",
    )  # fmt: skip
    one_line_error(done, "7000 consumers", "10000 virtual nodes", f"limit is {MAX_RING_POINTS}")


def test_simulate_refuses_the_probes_ring_in_one_line(route: Path, tmp_path: Path) -> None:
    members = tmp_path / "members.txt"
    members.write_text("\n".join(PROBE_IDS))
    done = run_cli(
        "simulate", "-t", "TopicTest", "--route", route, "--members", members, "--join", "new@1",
        "--strategy", "CONSISTENT_HASH", "--virtual-nodes", "10000",
    )  # fmt: skip
    one_line_error(done, "consumers x 10000 virtual nodes", f"limit is {MAX_RING_POINTS}")
