"""Stored messages: a record built by hand from the layout, round trips, and damaged buffers."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocket_rebalance.remoting import ProtocolError
from rocket_rebalance.remoting import message as message_module
from rocket_rebalance.remoting.message import (
    MAGIC_V1,
    MAGIC_V2,
    MAX_BODY_SIZE,
    Compression,
    StoredMessage,
    compress_body,
    decode_messages,
    decode_properties,
    encode_properties,
    encode_stored_message,
)


def hand_built_record(
    topic: bytes = b"TopicTest",
    body: bytes = b"Hello",
    properties: bytes = b"TAGS\x01TagA\x02UNIQ_KEY\x01AC11000100002A9F0000000000000001\x02",
    sys_flag: int = 0,
    magic: int = MAGIC_V1,
) -> bytes:
    """One record laid out field by field from the protocol notes, independently of the encoder."""
    fields = (
        struct.pack(">i", 0x1234ABCD)  # BODYCRC
        + struct.pack(">i", 3)  # QUEUEID
        + struct.pack(">i", 0)  # FLAG
        + struct.pack(">q", 42)  # QUEUEOFFSET
        + struct.pack(">q", 1234)  # PHYSICALOFFSET
        + struct.pack(">i", sys_flag)
        + struct.pack(">q", 1_700_000_000_000)  # BORNTIMESTAMP
        + bytes([10, 0, 0, 5])
        + struct.pack(">i", 54321)  # BORNHOST
        + struct.pack(">q", 1_700_000_000_123)  # STORETIMESTAMP
        + bytes([127, 0, 0, 1])
        + struct.pack(">i", 10911)  # STOREHOST
        + struct.pack(">i", 2)  # RECONSUMETIMES
        + struct.pack(">q", 0)  # PREPARED TRANSACTION OFFSET
        + struct.pack(">i", len(body))
        + body
        + (bytes([len(topic)]) if magic == MAGIC_V1 else struct.pack(">h", len(topic)))
        + topic
        + struct.pack(">h", len(properties))
        + properties
    )
    return struct.pack(">ii", 8 + len(fields), magic) + fields


def test_a_hand_built_record() -> None:
    (message,) = decode_messages(hand_built_record())
    assert message == StoredMessage(
        topic="TopicTest",
        queue_id=3,
        queue_offset=42,
        commit_log_offset=1234,
        body=b"Hello",
        properties={"TAGS": "TagA", "UNIQ_KEY": "AC11000100002A9F0000000000000001"},
        sys_flag=0,
        flag=0,
        born_timestamp=1_700_000_000_000,
        born_host="10.0.0.5:54321",
        store_timestamp=1_700_000_000_123,
        store_host="127.0.0.1:10911",
        reconsume_times=2,
        prepared_transaction_offset=0,
        body_crc=0x1234ABCD,
    )
    assert message.tags == "TagA" and message.keys == ""
    assert message.msg_id == "AC11000100002A9F0000000000000001"


def test_offset_msg_id_by_hand() -> None:
    # 127.0.0.1 = 7F000001, port 10911 = 00002A9F, commit-log offset 1234 = 00000000000004D2.
    message = StoredMessage("T", 0, 0, 1234, b"", store_host="127.0.0.1:10911")
    assert message.offset_msg_id == "7F00000100002A9F00000000000004D2"
    assert message.msg_id == message.offset_msg_id  # no UNIQ_KEY property
    v6 = StoredMessage("T", 0, 0, 1, b"", store_host="[::1]:9876")
    assert v6.offset_msg_id == "0" * 31 + "1" + "00002694" + "0000000000000001"


def test_zlib_bodies_are_inflated_and_the_compressed_bit_cleared() -> None:
    raw = b"x" * 5000
    for compression_bits in (0x000, 0x300):  # 0: producers from before compression types existed
        record = hand_built_record(body=zlib.compress(raw), sys_flag=0x1 | compression_bits)
        (message,) = decode_messages(record)
        assert message.body == raw and message.sys_flag == compression_bits


@pytest.mark.parametrize("kind", [4, 5, 6, 7])
def test_unknown_compressions_are_refused(kind: int) -> None:
    """The record is sound, so it is decoded and the pull goes on; its body is refused, and the consumer decides
    (it fails the message, and the queue moves on). Java's ``CompressionType.findByValue`` knows 0 to 3."""
    stored = b"\x04\x22\x4d\x18"
    (decoded,) = decode_messages(hand_built_record(body=stored, sys_flag=0x1 | kind << 8))
    assert decoded.body_error == f"message 0 at offset 0: unknown compression type {kind}"
    assert decoded.body == stored and decoded.sys_flag & 0x1


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (hand_built_record(magic=0x12345678), "message 0 at offset 0: bad magic code 0x12345678"),
        (hand_built_record(topic=b"\xff\xfe"), "TOPIC is not valid UTF-8"),
        (hand_built_record(properties=b"K\x01\xc3"), "PROPERTIES is not valid UTF-8"),
        (hand_built_record(topic=b"t" * 200), "TOPIC length -56 is negative"),
        (b"\x00\x00\x00\x10" + bytes(12), "TOTALSIZE 16 is below the 91-byte minimum"),
        (b"\x00\x00", "2 bytes cannot hold TOTALSIZE"),
    ],
)
def test_damaged_records_say_which_and_where(record: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        decode_messages(record)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"not zlib", "body is not valid zlib data"),
        (zlib.compress(b"x" * 5000)[:-8], "the compressed stream is incomplete"),
        (zlib.compress(bytes(64 * 1024 * 1024)), f"body inflates past {MAX_BODY_SIZE} bytes"),
    ],
    ids=["not zlib", "cut short", "64 MiB bomb"],
)
def test_a_body_that_cannot_be_inflated_is_named_and_the_rest_still_decodes(body: bytes, reason: str) -> None:
    """A bomb (a stored body that inflates to gigabytes) inflates only to the cap (probe finding 6)."""
    good = hand_built_record(body=zlib.compress(b"fine"), sys_flag=0x1)
    bad, after = decode_messages(hand_built_record(body=body, sys_flag=0x1) + good)
    assert reason in bad.body_error and bad.body == body
    assert after.body == b"fine" and not after.body_error


