"""``rocket-rebalance audit``: the current state of a snapshot, one table of findings, an exit status for cron.

The job runs on the snapshot alone (no scenario, no strategy comparison, no report unless asked); the findings are
its violations (computed from the settings and member lists, and ``observed`` ones from what consumers report
holding) plus the collector's own notes: the consumers and groups it could not read (``rejected.jsonl``) and
whether the snapshot is partial (``_snapshot.json``). Exit status: 0 nothing found, 1 findings, 2 bad input or the
job could not run.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocket_rebalance.model import RETRY_GROUP_TOPIC_PREFIX, printable
from rocket_rebalance.pipeline.sides import MORE_CONSUMERS_THAN_QUEUES
from rocket_rebalance.snapshot_folder import collector_notes

__all__ = [
    "FINDING_COLUMNS",
    "Audit",
    "expected_idleness",
    "format_audit",
    "run_audit",
]

FINDING_COLUMNS = ("group", "topic", "side", "kind", "where", "reason")
"""A finding: ``where`` is the queue (``broker:queue_id``) or the consumer (its client ID) it is about."""


@dataclass
class Audit:
    """What an audit found; ``findings`` are sorted and complete (the limit applies when printing)."""

    findings: list[dict[str, Any]]
    partial: bool
    collector_rejected: list[dict[str, Any]] = field(default_factory=list)
    rejected_rows: int = 0

    @property
    def status(self) -> int:
        """0 when nothing was found, 1 for any finding, a partial snapshot or rejected input rows (what was not
        read or not checked could hide a problem, so it is not "nothing found"): the exit status."""
        return 1 if self.findings or self.partial or self.rejected_rows else 0


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


def run_audit(
    snapshot: Path,
    out: Path | None = None,
    master: str = "local[*]",
    conf: dict[str, str] | None = None,
    report: bool = False,
    spark: Any = None,
    progress: Callable[[str], None] | None = None,
) -> Audit:
    """Run the job on the snapshot alone and collect its findings; ``out`` None: a temporary folder, deleted after.

    A failure inside Spark is raised as :class:`~rocket_rebalance.pipeline.job.ImpactError` (one line).
    """
    import pyarrow.parquet as pq

    from rocket_rebalance.pipeline.job import run_impact, spark_failures

    if not snapshot.is_dir():
        raise ValueError(f"snapshot {snapshot}: not a folder")
    notes = collector_notes(snapshot)  # before Spark starts: a bad file is one line at once
    folder = out if out is not None else Path(tempfile.mkdtemp(prefix="rr-audit-"))
    try:
        with spark_failures():
            result = run_impact(
                snapshot, folder, master=master, spark=spark, report=report, progress=progress, conf=conf
            )
        columns = ["group", "topic", "side", "kind", "broker", "queue_id", "client_id", "reason"]
        rows = pq.read_table(folder / "violations.parquet", columns=columns).to_pylist()
    finally:
        if out is None:
            shutil.rmtree(folder, ignore_errors=True)
    findings = [
        {**{k: row[k] for k in ("group", "topic", "side", "kind")}, "where": _where(row), "reason": row["reason"]}
        for row in rows
        if not expected_idleness(row)
    ]
    findings.sort(key=lambda f: tuple(str(f[k] or "") for k in FINDING_COLUMNS))
    return Audit(findings, bool(result.partial), notes, result.rows.get("rejected", 0))


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
    shown, more = audit.findings[:limit], max(0, len(audit.findings) - limit)
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
    else:
        lines.append("no findings")
    if notes:
        lines += ["", "not read by the collector (rejected.jsonl):", *_table(notes, ("group", "client_id", "reason"))]
        if more_notes:
            lines.append(f"... and {more_notes} more")
    if audit.rejected_rows:
        lines.append(f"{audit.rejected_rows} input rows rejected, so not checked (see rejected.parquet with --out)")
    return "\n".join(lines)
