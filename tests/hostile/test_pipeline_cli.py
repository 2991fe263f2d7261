"""Hostile command lines for ``impact`` and ``fleet-gen``: each is refused with one line and exit status 2, before
Spark starts and before anything on disk is touched.

The command runs as a subprocess with ``SPARK_HOME`` pointing nowhere, so reaching Spark at all would fail with a
different error: a passing test proves the check came first.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rocket_rebalance.pipeline import SAMPLE_SNAPSHOT


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SPARK_HOME": "/nonexistent-spark-home"}
    return subprocess.run(
        [sys.executable, "-m", "rocket_rebalance", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def refused(done: subprocess.CompletedProcess[str], expected: str) -> None:
    """Exit 2, no traceback, and exactly one ``rocket-rebalance:`` line, saying ``expected``."""
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "Exception" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("rocket-rebalance:")]
    assert len(errors) == 1 and expected in errors[0], done.stderr


def digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.md5(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()
    }


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    from rocket_rebalance.pipeline.fleetgen import write_fleet

    write_fleet(tmp_path / "fleet", 3)
    return tmp_path / "fleet"


@pytest.mark.parametrize(
    ("out", "relation"),
    [(".", "is the input"), ("./sub", "lies inside the input"), ("..", "contains the input")],
)
def test_impact_refuses_an_output_overlapping_the_snapshot(fleet: Path, out: str, relation: str) -> None:
    before = digest(fleet)
    refused(cli("impact", "--snapshot", str(fleet), "--out", str(fleet / out)), relation)
    assert digest(fleet) == before and not (fleet / "sub").exists()


def test_impact_refuses_an_output_uri_naming_the_snapshot(fleet: Path) -> None:
    before = digest(fleet)
    refused(cli("impact", "--snapshot", str(fleet), "--out", f"file://{fleet}"), "is the input")
    assert digest(fleet) == before


def test_impact_refuses_an_output_holding_the_scenario(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    scenario = tmp_path / "out" / "scenario.json"
    scenario.write_text(json.dumps({"changes": [{"action": "join", "count": 1}]}))
    done = cli(
        "impact", "--snapshot", str(SAMPLE_SNAPSHOT), "--scenario", str(scenario), "--out", str(tmp_path / "out")
    )
    refused(done, "contains the input")
    assert scenario.exists()


def test_impact_refuses_a_folder_of_someone_elses_files(tmp_path: Path) -> None:
    out = tmp_path / "home"
    out.mkdir()
    (out / "notes.txt").write_text("precious")
    refused(cli("impact", "--out", str(out)), "is not empty and holds no earlier impact output")
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


@pytest.mark.parametrize(
    "tables",
    [[], ["groups.parquet"], ["groups.parquet/notes.txt"]],
    ids=["no table", "an empty table folder", "a table folder of other files"],
)
def test_impact_refuses_an_unmarked_folder_of_output_names_without_our_part_files(
    tmp_path: Path, tables: list[str]
) -> None:
    """A user's own ``summary.json`` and ``report.md`` (output names, but no part file of ours beside them) are
    not an earlier version's output: the folder is refused and nothing in it is touched."""
    out = tmp_path / "userdocs"
    out.mkdir()
    (out / "summary.json").write_text('{"my": "own summary"}')
    (out / "report.md").write_text("# my notes")
    for name in tables:
        if name.endswith("notes.txt"):
            (out / name).parent.mkdir()
            (out / name).write_text("mine")
        else:
            (out / name).mkdir()
    before = digest(out)
    refused(cli("impact", "--out", str(out)), "is not empty and holds no earlier impact output")
    assert digest(out) == before and sorted(p.name for p in out.iterdir()) == sorted(
        {"summary.json", "report.md", *(name.split("/")[0] for name in tables)}
    )


def test_an_unmarked_folder_holding_a_table_of_our_part_files_is_an_earlier_versions_output(tmp_path: Path) -> None:
    """What docs/pipeline.md promises to accept: an older version's output, which had no marker, is recognised by
    a table folder made of our part files; it is claimed (marked) and cleared like a marked one."""
    from rocket_rebalance.pipeline.output import MARKER, claim_output, clear_output

    out = tmp_path / "old"
    (out / "groups.parquet").mkdir(parents=True)
    (out / "groups.parquet" / "part-00000.parquet").write_text("an earlier run's rows")
    (out / "summary.json").write_text("{}")
    (out / "report.md").write_text("an earlier run's report")
    claim_output(str(out))
    clear_output(str(out))
    assert [p.name for p in out.iterdir()] == [MARKER]


