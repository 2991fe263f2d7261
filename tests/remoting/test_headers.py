"""Request headers carry every field a Java server insists on, as strings; response numbers parse like Java's."""

from __future__ import annotations

import pytest

from rocket_rebalance.model import MessageQueue
from rocket_rebalance.remoting import ProtocolError, RemotingCommand, headers

MQ = MessageQueue("TopicTest", "broker-a", 3)

# Builders and the @CFNotNull fields of their Java header classes (remoting/.../protocol/header/), copied from
# the 5.3.3 sources so the test does not need them.
CASES = {
    "get_route_info": (headers.get_route_info("T"), {"topic"}),
    "unregister_client": (headers.unregister_client("127.0.0.1@py", "G"), {"clientID"}),
    "get_consumer_list": (headers.get_consumer_list("G"), {"consumerGroup"}),
    "query_consumer_offset": (headers.query_consumer_offset("G", MQ), {"consumerGroup", "topic", "queueId"}),
    "update_consumer_offset": (
        headers.update_consumer_offset("G", MQ, 17),
        {"consumerGroup", "topic", "queueId", "commitOffset"},
    ),
    "pull_message": (
        headers.pull_message("G", MQ, 5, 32, 0x2, 0, 15000, 1700000000000),
        {
            "consumerGroup",
            "topic",
            "queueId",
            "queueOffset",
            "maxMsgNums",
            "sysFlag",
            "commitOffset",
            "suspendTimeoutMillis",
            "subVersion",
        },
    ),
    "get_max_offset": (headers.get_max_offset(MQ), {"topic", "queueId"}),
    "get_min_offset": (headers.get_min_offset(MQ), {"topic", "queueId"}),
    "search_offset_by_timestamp": (
        headers.search_offset_by_timestamp(MQ, 1700000000000),
        {"topic", "queueId", "timestamp"},
    ),
    "send_message_v2": (
        headers.send_message_v2("P", MQ, "WAIT\x01true\x02", 1700000000000),
        set("abcdefgh"),
    ),
    "consumer_send_msg_back": (
        headers.consumer_send_msg_back("G", 1234, 0, "ID", "TopicTest", 16),
        {"offset", "group", "delayLevel"},
    ),
    "create_topic": (
        headers.create_topic("T", 8, 8),
        {"topic", "defaultTopic", "readQueueNums", "writeQueueNums", "perm", "topicFilterType", "order"},
    ),
    "get_consumer_connection_list": (headers.get_consumer_connection_list("G"), {"consumerGroup"}),
    "get_consume_stats": (headers.get_consume_stats("G"), {"consumerGroup"}),
    "get_consumer_running_info": (
        headers.get_consumer_running_info("G", "127.0.0.1@java-1"),
        {"consumerGroup", "clientId"},
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_builder_sends_every_not_null_field_as_a_string(name: str) -> None:
    ext, required = CASES[name]
    assert required <= set(ext), f"{name} lacks {required - set(ext)}"
    assert all(isinstance(key, str) and isinstance(value, str) for key, value in ext.items())


def test_every_builder_is_covered() -> None:
    builders = {name for name in headers.__all__ if name[0].islower()} - {"int_field", "pull_sys_flag"}
    assert builders == set(CASES)


def test_queue_level_calls_carry_the_broker_name_as_java_does() -> None:
    for name in ("query_consumer_offset", "update_consumer_offset", "pull_message", "get_max_offset", "get_min_offset"):
        ext = CASES[name][0]
        assert (ext["topic"], ext["queueId"], ext["bname"]) == ("TopicTest", "3", "broker-a"), name


def test_values_as_java_writes_them() -> None:
    assert headers.get_route_info("T") == {"topic": "T", "acceptStandardJsonOnly": "true"}
    assert headers.get_max_offset(MQ)["committed"] == "true"
    assert headers.search_offset_by_timestamp(MQ, 5, "upper")["boundaryType"] == "UPPER"
    assert headers.get_consumer_running_info("G", "c")["jstackEnable"] == "false"
    assert headers.get_consumer_running_info("G", "c", jstack=True)["jstackEnable"] == "true"
    assert headers.get_consume_stats("G", "T") == {"consumerGroup": "G", "topic": "T"}
    assert headers.create_topic("T", 2, 4, order=True) == {
        "topic": "T",
        "defaultTopic": "TBW102",
        "readQueueNums": "2",
        "writeQueueNums": "4",
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0",
        "order": "true",
        "attributes": "",
        "force": "false",
    }


def test_set_zero_if_not_found_is_left_out_unless_asked() -> None:
    assert "setZeroIfNotFound" not in headers.query_consumer_offset("G", MQ)
    assert headers.query_consumer_offset("G", MQ, set_zero_if_not_found=False)["setZeroIfNotFound"] == "false"


def test_pull_optional_fields() -> None:
    plain = headers.pull_message("G", MQ, 0, 32, 0, 0, 0, 1)
    assert "subscription" not in plain and "maxMsgBytes" not in plain and plain["expressionType"] == "TAG"
    full = headers.pull_message("G", MQ, 0, 32, 4, 0, 0, 1, subscription="a || b", max_msg_bytes=1024)
    assert (full["subscription"], full["maxMsgBytes"], full["sysFlag"]) == ("a || b", "1024", "4")


def test_send_message_v2_short_names() -> None:
    ext = headers.send_message_v2("P", MQ, "TAGS\x01t\x02", 1700000000000, max_reconsume_times=16)
    assert ext == {
        "a": "P",
        "b": "TopicTest",
        "c": "TBW102",
        "d": "4",
        "e": "3",
        "f": "0",
        "g": "1700000000000",
        "h": "0",
        "i": "TAGS\x01t\x02",
        "j": "0",
        "k": "false",
        "l": "16",
        "m": "false",
        "n": "broker-a",
    }


def test_pull_sys_flag_matches_java() -> None:
    assert headers.pull_sys_flag(commit_offset=True, suspend=True, subscription=False) == 0x3  # a push consumer
    assert headers.pull_sys_flag(commit_offset=False, suspend=False, subscription=True) == headers.PULL_SUBSCRIPTION
    assert headers.pull_sys_flag(False, False, False) == 0


def test_builders_refuse_values_java_cannot_parse() -> None:
    with pytest.raises(TypeError, match="offset must be an int"):
        headers.update_consumer_offset("G", MQ, True)
    with pytest.raises(ValueError, match="max_msg_nums 2147483648 is out of range"):
        headers.pull_message("G", MQ, 0, 2**31, 0, 0, 0, 0)
    with pytest.raises(ValueError, match="boundary must be"):
        headers.search_offset_by_timestamp(MQ, 0, "middle")


@pytest.mark.parametrize(
    ("value", "expected"),
    [("12", 12), ("-5", -5), ("+7", 7), ("0009", 9), ("9223372036854775807", 2**63 - 1)],
)
def test_int_field_parses_like_long_parse_long(value: str, expected: int) -> None:
    assert headers.int_field(RemotingCommand(0, ext={"offset": value}), "offset") == expected


@pytest.mark.parametrize("value", ["", " 12", "12 ", "1_000", "0x10", "1.0", "9223372036854775808", "١٢", "9" * 5000])
def test_int_field_refuses_what_java_refuses(value: str) -> None:
    with pytest.raises(ProtocolError, match="not a 64-bit integer"):
        headers.int_field(RemotingCommand(0, ext={"offset": value}), "offset")


def test_int_field_names_the_missing_field() -> None:
    with pytest.raises(ProtocolError, match="^response to PULL_MESSAGE lacks nextBeginOffset$"):
        headers.int_field(RemotingCommand(19), "nextBeginOffset", "response to PULL_MESSAGE")
