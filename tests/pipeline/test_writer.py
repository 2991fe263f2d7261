"""``--writer spark``: Spark's DataFrameWriter writes the same tables as the executors' pyarrow writer (local[2])."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from rocket_rebalance.cli import main as cli_main
from rocket_rebalance.pipeline import SAMPLE_SCENARIO, SAMPLE_SNAPSHOT
from rocket_rebalance.pipeline.options import WriterSpec, writer_spec
from rocket_rebalance.pipeline.reference import run_reference
from rocket_rebalance.pipeline.scenario import load_scenario
from rocket_rebalance.pipeline.schema import OUTPUT_TABLES
from rocket_rebalance.progress import Progress
from tests.pipeline.test_job import canonical

pytestmark = pytest.mark.spark

Rows = dict[str, list[dict[str, Any]]]


def run(spark: Any, out: Path | str, writer: WriterSpec, report: bool = False) -> Any:
    from rocket_rebalance.pipeline.job import run_impact

    scenario = load_scenario(SAMPLE_SCENARIO.read_text())
    return run_impact(
        SAMPLE_SNAPSHOT, out, scenario=scenario, spark=spark, partitions=2, report=report, writer=writer,
        progress=Progress("impact", None),
    )  # fmt: skip


@pytest.fixture(scope="module")
def expected() -> Rows:
    """The tables the Spark writer must write: the single-process reference's, which the default writer's equal
    (``tests/pipeline/test_job.py`` checks that on the same sample), so no second Spark run is needed here."""
    return run_reference(SAMPLE_SNAPSHOT, scenario=load_scenario(SAMPLE_SCENARIO.read_text()))


@pytest.fixture(scope="module")
def spark_run(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    """The Spark writer's result and output folder (Parquet, the default format)."""
    out = tmp_path_factory.mktemp("spark")
    return run(spark, out, writer_spec("spark"), report=True), out


def test_the_spark_writer_writes_the_same_tables(expected: Rows, spark_run: Any) -> None:
    result, tmp_path = spark_run
    for name in OUTPUT_TABLES:
        table = pq.read_table(tmp_path / f"{name}.parquet")
        assert table.schema.names == ["group", *(f.name for f in OUTPUT_TABLES[name])], name
        assert canonical(table.to_pylist(), name) == canonical(expected[name], name), name
    assert expected["assignments"] and expected["rejected"] and expected["moved_queues"]
    assert result.rows == {name: len(rows) for name, rows in expected.items()}
    assert json.loads((tmp_path / "summary.json").read_text())["totals"] == result.totals
    assert "Fleet impact" in (tmp_path / "report.md").read_text()
    assert (tmp_path / "assignments.parquet" / "_SUCCESS").exists()  # written by Spark, not the executors


def test_json_with_a_write_option_replaces_an_earlier_parquet_output(
    spark: Any, expected: Rows, spark_run: Any, tmp_path: Path
) -> None:
    """The folder rules hold for Spark-written folders: the earlier run's ``<table>.parquet`` (with Spark's
    ``_SUCCESS`` and ``.crc`` files) is cleared, so no stale table of the other format stays beside the new one."""
    shutil.copytree(spark_run[1], tmp_path, dirs_exist_ok=True)
    assert list(tmp_path.glob("assignments.parquet/.part-*.crc")) and (tmp_path / "report.md").exists()
    run(spark, tmp_path, writer_spec("spark", "json", ["compression=gzip"]))
    assert not list(tmp_path.glob("*.parquet")) and not (tmp_path / "report.md").exists()
    for name, fields in OUTPUT_TABLES.items():
        folder = tmp_path / f"{name}.json"
        parts = [p.name for p in folder.iterdir() if p.name.startswith("part-")]
        assert parts and all(p.endswith(".json.gz") for p in parts), name
        ddl = ", ".join(f"`{c}` {t}" for c, t in [("group", "string"), *((f.name, _ddl(f)) for f in fields)])
        found = [row.asDict(recursive=True) for row in spark.read.schema(ddl).json(str(folder)).collect()]
        assert canonical(found, name) == canonical(expected[name], name), name


