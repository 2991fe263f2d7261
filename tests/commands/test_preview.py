"""``allocate-mq`` and ``simulate`` from route files, run as separate processes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rocket_rebalance.model import MessageQueue, prepare_rebalance_input
from rocket_rebalance.plan import movement, plan
from rocket_rebalance.strategies import create_strategy
from tests.commands.conftest import RunCli

EXAMPLES = [
    json.loads(line)
    for line in (Path(__file__).parents[1] / "golden" / "allocatemq_examples.jsonl").read_text("utf-8").splitlines()
]


def _example_args(example: dict[str, Any], tmp_path: Path) -> list[str]:
    route = tmp_path / f"{example['id']}.json"
    route.write_text(json.dumps({"queueDatas": example["queueDatas"]}), encoding="utf-8")
    argv = example["argv"]
    return ["allocate-mq", "-t", argv[argv.index("-t") + 1], "-i", argv[argv.index("-i") + 1], "--route", str(route)]


@pytest.mark.parametrize("example", EXAMPLES, ids=[e["id"] for e in EXAMPLES])
def test_mqadmin_order_prints_exactly_what_mqadmin_printed(
    example: dict[str, Any], tmp_path: Path, run_cli: RunCli
) -> None:
    done = run_cli(*_example_args(example, tmp_path), "--mqadmin-order")
    assert done.stdout.rstrip("\n") == example["stdout"]


@pytest.mark.parametrize("example", EXAMPLES, ids=[e["id"] for e in EXAMPLES])
def test_default_output_is_what_consumers_compute(example: dict[str, Any], tmp_path: Path, run_cli: RunCli) -> None:
    args = _example_args(example, tmp_path)
    topic = args[2]
    queues = [MessageQueue(topic, d["brokerName"], i) for d in example["queueDatas"] for i in range(d["readQueueNums"])]
    ids = [cid.strip() for cid in args[4].split(",")]
    ready = prepare_rebalance_input(queues, ids)
    expected = plan(create_strategy("AVG"), "aa", ready.mq_all, ready.cid_all)
    got = json.loads(run_cli(*args).stdout)["result"]
    assert list(got) == list(ready.cid_all)
    assert got == {cid: [mq.to_dict() for mq in share] for cid, share in expected.items()}
    mqadmin = json.loads(example["stdout"])["result"]
    assert {cid.strip() for cid in mqadmin} == set(got)


def test_mqadmin_order_warns_when_consumers_would_differ(route_file: Path, run_cli: RunCli) -> None:
    done = run_cli(
        "allocate-mq",
        "-t",
        "TopicTest",
        "-i",
        "192.168.0.1,192.168.0.2,192.168.0.3",
        "--route",
        route_file,
        "--mqadmin-order",
    )
    assert "would really own other queues" in done.stderr


def test_table_format_counts_queues(route_file: Path, run_cli: RunCli) -> None:
    done = run_cli("allocate-mq", "-t", "TopicTest", "-i", "c1,c2,c3", "--route", route_file, "--format", "table")
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["consumer", "queues", "owned"]
    assert [line.split()[1] for line in lines[1:4]] == ["3", "3", "2"]
    assert lines[-1] == "3 consumers, 8 queues assigned"


def test_every_strategy_and_its_options(route_file: Path, run_cli: RunCli, tmp_path: Path) -> None:
    rooms = tmp_path / "rooms.json"
    rooms.write_text(
        '{"queueDatas": [{"brokerName": "hz@broker-a", "readQueueNums": 3}, '
        '{"brokerName": "sh@broker-b", "readQueueNums": 3}]}',
        encoding="utf-8",
    )
    cases = [
        (route_file, ["--strategy", "AVG_BY_CIRCLE"]),
        (route_file, ["--strategy", "CONSISTENT_HASH", "--virtual-nodes", "5"]),
        (route_file, ["--strategy", "CONFIG", "--config-queues", "broker-a:0,broker-b:3"]),
        (rooms, ["--strategy", "MACHINE_ROOM", "--idcs", "hz"]),
        (rooms, ["--strategy", "MACHINE_ROOM_NEARBY", "--inner", "CONSISTENT_HASH", "--virtual-nodes", "3"]),
    ]
    for route, options in cases:
        got = json.loads(run_cli("allocate-mq", "-t", "T", "-i", "hz@1,sh@2", "--route", route, *options).stdout)
        assert set(got["result"]) == {"hz@1", "sh@2"}
    config = json.loads(run_cli("allocate-mq", "-t", "T", "-i", "a,b", "--route", route_file, *cases[2][1]).stdout)
    assert (
        config["result"]["a"]
        == config["result"]["b"]
        == [
            {"brokerName": "broker-a", "queueId": 0, "topic": "T"},
            {"brokerName": "broker-b", "queueId": 3, "topic": "T"},
        ]
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-i", "a,,b"], "client ID number 2 in 'a,,b' is empty"),
        (["-i", "a", "--virtual-nodes", "3"], "--virtual-nodes does not apply to strategy AVG"),
        (["-i", "a", "--strategy", "MACHINE_ROOM"], "MACHINE_ROOM needs --idcs"),
        (["-i", "a", "--strategy", "CONFIG", "--config-queues", "broker-a"], "is not BROKER:QUEUE_ID"),
        (["-i", "a", "--strategy", "CONSISTENT_HASH", "--virtual-nodes", "-1"], "illegal virtualNodeCnt :-1"),
    ],
)
def test_bad_options_get_one_readable_line(route_file: Path, run_cli: RunCli, args: list[str], message: str) -> None:
    done = run_cli("allocate-mq", "-t", "TopicTest", "--route", route_file, *args, check=False)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and message in done.stderr and "Traceback" not in done.stderr


def test_unknown_strategy_lists_valid_names(route_file: Path, run_cli: RunCli) -> None:
    done = run_cli("allocate-mq", "-t", "T", "-i", "a", "--route", route_file, "--strategy", "FOO", check=False)
    assert done.returncode == 2 and "AVG_BY_CIRCLE" in done.stderr and "MACHINE_ROOM_NEARBY" in done.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '{"queueDatas": [\n  {"brokerName": "a", "readQueueNums": 4},\n'
            '  {"brokerName": "b",\n   "readQueueNums": "4"}]}',
            "line 3: queueDatas[1].readQueueNums must be a whole number >= 0, got '4'",
        ),
        ('{"queueDatas": [\n  {"readQueueNums": 4}]}', "line 2: queueDatas[0].brokerName must be a non-empty string"),
        ('{"queueDatas": [\n\n  {"brokerName": "a",, }]}', "line 3: not valid JSON"),
        ('{"brokerDatas": []}', "line 1: queueDatas must be a list"),
    ],
)
def test_malformed_route_file_names_line_and_field(tmp_path: Path, run_cli: RunCli, text: str, message: str) -> None:
    route = tmp_path / "bad.json"
    route.write_text(text, encoding="utf-8")
    done = run_cli("allocate-mq", "-t", "T", "-i", "a", "--route", route, check=False)
    assert done.returncode == 2
    assert f"{route} {message}" in done.stderr


def test_missing_route_source_is_explained(run_cli: RunCli) -> None:
    done = run_cli("allocate-mq", "-t", "T", "-i", "a", check=False)
    assert done.returncode == 2 and "either -n ADDRESS or --route FILE" in done.stderr


def test_simulate_join_matches_the_library(route_file: Path, run_cli: RunCli) -> None:
    done = run_cli(
        "simulate",
        "-t",
        "TopicTest",
        "--route",
        route_file,
        "-i",
        "c1,c2,c3",
        "--join",
        "c4",
        "--strategy",
        "AVG",
        "--strategy",
        "CONSISTENT_HASH",
        "--split-view",
        "--json",
    )
    outcomes = json.loads(done.stdout)["outcomes"]
    assert [o["strategy"] for o in outcomes] == ["AVG", "CONSISTENT_HASH"]
    queues = [MessageQueue("TopicTest", b, i) for b in ("broker-a", "broker-b") for i in range(4)]
    for outcome in outcomes:
        strategy = create_strategy(outcome["strategy"])
        before = plan(strategy, "simulated_group", queues, ["c1", "c2", "c3"])
        after = plan(strategy, "simulated_group", queues, ["c1", "c2", "c3", "c4"])
        expected = movement(before, after)
        assert outcome["moved"] == len(expected.moved) and outcome["minimumMoves"] == expected.minimum
        assert [c["after"] for c in outcome["consumers"]] == [len(after[c]) for c in ["c1", "c2", "c3", "c4"]]
        assert outcome["splitView"] is not None
    assert outcomes[0]["splitView"]["doubleOwned"], "AVG's window after a join has double owners"


def test_simulate_broker_down_and_leave_as_text(route_file: Path, run_cli: RunCli, tmp_path: Path) -> None:
    members = tmp_path / "members.txt"
    members.write_text("c1\nc2\n\nc3\n", encoding="utf-8")
    done = run_cli(
        "simulate",
        "-t",
        "TopicTest",
        "--route",
        route_file,
        "--members",
        members,
        "--leave",
        "c3",
        "--broker-down",
        "broker-b",
    )
    assert "AVG: TopicTest, 3 -> 2 consumers" in done.stdout
    assert "of 4 queues move" in done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--leave", "c9"], "cannot leave: c9 not in the group"),
        (["--join", "c1"], "cannot join: c1 already in the group"),
        (["--broker-down", "broker-z"], "has no broker broker-z"),
        (["--broker-down", "broker-a", "--broker-down", "broker-b"], "no readable queue after the change"),
    ],
)
def test_simulate_bad_changes(route_file: Path, run_cli: RunCli, args: list[str], message: str) -> None:
    done = run_cli("simulate", "-t", "TopicTest", "--route", route_file, "-i", "c1,c2", *args, check=False)
    assert done.returncode == 2 and message in done.stderr
