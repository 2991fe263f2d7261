"""The collector's reads, against a scripted cluster (no network): a group with no online consumer is recorded with
its lag and does not make the snapshot partial, and a group is read a second time, a settle interval later, only
when its first read shows something to confirm (an ownership problem, a stopped group's backlog)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import rocket_rebalance.admin.snapshot as collector
from rocket_rebalance.model import MessageQueue
from rocket_rebalance.route import QueueData, TopicRoute
from rocket_rebalance.runtime.transport import ConnectionRow, ConsumerReport, ProgressRow, TransportError

A, B = "10.0.0.1@1", "10.0.0.2@2"
TOPIC = "T"
QUEUES = [MessageQueue(TOPIC, "broker-a", q) for q in range(4)]
AVG = {A: frozenset(QUEUES[:2]), B: frozenset(QUEUES[2:])}  # AVG: the first in Java order takes the first half


@dataclass
class Read:
    """What one read of a group answers: who is connected and holds what (nobody: a stopped group), and its lag."""

    holding: dict[str, frozenset[MessageQueue]] = field(default_factory=dict)
    lag: int = 0


@dataclass
class ScriptedCluster:
    """The admin calls the collector makes, each group answering its ``reads`` in turn (the last one repeated)."""

    reads: dict[str, list[Read]]
    asked: dict[tuple[str, ...], int] = field(default_factory=dict)

    def _read(self, *call: str) -> Read:
        """The read this call belongs to: each kind of call (a group's connections, one member's report, the
        group's consume stats) is counted on its own, as the collector makes each once per read."""
        seen = self.asked.get(call, 0)
        self.asked[call] = seen + 1
        reads = self.reads[call[1]]
        return reads[min(seen, len(reads) - 1)]

    def topics(self) -> list[str]:
        return [TOPIC]

    def consumer_groups(self) -> list[str]:
        return sorted(self.reads)

    def consumer_connections(self, group: str) -> list[ConnectionRow]:
        read = self._read("connections", group)
        if not read.holding:
            raise TransportError(f"the consumer group {group} not online", "NOT_FOUND")
        return [ConnectionRow(cid, "broker-a", True, 0, (TOPIC,)) for cid in read.holding]

    def consumer_report(self, group: str, client_id: str) -> ConsumerReport:
        holding = self._read("report", group, client_id).holding[client_id]
        return ConsumerReport(client_id, holding, {"allocateMessageQueueStrategy": "AVG"})

    def route(self, topic: str) -> TopicRoute:
        return TopicRoute(topic, (QueueData("broker-a", 4, 4),))

    def consumer_progress(self, group: str, topic: str = "", owners: bool = True) -> list[ProgressRow]:
        lag = self._read("progress", group).lag
        return [ProgressRow(QUEUES[0], 100 + lag, 100, lag, "", "")] + [
            ProgressRow(mq, 100, 100, 0, "", "") for mq in QUEUES[1:]
        ]

    def close(self) -> None:
        pass


def snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reads: dict[str, list[Read]], settle: float = 0.2
) -> tuple[collector.SnapshotResult, dict[str, Any], list[list[str]]]:
    cluster = ScriptedCluster(reads)
    monkeypatch.setattr(collector, "open_transport", lambda *args, **kwargs: cluster)
    announced: list[list[str]] = []
    result = collector.take_snapshot(
        "127.0.0.1:9876", tmp_path / "snap", settle=settle, rereading=lambda groups, seconds: announced.append(groups)
    )
    marker = json.loads((tmp_path / "snap" / "_snapshot.json").read_text(encoding="utf-8"))
    return result, marker, announced


def rows(tmp_path: Path, table: str) -> list[dict[str, Any]]:
    text = (tmp_path / "snap" / f"{table}.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def test_a_stopped_group_is_recorded_with_its_lag_and_the_snapshot_stays_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, marker, announced = snapshot(
        tmp_path, monkeypatch, {"G_idle": [Read()], "G_left": [Read(lag=7)], "G_ok": [Read(AVG)]}
    )
    assert result.partial is False and marker["partial"] is False and rows(tmp_path, "rejected") == []
    assert marker["groups_stopped"] == 2 and result.groups == 3
    assert rows(tmp_path, "stopped") == [
        {"group": "G_idle", "topic": TOPIC, "lag": 0, "later_lag": None},
        {"group": "G_left", "topic": TOPIC, "lag": 7, "later_lag": 7},  # read again: it has a backlog
    ]
    assert announced == [["G_left"]]  # the healthy group and the one without lag are read once
    assert marker["settle"] == {"seconds": 0.2, "held": [], "moving": [], "settled": []}


def test_a_backlog_that_grows_is_read_as_grown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    snapshot(tmp_path, monkeypatch, {"G_left": [Read(lag=7), Read(lag=9)]})
    assert rows(tmp_path, "stopped") == [{"group": "G_left", "topic": TOPIC, "lag": 7, "later_lag": 9}]


def test_an_ownership_problem_is_read_again_and_judged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    swapped = {A: AVG[B], B: AVG[A]}  # each holds the other's share: a problem the strategy shows
    twice = {A: frozenset(QUEUES), B: AVG[B]}
    reads = {
        "G_held": [Read(swapped), Read(swapped)],
        "G_moving": [Read(swapped), Read(twice)],
        "G_settled": [Read(swapped), Read(AVG)],
        "G_ok": [Read(AVG)],
    }
    _, marker, announced = snapshot(tmp_path, monkeypatch, reads)
    assert announced == [["G_held", "G_moving", "G_settled"]]
    assert marker["settle"] == {"seconds": 0.2, "held": ["G_held"], "moving": ["G_moving"], "settled": ["G_settled"]}
    observed = {(r["group"], r["client_id"], r["queue_id"]) for r in rows(tmp_path, "observed")}
    assert ("G_moving", A, 3) in observed and ("G_settled", A, 3) not in observed  # the second read is written
    assert len([r for r in rows(tmp_path, "members") if r["group"] == "G_held"]) == 2  # once, not per read


def test_with_settle_0_nothing_is_read_twice_and_the_marker_claims_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    swapped = {A: AVG[B], B: AVG[A]}
    _, marker, announced = snapshot(tmp_path, monkeypatch, {"G": [Read(swapped)], "G_left": [Read(lag=3)]}, 0)
    assert announced == [] and marker["settle"] is None
    assert rows(tmp_path, "stopped") == [{"group": "G_left", "topic": TOPIC, "lag": 3, "later_lag": None}]


@pytest.mark.parametrize("settle", [-1.0, collector.MAX_SETTLE + 1, float("nan")])
def test_a_settle_out_of_range_is_refused_before_reading(tmp_path: Path, settle: float) -> None:
    with pytest.raises(ValueError, match="--settle"):
        collector.take_snapshot("127.0.0.1:9876", tmp_path / "snap", settle=settle)
