"""Message bodies as a 5.3.3 Java producer can send them: compressed with zlib, LZ4 or ZSTD, and batches a BatchCQ
broker stores as one record (INNER_BATCH + NEED_UNWRAP), split as Java's consumer splits them."""

from __future__ import annotations

import functools
import struct
import tracemalloc
import zlib
from collections.abc import Callable

import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from rocket_rebalance.remoting import ProtocolError
from rocket_rebalance.remoting.message import (
    MAX_BODY_SIZE,
    SYSFLAG_INNER_BATCH,
    SYSFLAG_NEED_UNWRAP,
    Compression,
    StoredMessage,
    compress_body,
    decode_messages,
    encode_message_batch,
    encode_stored_message,
    unwrap_inner_batches,
)
from tests.remoting.test_message import hand_built_record, property_names, property_values

INNER = SYSFLAG_INNER_BATCH | SYSFLAG_NEED_UNWRAP
LZ4_SKIPPABLE = struct.pack("<II", 0x184D2A5A, 3) + b"abc"
ZSTD_SKIPPABLE = struct.pack("<II", 0x184D2A53, 2) + b"zz"


def stored(body: bytes, compression: Compression) -> bytes:
    """A record whose stored body is ``body``, flagged as compressed with ``compression``."""
    return hand_built_record(body=body, sys_flag=compression.sys_flag)


def decoded_body(body: bytes, compression: Compression, max_body_size: int = MAX_BODY_SIZE) -> StoredMessage:
    (message,) = decode_messages(stored(body, compression), max_body_size)
    return message


# ------------------------------------------------------------------------------------------------ compression


@pytest.mark.parametrize("compression", list(Compression))
def test_each_compression_is_inflated_and_the_compressed_bit_cleared(compression: Compression) -> None:
    raw = b"order 42, customer alice, 12.50 EUR\n" * 230  # 8 KiB of text
    message = decoded_body(compress_body(raw, compression), compression)
    assert message.body == raw and not message.body_error
    assert message.sys_flag == compression.value << 8  # the kind stays, as Java leaves it


def test_frames_are_what_the_java_compressors_write() -> None:
    """lz4-java: FLG 0x60 (version 1, independent blocks, no checksums, no size), BD 0x70 (4 MiB blocks), an end
    mark; zstd-jni's stream: no content size, no checksum, window log 21 at level 5, an empty last block."""
    lz4_frame = compress_body(b"hello " * 20, Compression.LZ4)
    assert lz4_frame[:7] == b"\x04\x22\x4d\x18\x60\x70\x73" and lz4_frame[-4:] == bytes(4)
    zstd_frame = compress_body(b"hello " * 20, Compression.ZSTD)
    assert zstd_frame[:6] == b"\x28\xb5\x2f\xfd\x00\x58" and zstd_frame[-3:] == b"\x01\x00\x00"


@pytest.mark.parametrize(
    ("compression", "body"),
    [
        (Compression.LZ4, lz4.frame.compress(b"one ") + lz4.frame.compress(b"two")),
        (Compression.LZ4, LZ4_SKIPPABLE + compress_body(b"one two", Compression.LZ4)),
        (Compression.ZSTD, zstandard.compress(b"one ") + zstandard.compress(b"two")),
        (Compression.ZSTD, ZSTD_SKIPPABLE + compress_body(b"one two", Compression.ZSTD) + ZSTD_SKIPPABLE),
    ],
    ids=["lz4 frames", "lz4 skippable", "zstd frames", "zstd skippable"],
)
def test_frames_back_to_back_and_skippable_frames_are_read_as_java_reads_them(
    compression: Compression, body: bytes
) -> None:
    """lz4-java's LZ4FrameInputStream and zstd-jni's ZstdInputStream read on after a frame's end and skip
    skippable frames."""
    message = decoded_body(body, compression)
    assert message.body == b"one two" and not message.body_error


def lz4_with_flg(flg: int) -> bytes:
    """A frame whose FLG byte is ``flg`` (its header checksum recomputed: xxh32 of FLG and BD, second byte)."""
    frame = bytearray(lz4.frame.compress(b"data" * 100, block_linked=True, store_size=False))
    frame[4] = flg
    descriptor = bytes(frame[4:6])
    frame[6] = (lz4_xxh32(descriptor) >> 8) & 0xFF
    return bytes(frame)


