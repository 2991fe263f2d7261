"""Topic and consumer-group names are checked wherever they come in, by the library's one check (Java's
``TopicValidator`` rules: ``[%|a-zA-Z0-9_-]``, at most 127 characters for a topic and 255 for a group): every
command's ``-t``/``-g`` options, route files, scenario files and the API. A bad name is one line and exit status 2
on the command line, a ``ValueError`` (its named subclass, where the entry has one) in the API, and nothing is
asked of a server or planned first (issue 26: 18, in part)."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from rocket_rebalance import cli
from rocket_rebalance.admin.reads import consumer_connection, consumer_progress, fetch_members, fetch_route
from rocket_rebalance.admin.snapshot import take_snapshot
from rocket_rebalance.pipeline import SAMPLE_SNAPSHOT
from rocket_rebalance.pipeline.scenario import ScenarioError, load_scenario
from rocket_rebalance.route import RouteError, TopicRoute
from rocket_rebalance.runtime.consumer import PushConsumer
from tests.hostile.cli import run_cli

BAD_NAMES = {"space": "a b", "newline": "x\n", "empty": "", "long": "N" * 256}
"""Names each check must refuse: a character outside the rule, a trailing newline (which ``re.match`` with ``$``
would let through), nothing, and one longer than a topic or a group may be."""

RULES = ("has characters outside", "is empty", "characters long", "is not a pattern of RocketMQ names")
"""What the check says about each (a ``snapshot`` filter is a pattern, whose own rule covers some of them)."""

ROUTE = '{"queueDatas": [{"brokerName": "broker-a", "readQueueNums": 4}]}'


def free_address() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"  # closed again: nothing listens there


def command_lines(route: Path, out: Path) -> dict[str, Callable[[str], list[str]]]:
    """Every command-line path where a topic or group name comes in, the bad name in its place."""
    server = ["-n", free_address()]
    preview = ["--route", str(route), "-i", "10.0.0.1@1,10.0.0.2@2"]
    return {
        "consume -g": lambda bad: ["consume", *server, "-g", bad, "-t", "TopicA"],
        "consume -t": lambda bad: ["consume", *server, "-g", "GID_a", "-t", "TopicA", "-t", bad],
        "produce -t": lambda bad: ["produce", *server, "-t", bad, "--count", "1"],
        "consumer-progress -g": lambda bad: ["consumer-progress", *server, "-g", bad],
        "consumer-progress -t": lambda bad: ["consumer-progress", *server, "-g", "GID_a", "-t", bad],
        "consumer-connection -g": lambda bad: ["consumer-connection", *server, "-g", bad],
        "allocate-mq -t": lambda bad: ["allocate-mq", "-t", bad, *preview],
        "allocate-mq -g": lambda bad: ["allocate-mq", "-t", "TopicA", "-g", bad, *preview],
        "simulate -t": lambda bad: ["simulate", "-t", "TopicA", "-t", bad, *preview, "--join", "10.0.0.3@3"],
        "simulate -g": lambda bad: ["simulate", "-t", "TopicA", "-g", bad, *preview, "--join", "10.0.0.3@3"],
        "snapshot --group": lambda bad: ["snapshot", *server, "--out", str(out), "--group", bad],
        "snapshot --topic": lambda bad: ["snapshot", *server, "--out", str(out), "--topic", bad],
    }


@pytest.mark.parametrize("bad", BAD_NAMES.values(), ids=BAD_NAMES.keys())
@pytest.mark.parametrize("entry", command_lines(Path(), Path()).keys())
def test_every_command_refuses_a_bad_name_in_one_line(
    entry: str, bad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    route = tmp_path / "route.json"
    route.write_text(ROUTE, encoding="utf-8")
    argv = command_lines(route, tmp_path / "out")[entry](bad)
    try:
        status = cli.main(argv)
    except SystemExit as ended:  # refused while parsing
        status = ended.code
    captured = capsys.readouterr()
    assert status == 2, (status, captured.out[-300:], captured.err[-300:])
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("rocket-rebalance"), captured.err
    assert any(rule in lines[0] for rule in RULES), lines[0]
    assert ("topic" if entry.endswith(("-t", "--topic")) else "group") in lines[0], lines[0]
    assert not captured.out and not (tmp_path / "out").exists()


def test_a_bad_scenario_group_is_refused_before_spark_starts(tmp_path: Path) -> None:
    """As a user runs it: the scenario is checked before any Spark work, so the refusal is one line."""
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"changes": [{"action": "join", "group": "GID a", "count": 1}]}), encoding="utf-8")
    done = run_cli(
        "impact", "--snapshot", SAMPLE_SNAPSHOT, "--scenario", scenario, "--out", tmp_path / "o", timeout=120
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.splitlines() == [
        "rocket-rebalance: scenario change 0: consumer group 'GID a' has characters outside [%|a-zA-Z0-9_-]"
    ]
    assert not (tmp_path / "o").exists()


def api_entries(tmp_path: Path) -> dict[str, tuple[type[Exception], Callable[[str], object]]]:
    """Every API entry that takes a topic or group name, with the exception it raises for a bad one."""
    address = free_address()

    def subscribe(bad: str) -> None:
        PushConsumer(address, "GID_a", topics=["TopicA"]).subscribe(bad)

    def scenario(bad: str) -> object:
        return load_scenario({"changes": [{"action": "strategy", "group": ["GID_a", bad], "strategy": "AVG"}]})

    return {
        "PushConsumer group": (ValueError, lambda bad: PushConsumer(address, bad, topics=["TopicA"])),
        "PushConsumer topics": (ValueError, lambda bad: PushConsumer(address, "GID_a", topics=["TopicA", bad])),
        "PushConsumer.subscribe": (ValueError, subscribe),
        "TopicRoute": (RouteError, lambda bad: TopicRoute(bad, ())),
        "TopicRoute.from_json": (RouteError, lambda bad: TopicRoute.from_json(bad, ROUTE, "route.json")),
        "fetch_route": (ValueError, lambda bad: fetch_route(address, bad)),
        "fetch_members topic": (ValueError, lambda bad: fetch_members(address, bad, "GID_a")),
        "fetch_members group": (ValueError, lambda bad: fetch_members(address, "TopicA", bad)),
        "consumer_progress group": (ValueError, lambda bad: consumer_progress(address, bad)),
        "consumer_progress topic": (ValueError, lambda bad: consumer_progress(address, "GID_a", bad)),
        "consumer_connection": (ValueError, lambda bad: consumer_connection(address, bad)),
        "take_snapshot groups": (ValueError, lambda bad: take_snapshot(address, tmp_path / "s", group_patterns=[bad])),
        "take_snapshot topics": (ValueError, lambda bad: take_snapshot(address, tmp_path / "s", topic_patterns=[bad])),
        "load_scenario": (ScenarioError, scenario),
    }


NOT_GIVEN = {("consumer_progress topic", "")}
"""An empty topic is how ``consumer_progress`` is asked for every topic (the command line's ``-t`` left out)."""


@pytest.mark.parametrize(
    ("entry", "bad"),
    [
        pytest.param(entry, bad, id=f"{entry}-{kind}")
        for entry in api_entries(Path())
        for kind, bad in BAD_NAMES.items()
        if (entry, bad) not in NOT_GIVEN
    ],
)
def test_every_api_entry_refuses_a_bad_name(entry: str, bad: str, tmp_path: Path) -> None:
    error, call = api_entries(tmp_path)[entry]
    with pytest.raises(error) as raised:
        call(bad)
    assert any(rule in str(raised.value) for rule in RULES), raised.value
    assert "\n" not in str(raised.value)
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("good", ["%RETRY%GID_a", "a|b-C_9", "T" * 127])
def test_good_names_pass_everywhere_they_come_in(good: str) -> None:
    assert TopicRoute.from_json(good, ROUTE).topic == good
    assert load_scenario({"changes": [{"action": "join", "group": [good, "*"], "count": 1}]}).changes
