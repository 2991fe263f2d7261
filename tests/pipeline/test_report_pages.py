"""What people read and look at in the impact report: sentences first, columns in words, readable rows and charts,
and an HTML page that needs nothing but itself."""

from __future__ import annotations

import base64
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocket_rebalance.pipeline import SAMPLE_SCENARIO, SAMPLE_SNAPSHOT
from rocket_rebalance.pipeline.reference import _results
from rocket_rebalance.pipeline.report import (
    COLUMNS,
    WIDTH,
    ReportData,
    ReportParts,
    _markdown,
    balance_chart,
    exposure_chart,
    sentences,
    strategies_chart,
    write_report,
)
from rocket_rebalance.pipeline.scenario import load_scenario
from tests.drawn_text import unreadable_texts

SCENARIO = load_scenario(SAMPLE_SCENARIO.read_text())
PNG = b"\x89PNG\r\n\x1a\n"
RAW_KEYS = re.compile(
    r"\b(groups_rebalancing|consumers_before|queues_before|rejected_rows|observed_violations)\b|_(before|after)\b"
)


def sample_data() -> ReportData:
    """The sample scenario's report data, from the pipeline's own per-group analysis (no Spark)."""
    parts = ReportParts("after")
    for tables in _results(SAMPLE_SNAPSHOT, None, SCENARIO, [], 2):
        parts.add(tables)
    return parts.data(f"scenario {SCENARIO.name}")


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report")
    write_report(sample_data(), out)
    return out


def test_the_report_starts_with_sentences_a_person_reads(written: Path) -> None:
    text = (written / "report.md").read_text()
    opening = text.split("## ", 1)[0]
    assert "5 of 6 groups rebalance; 14 of 57 queues move to another consumer (a balanced split needs at least 9)" in (
        " ".join(opening.split())
    )
    assert "About 887 messages may be delivered again" in opening
    assert "The groups at most risk: nearby_reader (868 messages again, 4 queues move), room_reader" in " ".join(
        opening.split()
    )
    assert opening.index("What changes:") < opening.index("groups rebalance")


def test_no_raw_key_no_none_no_long_line_and_each_column_explained_once(written: Path) -> None:
    text = (written / "report.md").read_text()
    assert "None" not in text
    assert not RAW_KEYS.search(text), RAW_KEYS.search(text)
    assert max(len(line) for line in text.splitlines()) <= WIDTH
    flat = " ".join(text.split())
    for heading, _ in COLUMNS.values():
        assert flat.count(f"**{heading}**:") == 1, heading
    assert "Queues moved can be below it: consistent hashing does not balance" in flat


def test_the_html_page_needs_nothing_but_itself(written: Path) -> None:
    page = (written / "report.html").read_text()
    found = _Page()
    found.feed(page)
    assert found.images and all(src.startswith("data:image/png;base64,") for src in found.images)
    assert all(base64.b64decode(src.split(",", 1)[1]).startswith(PNG) for src in found.images)
    assert len(found.images) == len(list((written / "charts").iterdir())) == 4
    assert not found.external, found.external
    assert "default-src 'none'" in page
    text = " ".join(found.text.split())
    for sentence in sentences(sample_data()):
        assert sentence in text


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.external: list[str] = []
        self.text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "img":
            self.images.append(found.get("src") or "")
        if tag in ("script", "link", "iframe", "object", "embed") or any(
            (value or "").startswith(("http:", "https:", "//")) for value in found.values()
        ):
            self.external.append(tag)

    def handle_data(self, data: str) -> None:
        self.text += data + " "


names = st.text(st.characters(codec="ascii", exclude_categories=["Cc"]), min_size=1, max_size=300).filter(
    lambda name: "None" not in name
)
counts = st.integers(0, 10**9)


@st.composite
def report_data(draw: Any) -> ReportData:
    top = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "group": names,
                    "strategy_before": st.none() | names,
                    "strategy_after": st.none() | names,
                    "moved": counts,
                    "minimum": counts,
                    "exposure": counts,
                    "paused": counts,
                }  # fmt: skip
            ),
            max_size=8,
        )
    )
    strategies = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "strategy": names,
                    "groups": counts,
                    "queues": counts,
                    "moved": counts,
                    "minimum": counts,
                    "exposure": counts,
                }  # fmt: skip
            ),
            max_size=6,
        )
    )
    reasons = st.lists(
        st.fixed_dictionaries(
            {"side": st.sampled_from(["before", "after"]), "kind": names, "reason": names, "count": counts}
        ),  # fmt: skip
        max_size=5,
    )
    rejected = st.lists(
        st.fixed_dictionaries({"side": st.just("before"), "table": names, "reason": names, "count": counts}),
        max_size=5,
    )
    totals = {"groups": draw(counts), "double_owned_after": draw(counts), "some_new_figure": draw(counts)}
    return ReportData(draw(names), totals, "after", {}, strategies, top, draw(reasons), draw(rejected))


@settings(max_examples=60)
@given(report_data())
def test_whatever_the_names_no_markdown_line_is_too_long_or_says_none(data: ReportData) -> None:
    text = _markdown(data, {})
    assert max(len(line) for line in text.splitlines()) <= WIDTH
    assert "| None |" not in text and " None →" not in text and "→ None |" not in text


def _long_names(count: int, width: int) -> list[str]:
    return [f"{k:02}_" + "-".join(["SEGMENT_OF_A_NAME"] * (width // 18 + 1))[:width] for k in range(count)]


@pytest.mark.parametrize(("count", "width"), [(3, 12), (8, 45), (14, 120)])
def test_the_charts_labels_never_overlap(count: int, width: int) -> None:
    """Many and long strategy and group names (fleet strategies such as MACHINE_ROOM_NEARBY-CONSISTENT_HASH)."""
    labels = _long_names(count, width)
    data = ReportData(
        "t",
        {},
        "after",
        {"before": [(1.0, 3), (2.0, 1)], "after": [(1.0, 4), (3.0, 2)]},
        [
            {"strategy": s, "groups": 1, "queues": 10, "moved": k, "minimum": 2, "exposure": 1}
            for k, s in enumerate(labels)
        ],
        [{"group": g, "exposure": 10 + k, "moved": 1} for k, g in enumerate(labels * 2)],
        [],
        [],
    )
    for draw in (balance_chart, strategies_chart, exposure_chart):
        fig = draw(plt, data)
        fig.tight_layout()
        assert unreadable_texts(fig) == [], draw.__name__
        plt.close(fig)


def test_the_balance_chart_overlays_before_and_after() -> None:
    data = sample_data()
    fig = balance_chart(plt, data)
    legend = [text.get_text() for text in fig.axes[0].get_legend().get_texts()]
    assert legend == ["after", "before"]
    drawn = sum(len(container.patches) for container in fig.axes[0].containers)
    assert drawn == sum(len(found) for found in data.balance_histogram.values())
    plt.close(fig)