def lz4_xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 of fewer than 16 bytes (the frame descriptor's checksum), as the LZ4 frame format defines it."""
    p1, p2, p3, p4, p5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    h = (seed + p5 + len(data)) & mask
    i = 0
    while i + 4 <= len(data):
        h = (rotl((h + int.from_bytes(data[i : i + 4], "little") * p3) & mask, 17) * p4) & mask
        i += 4
    for byte in data[i:]:
        h = (rotl((h + byte * p5) & mask, 11) * p1) & mask
    h ^= h >> 15
    h = (h * p2) & mask
    h ^= h >> 13
    h = (h * p3) & mask
    return h ^ (h >> 16)


def test_the_header_checksum_helper_is_lz4s() -> None:
    frame = compress_body(b"x", Compression.LZ4)
    assert (lz4_xxh32(frame[4:6]) >> 8) & 0xFF == frame[6]


@pytest.mark.parametrize(("flg", "readable"), [(0x60, True), (0x40, False), (0x61, False)])
def test_lz4_frames_lz4_java_refuses_are_refused(flg: int, readable: bool) -> None:
    """Dependent blocks (FLG 0x40) and a dictionary ID (bit 0): lz4-java throws, so Java's consumer cannot read
    the body; liblz4 could read the first kind, and would decode what Java never delivers."""
    message = decoded_body(lz4_with_flg(flg), Compression.LZ4)
    if readable:
        assert message.body == b"data" * 100 and not message.body_error
    else:
        assert "lz4-java cannot read" in message.body_error


def cut(body: bytes) -> bytes:
    return body[:-3]


@pytest.mark.parametrize(
    ("compression", "damage", "reason"),
    [
        (Compression.LZ4, cut, "a frame is incomplete"),
        (Compression.LZ4, lambda body: body + b"junk", "not valid LZ4 frame data"),
        (Compression.LZ4, lambda body: b"not lz4 at all", "not valid LZ4 frame data"),
        (Compression.ZSTD, cut, "a frame is incomplete"),
        (Compression.ZSTD, lambda body: body + b"junk", "not valid zstd data"),
        (Compression.ZSTD, lambda body: b"not zstd at all", "not valid zstd data"),
        (Compression.ZLIB, cut, "the compressed stream is incomplete"),
        (Compression.ZLIB, lambda body: b"not zlib at all", "not valid zlib data"),
    ],
    ids=["lz4 cut", "lz4 junk after", "lz4 garbage", "zstd cut", "zstd junk after", "zstd garbage", "zlib cut", "zlib"],
)
def test_damaged_bodies_are_named_and_the_rest_still_decodes(
    compression: Compression, damage: Callable[[bytes], bytes], reason: str
) -> None:
    """Java's decoder would throw and lose this record and every later one of the answer; here the record keeps
    its stored body with the reason, and the next record decodes."""
    body = damage(compress_body(b"payload " * 500, compression))
    good = stored(compress_body(b"fine", compression), compression)
    bad, after = decode_messages(stored(body, compression) + good)
    assert reason in bad.body_error and bad.body == body and bad.sys_flag & 0x1
    assert after.body == b"fine" and not after.body_error


@functools.cache
def bomb(compression: Compression) -> bytes:
    """64 MiB of zeros: about 64 kB stored with zlib, 250 kB with LZ4, 2 kB with zstd."""
    return compress_body(bytes(64 << 20), compression)


@pytest.mark.parametrize("compression", list(Compression))
def test_bombs_inflate_only_to_the_cap(compression: Compression) -> None:
    """A small body that inflates to far more than the cap: decoding stops there, holding little more than the
    cap meanwhile (zstd: one step of 128 stored bytes past it, at most about 4 MiB)."""
    body = bomb(compression)
    tracemalloc.start()
    try:
        message = decoded_body(body, compression)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert f"body inflates past {MAX_BODY_SIZE} bytes" in message.body_error and message.body == body
    assert peak < MAX_BODY_SIZE + (5 << 20) + 3 * len(body), peak


@pytest.mark.parametrize("compression", list(Compression))
def test_the_cap_is_exact(compression: Compression) -> None:
    raw = b"y" * 1000
    body = compress_body(raw, compression)
    assert decoded_body(body, compression, max_body_size=1000).body == raw
    assert "inflates past 999 bytes" in decoded_body(body, compression, max_body_size=999).body_error


@settings(max_examples=150)
@given(st.binary(max_size=3000), st.sampled_from(list(Compression)), st.data())
def test_any_body_round_trips_and_any_cut_is_named(body: bytes, compression: Compression, data: st.DataObject) -> None:
    """Every body comes back from each compression; every non-empty stored body cut short is refused by name (a
    strict prefix lacks the frame's end, or zlib's checksum)."""
    compressed = compress_body(body, compression)
    assert decoded_body(compressed, compression).body == body
    keep = data.draw(st.integers(1, len(compressed) - 1))
    message = decoded_body(compressed[:keep], compression)
    assert message.body_error and message.body == compressed[:keep]


@settings(max_examples=200)
@given(
    st.binary(min_size=1, max_size=2000),
    st.sampled_from(list(Compression)),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4),
)
def test_damaged_compressed_bodies_never_raise(
    body: bytes, compression: Compression, flips: list[tuple[int, int]]
) -> None:
    """Whatever the stored bytes, the record decodes: a body, or the reason it has none."""
    damaged = bytearray(compress_body(body, compression))
    for index, value in flips:
        damaged[index % len(damaged)] = value
    message = decoded_body(bytes(damaged), compression, max_body_size=10_000)
    assert message.body_error or len(message.body) <= 10_000


