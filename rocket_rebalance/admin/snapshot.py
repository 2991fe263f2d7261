"""The snapshot collector: a live cluster's consumer groups written as the fleet pipeline's input tables.

``rocket-rebalance snapshot -n ADDR --out DIR`` runs :func:`take_snapshot`. It codes against
:class:`~.transport.AdminTransport` only, so a real RocketMQ cluster (remoting) and ``nameserver_stub`` (gRPC) are
read alike: the consumer groups the brokers know, and for each group its connections (members, subscription table,
message model), every consumer's own report of the queues it holds (GET_CONSUMER_RUNNING_INFO: what it
*observes*, which the pipeline's plan can be checked against) and its strategy, the group's consume stats
(offsets), and the route of every subscribed topic.

What could not be read is not guessed: each such thing is a ``rejected`` row with the reason (consumer offline,
timeout, route missing), and the snapshot is then *partial*, which ``_snapshot.json`` and the command's exit status
say. A group with no online consumer is not a failed read: stopping a group's consumers is an operator's normal
act. It is a ``stopped`` row per topic with the group's lag there (:data:`~.snapshot_folder.STOPPED`), and the
snapshot stays whole. Groups are read in parallel by a bounded thread pool; rows are written by the calling thread
only, as groups finish, so memory holds one group's rows at a time, not the fleet's (but for the few read twice).

A snapshot is one moment, and a moment of a rebalance is not a state to act on: while a group's members move queues
between them, some queue is briefly held twice or by nobody. So a group whose first read shows an ownership problem
(a member holding other queues than the group's strategy gives it) is read again ``settle`` seconds later, and
``_snapshot.json``'s ``settle`` record says what the second read showed: the same members holding the same queues
(``held``: the problem is a state), still other holdings with a problem (``moving``), or no problem any more
(``settled``). A stopped group with a backlog is read again too, and its ``later_lag`` says whether messages keep
arriving with nobody to take them. Only those groups wait: a healthy fleet's snapshot takes no longer.

The output folder follows the owned-folder rule of :mod:`rocket_rebalance.snapshot_folder`, which fleet-gen follows
too: new, empty, or an earlier snapshot, whose files listed in its ``_snapshot.json`` are replaced and nothing else.
Tables are written into a new hidden folder beside it and moved in only when every group has been read,
``_snapshot.json`` last, so a crash never leaves a half snapshot that the pipeline would read as whole, and a run
that could read no group at all (the cluster went away after listing them) is an error that leaves an earlier
snapshot as it was, rather than replacing it with empty tables.
"""

from __future__ import annotations

import datetime
import fnmatch
import json
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocket_rebalance.model import (
    AclCredentials,
    MessageQueue,
    TlsSettings,
    check_group_name,
    check_topic_name,
    prepare_rebalance_input,
    retry_topic,
    sort_queues,
)
from rocket_rebalance.plan import plan
from rocket_rebalance.route import TopicRoute
from rocket_rebalance.runtime.transport import (
    AdminTransport,
    ConnectionRow,
    ConsumerReport,
    ProgressRow,
    TransportError,
)
from rocket_rebalance.runtime.transport.wire import open_transport, parse_address
from rocket_rebalance.snapshot_folder import (
    COLLECTOR,
    COLLECTOR_FILES,
    COLLECTOR_TABLES,
    MEMBER_SUBSCRIPTIONS,
    STOPPED,
    check_folder,
    create_file,
    publish_folder,
    staged_folder,
)
from rocket_rebalance.strategies import create_strategy, spans_topics, strategy_name
from rocket_rebalance.subscription import SubscriptionExpression

__all__ = [
    "DEFAULT_SETTLE",
    "MAX_CONCURRENCY",
    "MAX_SETTLE",
    "SYSTEM_GROUPS",
    "ClusterReadError",
    "SnapshotResult",
    "is_system_group",
    "take_snapshot",
]

MAX_CONCURRENCY = 64
DEFAULT_SETTLE = 20.0
"""Seconds between a suspect group's two reads: Java's rebalance interval, so members that were mid-round at the
first read have had a whole periodic round (besides the immediate one a member change triggers) to finish it, and
a stopped group's topic a fair chance to receive a message. A healthy fleet never waits them."""
MAX_SETTLE = 600.0
DEFAULT_STRATEGY = "AVG"  # Java's DefaultMQPushConsumer default, AllocateMessageQueueAveragely