def test_the_inflation_cap_is_exact() -> None:
    raw = b"y" * 1000
    record = hand_built_record(body=zlib.compress(raw), sys_flag=0x1)
    assert decode_messages(record, max_body_size=1000)[0].body == raw
    assert "inflates past 999 bytes" in decode_messages(record, max_body_size=999)[0].body_error


def test_a_port_outside_0_to_65535_is_refused_as_java_refuses_it() -> None:
    record = hand_built_record()
    port_offset = record.index(struct.pack(">i", 10911))
    for port in (70000, -1):
        damaged = record[:port_offset] + struct.pack(">i", port) + record[port_offset + 4 :]
        with pytest.raises(ProtocolError, match=f"STOREHOST port {port} is out of range"):
            decode_messages(damaged)


def test_v2_topic_length_takes_two_bytes() -> None:
    (message,) = decode_messages(hand_built_record(topic=b"t" * 200, magic=MAGIC_V2))
    assert message.topic == "t" * 200


def test_totalsize_must_match_the_fields() -> None:
    good = hand_built_record()
    longer = struct.pack(">i", len(good) + 3) + good[4:] + b"\x00\x00\x00"
    with pytest.raises(ProtocolError, match=f"TOTALSIZE {len(good) + 3} but the fields end after {len(good)}"):
        decode_messages(longer)
    shorter = struct.pack(">i", len(good) - 1) + good[4:]
    with pytest.raises(ProtocolError, match="PROPERTIES needs"):
        decode_messages(shorter)


def test_the_second_record_is_named_by_index_and_offset() -> None:
    good = hand_built_record()
    with pytest.raises(ProtocolError, match=f"message 1 at offset {len(good)}: bad magic"):
        decode_messages(good + hand_built_record(magic=7))


