"""A stored record becomes the same :class:`Message` the constructor makes (the runtime fills its fields at once),
and a pull answer's inner batch becomes its messages."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rocket_rebalance.model import MessageQueue
from rocket_rebalance.remoting import RemotingCommand, ResponseCode
from rocket_rebalance.remoting.message import Compression, StoredMessage, encode_message_batch, encode_stored_message
from rocket_rebalance.runtime.transport import Message
from rocket_rebalance.runtime.transport.remoting_calls import pull_result
from rocket_rebalance.runtime.transport.remoting_wire import stored_message

MQ = MessageQueue("TopicTest", "broker-a", 3)
names = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "a", "RETRY_TOPIC"])


@given(
    st.dictionaries(names, st.text(min_size=1, max_size=8), max_size=5),
    st.integers(0, 2**40),
    st.binary(max_size=16),
    st.sampled_from(["", "zlib data damaged"]),
)
def test_it_equals_the_constructed_message(properties: dict[str, str], offset: int, body: bytes, error: str) -> None:
    stored = StoredMessage(
        "TopicTest", 3, offset, offset * 7, body, properties, born_timestamp=5, store_timestamp=9, body_error=error
    )
    built = stored_message(MQ, stored)
    expected = Message(
        MQ,
        offset,
        stored.msg_id,
        body,
        properties.get("TAGS", ""),
        properties.get("KEYS", ""),
        properties,
        commit_log_offset=offset * 7,
        reconsume_times=0,
        born_timestamp_ms=5,
        store_timestamp_ms=9,
        body_error=error,
    )
    assert built == expected and repr(built) == repr(expected) and hash(built.mq) == hash(MQ)
    assert built.topic == expected.topic


def test_a_pull_answer_delivers_an_inner_batch_as_its_messages() -> None:
    """``pull_result`` splits each INNER_BATCH + NEED_UNWRAP record, as Java's ``processPullResult`` does."""
    inner = [(0, b"first", {"UNIQ_KEY": "A", "TAGS": "TagA"}), (0, b"second", {"UNIQ_KEY": "B"})]
    batch = StoredMessage("TopicTest", 3, 40, 900, encode_message_batch(inner), sys_flag=0xC0)
    plain = StoredMessage("TopicTest", 3, 42, 901, b"third", {"UNIQ_KEY": "C"})
    body = encode_stored_message(batch, Compression.ZSTD) + encode_stored_message(plain, Compression.LZ4)
    answer = RemotingCommand(ResponseCode.SUCCESS, ext={"nextBeginOffset": "43"}, body=body)
    result = pull_result(MQ, "127.0.0.1:10911", answer)
    assert result.next_begin_offset == 43
    assert [(m.queue_offset, m.msg_id, m.body, m.tags) for m in result.messages] == [
        (40, "A", b"first", "TagA"),
        (41, "B", b"second", ""),
        (42, "C", b"third", ""),
    ]
    assert [m.commit_log_offset for m in result.messages] == [900, 900, 901]
