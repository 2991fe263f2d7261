"""TLS on a real RocketMQ 5.3.3 NameServer and broker, both enforcing it (plaintext connections closed), with
certificates the test makes with the ``openssl`` command: two of our consumers and a Java consumer (``useTLS``
through ``tls.enable``, verifying against the same CA) share a group over TLS and consume every message exactly
once; a plaintext consumer hears one line saying to turn TLS on; a wrong CA is refused by the command in one
line. The asyncio transport speaks TLS to the same cluster, and without it hears to turn it on.

These are also the real-broker smoke tests of the newest Python (``smoke``, run by ``make test-pythons``): one
cluster, a group of ours and Java over TLS, both transports, the ``ssl`` module's handshakes and refusals, the
command in a process of its own; the plain wire on that Python is the scripted-server and stub tests' (the rest)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocket_rebalance.lab.certs import LabCertificates, make_certificates
from rocket_rebalance.lab.rocketmq import RocketMQCluster
from rocket_rebalance.lab.wait import wait_until
from rocket_rebalance.model import ConsumeFromWhere, MessageModel, MessageQueue
from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.transport import GroupRegistration, PullResult, PullStatus, TransportError
from rocket_rebalance.runtime.transport.remoting import RemotingTransport
from rocket_rebalance.runtime.transport.remoting_async import AsyncRemotingTransport
from tests.aio import run
from tests.hostile.cli import run_cli
from tests.rocketmq.conftest import start_cluster
from tests.rocketmq.exactly_once import FAST, share_a_group_exactly_once

pytestmark = [pytest.mark.rocketmq, pytest.mark.smoke]

TOPIC, GROUP, QUEUES = "TlsTopic", "GID_tls", 4


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


def test_our_consumers_and_java_share_a_group_over_tls_exactly_once(
    enforcing: RocketMQCluster, certs: LabCertificates, tmp_path: Path
) -> None:
    # 200 messages of 4 KiB per queue: pull answers of many TLS records each
    share_a_group_exactly_once(
        enforcing, tmp_path, GROUP, TOPIC, QUEUES,
        ours={"tls_ca_file": certs.ca}, java={"tls": certs},
        producer=RemotingTransport([enforcing.namesrv_address], tls=enforcing.tls_settings),
        batches=[[bytes([batch]) * 4096] * 50 for batch in range(4)], timeout=90,
    )  # fmt: skip


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


def test_the_async_transport_speaks_tls_to_an_enforcing_cluster(enforcing: RocketMQCluster) -> None:
    mq = MessageQueue(TOPIC, "broker-a", 1)
    group = f"{GROUP}_async"
    registration = GroupRegistration(
        group, True, MessageModel.CLUSTERING, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, (TOPIC,)
    )

    async def calls() -> tuple[list[int], PullResult, list[str], TransportError]:
        transport = AsyncRemotingTransport([enforcing.namesrv_address], tls=enforcing.tls_settings)
        plain = AsyncRemotingTransport([enforcing.namesrv_address])
        try:
            _, offsets = await transport.send(TOPIC, "broker-a", [bytes([n]) * 4096 for n in range(40)], mq.queue_id)
            await transport.heartbeat("broker-a", "127.0.0.1@async-tls", registration)
            members = await transport.consumer_list("broker-a", group)
            pulled = await transport.pull(mq, group, offsets[0], 32, 0)  # answers of many TLS records
            with pytest.raises(TransportError) as refused:
                await plain.route(TOPIC)
            return offsets, pulled, members, refused.value
        finally:
            await transport.close()
            await plain.close()

    offsets, pulled, members, refusal = run(calls())
    assert pulled.status == PullStatus.FOUND and members == ["127.0.0.1@async-tls"]
    assert [(m.queue_offset, m.body) for m in pulled.messages] == [
        (offset, bytes([n]) * 4096) for n, offset in enumerate(offsets[:32])
    ]
    assert "it may require TLS" in str(refusal) and "use --tls, or tls=True" in str(refusal)