SYSTEM_GROUPS = frozenset(
    {
        "DEFAULT_CONSUMER",
        "DEFAULT_PRODUCER",
        "TOOLS_CONSUMER",
        "SCHEDULE_CONSUMER",
        "FILTERSRV_CONSUMER",
        "__MONITOR_CONSUMER",
        "CLIENT_INNER_PRODUCER",
        "SELF_TEST_P_GROUP",
        "SELF_TEST_C_GROUP",
        "CID_ONS-HTTP-PROXY",
        "CID_ONSAPI_PERMISSION",
        "CID_ONSAPI_OWNER",
        "CID_ONSAPI_PULL",
        "CID_RMQ_SYS_TRANS",
    }
)
"""RocketMQ's predefined groups (``MixAll.PREDEFINE_GROUP_SET``); with the ``CID_RMQ_SYS_`` prefix
(``MixAll.isSysConsumerGroup``) these are the broker's own, which every broker lists and no application runs."""
_SYSTEM_PREFIX = "CID_RMQ_SYS_"

# A pattern may hold RocketMQ name characters ([%|a-zA-Z0-9_-]) and glob syntax; anything else could never match a
# group or topic name, so it is a typo to report rather than a filter that silently keeps nothing.
_BRACKETS = re.compile(r"\[!?\]?[^\]]*\]")
_PATTERN_REST = re.compile(r"[%|a-zA-Z0-9_*?-]+")
_WILDCARDS = re.compile(r"[*?\[]")


class ClusterReadError(OSError):
    """The cluster could not be read at all (name server unreachable, groups not listable, not one listed group's
    connection list readable): no snapshot.

    Not a :class:`~rocket_rebalance.snapshot_folder.SnapshotError` (a folder that cannot be read or written): the
    folder is fine and left as it was; the cluster is what failed, an ``OSError`` like any unreachable service."""


def is_system_group(group: str) -> bool:
    return group in SYSTEM_GROUPS or group.startswith(_SYSTEM_PREFIX)


def check_patterns(patterns: Sequence[str], option: str, check_name: Callable[[str], str]) -> None:
    """Each pattern holds only name characters and wildcards; one without wildcards is a name, checked as one by
    ``check_name`` (the model's check for a topic or a group), so a name too long to exist is refused too."""
    for pattern in patterns:
        rest = _BRACKETS.sub("", pattern)
        if not pattern or (rest and not _PATTERN_REST.fullmatch(rest)):
            raise ValueError(
                f"{option} {pattern!r} is not a pattern of RocketMQ names: use the characters %|a-zA-Z0-9_- and the "
                "shell wildcards * ? [...]"
            )
        if not _WILDCARDS.search(pattern):
            try:
                check_name(pattern)
            except ValueError as error:
                raise ValueError(f"{option}: {error}") from None


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


# ---------------------------------------------------------------------------------------------- output folder


class _Tables:
    """The output tables as JSON Lines, written into the staging folder (:func:`staged_folder`)."""

    def __init__(self, folder: Path) -> None:
        self.counts = dict.fromkeys(COLLECTOR_TABLES, 0)
        self._files = {
            table: create_file(folder / name) for table, name in zip(COLLECTOR_TABLES, COLLECTOR_FILES, strict=True)
        }

    def write(self, table: str, rows: Iterable[dict[str, Any]]) -> None:
        handle = self._files[table]
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            self.counts[table] += 1

    def close(self) -> None:
        for handle in self._files.values():
            handle.close()

    def finish(self) -> list[str]:
        """Every table on disk (flushed and synced) and closed: the files to publish."""
        for handle in self._files.values():
            handle.flush()
            os.fsync(handle.fileno())
        self.close()
        return list(COLLECTOR_FILES)


# ---------------------------------------------------------------------------------------------- one group


@dataclass
class _GroupRows:
    """What reading one group gave: its rows per table, the topics whose routes it needs, or why it was skipped.
    ``read`` is False when not even its connection list could be read: the group is only a rejected row."""

    group: str
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {table: [] for table in COLLECTOR_TABLES})
    topics: list[str] = field(default_factory=list)
    skipped: str = ""
    defaulted: bool = False
    read: bool = True
    read_at: float = 0.0

    def reject(self, client_id: str | None, reason: str) -> None:
        self.rows["rejected"].append({"group": self.group, "client_id": client_id, "reason": reason})

    @property
    def stopped(self) -> bool:
        return bool(self.rows[STOPPED])

    def holdings(self) -> tuple[list[str], frozenset[tuple[str, str, str, int]]]:
        """The members (with a client ID shared by two processes listed twice) and what each reports holding: two
        reads that give the same show a state, not a moment of a move."""
        members = sorted(row["client_id"] for row in self.rows["members"])
        held = frozenset((r["client_id"], r["topic"], r["broker"], r["queue_id"]) for r in self.rows["observed"])
        return members, held


