"""``--engine local`` and ``--engine spark`` write the same output, table by table, for the same input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from rocket_rebalance.pipeline import SAMPLE_SNAPSHOT
from rocket_rebalance.pipeline.fleetgen import write_fleet
from rocket_rebalance.pipeline.job import ImpactResult, run_impact
from rocket_rebalance.pipeline.scenario import load_scenario
from rocket_rebalance.pipeline.schema import OUTPUT_TABLES
from rocket_rebalance.progress import Progress

pytestmark = pytest.mark.spark

DEPLOY = {"changes": [{"action": "join", "count": 1}, {"action": "broker_down", "broker": "broker-a"}]}


def tables(out: Path) -> dict[str, list[str]]:
    """Every output table's rows, as sorted JSON texts (the engines write them in different orders and files)."""
    return {
        name: sorted(json.dumps(row, sort_keys=True) for row in pq.read_table(out / f"{name}.parquet").to_pylist())
        for name in OUTPUT_TABLES
    }


def local_agrees(snapshot: Path, spark_out: Path, spark_result: ImpactResult, **kwargs: Any) -> None:
    """Run the local engine on what Spark ran (into a folder beside Spark's) and compare every output table, the
    counts, the totals, ``summary.json`` and ``report.md`` (when written)."""
    local_out = spark_out.parent / f"{spark_out.name}-local"
    local = run_impact(snapshot, local_out, engine="local", progress=Progress("impact", None), **kwargs)
    assert (local.engine, spark_result.engine) == ("local", "spark")
    found, expected = tables(local_out), tables(spark_out)
    for name in OUTPUT_TABLES:
        assert found[name] == expected[name], name
    assert (local.rows, local.totals, local.partial) == (spark_result.rows, spark_result.totals, spark_result.partial)
    for name in ("summary.json", "report.md"):
        assert (local_out / name).exists() == (spark_out / name).exists(), name
        if (spark_out / name).exists():
            text = (local_out / name).read_text().replace(str(local_out), str(spark_out))
            assert text == (spark_out / name).read_text(), name


def on_spark(spark: Any, snapshot: Path, out: Path, **kwargs: Any) -> ImpactResult:
    return run_impact(snapshot, out, spark=spark, partitions=2, progress=Progress("impact", None), **kwargs)


def test_the_sample_alone_gives_the_same_tables_on_both_engines(spark: Any, tmp_path: Path) -> None:
    """The shipped sample alone, what ``audit`` runs; its rejected rows (bad types, orphans, duplicate routes)
    included, their row texts too. (With a scenario, an after snapshot, a Parquet fleet: tests/pipeline/test_job.py.)"""
    result = on_spark(spark, SAMPLE_SNAPSHOT, tmp_path / "spark")
    local_agrees(SAMPLE_SNAPSHOT, tmp_path / "spark", result)
    assert result.rows["rejected"] > 0 and result.rows["violations"] > 0


def test_a_generated_fleet_with_observed_holdings_gives_the_same_tables_on_both_engines(
    spark: Any, tmp_path: Path
) -> None:
    """A generated JSON Lines fleet with planted faults (split views, observed holdings that differ from the plan),
    through a deploy with the strategy comparison."""
    fleet = tmp_path / "fleet"
    write_fleet(fleet, 30, 2, 0.2, "jsonl", observed=True)
    result = on_spark(spark, fleet, tmp_path / "spark", scenario=load_scenario(DEPLOY))
    local_agrees(fleet, tmp_path / "spark", result, scenario=load_scenario(DEPLOY))
    assert result.totals["groups"] == 30 and result.rows["comparison"] > 0 and result.totals["moved"] > 0
    assert any(
        row["side"] == "observed" for row in pq.read_table(tmp_path / "spark" / "violations.parquet").to_pylist()
    )
