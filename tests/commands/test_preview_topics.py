"""``allocate-mq`` and ``simulate`` with several topics and with this library's own strategies (CROSS_TOPIC,
CONSISTENT_HASH_BOUNDED): what they print against the library, and their refusals (one line, exit status 2).

Most runs are in this process (``cli.main``, the same code path as the command, without a Python start each); the
exit status and the one line on stderr of a real process are checked once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rocket_rebalance.cli import main
from rocket_rebalance.model import MessageQueue, prepare_rebalance_input
from rocket_rebalance.plan import movement, plan
from rocket_rebalance.strategies import AllocateMessageQueueStrategy, create_strategy
from tests.commands.conftest import RunCli

TOPICS = [f"Topic{k}" for k in range(10)]
CIDS = ["c1", "c2", "c3", "c4"]
ROUTE = {"queueDatas": [{"brokerName": "broker-a", "readQueueNums": 5}, {"brokerName": "broker-b", "readQueueNums": 5}]}
PYTHON_ONLY = "this library's own: Java consumers cannot run"


@pytest.fixture
def ten_queues(tmp_path: Path) -> Path:
    """One route of 10 queues (two brokers of 5), used for every topic."""
    path = tmp_path / "ten.json"
    path.write_text(json.dumps(ROUTE), encoding="utf-8")
    return path


def topic_args(topics: list[str] = TOPICS) -> list[str]:
    return [arg for topic in topics for arg in ("-t", topic)]


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    """``rocket-rebalance ARGS`` in this process: exit status, stdout, stderr."""
    status = main([str(arg) for arg in args])
    out, err = capsys.readouterr()
    return status, out, err


def printed_json(capsys: pytest.CaptureFixture[str], *args: str | Path) -> Any:
    status, out, err = run(capsys, *args)
    assert status == 0, err
    return json.loads(out)


def queues_of(topics: list[str] = TOPICS) -> list[MessageQueue]:
    return [MessageQueue(t, b, q) for t in topics for b in ("broker-a", "broker-b") for q in range(5)]


def as_dicts(shares: dict[str, list[MessageQueue]]) -> dict[str, list[dict[str, Any]]]:
    return {cid: [mq.to_dict() for mq in share] for cid, share in shares.items()}


def whole_plan(strategy: AllocateMessageQueueStrategy, members: list[str], topics: list[str] = TOPICS) -> Any:
    """The plan of all the topics' queues in one call, as a strategy that spans topics is given them."""
    ready = prepare_rebalance_input(queues_of(topics), members)
    return plan(strategy, "aa", ready.mq_all, ready.cid_all)


def test_ten_topics_over_four_consumers_avg_piles_up_remainders_and_cross_topic_evens_them(
    capsys: pytest.CaptureFixture[str], ten_queues: Path
) -> None:
    """apache/rocketmq#1945: 10 topics of 10 queues over 4 consumers."""
    args: list[str | Path] = ["allocate-mq", *topic_args(), "--route", ten_queues, "-i", ",".join(CIDS)]
    avg = printed_json(capsys, *args)
    assert avg["totals"] == {"c1": 30, "c2": 30, "c3": 20, "c4": 20}
    assert "note" not in avg and "javaCompatible" not in avg  # a Java strategy: mqadmin's shape, plus the totals
    cross = printed_json(capsys, *args, "--strategy", "CROSS_TOPIC")
    assert cross["totals"] == dict.fromkeys(CIDS, 25)
    assert cross["result"] == as_dicts(whole_plan(create_strategy("CROSS_TOPIC"), CIDS))
    for topic in TOPICS:  # and each topic still within one queue
        counts = [sum(q["topic"] == topic for q in share) for share in cross["result"].values()]
        assert max(counts) - min(counts) <= 1
    assert cross["javaCompatible"] is False and PYTHON_ONLY in cross["note"] and "CROSS_TOPIC-AVG" in cross["note"]