def _reason(error: TransportError) -> str:
    if error.code == "NOT_FOUND":
        return f"consumer offline: {error}"
    if error.code == "DEADLINE_EXCEEDED":
        return f"timeout: {error}"
    if error.code == "UNAVAILABLE":
        return f"unreachable: {error}"
    return f"unreadable ({error.code or 'error'}): {error}"


class _Routes:
    """Each topic's route, asked once for the whole snapshot however many groups subscribe to it."""

    def __init__(self, transport: AdminTransport, known: set[str] | None) -> None:
        self._transport = transport
        self._known = known
        self._found: dict[str, TopicRoute | str] = {}
        self._lock = threading.Lock()

    def get(self, topic: str) -> TopicRoute | str:
        """The route, or why there is none (as a rejected row's reason)."""
        with self._lock:
            if topic in self._found:
                return self._found[topic]
        found: TopicRoute | str
        if self._known is not None and topic not in self._known:
            found = f"route missing: topic {topic} is not in the name server's topic list"
        else:
            try:
                found = self._transport.route(topic)
            except TransportError as error:
                found = f"route missing: {error}" if error.code == "NOT_FOUND" else f"route of {topic}: {error}"
            if isinstance(found, TopicRoute) and not found.queue_datas:
                found = f"route missing: topic {topic} has no broker in its route"
        with self._lock:
            return self._found.setdefault(topic, found)


def _kept_topics(group: str, subscribed: Iterable[str], patterns: Sequence[str]) -> list[str]:
    """The subscribed topics the ``--topic`` patterns keep; the group's retry topic stays with any kept topic, as
    it belongs to the group (consumers balance it like the others) rather than being a topic one filters for."""
    topics = sorted(set(subscribed))
    if not patterns:
        return topics
    retry = retry_topic(group)
    kept = [topic for topic in topics if _matches(topic, patterns)]
    if any(topic != retry for topic in kept) and retry in topics and retry not in kept:
        kept = sorted([*kept, retry])
    return kept


def _read_group(transport: AdminTransport, group: str, topic_patterns: Sequence[str], routes: _Routes) -> _GroupRows:
    result = _GroupRows(group)
    try:
        connections = transport.consumer_connections(group)
    except TransportError as error:
        if error.code != "NOT_FOUND":
            result.reject(None, f"connection list {_reason(error)}")
            result.read = False
            return result
        connections = []
    if not connections:  # RocketMQ says CONSUMER_NOT_ONLINE, the stub lists nobody
        _read_stopped(transport, result, topic_patterns)
        result.read_at = time.monotonic()
        return result
    topics = _kept_topics(group, (t for row in connections for t in row.topics), topic_patterns)
    if not topics:
        result.skipped = "no subscribed topic matches --topic"
        return result
    result.topics = topics
    kept = set(topics)
    result.rows["subscriptions"] = [{"group": group, "topic": topic} for topic in topics]

    reports: dict[str, ConsumerReport] = {}
    for client_id in sorted({row.client_id for row in connections}):
        try:
            reports[client_id] = transport.consumer_report(group, client_id)
        except TransportError as error:
            result.reject(client_id, _reason(error))
    strategies = {
        cid: strategy_name(r.properties.get("allocateMessageQueueStrategy", "")) for cid, r in reports.items()
    }
    result.rows["members"] = _members(group, connections, reports, strategies)
    result.rows[MEMBER_SUBSCRIPTIONS] = _member_subscriptions(group, connections, reports, kept)
    result.rows["observed"] = [
        {"group": group, "client_id": cid, "topic": mq.topic, "broker": mq.broker_name, "queue_id": mq.queue_id}
        for cid, report in sorted(reports.items())
        for mq in sort_queues(report.queues)
        if mq.topic in kept
    ]
    votes = Counter(name for name in strategies.values() if name is not None)
    chosen = min(votes, key=lambda name: (-votes[name], name)) if votes else DEFAULT_STRATEGY
    result.defaulted = not votes
    models = [row.message_model for row in connections if row.message_model] or [
        r.properties["messageModel"] for r in reports.values() if r.properties.get("messageModel")
    ]
    result.rows["groups"] = [
        {
            "group": group,
            "strategy": chosen,
            "message_model": Counter(models).most_common(1)[0][0] if models else "CLUSTERING",
            "options": None,
        }
    ]

    for topic in topics:
        route = routes.get(topic)
        if isinstance(route, str):
            result.reject(None, route)
    try:
        progress = transport.consumer_progress(group, owners=False)  # each consumer is asked once, above
    except TransportError as error:
        progress = []
        if error.code != "NOT_FOUND":  # NOT_FOUND: no offsets stored yet (or a broadcasting group's local ones)
            result.reject(None, f"consume stats {_reason(error)}")
    result.rows["offsets"] = [
        {
            "group": group,
            "topic": row.mq.topic,
            "broker": row.mq.broker_name,
            "queue_id": row.mq.queue_id,
            "max_offset": row.broker_offset,
            "committed_offset": row.consumer_offset,
        }
        for row in progress
        if row.mq.topic in kept and row.consumer_offset >= 0
    ]
    result.read_at = time.monotonic()
    return result


