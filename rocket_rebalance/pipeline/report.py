"""The human report: ``report.md`` and a self-contained ``report.html`` with the same words and pictures inside.

People read the first lines of a report and look at its pictures, so it starts with plain sentences (what changes,
how many groups rebalance, how many queues move, how many messages may come again, the worst groups by name), then
the pictures (balance before and after, the groups at most risk, who owns which queue in the worst of them), then
tables whose columns are each explained once in words. The HTML page needs no network (its pictures are inline
``data:`` URIs, its style inline, no script), so it can be mailed or attached to a change ticket as one file.

The report is drawn from :class:`ReportData`, a handful of small aggregates. The executors compute them as
:class:`ReportParts` from the rows they write and the driver adds the parts up (the fleet never comes to the
driver, only these few hundred numbers and the worst groups' ownership of one topic each do).
"""

from __future__ import annotations

import base64
import heapq
import html
import json
import re
import textwrap
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocket_rebalance.model import MessageQueue
from rocket_rebalance.pictures import (
    MAX_GRID_QUEUES,
    OwnershipGrid,
    grid_figure,
    ownership_grid,
    png_bytes,
    pyplot,
    wrap_label,
)
from rocket_rebalance.pipeline.rows import Table

__all__ = [
    "BUCKET_WIDTH",
    "CHARTS_FOLDER",
    "CHART_FILES",
    "GRIDS",
    "REPORT_FILES",
    "ReportData",
    "ReportParts",
    "bucket",
    "write_report",
]

BUCKET_WIDTH = 0.1
BUCKET_CAP = 3.0
TOP = 20
GRIDS = 5
"""How many of the worst groups get an ownership grid (those of the top groups whose queues move)."""

CHARTS_FOLDER = "charts"
BALANCE_CHART, STRATEGIES_CHART, EXPOSURE_CHART, OWNERSHIP_CHART = CHART_FILES = (
    "balance.png",
    "strategies.png",
    "exposure.png",
    "ownership.png",
)
"""Every file the report may draw: a new run removes exactly these from an earlier run's output, nothing else."""

REPORT_FILES = ("report.md", "report.html")
"""The report's pages, written beside each other in the output folder."""


def bucket(max_over_avg: float) -> float:
    """The histogram bucket of a max/avg figure: its lower edge, 0.1 wide, everything from 3.0 up in one bucket."""
    return round(min(BUCKET_CAP, int(max_over_avg / BUCKET_WIDTH + 1e-9) * BUCKET_WIDTH), 1)


