"""ACL 2.0 on a real RocketMQ 5.3.3 broker (authentication and authorization on): a user with Sub on the topic
and the group consumes with two of our consumers and a Java consumer in one group, every message exactly once;
a user without that permission, or with a wrong secret, gets one line naming the request, the resource and the
access key from the first round (``on_error`` and health), never a consumer that idles silently."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocket_rebalance.lab.rocketmq import RocketMQCluster, mqadmin
from rocket_rebalance.model import AclCredentials
from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.transport.remoting import RemotingTransport
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