def _read_stopped(transport: AdminTransport, result: _GroupRows, topic_patterns: Sequence[str]) -> None:
    """A group with no online consumer: its lag per topic from the brokers' consume stats (no offsets stored: one
    row without a topic). Consume stats that cannot be read are a rejected row, as for a live group."""
    try:
        progress = transport.consumer_progress(result.group, owners=False)
    except TransportError as error:
        progress = []
        if error.code != "NOT_FOUND":
            result.reject(None, f"consume stats {_reason(error)}")
    lags = _lags(progress)
    topics = _kept_topics(result.group, lags, topic_patterns)
    if topic_patterns and not topics:
        result.skipped = "no topic with offsets matches --topic"
        return
    result.rows[STOPPED] = [
        {"group": result.group, "topic": topic, "lag": lags[topic], "later_lag": None} for topic in topics
    ] or [{"group": result.group, "topic": None, "lag": 0, "later_lag": None}]


def _lags(progress: Iterable[ProgressRow]) -> Counter[str]:
    """Messages not yet consumed per topic: the queues' max offsets less the group's committed ones (a queue it
    never committed an offset for has no lag to speak of)."""
    lags: Counter[str] = Counter()
    for row in progress:
        if row.consumer_offset >= 0:
            lags[row.mq.topic] += max(0, row.broker_offset - row.consumer_offset)
    return lags


def _backlog(result: _GroupRows) -> bool:
    return any(row["lag"] > 0 for row in result.rows[STOPPED])


def _read_lag_again(transport: AdminTransport, result: _GroupRows) -> None:
    """A stopped group's lag a settle interval after its first read, as ``later_lag`` of its rows: a backlog that
    grew has messages arriving that nobody consumes. A failed read leaves ``later_lag`` empty and says why."""
    try:
        progress = transport.consumer_progress(result.group, owners=False)
    except TransportError as error:
        result.reject(None, f"consume stats, read again {_reason(error)}")
        return
    lags = _lags(progress)
    for row in result.rows[STOPPED]:
        if row["topic"] is not None:
            row["later_lag"] = lags[row["topic"]]


def _ownership_problem(result: _GroupRows, routes: _Routes) -> bool:
    """Whether a reporting member holds other queues than the group's strategy computes for it over the listed
    members and the routes (what the audit's observed checks compare in full): a group for which this is False
    has no ownership finding to confirm, so it is read once. Where the share cannot be computed here (a strategy
    needing options, an unknown name), the group counts as suspect: a second read costs time, never a finding."""
    if not result.rows["groups"] or result.rows["groups"][0]["message_model"] == "BROADCASTING":
        return False
    queues: list[MessageQueue] = []
    for topic in result.topics:
        route = routes.get(topic)
        if isinstance(route, TopicRoute):
            queues.extend(route.subscribe_queues())
    members = [row["client_id"] for row in result.rows["members"]]
    reporting = {row["client_id"] for row in result.rows["members"] if row["reported"]}
    try:
        strategy = create_strategy(result.rows["groups"][0]["strategy"])
        shares: dict[str, set[MessageQueue]] = {cid: set() for cid in members}
        by_topic = [queues] if spans_topics(strategy) else [[q for q in queues if q.topic == t] for t in result.topics]
        for topic_queues in by_topic:
            if topic_queues:
                ready = prepare_rebalance_input(topic_queues, members, warn=False)
                for cid, share in plan(strategy, result.group, ready.mq_all, ready.cid_all).items():
                    shares[cid].update(share)
    except (ValueError, TypeError):  # the strategies' errors (unknown name, options missing) are ValueErrors
        return True
    held: dict[str, set[MessageQueue]] = {cid: set() for cid in reporting}
    for row in result.rows["observed"]:
        held.setdefault(row["client_id"], set()).add(MessageQueue(row["topic"], row["broker"], row["queue_id"]))
    return any(held[cid] != shares.get(cid, set()) for cid in reporting) or len(members) != len(set(members))