@dataclass
class ReportData:
    """Everything the report shows; each list is small whatever the size of the fleet."""

    title: str
    totals: dict[str, Any]
    balance_side: str  # the side the report speaks of: after when comparing, else before
    balance_histogram: dict[str, list[tuple[float, int]]]  # per side: (bucket lower edge, group-topic count)
    strategies: list[dict[str, Any]]  # strategy, groups, queues, moved, minimum, exposure
    top_exposure: list[dict[str, Any]]  # group, strategy_before, strategy_after, moved, minimum, exposure, paused
    violation_reasons: list[dict[str, Any]]  # side, kind, reason, count
    rejected_reasons: list[dict[str, Any]]  # side, table, reason, count
    grids: list[OwnershipGrid] = field(default_factory=list)  # the worst groups' most moved topic, worst first
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

    ``side`` is the side the report speaks of (after when comparing); the histogram counts both sides, so the
    balance chart overlays before and after. ``grids`` holds, for the worst groups whose queues move (at most
    :data:`GRIDS`), the ownership of one topic (the one where most queues move): its name, its queue count and
    its assignment rows, at most :data:`~rocket_rebalance.pictures.MAX_GRID_QUEUES` queues."""

    side: str
    groups: int = 0
    rebalancing: int = 0
    sums: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SUMS, 0))
    violations: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # (side, kind, reason)
    histogram: Counter[tuple[str, float]] = field(default_factory=Counter)  # (side, bucket)
    strategies: dict[str, list[int]] = field(default_factory=dict)  # groups, then STRATEGY_SUMS
    top: list[tuple[Any, ...]] = field(default_factory=list)  # TOP_COLUMNS, at most TOP, best first
    rejected: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # (side, table, reason)
    grids: dict[str, dict[str, Any]] = field(default_factory=dict)  # group -> topic, queues, rows

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
        for group in self._grid_groups().intersection(column["group"]):
            self.grids[group] = _grid_of(tables, group)
        self._keep_grids()
        violations = _columns(tables["violations"])
        self.violations.update(zip(violations["side"], violations["kind"], violations["reason"], strict=True))
        balance = _columns(tables["balance"])
        self.histogram.update(
            (side, bucket(worst))
            for side, consumers, queues, worst in zip(
                balance["side"], balance["consumers"], balance["queues"], balance["max_over_avg"], strict=True
            )
            if consumers and queues
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
        self.grids.update(other.grids)
        self._keep_grids()

    def _grid_groups(self) -> set[str]:
        """The groups whose grids the report draws: the first :data:`GRIDS` top groups with moved queues."""
        return set([row[0] for row in self.top if row[3]][:GRIDS])

    def _keep_grids(self) -> None:
        wanted = self._grid_groups()
        self.grids = {group: grid for group, grid in self.grids.items() if group in wanted}

    def to_json(self) -> str:
        """The part as one JSON text, as a task hands it to the driver."""
        return json.dumps(
            {
                "side": self.side,
                "groups": self.groups,
                "rebalancing": self.rebalancing,
                "sums": self.sums,
                "violations": [[*key, count] for key, count in self.violations.items()],
                "histogram": [[side, edge, count] for (side, edge), count in self.histogram.items()],
                "strategies": self.strategies,
                "top": [list(row) for row in self.top],
                "rejected": [[*key, count] for key, count in self.rejected.items()],
                "grids": self.grids,
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
            Counter({(side, edge): count for side, edge, count in found["histogram"]}),
            found["strategies"],
            [tuple(row) for row in found["top"]],
            Counter({(side, table, reason): count for side, table, reason, count in found["rejected"]}),
            found["grids"],
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
            {
                side: sorted((edge, count) for (of, edge), count in self.histogram.items() if of == side)
                for side in sorted({side for side, _ in self.histogram})
            },
            [
                {"strategy": name, **dict(zip(("groups", *STRATEGY_SUMS), values, strict=True))}
                for name, values in sorted(self.strategies.items())
            ],
            [dict(zip(TOP_COLUMNS, row, strict=True)) for row in self.top],
            _counted(self.violations, ("side", "kind", "reason")),
            _counted(self.rejected, ("side", "table", "reason")),
            [_grid(row[0], self.grids[row[0]]) for row in self.top if self.grids.get(row[0], {}).get("rows")],
        )


def _columns(table: Table) -> dict[str, list[Any]]:
    """A table's columns by name, ``group`` included."""
    return dict(zip(("group", *table.fields), table.columns, strict=True))


def _counted(counts: Counter[tuple[str, str, str]], names: tuple[str, str, str]) -> list[dict[str, Any]]:
    """The ``TOP`` most frequent keys, most frequent first (then by key), with their counts."""
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:TOP]
    return [{**dict(zip(names, key, strict=True)), "count": count} for key, count in ranked]


def _span(groups: list[str], group: str) -> range:
    """The rows of ``group`` in a table's group column (a group's rows are together: ``close_group``); none when
    the group has no row there."""
    if group not in groups:
        return range(0)
    start = groups.index(group)
    return range(start, start + groups.count(group))


