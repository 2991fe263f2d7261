"""The Spark job equals the plain-Python reference, table by table, on small snapshots (local[2])."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from rocket_rebalance.cli import main as cli_main
from rocket_rebalance.pipeline import SAMPLE_SCENARIO, SAMPLE_SNAPSHOT
from rocket_rebalance.pipeline.reference import Tables, run_reference
from rocket_rebalance.pipeline.scenario import Scenario, load_scenario
from rocket_rebalance.pipeline.schema import OUTPUT_TABLES
from rocket_rebalance.progress import Progress
from rocket_rebalance.snapshot_folder import SnapshotError
from tests.pipeline.test_engines import local_agrees
from tests.progress_lines import progress_of

pytestmark = pytest.mark.spark


def canonical(rows: list[dict[str, Any]], table: str) -> list[str]:
    """Rows as sorted JSON texts; the rejected row's own text differs between Spark's to_json and json.dumps."""
    if table == "rejected":
        rows = [{k: v for k, v in row.items() if k != "row"} for row in rows]
    return sorted(json.dumps(row, sort_keys=True) for row in rows)


def spark_tables(out: Path) -> Tables:
    return {name: pq.read_table(out / f"{name}.parquet").to_pylist() for name in OUTPUT_TABLES}


def assert_same(spark_out: Path, reference: Tables) -> None:
    found = spark_tables(spark_out)
    for name in OUTPUT_TABLES:
        assert canonical(found[name], name) == canonical(reference[name], name), name


def run(spark: Any, snapshot: Path, out: Path | str, **kwargs: Any) -> Any:
    from rocket_rebalance.pipeline.job import run_impact

    log = io.StringIO()
    result = run_impact(snapshot, out, spark=spark, partitions=2, progress=Progress("impact", log), **kwargs)
    lines = log.getvalue().splitlines()
    assert lines and lines == progress_of(log.getvalue(), "impact"), lines
    assert any(re.search(r" analyzing groups: (\d+)/\1 Spark tasks in \d+s$", line) for line in lines), lines
    return result


def test_sample_with_scenario_equals_the_reference(spark: Any, tmp_path: Path) -> None:
    scenario = load_scenario(SAMPLE_SCENARIO.read_text())
    result = run(spark, SAMPLE_SNAPSHOT, tmp_path / "out", scenario=scenario)
    reference = run_reference(SAMPLE_SNAPSHOT, scenario=scenario)
    assert_same(tmp_path / "out", reference)
    local_agrees(SAMPLE_SNAPSHOT, tmp_path / "out", result, scenario=scenario)
    assert result.rows["rejected"] == len(reference["rejected"]) > 0
    reasons = {(r["table"], r["reason"]) for r in reference["rejected"]}
    assert ("routes", "negative read queue count") in reasons
    assert ("offsets", "committed offset beyond max offset") in reasons
    assert ("members", "client ID is missing") in reasons
    assert ("members", "the group has no settings row") in reasons
    kinds = {(v["group"], v["kind"], v["reason"].split(":")[0]) for v in reference["violations"]}
    assert ("order_service", "unowned", "split view") in kinds
    assert ("pinned_reader", "double_owned", "CONFIG overlap") in kinds
    assert ("room_reader", "unowned", "MACHINE_ROOM") in kinds
    assert ("pay_service", "double_owned", "duplicate client ID") in kinds
    assert (
        "pinned_reader",
        "unknown_view",
        "its member list (digest 11c77d6f2b5f9a6de6c6559a9c1d2643) matches no list known for the group",
    ) in kinds
    nearby = [v for v in reference["violations"] if v["group"] == "nearby_reader" and v["side"] == "before"]
    # its third consumer's digest names the group's own list: no queue is split (the retry topic has too few queues)
    assert nearby and {v["kind"] for v in nearby} == {"idle_consumer"}
    assert not [v for v in reference["violations"] if v["group"] == "audit_broadcast"]
    report = (tmp_path / "out" / "report.md").read_text()
    assert "Fleet impact" in report and (tmp_path / "out" / "charts" / "balance.png").exists()
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["totals"]["groups"] == 6


@pytest.mark.parametrize(("compared", "writer"), [(("CONSISTENT_HASH", "AVG"), "pyarrow"), ((), "spark")])
def test_fewer_compared_strategies_reach_the_executors(
    spark: Any, tmp_path: Path, compared: tuple[str, ...], writer: str
) -> None:
    """``--compare``: the executors (either writer) compare the named strategies only, as the reference does, and
    the report's comparison lists those; with none, the comparison table is empty and the others are whole."""
    from rocket_rebalance.pipeline.options import WriterSpec

    scenario = load_scenario(SAMPLE_SCENARIO.read_text())
    run(spark, SAMPLE_SNAPSHOT, tmp_path, scenario=scenario, compared=compared, writer=WriterSpec(writer))
    reference = run_reference(SAMPLE_SNAPSHOT, scenario=scenario, compared=compared)
    assert_same(tmp_path, reference)
    strategies = {row["strategy"] for row in spark_tables(tmp_path)["comparison"]}
    assert strategies == ({*compared, "current"} if compared else set())
    assert reference["groups"] == run_reference(SAMPLE_SNAPSHOT, scenario=scenario)["groups"]
    section = (tmp_path / "report.md").read_text().split("## Strategy comparison")[1].split("##")[0]
    listed = {line.split("|")[1].strip() for line in section.splitlines()[4:] if line.startswith("|")}
    assert listed == strategies and ("(none)" in section) == (not compared)
    assert ("**No strategy comparison**" in (tmp_path / "report.md").read_text()) == (not compared)