# ------------------------------------------------------------------------------------------------ inner batches


def batch_record(
    inner: list[tuple[int, bytes, dict[str, str]]],
    compress: Compression | None = None,
    sys_flag: int = INNER,
    queue_offset: int = 100,
) -> bytes:
    outer = StoredMessage(
        topic="TopicBatch",
        queue_id=2,
        queue_offset=queue_offset,
        commit_log_offset=5000,
        body=encode_message_batch(inner),
        properties={"UNIQ_KEY": "BATCH", "INNER_NUM": str(len(inner)), "INNER_BASE": str(queue_offset)},
        sys_flag=sys_flag,
        born_timestamp=111,
        born_host="10.0.0.7:4000",
        store_timestamp=222,
        reconsume_times=3,
        prepared_transaction_offset=9,
    )
    return encode_stored_message(outer, compress)


def expected_inner(
    inner: list[tuple[int, bytes, dict[str, str]]], compress: Compression | None = None, queue_offset: int = 100
) -> list[StoredMessage]:
    sys_flag = INNER if compress is None else INNER | compress.value << 8
    return [
        StoredMessage(
            topic="TopicBatch",
            queue_id=2,
            queue_offset=queue_offset + index,
            commit_log_offset=5000,
            body=body,
            properties=properties,
            sys_flag=sys_flag,
            flag=flag,
            born_timestamp=111,
            born_host="10.0.0.7:4000",
            store_timestamp=222,
        )
        for index, (flag, body, properties) in enumerate(inner)
    ]


def test_an_inner_batch_is_split_field_by_field_as_java_splits_it() -> None:
    inner = [(0, b"first", {"UNIQ_KEY": "A", "TAGS": "TagA"}), (7, b"", {"UNIQ_KEY": "B"}), (0, b"third", {})]
    (record,) = decode_messages(batch_record(inner))
    assert record.body == encode_message_batch(inner)  # decoding alone keeps the batch whole
    messages = unwrap_inner_batches([record])
    assert messages == expected_inner(inner)
    assert [m.msg_id for m in messages[:2]] == ["A", "B"] and messages[0].tags == "TagA"
    assert messages[2].msg_id == record.offset_msg_id  # no UNIQ_KEY: Java's would be null


@pytest.mark.parametrize("compression", list(Compression))
def test_a_compressed_inner_batch_is_inflated_then_split(compression: Compression) -> None:
    """5.3.3's producer never compresses a batch, but its consumer inflates any record before it splits it."""
    inner = [(0, b"x" * 3000, {"UNIQ_KEY": str(index)}) for index in range(5)]
    messages = unwrap_inner_batches(decode_messages(batch_record(inner, compression)))
    assert messages == expected_inner(inner, compression)


@pytest.mark.parametrize("sys_flag", [SYSFLAG_INNER_BATCH, SYSFLAG_NEED_UNWRAP, 0])
def test_only_records_with_both_flags_are_split(sys_flag: int) -> None:
    inner = [(0, b"a", {}), (0, b"b", {})]
    decoded = decode_messages(batch_record(inner, sys_flag=sys_flag))
    assert unwrap_inner_batches(decoded) == decoded


def test_records_around_an_inner_batch_keep_their_place() -> None:
    plain = hand_built_record()
    inner = [(0, b"a", {"UNIQ_KEY": "A"}), (0, b"b", {"UNIQ_KEY": "B"})]
    messages = unwrap_inner_batches(decode_messages(plain + batch_record(inner) + plain))
    assert [m.body for m in messages] == [b"Hello", b"a", b"b", b"Hello"]
    assert [m.queue_offset for m in messages] == [42, 100, 101, 42]


