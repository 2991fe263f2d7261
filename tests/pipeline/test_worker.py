"""The executors' side: Arrow conversions column by column, and the tables they write (no Spark needed)."""

from __future__ import annotations

import gc
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocket_rebalance.pipeline.analysis import analyze_group, gc_paused
from rocket_rebalance.pipeline.movement import offsets_from_rows
from rocket_rebalance.pipeline.report import ReportParts
from rocket_rebalance.pipeline.rows import as_dicts
from rocket_rebalance.pipeline.scenario import load_scenario
from rocket_rebalance.pipeline.schema import OUTPUT_TABLES  # noqa: E402
from rocket_rebalance.pipeline.worker import (  # noqa: E402
    COUNT_SCHEMA,
    REPORT_TAG,
    TableWriters,
    complete_output,
    offsets_per_group,
    write_batches,
)

OFFSET_TYPE = pa.list_(
    pa.struct(
        [
            ("topic", pa.string()),
            ("broker", pa.string()),
            ("queue_id", pa.int32()),
            ("max_offset", pa.int64()),
            ("committed_offset", pa.int64()),
            ("in_flight_offset", pa.int64()),
        ]
    )
)

offset_rows = st.lists(
    st.fixed_dictionaries(
        {
            "topic": st.sampled_from(["T1", "T2"]),
            "broker": st.sampled_from(["broker-a", "broker-b"]),
            "queue_id": st.integers(0, 7),
            "max_offset": st.integers(0, 10**12),
            "committed_offset": st.integers(0, 10**12),
            "in_flight_offset": st.none() | st.integers(0, 10**12),
        }
    ),
    max_size=6,
)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.none() | offset_rows, min_size=1, max_size=6), st.data())
def test_offsets_per_group_equal_the_row_by_row_reading(groups: list[Any], data: st.DataObject) -> None:
    column = pa.array(groups, OFFSET_TYPE)
    start = data.draw(st.integers(0, len(groups) - 1))
    stop = data.draw(st.integers(start, len(groups)))
    sliced = column.slice(start, stop - start)  # Spark hands over whole batches, but a slice must work as well
    expected = [None if rows is None else offsets_from_rows(rows) for rows in groups[start:stop]]
    assert offsets_per_group(sliced) == expected


def group_row(name: str, members: int) -> dict[str, Any]:
    return {
        "group": name,
        "before": {
            "settings": [{"strategy": "AVG", "message_model": "CLUSTERING", "options": None}],
            "topics": ["T1"],
            "routes": [{"topic": "T1", "broker": b, "read_queue_nums": 2, "perm": 6} for b in ("broker-a", "broker-b")],
            "members": [{"client_id": f"10.0.0.{k}@1#{k}", "view": None} for k in range(members)],
        },
        "after": None,
        "offsets": [
            {
                "topic": "T1",
                "broker": "broker-a",
                "queue_id": 0,
                "max_offset": 100,
                "committed_offset": 40,
                "in_flight_offset": None,
            }
        ],
    }


def test_a_batch_through_the_worker_writes_what_the_analysis_returns(tmp_path: Path) -> None:
    scenario = load_scenario({"changes": [{"action": "join", "count": 1}]})
    rows = [group_row(f"G{k}", members) for k, members in enumerate((1, 3, 6))]
    batches = [pa.RecordBatch.from_pylist(rows[:2]), pa.RecordBatch.from_pylist(rows[2:])]
    (counts,) = list(write_batches(batches, str(tmp_path), scenario, compare=True, part="part-00007"))
    assert counts.schema == COUNT_SCHEMA
    expected = [as_dicts(analyze_group({**r, "offsets": offsets_from_rows(r["offsets"])}, scenario)) for r in rows]
    written = {row["table"]: row["rows"] for row in counts.to_pylist()}
    (report,) = [row["report"] for row in counts.to_pylist() if row["table"] == REPORT_TAG]
    assert ReportParts.from_json(report).groups == len(rows)  # the task's part of the report comes along
    for name in OUTPUT_TABLES:
        assert [p.name for p in (tmp_path / f"{name}.parquet").iterdir()] == ["part-00007.parquet"]
        found = pq.read_table(tmp_path / f"{name}.parquet").to_pylist()
        want = [{"group": result["group"], **row} for result in expected for row in result[name]]
        assert found == want, name
        assert written[name] == len(want)
    assert written["moved_queues"] and written["assignments"]  # the comparison is not between empty tables


def test_a_failing_batch_publishes_no_part_file(tmp_path: Path) -> None:
    good = pa.RecordBatch.from_pylist([group_row("G1", 2)])

    def batches() -> Any:
        yield good
        raise RuntimeError("the executor lost its input")

    with pytest.raises(RuntimeError):
        list(write_batches(batches(), str(tmp_path), part="part-00000"))
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def test_output_is_cleared_before_and_completed_after_a_run(tmp_path: Path) -> None:
    from rocket_rebalance.pipeline.output import claim_output, clear_output

    (tmp_path / "groups.parquet").mkdir()
    (tmp_path / "groups.parquet" / "part-00000.parquet").write_text("from an earlier run")
    (tmp_path / "report.md").write_text("an earlier run's report")
    (tmp_path / "summary.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("not ours: kept")
    (tmp_path / "_rocket-rebalance-impact.json").write_text("{}")
    claim_output(str(tmp_path))
    clear_output(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["_rocket-rebalance-impact.json", "notes.txt"]
    complete_output(str(tmp_path))  # a fleet with no group: every table readable, and empty
    for name in OUTPUT_TABLES:
        table = pq.read_table(tmp_path / f"{name}.parquet")
        assert table.num_rows == 0 and table.schema.names == ["group", *(f.name for f in OUTPUT_TABLES[name])]


def test_gc_is_paused_only_inside_and_restored() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("a failing group batch")
    assert gc.isenabled()


def test_output_uris_go_to_pyarrow_file_systems(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writers = TableWriters(f"file://{tmp_path}/out", "part-00001")
    writers.write("groups", [["G1"], *([None] for _ in OUTPUT_TABLES["groups"])])
    writers.close()
    assert pq.read_table(tmp_path / "out" / "groups.parquet").column("group").to_pylist() == ["G1"]
    asked: list[str] = []

    def from_uri(uri: str) -> tuple[Any, str]:
        asked.append(uri)
        return pafs.LocalFileSystem(), str(tmp_path)

    import rocket_rebalance.pipeline.worker as worker

    monkeypatch.setattr(worker, "pafs", SimpleNamespace(FileSystem=SimpleNamespace(from_uri=from_uri)))
    TableWriters("s3a://fleet-bucket/impact", "part-00002")  # Spark's scheme, pyarrow's name for it
    assert asked == ["s3://fleet-bucket/impact"]