def _ddl(field: Any) -> str:
    """The Spark type of an output column, to read the JSON tables back with the writer's types."""
    from pyspark.sql.pandas.types import from_arrow_type

    return str(from_arrow_type(field.type).simpleString())


def test_save_as_table_with_a_prefix_into_the_session_catalog(spark: Any, expected: Rows, tmp_path: Path) -> None:
    spark.sql(f"CREATE DATABASE rr_writer_test LOCATION '{tmp_path / 'warehouse'}'")
    try:
        run(spark, tmp_path / "out", writer_spec("spark", table_prefix="rr_writer_test.impact_"), report=True)
        names = {t.name for t in spark.catalog.listTables("rr_writer_test")}
        assert names == {f"impact_{name}" for name in OUTPUT_TABLES}
        for name in OUTPUT_TABLES:
            table = spark.table(f"rr_writer_test.impact_{name}")
            assert table.columns == ["group", *(f.name for f in OUTPUT_TABLES[name])], name
            found = [row.asDict(recursive=True) for row in table.collect()]
            assert canonical(found, name) == canonical(expected[name], name), name
        # the catalog holds the tables; --out gets the summary and the report only
        assert not list((tmp_path / "out").glob("*.parquet")) and (tmp_path / "out" / "report.md").exists()
        assert list((tmp_path / "warehouse").glob("impact_assignments/part-*"))
    finally:
        spark.sql("DROP DATABASE rr_writer_test CASCADE")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--format", "json"], "--format needs --writer spark"),
        (["--write-option", "compression=gzip"], "--write-option needs --writer spark"),
        (["--table-prefix", "impact_"], "--table-prefix needs --writer spark"),
        (["--writer", "spark", "--table-prefix", "my-db.impact_"], "--table-prefix 'my-db.impact_' is not a table"),
        (["--writer", "spark", "--table-prefix", ""], "--table-prefix '' is not a table"),
        (["--writer", "spark", "--write-option", "gzip"], "--write-option expects key=value, got 'gzip'"),
        (["--writer", "spark", "--format", "org.apache.Foo"], "--format 'org.apache.Foo' is not a data source"),
        (["--writer", "spark", "--format", "csv"], "--format csv cannot hold the list columns"),  # no Spark run
        (["--compare", "AVG,MACHINE_ROOM"], "--compare 'AVG,MACHINE_ROOM': 'MACHINE_ROOM' is not a compared strategy"),
    ],
)
def test_bad_writer_options_are_one_line_before_spark_starts(
    options: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = ["--snapshot", str(SAMPLE_SNAPSHOT), "--scenario", str(SAMPLE_SCENARIO)]
    status = cli_main(["impact", *inputs, "--out", str(tmp_path / "out"), *options])
    (line,) = capsys.readouterr().err.splitlines()
    assert status == 2 and line.startswith("rocket-rebalance: ") and message in line
    assert not (tmp_path / "out").exists()  # refused before the output folder was claimed


def test_folder_rules_cover_tables_in_other_formats(tmp_path: Path) -> None:
    """A ``<table>.<format>`` folder is ours (cleared, and refused when it holds a foreign file), a file of such a
    name is not (the job never writes one): it stays."""
    from rocket_rebalance.pipeline.output import MARKER, OutputError, claim_output, clear_output

    (tmp_path / MARKER).write_text("{}")
    (tmp_path / "groups.csv").write_text("mine")
    (tmp_path / "assignments.json").mkdir()
    for name in ("part-00000-x-c000.json.gz", ".part-00000-x-c000.json.gz.crc", "_SUCCESS", "._SUCCESS.crc"):
        (tmp_path / "assignments.json" / name).write_text("")
    (tmp_path / "violations.orc").mkdir()
    (tmp_path / "violations.orc" / "notes.txt").write_text("mine")
    with pytest.raises(OutputError, match=r"violations\.orc/notes\.txt was not written by rocket-rebalance"):
        claim_output(str(tmp_path))
    (tmp_path / "violations.orc" / "notes.txt").unlink()
    claim_output(str(tmp_path))
    clear_output(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == [MARKER, "groups.csv"]
