"""A stored record becomes the same :class:`Message` the constructor makes (the runtime fills its fields at once)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rocket_rebalance.model import MessageQueue
from rocket_rebalance.remoting.message import StoredMessage
from rocket_rebalance.runtime.transport import Message
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