def test_an_output_uri_gets_the_tables_the_summary_and_the_report(spark: Any, tmp_path: Path) -> None:
    """A URI --out goes through the file systems of Spark (rejected rows, aggregates) and pyarrow (the rest)."""
    scenario = load_scenario(SAMPLE_SCENARIO.read_text())
    result = run(spark, SAMPLE_SNAPSHOT, f"file://{tmp_path}/out", scenario=scenario, report=True)
    assert_same(tmp_path / "out", run_reference(SAMPLE_SNAPSHOT, scenario=scenario))
    assert result.report == f"file://{tmp_path}/out/report.md"
    assert "Fleet impact" in (tmp_path / "out" / "report.md").read_text()
    assert (tmp_path / "out" / "charts" / "balance.png").exists()
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["rows"] == result.rows


def make_after(base: Path) -> Path:
    """The sample snapshot after a deploy: one order consumer replaced, broker-b gone, a new group."""
    after = base / "after"
    after.mkdir()
    for name in ("routes", "members", "subscriptions", "groups"):
        lines = (SAMPLE_SNAPSHOT / f"{name}.jsonl").read_text().splitlines()
        if name == "routes":
            lines = [line for line in lines if '"broker-b"' not in line]
        if name == "members":
            lines = [line.replace("10.0.1.12@31002", "10.0.1.19@31009") for line in lines]
            lines.append(json.dumps({"group": "new_group", "client_id": "10.9.9.9@1#1", "view": None}))
        if name == "subscriptions":
            lines.append(json.dumps({"group": "new_group", "topic": "PayTopic"}))
        if name == "groups":
            lines.append(json.dumps({"group": "new_group", "strategy": "AVG"}))
        (after / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
    return after


def test_after_snapshot_equals_the_reference(spark: Any, tmp_path: Path) -> None:
    after = make_after(tmp_path)
    out = tmp_path / "out"
    result = run(spark, SAMPLE_SNAPSHOT, out, after=after, report=False)
    reference = run_reference(SAMPLE_SNAPSHOT, after=after)
    assert_same(out, reference)
    local_agrees(SAMPLE_SNAPSHOT, out, result, after=after, report=False)
    # pay_service (CONSISTENT_HASH, same consumers) keeps its broker-a queues where they were when broker-b goes
    assert {r["group"] for r in reference["moved_queues"]} == {"order_service"}
    (new,) = [r for r in reference["groups"] if r["group"] == "new_group"]
    assert (new["strategy_before"], new["consumers_after"], new["rebalances"]) == (None, 1, True)
    assert not (out / "report.md").exists()


def test_generated_parquet_fleet_equals_the_reference(spark: Any, tmp_path: Path) -> None:
    fleet = tmp_path / "fleet"
    assert cli_main(["fleet-gen", "--groups", "60", "--out", str(fleet), "--seed", "5", "--split-views", "0.2"]) == 0
    scenario: Scenario = load_scenario(
        {"changes": [{"action": "join", "count": 1}, {"action": "broker_down", "broker": "broker-a"}]}
    )
    out = tmp_path / "out"
    result = run(spark, fleet, out, scenario=scenario, report=False)
    reference = run_reference(fleet, scenario=scenario)
    assert_same(out, reference)
    local_agrees(fleet, out, result, scenario=scenario, report=False)
    assert result.totals["groups"] == 60 and result.totals["moved"] > 0
    assert any(v["reason"].startswith("split view") for v in reference["violations"])
    # this library's own strategies are in the fleet, and in every group's comparison: Spark agrees on them too
    strategies = {g["strategy_before"] for g in reference["groups"]}
    assert {"CONSISTENT_HASH_BOUNDED", "CROSS_TOPIC-AVG", "CROSS_TOPIC-CONSISTENT_HASH_BOUNDED"} <= strategies
    assert {"CONSISTENT_HASH_BOUNDED", "CROSS_TOPIC"} <= {r["strategy"] for r in reference["comparison"]}


def test_missing_table_fails_before_any_spark_work(tmp_path: Path) -> None:
    from rocket_rebalance.pipeline.job import run_impact

    class NoSpark:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"Spark was used ({name}) before the inputs were checked")

    shutil.copytree(SAMPLE_SNAPSHOT, tmp_path / "snap")
    (tmp_path / "snap" / "offsets.jsonl").unlink()
    with pytest.raises(SnapshotError, match="table 'offsets' not found"):
        run_impact(tmp_path / "snap", tmp_path / "out", spark=NoSpark(), progress=Progress("impact", None))  # type: ignore[arg-type]


def test_cli_reports_a_missing_column_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(SAMPLE_SNAPSHOT, tmp_path / "snap")
    (tmp_path / "snap" / "routes.jsonl").write_text('{"topic": "T", "broker": "b"}\n')
    status = cli_main(["impact", "--snapshot", str(tmp_path / "snap"), "--out", str(tmp_path / "out")])
    assert status == 2
    assert "table routes has no column read_queue_nums" in capsys.readouterr().err


def listening_addresses(port: int) -> set[str]:
    """The local addresses (hex, as /proc/net/tcp* gives them) of the sockets listening on ``port``."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, _, hex_port = local.partition(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.add(address)
    return found


def test_a_local_job_listens_on_loopback_only(spark: Any) -> None:
    """The driver's RPC has no authentication: a local job binds it to 127.0.0.1, not to the address the host
    name resolves to (probe 2026-11-24, finding 16). Read from the kernel's socket table, not from Spark's conf."""
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.driver.bindAddress") == "127.0.0.1" and conf.get("spark.driver.host") == "127.0.0.1"
    addresses = listening_addresses(int(conf.get("spark.driver.port")))
    loopback = {"0100007F", "0000000000000000FFFF00000100007F"}  # 127.0.0.1, and as an IPv4-mapped IPv6 address
    assert addresses and addresses <= loopback, addresses
