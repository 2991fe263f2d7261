"""The human report: a Markdown page with PNG charts, because operators would rather look than read.

The report is drawn from :class:`ReportData`, a handful of small aggregates. The executors compute them as
:class:`ReportParts` from the rows they write and the driver adds the parts up (the fleet never comes to the
driver, only these few hundred numbers do).
"""

from __future__ import annotations

import heapq
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocket_rebalance.pipeline.rows import Table

__all__ = [
    "BUCKET_WIDTH",
    "CHARTS_FOLDER",
    "CHART_FILES",
    "ReportData",
    "ReportParts",
    "bucket",
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


SUMS = (
    "consumers_before",
    "queues_before",
    "moved",
    "minimum",
    "exposure",
    "paused",
    "observed_violations",
)
"""Columns of the ``groups`` table the fleet totals add up (a null counts as 0)."""

TOP_COLUMNS = ("group", "strategy_before", "strategy_after", "moved", "minimum", "exposure", "paused")
"""The ``groups`` columns of the top groups by exposure."""

STRATEGY_SUMS = ("queues", "moved", "minimum", "exposure")
"""Columns of the ``comparison`` table added up per strategy."""


def _top_key(row: Sequence[Any]) -> tuple[int, int, str]:
    return (-row[5], -row[3], row[0])  # exposure, moved (both descending), then the group


@dataclass
class ReportParts:
    """The report's aggregates over the output rows of some groups, kept so that parts over disjoint groups add
    up: each executor task computes one from the rows it writes and the driver merges them, so no Spark job reads
    the written tables back (those jobs took a quarter of a 10,000-group run; benchmarks/RESULTS.md).

    ``side`` is the side whose balance the histogram shows (after when comparing)."""

    side: str
    groups: int = 0
    rebalancing: int = 0
    sums: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SUMS, 0))
    violations: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # (side, kind, reason)
    histogram: Counter[float] = field(default_factory=Counter)
    strategies: dict[str, list[int]] = field(default_factory=dict)  # groups, then STRATEGY_SUMS
    top: list[tuple[Any, ...]] = field(default_factory=list)  # TOP_COLUMNS, at most TOP, best first
    rejected: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # (side, table, reason)

    def add(self, tables: Mapping[str, Table]) -> None:
        """Add the rows of ``tables`` (an analysed batch of groups)."""
        groups = tables["groups"]
        column = _columns(groups)
        self.groups += len(groups)
        self.rebalancing += sum(column["rebalances"])
        for name in SUMS:
            self.sums[name] += sum(filter(None, column[name]))
        rows = zip(*(column[name] for name in TOP_COLUMNS), strict=True)
        self.top = heapq.nsmallest(TOP, [*self.top, *rows], key=_top_key)
        violations = _columns(tables["violations"])
        self.violations.update(zip(violations["side"], violations["kind"], violations["reason"], strict=True))
        balance = _columns(tables["balance"])
        self.histogram.update(
            bucket(worst)
            for side, consumers, queues, worst in zip(
                balance["side"], balance["consumers"], balance["queues"], balance["max_over_avg"], strict=True
            )
            if side == self.side and consumers and queues
        )
        comparison = _columns(tables["comparison"])
        for strategy, *values in zip(comparison["strategy"], *(comparison[n] for n in STRATEGY_SUMS), strict=True):
            entry = self.strategies.setdefault(strategy, [0] * (1 + len(STRATEGY_SUMS)))
            entry[0] += 1
            for position, value in enumerate(values, 1):
                entry[position] += value
        rejected = _columns(tables["rejected"])
        self.rejected.update(zip(rejected["side"], rejected["table"], rejected["reason"], strict=True))

    def merge(self, other: ReportParts) -> None:
        """Add another part (over other groups)."""
        self.groups += other.groups
        self.rebalancing += other.rebalancing
        for name, value in other.sums.items():
            self.sums[name] += value
        self.violations.update(other.violations)
        self.histogram.update(other.histogram)
        for strategy, values in other.strategies.items():
            entry = self.strategies.setdefault(strategy, [0] * len(values))
            self.strategies[strategy] = [a + b for a, b in zip(entry, values, strict=True)]
        self.top = heapq.nsmallest(TOP, [*self.top, *other.top], key=_top_key)
        self.rejected.update(other.rejected)

    def to_json(self) -> str:
        """The part as one JSON text, as a task hands it to the driver."""
        return json.dumps(
            {
                "side": self.side,
                "groups": self.groups,
                "rebalancing": self.rebalancing,
                "sums": self.sums,
                "violations": [[*key, count] for key, count in self.violations.items()],
                "histogram": [[edge, count] for edge, count in self.histogram.items()],
                "strategies": self.strategies,
                "top": [list(row) for row in self.top],
                "rejected": [[*key, count] for key, count in self.rejected.items()],
            }
        )

    @classmethod
    def from_json(cls, text: str) -> ReportParts:
        found = json.loads(text)
        return cls(
            found["side"],
            found["groups"],
            found["rebalancing"],
            found["sums"],
            Counter({(side, kind, reason): count for side, kind, reason, count in found["violations"]}),
            Counter({edge: count for edge, count in found["histogram"]}),
            found["strategies"],
            [tuple(row) for row in found["top"]],
            Counter({(side, table, reason): count for side, table, reason, count in found["rejected"]}),
        )

    def data(self, title: str) -> ReportData:
        """The report's data: fleet totals, histogram, strategies, top groups and the reasons counted."""
        totals: dict[str, Any] = {"groups": self.groups, "groups_rebalancing": self.rebalancing, **self.sums}
        totals["rejected_rows"] = sum(self.rejected.values())
        by_kind: Counter[tuple[str, str]] = Counter()
        for (side, kind, _), count in self.violations.items():
            by_kind[(side, kind)] += count
        for (side, kind), count in sorted(by_kind.items()):
            totals[f"{kind}_{side}"] = count
        return ReportData(
            title,
            totals,
            self.side,
            sorted(self.histogram.items()),
            [
                {"strategy": name, **dict(zip(("groups", *STRATEGY_SUMS), values, strict=True))}
                for name, values in sorted(self.strategies.items())
            ],
            [dict(zip(TOP_COLUMNS, row, strict=True)) for row in self.top],
            _counted(self.violations, ("side", "kind", "reason")),
            _counted(self.rejected, ("side", "table", "reason")),
        )


def _columns(table: Table) -> dict[str, list[Any]]:
    """A table's columns by name, ``group`` included."""
    return dict(zip(("group", *table.fields), table.columns, strict=True))


def _counted(counts: Counter[tuple[str, str, str]], names: tuple[str, str, str]) -> list[dict[str, Any]]:
    """The ``TOP`` most frequent keys, most frequent first (then by key), with their counts."""
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:TOP]
    return [{**dict(zip(names, key, strict=True)), "count": count} for key, count in ranked]


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
