"""ACL 2.0 on a real RocketMQ 5.3.3 broker (authentication and authorization on): a user with Sub on the topic
and the group consumes with two of our consumers and a Java consumer in one group, every message exactly once;
a user without that permission, or with a wrong secret, gets one line naming the request, the resource and the
access key from the first round (``on_error`` and health), never a consumer that idles silently. The asyncio
transport signs alike and hears the same refusal."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocket_rebalance.lab.rocketmq import RocketMQCluster, mqadmin
from rocket_rebalance.model import AclCredentials, ConsumeFromWhere, MessageModel, MessageQueue
from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.transport import GroupRegistration, PullResult, PullStatus, TransportError
from rocket_rebalance.runtime.transport.remoting import RemotingTransport
from rocket_rebalance.runtime.transport.remoting_async import AsyncRemotingTransport
from tests.aio import run
from tests.rocketmq.conftest import start_cluster
from tests.rocketmq.exactly_once import FAST, share_a_group_exactly_once

pytestmark = pytest.mark.rocketmq

ADMIN = AclCredentials("rr-admin", "admin-Secret-8c1f")
READER = AclCredentials("rr-reader", "reader-Secret-27ad")
STRANGER = AclCredentials("rr-stranger", "stranger-Secret-91be")
TOPIC, GROUP, QUEUES = "SecuredTopic", "GID_secured", 4
ACL_BROKER = {
    "authenticationEnabled": "true",
    "authenticationProvider": "org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider",
    "authenticationMetadataProvider": (
        "org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider"
    ),
    "authorizationEnabled": "true",
    "authorizationProvider": "org.apache.rocketmq.auth.authorization.provider.DefaultAuthorizationProvider",
    "authorizationMetadataProvider": (
        "org.apache.rocketmq.auth.authorization.provider.LocalAuthorizationMetadataProvider"
    ),
    # The first (super) user, and what the broker's own inner clients sign with.
    "initAuthenticationUser": '{"username":"rr-admin","password":"admin-Secret-8c1f"}',
    "innerClientAuthenticationCredentials": '{"accessKey":"rr-admin","secretKey":"admin-Secret-8c1f"}',
}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RocketMQCluster]:
    """One broker with ACL 2.0 on, the topic, and two users made by the admin through the real mqadmin: the
    reader (Sub on the topic and the group) and a stranger (no permission at all)."""
    cluster = start_cluster(
        tmp_path_factory.mktemp("rocketmq-acl"), ("broker-a",), broker_settings=ACL_BROKER, credentials=ADMIN
    )
    try:
        assert cluster.lib is not None
        cluster.create_topic(TOPIC, QUEUES)
        home, broker = cluster.work_dir / "mqadmin", cluster.brokers["broker-a"].address
        for user in (READER, STRANGER):
            mqadmin(
                cluster.lib, home, "createUser", "-b", broker, "-u", user.access_key, "-p", user.secret_key,
                credentials=ADMIN,
            )  # fmt: skip
        mqadmin(
            cluster.lib, home, "createAcl", "-b", broker, "-s", f"User:{READER.access_key}",
            "-r", f"Topic:{TOPIC},Group:{GROUP}", "-a", "Sub", "-d", "Allow", credentials=ADMIN,
        )  # fmt: skip
        yield cluster
    finally:
        cluster.stop()


def test_a_permitted_user_consumes_beside_java_exactly_once(secured: RocketMQCluster, tmp_path: Path) -> None:
    share_a_group_exactly_once(
        secured, tmp_path, GROUP, TOPIC, QUEUES,
        ours={"access_key": READER.access_key, "secret_key": READER.secret_key}, java={"credentials": READER},
        producer=RemotingTransport([secured.namesrv_address], credentials=ADMIN),
        batches=[[b"m"] * 10], timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("credentials", "expected"),
    [
        (STRANGER, f"access key {STRANGER.access_key}"),
        (AclCredentials(READER.access_key, "not-the-secret"), f"access key {READER.access_key}"),
    ],
    ids=["no-permission", "wrong-secret"],
)
def test_a_refused_user_hears_one_line_from_the_first_round(
    secured: RocketMQCluster, credentials: AclCredentials, expected: str, caplog: pytest.LogCaptureFixture
) -> None:
    errors: list[Exception] = []
    first = threading.Event()

    def on_error(kind: str, error: Exception) -> None:
        errors.append(error)
        first.set()

    caplog.set_level(logging.DEBUG)
    consumer = PushConsumer(
        secured.namesrv_address, f"{GROUP}_refused", topics=[TOPIC], listener=lambda batch: None,
        access_key=credentials.access_key, secret_key=credentials.secret_key, on_error=on_error, **FAST,
    )  # fmt: skip
    consumer.start()
    try:
        assert first.wait(10), "no error reported in the first round"
        assert not consumer.healthy
        lines = [str(error) for error in errors]
        refusal = next(line for line in lines if "NO_PERMISSION" in line)
        assert expected in refusal and "\n" not in refusal
        outputs = [*lines, caplog.text, str(consumer.describe()), repr(consumer.transport)]
    finally:
        consumer.shutdown()
    assert not [text for text in outputs if credentials.secret_key in text]


def test_the_async_transport_signs_for_a_permitted_user_and_names_a_refused_one(secured: RocketMQCluster) -> None:
    producer = RemotingTransport([secured.namesrv_address], credentials=ADMIN)
    try:
        _, [offset] = producer.send(TOPIC, "broker-a", [b"async-acl"], 0)
    finally:
        producer.close()
    mq = MessageQueue(TOPIC, "broker-a", 0)

    def joining(group: str) -> GroupRegistration:
        return GroupRegistration(
            group, True, MessageModel.CLUSTERING, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, (TOPIC,)
        )

    async def calls() -> tuple[PullResult, list[str], TransportError]:
        reader = AsyncRemotingTransport([secured.namesrv_address], credentials=READER)
        stranger = AsyncRemotingTransport([secured.namesrv_address], credentials=STRANGER)
        try:
            await reader.heartbeat("broker-a", "127.0.0.1@async-reader", joining(GROUP))
            members = await reader.consumer_list("broker-a", GROUP)
            pulled = await reader.pull(mq, GROUP, offset, 32, 0)
            with pytest.raises(TransportError) as refused:
                await stranger.heartbeat("broker-a", "127.0.0.1@async-stranger", joining(GROUP))
            return pulled, members, refused.value
        finally:
            await reader.close()
            await stranger.close()

    pulled, members, refusal = run(calls())
    assert pulled.status == PullStatus.FOUND and pulled.messages[0].body == b"async-acl"
    assert "127.0.0.1@async-reader" in members
    line = str(refusal)
    assert refusal.code == "PERMISSION_DENIED" and f"access key {STRANGER.access_key}" in line
    assert "HEART_BEAT" in line and "\n" not in line and STRANGER.secret_key not in line
