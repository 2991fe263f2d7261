"""The human report: a Markdown page with PNG charts, because operators would rather look than read.

The report is drawn from :class:`ReportData`, a handful of small aggregates. The Spark job computes them with Spark
(the fleet never comes to the driver, only these few hundred numbers do); :func:`report_data_from_tables` computes
the same from in-memory tables for the plain-Python reference.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "BUCKET_WIDTH",
    "CHARTS_FOLDER",
    "CHART_FILES",
    "ReportData",
    "bucket",
    "report_data_from_tables",
    "write_report",
]

BUCKET_WIDTH = 0.1
BUCKET_CAP = 3.0
TOP = 20

CHARTS_FOLDER = "charts"
BALANCE_CHART, STRATEGIES_CHART, EXPOSURE_CHART = CHART_FILES = ("balance.png", "strategies.png", "exposure.png")
"""Every file the report may draw: a new run removes exactly these from an earlier run's output, nothing else."""


def bucket(max_over_avg: float) -> float:
    """The histogram bucket of a max/avg figure: its lower edge, 0.1 wide, everything from 3.0 up in one bucket."""
    return round(min(BUCKET_CAP, int(max_over_avg / BUCKET_WIDTH + 1e-9) * BUCKET_WIDTH), 1)


@dataclass
class ReportData:
    """Everything the report shows; each list is small whatever the size of the fleet."""

    title: str
    totals: dict[str, Any]
    balance_side: str
    balance_histogram: list[tuple[float, int]]  # (bucket lower edge, group-topic count)
    strategies: list[dict[str, Any]]  # strategy, groups, queues, moved, minimum, exposure
    top_exposure: list[dict[str, Any]]  # group, strategy_before, strategy_after, moved, minimum, exposure, paused
    violation_reasons: list[dict[str, Any]]  # side, kind, reason, count
    rejected_reasons: list[dict[str, Any]]  # side, table, reason, count
    notes: list[str] = field(default_factory=list)


def report_data_from_tables(tables: Mapping[str, Sequence[Mapping[str, Any]]], title: str, compare: bool) -> ReportData:
    """The report's aggregates from flat output tables held in memory (the reference path)."""
    side = "after" if compare else "before"
    groups = tables["groups"]
    histogram = Counter(
        bucket(r["max_over_avg"]) for r in tables["balance"] if r["side"] == side and r["consumers"] and r["queues"]
    )
    per_strategy: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"groups": 0, "queues": 0, "moved": 0, "minimum": 0, "exposure": 0}
    )
    for row in tables["comparison"]:
        entry = per_strategy[row["strategy"]]
        entry["groups"] += 1
        for key in ("queues", "moved", "minimum", "exposure"):
            entry[key] += row[key]
    strategies = [{"strategy": name, **values} for name, values in sorted(per_strategy.items())]
    top = sorted(groups, key=lambda r: (-r["exposure"], -r["moved"], r["group"]))[:TOP]
    reasons = Counter((r["side"], r["kind"], r["reason"]) for r in tables["violations"])
    rejected = Counter((r["side"], r["table"], r["reason"]) for r in tables["rejected"])
    totals = fleet_totals(
        groups, len(tables["rejected"]), Counter((r["side"], r["kind"]) for r in tables["violations"])
    )
    return ReportData(
        title,
        totals,
        side,
        sorted(histogram.items()),
        strategies,
        [
            {k: r[k] for k in ("group", "strategy_before", "strategy_after", "moved", "minimum", "exposure", "paused")}
            for r in top
        ],
        [
            {"side": s, "kind": k, "reason": reason, "count": n}
            for (s, k, reason), n in sorted(reasons.items(), key=lambda item: (-item[1], item[0]))[:TOP]
        ],
        [
            {"side": s, "table": t, "reason": reason, "count": n}
            for (s, t, reason), n in sorted(rejected.items(), key=lambda item: (-item[1], item[0]))[:TOP]
        ],
    )


