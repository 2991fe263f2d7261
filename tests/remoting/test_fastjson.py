"""fastjson's JSON: bare integer keys, object keys, bounded nesting, and writing it back the way fastjson does."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocket_rebalance.model import MessageQueue
from rocket_rebalance.remoting import ProtocolError
from rocket_rebalance.remoting.fastjson import MAX_DEPTH, FrozenJson, dumps, loads, queue_from_json

ROUTE_4X = (
    '{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"broker-a",'
    '"cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},'
    '"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSynFlag":0,"writeQueueNums":8}]}'
)

CONSUME_STATS = (
    '{"consumeTps":2.5,"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:'
    '{"brokerOffset":10,"consumerOffset":7,"lastTimestamp":1700000000000,"pullOffset":9},'
    '{"brokerName":"broker-a","queueId":1,"topic":"T"}:'
    '{"brokerOffset":4,"consumerOffset":4,"lastTimestamp":0,"pullOffset":4}}}'
)


def test_route_with_bare_integer_keys() -> None:
    route = loads(ROUTE_4X)
    assert route["brokerDatas"][0]["brokerAddrs"] == {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}
    assert route["queueDatas"][0]["readQueueNums"] == 8


def test_standard_json_parses_as_json_loads_parses_it() -> None:
    text = '{"a": [1, 2.5, -3e2, "x\\u00e9\\n", true, false, null], "b": {}}'
    assert loads(text) == json.loads(text)
    assert loads(text.encode()) == json.loads(text)


def test_object_keys_become_frozen_json_and_then_queues() -> None:
    stats = loads(CONSUME_STATS)
    table = {queue_from_json(key): value for key, value in stats["offsetTable"].items()}
    assert table == {
        MessageQueue("T", "broker-a", 0): {
            "brokerOffset": 10,
            "consumerOffset": 7,
            "lastTimestamp": 1700000000000,
            "pullOffset": 9,
        },
        MessageQueue("T", "broker-a", 1): {"brokerOffset": 4, "consumerOffset": 4, "lastTimestamp": 0, "pullOffset": 4},
    }
    assert stats["consumeTps"] == 2.5


def test_any_value_can_be_a_key() -> None:
    document = loads('{[1,{"a":[2]}]:1, {"z":{"y":[]}}:2, true:3, null:4, -7:5, 1.5:6, "s":7}')
    assert document == {
        (1, FrozenJson({"a": (2,)})): 1,
        FrozenJson({"z": FrozenJson({"y": ()})}): 2,
        True: 3,
        None: 4,
        -7: 5,
        1.5: 6,
        "s": 7,
    }


def test_frozen_json_is_an_order_blind_hashable_mapping() -> None:
    one = FrozenJson([("topic", "T"), ("queueId", 0), ("nested", {"l": [1]})])
    two = FrozenJson({"nested": {"l": [1]}, "queueId": 0, "topic": "T"})
    assert one == two and hash(one) == hash(two)
    assert one == {"topic": "T", "queueId": 0, "nested": FrozenJson({"l": (1,)})}
    assert one.to_dict() == {"topic": "T", "queueId": 0, "nested": {"l": [1]}}
    assert one != FrozenJson({"topic": "T"})


def test_deep_nesting_is_a_protocol_error_not_a_recursion_error() -> None:
    # deeper than the standard parser takes on any Python we support (3.13's takes about 10,000 levels)
    for text in ("[" * 100_000, "[" * 100_000 + "]" * 100_000, "{0:" * 100_000 + "1" + "}" * 100_000):
        with pytest.raises(ProtocolError, match=f"nesting deeper than {MAX_DEPTH}"):
            loads(text)


def test_nesting_up_to_the_limit_is_fine() -> None:
    text = "{0:" * (MAX_DEPTH - 1) + "[]" + "}" * (MAX_DEPTH - 1)
    value = loads(text)
    for _ in range(MAX_DEPTH - 1):
        value = value[0]
    assert value == []


@pytest.mark.parametrize(
    ("text", "position"),
    [
        ("", 0),
        ("{", 1),
        ("{0:}", 3),
        ("[1,]", 3),
        ('{"a" 1}', 5),
        ("{1:2", 4),
        ("{1:2,}", 5),
        ("tru", 0),
        ("NaN", 0),
        ("[Infinity]", 1),
        ("[1] x", 4),
        ('{"a":"\x01"}', 5),
        ("[1 2]", 3),
        ("{0:1]", 4),
        ("[01]", 2),
    ],
)
def test_invalid_text_is_a_protocol_error_with_its_position(text: str, position: int) -> None:
    with pytest.raises(ProtocolError, match=f"invalid JSON at position {position}:"):
        loads(text)


def test_bytes_that_are_not_utf8() -> None:
    with pytest.raises(ProtocolError, match="not valid UTF-8"):
        loads(b'{"a":"\xff"}')


def test_dumps_writes_fastjson_shapes() -> None:
    queue_b1, queue_a2, queue_a10 = MessageQueue("T", "b", 1), MessageQueue("T", "a", 2), MessageQueue("T", "a", 10)
    text = dumps({"z": 1, "a": {queue_a10: True, queue_b1: None, queue_a2: 1.5}, "m": queue_b1, 1: [queue_a2]})
    assert text == (
        '{1:[{"brokerName":"a","queueId":2,"topic":"T"}],"a":{{"brokerName":"a","queueId":2,"topic":"T"}:1.5,'
        '{"brokerName":"a","queueId":10,"topic":"T"}:true,{"brokerName":"b","queueId":1,"topic":"T"}:null},'
        '"m":{"brokerName":"b","queueId":1,"topic":"T"},"z":1}'
    )


def test_dumps_sorts_string_keys_in_java_order_and_sets_too() -> None:
    # U+FFFD sorts after U+1F600 in Java (the surrogate D83D is smaller), before it in Python.
    assert dumps({"\ufffd": 1, "\U0001f600": 2}) == '{"\U0001f600":2,"\ufffd":1}'
    assert dumps({"b", "a", "c"}) == '["a","b","c"]'
    assert dumps("\x01\x02\ud800") == '"\\u0001\\u0002\\ud800"'


def test_dumps_refuses_what_fastjson_cannot_read() -> None:
    with pytest.raises(ValueError, match="nan cannot be written"):
        dumps([float("nan")])
    with pytest.raises(TypeError, match="cannot write bytes"):
        dumps({"a": b"x"})


def test_queue_from_json_names_what_is_wrong() -> None:
    with pytest.raises(ProtocolError, match="missing field 'queueId'"):
        queue_from_json({"topic": "T", "brokerName": "b"})
    with pytest.raises(ProtocolError, match="queue_id must be an int"):
        queue_from_json(FrozenJson({"topic": "T", "brokerName": "b", "queueId": "0"}))
    with pytest.raises(ProtocolError, match="must be an object"):
        queue_from_json([1])


# ---------------------------------------------------------------------------------------------- properties

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
keys = st.text(max_size=8) | st.integers(-1000, 1000)
values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4),
    max_leaves=20,
)
standard_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
queues = st.builds(MessageQueue, st.text(max_size=5), st.text(max_size=5), st.integers(0, 2**31 - 1))


@settings(max_examples=200)
@given(values)
def test_round_trip(value: Any) -> None:
    assert loads(dumps(value)) == value


@settings(max_examples=100)
@given(standard_values)
def test_standard_text_inside_a_non_standard_document(value: Any) -> None:
    # The bare key forces the fallback parser over json.dumps' own spelling (spaces, \\u escapes, exponents).
    assert loads("{0:" + json.dumps(value) + "}") == {0: value}


@settings(max_examples=100)
@given(st.dictionaries(queues, values, max_size=5))
def test_round_trip_with_message_queue_keys(table: dict[MessageQueue, Any]) -> None:
    parsed = loads(dumps({"mqTable": table}))
    assert {queue_from_json(key): value for key, value in parsed["mqTable"].items()} == table


@settings(max_examples=200)
@given(st.text(alphabet='{}[]:,"0123456789-.eEtruefalsn \\x', max_size=40))
def test_random_text_parses_or_raises_protocol_error(text: str) -> None:
    try:
        loads(text)
    except ProtocolError:
        pass


@settings(max_examples=200)
@given(st.integers(0, len(CONSUME_STATS) - 1), st.characters(codec="ascii"))
def test_corrupted_documents_parse_or_raise_protocol_error(index: int, char: str) -> None:
    try:
        loads(CONSUME_STATS[:index] + char + CONSUME_STATS[index + 1 :])
    except ProtocolError:
        pass
