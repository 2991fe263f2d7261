"""``rocket-rebalance audit``: the current state of a snapshot, one table of findings, an exit status for cron.

The job runs on the snapshot alone (no scenario, no strategy comparison, no report unless asked); the findings are
its violations (computed from the settings and member lists, and ``observed`` ones from what consumers report
holding) plus the collector's own notes: the consumers and groups it could not read (``rejected.jsonl``) and
whether the snapshot is partial (``_snapshot.json``). Exit status (:data:`EXIT_STATUS`): 0 nothing to act on, 1
findings, 2 bad input or the job could not run, 3 nothing found in what could be read, but something could not
(a partial snapshot, rejected input rows): a cron check then says "look again", not "all clear".

Findings describe states, not moments. A group with no online consumer is not one (operators stop consumers); it
is one when its backlog grows: the collector read its lag twice, a settle interval apart (``stopped.jsonl``), and
a lag that grew means messages keep arriving with nobody to consume them. Other stopped groups are listed, not
found. Ownership found in what live members report holding (queues held twice or by nobody, a member holding other
queues than its share) is a moment of every rebalance: the collector reads such a group again a settle interval
later (``_snapshot.json``'s ``settle``), and the finding then says it held across the two reads; a group whose
holdings changed in between is still moving, and its ownership is not judged (the output names it).

Besides the job's findings, one per group and topic whose members do not subscribe alike, read without Spark from
the collector's record of each member's own subscriptions (``member_subscriptions``): who subscribes which
expression, who not at all, and for tag expressions what each member never receives. RocketMQ's broker keeps one
expression per group and topic, the last heartbeat's, and filters every member's pulls by it, so such a group loses
messages; ``mqadmin`` says only "different subscription". A snapshot without the record (an older one, fleet-gen's)
is audited as before, and the output says its subscriptions were not checked.

Idleness is judged as the group's strategy allocates: per topic, or for a strategy that spans topics (CROSS_TOPIC)
on each consumer's total over all the group's topics (one finding per idle consumer, with no topic): such a
strategy leaves a consumer without a queue of some topics by design. A fleet may still have millions of findings;
the audit keeps only the first ``limit`` in sort order (those it prints), reading the violations batch by batch,
and counts the others, which the output states (``... and M more``, ``more_findings``).
"""

from __future__ import annotations

import heapq
import json
import shutil
import sys
import tempfile
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocket_rebalance.model import RETRY_GROUP_TOPIC_PREFIX, check_group_name, check_topic_name, first_few, printable
from rocket_rebalance.pipeline.observed import OBSERVED, OWNERSHIP_KINDS
from rocket_rebalance.pipeline.sides import MORE_CONSUMERS_THAN_QUEUES
from rocket_rebalance.progress import Progress
from rocket_rebalance.snapshot_folder import (
    COLLECTOR_FILES,
    COLLECTOR_TABLES,
    MEMBER_SUBSCRIPTIONS,
    STOPPED,
    Settle,
    SnapshotError,
    collector_notes,
    collector_settle,
    data_files,
    has_table,
    table_path,
)
from rocket_rebalance.subscription import (
    ExpressionError,
    SubscriptionExpression,
    TopicInconsistency,
    group_inconsistencies,
)

__all__ = [
    "DEFAULT_LIMIT",
    "EXIT_STATUS",
    "FINDING_COLUMNS",
    "GROWING_BACKLOG",
    "Audit",
    "backlog_findings",
    "expected_idleness",
    "format_audit",
    "judged",
    "member_subscriptions",
    "run_audit",
    "stopped_groups",
    "subscription_findings",
]

FINDING_COLUMNS = ("group", "topic", "side", "kind", "where", "reason")
"""A finding: ``where`` is the queue (``broker:queue_id``) or the consumer (its client ID) it is about, or for an
inconsistent subscription the members concerned (the first few, then how many more)."""


DEFAULT_LIMIT = 50
"""Findings an audit keeps (and the command prints) unless told otherwise."""


EXIT_STATUS = (
    "Exit status: 0 nothing to act on; 1 findings; 2 usage error or the job could not run; 3 nothing found in what "
    "could be read, but something could not (a partial snapshot, rejected input rows)."
)

