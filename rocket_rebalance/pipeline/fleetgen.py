"""A realistic synthetic fleet snapshot for tests and benchmarks (``rocket-rebalance fleet-gen``).

Realistic means what makes the analysis interesting: group sizes skewed (most groups have a handful of consumers,
a few have hundreds), several topics per group plus the retry topic ``%RETRY%<group>`` of clustering groups (one
queue per broker, as brokers create it), client IDs in the Java client's shapes (``ip@pid#nanotime``, some with a
unit name), a mix of strategies (this library's own CONSISTENT_HASH_BOUNDED and CROSS_TOPIC in about 3% of the
groups each) and message models, brokers in machine rooms for the room-aware strategies, lag on the offsets, and a
few split views (a consumer that has not yet seen the newest member). Deterministic for a seed; plain Python and
pyarrow, no Spark.

With ``observed``, every consumer also reports what it holds (the ``observed`` table, and ``reported``, ``strategy``
and ``language`` on ``members``), as a live-cluster collector would record it: exactly the plan on the true member
list, except in about one group in twenty, which gets one planted fault (a queue moved to another consumer, a queue
dropped, a queue held twice, or a consumer whose running info was not read). The faults draw from their own random
stream, so a seed gives the same fleet with or without them.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocket_rebalance.model import PERM_READ, PERM_WRITE, MessageQueue, retry_topic, sort_client_ids
from rocket_rebalance.pipeline.settings import parse_strategy
from rocket_rebalance.pipeline.sides import ViewPlans, topic_queues
from rocket_rebalance.snapshot_folder import FLEET_GEN, TABLES, check_folder, claim_folder
from rocket_rebalance.strategies import java_compatible

__all__ = ["generate_fleet", "write_fleet"]

Row = dict[str, Any]
Topic = tuple[str, list[str], int]
"""A topic of the fleet: its name, its brokers and its queues per broker."""

PLAIN_BROKERS = [f"broker-{chr(ord('a') + k)}" for k in range(6)]
ROOM_BROKERS = ["hz@broker-r1", "hz@broker-r2", "sh@broker-r3", "sh@broker-r4"]
ROOMS = ["hz", "sh"]


def _client_id(rng: random.Random, room: str | None) -> str:
    ip = f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
    instance = f"{rng.randrange(1000, 65000)}#{rng.randrange(10**15, 10**16)}"
    if room is not None:
        return f"{room}@{ip}@{instance}"
    if rng.random() < 0.05:
        return f"{ip}@{instance}@unit{rng.randrange(4)}"
    return f"{ip}@{instance}"


def _group_size(rng: random.Random) -> int:
    """Skewed: median about 4, mean about 10, a long tail up to a few hundred consumers."""
    return max(1, min(400, int(rng.paretovariate(1.3) * 2.5)))


FAULTS = ("move", "drop", "duplicate", "unreported")
"""The faults ``observed`` plants, one per faulty group."""


def _holdings(
    group: str, strategy: str, options: str | None, model: str, ids: list[str], routes: list[Row]
) -> dict[str, list[MessageQueue]]:
    """What each consumer holds when all is well: the group's plan on its true member list, over every topic
    (planned as the analysis plans it, all topics together for a strategy that spans them)."""
    held: dict[str, list[MessageQueue]] = {cid: [] for cid in ids}
    by_topic: dict[str, list[Row]] = {}
    for route in routes:
        by_topic.setdefault(route["topic"], []).append(route)
    queues = {topic: topic_queues(topic, rows) for topic, rows in by_topic.items()}
    plans = ViewPlans(parse_strategy(strategy, options), group, queues)
    members = tuple(sort_client_ids(ids))
    for topic, topic_queue_list in queues.items():
        # a strategy's refusal plans to nobody (the analysis reports it): nobody holds anything of the topic
        shares = (
            {cid: list(topic_queue_list) for cid in ids} if model == "BROADCASTING" else plans(members, topic).shares
        )
        for cid, share in shares.items():
            held[cid].extend(share)
    return held


def _observed_rows(
    group: str, ids: list[str], held: dict[str, list[MessageQueue]], faults: random.Random, fault_rate: float
) -> tuple[set[str], list[Row]]:
    """The ``observed`` rows of one group, maybe with one planted fault; returns the consumers that did not report."""
    silent: set[str] = set()
    holdings = {cid: list(share) for cid, share in held.items()}
    holding = [cid for cid in ids if holdings[cid]]
    if holding and faults.random() < fault_rate:
        fault = faults.choice(FAULTS)
        victim = faults.choice(holding)
        mq = faults.choice(holdings[victim])
        other = faults.choice([cid for cid in ids if cid != victim] or [victim])
        if fault == "unreported":
            silent.add(victim)
            holdings[victim] = []
        elif fault == "drop" or (fault == "move" and other != victim):
            holdings[victim].remove(mq)
        if fault in ("move", "duplicate") and other != victim and mq not in holdings[other]:
            holdings[other].append(mq)
    rows = [
        {"group": group, "client_id": cid, "topic": mq.topic, "broker": mq.broker_name, "queue_id": mq.queue_id}
        for cid in dict.fromkeys(ids)
        for mq in holdings[cid]
    ]
    return silent, rows


def generate_fleet(
    groups: int,
    seed: int = 1,
    split_views: float = 0.02,
    topics_per_group: int = 3,
    observed: bool = False,
    fault_rate: float = 0.05,
) -> Iterator[tuple[str, Row]]:
    """Yield ``(table, row)`` pairs of a fleet of ``groups`` consumer groups (with ``observed`` holdings).

    A seed gives the same fleet because every draw comes from one random stream in a fixed order: the topics first,
    then group by group its settings, its members and its offsets. The helpers below are those steps; keep their
    draws in this order (planted faults draw from a stream of their own)."""
    rng = random.Random(seed)
    faults = random.Random(f"observed-{seed}")
    topics = _topics(rng, max(4, groups // 2))
    for name, brokers, queues in topics:
        for broker in brokers:
            yield "routes", _route(name, broker, queues)
    for g in range(groups):
        group = _settings(rng, f"GID_{g:07d}", topics, topics_per_group)
        yield "groups", group.row()
        for route in group.retry_routes():
            yield "routes", route
        for name in group.subscribed():
            yield "subscriptions", {"group": group.name, "topic": name}
        members, held_rows = _members(rng, faults, group, split_views, fault_rate if observed else None)
        for member in members:
            yield "members", member
        for row in held_rows:
            yield "observed", row
        for row in _offsets(rng, group):
            yield "offsets", row


def _route(topic: str, broker: str, queues: int) -> Row:
    return {"topic": topic, "broker": broker, "read_queue_nums": queues, "perm": PERM_READ | PERM_WRITE}


def _topics(rng: random.Random, count: int) -> list[Topic]:
    """The fleet's topics: one in ten on the brokers of the machine rooms, the others on one to four plain brokers."""
    topics: list[Topic] = []
    for k in range(count):
        room_topic = rng.random() < 0.1
        brokers = ROOM_BROKERS if room_topic else rng.sample(PLAIN_BROKERS, rng.choice((1, 2, 2, 3, 4)))
        queues = rng.choice((4, 8, 8, 8, 16, 16, 32))
        topics.append((f"{'Room' if room_topic else 'Topic'}_{k:06d}", brokers, queues))
    return topics