def test_an_empty_batch_body_yields_no_message() -> None:
    """Java's ``decodeMessages`` of an empty buffer: no message; the pull's next offset still moves past it."""
    assert unwrap_inner_batches(decode_messages(batch_record([]))) == []


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda body: body[:-1], "does not fit the batch"),
        (lambda body: body + b"\x00\x00", "cut short in its fixed fields"),
        (lambda body: body[:16] + struct.pack(">i", -5) + body[20:], "body length -5 does not fit"),
        (lambda body: body[:-3] + b"\xff\xfe\xfd", "properties are not valid UTF-8"),
    ],
    ids=["cut", "trailing bytes", "negative body length", "properties not UTF-8"],
)
def test_a_damaged_inner_batch_stays_whole_with_the_reason(damage: Callable[[bytes], bytes], reason: str) -> None:
    """Java gives up splitting the whole answer and delivers its records whole; here the damaged record alone
    keeps its body, with the reason, so the consumer fails it and the rest is delivered."""
    body = damage(encode_message_batch([(0, b"a", {"UNIQ_KEY": "A"}), (0, b"b", {"K": "vvv"})]))
    outer = StoredMessage("T", 0, 10, 0, body, sys_flag=INNER)
    good = [(0, b"fine", {})]
    messages = unwrap_inner_batches(decode_messages(encode_stored_message(outer) + batch_record(good)))
    assert messages[0].body == body and "inner batch at queue offset 10: message" in messages[0].body_error
    assert reason in messages[0].body_error
    assert messages[1:] == expected_inner(good)


def test_a_batch_whose_body_could_not_be_inflated_is_left_as_it_is() -> None:
    outer = hand_built_record(body=b"not zlib", sys_flag=INNER | Compression.ZLIB.sys_flag)
    decoded = decode_messages(outer)
    assert decoded[0].body_error and unwrap_inner_batches(decoded) == decoded


inner_messages = st.lists(
    st.tuples(
        st.integers(-(2**31), 2**31 - 1),
        st.binary(max_size=300),
        st.dictionaries(property_names, property_values, max_size=3),
    ),
    max_size=6,
)


@settings(max_examples=150)
@given(st.lists(st.tuples(inner_messages, st.sampled_from([None, *Compression])), min_size=1, max_size=3))
def test_inner_batches_round_trip(
    batches: list[tuple[list[tuple[int, bytes, dict[str, str]]], Compression | None]],
) -> None:
    """Batches back to back, each numbered from its base offset, come back message by message."""
    buffer = b""
    expected: list[StoredMessage] = []
    base = 0
    for inner, compression in batches:
        buffer += batch_record(inner, compression, queue_offset=base)
        expected += expected_inner(inner, compression, base)
        base += max(1, len(inner))
    assert unwrap_inner_batches(decode_messages(buffer)) == expected


@settings(max_examples=300)
@given(inner_messages, st.lists(st.tuples(st.integers(0, 5000), st.integers(0, 255)), max_size=4), st.integers(0, 60))
def test_damaged_batch_bodies_split_or_are_named(
    inner: list[tuple[int, bytes, dict[str, str]]], flips: list[tuple[int, int]], cut_by: int
) -> None:
    """Whatever a batch body holds, splitting never raises: messages, or the record whole with the reason."""
    body = bytearray(encode_message_batch(inner))
    for index, value in flips:
        if body:
            body[index % len(body)] = value
    damaged = bytes(body[: max(0, len(body) - cut_by)])
    outer = StoredMessage("T", 0, 10, 0, damaged, sys_flag=INNER)
    try:
        messages = unwrap_inner_batches(decode_messages(encode_stored_message(outer)))
    except ProtocolError as error:  # the outer record is sound: never
        pytest.fail(f"the record itself was refused: {error}")
    if len(messages) == 1 and messages[0].body_error:
        assert messages[0].body == damaged
    else:
        assert [m.queue_offset for m in messages] == list(range(10, 10 + len(messages)))


def test_batch_encoding_refuses_what_does_not_fit() -> None:
    with pytest.raises(ValueError, match="exceed the 32767-byte limit"):
        encode_message_batch([(0, b"", {"k": "v" * 40000})])
    with pytest.raises(ValueError, match="does not fit"):
        encode_message_batch([(2**31, b"", {})])


def test_zlib_bodies_from_producers_before_compression_kinds_are_still_zlib() -> None:
    (message,) = decode_messages(hand_built_record(body=zlib.compress(b"old"), sys_flag=0x1))
    assert message.body == b"old"
