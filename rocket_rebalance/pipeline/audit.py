"""``rocket-rebalance audit``: the current state of a snapshot, one table of findings, an exit status for cron.

The job runs on the snapshot alone (no scenario, no strategy comparison, no report unless asked); the findings are
its violations (computed from the settings and member lists, and ``observed`` ones from what consumers report
holding) plus the collector's own notes: the consumers and groups it could not read (``rejected.jsonl``) and
whether the snapshot is partial (``_snapshot.json``). Exit status: 0 nothing found, 1 findings, 2 bad input or the
job could not run.

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

from rocket_rebalance.model import RETRY_GROUP_TOPIC_PREFIX, printable
from rocket_rebalance.pipeline.sides import MORE_CONSUMERS_THAN_QUEUES
from rocket_rebalance.snapshot_folder import collector_notes

__all__ = [
    "DEFAULT_LIMIT",
    "FINDING_COLUMNS",
    "Audit",
    "expected_idleness",
    "format_audit",
    "run_audit",
]

FINDING_COLUMNS = ("group", "topic", "side", "kind", "where", "reason")
"""A finding: ``where`` is the queue (``broker:queue_id``) or the consumer (its client ID) it is about."""


DEFAULT_LIMIT = 50
"""Findings an audit keeps (and the command prints) unless told otherwise."""


@dataclass
class Audit:
    """What an audit found: ``findings``, sorted, are the first of them; ``left_out`` counts the others."""

    findings: list[dict[str, Any]]
    partial: bool
    collector_rejected: list[dict[str, Any]] = field(default_factory=list)
    rejected_rows: int = 0
    left_out: int = 0

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


def _first_findings(violations: Path, limit: int) -> tuple[list[dict[str, Any]], int]:
    """The first ``limit`` findings of the written violations table in sort order, and how many there are in all:
    read a batch at a time and kept in a heap of ``limit``, so memory does not grow with the fleet's findings."""
    import pyarrow.dataset as ds

    total = 0

    def findings() -> Iterator[dict[str, Any]]:
        nonlocal total
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


def run_audit(
    snapshot: Path,
    out: Path | None = None,
    master: str = "local[*]",
    conf: dict[str, str] | None = None,
    report: bool = False,
    spark: Any = None,
    progress: Callable[[str], None] | None = None,
    limit: int = DEFAULT_LIMIT,
) -> Audit:
    """Run the job on the snapshot alone and collect its first ``limit`` findings (the others counted); ``out``
    None: a temporary folder, deleted after.

    A failure inside Spark is raised as :class:`~rocket_rebalance.pipeline.job.ImpactError` (one line).
    """
    from rocket_rebalance.pipeline.job import run_impact, spark_failures

    if limit < 0:
        raise ValueError(f"--limit must be 0 or more, got {limit}")
    if not snapshot.is_dir():
        raise ValueError(f"snapshot {snapshot}: not a folder")
    notes = collector_notes(snapshot)  # before Spark starts: a bad file is one line at once
    folder = out if out is not None else Path(tempfile.mkdtemp(prefix="rr-audit-"))
    try:
        with spark_failures() as log:
            result = run_impact(
                snapshot, folder, master=master, spark=spark, report=report, progress=progress, conf=conf,
                spark_log=log,
            )  # fmt: skip
        findings, total = _first_findings(folder / "violations.parquet", limit)
    finally:
        if out is None:
            shutil.rmtree(folder, ignore_errors=True)
    return Audit(findings, bool(result.partial), notes, result.rows.get("rejected", 0), total - len(findings))


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
    return "\n".join(lines)