@dataclass(frozen=True)
class _Group:
    """One group's settings: its name, message model, strategy and options, and the topics it subscribes to."""

    name: str
    model: str
    strategy: str
    options: dict[str, Any] | None
    chosen: list[Topic]

    @property
    def options_text(self) -> str | None:
        return json.dumps(self.options, sort_keys=True) if self.options else None

    def row(self) -> Row:
        return {
            "group": self.name,
            "strategy": self.strategy,
            "message_model": self.model,
            "options": self.options_text,
        }

    def retry_routes(self) -> list[Row]:
        """A clustering group's retry topic: one queue on each broker of its first topic, as brokers create it."""
        if self.model != "CLUSTERING":
            return []
        return [_route(retry_topic(self.name), broker, 1) for broker in self.chosen[0][1]]

    def subscribed(self) -> list[str]:
        return [name for name, _, _ in self.chosen] + ([retry_topic(self.name)] if self.model == "CLUSTERING" else [])

    def routes(self) -> list[Row]:
        """The routes of every subscribed topic, the retry topic's included."""
        chosen = [_route(name, broker, queues) for name, brokers, queues in self.chosen for broker in brokers]
        return chosen + self.retry_routes()


def _settings(rng: random.Random, group: str, topics: list[Topic], topics_per_group: int) -> _Group:
    """A group's message model (3% broadcasting), topics and strategy: mostly AVG, the room-aware strategies for
    groups on the machine rooms' brokers, and every other strategy in a few percent of the groups."""
    draw = rng.random()
    model = "BROADCASTING" if draw < 0.03 else "CLUSTERING"
    options: dict[str, Any] | None = None
    strategy = "AVG"
    chosen = rng.sample(topics, min(len(topics), rng.randint(1, topics_per_group)))
    rooms_used = any("@" in b for _, brokers, _ in chosen for b in brokers)
    pick = rng.random()
    if rooms_used and pick < 0.5:
        strategy, options = (
            ("MACHINE_ROOM", {"consumer_idcs": ["hz"]})
            if pick < 0.2
            else (
                "MACHINE_ROOM_NEARBY",
                {"inner": "AVG"},
            )
        )
    elif pick < 0.12:
        strategy = "AVG_BY_CIRCLE"
    elif pick < 0.24:
        strategy, options = "CONSISTENT_HASH", {"virtual_node_count": rng.choice((5, 10, 10, 20))}
    elif pick < 0.26:
        name, brokers, _ = chosen[0]
        options = {"message_queues": [{"topic": name, "brokerName": brokers[0], "queueId": q} for q in range(2)]}
        strategy = "CONFIG"
    # this library's own strategies; their options come from the same draw, so the random stream (and so every
    # other group of a seed) stays what it was before they were added
    elif pick < 0.29:
        strategy, options = "CONSISTENT_HASH_BOUNDED", ({"eps": 0} if pick < 0.275 else None)
    elif pick < 0.32:
        strategy, options = "CROSS_TOPIC", ({"inner": "CONSISTENT_HASH_BOUNDED"} if pick < 0.305 else None)
    return _Group(group, model, strategy, options, chosen)


