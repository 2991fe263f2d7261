"""The compiled decoder of pull answers against the pure codec: for any bytes, the same messages or the same error.

The compiled decoder reads only plain records (V1, IPv4 hosts, sound, neither compressed nor an inner batch) and
says None for a body with anything else; :func:`pulled_messages` then reads it the pure way. So the properties here
are: on plain bodies it answers, and its messages are the pure ones field for field; on any other bytes (damaged,
cut short, random, mixed with other kinds of record) it answers the pure path's messages or gives way, and
:func:`pulled_messages` gives the pure path's messages or its error. Where the package was built without a C
compiler these tests fail, unless ``ROCKET_REBALANCE_PURE_PYTHON=1`` says a pure build is meant
(``tests/test_wheel.py`` runs them so on a wheel built without one).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocket_rebalance.model import MessageQueue
from rocket_rebalance.remoting import ProtocolError
from rocket_rebalance.remoting.message import Compression, StoredMessage, encode_message_batch, encode_stored_message
from rocket_rebalance.runtime.transport import Message, pulled
from rocket_rebalance.runtime.transport.pulled import PURE_PYTHON_ENV, PURE_REQUESTED, pulled_messages, pure_messages

MQ = MessageQueue("TopicTest", "broker-a", 3)
PURE = PURE_REQUESTED

# Java's separators in names and values too: the decoders must split them alike, skipped segments included.
texts = st.text(alphabet=st.sampled_from(["a", "B", "\x01", "\x02", "é", "键", "\U0001f600", " ", "="]), max_size=12)
names = st.one_of(st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "RETRY_TOPIC"]), texts)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
ipv4_hosts = st.tuples(st.ip_addresses(v=4), st.integers(0, 65535)).map(lambda host: f"{host[0]}:{host[1]}")
plain_flags = st.integers(0, 2**31 - 1).map(lambda flag: flag & ~0x31 & ~(0xC0 if flag & 0xC0 == 0xC0 else 0))


def raw_properties(pairs: list[tuple[str, str]], tail: str) -> str:
    """Properties as a producer could store them, separators and empty parts included (not what encode_properties
    allows): the decoders must agree on what Java's parser keeps."""
    return "".join(f"{name}\x01{value}\x02" for name, value in pairs) + tail


plain_messages = st.builds(
    StoredMessage,
    topic=st.text(max_size=40).filter(lambda topic: len(topic.encode()) <= 127),
    queue_id=int32,
    queue_offset=int64,
    commit_log_offset=int64,
    body=st.binary(max_size=200),
    properties=st.dictionaries(
        names.filter(lambda n: n and "\x01" not in n and "\x02" not in n),
        texts.filter(lambda v: v and "\x02" not in v),
        max_size=5,
    ),
    sys_flag=plain_flags,
    flag=int32,
    born_timestamp=int64,
    born_host=ipv4_hosts,
    store_timestamp=int64,
    store_host=ipv4_hosts,
    reconsume_times=int32,
    prepared_transaction_offset=int64,
)


def outcome(decode: Callable[[MessageQueue, bytes], tuple[Message, ...]], body: bytes) -> tuple[Message, ...] | str:
    try:
        return decode(MQ, body)
    except ProtocolError as error:
        return f"ProtocolError: {error}"


def test_the_compiled_decoder_is_built_unless_a_pure_build_is_meant() -> None:
    if PURE:
        assert pulled.compiled is None
        return
    assert pulled.compiled is not None, (
        "the compiled decoder was not built (no C compiler or Python headers when the package was installed?): "
        f"install them and reinstall, or set {PURE_PYTHON_ENV}=1 to test the pure path alone"
    )


def compiled(body: bytes) -> tuple[Message, ...] | None:
    if pulled.compiled is None:
        pytest.fail("no compiled decoder" if not PURE else "a pure build: the compiled decoder is not there to test")
    return pulled.compiled.plain_messages(body, MQ, Message)


needs_compiled = pytest.mark.skipif(PURE, reason=f"{PURE_PYTHON_ENV}=1: the pure build is tested alone")


@needs_compiled
@settings(max_examples=300)
@given(st.lists(plain_messages, max_size=4))
def test_plain_bodies_are_read_compiled_as_the_pure_codec_reads_them(messages: list[StoredMessage]) -> None:
    body = b"".join(encode_stored_message(message) for message in messages)
    fast = compiled(body)
    assert fast is not None, "a plain body must be read by the compiled decoder"
    assert fast == pure_messages(MQ, body)
    assert [repr(m) for m in fast] == [repr(m) for m in pure_messages(MQ, body)]
    assert [type(m.properties) for m in fast] == [dict] * len(fast)


def with_raw_properties(message: StoredMessage, text: str) -> bytes:
    """``message``'s record with ``text`` as its stored properties, as they are (``encode_properties`` would refuse
    stray separators and empty parts; a producer of another make may write them)."""
    record = encode_stored_message(replace(message, properties={}))  # ends with PROPERTIESLEN 0
    raw = text.encode()
    record = record[:-2] + struct.pack(">h", len(raw)) + raw
    return struct.pack(">i", len(record)) + record[4:]


@needs_compiled
@settings(max_examples=300)
@given(st.lists(st.tuples(plain_messages, st.lists(st.tuples(texts, texts), max_size=4), texts), max_size=3))
def test_properties_with_stray_separators_and_empty_parts_split_as_java_splits_them(
    records: list[tuple[StoredMessage, list[tuple[str, str]], str]],
) -> None:
    """What Java's parser skips (a segment without a separator, an empty name or value) or overwrites (a name
    twice), the compiled decoder skips and overwrites alike."""
    body = b"".join(with_raw_properties(message, raw_properties(pairs, tail)) for message, pairs, tail in records)
    fast = compiled(body)
    assert fast is not None
    assert fast == pure_messages(MQ, body)


