"""A crashed consumer's queues are consumed again within seconds on a real RocketMQ, with the fence kept
(core rule L9): kill -9 of a fenced or orderly member under steady traffic, and SIGSTOP of a holder, which the
broker still lists and whose queues therefore stay fenced until it goes on.

Without the release (``--keep-dead-locks``, Java's wait) the kill tests fail: the killed member's queues wait
for the broker's 60 s lock lifetime.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from rocket_rebalance.lab.mixed_group import MixedGroup, new_topic
from rocket_rebalance.lab.rocketmq import RocketMQCluster
from rocket_rebalance.lab.wait import wait_until
from tests.rocketmq.test_handover import overlaps

pytestmark = pytest.mark.rocketmq

RECOVERY = 10.0  # the bound: the killed member's queues consumed by the others within this many seconds


def _queues_of(group: MixedGroup, client_id: str) -> set[tuple[str, int]]:
    return group.ownership()[client_id]


def _state(pid: int) -> str:
    """A process's state letter in /proc (``T``: stopped by a signal)."""
    stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    return stat[stat.rindex(")") + 2]


def _consumed_after(group: MixedGroup, queues: set[tuple[str, int]], since: float) -> set[tuple[str, int]]:
    """Which of ``queues`` some member consumed a message of that it took after ``since`` (wall clock)."""
    return {(d["broker"], d["queue"]) for d in group.deliveries() if d["t0"] > since} & queues


@pytest.mark.parametrize("orderly", [False, True], ids=["fenced", "orderly"])
def test_a_killed_members_queues_are_consumed_by_the_others_within_seconds(
    rocketmq: RocketMQCluster, tmp_path: Path, orderly: bool
) -> None:
    mode = ["--orderly"] if orderly else []
    group = MixedGroup(
        rocketmq, tmp_path, f"GID_crash_{'orderly' if orderly else 'fenced'}", new_topic(rocketmq, "Crash", 6)
    )
    try:
        for name in ("py-1", "py-2", "py-3"):
            group.python(name, "--work-ms", "5", *mode)
        with group.traffic(0.1):
            wait_until(group.settled, 60, "three members settle")
            victim = "127.0.0.1@py-2"
            orphaned = _queues_of(group, victim)
            assert orphaned
            killed_at = time.time()
            group.python_members[victim].kill()
            waited = wait_until(
                lambda: _consumed_after(group, orphaned, killed_at) == orphaned,
                RECOVERY,
                f"the killed member's queues {sorted(orphaned)} consumed again",
            )
            wait_until(group.settled, 30, "two members settle")
        wait_until(lambda: not group.missing(), 60, "every message consumed")
        assert waited < RECOVERY
        survivors = {d["client"] for d in group.deliveries() if d["t0"] > killed_at}
        assert victim not in survivors
        # Whatever was in flight at the killed member may come again (at least once); nothing is handed out by two
        # live members at once: for orderly, no two consumers work one queue at the same time.
        if orderly:
            assert overlaps([d for d in group.deliveries() if d["client"] != victim]) == []
    finally:
        group.close()


def test_a_frozen_holder_keeps_its_queues_fenced_and_goes_on(rocketmq: RocketMQCluster, tmp_path: Path) -> None:
    """SIGSTOP for 20 s: its connection stays open, the broker lists it, so nobody releases its locks or consumes
    its queues; after SIGCONT it consumes them again, and nothing was consumed twice."""
    group = MixedGroup(rocketmq, tmp_path, "GID_frozen", new_topic(rocketmq, "Frozen", 6))
    try:
        for name in ("py-1", "py-2", "py-3"):
            group.python(name, "--work-ms", "5")
        with group.traffic(0.1):
            wait_until(group.settled, 60, "three members settle")
            frozen = "127.0.0.1@py-2"
            held = _queues_of(group, frozen)
            process = group.python_members[frozen].process
            os.kill(process.pid, signal.SIGSTOP)
            try:
                # SIGSTOP lands when the kernel next schedules the process: on a busy machine it may start one
                # more delivery after kill() returned. The window opens once /proc says it is stopped, and closes
                # before SIGCONT, so every delivery inside it is someone else's.
                wait_until(lambda: _state(process.pid) == "T", 10, "the holder is stopped")
                stopped_at = time.time()
                time.sleep(20)
                resumed_at = time.time()
            finally:
                os.kill(process.pid, signal.SIGCONT)
            during = [
                d for d in group.deliveries() if stopped_at < d["t0"] < resumed_at and (d["broker"], d["queue"]) in held
            ]
            assert during == [], f"consumed while their holder was frozen: {during[:3]}"
            wait_until(lambda: _consumed_after(group, held, resumed_at) == held, 30, "the holder goes on")
            assert group.settled(), group.describe()
        wait_until(lambda: not group.missing(), 60, "every message consumed")
        # A message the frozen holder itself was consuming as it stopped may come again: if its client lock (30 s)
        # lapsed during the 20 s stop (its last renewal up to 20 s before it), it drops the queue without saving
        # its offset (core rule L2), whose commit offset is that message's. Nothing else may.
        in_flight = {
            (d["broker"], d["queue"], d["offset"])
            for d in group.deliveries()
            if d["client"] == frozen and d["t0"] < stopped_at < d["t1"]
        }
        twice = {key: count for key, count in group.counts().items() if count > 1 and key not in in_flight}
        assert twice == {}
    finally:
        group.close()
