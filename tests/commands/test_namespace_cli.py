"""``--namespace`` on the commands that name a group or topic on a server (a real stub process whose topic is
``ns%TopicTest``): the server is asked for the wrapped names, and the user reads the names given."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.commands.conftest import RunCli, stub_with_members

pytestmark = pytest.mark.e2e

WIRE_TOPIC = "ns%TopicTest"


@pytest.fixture(scope="module")
def stub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with stub_with_members(
        tmp_path_factory.mktemp("stub"), f"{WIRE_TOPIC}:broker-a=4,broker-b=2", "ns%GID_n", WIRE_TOPIC
    ) as address:
        yield address


def test_allocate_mq_reads_the_wrapped_route_and_names_the_server_s_queues(stub: str, run_cli: RunCli) -> None:
    done = run_cli("allocate-mq", "-t", "TopicTest", "--namespace", "ns", "-i", "c1,c2", "-n", stub)
    result = json.loads(done.stdout)["result"]
    assert sorted(result) == ["c1", "c2"]
    assert {mq["topic"] for share in result.values() for mq in share} == {WIRE_TOPIC}


def test_simulate_reads_the_wrapped_group_s_members(stub: str, run_cli: RunCli) -> None:
    args = ("simulate", "-t", "TopicTest", "-g", "GID_n", "--namespace", "ns", "-n", stub, "--join", "10.0.0.3@3")
    outcome = json.loads(run_cli(*args, "--json").stdout)["outcomes"][0]
    assert [c["clientId"] for c in outcome["consumers"]] == ["10.0.0.1@1", "10.0.0.2@2", "10.0.0.3@3"]


def test_consumer_connection_and_progress_print_the_names_given(stub: str, run_cli: RunCli) -> None:
    rows = json.loads(run_cli("consumer-connection", "-g", "GID_n", "--namespace", "ns", "-n", stub, "--json").stdout)
    assert {row["clientId"] for row in rows} == {"10.0.0.1@1", "10.0.0.2@2"}
    assert {topic for row in rows for topic in row["topics"]} <= {"TopicTest", "%RETRY%GID_n"}
    assert "TopicTest" in {topic for row in rows for topic in row["topics"]}
    progress = ("consumer-progress", "-g", "GID_n", "-t", "TopicTest", "--namespace", "ns", "-n", stub, "--json")
    queues = json.loads(run_cli(*progress).stdout)
    assert queues and {row["topic"] for row in queues} == {"TopicTest"}


def test_produce_sends_to_the_wrapped_topic(stub: str, run_cli: RunCli) -> None:
    done = run_cli("produce", "-t", "TopicTest", "--namespace", "ns", "-n", stub, "--count", "6")
    assert json.loads(done.stdout) == {"sent": 6, "topic": "TopicTest", "queues": 6}


def test_consume_prints_the_topic_given(stub: str) -> None:
    command = [sys.executable, "-m", "rocket_rebalance", "consume", "-n", stub, "-g", "GID_c", "--namespace", "ns"]
    process = subprocess.Popen(
        [*command, "-t", "TopicTest", "--client-id", "c"], stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL
    )
    assert process.stdout is not None
    try:
        for line in process.stdout:  # ends when the process does: a failure to start is not waited on forever
            event = json.loads(line)
            if event.get("event") == "owned" and event["topic"] == "TopicTest":
                assert len(event["queues"]) == 6
                break
        else:
            raise AssertionError(f"consume ended with {process.wait()} before owning TopicTest")
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0


@pytest.mark.parametrize("namespace", ["a%b", "rmq_sys_x"])
def test_a_bad_namespace_is_one_usage_line(namespace: str, run_cli: RunCli) -> None:
    done = run_cli("consumer-connection", "-g", "G", "--namespace", namespace, "-n", "grpc://127.0.0.1:9", check=False)
    assert done.returncode == 2 and "--namespace" in done.stderr


def test_a_name_the_namespace_makes_too_long_is_one_line(run_cli: RunCli) -> None:
    args = ("allocate-mq", "-t", "T" * 120, "--namespace", "n" * 10, "-i", "a", "-n", "grpc://127.0.0.1:9")
    done = run_cli(*args, check=False)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "under --namespace" in done.stderr
