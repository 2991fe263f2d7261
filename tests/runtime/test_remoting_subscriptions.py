"""Subscriptions on the remoting wire, against the scripted loopback broker: the heartbeat's SubscriptionData as
``FilterAPI`` builds it, the pull's expression type, CHECK_CLIENT_CONFIG's refusals in one line, and the
properties a producer sends. The real broker's behaviour is tested in ``tests/rocketmq/test_subscriptions.py``."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

import pytest

from rocket_rebalance.model import ConsumeFromWhere, MessageModel
from rocket_rebalance.remoting import RemotingCommand, RequestCode, ResponseCode, message, response_to
from rocket_rebalance.runtime.transport import GroupRegistration, PullResult, SubscriptionRefusedError, TransportError
from rocket_rebalance.subscription import SQL92, SubscriptionExpression, java_string_hash_code
from tests.runtime.test_remoting_transport import MQ, Handler, ScriptedServer, broker_like, connected, serve

__all__ = ["serve"]  # the fixture, used by name


def registration(**expressions: SubscriptionExpression) -> GroupRegistration:
    return GroupRegistration(
        "G",
        True,
        MessageModel.CLUSTERING,
        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        ("TopicT",),
        expressions=expressions,
    )


def test_the_heartbeat_carries_each_topics_subscription_as_java_builds_it(
    serve: Callable[[Handler], ScriptedServer],
) -> None:
    server = serve(broker_like())
    transport = connected(server)
    try:
        transport.heartbeat("broker-a", "c1", registration(TopicT=SubscriptionExpression(" Aa || BB ||")))
        sent = next(c for c in server.received if c.code == RequestCode.HEART_BEAT)
        subscriptions = {s["topic"]: s for s in json.loads(sent.body)["consumerDataSet"][0]["subscriptionDataSet"]}
        tagged = subscriptions["TopicT"]
        assert tagged["subString"] == " Aa || BB ||" and tagged["expressionType"] == "TAG"
        assert tagged["tagsSet"] == ["Aa", "BB"] and tagged["codeSet"] == [java_string_hash_code("Aa")]
        assert subscriptions["%RETRY%G"]["subString"] == "*" and subscriptions["%RETRY%G"]["tagsSet"] == []
    finally:
        transport.close()


def test_a_pull_names_the_subscriptions_expression_type(serve: Callable[[Handler], ScriptedServer]) -> None:
    server = serve(
        broker_like(
            lambda c: (
                response_to(c, ResponseCode.PULL_NOT_FOUND, ext={"nextBeginOffset": "0"})
                if c.code == RequestCode.PULL_MESSAGE
                else None
            )
        )
    )
    transport = connected(server)
    done = threading.Event()

    def finished(_: PullResult | TransportError) -> None:
        done.set()

    try:
        transport.heartbeat("broker-a", "c1", registration(TopicT=SubscriptionExpression("a > 5", SQL92)))
        transport.pull(MQ, "G", 0, 32, 0, finished)
        assert done.wait(5)
        pulled = next(c for c in server.received if c.code == RequestCode.PULL_MESSAGE)
        assert pulled.ext["expressionType"] == "SQL92" and "subscription" not in pulled.ext
    finally:
        transport.close()


def answering_check(code: ResponseCode, remark: str | None) -> Handler:
    def answer(command: RemotingCommand) -> RemotingCommand | None:
        if command.code == RequestCode.CHECK_CLIENT_CONFIG:
            return response_to(command, code, remark=remark)
        return None

    return broker_like(answer)


def test_a_broker_without_property_filtering_is_named_with_the_setting(
    serve: Callable[[Handler], ScriptedServer],
) -> None:
    server = serve(answering_check(ResponseCode.SYSTEM_ERROR, "The broker does not support consumer to filter"))
    transport = connected(server)
    try:
        with pytest.raises(SubscriptionRefusedError) as refused:
            transport.check_subscription("broker-a", "G", "c1", "TopicT", SubscriptionExpression("a > 5", SQL92))
        text = str(refused.value)
        assert "broker-a" in text and "enablePropertyFilter=true" in text and "\n" not in text
        sent = next(c for c in server.received if c.code == RequestCode.CHECK_CLIENT_CONFIG)
        body = json.loads(sent.body)
        assert (body["clientId"], body["group"]) == ("c1", "G")
        assert (
            body["subscriptionData"]["subString"] == "a > 5" and body["subscriptionData"]["expressionType"] == "SQL92"
        )
    finally:
        transport.close()


def test_a_malformed_expression_is_named(serve: Callable[[Handler], ScriptedServer]) -> None:
    server = serve(answering_check(ResponseCode.SUBSCRIPTION_PARSE_FAILED, 'Encountered ">" at line 1\nmore'))
    transport = connected(server)
    try:
        with pytest.raises(SubscriptionRefusedError) as refused:
            transport.check_subscription("broker-a", "G", "c1", "TopicT", SubscriptionExpression("a >> 5", SQL92))
        text = str(refused.value)
        assert "'a >> 5'" in text and "TopicT" in text and "\n" not in text
    finally:
        transport.close()


def test_tag_expressions_are_not_checked(serve: Callable[[Handler], ScriptedServer]) -> None:
    server = serve(answering_check(ResponseCode.SYSTEM_ERROR, "no"))
    transport = connected(server)
    try:
        transport.check_subscription("broker-a", "G", "c1", "TopicT", SubscriptionExpression("A||B"))
        assert not any(c.code == RequestCode.CHECK_CLIENT_CONFIG for c in server.received)
    finally:
        transport.close()


def test_a_sent_message_carries_tags_keys_and_properties_as_javas_producer_sets_them(
    serve: Callable[[Handler], ScriptedServer],
) -> None:
    server = serve(
        broker_like(
            lambda c: (
                response_to(c, ResponseCode.SUCCESS, ext={"queueOffset": "0"})
                if c.code == RequestCode.SEND_MESSAGE_V2
                else None
            )
        )
    )
    transport = connected(server)
    try:
        transport.send("TopicT", "broker-a", [b"x"], 0, tags="TagA", keys="k1 k2", properties={"color": "red"})
        sent = next(c for c in server.received if c.code == RequestCode.SEND_MESSAGE_V2)
        properties = message.decode_properties(sent.ext["i"])
        assert {k: properties[k] for k in ("TAGS", "KEYS", "color")} == {
            "TAGS": "TagA",
            "KEYS": "k1 k2",
            "color": "red",
        }
    finally:
        transport.close()


@pytest.mark.parametrize("user", [{"TAGS": "x"}, {"UNIQ_KEY": "x"}, {" ": "x"}, {"a": " "}])
def test_a_property_javas_producer_refuses_is_refused(user: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="property"):
        message.message_properties("t", "", user)
