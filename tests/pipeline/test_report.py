"""The report's figures, added up from parts (one per Spark task), are the figures of the whole output tables."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from rocket_rebalance.model import MessageQueue
from rocket_rebalance.pictures import MAX_GRID_QUEUES, OwnershipGrid, ownership_grid
from rocket_rebalance.pipeline import SAMPLE_SCENARIO, SAMPLE_SNAPSHOT
from rocket_rebalance.pipeline.reference import Tables, _results, run_reference
from rocket_rebalance.pipeline.report import GRIDS, TOP, ReportData, ReportParts, bucket, write_report
from rocket_rebalance.pipeline.rows import AssignmentRow, GroupRow, MovementRow
from rocket_rebalance.pipeline.rows import Tables as RowTables
from rocket_rebalance.pipeline.scenario import load_scenario
from rocket_rebalance.progress import Progress

SCENARIO = load_scenario(SAMPLE_SCENARIO.read_text())
TITLE = f"scenario {SCENARIO.name}"


def expected(tables: Tables, title: str, compare: bool) -> ReportData:
    """The report's figures straight from the flat output tables, each by its definition (the oracle)."""
    side = "after" if compare else "before"
    groups = tables["groups"]
    totals: dict[str, Any] = {
        "groups": len(groups),
        "groups_rebalancing": sum(1 for r in groups if r["rebalances"]),
        **{
            name: sum(r[name] or 0 for r in groups)
            for name in ("consumers_before", "queues_before", "moved", "minimum", "exposure", "paused")
        },
        "observed_violations": sum(r["observed_violations"] or 0 for r in groups),
        "rejected_rows": len(tables["rejected"]),
    }
    for (kind_side, kind), count in sorted(Counter((r["side"], r["kind"]) for r in tables["violations"]).items()):
        totals[f"{kind}_{kind_side}"] = count
    histogram = Counter(
        (r["side"], bucket(r["max_over_avg"])) for r in tables["balance"] if r["consumers"] and r["queues"]
    )
    strategies: dict[str, dict[str, Any]] = {}
    for row in tables["comparison"]:
        entry = strategies.setdefault(
            row["strategy"],
            {"strategy": row["strategy"], "groups": 0, "queues": 0, "moved": 0, "minimum": 0, "exposure": 0},
        )
        entry["groups"] += 1
        for key in ("queues", "moved", "minimum", "exposure"):
            entry[key] += row[key]
    top = sorted(groups, key=lambda r: (-r["exposure"], -r["moved"], r["group"]))[:TOP]
    columns = ("group", "strategy_before", "strategy_after", "moved", "minimum", "exposure", "paused")
    reasons = Counter((r["side"], r["kind"], r["reason"]) for r in tables["violations"])
    rejected = Counter((r["side"], r["table"], r["reason"]) for r in tables["rejected"])
    return ReportData(
        title,
        totals,
        side,
        {
            s: sorted((edge, n) for (of, edge), n in histogram.items() if of == s)
            for s in sorted({s for s, _ in histogram})
        },
        [strategies[name] for name in sorted(strategies)],
        [{k: r[k] for k in columns} for r in top],
        [
            {"side": s, "kind": k, "reason": why, "count": n}
            for (s, k, why), n in sorted(reasons.items(), key=lambda item: (-item[1], item[0]))[:TOP]
        ],
        [
            {"side": s, "table": t, "reason": why, "count": n}
            for (s, t, why), n in sorted(rejected.items(), key=lambda item: (-item[1], item[0]))[:TOP]
        ],
        [expected_grid(tables, r["group"]) for r in [r for r in top if r["moved"]][:GRIDS]],
    )


def expected_grid(tables: Tables, group: str) -> OwnershipGrid:
    """The group's ownership on its topic where most queues move (then most exposure, then by name)."""
    moves = [r for r in tables["movement"] if r["group"] == group]
    topic = min(moves, key=lambda r: (-r["moved"], -r["exposure"], r["topic"]))["topic"]
    pairs = {
        side: [
            (MessageQueue(topic, r["broker"], r["queue_id"]), r["owner"])
            for r in tables["assignments"]
            if r["group"] == group and r["topic"] == topic and r["side"] == side
        ]
        for side in ("before", "after")
    }
    return ownership_grid(f"{group}, topic {topic}", pairs["before"], pairs["after"])