def test_several_topics_as_a_table_show_each_topic_and_the_total(
    capsys: pytest.CaptureFixture[str], ten_queues: Path
) -> None:
    status, out, _ = run(
        capsys, "allocate-mq", *topic_args(TOPICS[:3]), "--route", ten_queues, "-i", "c1,c2,c3,c4",
        "--format", "table", "--strategy", "CROSS_TOPIC", "--inner", "AVG_BY_CIRCLE",
    )  # fmt: skip
    lines = out.splitlines()
    assert status == 0 and lines[0].split() == ["consumer", *TOPICS[:3], "total"]
    assert sorted(int(line.split()[-1]) for line in lines[1:5]) == [7, 7, 8, 8]
    assert lines[5] == "4 consumers, 30 queues assigned over 3 topics; totals 7 to 8"
    assert lines[6].startswith("note: CROSS_TOPIC-AVG_BY_CIRCLE is " + PYTHON_ONLY) and len(lines) == 7


def test_one_route_file_per_topic_in_the_order_given(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    small, large = tmp_path / "small.json", tmp_path / "large.json"
    small.write_text('{"queueDatas": [{"brokerName": "b", "readQueueNums": 2}]}', encoding="utf-8")
    large.write_text('{"queueDatas": [{"brokerName": "b", "readQueueNums": 6}]}', encoding="utf-8")
    got = printed_json(capsys, "allocate-mq", "-t", "A", "-t", "B", "--route", small, "--route", large, "-i", "x,y")
    held = {(q["topic"], q["queueId"]) for share in got["result"].values() for q in share}
    assert held == {("A", q) for q in range(2)} | {("B", q) for q in range(6)}
    assert got["totals"] == {"x": 4, "y": 4}


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (["--strategy", "CONSISTENT_HASH_BOUNDED", "--eps", "0", "--virtual-nodes", "7"],
         create_strategy("CONSISTENT_HASH_BOUNDED", eps=0, virtual_node_count=7)),
        (["--strategy", "CROSS_TOPIC", "--inner", "CONSISTENT_HASH_BOUNDED", "--eps", "0.5", "--virtual-nodes", "3"],
         create_strategy("CROSS_TOPIC", inner=create_strategy("CONSISTENT_HASH_BOUNDED", eps=0.5,
                                                              virtual_node_count=3))),
    ],
)  # fmt: skip
def test_the_bounded_hash_options_reach_the_strategy_directly_and_as_inner(
    capsys: pytest.CaptureFixture[str], ten_queues: Path, options: list[str], expected: AllocateMessageQueueStrategy
) -> None:
    """One topic: the plan is the strategy's own, whether it spans topics or not."""
    got = printed_json(capsys, "allocate-mq", "-t", "Topic0", "--route", ten_queues, "-i", "c1,c2,c3", *options)
    assert got["result"] == as_dicts(whole_plan(expected, ["c1", "c2", "c3"], ["Topic0"]))
    assert "totals" not in got and got["javaCompatible"] is False


def test_simulate_compares_the_new_strategies_beside_avg_over_all_topics(
    capsys: pytest.CaptureFixture[str], ten_queues: Path
) -> None:
    got = printed_json(
        capsys, "simulate", *topic_args(), "--route", ten_queues, "-i", ",".join(CIDS), "--join", "c5",
        "--strategy", "AVG", "--strategy", "CROSS_TOPIC", "--strategy", "CONSISTENT_HASH_BOUNDED", "--json",
    )  # fmt: skip
    assert got["topics"] == TOPICS and "topic" not in got
    assert [o["strategy"] for o in got["outcomes"]] == ["AVG", "CROSS_TOPIC-AVG", "CONSISTENT_HASH_BOUNDED"]
    assert [o["javaCompatible"] for o in got["outcomes"]] == [True, False, False]
    assert "CROSS_TOPIC-AVG, CONSISTENT_HASH_BOUNDED are " + PYTHON_ONLY in got["note"]
    avg, cross, bounded = got["outcomes"]
    assert [c["before"] for c in avg["consumers"]] == [30, 30, 20, 20, 0]
    assert [c["before"] for c in cross["consumers"]] == [25, 25, 25, 25, 0]
    assert [c["after"] for c in cross["consumers"]] == [20] * 5
    assert avg["consumers"][0]["topics"]["Topic3"] == {"before": 3, "after": 2}
    assert avg["balanceBefore"]["max_over_avg"] == 1.2 and cross["balanceBefore"]["max_over_avg"] == 1.0
    # CROSS_TOPIC moves what planning all the topics in one call moves; AVG what planning each topic moves
    strategy = create_strategy("CROSS_TOPIC")
    moved = movement(whole_plan(strategy, CIDS), whole_plan(strategy, [*CIDS, "c5"])).moved
    assert cross["movedQueues"] == [mq.to_dict() for mq in moved]
    per_topic = [
        movement(whole_plan(create_strategy("AVG"), CIDS, [t]), whole_plan(create_strategy("AVG"), [*CIDS, "c5"], [t]))
        for t in TOPICS
    ]
    assert avg["moved"] == sum(len(m.moved) for m in per_topic) and avg["minimumMoves"] == 20
    assert sum(c["after"] for c in bounded["consumers"]) == 100