def test_every_truncation_is_a_protocol_error() -> None:
    first, second = hand_built_record(), hand_built_record(body=zlib.compress(b"abc"), sys_flag=0x301)
    buffer = first + second
    for end in range(1, len(buffer)):
        if end == len(first):
            assert len(decode_messages(buffer[:end])) == 1
            continue
        with pytest.raises(ProtocolError, match="message [01] at offset"):
            decode_messages(buffer[:end])
    assert [message.body for message in decode_messages(buffer)] == [b"Hello", b"abc"]
    assert decode_messages(b"") == []


@settings(max_examples=200)
@given(st.binary(max_size=300))
def test_random_bytes_decode_or_raise_protocol_error(garbage: bytes) -> None:
    try:
        decode_messages(garbage)
    except ProtocolError:
        pass


@settings(max_examples=200)
@given(st.integers(0, len(hand_built_record()) - 1), st.integers(0, 255))
def test_corrupted_records_decode_or_raise_protocol_error(index: int, value: int) -> None:
    record = bytearray(hand_built_record(body=zlib.compress(b"payload"), sys_flag=0x301))
    record[index] = value
    try:
        for message in decode_messages(bytes(record)):
            assert message.msg_id  # the derived IDs never raise on a decoded record
            assert message.offset_msg_id
    except ProtocolError:
        pass


# ---------------------------------------------------------------------------------------------- properties


def test_properties_are_parsed_like_java() -> None:
    # Java's string2messageProperties: skip segments without \x01 or with an empty name or value; the first \x01
    # splits; a trailing segment without \x02 still counts; later names win.
    text = "a\x01b\x02\x01c\x02d\x02e\x01\x02f\x01g\x01h\x02a\x01B\x02tail\x01end"
    assert decode_properties(text) == {"a": "B", "f": "g\x01h", "tail": "end"}
    assert decode_properties("") == {}


def test_properties_encoding_refuses_what_would_be_lost() -> None:
    assert encode_properties({"TAGS": "t1", "KEYS": "k1 k2"}) == "TAGS\x01t1\x02KEYS\x01k1 k2\x02"
    for bad in ({"": "v"}, {"k": ""}, {"k\x01": "v"}, {"k": "v\x02"}, {"k\x02": "v"}):
        with pytest.raises(ValueError):
            encode_properties(bad)


property_names = st.text(min_size=1, max_size=10).filter(lambda name: "\x01" not in name and "\x02" not in name)
property_values = st.text(min_size=1, max_size=20).filter(lambda value: "\x02" not in value)


@settings(max_examples=200)
@given(st.dictionaries(property_names, property_values, max_size=6))
def test_properties_round_trip(properties: dict[str, str]) -> None:
    assert decode_properties(encode_properties(properties)) == properties


# ---------------------------------------------------------------------------------------------- round trips

hosts = st.one_of(
    st.ip_addresses(v=4).map(str),
    st.ip_addresses(v=6).map(lambda address: f"[{address}]"),
).flatmap(lambda host: st.integers(0, 65535).map(lambda port: f"{host}:{port}"))
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
messages = st.builds(
    StoredMessage,
    topic=st.text(max_size=80),  # up to 320 UTF-8 bytes: both record versions
    queue_id=int32,
    queue_offset=int64,
    commit_log_offset=int64,
    body=st.binary(max_size=200),
    properties=st.dictionaries(property_names, property_values, max_size=4),
    sys_flag=st.integers(0, 2**31 - 1),
    flag=int32,
    born_timestamp=int64,
    born_host=hosts,
    store_timestamp=int64,
    store_host=hosts,
    reconsume_times=int32,
    prepared_transaction_offset=int64,
)


compressions = st.sampled_from([None, *Compression])


