"""The in-process engine without Spark: never imports pyspark, chooses itself for a small snapshot, refuses Spark's
options. (Its tables equal Spark's: tests/pipeline/test_engines.py, marked spark.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocket_rebalance.pipeline import SAMPLE_SNAPSHOT
from rocket_rebalance.pipeline.fleetgen import write_fleet
from rocket_rebalance.pipeline.job import _check_inputs, _group_count, run_impact
from rocket_rebalance.pipeline.options import ENGINES, LOCAL_MAX_GROUPS, choose_engine
from rocket_rebalance.pipeline.reference import write_local
from rocket_rebalance.progress import Progress

REPO = Path(__file__).resolve().parents[2]

BLOCKED = """
import sys
sys.modules["pyspark"] = None  # any import of pyspark (or of py4j, its bridge) now raises ImportError
sys.modules["py4j"] = None
from rocket_rebalance.cli import main
status = main(sys.argv[1:])
assert sys.modules["pyspark"] is None and sys.modules["py4j"] is None
assert not [name for name in sys.modules if name.startswith(("pyspark.", "py4j."))]
sys.exit(status)
"""


def blocked(*args: str) -> subprocess.CompletedProcess[str]:
    """The command line in a fresh interpreter in which pyspark cannot be imported."""
    return subprocess.run([sys.executable, "-c", BLOCKED, *args], capture_output=True, text=True, cwd=REPO, timeout=600)


def test_audit_and_impact_of_a_small_snapshot_run_without_pyspark(tmp_path: Path) -> None:
    audit = blocked("audit", "--snapshot", str(SAMPLE_SNAPSHOT))
    assert audit.returncode == 1, audit.stderr  # the sample has findings
    assert "double_owned" in audit.stdout and "Traceback" not in audit.stderr
    out = tmp_path / "out"
    impact = blocked("impact", "--out", str(out))  # the sample snapshot and scenario
    assert impact.returncode == 0, impact.stderr
    assert "impact: 6 groups analyzed" in impact.stdout
    assert (out / "report.md").exists() and (out / "groups.parquet").is_dir()
    assert "analyzing groups (in this process" in impact.stderr and "starting Spark" not in impact.stderr


def test_errors_of_a_run_without_pyspark_are_one_line(tmp_path: Path) -> None:
    """A bad input, Spark's options with ``--engine local``, Spark without pyspark: one line each, exit status 2."""
    missing = blocked("audit", "--snapshot", str(tmp_path / "nothing-here"), "--engine", "local")
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "not a folder" in missing.stderr
    spark_only = blocked("impact", "--out", str(tmp_path / "o"), "--engine", "local", "--master", "local[2]")
    assert spark_only.returncode == 2 and spark_only.stderr.strip().splitlines()[-1] == (
        "rocket-rebalance: --master needs --engine spark (or auto): --engine local runs no Spark"
    )
    no_spark = blocked("audit", "--snapshot", str(SAMPLE_SNAPSHOT), "--engine", "spark")
    assert no_spark.returncode == 2 and no_spark.stderr.strip().splitlines()[-1] == (
        "rocket-rebalance: --engine spark needs pyspark, which is not installed: pip install 'rocket-rebalance[spark]'"
    )


@given(
    engine=st.sampled_from(ENGINES),
    groups=st.integers(0, 10 * LOCAL_MAX_GROUPS),
    spark_only=st.lists(st.sampled_from(["--master", "--conf", "--partitions", "--writer spark"]), unique=True),
)
def test_auto_runs_in_process_exactly_when_small_and_no_spark_option_is_given(
    engine: str, groups: int, spark_only: list[str]
) -> None:
    if engine == "local" and spark_only:
        with pytest.raises(ValueError, match="needs --engine spark"):
            choose_engine(engine, groups, spark_only)
        return
    chosen = choose_engine(engine, groups, spark_only)
    if engine == "auto":
        assert (chosen == "local") == (groups <= LOCAL_MAX_GROUPS and not spark_only)
    else:
        assert chosen == engine


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_the_size_auto_goes_by_is_the_number_of_groups(tmp_path: Path, fmt: str) -> None:
    write_fleet(tmp_path / "fleet", 37, 1, 0.0, fmt)
    assert _group_count(_check_inputs(tmp_path / "fleet", None)) == 37
    assert _group_count(_check_inputs(SAMPLE_SNAPSHOT, tmp_path / "fleet")) == 37  # the larger side
    assert (
        run_impact(tmp_path / "fleet", tmp_path / "out", report=False, progress=Progress("impact", None)).engine
        == "local"
    )


def test_the_local_engine_says_how_far_it_is(tmp_path: Path) -> None:
    """``done(groups analysed, groups)`` after each chunk: what a progress line needs."""
    seen: list[tuple[int, int]] = []
    written = write_local(SAMPLE_SNAPSHOT, str(tmp_path), chunk=4, done=lambda *counts: seen.append(counts))
    assert seen == [(4, 8), (8, 8)] and written.rows["groups"] == 6  # two groups of the sample are rejected whole