def test_simulate_text_names_the_topics_and_notes_python_only_strategies_once(
    capsys: pytest.CaptureFixture[str], ten_queues: Path
) -> None:
    status, out, err = run(
        capsys, "simulate", *topic_args(TOPICS[:2]), "--route", ten_queues, "-i", "c1,c2,c3",
        "--strategy", "CONSISTENT_HASH_BOUNDED", "--strategy", "CROSS_TOPIC", "--split-view",
    )  # fmt: skip
    assert status == 0 and err == ""
    assert "CROSS_TOPIC-AVG: 2 topics (Topic0, Topic1), 3 -> 3 consumers; queues per consumer over all" in out
    assert out.count("note:") == 1 and out.rstrip().splitlines()[-1].startswith("note: CONSISTENT_HASH_BOUNDED, ")
    plain = run(capsys, "simulate", "-t", "Topic0", "--route", ten_queues, "-i", "c1,c2", "--json")
    assert plain[0] == 0 and json.loads(plain[1])["note"] is None and json.loads(plain[1])["topic"] == "Topic0"


def test_a_broker_down_leaves_the_topics_it_served(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    both, only_a = tmp_path / "both.json", tmp_path / "a.json"
    both.write_text(json.dumps(ROUTE), encoding="utf-8")
    only_a.write_text('{"queueDatas": [{"brokerName": "broker-a", "readQueueNums": 4}]}', encoding="utf-8")
    args: list[str | Path] = [
        "simulate", "-t", "Both", "-t", "OnlyA", "--route", both, "--route", only_a, "-i", "c1,c2", "--json",
    ]  # fmt: skip
    outcome = printed_json(capsys, *args, "--broker-down", "broker-b")["outcomes"][0]
    assert outcome["balanceAfter"]["queues"] == 5 + 4  # OnlyA keeps its queues: broker-b never served it
    gone = printed_json(capsys, *args, "--broker-down", "broker-a")["outcomes"][0]
    assert [c["topics"]["OnlyA"]["after"] for c in gone["consumers"]] == [0, 0]  # skipped, as consumers skip it
    status, _, err = run(capsys, *args, "--broker-down", "broker-z")
    assert status == 2 and "topics Both, OnlyA have no broker broker-z; brokers: broker-a, broker-b" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--strategy", "CONSISTENT_HASH_BOUNDED", "--eps", "abc"], "--eps must be a number, got 'abc'"),
        (["--strategy", "CONSISTENT_HASH_BOUNDED", "--eps", "-0.5"], "eps must be a finite number >= 0, got -0.5"),
        (["--strategy", "CONSISTENT_HASH_BOUNDED", "--eps", "nan"], "eps must be a finite number >= 0, got nan"),
        (["--strategy", "CONSISTENT_HASH_BOUNDED", "--virtual-nodes", "x"], "--virtual-nodes must be a whole number"),
        (["--strategy", "CONSISTENT_HASH_BOUNDED", "--virtual-nodes", "0"], "at least 1 virtual node, got 0"),
        (["--strategy", "CONSISTENT_HASH", "--eps", "0"],
         "--eps does not apply to strategy CONSISTENT_HASH (it is for CONSISTENT_HASH_BOUNDED, also as the --inner of "
         "CROSS_TOPIC)"),
        (["--strategy", "CROSS_TOPIC", "--eps", "0"], "--eps does not apply to strategy CROSS_TOPIC"),
        (["--strategy", "CROSS_TOPIC", "--inner", "CONSISTENT_HASH"],
         "--inner CONSISTENT_HASH does not apply to strategy CROSS_TOPIC (its inner strategy is one of AVG, "
         "AVG_BY_CIRCLE, CONSISTENT_HASH_BOUNDED)"),
        (["--strategy", "MACHINE_ROOM_NEARBY", "--inner", "CONSISTENT_HASH_BOUNDED"],
         "--inner CONSISTENT_HASH_BOUNDED does not apply to strategy MACHINE_ROOM_NEARBY"),
        (["--inner", "AVG"], "--inner does not apply to strategy AVG (it is for MACHINE_ROOM_NEARBY, CROSS_TOPIC)"),
        (["-t", "Topic1", "--strategy", "CONFIG", "--config-queues", "broker-a:0"], "strategy CONFIG takes one -t"),
        (["-t", "Topic1", "--mqadmin-order"], "--mqadmin-order reproduces mqadmin allocateMQ, which takes one topic"),
        (["-t", "Topic0"], "topic given more than once: Topic0"),
        (["-t", "Topic1", "-t", "Topic2", "--route", "{route}"],
         "3 topics and 2 route files: give one --route per -t, in the same order, or one for every topic"),
    ],
)  # fmt: skip
def test_bad_strategy_options_and_topics_are_one_line(
    capsys: pytest.CaptureFixture[str], ten_queues: Path, args: list[str], message: str
) -> None:
    argv = [arg.replace("{route}", str(ten_queues)) for arg in args]
    status, out, err = run(capsys, "allocate-mq", "-t", "Topic0", "--route", ten_queues, "-i", "c1,c2", *argv)
    assert status == 2 and out == ""
    assert err.startswith("rocket-rebalance: ") and message in err and err.count("\n") == 1