def expected_after(message: StoredMessage, compress: Compression | None) -> StoredMessage:
    """What decoding an encoded message gives: host flags from the hosts, the compressed bit cleared (and the
    kind of compression set), the CRC of the stored body."""
    sys_flag = message.sys_flag & ~0x31
    sys_flag |= 0x10 if message.born_host.startswith("[") else 0
    sys_flag |= 0x20 if message.store_host.startswith("[") else 0
    stored = message.body
    if compress is not None:
        sys_flag = sys_flag & ~0x700 | compress.value << 8
        stored = compress_body(message.body, compress)
    return replace(message, sys_flag=sys_flag, body_crc=zlib.crc32(stored) & 0x7FFFFFFF)


@settings(max_examples=200)
@given(st.lists(st.tuples(messages, compressions, st.sampled_from([None, 2])), min_size=1, max_size=3))
def test_round_trip(batch: list[tuple[StoredMessage, Compression | None, int | None]]) -> None:
    buffer = b"".join(encode_stored_message(message, compress, version) for message, compress, version in batch)
    decoded = decode_messages(buffer)
    assert decoded == [expected_after(message, compress) for message, compress, _ in batch]
    for message, compress, version in batch:
        magic = struct.unpack_from(">i", encode_stored_message(message, compress, version), 4)[0]
        assert magic == (MAGIC_V2 if len(message.topic.encode()) > 127 or version == 2 else MAGIC_V1)
    for record, (message, _, _) in zip(decoded, batch, strict=True):
        assert record.msg_id == message.properties.get("UNIQ_KEY", record.offset_msg_id)


def test_unicode_properties_and_topic_round_trip() -> None:
    message = StoredMessage("主题-\U0001f600", 1, 2, 3, b"b", {"KEYS": "ключ 键", "UNIQ_KEY": "ID"})
    assert decode_messages(encode_stored_message(message)) == [expected_after(message, None)]


def test_encoding_refuses_what_does_not_fit() -> None:
    with pytest.raises(ValueError, match="cannot be stored in a V1 record"):
        encode_stored_message(StoredMessage("t" * 128, 0, 0, 0, b""), version=1)
    with pytest.raises(ValueError, match="exceed the 32767-byte limit"):
        encode_stored_message(StoredMessage("t", 0, 0, 0, b"", {"k": "v" * 40000}))
    with pytest.raises(ValueError, match="does not fit the stored format"):
        encode_stored_message(StoredMessage("t", 2**31, 0, 0, b""))
    with pytest.raises(ValueError, match="is not ip:port"):
        encode_stored_message(StoredMessage("t", 0, 0, 0, b"", born_host="127.0.0.1:70000"))


# ---------------------------------------------------------------------------------------------- the plain-record path


def careful_decode(buffer: bytes) -> list[StoredMessage]:
    """Every record read field by field (the path that names what is wrong), never the one-struct path."""
    decoded: list[StoredMessage] = []
    with memoryview(buffer) as view:
        start = 0
        while start < len(buffer):
            record, start = message_module._decode_record(view, start, len(decoded), MAX_BODY_SIZE)
            decoded.append(record)
    return decoded


def outcome(decode: Callable[[bytes], list[StoredMessage]], buffer: bytes) -> list[StoredMessage] | str:
    try:
        return decode(buffer)
    except ProtocolError as error:
        return str(error)


@settings(max_examples=300)
@given(
    st.lists(st.tuples(messages, compressions), min_size=1, max_size=3),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=3),
    st.integers(0, 10_000),
)
def test_the_plain_record_path_decodes_and_refuses_as_the_careful_one(
    batch: list[tuple[StoredMessage, Compression | None]], flips: list[tuple[int, int]], cut: int
) -> None:
    """Plain records (IPv4, not compressed) take one struct call; whatever the bytes, sound, damaged or cut
    short, the answer (messages, or the error naming the record) is the field-by-field reader's."""
    buffer = bytearray(b"".join(encode_stored_message(m, compress) for m, compress in batch))
    for index, value in flips:
        buffer[index % len(buffer)] = value
    damaged = bytes(buffer[: len(buffer) - cut % 40])
    assert outcome(decode_messages, damaged) == outcome(careful_decode, damaged)
