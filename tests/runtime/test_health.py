"""Failures a user must act on are said (WARNING/ERROR, rate-limited), readable (``healthy``, ``describe()``,
``on_error``), and cleared when the thing works again. Before, all of these were logged at DEBUG only: a consumer
pointed at nothing printed "started" and ran on with nothing on stderr."""

from __future__ import annotations

import json
import logging
import queue
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocket_rebalance.model import ConsumeFromWhere, MessageModel
from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.health import Health
from rocket_rebalance.runtime.settings import ListenerError
from rocket_rebalance.runtime.transport import GRPC_SCHEME, Message
from rocket_rebalance.runtime.transport.grpc import GrpcTransport
from tests.runtime.conftest import start_stub
from tests.stub.conftest import StartStub

__all__ = ["start_stub"]


def closed_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        return int(probe.getsockname()[1])


def test_repeated_failures_are_logged_once_per_interval_with_a_count(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    heard: list[tuple[str, str]] = []
    health = Health(lambda kind, error: heard.append((kind, str(error))), quiet_interval=30, clock=lambda: now[0])
    caplog.set_level(logging.WARNING, "rocket_rebalance.runtime")
    for _ in range(100):
        health.failed("route of T", OSError("cannot connect"))
        now[0] += 0.1
    assert [r.getMessage() for r in caplog.records] == ["route of T failing: cannot connect"]
    now[0] = 31
    health.failed("route of T", OSError("cannot connect"))
    assert (
        caplog.records[-1].getMessage() == "route of T failing: cannot connect (99 more failures since the last report)"
    )
    assert len(heard) == 2 and not health.healthy  # on_error is told when the log is, not 101 times
    health.failed("route of T", TimeoutError("no answer"))  # another type of error is told at once
    assert heard[-1] == ("route of T", "no answer") and len(heard) == 3
    assert health.report() == {"route of T": "no answer (102 failures over 31 s)"}
    health.failed("route of T", OSError("cannot connect"))
    assert health.report() == {"route of T": "cannot connect (103 failures over 31 s)"}
    health.ok("route of T")
    assert health.healthy and caplog.records[-1].getMessage() == "route of T works again after 103 failures"


@given(st.lists(st.tuples(st.booleans(), st.sampled_from([f"b{i}" for i in range(8)])), max_size=60))
def test_a_kind_at_many_brokers_is_one_problem_naming_those_still_failing(steps: list[tuple[bool, str]]) -> None:
    """One kind for a call made at every broker (probe 11: a kind per broker logged a line per broker): it stands
    while any broker's last answer was a failure, names exactly those, and is logged once per time it begins."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("rocket_rebalance.runtime")
    logger.addHandler(handler)
    try:
        health = Health(quiet_interval=30, clock=lambda: 0.0)
        failing: set[str] = set()
        began = ended = 0
        for failed, broker in steps:
            if failed:
                began += not failing
                failing.add(broker)
                health.failed("heartbeat", OSError(f"down at {broker}"), at=broker)
            else:
                ended += broker in failing and failing == {broker}
                failing.discard(broker)
                health.ok("heartbeat", at=broker)
            report = health.report()
            assert ("heartbeat" in report) == bool(failing)
            if failing:
                shown = ", ".join(sorted(failing)[:5])
                assert report["heartbeat"].startswith(f"at {shown}")
    finally:
        logger.removeHandler(handler)
    said = [r.getMessage() for r in records]
    assert len([line for line in said if line.startswith("heartbeat failing at ")]) == began
    assert len([line for line in said if line.startswith("heartbeat works again")]) == ended


def test_a_failing_hook_does_not_break_the_consumer(caplog: pytest.LogCaptureFixture) -> None:
    def hook(kind: str, error: Exception) -> None:
        raise RuntimeError("application bug")

    health = Health(hook)
    health.failed("pull from broker-a", OSError("x"))
    assert not health.healthy and any("on_error hook failed" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("scheme", ["", GRPC_SCHEME])
def test_a_consumer_pointed_at_nothing_says_so(scheme: str, caplog: pytest.LogCaptureFixture) -> None:
    heard: list[str] = []
    caplog.set_level(logging.WARNING, "rocket_rebalance.runtime")
    consumer = PushConsumer(
        f"{scheme}127.0.0.1:{closed_port()}",
        "GID_nothing",
        topics=["TopicTest"],
        listener=lambda batch: None,
        on_error=lambda kind, error: heard.append(kind),
        rebalance_interval=0.5,
        route_refresh_interval=0.5,
    )
    consumer.start()
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not heard:
            time.sleep(0.05)
        assert "route of TopicTest" in heard
        assert not consumer.healthy
        assert "route of TopicTest" in consumer.describe()["problems"]  # type: ignore[operator]
        assert any(
            r.levelno == logging.WARNING and "route of TopicTest failing" in r.getMessage() for r in caplog.records
        )
    finally:
        consumer.shutdown(timeout=2)


def test_offsets_that_cannot_be_saved_are_an_error_and_unhealthy(
    start_stub: StartStub, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "offsets"
    address = GRPC_SCHEME + start_stub().address
    caplog.set_level(logging.WARNING, "rocket_rebalance.runtime")
    seen: list[Message] = []
    consumer = PushConsumer(
        address,
        "GID_unsaved",
        topics=["TopicTest"],
        listener=seen.extend,
        message_model=MessageModel.BROADCASTING,
        offset_file=folder / "offsets.json",
        persist_interval=0.2,
    )
    from rocket_rebalance.runtime.transport.grpc import GrpcTransport

    producer = GrpcTransport(address)
    consumer.start()
    folder.write_text("a file where the offset folder was")  # every write fails from now on
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not any(r.levelno == logging.ERROR for r in caplog.records):
            producer.send("TopicTest", "broker-a", [b"m"], 0)
            time.sleep(0.2)
        errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert errors and errors[0].startswith("persist offsets failing: cannot write")
        assert not consumer.healthy
    finally:
        producer.close()
        consumer.shutdown(timeout=2)


def test_a_listener_that_always_raises_is_retried_after_the_retry_delay_and_told_rarely(
    start_stub: StartStub, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 38: where a failed batch cannot be sent back (the stub keeps no retry topic), it is given to the
    listener again after ``retry_delay`` (Java's 5 s), not about every 0.1 s, and on_error hears of it as the log
    does, not once per batch (it heard 100 in 5 s)."""
    address = GRPC_SCHEME + start_stub().address
    caplog.set_level(logging.WARNING, "rocket_rebalance.runtime")
    heard: list[Exception] = []
    calls: dict[int, list[float]] = {}

    def broken(batch: list[Message]) -> None:
        calls.setdefault(batch[0].queue_offset, []).append(time.monotonic())
        raise ZeroDivisionError("application bug")

    from rocket_rebalance.runtime.transport.grpc import GrpcTransport

    producer = GrpcTransport(address)
    producer.send("TopicTest", "broker-a", [b"m"] * 20, 0)
    consumer = PushConsumer(
        address,
        "GID_broken",
        topics=["TopicTest"],
        listener=broken,
        on_error=lambda kind, error: heard.append(error),
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.start()
    started = time.monotonic()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and sum(len(times) >= 3 for times in calls.values()) < 20:
            time.sleep(0.05)
        assert sorted(calls) == list(range(20)) and all(len(times) >= 3 for times in calls.values())
        gaps = [later - earlier for times in calls.values() for earlier, later in zip(times, times[1:], strict=False)]
        assert min(gaps) >= 5.0 - 0.01, sorted(gaps)[:5]  # the retry delay; a busy machine only makes it longer
        intervals = 1 + int((time.monotonic() - started) // 30)  # one report per quiet interval (about 15 s here)
        said = [r for r in caplog.records if "listener on TopicTest failing" in r.getMessage()]
        assert 1 <= len(said) <= intervals, [r.getMessage() for r in said]  # not one line per failed batch
        assert said[0].exc_info is not None and "ZeroDivisionError: application bug" in said[0].getMessage()
        assert 1 <= len(heard) <= intervals, heard  # 60 failures of one kind and type: told as often as logged
        assert isinstance(heard[0], ListenerError) and isinstance(heard[0].__cause__, ZeroDivisionError)
        assert not consumer.healthy and "listener on TopicTest" in consumer.describe()["problems"]  # type: ignore[operator]
    finally:
        producer.close()
        consumer.shutdown(timeout=2)


def test_the_consume_command_says_on_stderr_that_nothing_answers() -> None:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rocket_rebalance",
            "consume",
            "-n",
            f"127.0.0.1:{closed_port()}",
            "-g",
            "GID_x",
            "-t",
            "TopicTest",
            "--route-interval",
            "0.5",
            "--rebalance-interval",
            "0.5",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    said = threading.Event()

    def read() -> None:  # until the warning: a loaded machine takes seconds to start the interpreter
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line)
            if "WARNING" in line and "route of TopicTest failing" in line and "cannot connect" in line:
                said.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        said.wait(60)
    finally:
        process.terminate()
        process.wait(30)
        reader.join(30)
    assert said.is_set(), "".join(lines)


def test_the_consume_command_prints_a_problem_and_when_it_works_again(start_stub: StartStub) -> None:
    """Stdout, which a supervisor reads, says when health turns bad and when it recovers: a topic the name server
    does not know yet, then the same topic once it is created."""
    server = start_stub()
    command = [sys.executable, "-m", "rocket_rebalance", "consume", "-n", GRPC_SCHEME + server.address]
    process = subprocess.Popen(
        [*command, "-g", "GID_health", "-t", "LateTopic", "--route-interval", "0.5", "--rebalance-interval", "0.5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    lines: queue.Queue[dict[str, object]] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(json.loads(line)) for line in process.stdout or ()])
    reader.start()

    def next_event(name: str) -> dict[str, object]:
        while True:
            event = lines.get(timeout=120)  # a hang bound, not a measure
            if event["event"] == name:
                return event

    admin = GrpcTransport(server.address)
    try:
        problem = next_event("problem")
        assert problem["kind"] == "route of LateTopic" and "NOT_FOUND" in str(problem["error"])
        admin.create_topic("LateTopic", 2)
        assert next_event("works again")["kind"] == "route of LateTopic"
    finally:
        admin.close()
        process.terminate()
        process.wait(timeout=60)
        reader.join(timeout=60)