def _members(
    group: str,
    connections: Sequence[ConnectionRow],
    reports: dict[str, ConsumerReport],
    strategies: dict[str, str | None],
) -> list[dict[str, Any]]:
    """One row per consumer process: a client ID listed ``n`` times at one broker is ``n`` processes sharing the ID
    (each broker lists every process connected to it), while one process connected to several brokers is listed
    once by each of them."""
    per_broker = Counter((row.client_id, row.broker_name) for row in connections)
    processes: Counter[str] = Counter()
    for (client_id, _), count in per_broker.items():
        processes[client_id] = max(processes[client_id], count)
    languages = {row.client_id: row.language for row in connections if row.language}
    rows: list[dict[str, Any]] = []
    for client_id in sorted(processes):
        report = reports.get(client_id)
        language = (report.properties.get("PROP_CLIENT_LANGUAGE") if report else None) or languages.get(client_id)
        row = {
            "group": group,
            "client_id": client_id,
            "view": None,
            "reported": report is not None,
            "strategy": strategies.get(client_id),
            "language": language or None,
        }
        rows.extend([row] * processes[client_id])
    return rows


def _member_subscriptions(
    group: str, connections: Sequence[ConnectionRow], reports: dict[str, ConsumerReport], kept: set[str]
) -> list[dict[str, Any]]:
    """Each member's own expression per kept topic: from its running info, or where the wire's running info does
    not carry them (the stub's) from its own connection row. A member whose subscriptions neither gave (its report
    failed, which is a rejected row already) has no row: an audit compares only the members recorded."""
    own: dict[str, dict[str, SubscriptionExpression]] = {}
    for row in sorted(connections, key=lambda r: (r.client_id, r.broker_name)):
        if row.subscriptions is not None:
            own.setdefault(row.client_id, dict(row.subscriptions))
    for client_id, report in reports.items():
        if report.subscriptions is not None:
            own[client_id] = dict(report.subscriptions)
    return [
        {
            "group": group,
            "client_id": client_id,
            "topic": topic,
            "expression_type": expression.expression_type,
            "expression": expression.sub_string,
        }
        for client_id, subscribed in sorted(own.items())
        for topic, expression in sorted(subscribed.items())
        if topic in kept
    ]


# ---------------------------------------------------------------------------------------------- the snapshot


@dataclass(frozen=True)
class SnapshotResult:
    """What :func:`take_snapshot` wrote: row counts per table, the groups read (their connection list answered;
    not those the topic filter left out), and whether anything was rejected."""

    out: Path
    counts: dict[str, int]
    groups: int
    partial: bool


