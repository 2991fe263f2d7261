"""``allocate-mq -n`` and ``simulate -n`` against a real stub process, and what they say when it is not there."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from rocket_rebalance.model import MessageQueue, prepare_rebalance_input
from rocket_rebalance.plan import plan
from rocket_rebalance.runtime.transport import GROUP_NOT_ONLINE, GRPC_SCHEME
from rocket_rebalance.strategies import create_strategy
from tests.commands.conftest import RunCli, stub_with_members

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with stub_with_members(
        tmp_path_factory.mktemp("stub"), "TopicTest:broker-a=4,broker-b=2", "GID_preview", "TopicTest"
    ) as address:
        yield address


def test_allocate_mq_reads_the_route_from_the_server(stub: str, run_cli: RunCli) -> None:
    got = json.loads(run_cli("allocate-mq", "-t", "TopicTest", "-i", "c2,c1,c3", "-n", stub).stdout)["result"]
    queues = [MessageQueue("TopicTest", b, i) for b, n in (("broker-a", 4), ("broker-b", 2)) for i in range(n)]
    ready = prepare_rebalance_input(queues, ["c1", "c2", "c3"])
    expected = plan(create_strategy("AVG"), "aa", ready.mq_all, ready.cid_all)
    assert got == {cid: [mq.to_dict() for mq in share] for cid, share in expected.items()}


def test_simulate_reads_members_from_the_server(stub: str, run_cli: RunCli) -> None:
    done = run_cli("simulate", "-t", "TopicTest", "-n", stub, "-g", "GID_preview", "--join", "10.0.0.3@3", "--json")
    outcome = json.loads(done.stdout)["outcomes"][0]
    assert [c["clientId"] for c in outcome["consumers"]] == ["10.0.0.1@1", "10.0.0.2@2", "10.0.0.3@3"]
    assert [(c["before"], c["after"]) for c in outcome["consumers"]] == [(3, 2), (3, 2), (0, 2)]


def test_unknown_topic_is_one_line(stub: str, run_cli: RunCli) -> None:
    done = run_cli("allocate-mq", "-t", "NoSuchTopic", "-i", "a", "-n", stub, check=False)
    assert done.returncode == 2
    assert done.stderr.startswith("rocket-rebalance: topic NoSuchTopic: not found at ") and done.stderr.count("\n") == 1


@pytest.mark.parametrize("address", ["127.0.0.1:9", "grpc://127.0.0.1:9"])
def test_unreachable_server_names_the_address(run_cli: RunCli, address: str) -> None:
    done = run_cli("allocate-mq", "-t", "TopicTest", "-i", "a", "-n", address, check=False)
    assert done.returncode == 2
    assert f"cannot reach the name server at {address}" in done.stderr and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1


def test_the_remoting_wire_pointed_at_the_stub_says_what_the_server_is(stub: str, run_cli: RunCli) -> None:
    bare = stub.removeprefix(GRPC_SCHEME)
    done = run_cli("allocate-mq", "-t", "TopicTest", "-i", "a", "-n", bare, check=False)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "gRPC" in done.stderr and f"grpc://{bare}" in done.stderr


@pytest.mark.parametrize("address", ["localhost", "127.0.0.1:99999", "grpc://", "a:1;b", "http://x:1"])
def test_a_malformed_address_is_one_line_naming_both_forms(run_cli: RunCli, address: str) -> None:
    done = run_cli("allocate-mq", "-t", "TopicTest", "-i", "a", "-n", address, check=False)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "is not HOST:PORT" in done.stderr and "grpc://HOST:PORT" in done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["--count", "-5"],
        ["--count", "5", "--batch", "0"],
        ["--count", "5", "--batch", "-1"],
        ["--count", "5", "--size", "-1"],
    ],
)
def test_produce_refuses_counts_it_cannot_honour(stub: str, run_cli: RunCli, args: list[str]) -> None:
    done = run_cli("produce", "-n", stub, "-t", "TopicTest", *args, check=False)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert not done.stdout


def test_produce_reports_what_the_broker_acknowledged(stub: str, run_cli: RunCli) -> None:
    assert (
        json.loads(run_cli("produce", "-n", stub, "-t", "TopicTest", "--count", "7", "--batch", "3").stdout)["sent"]
        == 7
    )


def test_printed_server_text_cannot_drive_the_terminal() -> None:
    from rocket_rebalance.model import printable

    assert printable("127.0.0.1@x\x1b[2J\x07\n") == "127.0.0.1@x\\x1b[2J\\x07\\n"
    assert printable("127.0.0.1@é-ü") == "127.0.0.1@é-ü"


def test_consumer_progress_of_a_group_not_online_fails_as_mqadmin_says(stub: str, run_cli: RunCli) -> None:
    for form in ((), ("--json",)):
        done = run_cli("consumer-progress", "-n", stub, "-g", "GID_UNKNOWN", *form, check=False)
        assert done.returncode == 2 and done.stdout == "", done.stdout
        assert done.stderr.count("\n") == 1 and GROUP_NOT_ONLINE.format(group="GID_UNKNOWN") in done.stderr


def test_allocate_mq_refuses_a_second_strategy_in_one_line(stub: str, run_cli: RunCli) -> None:
    args = ("allocate-mq", "-t", "TopicTest", "-i", "c1,c2", "-n", stub, "--strategy", "AVG")
    done = run_cli(*args, "--strategy", "CONSISTENT_HASH", check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "--strategy given twice" in done.stderr and "simulate" in done.stderr


def test_word_values_are_taken_whatever_their_case(stub: str, run_cli: RunCli) -> None:
    args = ("allocate-mq", "-t", "TopicTest", "-i", "c1,c2", "-n", stub)
    canonical = run_cli(*args, "--strategy", "CONSISTENT_HASH", "--format", "table").stdout
    assert run_cli(*args, "--strategy", "consistent_hash", "--format", "TABLE").stdout == canonical
    inner = ("--strategy", "cross_topic", "--inner", "avg_by_circle")
    assert run_cli(*args, *inner).returncode == 0
    refused = run_cli(*args, "--strategy", "avgg", check=False)
    assert refused.returncode == 2 and "invalid choice: 'avgg'" in refused.stderr
