"""Ownership grids and the demo's chart: what they hold, and that their labels can be read."""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocket_rebalance import pictures
from rocket_rebalance.commands.demo import TRADEOFF_TITLE, show_tradeoffs
from rocket_rebalance.model import MessageQueue
from rocket_rebalance.pictures import (
    MAX_GRID_QUEUES,
    PicturesUnavailableError,
    grid_figure,
    ownership_grid,
    png_bytes,
    tradeoff_figure,
    wrap_label,
)
from rocket_rebalance.tradeoffs import compare, default_strategies
from tests.drawn_text import unreadable_texts

PNG = b"\x89PNG\r\n\x1a\n"

queues = st.builds(
    MessageQueue, st.just("T"), st.sampled_from(["broker-a", "broker-b", "hz@broker-c"]), st.integers(0, 150)
)
owners = st.lists(st.tuples(queues, st.sampled_from(["c1", "c2", "10.0.0.3@4103#2398211345001", "c4"])), max_size=60)


@given(owners, owners)
def test_a_grid_holds_every_drawn_queue_and_its_owners_on_each_side(
    before: list[tuple[MessageQueue, str]], after: list[tuple[MessageQueue, str]]
) -> None:
    grid = ownership_grid("G, topic T", before, after)
    everything = sorted({mq for mq, _ in before + after})
    assert list(grid.queues) == everything[:MAX_GRID_QUEUES]
    assert grid.hidden == len(everything) - len(grid.queues)
    for pairs, side in ((before, grid.before), (after, grid.after)):
        for column, mq in enumerate(grid.queues):
            assert {grid.consumers[row] for row in side[column]} == {cid for q, cid in pairs if q == mq}
    assert grid.changed == [i for i in range(len(grid.queues)) if set(grid.before[i]) != set(grid.after[i])]
    assert list(grid.consumers) == sorted(set(grid.consumers))


@given(st.text(st.characters(codec="ascii", exclude_categories=["Cc"]), min_size=1, max_size=120))
def test_a_wrapped_label_keeps_its_text_on_short_lines(text: str) -> None:
    wrapped = wrap_label(text, 16)
    assert wrapped.replace("\n", "").replace(" ", "") == text.replace(" ", "")
    assert all(len(line) <= 16 for line in wrapped.splitlines())


def _many_queues(consumers: list[str], count: int) -> list[tuple[MessageQueue, str]]:
    return [(MessageQueue("T", f"broker-{i % 3}", i), consumers[i % len(consumers)]) for i in range(count)]


@settings(max_examples=5, deadline=None)
@given(st.integers(1, MAX_GRID_QUEUES + 20), st.integers(1, 12), st.integers(5, 60), st.booleans())
def test_grid_labels_never_overlap_or_run_off_the_picture(
    queues: int, consumers: int, name: int, compare: bool
) -> None:
    """Many queues, many consumers, long client IDs, several grids in one picture."""
    ids = [f"{k:02}-" + "x" * name for k in range(consumers)]
    before = _many_queues(ids, queues)
    after = _many_queues(ids[1:] or ids, queues)
    grids = [ownership_grid("a-group-with-a-long-name, topic T", before, after), ownership_grid("g2", after, after)]
    fig = grid_figure(grids, compare)
    assert unreadable_texts(fig) == []
    plt.close(fig)


def test_the_demo_chart_names_every_strategy_readably_and_is_written(tmp_path: Path) -> None:
    rows = compare(default_strategies(), 16, 4, 4, 1)
    fig = tradeoff_figure(rows, TRADEOFF_TITLE)
    labels = {text.get_text() for text in fig.legends[0].get_texts()} if fig.legends else set()
    labels |= {text.get_text() for text in fig.axes[0].get_legend().get_texts()}
    assert {row.label for row in rows} <= labels
    assert unreadable_texts(fig) == []
    plt.close(fig)
    chart = tmp_path / "demo" / "tradeoffs.png"
    assert str(chart) in show_tradeoffs(chart)
    assert chart.read_bytes().startswith(PNG)


def test_a_grid_is_a_png() -> None:
    grid = ownership_grid("G, topic T", _many_queues(["a", "b"], 8), _many_queues(["a", "b", "c"], 8))
    assert png_bytes(grid_figure([grid])).startswith(PNG)


def test_without_matplotlib_a_picture_is_refused_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what find_spec reports for a module that is not there
    with pytest.raises(PicturesUnavailableError, match=r"spark extra: pip install 'rocket-rebalance\[spark\]'"):
        pictures.pyplot("simulate --format png")