def other_kinds() -> st.SearchStrategy[bytes]:
    """Records the compiled decoder leaves to the pure path: compressed, IPv6 hosts, V2, inner batches."""
    v6 = st.builds(
        StoredMessage,
        topic=st.just("t"),
        queue_id=st.just(3),
        queue_offset=int64,
        commit_log_offset=int64,
        body=st.binary(max_size=40),
        born_host=st.just("[::1]:9"),
        store_host=st.just("[fe80::1]:10911"),
    ).map(encode_stored_message)
    compressed = st.tuples(plain_messages, st.sampled_from(list(Compression))).map(
        lambda pair: encode_stored_message(pair[0], pair[1])
    )
    v2 = plain_messages.map(lambda message: encode_stored_message(message, version=2))
    batch = st.lists(st.tuples(int32, st.binary(max_size=20), st.just({"UNIQ_KEY": "K"})), min_size=1, max_size=3).map(
        lambda inner: encode_stored_message(StoredMessage("t", 3, 40, 9, encode_message_batch(inner), sys_flag=0xC0))
    )
    return st.one_of(v6, compressed, v2, batch)


@settings(max_examples=400)
@given(
    st.lists(st.one_of(plain_messages.map(encode_stored_message), other_kinds()), min_size=1, max_size=4),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=3),
    st.integers(0, 10_000),
    st.binary(max_size=30),
)
def test_any_body_damaged_or_cut_short_reads_as_the_pure_codec_reads_it(
    records: list[bytes], flips: list[tuple[int, int]], cut: int, tail: bytes
) -> None:
    """Whatever the bytes (sound, other kinds of record, damaged, cut short, garbage after), the messages or the
    error of the pure path; and the compiled decoder, where it answers, answers the pure messages."""
    buffer = bytearray(b"".join(records))
    for index, value in flips:
        buffer[index % len(buffer)] = value
    body = bytes(buffer[: len(buffer) - cut % 60]) + (tail if cut % 3 == 0 else b"")
    expected = outcome(pure_messages, body)
    assert outcome(pulled_messages, body) == expected
    if not PURE:
        fast = compiled(body)
        assert fast is None or fast == expected


@settings(max_examples=200)
@given(st.binary(max_size=400))
def test_random_bytes_read_as_the_pure_codec_reads_them(body: bytes) -> None:
    assert outcome(pulled_messages, body) == outcome(pure_messages, body)


@needs_compiled
def test_the_compiled_decoder_gives_way_on_every_other_kind_of_record() -> None:
    plain = encode_stored_message(StoredMessage("t", 3, 1, 2, b"plain", {"UNIQ_KEY": "A"}))
    others = [
        encode_stored_message(StoredMessage("t", 3, 1, 2, b"zipped"), Compression.ZLIB),
        encode_stored_message(StoredMessage("t", 3, 1, 2, b"v6", born_host="[::1]:1")),
        encode_stored_message(StoredMessage("t", 3, 1, 2, b"v2"), version=2),
        encode_stored_message(StoredMessage("t", 3, 1, 2, encode_message_batch([(0, b"x", {})]), sys_flag=0xC0)),
    ]
    assert compiled(plain) is not None
    for other in others:
        assert compiled(plain + other) is None
        assert pulled_messages(MQ, plain + other) == pure_messages(MQ, plain + other)
    assert compiled(b"") == ()


@needs_compiled
def test_the_compiled_decoder_refuses_arguments_of_the_wrong_type() -> None:
    assert pulled.compiled is not None
    with pytest.raises(TypeError, match="plain_messages"):
        pulled.compiled.plain_messages(bytearray(b""), MQ, Message)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="plain_messages"):
        pulled.compiled.plain_messages(b"", MQ)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="StoredMessage is not a slotted Message"):
        pulled.compiled.plain_messages(PLAIN, MQ, StoredMessage)  # type: ignore[arg-type]


PLAIN = encode_stored_message(
    StoredMessage("t", 3, 7, 9, b"body", {"UNIQ_KEY": "A"}, born_host="10.0.0.1:5", store_host="10.0.0.2:10911")
)


@pytest.mark.parametrize(
    ("offset", "value"),
    [
        (0, 90),  # TOTALSIZE below the smallest record
        (0, len(PLAIN) + 1),  # TOTALSIZE past the body
        (0, -1),
        (4, -626843477),  # MAGIC V2: the topic length is then two bytes
        (4, 0),
        (36, 0x10),  # SYSFLAG: an IPv6 born host in an IPv4-sized record
        (52, -1),  # BORNHOST port out of range
        (52, 65536),
        (52, 65535),  # the largest port: sound
        (68, 65536),  # STOREHOST port out of range
        (68, 2**31 - 1),
        (84, -1),  # BODYLEN negative
        (84, 5),  # BODYLEN past its place
        (84, 2**31 - 1),
    ],
)
def test_each_field_at_its_bounds_reads_as_the_pure_codec_reads_it(offset: int, value: int) -> None:
    body = PLAIN[:offset] + struct.pack(">i", value) + PLAIN[offset + 4 :]
    expected = outcome(pure_messages, body)
    assert outcome(pulled_messages, body) == expected
    if not PURE:
        fast = compiled(body)
        assert fast is None if isinstance(expected, str) else fast == expected
