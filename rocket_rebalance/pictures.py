"""Pictures for people who would rather look than read: who owns which queue, before and after a change.

An ownership grid is one topic's queues (columns) by the consumers that own them (rows): a filled cell is a queue
a consumer owns after the change, a hollow one a queue it owned before and loses, and a changed queue's column
label is marked. ``simulate --format png``, ``allocate-mq --format png`` and the impact report all draw this one
picture, so it is read the same way everywhere. The grid's content (:class:`OwnershipGrid`) is plain data; only
the drawing needs matplotlib, which comes with the ``spark`` extra, so the core install stays small and a command
that draws without it fails with one line naming the extra (:class:`PicturesUnavailableError`).
"""

from __future__ import annotations

import importlib.util
import io
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rocket_rebalance.model import MessageQueue, printable
from rocket_rebalance.plan import Plan
from rocket_rebalance.tradeoffs import Row

__all__ = [
    "MAX_GRID_QUEUES",
    "OwnershipGrid",
    "PicturesUnavailableError",
    "grid_figure",
    "ownership_grid",
    "plan_owners",
    "png_bytes",
    "pyplot",
    "require_matplotlib",
    "tradeoff_figure",
    "wrap_label",
]

MAX_GRID_QUEUES = 96
"""The most queues one grid draws (the first in queue order; the grid says how many more there are): beyond that
a cell is too small to see, and the report's grids travel from every Spark task to the driver."""

LABEL_WIDTH = 16
"""Characters per line of a wrapped axis label."""

TITLE_WIDTH = 80
"""Characters per line of a grid's title."""


class PicturesUnavailableError(ValueError):
    """A picture was asked for and matplotlib (the ``spark`` extra) is not installed. A ``ValueError`` because that
    is what the command line reports as one line (exit 2), wherever the picture was asked for (a preview's
    ``--format png``, the demo's ``--chart``, the impact report)."""

    def __init__(self, what: str) -> None:
        super().__init__(
            f"{what} needs matplotlib, which comes with the spark extra: pip install 'rocket-rebalance[spark]'"
        )


def require_matplotlib(what: str) -> None:
    """Refuse ``what`` with :class:`PicturesUnavailableError` unless matplotlib is installed (looked up, not
    imported, so a refusal costs nothing)."""
    if importlib.util.find_spec("matplotlib") is None:
        raise PicturesUnavailableError(what)


def pyplot(what: str) -> Any:
    """matplotlib's pyplot on the Agg backend (no display needed), or :class:`PicturesUnavailableError`."""
    require_matplotlib(what)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def wrap_label(text: str, width: int = LABEL_WIDTH) -> str:
    """A label on lines of at most ``width`` characters, broken at ``-``, ``_``, ``@`` or spaces where it can, so
    long strategy and client names stay readable under a chart instead of running into their neighbours."""
    spaced = text.replace("-", "- ").replace("_", "_ ").replace("@", "@ ")
    lines = textwrap.wrap(spaced, width, break_long_words=True, break_on_hyphens=False)
    return "\n".join(line.replace("- ", "-").replace("_ ", "_").replace("@ ", "@").strip() for line in lines) or text


@dataclass(frozen=True)
class OwnershipGrid:
    """One topic's queues by their owners, before and after a change.

    ``before[i]`` and ``after[i]`` are the rows (indexes into ``consumers``) owning ``queues[i]``: usually one,
    none for a queue nobody owns, several for a queue owned twice (consumers sharing an ID, a split view).
    ``hidden`` is how many more queues the topic has than the grid draws."""

    title: str
    consumers: tuple[str, ...]
    queues: tuple[MessageQueue, ...]
    before: tuple[tuple[int, ...], ...]
    after: tuple[tuple[int, ...], ...]
    hidden: int = 0

    @property
    def changed(self) -> list[int]:
        """The columns whose owners differ before and after (moved, newly owned or left without an owner)."""
        return [i for i, (old, new) in enumerate(zip(self.before, self.after, strict=True)) if old != new]


def plan_owners(plan: Plan) -> list[tuple[MessageQueue, str]]:
    """A plan as (queue, owner) pairs."""
    return [(mq, cid) for cid, queues in plan.items() for mq in queues]


def ownership_grid(
    title: str, before: Iterable[tuple[MessageQueue, str]], after: Iterable[tuple[MessageQueue, str]]
) -> OwnershipGrid:
    """The grid of one topic from its (queue, owner) pairs before and after (the same pairs twice: no change).
    Queues are in queue order (as consumers sort them), at most :data:`MAX_GRID_QUEUES`; consumers sorted by
    client ID, those that own a drawn queue on either side."""
    old, new = list(before), list(after)
    queues = sorted({mq for mq, _ in old} | {mq for mq, _ in new})
    shown = queues[:MAX_GRID_QUEUES]
    drawn = set(shown)
    consumers = sorted({cid for mq, cid in old + new if mq in drawn})
    row = {cid: index for index, cid in enumerate(consumers)}

    def owners(pairs: list[tuple[MessageQueue, str]]) -> tuple[tuple[int, ...], ...]:
        found: dict[MessageQueue, set[int]] = {mq: set() for mq in shown}
        for mq, cid in pairs:
            if mq in drawn:
                found[mq].add(row[cid])
        return tuple(tuple(sorted(found[mq])) for mq in shown)

    return OwnershipGrid(title, tuple(consumers), tuple(shown), owners(old), owners(new), len(queues) - len(shown))


