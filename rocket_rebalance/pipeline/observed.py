"""What consumers report holding (their process-queue tables, from GET_CONSUMER_RUNNING_INFO) against the plan.

A live cluster is not the plan: a consumer may run another strategy, share its client ID with another process,
hash differently (another client language), or simply be mid-rebalance. These checks say what the snapshot shows,
as ``violations`` rows with ``side = "observed"``, for the current (``before``) side only:

* ``double_owned``: a queue held by two or more consumer processes;
* ``unowned``: a queue of a subscribed topic nobody holds; claimed only when every member reported, since a
  consumer whose running info was not read may hold it. Otherwise each such consumer gets an ``unreported`` row;
* ``observed_mismatch``: a reporting consumer whose queues of a topic differ from what the group's strategy
  computes for it on the true member list (with the likely cause), or a held queue outside the group's routes.

Observed rows of consumers that did not report are still facts (they hold those queues), so they count for
``double_owned`` and for queues outside the route, but such a consumer's holding is not compared with its share.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from rocket_rebalance.model import MessageQueue, java_string_key, sort_client_ids
from rocket_rebalance.pipeline.rows import Tables, ViolationRow
from rocket_rebalance.pipeline.settings import BROADCASTING
from rocket_rebalance.pipeline.sides import Data, Side

__all__ = ["OBSERVED", "OUTSIDE_ROUTE", "OWNERSHIP_KINDS", "check_observed"]

OBSERVED = "observed"
"""The ``side`` of observed violations."""

OUTSIDE_ROUTE = "holds a queue outside the route"

OWNERSHIP_KINDS = frozenset({"double_owned", "unowned", "observed_mismatch"})
"""The observed kinds about who holds what, which every rebalance passes through for a moment (a queue given up
before its next owner takes it, or taken before it is given up): an audit claims them only as they held across
the collector's two reads (:func:`rocket_rebalance.pipeline.audit.judged`). ``unreported`` is about a read."""


def _row(**columns: Any) -> ViolationRow:
    return ViolationRow(side=OBSERVED, **columns)


def _unread_reasons(data: Data) -> dict[str, str]:
    """Why the collector could not read a consumer's running info (its ``rejected.jsonl``), per client ID."""
    reasons: dict[str, set[str]] = defaultdict(set)
    for row in data.get("unread") or ():
        if row.get("reason"):
            reasons[row["client_id"]].add(row["reason"])
    return {cid: "; ".join(sorted(found)) for cid, found in reasons.items()}


def _cause(side: Side, member: Mapping[str, Any], copies: int, languages: set[str]) -> str:
    """The likeliest reason a consumer holds something else than its share, from what it reported."""
    reported = member.get("strategy")
    if reported and reported != side.label:
        return f"reports strategy {reported}, the group uses {side.label}"
    if copies > 1:
        return f"client ID shared by {copies} processes"
    if len(languages) > 1:
        return f"language {member.get('language') or 'unknown'} in a group of {', '.join(sorted(languages))} consumers"
    return "stale member view or mid-rebalance"


def check_observed(side: Side, data: Data | None, out: Tables) -> int | None:
    """Append the observed violations of the current side; returns how many, or ``None`` when the snapshot holds
    no observed data (no ``observed`` table): nothing is claimed then."""
    if data is None or data.get("observed") is None or not side.ok:
        return None
    copies = Counter(side.members)
    by_id: dict[str, Mapping[str, Any]] = {}
    silent: set[str] = set()
    for member in data.get("members") or ():
        cid = member["client_id"]
        by_id.setdefault(cid, member)
        if not member.get("reported"):
            silent.add(cid)  # two processes sharing an ID: reported only if every one of them did
    reporting = [cid for cid in sort_client_ids(copies) if cid not in silent]
    routes = {topic: set(data_in.mq_all) for topic, data_in in side.inputs.items()}
    holding: dict[tuple[str, str], set[MessageQueue]] = defaultdict(set)  # (client ID, topic) -> queues in route
    holders: dict[MessageQueue, list[str]] = defaultdict(list)
    rows: list[ViolationRow] = []
    seen: set[tuple[str, str, str, int]] = set()
    for held in data["observed"]:
        key = (held["client_id"], held["topic"], held["broker"], held["queue_id"])
        if key in seen or key[0] not in copies:  # consumers gone from members were rejected before the analysis
            continue
        seen.add(key)
        cid, topic, broker, queue_id = key
        mq = MessageQueue(topic, broker, queue_id)
        if mq not in routes.get(topic, ()):
            rows.append(
                _row(topic=topic, broker=broker, queue_id=queue_id, kind="observed_mismatch", owners=[cid],
                     client_id=cid, reason=OUTSIDE_ROUTE)
            )  # fmt: skip
            continue
        holding[(cid, topic)].add(mq)
        holders[mq].extend([cid] * copies[cid])
    if side.model != BROADCASTING:  # there every consumer reads every queue by design
        for mq, owners in holders.items():
            if len(owners) > 1:
                names = sort_client_ids(owners)
                rows.append(
                    _row(topic=mq.topic, broker=mq.broker_name, queue_id=mq.queue_id, kind="double_owned",
                         owners=names, client_id=None, reason=f"held by {len(names)} consumers: {', '.join(names)}")
                )  # fmt: skip
    if silent:
        unread = _unread_reasons(data)
        for cid in sort_client_ids(silent & set(copies)):
            why = f"running info not read: {unread[cid]}" if cid in unread else "running info not read"
            rows.append(
                _row(topic=None, broker=None, queue_id=None, kind="unreported", owners=[], client_id=cid, reason=why)
            )
    elif side.members:
        for topic in sorted(routes, key=java_string_key):
            for mq in side.inputs[topic].mq_all:
                if mq not in holders:
                    rows.append(
                        _row(topic=topic, broker=mq.broker_name, queue_id=mq.queue_id, kind="unowned", owners=[],
                             client_id=None, reason="no consumer reports holding the queue")
                    )  # fmt: skip
    languages = {m["language"] for cid, m in by_id.items() if cid in reporting and m.get("language")}
    computable = [t for t in sorted(routes, key=java_string_key) if t not in side.true_errors]
    for cid in reporting:
        # a share is bucketed by its queues' topics: CONFIG hands out its configured queues whatever the topic
        shares: dict[str, set[MessageQueue]] = defaultdict(set)
        for topic in computable:
            if side.model == BROADCASTING:
                share: Iterable[MessageQueue] = routes[topic]
            else:
                share = side.true_plans[topic].shares.get(cid, ()) if topic in side.true_plans else ()
            for mq in share:
                shares[mq.topic].add(mq)
        for topic in computable:  # a topic whose share cannot be computed is left out: the computed side says why
            expected, got = shares.get(topic, set()), holding.get((cid, topic), set())
            if got != expected:
                extra, missing = len(got - expected), len(expected - got)
                cause = _cause(side, by_id[cid], copies[cid], languages)
                rows.append(
                    _row(topic=topic, broker=None, queue_id=None, kind="observed_mismatch", owners=[], client_id=cid,
                         reason=f"{extra} extra and {missing} missing queues: {cause}")
                )  # fmt: skip
    out["violations"].extend(rows)
    return len(rows)