def test_impact_refuses_a_foreign_file_inside_an_earlier_outputs_table(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "groups.parquet").mkdir(parents=True)
    (out / "_rocket-rebalance-impact.json").write_text("{}")
    (out / "groups.parquet" / "mine.csv").write_text("someone's data")
    refused(cli("impact", "--out", str(out)), "mine.csv was not written by rocket-rebalance")
    assert (out / "groups.parquet" / "mine.csv").exists()


def test_impact_refuses_an_output_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    refused(cli("impact", "--out", str(tmp_path / "file")), "is a file, not a folder")
    assert (tmp_path / "file").read_text() == "x"


def test_impact_refuses_an_output_it_cannot_create(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    refused(cli("impact", "--out", str(tmp_path / "file" / "out")), "cannot write there")


@pytest.mark.parametrize("partitions", ["-3", "0", "100001"])
def test_impact_refuses_partitions_out_of_range(tmp_path: Path, partitions: str) -> None:
    refused(cli("impact", "--out", str(tmp_path / "o"), "--partitions", partitions), "--partitions must be between 1")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("master", ["nonsense://x", "local[0]", "local[two]"])
def test_impact_refuses_a_bad_master(tmp_path: Path, master: str) -> None:
    refused(cli("impact", "--out", str(tmp_path / "o"), "--master", master), "is not a Spark master")


def test_impact_refuses_a_snapshot_with_a_table_in_two_formats(tmp_path: Path, fleet: Path) -> None:
    (fleet / "groups.jsonl").write_text('{"group": "G", "strategy": "AVG"}\n')
    refused(
        cli("impact", "--snapshot", str(fleet), "--out", str(tmp_path / "o")),
        "table 'groups' is there twice, as groups.parquet and groups.jsonl",
    )


def test_impact_refuses_a_parquet_column_of_the_wrong_type(tmp_path: Path, fleet: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    routes = pq.read_table(fleet / "routes.parquet")
    as_text = routes.set_column(2, "read_queue_nums", routes.column("read_queue_nums").cast(pa.string()))
    pq.write_table(as_text, fleet / "routes.parquet")
    refused(
        cli("impact", "--snapshot", str(fleet), "--out", str(tmp_path / "o")),
        "table routes: routes.parquet column read_queue_nums is string, expected int",
    )


def test_impact_refuses_a_parquet_part_file_that_is_not_parquet(tmp_path: Path, fleet: Path) -> None:
    (fleet / "members.parquet").rename(tmp_path / "part-0.parquet")
    (fleet / "members.parquet").mkdir()
    (tmp_path / "part-0.parquet").rename(fleet / "members.parquet" / "part-0.parquet")
    (fleet / "members.parquet" / "part-1.parquet").write_text("half a file")
    refused(
        cli("impact", "--snapshot", str(fleet), "--out", str(tmp_path / "o")), "part-1.parquet is not a Parquet file"
    )


def test_impact_refuses_a_scenario_joining_more_consumers_than_a_group_can_hold(tmp_path: Path) -> None:
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"changes": [{"action": "join", "count": 10**9}]}))
    refused(cli("impact", "--scenario", str(scenario), "--out", str(tmp_path / "o")), "at most 10000 consumers join")


@pytest.mark.parametrize("groups", ["0", "-5", "1000001"])
def test_fleet_gen_refuses_group_counts_out_of_range(tmp_path: Path, groups: str) -> None:
    refused(cli("fleet-gen", "--groups", groups, "--out", str(tmp_path / "f")), "--groups must be between 1 and")
    assert not (tmp_path / "f").exists()


def test_fleet_gen_documents_its_limits() -> None:
    done = cli("fleet-gen", "--help")
    assert "1 to 1000000" in " ".join(done.stdout.split())


def test_fleet_gen_refuses_a_folder_it_did_not_write(tmp_path: Path) -> None:
    (tmp_path / "snap").mkdir()
    (tmp_path / "snap" / "groups.jsonl").write_text('{"group": "real", "strategy": "AVG"}\n')
    refused(cli("fleet-gen", "--groups", "2", "--out", str(tmp_path / "snap")), "was not written by fleet-gen")
    assert [p.name for p in (tmp_path / "snap").iterdir()] == ["groups.jsonl"]


def test_fleet_gen_in_another_format_leaves_no_stale_table(fleet: Path) -> None:
    (fleet / "notes.txt").write_text("kept: fleet-gen did not write it")
    done = cli("fleet-gen", "--groups", "2", "--out", str(fleet), "--format", "jsonl")
    assert done.returncode == 0, done.stderr
    tables = sorted(p.name for p in fleet.iterdir() if not p.name.startswith("_"))
    assert tables == [
        "groups.jsonl",
        "members.jsonl",
        "notes.txt",
        "offsets.jsonl",
        "routes.jsonl",
        "subscriptions.jsonl",
    ]