def take_snapshot(
    address: str,
    out: Path,
    *,
    group_patterns: Sequence[str] = (),
    topic_patterns: Sequence[str] = (),
    include_system: bool = False,
    concurrency: int = 8,
    timeout: float = 5.0,
    token: str | None = None,
    credentials: AclCredentials | None = None,
    tls: TlsSettings | None = None,
    progress: Callable[[int, int, int], None] | None = None,
    settle: float = DEFAULT_SETTLE,
    rereading: Callable[[list[str], float], None] | None = None,
) -> SnapshotResult:
    """Collect the cluster at ``address`` into ``out`` (see the module's docstring).

    ``progress(done, total, rejected)`` is called once the groups are listed and after each group. Groups whose
    first read shows an ownership problem, and stopped groups with a backlog, are read again ``settle`` seconds
    later (0: never); ``rereading(groups, seconds)`` is called before that wait. Arguments and the output folder are
    checked before the cluster is asked anything (``ValueError``); a cluster that cannot be read at all (no
    listing, or not one group's connection list) raises :class:`ClusterReadError` and leaves ``out`` as it was."""
    check_patterns(group_patterns, "--group", check_group_name)
    check_patterns(topic_patterns, "--topic", check_topic_name)
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or not 1 <= concurrency <= MAX_CONCURRENCY:
        raise ValueError(f"--concurrency must be 1 to {MAX_CONCURRENCY}, got {concurrency!r}")
    if not 0 < timeout <= 600:
        raise ValueError(f"--timeout must be more than 0 and at most 600 seconds, got {timeout!r}")
    if not 0 <= settle <= MAX_SETTLE:
        raise ValueError(f"--settle must be 0 to {MAX_SETTLE:g} seconds, got {settle!r}")
    wire, _ = parse_address(address)
    check_folder(out, COLLECTOR)  # again when publishing: a refusal now costs no reading
    started = datetime.datetime.now(datetime.UTC)
    filters = _Filters(tuple(group_patterns), tuple(topic_patterns), include_system)
    transport = open_transport(address, token=token, timeout=timeout, credentials=credentials, tls=tls)
    try:
        target = _Target(address, wire, out, started)
        return _collect(transport, target, filters, concurrency, _Reporting(progress, settle, rereading))
    finally:
        transport.close()


@dataclass(frozen=True)
class _Reporting:
    """What the caller asked to hear while the snapshot is taken, and how long a suspect group settles."""

    progress: Callable[[int, int, int], None] | None
    settle: float
    rereading: Callable[[list[str], float], None] | None


@dataclass(frozen=True)
class _Filters:
    group_patterns: tuple[str, ...]
    topic_patterns: tuple[str, ...]
    include_system: bool

    def skip_reason(self, group: str) -> str | None:
        if not self.include_system and is_system_group(group):
            return "system"
        if self.group_patterns and not _matches(group, self.group_patterns):
            return "group_filter"
        return None


@dataclass(frozen=True)
class _Target:
    """Where the snapshot comes from and goes to, as ``_snapshot.json`` records it."""

    address: str
    wire: str
    out: Path
    started: datetime.datetime


def _listings(transport: AdminTransport, address: str) -> tuple[set[str] | None, list[str]]:
    """The name server's topics (None when it will not list them: every route is then asked) and the groups."""
    try:
        known: set[str] | None = set(transport.topics())
    except TransportError as error:
        if error.code in ("UNAVAILABLE", "DEADLINE_EXCEEDED", "FAILED_PRECONDITION"):
            raise ClusterReadError(f"cannot reach the name server at {address}: {error}") from None
        known = None  # e.g. a name server with enableAllTopicList=false
    try:
        groups = transport.consumer_groups()
    except TransportError as error:
        raise ClusterReadError(f"cannot list the consumer groups at {address}: {error}") from None
    return known, groups


def _collect(
    transport: AdminTransport, target: _Target, filters: _Filters, concurrency: int, reporting: _Reporting
) -> SnapshotResult:
    known, listed = _listings(transport, target.address)
    skipped: dict[str, list[str]] = {"system": [], "group_filter": [], "topic_filter": []}
    selected: list[str] = []
    for group in listed:
        reason = filters.skip_reason(group)
        if reason is None:
            selected.append(group)
        else:
            skipped[reason].append(group)

    with staged_folder(target.out, COLLECTOR) as staging:
        tables = _Tables(staging)
        routes = _Routes(transport, known)
        written = _Written(tables, routes)
        unread: list[_GroupRows] = []
        suspects: list[_GroupRows] = []
        done = 0
        if reporting.progress is not None:  # listed: the reading starts, and a person learns how much to read
            reporting.progress(0, len(selected), 0)
        try:
            with ThreadPoolExecutor(concurrency, thread_name_prefix="rr-snapshot") as pool:
                futures: list[Future[_GroupRows]] = [
                    pool.submit(_read_group, transport, group, filters.topic_patterns, routes) for group in selected
                ]
                for future in as_completed(futures):
                    result = future.result()
                    done += 1
                    if not result.read:
                        unread.append(result)
                    if result.skipped:
                        skipped["topic_filter"].append(result.group)
                    elif reporting.settle and (
                        _backlog(result) if result.stopped else _ownership_problem(result, routes)
                    ):
                        suspects.append(result)  # written after its second read
                    else:
                        written.add(result)
                    if reporting.progress is not None:
                        reporting.progress(done, len(selected), tables.counts["rejected"])
                settle = (
                    _read_again(transport, pool, suspects, filters, reporting, written) if reporting.settle else None
                )
            files = tables.finish()
        finally:
            tables.close()
        if selected and len(unread) == len(selected):
            first = min(unread, key=lambda result: result.group)
            raise ClusterReadError(
                f"no consumer group could be read at {target.address}: the connection list of each of the "
                f"{len(selected)} groups failed ({first.group}: {first.rows['rejected'][0]['reason']}); "
                f"--out {target.out} is left as it was"
            )
        counts = dict(tables.counts)
        partial = counts["rejected"] > 0
        groups_read = len(selected) - len(unread) - len(skipped["topic_filter"])
        document = {
            "complete": True,
            "partial": partial,
            "address": target.address,
            "wire": target.wire,
            "time": target.started.isoformat(timespec="seconds"),
            "finished": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "filters": {
                "group": list(filters.group_patterns),
                "topic": list(filters.topic_patterns),
                "include_system": filters.include_system,
            },
            "groups_listed": len(listed),
            "groups_read": groups_read,
            "groups_stopped": written.stopped,
            "counts": counts,
            "skipped": {reason: sorted(groups) for reason, groups in skipped.items()},
            "strategy_defaulted": {
                "strategy": DEFAULT_STRATEGY,
                "why": "no consumer of the group reported its strategy (Java's default assumed)",
                "groups": sorted(written.defaulted),
            },
            "settle": settle,
            "files": files,
        }
        publish_folder(staging, target.out, COLLECTOR, document)
    return SnapshotResult(target.out, counts, groups_read, partial)