def _grid_of(tables: Mapping[str, Table], group: str) -> dict[str, Any]:
    """The ownership rows of ``group``'s topic where most queues move (then the most exposure, then by name)."""
    movement = _columns(tables["movement"])
    rows = _span(movement["group"], group)
    moves = [(-movement["moved"][i], -movement["exposure"][i], movement["topic"][i]) for i in rows]
    topic = min(moves)[2] if moves else None
    assignments = _columns(tables["assignments"])
    found = [
        [assignments["side"][i], assignments["broker"][i], assignments["queue_id"][i], assignments["owner"][i]]
        for i in _span(assignments["group"], group)
        if assignments["topic"][i] == topic
    ]
    queues = sorted({MessageQueue(topic or "", broker, queue_id) for _, broker, queue_id, _ in found})
    drawn = {(mq.broker_name, mq.queue_id) for mq in queues[:MAX_GRID_QUEUES]}
    return {"topic": topic, "queues": len(queues), "rows": [row for row in found if (row[1], row[2]) in drawn]}


def _grid(group: str, found: Mapping[str, Any]) -> OwnershipGrid:
    topic = found["topic"] or ""
    pairs = {
        side: [
            (MessageQueue(topic, broker, queue_id), owner)
            for of, broker, queue_id, owner in found["rows"]
            if of == side
        ]
        for side in ("before", "after")
    }
    grid = ownership_grid(f"{group}, topic {topic}", pairs["before"], pairs["after"])
    return OwnershipGrid(
        grid.title, grid.consumers, grid.queues, grid.before, grid.after, found["queues"] - len(grid.queues)
    )


WIDTH = 118
"""The longest line the Markdown report writes (a table row included): it reads in a terminal and a diff."""

COLUMNS: dict[str, tuple[str, str]] = {
    "strategy": ("strategy", "the allocation strategy applied to every group (`current`: each group's own)"),
    "groups": ("groups", "how many consumer groups the row adds up"),
    "queues": ("queues", "the groups' queues after the change, every subscribed topic counted"),
    "moved": ("queues moved", "queues whose owner changes, so each is paused and handed over"),
    "minimum": (
        "least moves",
        "the fewest queues any balanced split must move for this change. Queues moved can be below it: consistent "
        "hashing does not balance (a consumer may keep more than its fair share), so it moves fewer queues than "
        "balancing needs and pays in balance instead",
    ),
    "exposure": (
        "messages again",
        "messages that may be delivered a second time: on each moved queue, those consumed but not yet committed",
    ),
    "group": ("group", "the consumer group"),
    "strategy_change": ("its strategy", "the group's own strategy, before → after when the change switches it"),
    "paused": ("queues paused", "queues nobody pulls for a while: those that move and those left without owner"),
    "count": ("count", "how many rows or queues have this reason"),
    "side": ("side", "before or after the change"),
    "kind": ("problem", "what is wrong: a queue with two owners or none, a consumer holding no queue, and the like"),
    "table": ("table", "the snapshot table the rejected row came from"),
    "reason": ("reason", "why, in the analysis' own words"),
}
"""Each table column's heading and its explanation, given once under the first table that has it."""

FIGURES = {
    "groups": "consumer groups in the snapshot",
    "groups_rebalancing": "groups that rebalance",
    "consumers_before": "consumers before the change",
    "queues_before": "queues before the change",
    "moved": "queues that move to another consumer",
    "minimum": "least moves a balanced split needs",
    "exposure": "messages that may be delivered again",
    "paused": "queues paused while they change hands",
    "observed_violations": "problems seen in what consumers report owning",
    "rejected_rows": "snapshot rows set aside as unreadable",
}
"""The fleet totals' figures in words."""

PROBLEMS = {
    "double_owned": ("queue with two or more owners", "queues with two or more owners"),
    "unowned": ("queue with no owner", "queues with no owner"),
    "idle_consumer": ("consumer holding no queue", "consumers holding no queue"),
    "unknown_view": ("consumer whose member list is unknown", "consumers whose member list is unknown"),
}
"""The analysis' kinds of ownership problem in words (an unknown kind is shown with its spaces back)."""


