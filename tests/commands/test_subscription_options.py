"""``consume --tags/--sql`` and ``produce --tags/--keys/--property`` on the stub, and their one-line refusals."""

from __future__ import annotations

import threading

import pytest

from rocket_rebalance.cli import main
from rocket_rebalance.model import MessageQueue
from rocket_rebalance.runtime.transport import GRPC_SCHEME, PullResult, TransportError
from rocket_rebalance.runtime.transport.grpc import GrpcTransport
from tests.commands.conftest import RunCli
from tests.stub.conftest import StartStub, start_stub

__all__ = ["start_stub"]  # the fixture, used by name


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def pulled(address: str, mq: MessageQueue) -> PullResult:
    transport = GrpcTransport(address)
    box: list[PullResult | TransportError] = []
    done = threading.Event()

    def finished(result: PullResult | TransportError) -> None:
        box.append(result)
        done.set()

    try:
        transport.pull(mq, "GID_look", 0, 32, 0, finished)
        assert done.wait(10)
    finally:
        transport.close()
    assert isinstance(box[0], PullResult)
    return box[0]


def test_produce_sends_tags_keys_and_properties(start_stub: StartStub, capsys: pytest.CaptureFixture[str]) -> None:
    address = GRPC_SCHEME + start_stub().address
    status, _, err = run(
        capsys, "produce", "-n", address, "-t", "TopicTest", "--count", "8",
        "--tags", "TagA", "--keys", "k1 k2", "--property", "color=red", "--property", "size=10",
    )  # fmt: skip
    assert status == 0, err
    message = pulled(address, MessageQueue("TopicTest", "broker-a", 0)).messages[0]
    assert (message.tags, message.keys) == ("TagA", "k1 k2")
    assert {k: message.properties[k] for k in ("color", "size")} == {"color": "red", "size": "10"}


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--property", "novalue"], "NAME=VALUE"),
        (["--property", "TAGS=x"], "used by RocketMQ"),
    ],
)
def test_produce_refuses_a_bad_property_in_one_line(
    start_stub: StartStub, capsys: pytest.CaptureFixture[str], extra: list[str], says: str
) -> None:
    address = GRPC_SCHEME + start_stub().address
    status, _, err = run(capsys, "produce", "-n", address, "-t", "TopicTest", "--count", "1", *extra)
    assert status != 0 and says in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["-t", "TopicTest", "-t", "Other", "--tags", "A"], "1 --tags/--sql for 2 -t"),
        (["-t", "TopicTest", "--tags", "A", "--sql", "a > 1"], "2 --tags/--sql for 1 -t"),
        (["-t", "TopicTest", "--tags", "||"], "cannot be split"),
        (["-t", "TopicTest", "--sql", "a > 1"], "tags only"),
        (["-t", "TopicTest", "-t", "TopicTest"], "twice"),
    ],
)
def test_consume_refuses_expressions_it_cannot_use_in_one_line(
    start_stub: StartStub, run_cli: RunCli, args: list[str], says: str
) -> None:
    address = GRPC_SCHEME + start_stub().address
    done = run_cli("consume", "-n", address, "-g", "GID_cli", *args, check=False)
    assert done.returncode != 0 and says in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