def _members(
    rng: random.Random, faults: random.Random, group: _Group, split_views: float, fault_rate: float | None
) -> tuple[list[Row], list[Row]]:
    """The group's ``members`` rows, a few with a stale view (the first half has not seen the newest member), and
    with ``fault_rate`` (observed holdings asked for) what each reports and holds: its ``observed`` rows."""
    room_aware = group.strategy.startswith("MACHINE_ROOM_NEARBY")
    ids = [_client_id(rng, rng.choice(ROOMS) if room_aware else None) for _ in range(_group_size(rng))]
    stale = len(ids) > 2 and rng.random() < split_views
    old_view = ids[:-1] if stale else None
    silent: set[str] = set()
    held_rows: list[Row] = []
    reports: Row = {}
    if fault_rate is not None:
        held = _holdings(group.name, group.strategy, group.options_text, group.model, ids, group.routes())
        silent, held_rows = _observed_rows(group.name, ids, held, faults, fault_rate)
        configured = parse_strategy(group.strategy, group.options_text)
        language = "JAVA" if java_compatible(configured) else "PYTHON"  # Java cannot run this library's own
        reports = {"strategy": configured.name, "language": language}
    members: list[Row] = []
    for position, cid in enumerate(ids):
        view = old_view if stale and position < len(ids) // 2 else None
        member: Row = {"group": group.name, "client_id": cid, "view": view}
        if fault_rate is not None:
            member.update(reports, reported=cid not in silent)
        members.append(member)
    return members, held_rows