def test_a_comparison_takes_an_option_that_configures_any_of_its_strategies(
    capsys: pytest.CaptureFixture[str], ten_queues: Path
) -> None:
    base: list[str | Path] = [
        "simulate", "-t", "Topic0", "--route", ten_queues, "-i", "c1,c2,c3", "--join", "c4", "--json",
    ]  # fmt: skip
    got = printed_json(
        capsys, *base, "--strategy", "CONSISTENT_HASH", "--strategy", "CONSISTENT_HASH_BOUNDED", "--strategy", "AVG",
        "--virtual-nodes", "3",
    )  # fmt: skip
    cids = ["c1", "c2", "c3", "c4"]
    for outcome, strategy in zip(
        got["outcomes"],
        [create_strategy("CONSISTENT_HASH", virtual_node_count=3),
         create_strategy("CONSISTENT_HASH_BOUNDED", virtual_node_count=3), create_strategy("AVG")],
        strict=True,
    ):  # fmt: skip
        after = whole_plan(strategy, cids, ["Topic0"])
        assert [c["after"] for c in outcome["consumers"]] == [len(after[cid]) for cid in cids]
    status, _, err = run(capsys, *base, "--strategy", "AVG", "--strategy", "CROSS_TOPIC", "--virtual-nodes", "3")
    assert status == 2 and "--virtual-nodes does not apply to strategies AVG, CROSS_TOPIC" in err


def test_a_process_refusing_a_bad_eps_exits_2_with_one_line(route_file: Path, run_cli: RunCli) -> None:
    done = run_cli(
        "allocate-mq", "-t", "T", "-i", "a", "--route", route_file, "--strategy", "CROSS_TOPIC",
        "--inner", "CONSISTENT_HASH_BOUNDED", "--eps", "1e", check=False,
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "rocket-rebalance: --eps must be a number, got '1e'\n"
