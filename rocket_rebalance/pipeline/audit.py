"""``rocket-rebalance audit``: the current state of a snapshot, one table of findings, an exit status for cron.

The job runs on the snapshot alone (no scenario, no strategy comparison, no report unless asked); the findings are
its violations (computed from the settings and member lists, and ``observed`` ones from what consumers report
holding) plus the collector's own notes: the consumers and groups it could not read (``rejected.jsonl``) and
whether the snapshot is partial (``_snapshot.json``). Exit status: 0 nothing found, 1 findings, 2 bad input or the
job could not run.

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
import tempfile
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocket_rebalance.model import RETRY_GROUP_TOPIC_PREFIX, check_group_name, check_topic_name, first_few, printable
from rocket_rebalance.pipeline.sides import MORE_CONSUMERS_THAN_QUEUES
from rocket_rebalance.snapshot_folder import (
    MEMBER_SUBSCRIPTIONS,
    SnapshotError,
    collector_notes,
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
    "FINDING_COLUMNS",
    "Audit",
    "expected_idleness",
    "format_audit",
    "member_subscriptions",
    "run_audit",
    "subscription_findings",
]

FINDING_COLUMNS = ("group", "topic", "side", "kind", "where", "reason")
"""A finding: ``where`` is the queue (``broker:queue_id``) or the consumer (its client ID) it is about, or for an
inconsistent subscription the members concerned (the first few, then how many more)."""


DEFAULT_LIMIT = 50
"""Findings an audit keeps (and the command prints) unless told otherwise."""


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

    @property
    def status(self) -> int:
        """0 when nothing was found, 1 for any finding, a partial snapshot or rejected input rows (what was not
        read or not checked could hide a problem, so it is not "nothing found"): the exit status."""
        return 1 if self.findings or self.left_out or self.partial or self.rejected_rows else 0


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


def _first_findings(
    violations: Path, limit: int, extra: Sequence[dict[str, Any]] = ()
) -> tuple[list[dict[str, Any]], int]:
    """The first ``limit`` findings of the written violations table and ``extra`` (the subscription findings) in
    sort order, and how many there are in all: the table read a batch at a time and kept in a heap of ``limit``, so
    memory does not grow with the fleet's findings."""
    import pyarrow.dataset as ds

    total = len(extra)

    def findings() -> Iterator[dict[str, Any]]:
        nonlocal total
        yield from extra
        for batch in ds.dataset(violations, format="parquet").to_batches(columns=_VIOLATION_COLUMNS):
            for row in batch.to_pylist():
                if not expected_idleness(row):
                    total += 1
                    yield {**{k: row[k] for k in ("group", "topic", "side", "kind")}, "where": _where(row),
                           "reason": row["reason"]}  # fmt: skip

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
    progress: Callable[[str], None] | None = None,
    limit: int = DEFAULT_LIMIT,
    engine: str = "auto",
) -> Audit:
    """Run the job on the snapshot alone and collect its first ``limit`` findings (the others counted); ``out``
    None: a temporary folder, deleted after. ``engine``, ``master``, ``conf``, ``spark``: where the job runs, as
    for :func:`~rocket_rebalance.pipeline.job.run_impact` (a small snapshot in this process, in seconds).

    A failure inside Spark is raised as :class:`~rocket_rebalance.pipeline.job.ImpactError` (one line).
    """
    from rocket_rebalance.pipeline.job import run_impact, spark_failures

    if limit < 0:
        raise ValueError(f"--limit must be 0 or more, got {limit}")
    if not snapshot.is_dir():
        raise ValueError(f"snapshot {snapshot}: not a folder")
    notes = collector_notes(snapshot)  # before Spark starts: a bad file is one line at once
    subscribed = member_subscriptions(snapshot)
    inconsistent = subscription_findings(subscribed) if subscribed is not None else []
    folder = out if out is not None else Path(tempfile.mkdtemp(prefix="rr-audit-"))
    try:
        with spark_failures() as log:
            result = run_impact(
                snapshot, folder, master=master, spark=spark, report=report, progress=progress, conf=conf,
                spark_log=log, engine=engine,
            )  # fmt: skip
        findings, total = _first_findings(folder / "violations.parquet", limit, inconsistent)
    finally:
        if out is None:
            shutil.rmtree(folder, ignore_errors=True)
    rejected = result.rows.get("rejected", 0)
    return Audit(findings, bool(result.partial), notes, rejected, total - len(findings), subscribed is not None)


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
        lines.append("no findings")
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
