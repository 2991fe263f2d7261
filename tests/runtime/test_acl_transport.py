"""ACL credentials on the remoting wire, against a scripted server on loopback: every request signed, a refusal
is one line naming the request, the resource and the access key from the first round, and the secret shows
nowhere. The real secured broker is in ``tests/rocketmq/test_security.py``."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rocket_rebalance.remoting import RemotingCommand, RequestCode, ResponseCode, response_to
from rocket_rebalance.remoting.acl import ACCESS_KEY, SECURITY_TOKEN, SIGNATURE, signature
from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.transport import GRPC_SCHEME, TransportError
from rocket_rebalance.runtime.transport.remoting import RemotingTransport
from rocket_rebalance.runtime.transport.wire import open_transport
from tests.runtime.test_consumer import FAST, wait_for
from tests.runtime.test_remoting_transport import Handler, ScriptedServer, broker_like

SECRET = "s3cr3t-Zq9-never-shown"
TOKEN = "t0k3n-Wx7-never-shown"
REFUSAL = "User:reader has no permission to access Group:GID_acl from 127.0.0.1, no matched policies."


@pytest.fixture
def scripted() -> Iterator[Callable[[Handler], ScriptedServer]]:
    """Scripted servers that answer routes with their own address, closed after the test."""
    servers: list[ScriptedServer] = []

    def start(handler: Handler) -> ScriptedServer:
        server = ScriptedServer(handler)
        handler.box["address"] = server.address  # type: ignore[attr-defined]
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def members(command: RemotingCommand) -> RemotingCommand | None:
    """The group is this one consumer, so it takes every queue and pulls."""
    if command.code == RequestCode.GET_CONSUMER_LIST_BY_GROUP:
        return response_to(command, ResponseCode.SUCCESS, body=b'{"consumerIdList":["c1"]}')
    return None


def _verified(command: RemotingCommand) -> bool:
    return command.ext.get(SIGNATURE) == signature(command.ext, command.body, SECRET)


def signed_consumer(server: ScriptedServer, **extra: Any) -> PushConsumer:
    """A consumer of GID_acl at the scripted server, with the test's credentials (token included)."""
    return PushConsumer(
        server.address,
        "GID_acl",
        topics=["TopicT"],
        listener=lambda batch: None,
        client_id="c1",
        access_key="reader",
        secret_key=SECRET,
        security_token=TOKEN,
        **{**FAST, **extra},
    )


def test_every_request_is_signed_with_the_credentials(scripted: Callable[[Handler], ScriptedServer]) -> None:
    server = scripted(broker_like(members))
    consumer = signed_consumer(server, fenced_handover=False)  # straight to pulls: no lock answers to script
    consumer.start()
    try:
        server.wait_for(lambda got: {RequestCode.HEART_BEAT, RequestCode.PULL_MESSAGE} <= {c.code for c in got})
    finally:
        consumer.shutdown()
    requests = [c for c in server.received if not c.is_response]
    assert requests and all(c.ext[ACCESS_KEY] == "reader" and c.ext[SECURITY_TOKEN] == TOKEN for c in requests)
    assert all(_verified(c) for c in requests)


def test_a_refusal_names_the_request_the_resource_and_the_access_key_from_the_first_round(
    scripted: Callable[[Handler], ScriptedServer], caplog: pytest.LogCaptureFixture
) -> None:
    def refuse_heartbeats(command: RemotingCommand) -> RemotingCommand | None:
        if command.code == RequestCode.HEART_BEAT:
            return response_to(command, ResponseCode.NO_PERMISSION, remark=REFUSAL)
        return members(command)

    server = scripted(broker_like(refuse_heartbeats))
    errors: list[tuple[str, Exception]] = []
    reported = threading.Event()

    def on_error(kind: str, error: Exception) -> None:
        errors.append((kind, error))
        reported.set()

    caplog.set_level(logging.DEBUG)
    consumer = signed_consumer(server, on_error=on_error)
    consumer.start()
    try:
        assert reported.wait(10)
        wait_for(lambda: not consumer.healthy)
        shown = [str(error) for _, error in errors]
        line = next(text for text in shown if "HEART_BEAT" in text)
        assert "NO_PERMISSION" in line and "Group:GID_acl" in line and "access key reader" in line
        assert "\n" not in line
        server.push(RemotingCommand(RequestCode.GET_CONSUMER_RUNNING_INFO, opaque=77, ext={"consumerGroup": "GID_acl"}))
        server.wait_for(lambda got: any(c.is_response and c.opaque == 77 for c in got))
        outputs = [
            *shown,
            *(kind for kind, _ in errors),
            repr(consumer),
            repr(consumer.transport),
            repr(consumer.__dict__),
            str(consumer.describe()),
            caplog.text,  # DEBUG and up
            *(c.body.decode("utf-8", "replace") + repr(c.ext) for c in server.received if c.is_response),
        ]
    finally:
        consumer.shutdown()
    assert not [text for text in outputs if SECRET in text or TOKEN in text]


def test_a_refusal_without_credentials_says_none_were_given(scripted: Callable[[Handler], ScriptedServer]) -> None:
    def refuse(command: RemotingCommand) -> RemotingCommand | None:
        if command.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            return response_to(command, ResponseCode.NO_PERMISSION, remark="username cannot be null.")
        return None

    server = scripted(broker_like(refuse))
    transport = RemotingTransport([server.address], timeout=2)
    try:
        with pytest.raises(TransportError, match="route of TopicT .*NO_PERMISSION .*no ACL credentials were given"):
            transport.route("TopicT")
    finally:
        transport.close()
    assert ACCESS_KEY not in server.received[0].ext


def test_the_stub_wire_refuses_acl_credentials_in_one_line() -> None:
    from rocket_rebalance.model import AclCredentials

    with pytest.raises(ValueError, match="not nameserver_stub") as raised:
        open_transport(f"{GRPC_SCHEME}127.0.0.1:1", credentials=AclCredentials("ak", SECRET))
    assert "\n" not in str(raised.value) and SECRET not in str(raised.value)


@pytest.mark.parametrize(
    "keys",
    [{"access_key": "ak"}, {"secret_key": SECRET}, {"security_token": TOKEN}, {"access_key": "ak", "secret_key": " "}],
)
def test_incomplete_credentials_are_refused(keys: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="access_key|secret_key") as raised:
        PushConsumer("127.0.0.1:9876", "GID_acl", topics=["TopicT"], **keys)  # type: ignore[arg-type]
    assert SECRET not in str(raised.value)