@pytest.mark.parametrize("chunk", [1, 2, 1000])
def test_parts_added_up_are_the_whole_tables_figures(chunk: int) -> None:
    """Parts over chunks of groups (as JSON, as tasks send them), merged, with the rows the row checks refused."""
    refused: list[dict[str, Any]] = []
    merged = ReportParts("after")
    for tables in _results(SAMPLE_SNAPSHOT, None, SCENARIO, refused, chunk):
        part = ReportParts("after")
        part.add(tables)
        merged.merge(ReportParts.from_json(part.to_json()))
    merged.rejected.update((r["side"], r["table"], r["reason"]) for r in refused)
    whole = expected(run_reference(SAMPLE_SNAPSHOT, scenario=SCENARIO), TITLE, True)
    assert merged.data(TITLE) == whole
    assert whole.top_exposure and whole.violation_reasons and whole.rejected_reasons and whole.strategies
    assert len(whole.grids) == 4 and set(whole.balance_histogram) == {"before", "after"}


@pytest.mark.spark
def test_the_jobs_report_is_the_reports_of_the_reference_tables(spark: Any, tmp_path: Path) -> None:
    from rocket_rebalance.pipeline.job import run_impact

    for writer in ("pyarrow", "spark"):
        from rocket_rebalance.pipeline.options import writer_spec

        out = tmp_path / writer
        result = run_impact(
            SAMPLE_SNAPSHOT, out, scenario=SCENARIO, spark=spark, partitions=2, progress=Progress("impact", None),
            writer=writer_spec(writer),
        )  # fmt: skip
        whole = expected(run_reference(SAMPLE_SNAPSHOT, scenario=SCENARIO), TITLE, True)
        assert result.totals == whole.totals, writer
        drawn = write_report(whole, tmp_path / f"expected-{writer}")
        assert (out / "report.md").read_text() == drawn.read_text(), writer


def test_top_groups_rank_by_exposure_then_moved_then_name_across_parts() -> None:
    """Ties on exposure (and on moved) across parts: the ranking of the oracle, whatever part a group was in."""
    rows = [(f"G{(k * 7) % 30:02}", k % 2 * 5, k % 3) for k in range(30)]  # (group, exposure, moved)
    merged = ReportParts("after")
    for start in range(0, 30, 4):
        tables = RowTables()
        for group, exposure, moved in rows[start : start + 4]:
            tables["groups"].append(
                GroupRow(
                    strategy_before="AVG", strategy_after="AVG", message_model="CLUSTERING", consumers_before=1,
                    consumers_after=1, queues_before=1, queues_after=1, violations_before=0, violations_after=0,
                    observed_violations=None, moved=moved, minimum=0, exposure=exposure, paused=0, rebalances=True,
                )
            )  # fmt: skip
            tables.close_group(group)
        part = ReportParts("after")
        part.add(tables)
        merged.merge(part)
    ranked = sorted(rows, key=lambda r: (-r[1], -r[2], r[0]))[:TOP]
    assert [(r["group"], r["exposure"], r["moved"]) for r in merged.data(TITLE).top_exposure] == ranked


def test_a_grid_is_of_the_most_moved_topic_and_draws_at_most_its_first_queues() -> None:
    """A group moving 150 queues of one topic and 2 of another: its grid is the first topic's, capped, the rest
    counted; the same after the part travels as JSON."""
    tables = RowTables()
    for topic, count in (("Small", 2), ("Big", 150)):
        for side, owner in (("before", "c1"), ("after", "c2")):
            for queue_id in range(count):
                tables["assignments"].append(
                    AssignmentRow(side=side, topic=topic, broker="broker-a", queue_id=queue_id, owner=owner)
                )
        tables["movement"].append(
            MovementRow(
                topic=topic,
                queues=count,
                moved=count,
                minimum=0,
                moved_share=1.0,
                minimum_share=0.0,
                removed=0,
                paused=count,
                exposure=0,
            )  # fmt: skip
        )
    tables["groups"].append(
        GroupRow(
            strategy_before="AVG", strategy_after="AVG", message_model="CLUSTERING", consumers_before=1,
            consumers_after=1, queues_before=152, queues_after=152, violations_before=0, violations_after=0,
            observed_violations=None, moved=152, minimum=0, exposure=0, paused=152, rebalances=True,
        )
    )  # fmt: skip
    tables.close_group("big")
    part = ReportParts("after")
    part.add(tables)
    (grid,) = ReportParts.from_json(part.to_json()).data(TITLE).grids
    assert grid.title == "big, topic Big"
    assert grid.queues == tuple(sorted(MessageQueue("Big", "broker-a", q) for q in range(150)))[:MAX_GRID_QUEUES]
    assert grid.hidden == 150 - MAX_GRID_QUEUES
    assert grid.consumers == ("c1", "c2") and grid.changed == list(range(MAX_GRID_QUEUES))
