"""Output tables held as columns: rows added by row or by column land in the right columns and groups."""

from __future__ import annotations

from itertools import repeat

import pytest

from rocket_rebalance.pipeline.rows import AssignmentRow, Tables, as_dicts


def test_rows_by_row_and_by_column_get_their_group() -> None:
    tables = Tables()
    assignments = tables["assignments"]
    assignments.append(AssignmentRow(side="before", topic="T", broker="b", queue_id=0, owner="c1"))
    tables.close_group("G1")
    assignments.extend_columns(
        2, side=repeat("after", 2), topic=repeat("T", 2), broker=["b", "c"], queue_id=[1, 2], owner=["c1", "c2"]
    )
    tables.close_group("G2")
    assert list(zip(*assignments.columns, strict=True)) == [
        ("G1", "before", "T", "b", 0, "c1"),
        ("G2", "after", "T", "b", 1, "c1"),
        ("G2", "after", "T", "c", 2, "c2"),
    ]
    assert len(tables["groups"].columns[0]) == 0  # a table without rows gets no group either
    with pytest.raises(ValueError):
        as_dicts(tables)  # one group's rows only


def test_columns_must_name_every_field_and_hold_every_row() -> None:
    assignments = Tables()["assignments"]
    with pytest.raises(ValueError, match="not the table's"):
        assignments.extend_columns(1, side=["before"], topic=["T"], broker=["b"], queue_id=[0])
    with pytest.raises(ValueError, match="has 1 values for 2 rows"):
        assignments.extend_columns(
            2, side=["x", "y"], topic=["T", "T"], broker=["b", "b"], queue_id=[0, 1], owner=["c"]
        )


def test_later_rows_replace_a_groups_own_rows_only() -> None:
    tables = Tables()
    rejected = tables["rejected"]
    rejected.append(("before", "members", "why", "{}"))
    tables.close_group("G1")
    rejected.append(("before", "members", "why", "{}"))
    rejected.append(("after", "members", "why", "{}"))
    rejected.replace_rows(1, rejected.rows(1)[:1])
    tables.close_group("G2")
    assert rejected.columns[0] == ["G1", "G2"] and rejected.rows() == [("before", "members", "why", "{}")] * 2
