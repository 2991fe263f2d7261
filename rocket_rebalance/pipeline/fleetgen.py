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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rocket_rebalance.model import PERM_READ, PERM_WRITE, MessageQueue, retry_topic, sort_client_ids
from rocket_rebalance.pipeline.settings import parse_strategy
from rocket_rebalance.pipeline.sides import ViewPlans, topic_queues
from rocket_rebalance.snapshot_folder import FLEET_GEN, TABLES, check_folder, claim_folder
from rocket_rebalance.strategies import java_compatible

__all__ = ["generate_fleet", "write_fleet"]

Row = dict[str, Any]

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
        shares = {cid: list(topic_queue_list) for cid in ids} if model == "BROADCASTING" else plans(members, topic)
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
    """Yield ``(table, row)`` pairs of a fleet of ``groups`` consumer groups (with ``observed`` holdings)."""
    rng = random.Random(seed)
    faults = random.Random(f"observed-{seed}")
    topic_count = max(4, groups // 2)
    topics: list[tuple[str, list[str], int]] = []
    for k in range(topic_count):
        room_topic = rng.random() < 0.1
        brokers = ROOM_BROKERS if room_topic else rng.sample(PLAIN_BROKERS, rng.choice((1, 2, 2, 3, 4)))
        queues = rng.choice((4, 8, 8, 8, 16, 16, 32))
        name = f"{'Room' if room_topic else 'Topic'}_{k:06d}"
        topics.append((name, brokers, queues))
        for broker in brokers:
            yield "routes", {"topic": name, "broker": broker, "read_queue_nums": queues, "perm": PERM_READ | PERM_WRITE}
    for g in range(groups):
        group = f"GID_{g:07d}"
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
        yield (
            "groups",
            {
                "group": group,
                "strategy": strategy,
                "message_model": model,
                "options": json.dumps(options, sort_keys=True) if options else None,
            },
        )
        subscribed = [name for name, _, _ in chosen]
        group_routes = [
            {"topic": name, "broker": broker, "read_queue_nums": queues, "perm": PERM_READ | PERM_WRITE}
            for name, brokers, queues in chosen
            for broker in brokers
        ]
        if model == "CLUSTERING":
            retry = retry_topic(group)
            subscribed.append(retry)
            for broker in chosen[0][1]:
                route = {"topic": retry, "broker": broker, "read_queue_nums": 1, "perm": PERM_READ | PERM_WRITE}
                group_routes.append(route)
                yield "routes", route
        for name in subscribed:
            yield "subscriptions", {"group": group, "topic": name}
        room_aware = strategy.startswith("MACHINE_ROOM_NEARBY")
        ids = [_client_id(rng, rng.choice(ROOMS) if room_aware else None) for _ in range(_group_size(rng))]
        stale = len(ids) > 2 and rng.random() < split_views
        old_view = ids[:-1] if stale else None
        silent: set[str] = set()
        held_rows: list[Row] = []
        reports: Row = {}
        if observed:
            options_text = json.dumps(options, sort_keys=True) if options else None
            held = _holdings(group, strategy, options_text, model, ids, group_routes)
            silent, held_rows = _observed_rows(group, ids, held, faults, fault_rate)
            configured = parse_strategy(strategy, options_text)
            language = "JAVA" if java_compatible(configured) else "PYTHON"  # Java cannot run this library's own
            reports = {"strategy": configured.name, "language": language}
        for position, cid in enumerate(ids):
            view = old_view if stale and position < len(ids) // 2 else None
            member: Row = {"group": group, "client_id": cid, "view": view}
            if observed:
                member.update(reports, reported=cid not in silent)
            yield "members", member
        for row in held_rows:
            yield "observed", row
        if model == "CLUSTERING":
            for name, brokers, queues in chosen:
                for broker in brokers:
                    for q in range(queues):
                        top = rng.randrange(1_000, 50_000_000)
                        lag = int(rng.expovariate(1 / 200)) if rng.random() < 0.7 else 0
                        committed = max(0, top - lag)
                        in_flight = None if rng.random() < 0.3 else min(top, committed + rng.randrange(0, 64))
                        yield (
                            "offsets",
                            {
                                "group": group,
                                "topic": name,
                                "broker": broker,
                                "queue_id": q,
                                "max_offset": top,
                                "committed_offset": committed,
                                "in_flight_offset": in_flight,
                            },
                        )


def write_fleet(
    out: Path,
    groups: int,
    seed: int = 1,
    split_views: float = 0.02,
    fmt: str = "parquet",
    chunk: int = 200_000,
    observed: bool = False,
) -> dict[str, int]:
    """Write the fleet as ``<table>.parquet`` files (or ``.jsonl``) in ``out``; returns the row count per table.

    ``out`` must be new, empty or an earlier output of this function, whose tables (in either format) are replaced.
    ``observed`` adds what each consumer reports holding (see :func:`generate_fleet`).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rocket_rebalance.pipeline.schema import INPUT_TABLES

    types = {
        "string": pa.string(),
        "int": pa.int32(),
        "bigint": pa.int64(),
        "boolean": pa.bool_(),
        "array<string>": pa.list_(pa.string()),
    }
    written = [name for name in TABLES if name != "rejected" and (observed or name != "observed")]
    buffers: dict[str, list[Row]] = {name: [] for name in written}
    counts = dict.fromkeys(written, 0)
    writers: dict[str, Any] = {}
    schemas = {
        name: pa.schema([pa.field(c.name, types[c.spark_type]) for c in INPUT_TABLES[name].columns]) for name in written
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
    try:
        for table, row in generate_fleet(groups, seed, split_views, observed=observed):
            buffers[table].append(row)
            if len(buffers[table]) >= chunk:
                flush(table)
        for name in written:
            if buffers[name] or counts[name] == 0:  # an empty table is still written
                flush(name)
    finally:
        for writer in writers.values():
            writer.close()
    return counts