def _problem(kind: str, count: int = 2) -> str:
    """The problem ``kind`` in words, for ``count`` of them."""
    one, many = PROBLEMS.get(kind, (kind.replace("_", " "),) * 2)
    return one if count == 1 else many


def _figure(key: str) -> str:
    """A fleet total's name in words; ``<kind>_<side>`` counts as the problem and its side."""
    if key in FIGURES:
        return FIGURES[key]
    kind, _, side = key.rpartition("_")
    return f"{_problem(kind)} ({side})"


def _count(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def _plural(count: int, one: str, many: str) -> str:
    return f"{count:,} {one if count == 1 else many}"


def sentences(data: ReportData) -> list[str]:
    """What a person reads first: what changes, how many groups rebalance and queues move, how many messages may
    come again, the worst groups by name, the problems left, the rows set aside."""
    totals = data.totals
    said = [f"What changes: {data.title}."]
    groups = totals.get("groups", 0)
    if data.balance_side == "before":
        said.append(
            "No change was given, so this report describes the snapshot as it is: "
            f"{_plural(groups, 'group', 'groups')}."
        )
    else:
        rebalancing, moved = totals.get("groups_rebalancing", 0), totals.get("moved", 0)
        rebalance = "rebalances" if rebalancing == 1 else "rebalance"
        move = "moves" if moved == 1 else "move"
        queues = _plural(totals.get("queues_before", 0), "queue", "queues")
        said.append(
            f"{rebalancing:,} of {_plural(groups, 'group', 'groups')} {rebalance}; {moved:,} of {queues} {move} to "
            f"another consumer (a balanced split needs at least {totals.get('minimum', 0):,}), and "
            f"{_plural(totals.get('paused', 0), 'queue pauses', 'queues pause')} while they change hands."
        )
        said.append(
            f"About {_plural(totals.get('exposure', 0), 'message', 'messages')} may be delivered again: those consumed "
            "but not yet committed on the queues that move."
        )
        worst = [row for row in data.top_exposure if row["exposure"] or row["moved"]][:3]
        if worst:
            named = ", ".join(
                f"{row['group']} ({_plural(row['exposure'], 'message', 'messages')} again, "
                f"{_plural(row['moved'], 'queue moves', 'queues move')})"
                for row in worst
            )
            said.append(f"The groups at most risk: {named}.")
        else:
            said.append("No group moves a queue or has a message at risk.")
    for side in ("after", "before") if data.balance_side == "after" else ("before",):
        found = [
            f"{count:,} {_problem(key[: -len(side) - 1], count)}"
            for key, count in totals.items()
            if key.endswith(f"_{side}") and key not in FIGURES and count
        ]
        if found:
            said.append(f"{'After' if side == 'after' else 'Before'} the change: {', '.join(found)}.")
    if totals.get("rejected_rows"):
        said.append(
            f"{_plural(totals['rejected_rows'], 'snapshot row was', 'snapshot rows were')} set aside as unreadable "
            "(see the rejected rows below)."
        )
    return said


def _cell(value: Any) -> str:
    """A value as a table shows it: a dash for a missing value (never ``None``), floats to three places."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}"
    return _count(value)


def _shorten(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, its middle replaced by ``…`` (a name's start and end say most)."""
    if len(text) <= width:
        return text
    keep = width - 1
    return text[: (keep + 1) // 2] + "…" + text[len(text) - keep // 2 :]


def _md_row(cells: list[str]) -> str:
    """A Markdown table row of at most :data:`WIDTH` characters: the longest texts shortened in the middle."""
    cells = [cell.replace("|", "\\|") for cell in cells]
    while True:
        line = "| " + " | ".join(cells) + " |"
        longest = max(range(len(cells)), key=lambda i: len(cells[i]))
        if len(line) <= WIDTH or len(cells[longest]) <= 12:
            return line
        cells[longest] = _shorten(cells[longest], max(12, len(cells[longest]) - (len(line) - WIDTH)))


def _rows(table: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> list[list[str]]:
    return [[_cell(row[key]) for key in keys] for row in table]


class _Columns:
    """The columns explained so far: each column's words are given once, under the first table that has it."""

    def __init__(self) -> None:
        self.explained: set[str] = set()

    def new(self, keys: Sequence[str]) -> list[tuple[str, str]]:
        fresh = [key for key in keys if key not in self.explained]
        self.explained.update(fresh)
        return [COLUMNS[key] for key in fresh]


def _md_table(keys: Sequence[str], rows: list[list[str]], columns: _Columns) -> list[str]:
    """A table, or for a table of reasons (long texts) a list with each reason wrapped; then the words for the
    columns not explained yet."""
    if not rows:
        return ["(none)"]
    if keys[-1] == "reason":
        headings = [COLUMNS[key][0] for key in keys]
        lines = [f"Each line: {', '.join(headings[:-1])}: {headings[-1]}.", ""]
        for *fields, reason in rows:
            lines += textwrap.wrap(
                f"- **{fields[0]}** {', '.join(fields[1:])}: {reason}", WIDTH, subsequent_indent="  "
            )
    else:
        lines = [_md_row([COLUMNS[key][0] for key in keys]), "|" + "---|" * len(keys)]
        lines += [_md_row(row) for row in rows]
        if any("…" in line for line in lines):
            lines += ["", "Long names are shortened in the middle here; report.html shows them whole."]
    words = [f"**{name}**: {meaning}." for name, meaning in columns.new(keys)]
    return [*lines, "", *textwrap.wrap(" ".join(words), WIDTH)] if words else lines


@dataclass(frozen=True)
class _Table:
    """One of the report's tables: its title, its columns and its rows (as shown)."""

    title: str
    keys: tuple[str, ...]
    rows: list[list[str]]


def _tables(data: ReportData) -> list[_Table]:
    top = [
        {
            **row,
            "strategy_change": row["strategy_before"]
            if row["strategy_before"] == row["strategy_after"]
            else f"{_cell(row['strategy_before'])} → {_cell(row['strategy_after'])}",
        }
        for row in data.top_exposure
    ]
    top_keys = ("group", "strategy_change", "moved", "minimum", "exposure", "paused")
    strategy_keys = ("strategy", "groups", "queues", "moved", "minimum", "exposure")
    violation_keys = ("count", "side", "kind", "reason")
    violations = [{**row, "kind": _problem(row["kind"])} for row in data.violation_reasons]
    rejected_keys = ("count", "side", "table", "reason")
    return [
        _Table("Groups at most risk (by messages that may come again)", top_keys, _rows(top, top_keys)),
        _Table(
            "Strategy comparison: the same change under each strategy",
            strategy_keys,
            _rows(data.strategies, strategy_keys),
        ),
        _Table("Ownership problems by reason", violation_keys, _rows(violations, violation_keys)),
        _Table("Rejected snapshot rows by reason", rejected_keys, _rows(data.rejected_reasons, rejected_keys)),
    ]


@dataclass(frozen=True)
class _Chart:
    """A drawn chart: its file name under ``charts/``, its caption, and the PNG."""

    name: str
    caption: str
    png: bytes


def _charts(data: ReportData) -> dict[str, _Chart]:
    """Every chart the data has something for, by file name, drawn with matplotlib's Agg backend."""
    plt = pyplot("the impact report's charts")
    charts: dict[str, _Chart] = {}

    def keep(fig: Any, name: str, caption: str) -> None:
        fig.tight_layout()
        charts[name] = _Chart(name, caption, png_bytes(fig))

    if data.balance_histogram:
        keep(balance_chart(plt, data), BALANCE_CHART, "Balance per group and topic, before and after")
    if data.strategies:
        keep(strategies_chart(plt, data), STRATEGIES_CHART, "Share of queues moved per strategy")
    if any(row["exposure"] for row in data.top_exposure):
        keep(exposure_chart(plt, data), EXPOSURE_CHART, "Groups at most risk: messages that may be delivered again")
    if data.grids:
        fig = grid_figure(data.grids, what="the impact report's ownership grids")
        charts[OWNERSHIP_CHART] = _Chart(OWNERSHIP_CHART, "Who owns which queue in the worst groups", png_bytes(fig))
    return charts


def exposure_chart(plt: Any, data: ReportData) -> Any:
    """The top groups' messages at risk, one bar each; long group names wrapped, the figure as tall as they need."""
    exposed = [row for row in reversed(data.top_exposure) if row["exposure"]]
    labels = [wrap_label(_shorten(row["group"], 60), 30) for row in exposed]
    lines = sum(label.count("\n") + 1 for label in labels)
    fig, ax = plt.subplots(figsize=(8, max(2.5, 0.22 * lines + 0.3 * len(labels) + 1)))
    ax.barh(range(len(labels)), [row["exposure"] for row in exposed], tick_label=labels)
    ax.set_xlabel("messages that may be delivered again")
    ax.set_title("Groups at most risk")
    return fig


def balance_chart(plt: Any, data: ReportData) -> Any:
    """The balance histogram, before and after overlaid on one axis (after filled, before as an outline)."""
    fig, ax = plt.subplots(figsize=(8, 3.8))
    styles = {
        "before": {"fill": False, "edgecolor": "tab:gray", "hatch": "//", "label": "before"},
        "after": {"color": "tab:blue", "alpha": 0.6, "label": "after"},
    }
    for side in ("after", "before"):
        found = data.balance_histogram.get(side)
        if found:
            edges = [edge for edge, _ in found]
            ax.bar(edges, [count for _, count in found], width=BUCKET_WIDTH * 0.9, align="edge", **styles[side])
    ax.set_xlabel("max / avg queues per consumer (1.0 = perfectly balanced; 3.0 = 3.0 and above)")
    ax.set_ylabel("group-topics")
    ax.set_title("Balance per group and topic, before and after")
    ax.legend()
    return fig


def strategies_chart(plt: Any, data: ReportData) -> Any:
    """Moved and least-moves shares per strategy; the x labels wrapped, and the figure as wide as they need."""
    names = [wrap_label(row["strategy"]) for row in data.strategies]
    width = max(7.0, 1.3 * len(names) + 1.5)
    fig, ax = plt.subplots(figsize=(width, 4.2))
    moved = [row["moved"] / row["queues"] if row["queues"] else 0.0 for row in data.strategies]
    minimum = [row["minimum"] / row["queues"] if row["queues"] else 0.0 for row in data.strategies]
    positions = range(len(names))
    ax.bar([p - 0.2 for p in positions], moved, width=0.4, label="queues moved")
    ax.bar([p + 0.2 for p in positions], minimum, width=0.4, label="least moves (a balanced split)")
    ax.set_xticks(list(positions), names, fontsize=8)
    ax.set_ylabel("share of queues")
    ax.set_title("Share of queues moved per strategy, fleet-wide")
    ax.legend(fontsize=8)
    return fig


def _markdown(data: ReportData, charts: Mapping[str, _Chart]) -> str:
    lines = [f"# Fleet impact: {_shorten(data.title, WIDTH - 16)}", ""]
    for note in data.notes:
        lines += [*textwrap.wrap(note, WIDTH), ""]
    for sentence in sentences(data):
        lines += [*textwrap.wrap(sentence, WIDTH), ""]
    for name in (BALANCE_CHART, EXPOSURE_CHART, OWNERSHIP_CHART, STRATEGIES_CHART):
        if name in charts:
            lines += [f"![{charts[name].caption}]({CHARTS_FOLDER}/{name})", ""]
    columns = _Columns()
    for table in _tables(data):
        lines += [f"## {table.title}", "", *_md_table(table.keys, table.rows, columns), ""]
    lines += ["## Fleet totals", "", "| figure | value |", "|---|---|"]
    lines += [_md_row([_figure(key), _count(value)]) for key, value in data.totals.items()]
    return "\n".join(lines) + "\n"


_STYLE = """
body { font-family: sans-serif; max-width: 72rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
p.said { font-size: 1.1rem; margin: 0.4rem 0; }
table { border-collapse: collapse; margin: 0.5rem 0; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top;
         overflow-wrap: anywhere; max-width: 32rem; }
td.number { text-align: right; }
img { max-width: 100%; height: auto; display: block; margin: 0.5rem 0; }
.columns { color: #555; font-size: 0.9rem; }
"""
_NO_NETWORK = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
"""The page's Content Security Policy: it may load nothing from anywhere, only its own inline pictures and style."""


def _inline(text: str) -> str:
    """A note's Markdown emphasis and code as HTML, the rest escaped."""
    escaped = html.escape(text)
    escaped = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", escaped)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", escaped)


def _html_image(chart: _Chart) -> str:
    data = base64.b64encode(chart.png).decode("ascii")
    return f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(chart.caption)}"></figure>'


def _html_table(table: _Table, columns: _Columns) -> list[str]:
    if not table.rows:
        return ["<p>(none)</p>"]
    head = "".join(f"<th>{html.escape(COLUMNS[key][0])}</th>" for key in table.keys)
    body = [
        "<tr>"
        + "".join(
            f'<td class="number">{html.escape(cell)}</td>'
            if cell.replace(",", "").replace(".", "").isdigit()
            else f"<td>{html.escape(cell)}</td>"
            for cell in row
        )
        + "</tr>"
        for row in table.rows
    ]
    words = [f"<strong>{html.escape(name)}</strong>: {_inline(meaning)}." for name, meaning in columns.new(table.keys)]
    explained = [f'<p class="columns">{" ".join(words)}</p>'] if words else []
    return [f"<table><thead><tr>{head}</tr></thead><tbody>", *body, "</tbody></table>", *explained]


def _html(data: ReportData, charts: Mapping[str, _Chart]) -> str:
    title = html.escape(f"Fleet impact: {data.title}")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_NO_NETWORK}">',
        f"<title>{title}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{title}</h1>",
        *(f"<p>{_inline(note)}</p>" for note in data.notes),
        *(f'<p class="said">{html.escape(sentence)}</p>' for sentence in sentences(data)),
    ]
    tables = _tables(data)
    columns = _Columns()
    sections = [
        ("Balance before and after", [BALANCE_CHART], []),
        (tables[0].title, [EXPOSURE_CHART], [tables[0]]),
        ("Who owns which queue in the worst groups", [OWNERSHIP_CHART], []),
        (tables[1].title, [STRATEGIES_CHART], [tables[1]]),
        (tables[2].title, [], [tables[2]]),
        (tables[3].title, [], [tables[3]]),
    ]
    for heading, names, shown in sections:
        drawn = [charts[name] for name in names if name in charts]
        if not drawn and not shown:
            continue
        parts.append(f"<h2>{html.escape(heading)}</h2>")
        parts += [_html_image(chart) for chart in drawn]
        for table in shown:
            parts += _html_table(table, columns)
    rows = "".join(
        f'<tr><td>{html.escape(_figure(key))}</td><td class="number">{html.escape(_count(value))}</td></tr>'
        for key, value in data.totals.items()
    )
    parts += ["<h2>Fleet totals</h2>", f"<table><tbody>{rows}</tbody></table>", "</body></html>"]
    return "\n".join(parts) + "\n"


def write_report(data: ReportData, out: Path) -> Path:
    """Write ``report.md`` with its charts under ``charts/``, and ``report.html`` with the same charts inside it,
    into ``out``; returns the Markdown report's path."""
    charts = _charts(data)
    folder = out / CHARTS_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    for chart in charts.values():
        (folder / chart.name).write_bytes(chart.png)
    (out / "report.html").write_text(_html(data, charts), encoding="utf-8")
    path = out / "report.md"
    path.write_text(_markdown(data, charts), encoding="utf-8")
    return path
