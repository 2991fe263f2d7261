"""The harness itself, and what the runtime does on a real broker beyond membership: a message mqadmin pushes
directly, and a failed message sent back to the retry topic as Java does (running info for mqadmin is in
test_observability.py)."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import pytest

from rocket_rebalance.lab.mixed_group import new_topic
from rocket_rebalance.lab.rocketmq import (
    BOOT_ATTEMPTS,
    RocketMQCluster,
    RocketMQUnavailable,
    _booted,
    ensure_jars,
    mqadmin,
)
from rocket_rebalance.lab.wait import wait_until
from rocket_rebalance.model import ConsumeFromWhere, MessageQueue
from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.transport import Message


class Boots:
    """A stand-in JVM of the lab's whose first ``failures`` starts fail, as a taken port fails a broker's."""

    made = 0

    def __init__(self, failures: int) -> None:
        Boots.made += 1
        self.number = Boots.made
        self.failures = failures
        self.properties: list[str] = []

    def start(self) -> None:
        if self.number <= self.failures:
            raise RocketMQUnavailable(f"broker-a did not start (exited): java.net.BindException #{self.number}")


@pytest.mark.parametrize("failures", range(BOOT_ATTEMPTS + 1))
def test_a_jvm_that_did_not_start_is_started_again_on_fresh_ports(
    failures: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Each attempt makes a new process (its ports found again); a failure is logged and tried again, up to
    BOOT_ATTEMPTS, and the last one is raised."""
    Boots.made = 0
    with caplog.at_level(logging.WARNING, logger="rocket_rebalance.lab"):
        if failures < BOOT_ATTEMPTS:
            booted = _booted(lambda: Boots(failures), ["-Dtls=1"])  # type: ignore[arg-type, return-value]
            assert (booted.number, booted.properties, Boots.made) == (failures + 1, ["-Dtls=1"], failures + 1)
        else:
            with pytest.raises(RocketMQUnavailable, match=f"BindException #{BOOT_ATTEMPTS}$"):
                _booted(lambda: Boots(failures), [])  # type: ignore[arg-type, return-value]
    tried = min(failures, BOOT_ATTEMPTS - 1)
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [
        f"attempt {n} of {BOOT_ATTEMPTS}" for n in range(1, tried + 1)
    ]


def test_without_java_the_harness_says_so_in_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no java, no mvn
    monkeypatch.setenv("ROCKET_REBALANCE_ROCKETMQ_CACHE", str(tmp_path / "cache"))
    with pytest.raises(RocketMQUnavailable) as raised:
        ensure_jars()
    assert str(raised.value).startswith("java not found on PATH") and "\n" not in str(raised.value)


def test_without_maven_the_harness_says_so_in_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    java = Path(tmp_path / "java")
    java.write_text("#!/bin/sh\nexit 0\n")
    java.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("ROCKET_REBALANCE_ROCKETMQ_CACHE", str(tmp_path / "cache"))
    with pytest.raises(RocketMQUnavailable) as raised:
        ensure_jars()
    assert str(raised.value).startswith("mvn not found on PATH")


@pytest.mark.rocketmq
def test_mqadmin_pushes_a_message_to_a_python_consumer_directly(rocketmq: RocketMQCluster, tmp_path: Path) -> None:
    """``mqadmin queryMsgById -g -d``: the broker relays CONSUME_MESSAGE_DIRECTLY, our listener answers it."""
    topic = new_topic(rocketmq, "Direct", 1)
    seen: list[Message] = []
    transport = rocketmq.transport()
    consumer = PushConsumer(
        rocketmq.namesrv_address,
        "GID_direct",
        topics=[topic],
        listener=seen.extend,
        client_id="127.0.0.1@direct",
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.start()
    try:
        transport.send(topic, "broker-b", [b"push me"], 0)
        assert transport.min_offset(MessageQueue(topic, "broker-b", 0)) == 0
        wait_until(lambda: len(seen) == 1, 30, "consumed once the usual way")
        assert rocketmq.lib is not None
        printed = mqadmin(
            rocketmq.lib,
            tmp_path / "mqadmin",
            "queryMsgById",
            "-n",
            rocketmq.namesrv_address,
            "-t",
            topic,
            "-i",
            seen[0].msg_id,
            "-g",
            "GID_direct",
            "-d",
            "127.0.0.1@direct",
        )
        assert "CR_SUCCESS" in printed, printed[-500:]
        assert [m.body for m in seen] == [b"push me", b"push me"]
    finally:
        assert consumer.shutdown()
        transport.close()


@pytest.mark.rocketmq
def test_a_failed_message_goes_to_the_retry_topic_and_the_queue_moves_on(rocketmq: RocketMQCluster) -> None:
    topic = new_topic(rocketmq, "SendBack", 1)
    seen: list[Message] = []
    lock = threading.Lock()

    def listener(batch: list[Message]) -> None:
        with lock:
            seen.extend(batch)
            first_time = sum(1 for m in seen if m.body == b"poison") == 1
        if any(m.body == b"poison" for m in batch) and first_time:
            raise RuntimeError("not this time")

    transport = rocketmq.transport()
    try:
        transport.send(topic, "broker-a", [b"ok-1", b"poison", b"ok-2"], 0)
        consumer = PushConsumer(
            rocketmq.namesrv_address,
            "GID_sendback",
            topics=[topic],
            listener=listener,
            client_id="127.0.0.1@sb",
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            persist_interval=0.5,
        )
        consumer.start()
        try:

            def committed() -> bool:
                rows = transport.consumer_progress("GID_sendback", topic)
                return any(r.mq.broker_name == "broker-a" and r.mq.queue_id == 0 and r.diff == 0 for r in rows)

            wait_until(committed, 30, "the original queue is committed past the failed message")
            # The broker redelivers it after delay level 3 (10 s), from %RETRY%GID_sendback, as to a Java consumer.
            wait_until(lambda: sum(1 for m in seen if m.body == b"poison") == 2, 40, "the retry arrives")
            retried = [m for m in seen if m.body == b"poison"][-1]
            assert retried.mq.topic == "%RETRY%GID_sendback" and retried.reconsume_times == 1
            assert retried.topic == topic  # what Java's listener sees (resetRetryAndNamespace)
            assert retried.properties.get("RETRY_TOPIC") == topic
        finally:
            assert consumer.shutdown()
    finally:
        transport.close()


@pytest.mark.rocketmq
def test_mqadmin_failures_that_exit_zero_are_still_failures(rocketmq: RocketMQCluster, tmp_path: Path) -> None:
    assert rocketmq.lib is not None
    with pytest.raises(RuntimeError, match="mqadmin noSuchCommand failed"):
        mqadmin(rocketmq.lib, tmp_path / "m", "noSuchCommand", "-n", rocketmq.namesrv_address)
    with pytest.raises(RuntimeError, match="mqadmin allocateMQ failed"):
        mqadmin(rocketmq.lib, tmp_path / "m", "allocateMQ", "-n", "127.0.0.1:1", "-t", "T", "-i", "a")


def test_the_cluster_command_refuses_bad_arguments_in_one_line() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "rocket_rebalance.lab.rocketmq", "--brokers", "0"],
        capture_output=True,
        text=True,
        env={**os.environ},
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--brokers" in done.stderr
