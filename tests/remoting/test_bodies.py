"""Bodies: the shapes a broker expects from a Java client, and the answers it sends back."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocket_rebalance.model import MessageQueue
from rocket_rebalance.remoting import ProtocolError, bodies, fastjson
from rocket_rebalance.remoting.bodies import ConsumeStatus, ProcessQueueInfo, Subscription
from rocket_rebalance.route import QueueData
from rocket_rebalance.subscription import java_string_hash_code

MQ0, MQ1 = MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 1)


# ---------------------------------------------------------------------------------------------- String.hashCode


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("TagA", 84 * 31**3 + 97 * 31**2 + 103 * 31 + 65),  # 2598919, no overflow yet
        ("hello world", 1794106052),
        ("polygenelubricants", -(2**31)),  # wraps to Integer.MIN_VALUE
        ("Aa", 2112),
        ("BB", 2112),
        ("\U0001f600", 0xD83D * 31 + 0xDE00),  # two UTF-16 code units, not one code point
        ("\ud800", 0xD800),  # a lone surrogate, possible in a Java string
    ],
)
def test_java_string_hash_code(text: str, expected: int) -> None:
    assert java_string_hash_code(text) == expected


@settings(max_examples=200)
@given(st.text(max_size=40))
def test_java_string_hash_code_by_the_formula(text: str) -> None:
    units = []
    for char in text:
        code = ord(char)
        if code > 0xFFFF:
            code -= 0x10000
            units += [0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF)]
        else:
            units.append(code)
    expected = sum(unit * 31 ** (len(units) - 1 - i) for i, unit in enumerate(units)) % 2**32
    assert java_string_hash_code(text) == (expected - 2**32 if expected >= 2**31 else expected)


# ---------------------------------------------------------------------------------------------- subscriptions


def test_tag_expressions_split_and_trim_like_filter_api() -> None:
    sub = Subscription("T", " TagA ||TagB||  || TagA|| \u00a0TagC ", 7)
    # Java's trim() strips chars <= U+0020 only, so the no-break space stays; duplicates collapse (HashSet).
    assert sub.tags_set == ("TagA", "TagB", "\u00a0TagC")
    assert sub.code_set == tuple(java_string_hash_code(tag) for tag in ("TagA", "TagB", "\u00a0TagC"))
    assert Subscription("T", "*", 1).tags_set == () and Subscription("T", "", 1).code_set == ()
    assert Subscription("T", "a > 1", 1, "SQL92").tags_set == ()
    assert Subscription("T", "Aa || BB", 1).code_set == (2112,)  # equal hashes, one code
    assert Subscription("T", "", 1).to_json()["subString"] == "*"


def test_heartbeat_has_exactly_the_java_shape() -> None:
    body = bodies.encode_heartbeat(
        "127.0.0.1@py-1",
        "G",
        consume_type="CONSUME_PASSIVELY",
        message_model="CLUSTERING",
        consume_from_where="CONSUME_FROM_LAST_OFFSET",
        subscriptions=[Subscription("T", "*", 1747000000000), Subscription("%RETRY%G", "*", 1747000000000)],
    )
    assert json.loads(body) == {
        "clientID": "127.0.0.1@py-1",
        "consumerDataSet": [
            {
                "groupName": "G",
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "unitMode": False,
                "subscriptionDataSet": [
                    {
                        "classFilterMode": False,
                        "topic": topic,
                        "subString": "*",
                        "tagsSet": [],
                        "codeSet": [],
                        "subVersion": 1747000000000,
                        "expressionType": "TAG",
                    }
                    for topic in ("T", "%RETRY%G")
                ],
            }
        ],
        "producerDataSet": [],
        "heartbeatFingerprint": 0,
        "withoutSub": False,
    }
    assert body.startswith(b'{"clientID":"127.0.0.1@py-1","consumerDataSet":[{"consumeFromWhere":')  # fields sorted


def test_heartbeat_tags_carry_their_hash_codes() -> None:
    body = bodies.encode_heartbeat(
        "c", "G", "CONSUME_ACTIVELY", "BROADCASTING", "CONSUME_FROM_FIRST_OFFSET", [Subscription("T", "TagA", 1)]
    )
    (subscription,) = json.loads(body)["consumerDataSet"][0]["subscriptionDataSet"]
    assert (subscription["tagsSet"], subscription["codeSet"]) == (["TagA"], [2598919])


@pytest.mark.parametrize(
    "arguments",
    [
        ("PUSH", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET"),
        ("CONSUME_PASSIVELY", "clustering", "CONSUME_FROM_LAST_OFFSET"),
        ("CONSUME_PASSIVELY", "CLUSTERING", "LAST_OFFSET"),
    ],
)
def test_heartbeat_refuses_names_java_does_not_know(arguments: tuple[str, str, str]) -> None:
    with pytest.raises(ValueError, match="must be one of"):
        bodies.encode_heartbeat("c", "G", *arguments, subscriptions=[])


# ---------------------------------------------------------------------------------------------- routes, cluster

ROUTE_5X = (
    b'{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911","1":"127.0.0.1:10921"},"brokerName":"broker-a",'
    b'"cluster":"DefaultCluster","enableActingMaster":false},{"brokerAddrs":{"1":"127.0.0.1:20921"},'
    b'"brokerName":"broker-b","cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},'
    b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8},'
    b'{"brokerName":"broker-b","perm":2,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
)
ROUTE_4X = (
    b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"c"}],'
    b'"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":2,"topicSynFlag":0,'
    b'"writeQueueNums":2}]}'
)


def test_route_standard_json() -> None:
    data = bodies.parse_route("T", ROUTE_5X)
    assert data.route.queue_datas == (QueueData("broker-a", 8, 8, 6), QueueData("broker-b", 4, 4, 2))
    assert data.broker_addrs == {
        "broker-a": {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"},
        "broker-b": {1: "127.0.0.1:20921"},
    }
    assert data.master("broker-a") == "127.0.0.1:10911"
    assert data.master("broker-b") is None and data.master("broker-z") is None
    assert len(data.route.subscribe_queues()) == 8  # broker-b is not readable


def test_route_with_bare_integer_keys_and_the_old_field_name() -> None:
    data = bodies.parse_route("T", ROUTE_4X)
    assert data.master("broker-a") == "127.0.0.1:10911"
    assert data.route.subscribe_queues() == [MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 1)]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{", "route: invalid JSON at position 1"),
        (b"[]", "route must be an object"),
        (b'{"brokerDatas":[]}', "route.queueDatas is missing"),
        (b'{"queueDatas":[]}', "route.brokerDatas is missing"),
        (b'{"brokerDatas":[],"queueDatas":{}}', "route.queueDatas must be an array"),
        (
            b'{"brokerDatas":[],"queueDatas":[{"brokerName":"a","perm":6,"readQueueNums":"8","writeQueueNums":8}]}',
            "route.queueDatas[0].readQueueNums must be an integer",
        ),
        (
            b'{"brokerDatas":[],"queueDatas":[{"brokerName":"a","perm":6,"readQueueNums":-1,"writeQueueNums":8}]}',
            "route.queueDatas[0].readQueueNums must be an integer in 0..2147483647",
        ),
        (b'{"brokerDatas":[{"brokerName":"a","brokerAddrs":{"x":"h"}}],"queueDatas":[]}', "brokerAddrs key"),
        (b'{"brokerDatas":[{"brokerName":"a","brokerAddrs":{"0":5}}],"queueDatas":[]}', "brokerAddrs['0']"),
        (b'{"brokerDatas":[{"brokerAddrs":{}}],"queueDatas":[]}', "route.brokerDatas[0].brokerName is missing"),
    ],
)
def test_malformed_routes_name_the_field(body: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=message.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        bodies.parse_route("T", body)


def test_cluster_info_with_bare_integer_keys() -> None:
    body = (
        b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},'
        b'"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}},'
        b'"clusterAddrTable":{"DefaultCluster":["broker-a"]}}'
    )
    info = bodies.parse_cluster_info(body)
    assert info.broker_addrs == {"broker-a": {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}}
    assert info.cluster_addrs == {"DefaultCluster": frozenset({"broker-a"})}
    assert bodies.parse_cluster_info(b"{}").broker_addrs == {}


def test_topic_list() -> None:
    assert bodies.parse_topic_list(b'{"brokerAddr":null,"topicList":["T","%RETRY%G"]}') == {"T", "%RETRY%G"}
    with pytest.raises(ProtocolError, match=r"topicList\[1\] must be a string"):
        bodies.parse_topic_list(b'{"topicList":["T",1]}')


def test_subscription_groups_are_the_table_keys() -> None:
    body = (
        b'{"dataVersion":{"counter":3},"forbiddenTable":{},"subscriptionGroupTable":{'
        b'"TOOLS_CONSUMER":{"groupName":"TOOLS_CONSUMER","retryMaxTimes":16},"GID_a":{"consumeEnable":true}}}'
    )
    assert bodies.parse_subscription_groups(body) == {"TOOLS_CONSUMER", "GID_a"}
    with pytest.raises(ProtocolError, match=r"\['GID_a'\]\.groupName is 'GID_b', not its key"):
        bodies.parse_subscription_groups(b'{"subscriptionGroupTable":{"GID_a":{"groupName":"GID_b"}}}')


# ---------------------------------------------------------------------------------------------- consumer calls


def test_consumer_list() -> None:
    body = b'{"consumerIdList":["127.0.0.1@java-1","127.0.0.1@py-1","127.0.0.1@java-1"]}'
    assert bodies.parse_consumer_list(body) == ["127.0.0.1@java-1", "127.0.0.1@py-1", "127.0.0.1@java-1"]
    with pytest.raises(ProtocolError, match="consumerList.consumerIdList is missing"):
        bodies.parse_consumer_list(b"{}")


def test_lock_body_and_result() -> None:
    body = bodies.encode_lock_body("G", "127.0.0.1@py-1", [MQ1, MQ0, MQ1])
    assert body == (
        b'{"clientId":"127.0.0.1@py-1","consumerGroup":"G","mqSet":[{"brokerName":"broker-a","queueId":0,"topic":"T"},'
        b'{"brokerName":"broker-a","queueId":1,"topic":"T"}],"onlyThisBroker":false}'
    )
    answer = b'{"lockOKMQSet":[{"brokerName":"broker-a","queueId":1,"topic":"T"}]}'
    assert bodies.parse_lock_result(answer) == {MQ1}
    assert bodies.parse_lock_result(b"{}") == set()
    with pytest.raises(ProtocolError, match=r"lockResult.lockOKMQSet\[0\]: not a message queue"):
        bodies.parse_lock_result(b'{"lockOKMQSet":[{"topic":"T"}]}')


def test_query_assignment() -> None:
    request = bodies.encode_query_assignment("T", "G", "127.0.0.1@oracle")
    assert json.loads(request) == {
        "topic": "T",
        "consumerGroup": "G",
        "clientId": "127.0.0.1@oracle",
        "strategyName": "AVG",
        "messageModel": "CLUSTERING",
    }
    answer = (
        b'{"messageQueueAssignments":[{"messageQueue":{"brokerName":"broker-a","queueId":0,"topic":"T"},'
        b'"mode":"PULL"},{"attachments":{},"messageQueue":{"brokerName":"broker-a","queueId":1,"topic":"T"},'
        b'"mode":"PULL"}]}'
    )
    assert bodies.parse_query_assignment(answer) == {MQ0, MQ1}
    assert bodies.parse_query_assignment(b"{}") == set()


def test_consumer_connection() -> None:
    body = (
        b'{"connectionSet":[{"clientAddr":"127.0.0.1:50000","clientId":"127.0.0.1@java-1","language":"JAVA",'
        b'"version":479},{"clientAddr":"127.0.0.1:50001","clientId":"127.0.0.1@py-1","language":"PYTHON",'
        b'"version":479}],"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY",'
        b'"messageModel":"CLUSTERING","subscriptionTable":{"T":{"classFilterMode":false,"codeSet":[],'
        b'"expressionType":"TAG","subString":"*","subVersion":1700000000000,"tagsSet":[],"topic":"T"},'
        b'"%RETRY%G":{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*",'
        b'"subVersion":1700000000000,"tagsSet":[],"topic":"%RETRY%G"}}}'
    )
    connection = bodies.parse_consumer_connection(body)
    assert [(row.client_id, row.client_addr, row.language, row.version) for row in connection.connections] == [
        ("127.0.0.1@java-1", "127.0.0.1:50000", "JAVA", 479),
        ("127.0.0.1@py-1", "127.0.0.1:50001", "PYTHON", 479),
    ]
    assert connection.topics == {"T", "%RETRY%G"}
    assert connection.subscriptions["T"] == Subscription("T", "*", 1700000000000)
    assert (connection.consume_type, connection.message_model) == ("CONSUME_PASSIVELY", "CLUSTERING")
    assert connection.consume_from_where == "CONSUME_FROM_LAST_OFFSET"


def test_consume_stats_with_object_keys() -> None:
    body = (
        b'{"consumeTps":0.5,"offsetTable":{{"brokerName":"broker-a","queueId":1,"topic":"T"}:{"brokerOffset":9,'
        b'"consumerOffset":4,"lastTimestamp":1700000000000,"pullOffset":6},{"brokerName":"broker-a","queueId":0,'
        b'"topic":"T"}:{"brokerOffset":3,"consumerOffset":3,"lastTimestamp":0,"pullOffset":3}}}'
    )
    stats = bodies.parse_consume_stats(body)
    assert stats.consume_tps == 0.5
    assert stats.offset_table == {
        MQ0: bodies.OffsetWrapper(3, 3, 3, 0),
        MQ1: bodies.OffsetWrapper(9, 4, 6, 1700000000000),
    }
    with pytest.raises(ProtocolError, match=r"offsetTable\[MessageQueue \[topic=T, brokerName=b, queueId=0\]\]"):
        bodies.parse_consume_stats(b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":1}}}')


# ---------------------------------------------------------------------------------------------- running info


def test_running_info_is_written_as_a_java_consumer_writes_it() -> None:
    body = bodies.encode_running_info(
        {"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY", "PROP_CONSUMER_START_TIMESTAMP": "1700000000000"},
        [Subscription("T", "*", 5), Subscription("%RETRY%G", "*", 5), Subscription("T", "*", 6)],
        {MQ1: ProcessQueueInfo(commitOffset=7, droped=True), MQ0: ProcessQueueInfo(locked=True)},
        {"T": ConsumeStatus(consumeOKTPS=1.5, consumeFailedMsgs=2)},
    )
    queue_info = (
        '"cachedMsgCount":0,"cachedMsgMaxOffset":0,"cachedMsgMinOffset":0,"cachedMsgSizeInMiB":0,"commitOffset":{c},'
        '"droped":{d},"lastConsumeTimestamp":0,"lastLockTimestamp":0,"lastPullTimestamp":0,"locked":{lk},'
        '"transactionMsgCount":0,"transactionMsgMaxOffset":0,"transactionMsgMinOffset":0,"tryUnlockTimes":0'
    )
    subscription = (
        '{{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":5,"tagsSet":[],'
        '"topic":"{t}"}}'
    )
    expected = (
        '{"mqPopTable":{},"mqTable":{'
        + '{"brokerName":"broker-a","queueId":0,"topic":"T"}:{'
        + queue_info.format(c=0, d="false", lk="true")
        + '},{"brokerName":"broker-a","queueId":1,"topic":"T"}:{'
        + queue_info.format(c=7, d="true", lk="false")
        + '}},"properties":{"PROP_CONSUMER_START_TIMESTAMP":"1700000000000","PROP_CONSUME_TYPE":"CONSUME_PASSIVELY"},'
        + '"statusTable":{"T":{"consumeFailedMsgs":2,"consumeFailedTPS":0.0,"consumeOKTPS":1.5,"consumeRT":0.0,'
        + '"pullRT":0.0,"pullTPS":0.0}},"subscriptionSet":['
        + subscription.format(t="%RETRY%G")
        + ","
        + subscription.format(t="T")
        + '],"userConsumerInfo":{}}'
    )
    assert body.decode() == expected


def test_running_info_round_trip() -> None:
    table = {MQ0: ProcessQueueInfo(commitOffset=3, cachedMsgCount=2, lastPullTimestamp=99), MQ1: ProcessQueueInfo()}
    status = {"T": ConsumeStatus(pullRT=1.25, consumeFailedMsgs=4)}
    subscriptions = [Subscription("%RETRY%G", "*", 8), Subscription("T", "a || b", 8)]
    info = bodies.parse_running_info(bodies.encode_running_info({"k": "v"}, subscriptions, table, status))
    assert info.properties == {"k": "v"}
    assert info.mq_table == table and info.queues == {MQ0, MQ1}
    assert info.status_table == status
    assert info.subscriptions == tuple(subscriptions)


def test_a_queue_being_given_up_is_in_the_table_but_not_held() -> None:
    table = {MQ0: ProcessQueueInfo(droped=True), MQ1: ProcessQueueInfo()}
    info = bodies.parse_running_info(bodies.encode_running_info({}, [], table, {}))
    assert info.mq_table == table and info.queues == {MQ1}


def test_running_info_from_an_older_client_keeps_defaults() -> None:
    body = b'{"mqTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"commitOffset":4}},"properties":{}}'
    info = bodies.parse_running_info(body)
    assert info.mq_table == {MQ0: ProcessQueueInfo(commitOffset=4)}
    with pytest.raises(ProtocolError, match=r"mqTable\[MessageQueue \[topic=T, brokerName=broker-a, queueId=0\]\]"):
        bodies.parse_running_info(body.replace(b"4}", b'"4"}'))
    with pytest.raises(ProtocolError, match="runningInfo.mqTable key"):
        bodies.parse_running_info(b'{"mqTable":{"x":{}}}')


def test_consume_directly_result() -> None:
    body = bodies.encode_consume_directly_result(False, True, "CR_SUCCESS", None, 12)
    assert body == b'{"autoCommit":true,"consumeResult":"CR_SUCCESS","order":false,"spentTimeMills":12}'
    with_remark = bodies.encode_consume_directly_result(True, False, "CR_THROW_EXCEPTION", "boom", 3)
    assert json.loads(with_remark)["remark"] == "boom"
    with pytest.raises(ValueError, match="consume_result must be one of"):
        bodies.encode_consume_directly_result(False, True, "SUCCESS", None, 0)


# ---------------------------------------------------------------------------------------------- garbage

PARSERS: list[Callable[[bytes], Any]] = [
    lambda body: bodies.parse_route("T", body),
    bodies.parse_cluster_info,
    bodies.parse_topic_list,
    bodies.parse_consumer_list,
    bodies.parse_lock_result,
    bodies.parse_query_assignment,
    bodies.parse_consumer_connection,
    bodies.parse_consume_stats,
    bodies.parse_running_info,
    bodies.parse_subscription_groups,
]


FIELD_NAMES = [
    "queueDatas", "brokerDatas", "brokerName", "brokerAddrs", "readQueueNums", "writeQueueNums", "perm",
    "brokerAddrTable", "clusterAddrTable", "topicList", "consumerIdList", "lockOKMQSet", "messageQueueAssignments",
    "messageQueue", "connectionSet", "clientId", "subscriptionTable", "offsetTable", "brokerOffset",
    "consumerOffset", "consumeTps", "mqTable", "properties", "statusTable", "subscriptionSet", "topic", "queueId",
    "subString", "subVersion", "commitOffset", "locked", "pullRT", "subscriptionGroupTable", "groupName",
]  # fmt: skip
scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False)
keys = (
    st.sampled_from(FIELD_NAMES)
    | st.integers(-1, 2)
    | st.builds(MessageQueue, st.just("T"), st.just("b"), st.integers(0, 2))
)
documents = st.recursive(
    scalars | st.sampled_from(FIELD_NAMES),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(keys, children, max_size=4),
    max_leaves=25,
)


@settings(max_examples=300)
@given(documents | st.binary(max_size=60))
def test_every_parser_raises_only_protocol_errors(document: Any) -> None:
    body = document if isinstance(document, bytes) else fastjson.dumps(document).encode()
    for parse in PARSERS:
        try:
            parse(body)
        except ProtocolError:
            pass