GROWING_BACKLOG = "stopped_with_backlog"
"""A finding's kind: a group with no online consumer whose backlog grew between the collector's two reads."""

INCONSISTENT_SUBSCRIPTION = "inconsistent_subscription"
"""A finding's kind: members of a group subscribe a topic differently (or not at all)."""

_SHOWN = 5
"""Members, tags and losses one finding names before "and N more": a group may have a thousand members."""

LOSS = (
    "the broker filters every member's pulls by whichever expression it heard last, so the messages one member "
    "does not subscribe are skipped, unconsumed, on the queues handed to it"
)
"""Why members subscribing differently lose messages: said once at the end of each such finding."""


@dataclass
class Audit:
    """What an audit found: ``findings``, sorted, are the first of them; ``left_out`` counts the others.
    ``subscriptions_recorded`` is False for a snapshot without members' subscriptions (taken before the collector
    recorded them, or by fleet-gen): whether its groups subscribe alike was then not checked."""

    findings: list[dict[str, Any]]
    partial: bool
    collector_rejected: list[dict[str, Any]] = field(default_factory=list)
    rejected_rows: int = 0
    left_out: int = 0
    subscriptions_recorded: bool = True
    stopped: list[dict[str, Any]] = field(default_factory=list)
    moving: list[str] = field(default_factory=list)
    settle_seconds: float | None = None

    @property
    def unread(self) -> bool:
        """Something was not read (a partial snapshot) or not checked (rejected input rows)."""
        return self.partial or bool(self.rejected_rows)

    @property
    def status(self) -> int:
        """The exit status: 1 for any finding (something to act on, whatever else was not read), else 3 when
        something was not read or not checked (it could hide a problem, so it is not "nothing found"), else 0."""
        if self.findings or self.left_out:
            return 1
        return 3 if self.unread else 0


def expected_idleness(row: Mapping[str, Any]) -> bool:
    """A consumer idle on a retry topic because the group has more consumers than it has queues: brokers create
    ``%RETRY%<group>`` with one queue each, so every group with more consumers than brokers has such consumers,
    and Java's consumers are idle there too. Reported by ``impact``; not a finding of an audit, which would
    otherwise fail for nearly every healthy fleet."""
    return (
        row["kind"] == "idle_consumer"
        and str(row["topic"] or "").startswith(RETRY_GROUP_TOPIC_PREFIX)
        and row["reason"] == MORE_CONSUMERS_THAN_QUEUES
    )


def _where(row: Mapping[str, Any]) -> str:
    if row["queue_id"] is not None:
        return f"{row['broker']}:{row['queue_id']}"
    return row["client_id"] or ""


_VIOLATION_COLUMNS = ["group", "topic", "side", "kind", "broker", "queue_id", "client_id", "reason"]