def _offsets(rng: random.Random, group: _Group) -> Iterator[Row]:
    """A clustering group's offsets on its topics (not the retry topic): lag on most queues, an in-flight offset on
    many (a broadcasting group's offsets are its consumers' own, which brokers do not hold)."""
    if group.model != "CLUSTERING":
        return
    for name, brokers, queues in group.chosen:
        for broker in brokers:
            for q in range(queues):
                top = rng.randrange(1_000, 50_000_000)
                lag = int(rng.expovariate(1 / 200)) if rng.random() < 0.7 else 0
                committed = max(0, top - lag)
                in_flight = None if rng.random() < 0.3 else min(top, committed + rng.randrange(0, 64))
                yield {
                    "group": group.name,
                    "topic": name,
                    "broker": broker,
                    "queue_id": q,
                    "max_offset": top,
                    "committed_offset": committed,
                    "in_flight_offset": in_flight,
                }


def write_fleet(
    out: Path,
    groups: int,
    seed: int = 1,
    split_views: float = 0.02,
    fmt: str = "parquet",
    chunk: int = 200_000,
    observed: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, int]:
    """Write the fleet as ``<table>.parquet`` files (or ``.jsonl``) in ``out``; returns the row count per table.

    ``out`` must be new, empty or an earlier output of this function, whose tables (in either format) are replaced.
    ``observed`` adds what each consumer reports holding (see :func:`generate_fleet`). ``progress(done, groups)``
    is called as each group is complete and once the tables are closed (20,000 groups take half a minute).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rocket_rebalance.pipeline.schema import ARROW_TYPES, INPUT_TABLES

    written = [name for name in TABLES if name != "rejected" and (observed or name != "observed")]
    buffers: dict[str, list[Row]] = {name: [] for name in written}
    counts = dict.fromkeys(written, 0)
    writers: dict[str, Any] = {}
    schemas = {
        name: pa.schema([pa.field(c.name, ARROW_TYPES[c.spark_type]) for c in INPUT_TABLES[name].columns])
        for name in written
    }

    def flush(name: str) -> None:
        rows = buffers[name]
        if fmt == "jsonl":
            with (out / f"{name}.jsonl").open("a", encoding="utf-8") as handle:
                handle.writelines(json.dumps(row) + "\n" for row in rows)
        else:
            if name not in writers:
                writers[name] = pq.ParquetWriter(out / f"{name}.parquet", schemas[name])
            writers[name].write_table(pa.Table.from_pylist(rows, schema=schemas[name]))
        counts[name] += len(rows)
        rows.clear()

    if fmt not in ("parquet", "jsonl"):
        raise ValueError(f"format must be parquet or jsonl, got {fmt!r}")
    # a folder fleet-gen did not write (a real snapshot, say) is refused instead of overwritten
    claim_folder(out, FLEET_GEN, check_folder(out, FLEET_GEN), {"files": [f"{name}.{fmt}" for name in written]})
    begun = 0  # groups whose rows have started: a group's first row is its ``groups`` row
    try:
        for table, row in generate_fleet(groups, seed, split_views, observed=observed):
            if table == "groups":
                if progress is not None:
                    progress(begun, groups)  # the groups before this one are written
                begun += 1
            buffers[table].append(row)
            if len(buffers[table]) >= chunk:
                flush(table)
        for name in written:
            if buffers[name] or counts[name] == 0:  # an empty table is still written
                flush(name)
    finally:
        for writer in writers.values():
            writer.close()
    if progress is not None:
        progress(groups, groups)
    return counts
