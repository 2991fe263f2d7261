"""TLS on a real RocketMQ 5.3.3 NameServer and broker, both enforcing it (plaintext connections closed), with
certificates the test makes with the ``openssl`` command: two of our consumers and a Java consumer (``useTLS``
through ``tls.enable``, verifying against the same CA) share a group over TLS and consume every message exactly
once; a plaintext consumer hears one line saying to turn TLS on; a wrong CA is refused by the command in one
line."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocket_rebalance.lab.certs import LabCertificates, make_certificates
from rocket_rebalance.lab.rocketmq import JavaPeer, RocketMQCluster
from rocket_rebalance.lab.wait import wait_until
from rocket_rebalance.model import ConsumeFromWhere, MessageQueue
from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.transport import Message
from rocket_rebalance.runtime.transport.remoting import RemotingTransport
from tests.hostile.cli import run_cli
from tests.rocketmq.conftest import start_cluster

pytestmark = pytest.mark.rocketmq

TOPIC, GROUP, QUEUES = "TlsTopic", "GID_tls", 4
FAST: dict[str, Any] = {
    "rebalance_interval": 1.0,
    "persist_interval": 0.2,
    "heartbeat_interval": 1.0,
    "consume_from_where": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
}


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> LabCertificates:
    return make_certificates(tmp_path_factory.mktemp("tls-certs"))


@pytest.fixture(scope="module")
def enforcing(tmp_path_factory: pytest.TempPathFactory, certs: LabCertificates) -> Iterator[RocketMQCluster]:
    """A NameServer and one broker enforcing TLS with the test's server certificate; the topic made over TLS."""
    cluster = start_cluster(tmp_path_factory.mktemp("rocketmq-tls"), ("broker-a",), tls=certs)
    try:
        cluster.create_topic(TOPIC, QUEUES)
        yield cluster
    finally:
        cluster.stop()


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[MessageQueue, int]] = []
        self._lock = threading.Lock()

    def __call__(self, batch: list[Message]) -> None:
        with self._lock:
            self.seen.extend((message.mq, message.queue_offset) for message in batch)


def test_our_consumers_and_java_share_a_group_over_tls_exactly_once(
    enforcing: RocketMQCluster, certs: LabCertificates, tmp_path: Path
) -> None:
    assert enforcing.lib is not None
    recorders = [Recorder(), Recorder()]
    ours = [
        PushConsumer(
            enforcing.namesrv_address,
            GROUP,
            topics=[TOPIC],
            listener=recorder,
            client_id=f"127.0.0.1@py-{index}",
            tls_ca_file=certs.ca,
            **FAST,
        )  # fmt: skip
        for index, recorder in enumerate(recorders)
    ]
    java = JavaPeer(enforcing.lib, tmp_path, enforcing.namesrv_address, GROUP, "java-1", [TOPIC], tls=certs)
    try:
        for consumer in ours:
            consumer.start()
        assert java.started.wait(60), "the Java consumer did not start"
        every = frozenset(("broker-a", queue) for queue in range(QUEUES))

        def settled() -> bool:
            owned = [frozenset((q.broker_name, q.queue_id) for q in c.owned_queues().get(TOPIC, ())) for c in ours]
            owned.append(java.owned(TOPIC))
            return all(owned) and sum(len(o) for o in owned) == QUEUES and frozenset().union(*owned) == every

        wait_until(settled, 60, "the three members share the queues")
        assert all(consumer.healthy for consumer in ours), [c.describe().get("problems") for c in ours]
        producer = RemotingTransport([enforcing.namesrv_address], tls=enforcing.tls_settings)
        try:
            # 200 messages of 4 KiB per queue: pull answers of many TLS records each
            sent = {
                (MessageQueue(TOPIC, "broker-a", queue), offset)
                for queue in range(QUEUES)
                for batch in range(4)
                for offset in producer.send(TOPIC, "broker-a", [bytes([batch]) * 4096] * 50, queue_id=queue)[1]
            }
        finally:
            producer.close()

        def consumed() -> list[tuple[MessageQueue, int]]:
            java_seen = [(MessageQueue(m["topic"], m["broker"], m["queue"]), m["offset"]) for m in java.consumed()]
            return [pair for recorder in recorders for pair in recorder.seen] + java_seen

        wait_until(lambda: set(consumed()) >= sent, 90, "every message consumed")
        assert sorted(consumed()) == sorted(sent)  # each exactly once, across both languages
        assert all(recorder.seen for recorder in recorders) and java.consumed()
    finally:
        for consumer in ours:
            consumer.shutdown()
        java.stop()


def test_a_plaintext_consumer_hears_to_turn_tls_on(enforcing: RocketMQCluster) -> None:
    errors: list[str] = []
    first = threading.Event()

    def on_error(kind: str, error: Exception) -> None:
        errors.append(str(error))
        first.set()

    consumer = PushConsumer(
        enforcing.namesrv_address, f"{GROUP}_plain", topics=[TOPIC], listener=lambda batch: None,
        on_error=on_error, **FAST,
    )  # fmt: skip
    consumer.start()
    try:
        assert first.wait(15), "no error reported in the first round"
        wait_until(lambda: not consumer.healthy, 15, "the consumer unhealthy")
    finally:
        consumer.shutdown()
    line = next(line for line in errors if "it may require TLS" in line)
    assert "use --tls, or tls=True" in line and enforcing.namesrv_address in line and "\n" not in line


def test_a_wrong_ca_is_refused_by_the_command_in_one_line(enforcing: RocketMQCluster, certs: LabCertificates) -> None:
    done = run_cli("consumer-progress", "-n", enforcing.namesrv_address, "-g", GROUP, "--tls-ca", certs.other_ca)
    assert done.returncode != 0
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert (
        f"the name server {enforcing.namesrv_address}'s certificate did not verify against {certs.other_ca}" in lines[0]
    )


def test_the_command_sends_over_tls(enforcing: RocketMQCluster, certs: LabCertificates) -> None:
    done = run_cli("produce", "-n", enforcing.namesrv_address, "-t", TOPIC, "--count", "5", "--tls-ca", certs.ca)
    assert done.returncode == 0, done.stderr
