"""Hostile input to the preview commands (``allocate-mq``, ``simulate``) and the route parser they share: every
bad input is one readable line and exit 2, sizes a user can type are bounded, and nothing is silently wrong."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocket_rebalance.model import MAX_GROUP_MEMBERS, MAX_ROUTE_BROKERS, MAX_TOPIC_QUEUES, MAX_VIRTUAL_NODES
from rocket_rebalance.route import MAX_JSON_DEPTH, RouteError, TopicRoute
from rocket_rebalance.whatif import Change
from tests.hostile.cli import one_line_error, run_cli


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*args)


def route(tmp_path: Path, *datas: dict[str, object]) -> Path:
    path = tmp_path / "route.json"
    path.write_text(json.dumps({"queueDatas": list(datas)}), encoding="utf-8")
    return path


def test_a_huge_queue_count_is_refused_before_anything_is_allocated(tmp_path: Path) -> None:
    path = route(tmp_path, {"brokerName": "b", "readQueueNums": 2**31 - 1})
    one_line_error(run("allocate-mq", "-t", "T", "--route", path, "-i", "a,b"), f"limit is {MAX_TOPIC_QUEUES}")


def test_the_queue_limit_counts_every_readable_broker_and_only_those(tmp_path: Path) -> None:
    half = MAX_TOPIC_QUEUES // 2
    readable = [{"brokerName": f"b{i}", "readQueueNums": half} for i in range(2)]
    full = TopicRoute.from_json("T", json.dumps({"queueDatas": readable}))
    assert len(full.subscribe_queues()) == MAX_TOPIC_QUEUES
    write_only = {"brokerName": "w", "readQueueNums": 2**31 - 1, "writeQueueNums": 0, "perm": 2}
    TopicRoute.from_json("T", json.dumps({"queueDatas": [*readable, write_only]}))  # not subscribed: no queues
    with pytest.raises(RouteError, match="limit"):
        TopicRoute.from_json("T", json.dumps({"queueDatas": [*readable, {"brokerName": "c", "readQueueNums": 1}]}))


def test_a_route_naming_too_many_brokers_is_one_line(tmp_path: Path) -> None:
    """A consumer keeps a connection, a heartbeat and a stream per broker: 60,000 one-queue brokers (within the
    queue limit) took minutes to start and stop (probe 11). Every command reads routes through the same check."""
    brokers = [{"brokerName": f"b{i}", "readQueueNums": 1} for i in range(MAX_ROUTE_BROKERS + 1)]
    path = route(tmp_path, *brokers)
    said = f"names {MAX_ROUTE_BROKERS + 1} brokers; the limit is {MAX_ROUTE_BROKERS} brokers per route"
    one_line_error(run("allocate-mq", "-t", "T", "--route", path, "-i", "a,b"), said)
    path = route(tmp_path, *brokers[:MAX_ROUTE_BROKERS])
    assert run("allocate-mq", "-t", "T", "--route", path, "-i", "a,b").returncode == 0


def test_write_queues_are_bounded_like_read_queues() -> None:
    """``produce`` lists a topic's write queues: a route claiming 2^31-1 of them was a MemoryError (probe 9)."""
    half = MAX_TOPIC_QUEUES // 2
    writable = [{"brokerName": f"b{i}", "readQueueNums": 1, "writeQueueNums": half} for i in range(2)]
    TopicRoute.from_json("T", json.dumps({"queueDatas": writable}))
    read_only = {"brokerName": "r", "readQueueNums": 1, "writeQueueNums": 2**31 - 1, "perm": 4}
    TopicRoute.from_json("T", json.dumps({"queueDatas": [*writable, read_only]}))  # nothing is sent there
    huge = {"brokerName": "c", "readQueueNums": 4, "writeQueueNums": 2**31 - 1}
    with pytest.raises(RouteError, match=f"2147483647 writable queues; the limit is {MAX_TOPIC_QUEUES}"):
        TopicRoute.from_json("T", json.dumps({"queueDatas": [huge]}))


def test_deeply_nested_json_is_one_line_not_a_recursion_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    one_line_error(run("allocate-mq", "-t", "T", "--route", path, "-i", "a"), "nested 100000 deep")


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    name = "[" * (MAX_JSON_DEPTH + 5) + '\\"{'
    parsed = TopicRoute.from_json("T", '{"queueDatas": [{"brokerName": "' + name + '", "readQueueNums": 1}]}')
    assert parsed.queue_datas[0].broker_name == "[" * (MAX_JSON_DEPTH + 5) + '"{'