def _sort_key(finding: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(str(finding[k] or "") for k in FINDING_COLUMNS)


def judged(finding: dict[str, Any], settle: Settle | None) -> dict[str, Any] | None:
    """An ownership finding from what live members report holding, as the collector's second read judged its group
    (:class:`~rocket_rebalance.snapshot_folder.Settle`): said to have held across the two reads, or None (not a
    finding) when the group's holdings changed in between, a rebalance caught mid-round. Any other finding, and
    any of a group read once (no problem at its first read, or a snapshot without the record), as it is."""
    if settle is None or finding["side"] != OBSERVED or finding["kind"] not in OWNERSHIP_KINDS:
        return finding
    if finding["group"] in settle.moving:
        return None
    if finding["group"] in settle.held:
        return {**finding, "reason": f"{finding['reason']} (held for {settle.seconds:g} s across two reads)"}
    return finding


def _first_findings(
    violations: Path, limit: int, extra: Sequence[dict[str, Any]] = (), settle: Settle | None = None
) -> tuple[list[dict[str, Any]], int]:
    """The first ``limit`` findings of the written violations table (each :func:`judged` by ``settle``) and
    ``extra`` (the subscription and backlog findings) in sort order, and how many there are in all: the table read
    a batch at a time and kept in a heap of ``limit``, so memory does not grow with the fleet's findings."""
    import pyarrow.dataset as ds

    total = len(extra)

    def findings() -> Iterator[dict[str, Any]]:
        nonlocal total
        yield from extra
        for batch in ds.dataset(violations, format="parquet").to_batches(columns=_VIOLATION_COLUMNS):
            for row in batch.to_pylist():
                finding = None if expected_idleness(row) else judged(
                    {**{k: row[k] for k in ("group", "topic", "side", "kind")}, "where": _where(row),
                     "reason": row["reason"]},
                    settle,
                )  # fmt: skip
                if finding is not None:
                    total += 1
                    yield finding

    rows = findings()
    kept = heapq.nsmallest(limit, rows, key=_sort_key)
    deque(rows, maxlen=0)  # count the rest (nsmallest stops at once for a limit of 0)
    return kept, total


def member_subscriptions(snapshot: Path) -> dict[str, dict[str, dict[str, SubscriptionExpression]]] | None:
    """The collector's record of what each member subscribes (group → client ID → topic → expression), or None
    when the snapshot has none (:data:`~rocket_rebalance.snapshot_folder.MEMBER_SUBSCRIPTIONS`). Every row is
    checked as the other tables' are (names by the model's rules, the expression as a consumer's): a bad one is a
    :class:`~rocket_rebalance.snapshot_folder.SnapshotError` naming its file and line, never a guess."""
    if not has_table(snapshot, MEMBER_SUBSCRIPTIONS):
        return None
    path, fmt = table_path(snapshot, MEMBER_SUBSCRIPTIONS)
    if fmt != "json":
        raise SnapshotError(f"snapshot {snapshot}: {path.name} must be JSON Lines, as the collector writes it")
    groups: dict[str, dict[str, dict[str, SubscriptionExpression]]] = {}
    for file in data_files(path, fmt):
        with file.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    group, client_id, topic, expression = _subscription_row(line)
                except (ValueError, TypeError, KeyError) as error:  # ExpressionError and JSON's are ValueErrors
                    raise SnapshotError(f"snapshot {snapshot}: {file.name} line {number}: {error}") from None
                groups.setdefault(group, {}).setdefault(client_id, {})[topic] = expression
    return groups


def _subscription_row(line: str) -> tuple[str, str, str, SubscriptionExpression]:
    row = json.loads(line)
    if not isinstance(row, dict):
        raise ValueError("not a JSON object")
    client_id = row["client_id"]
    if not isinstance(client_id, str) or not client_id:
        raise ValueError(f"client_id must be a non-empty string, got {client_id!r}")
    expression, kind = row["expression"], row["expression_type"]
    if not isinstance(expression, str) or not isinstance(kind, str):
        raise ValueError("expression and expression_type must be strings")
    try:
        parsed = SubscriptionExpression(expression, kind)
    except ExpressionError as error:
        raise ValueError(f"{printable(expression)!r}: {error}") from None
    return check_group_name(row["group"]), client_id, check_topic_name(row["topic"]), parsed


def stopped_groups(snapshot: Path) -> list[dict[str, Any]]:
    """The collector's record of the groups with no online consumer
    (:data:`~rocket_rebalance.snapshot_folder.STOPPED`), sorted; none for a snapshot without it. A bad row is a
    :class:`~rocket_rebalance.snapshot_folder.SnapshotError` naming its line, never a guess."""
    path = snapshot / COLLECTOR_FILES[COLLECTOR_TABLES.index(STOPPED)]
    if not path.is_file():
        return []
    rows: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                rows.append(_stopped_row(line))
            except (ValueError, TypeError, KeyError) as error:
                raise SnapshotError(f"snapshot {snapshot}: {path.name} line {number}: {error}") from None
    return sorted(rows, key=lambda row: (row["group"], row["topic"] or ""))


def _stopped_row(line: str) -> dict[str, Any]:
    row = json.loads(line)
    if not isinstance(row, dict):
        raise ValueError("not a JSON object")
    lag, later = row["lag"], row.get("later_lag")
    for name, value in (("lag", lag), ("later_lag", later)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ValueError(f"{name} must be a whole number of 0 or more, got {value!r}")
    if lag is None:
        raise ValueError("lag is missing")
    topic = row.get("topic")
    return {
        "group": check_group_name(row["group"]),
        "topic": None if topic is None else check_topic_name(topic),
        "lag": lag,
        "later_lag": later,
    }


def backlog_findings(stopped: Sequence[Mapping[str, Any]], seconds: float | None) -> list[dict[str, Any]]:
    """A finding per stopped group and topic whose backlog grew between the collector's two reads (``seconds``
    apart): messages keep arriving and nobody consumes them, what an operator's check is for. A backlog that did
    not grow (a retired group's leftovers, a topic nobody writes to now) and a stopped group without one are not
    findings: stopping consumers is normal."""
    return [
        {
            "group": row["group"],
            "topic": row["topic"],
            "side": OBSERVED,
            "kind": GROWING_BACKLOG,
            "where": "no online consumer",
            "reason": f"no online consumer, and the backlog grew from {row['lag']} to {row['later_lag']} messages "
            + (f"in {seconds:g} s" if seconds else "between two reads"),
        }
        for row in stopped
        if row["later_lag"] is not None and row["later_lag"] > row["lag"]
    ]


def _quoted(expression: SubscriptionExpression) -> str:
    return f"'{expression}'"


def _reason(found: TopicInconsistency) -> str:
    """One line: who subscribes what, who does not subscribe the topic, what each TAG member never receives, and
    why that loses messages. Names are bounded (:func:`~rocket_rebalance.model.first_few`)."""
    named = [f"{_quoted(expression)} by {first_few(who, _SHOWN)}" for expression, who in found.expressions]
    more = len(named) - _SHOWN
    parts = ["subscribed as " + "; as ".join(named[:_SHOWN]) + (f"; and {more} more expressions" if more > 0 else "")]
    if found.absent:
        parts.append(f"not subscribed by {first_few(found.absent, _SHOWN)}, which is handed queues of it all the same")
    losses = [
        f"{lost.member} never receives anything but its own tags" if lost.anything_else
        else f"{lost.member} never receives {first_few(lost.tags, _SHOWN)}"
        for lost in found.lost
    ]  # fmt: skip
    if losses:
        parts.append(first_few(losses, _SHOWN))
    return "; ".join(parts) + f": {LOSS}"


def subscription_findings(members: dict[str, dict[str, dict[str, SubscriptionExpression]]]) -> list[dict[str, Any]]:
    """A finding per group and topic whose members do not subscribe alike (:func:`group_inconsistencies`): its
    ``where`` names the members concerned, its ``reason`` what each subscribes and what each never receives."""
    findings: list[dict[str, Any]] = []
    for group in sorted(members):
        for found in group_inconsistencies(members[group]):
            involved = sorted({*(m for _, who in found.expressions for m in who), *found.absent})
            findings.append(
                {
                    "group": group,
                    "topic": found.topic,
                    "side": "observed",
                    "kind": INCONSISTENT_SUBSCRIPTION,
                    "where": first_few(involved, _SHOWN),
                    "reason": _reason(found),
                }
            )
    return findings


def run_audit(
    snapshot: Path,
    out: Path | None = None,
    master: str | None = None,
    conf: dict[str, str] | None = None,
    report: bool = False,
    spark: Any = None,
    progress: Progress | None = None,
    limit: int = DEFAULT_LIMIT,
    engine: str = "auto",
) -> Audit:
    """Run the job on the snapshot alone and collect its first ``limit`` findings (the others counted); ``out``
    None: a temporary folder, deleted after. ``engine``, ``master``, ``conf``, ``spark``: where the job runs, as
    for :func:`~rocket_rebalance.pipeline.job.run_impact` (a small snapshot in this process, in seconds).

    A failure inside Spark is raised as :class:`~rocket_rebalance.pipeline.job.ImpactError` (one line).
    ``progress``: where the steps are said (default: ``audit [N]`` lines on stderr, naming the command that runs).
    """
    from rocket_rebalance.pipeline.job import run_impact, spark_failures

    if limit < 0:
        raise ValueError(f"--limit must be 0 or more, got {limit}")
    if not snapshot.is_dir():
        raise ValueError(f"snapshot {snapshot}: not a folder")
    notes = collector_notes(snapshot)  # before Spark starts: a bad file is one line at once
    subscribed = member_subscriptions(snapshot)
    settle = collector_settle(snapshot)
    stopped = stopped_groups(snapshot)
    seconds = settle.seconds if settle is not None else None
    extra = [
        *(subscription_findings(subscribed) if subscribed is not None else []),
        *backlog_findings(stopped, seconds),
    ]
    folder = out if out is not None else Path(tempfile.mkdtemp(prefix="rr-audit-"))
    try:
        with spark_failures() as log:
            result = run_impact(
                snapshot, folder, master=master, spark=spark, report=report, conf=conf, spark_log=log,
                progress=progress if progress is not None else Progress("audit", sys.stderr), engine=engine,
            )  # fmt: skip
        findings, total = _first_findings(folder / "violations.parquet", limit, extra, settle)
    finally:
        if out is None:
            shutil.rmtree(folder, ignore_errors=True)
    rejected = result.rows.get("rejected", 0)
    return Audit(
        findings, bool(result.partial), notes, rejected, total - len(findings), subscribed is not None, stopped,
        sorted(settle.moving) if settle is not None else [], seconds,
    )  # fmt: skip


def _table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> list[str]:
    """Aligned lines of ``rows``; every cell escaped (:func:`~rocket_rebalance.model.printable`): client IDs,
    broker, topic and group names and the collector's reasons come from servers and consumers, and a newline or an
    escape sequence in one must neither forge a row nor reach the terminal."""
    cells = [[printable(str(row[c])) if row[c] is not None else "" for c in columns] for row in rows]
    widths = [max([len(c), *(len(line[i]) for line in cells)]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in cells]
    return lines


def format_audit(audit: Audit, limit: int, fmt: str) -> str:
    """The audit as text (one table of findings, at most ``limit`` rows, then "... and M more"; every cell escaped)
    or JSON (whose own escaping keeps the strings exact for a program)."""
    shown = audit.findings[:limit]
    more = audit.left_out + len(audit.findings) - len(shown)
    notes, more_notes = audit.collector_rejected[:limit], max(0, len(audit.collector_rejected) - limit)
    stopped, more_stopped = audit.stopped[:limit], max(0, len(audit.stopped) - limit)
    if fmt == "json":
        return json.dumps(
            {
                "status": audit.status,
                "partial": audit.partial,
                "findings": shown,
                "more_findings": more,
                "collector_rejected": notes,
                "more_collector_rejected": more_notes,
                "rejected_rows": audit.rejected_rows,
                "subscriptions_recorded": audit.subscriptions_recorded,
                "stopped_groups": stopped,
                "more_stopped_groups": more_stopped,
                "ownership_moving": audit.moving,
                "settle_seconds": audit.settle_seconds,
            },
            indent=2,
        )
    lines: list[str] = []
    if audit.partial:
        lines.append("partial snapshot: the collector could not read everything (see below); findings may be missing")
    if shown:
        lines += _table(shown, FINDING_COLUMNS)
        if more:
            lines.append(f"... and {more} more")
    elif more:
        lines.append(f"{more} findings, none shown (the limit is {limit})")
    else:
        lines.append("no findings in what could be read" if audit.unread else "no findings")
    if audit.moving:
        lines.append(
            f"ownership not judged in {first_few(audit.moving, _SHOWN)}: what their members hold changed between "
            f"two reads {audit.settle_seconds or 0:g} s apart (a rebalance under way); audit again later"
        )
    if stopped:
        lines += ["", "groups with no online consumer:", *_table(stopped, ("group", "topic", "lag", "later_lag"))]
        if more_stopped:
            lines.append(f"... and {more_stopped} more")
    if notes:
        lines += ["", "not read by the collector (rejected.jsonl):", *_table(notes, ("group", "client_id", "reason"))]
        if more_notes:
            lines.append(f"... and {more_notes} more")
    if audit.rejected_rows:
        lines.append(f"{audit.rejected_rows} input rows rejected, so not checked (see rejected.parquet with --out)")
    if not audit.subscriptions_recorded:
        lines.append(
            "subscriptions not recorded in this snapshot (taken by an earlier version, or not by `snapshot`): "
            "whether each group's members subscribe alike was not checked"
        )
    return "\n".join(lines)