class _Written:
    """The groups' rows as they go into the tables, each topic's route once, and what the marker counts."""

    def __init__(self, tables: _Tables, routes: _Routes) -> None:
        self._tables = tables
        self.routes = routes
        self._routed: set[str] = set()
        self.defaulted: list[str] = []
        self.stopped = 0

    def add(self, result: _GroupRows) -> None:
        for table in COLLECTOR_TABLES:
            self._tables.write(table, result.rows[table])
        new_topics = [topic for topic in result.topics if topic not in self._routed]
        self._routed.update(new_topics)
        self._tables.write("routes", _route_rows(self.routes, new_topics))
        if result.defaulted:
            self.defaulted.append(result.group)
        self.stopped += result.stopped


def _read_again(
    transport: AdminTransport,
    pool: ThreadPoolExecutor,
    suspects: list[_GroupRows],
    filters: _Filters,
    reporting: _Reporting,
    written: _Written,
) -> dict[str, Any] | None:
    """Read the suspect groups again once ``settle`` seconds have passed since the last of their first reads, write
    what the second read gave, and return the marker's ``settle`` record: the interval, and which live groups
    showed the same holdings twice (``held``), other holdings still with a problem (``moving``), or no problem
    any more (``settled``). A group that stopped or failed in between is written as its second read found it.
    None when ``settle`` is 0: nothing was read twice, so the marker claims nothing about it."""
    if not reporting.settle:
        return None
    record: dict[str, Any] = {"seconds": reporting.settle, "held": [], "moving": [], "settled": []}
    if not suspects:
        return record
    if reporting.rereading is not None:
        reporting.rereading(sorted(result.group for result in suspects), reporting.settle)
    time.sleep(max(0.0, max(result.read_at for result in suspects) + reporting.settle - time.monotonic()))

    def again(first: _GroupRows) -> tuple[_GroupRows, str | None]:
        if first.stopped:
            _read_lag_again(transport, first)
            return first, None
        second = _read_group(transport, first.group, filters.topic_patterns, written.routes)
        if second.skipped:  # its subscriptions changed in between: the first read is what there is
            return first, None
        if not second.read or second.stopped:
            return second, None
        if not _ownership_problem(second, written.routes):
            return second, "settled"
        return second, "held" if first.holdings() == second.holdings() else "moving"

    for result, verdict in pool.map(again, suspects):
        written.add(result)
        if verdict is not None:
            record[verdict].append(result.group)
    for verdict in ("held", "moving", "settled"):
        record[verdict].sort()
    return record


def _route_rows(routes: _Routes, topics: Iterable[str]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for topic in topics:
        route = routes.get(topic)
        if isinstance(route, TopicRoute):
            rows.extend(
                {"topic": topic, "broker": d.broker_name, "read_queue_nums": d.read_queue_nums, "perm": d.perm}
                for d in route.queue_datas
            )
    return rows