def test_line_numbers_still_point_at_the_bad_entry() -> None:
    text = '{"queueDatas": [\n {"brokerName": "a", "readQueueNums": 1},\n\n {"brokerName": "b", "readQueueNums": -1}]}'
    with pytest.raises(RouteError, match=r"line 4: queueDatas\[1\]\.readQueueNums"):
        TopicRoute.from_json("T", text)


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
        max_leaves=20,
    )
)
def test_any_json_document_parses_or_is_a_route_error(document: object) -> None:
    for text in (json.dumps(document), json.dumps({"queueDatas": [document]}), json.dumps({"queueDatas": document})):
        try:
            TopicRoute.from_json("T", text)
        except RouteError as error:
            assert "\n" not in str(error)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_any_text_parses_or_is_a_route_error(text: str) -> None:
    try:
        TopicRoute.from_json("T", text)
    except RouteError:
        pass


def test_too_many_virtual_nodes_is_one_line(tmp_path: Path) -> None:
    path = route(tmp_path, {"brokerName": "b", "readQueueNums": 8})
    nodes = str(MAX_VIRTUAL_NODES + 1)
    done = run(
        "allocate-mq",
        "-t",
        "T",
        "--route",
        path,
        "-i",
        "a,b",
        "--strategy",
        "CONSISTENT_HASH",
        "--virtual-nodes",
        nodes,
    )
    one_line_error(done, f"limit of {MAX_VIRTUAL_NODES}")


def test_too_many_client_ids_is_one_line(tmp_path: Path) -> None:
    path = route(tmp_path, {"brokerName": "b", "readQueueNums": 8})
    ids = ",".join(f"c{i}" for i in range(MAX_GROUP_MEMBERS + 1))
    one_line_error(run("allocate-mq", "-t", "T", "--route", path, "-i", ids), f"limit is {MAX_GROUP_MEMBERS}")


def test_a_repeated_client_id_is_warned_about_with_the_queues_nobody_owns(tmp_path: Path) -> None:
    path = route(tmp_path, {"brokerName": "b", "readQueueNums": 8})
    done = run("allocate-mq", "-t", "T", "--route", path, "-i", "a,a,b")
    assert done.returncode == 0
    assert "client ID given more than once: a" in done.stderr
    assert "3 of 8 queues are owned by nobody" in done.stderr
    clean = run("allocate-mq", "-t", "T", "--route", path, "-i", "a,b")
    assert clean.returncode == 0 and clean.stderr == ""


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (("--join", ""), "cannot join: an empty name"),
        (("--join", "  "), "cannot join: an empty name"),
        (("--join", "c", "--join", "c"), "cannot join: c given twice"),
        (("--leave", "a", "--leave", "a"), "cannot leave: a given twice"),
        (("--broker-down", ""), "cannot take down: an empty name"),
    ],
)
def test_simulate_refuses_empty_and_repeated_changes(tmp_path: Path, flags: tuple[str, ...], expected: str) -> None:
    path = route(tmp_path, {"brokerName": "b", "readQueueNums": 8})
    one_line_error(run("simulate", "-t", "T", "--route", path, "-i", "a,b", *flags), expected)


def test_a_change_cannot_join_more_than_a_group_holds() -> None:
    with pytest.raises(ValueError, match=f"limit is {MAX_GROUP_MEMBERS}"):
        Change(joins=tuple(f"c{i}" for i in range(MAX_GROUP_MEMBERS + 1)))


def test_control_characters_in_an_error_cannot_forge_lines(tmp_path: Path) -> None:
    path = route(tmp_path, {"brokerName": "b", "readQueueNums": 8})
    evil = "x\n\x1b[2Jrocket-rebalance: all good"
    line = one_line_error(run("simulate", "-t", "T", "--route", path, "-i", "a,b", "--leave", evil), "cannot leave")
    assert "\x1b" not in line and "\\x1b[2J" in line and "\\n" in line


def test_control_characters_in_a_table_are_escaped(tmp_path: Path) -> None:
    path = route(tmp_path, {"brokerName": "b\x07", "readQueueNums": 2})
    done = run("allocate-mq", "-t", "T", "--route", path, "-i", "a\x1b[2J", "--format", "table")
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout
    assert "a\\x1b[2J" in done.stdout and "b\\x07:0" in done.stdout


def test_a_token_grpc_cannot_send_is_refused_at_once() -> None:
    done = run("consumer-progress", "-n", "grpc://127.0.0.1:1", "-g", "G", "--token", "sécret")
    line = one_line_error(done, "position 2")
    assert "sécret" not in line


@pytest.mark.parametrize("text", ["[" * 100_000, '["a", "b"', "[1, 2]"])
def test_a_bad_members_file_is_one_line(tmp_path: Path, text: str) -> None:
    path = route(tmp_path, {"brokerName": "b", "readQueueNums": 8})
    members = tmp_path / "members.json"
    members.write_text(text, encoding="utf-8")
    one_line_error(run("simulate", "-t", "T", "--route", path, "--members", members, "--join", "c"), "members.json")