def fleet_totals(
    groups: Sequence[Mapping[str, Any]], rejected: int, violations: Mapping[tuple[str, str], int]
) -> dict[str, Any]:
    """Fleet-wide sums over the ``groups`` table (shared by both paths, so the two reports say the same)."""
    totals: dict[str, Any] = {
        "groups": len(groups),
        "groups_rebalancing": sum(1 for r in groups if r["rebalances"]),
        "consumers_before": sum(r["consumers_before"] or 0 for r in groups),
        "queues_before": sum(r["queues_before"] or 0 for r in groups),
        "moved": sum(r["moved"] for r in groups),
        "minimum": sum(r["minimum"] for r in groups),
        "exposure": sum(r["exposure"] for r in groups),
        "paused": sum(r["paused"] for r in groups),
        "observed_violations": sum(r["observed_violations"] or 0 for r in groups),
        "rejected_rows": rejected,
    }
    for (side, kind), count in sorted(violations.items()):
        totals[f"{kind}_{side}"] = count
    return totals


def _charts(data: ReportData, folder: Path) -> list[tuple[str, str]]:
    """Draw the PNG charts with matplotlib's Agg backend (no display needed); returns (caption, file name)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    charts: list[tuple[str, str]] = []

    def save(fig: Any, name: str, caption: str) -> None:
        fig.tight_layout()
        fig.savefig(folder / name, dpi=100)
        plt.close(fig)
        charts.append((caption, f"{folder.name}/{name}"))

    if data.balance_histogram:
        fig, ax = plt.subplots(figsize=(7, 3.5))
        edges = [edge for edge, _ in data.balance_histogram]
        ax.bar(edges, [count for _, count in data.balance_histogram], width=BUCKET_WIDTH * 0.9, align="edge")
        ax.set_xlabel("max / avg queues per consumer (3.0 = 3.0 and above)")
        ax.set_ylabel("group-topics")
        ax.set_title(f"Balance per group and topic ({data.balance_side})")
        save(fig, BALANCE_CHART, "Distribution of max/avg")
    if data.strategies:
        fig, ax = plt.subplots(figsize=(7, 3.5))
        names = [row["strategy"] for row in data.strategies]
        moved = [row["moved"] / row["queues"] if row["queues"] else 0.0 for row in data.strategies]
        minimum = [row["minimum"] / row["queues"] if row["queues"] else 0.0 for row in data.strategies]
        positions = range(len(names))
        ax.bar([p - 0.2 for p in positions], moved, width=0.4, label="moved")
        ax.bar([p + 0.2 for p in positions], minimum, width=0.4, label="minimum possible")
        ax.set_xticks(list(positions), names)
        ax.set_ylabel("share of queues")
        ax.set_title("Moved share per strategy, fleet-wide")
        ax.legend()
        save(fig, STRATEGIES_CHART, "Moved share per strategy")
    exposed = [row for row in data.top_exposure if row["exposure"]]
    if exposed:
        fig, ax = plt.subplots(figsize=(7, max(2.5, 0.3 * len(exposed) + 1)))
        ax.barh([row["group"] for row in reversed(exposed)], [row["exposure"] for row in reversed(exposed)])
        ax.set_xlabel("messages at risk of re-delivery")
        ax.set_title("Top groups by re-delivery exposure")
        save(fig, EXPOSURE_CHART, "Top groups by exposure")
    return charts


def _table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    if not rows:
        return ["(none)"]
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for row in rows:
        cells = [f"{row[k]:.3f}" if isinstance(row[k], float) else str(row[k]) for k in keys]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return lines


def write_report(data: ReportData, out: Path) -> Path:
    """Write ``report.md`` and its charts into ``out``; returns the report's path."""
    charts = _charts(data, out / CHARTS_FOLDER)
    lines = [f"# Fleet impact: {data.title}", ""]
    lines += data.notes + ([""] if data.notes else [])
    lines += ["## Fleet totals", "", *_table([{"figure": k, "value": v} for k, v in data.totals.items()]), ""]
    for caption, image in charts:
        lines += [f"![{caption}]({image})", ""]
    lines += ["## Strategy comparison (same change under each strategy)", "", *_table(data.strategies), ""]
    lines += ["## Top groups by re-delivery exposure", "", *_table(data.top_exposure), ""]
    lines += ["## Violations by reason", "", *_table(data.violation_reasons), ""]
    lines += ["## Rejected rows by reason", "", *_table(data.rejected_reasons), ""]
    path = out / "report.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