def _queue_label(mq: MessageQueue) -> str:
    return f"{printable(mq.broker_name)}:{mq.queue_id}"


def _draw_grid(ax: Any, grid: OwnershipGrid, compare: bool) -> None:
    changed = set(grid.changed)
    for column, (old, new) in enumerate(zip(grid.before, grid.after, strict=True)):
        for owner in new:
            color = "tab:orange" if column in changed else "tab:blue"
            ax.add_patch(_cell(column, owner, facecolor=color, edgecolor=color))
        for owner in old:
            if owner not in new:
                ax.add_patch(_cell(column, owner, facecolor="none", edgecolor="tab:red", hatch="////"))
    ax.set_xlim(-0.5, len(grid.queues) - 0.5)
    ax.set_ylim(len(grid.consumers) - 0.5, -0.5)
    ax.set_yticks(range(len(grid.consumers)), [wrap_label(printable(cid), 40) for cid in grid.consumers])
    ax.set_xticks(
        range(len(grid.queues)),
        [("* " if column in changed else "") + _queue_label(mq) for column, mq in enumerate(grid.queues)],
        rotation=90,
    )
    for column, label in enumerate(ax.get_xticklabels()):
        if column in changed:
            label.set_color("tab:red")
            label.set_fontweight("bold")
    ax.set_xticks([x - 0.5 for x in range(1, len(grid.queues))], minor=True)
    ax.set_yticks([y - 0.5 for y in range(1, len(grid.consumers))], minor=True)
    ax.grid(which="minor", color="0.85", linewidth=0.5)
    ax.tick_params(which="minor", length=0)
    ax.set_title("\n".join(textwrap.wrap(_title(grid, compare), TITLE_WIDTH)), fontsize=10, loc="left")


def _title(grid: OwnershipGrid, compare: bool) -> str:
    more = f" (the first {len(grid.queues)} queues; {grid.hidden} more not drawn)" if grid.hidden else ""
    moved = f": {len(grid.changed)} of {len(grid.queues)} queues change owner" if compare else ""
    return printable(grid.title) + moved + more


def _cell(column: int, row: int, **style: Any) -> Any:
    from matplotlib.patches import Rectangle

    return Rectangle((column - 0.4, row - 0.4), 0.8, 0.8, linewidth=1.2, **style)


def grid_figure(grids: Sequence[OwnershipGrid], compare: bool = True, what: str = "an ownership grid") -> Any:
    """One figure with each grid stacked, sized by its queues and consumers so cells and labels stay legible.
    ``compare``: the grids show a change (a legend of kept, moved here and moved away); else who owns what."""
    plt = pyplot(what)
    from matplotlib.patches import Patch

    widest = max((len(grid.queues) for grid in grids), default=1)
    heights = [max(1.5, 0.3 * len(grid.consumers) + 0.4) for grid in grids]
    names = max((len(printable(cid)) for grid in grids for cid in grid.consumers), default=8)
    labels = max((len(_queue_label(mq)) + 2 for grid in grids for mq in grid.queues), default=8)
    titles = max((min(TITLE_WIDTH, len(_title(grid, compare))) for grid in grids), default=20)
    width = max(7.0, 0.08 * names + max(0.3 * widest, 0.075 * titles) + 1.0)
    legend = 0.4 if width >= 10 else 0.9  # one line of three entries, or three lines
    fig, axes = plt.subplots(
        len(grids),
        1,
        figsize=(width, sum(heights) + len(grids) * (0.09 * labels + 0.9) + legend),
        gridspec_kw={"height_ratios": heights} if grids else None,
        squeeze=False,
    )
    for ax, grid in zip(axes[:, 0], grids, strict=True):
        _draw_grid(ax, grid, compare)
    if compare:
        handles = [
            Patch(facecolor="tab:blue", label="owns, unchanged"),
            Patch(facecolor="tab:orange", label="owns after the change (moved here)"),
            Patch(facecolor="none", edgecolor="tab:red", hatch="////", label="owned before (moved away)"),
        ]
    else:
        handles = [Patch(facecolor="tab:blue", label="owns")]
    columns = len(handles) if legend < 0.5 else 1
    fig.legend(handles=handles, loc="lower center", ncol=columns, frameon=False, fontsize=9)
    fig.tight_layout(rect=(0, legend / fig.get_figheight(), 1, 1))
    return fig


def png_bytes(fig: Any) -> bytes:
    """The figure as PNG bytes (then closed, so many figures do not pile up in pyplot's registry)."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return buffer.getvalue()


def tradeoff_figure(rows: Sequence[Row], title: str) -> Any:
    """The demo's chart of balance against movement as a picture: one marker per strategy, named in a legend
    beside the axes (labels written at the points would cover each other where strategies land close together),
    and a dashed line at the least share a balanced split moves on a join."""
    plt = pyplot("the demo's chart")
    fig, ax = plt.subplots(figsize=(9, 4.5))
    markers = "osD^v<>pPXh*"
    for index, row in enumerate(rows):
        ax.scatter(row.join_moved, row.balance_mean, marker=markers[index % len(markers)], s=60, label=row.label)
    if rows:
        ax.axvline(rows[0].join_minimum, color="0.5", linestyle="--", label="least a balanced split moves")
    ax.set_xlabel("share of queues moved on one join (mean)")
    ax.set_ylabel("max / avg queues per consumer (mean)")
    ax.set_title("\n".join(textwrap.wrap(title, 70)), fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    return fig
