"""Frames: fixed vectors from the protocol notes, round trips in any chunking, and garbage that must only ever
raise ProtocolError."""

from __future__ import annotations

import json
import re
import struct
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocket_rebalance.remoting import (
    LANGUAGE_CODES,
    MAX_FRAME_LENGTH,
    SERIALIZE_JSON,
    SERIALIZE_ROCKETMQ,
    FrameDecoder,
    ProtocolError,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    decode,
    encode,
    request,
    response_to,
    sniff_non_remoting,
)

# What grpcio's server (nameserver_stub) sent first when a raw socket connected to it: SETTINGS + WINDOW_UPDATE.
GRPC_FIRST_BYTES = bytes.fromhex(
    "000018040000000000000400400000000500400000000600004000fe0300000001000004080000000000003f0001"
)


def frame_of(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    """A frame built by hand from the spec: length, type<<24|header length, header, body."""
    return struct.pack(">II", 4 + len(header) + len(body), serialize_type << 24 | len(header)) + header + body


def protocol_errors_only(function: Callable[..., Any], *arguments: Any) -> Any:
    """The call's result, or None when it raised ProtocolError; any other exception fails the test."""
    try:
        return function(*arguments)
    except ProtocolError:
        return None


# ---------------------------------------------------------------------------------------------- fixed vectors


def test_json_header_from_the_protocol_notes() -> None:
    header = (
        b'{"code":0,"extFields":{"queueId":"0","offset":"12"},"flag":1,"language":"JAVA","opaque":7,'
        b'"serializeTypeCurrentRPC":"JSON","version":479}'
    )
    command = decode(frame_of(header, b"xy")[4:])
    assert command == RemotingCommand(
        code=0, opaque=7, flag=1, ext={"queueId": "0", "offset": "12"}, body=b"xy", language="JAVA", version=479
    )
    assert command.is_response and not command.is_oneway


def test_binary_header_built_from_the_spec_bytes() -> None:
    header = bytes.fromhex(
        "0069"  # code 105
        "03"  # language PYTHON
        "01df"  # version 479
        "00000007"  # opaque
        "00000002"  # flag: oneway
        "00000002" + "6f6b"  # remark "ok"
        "0000000c"  # extFields length
        "0005" + "746f706963" + "00000001" + "54"  # "topic" -> "T"
    )
    frame = frame_of(header, b"body", SERIALIZE_ROCKETMQ)
    expected = RemotingCommand(105, opaque=7, flag=2, ext={"topic": "T"}, body=b"body", remark="ok", version=479)
    assert decode(frame[4:]) == expected
    assert encode(expected, SERIALIZE_ROCKETMQ) == frame
    assert expected.is_oneway and not expected.is_response


def test_json_encoding_is_fastjson_shaped() -> None:
    frame = encode(RemotingCommand(34, opaque=9, ext={"a": "1"}, body=b"B"))
    (length, mark) = struct.unpack_from(">II", frame)
    assert length == len(frame) - 4 and mark >> 24 == SERIALIZE_JSON
    header = frame[8 : 8 + (mark & 0xFFFFFF)]
    assert header == (
        b'{"code":34,"extFields":{"a":"1"},"flag":0,"language":"PYTHON","opaque":9,'
        b'"serializeTypeCurrentRPC":"JSON","version":479}'
    )
    assert frame.endswith(b"B")


texts = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=12)  # any character UTF-8 can carry


@settings(max_examples=300)
@given(
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.dictionaries(texts, texts, max_size=5),
    st.one_of(st.none(), texts),
    texts,
    st.integers(-(2**31), 2**31 - 1),
)
def test_the_json_header_is_json_dumps_bytes_for_any_command(
    code: int, opaque: int, flag: int, ext: dict[str, str], remark: str | None, language: str, version: int
) -> None:
    """The header is written by hand for speed; byte for byte what json.dumps writes (keys sorted as fastjson's,
    no spaces, non-ASCII kept, nulls and an empty map left out), for any values, quotes and controls included."""
    command = RemotingCommand(code, opaque, flag, ext, remark=remark, language=language, version=version)
    document: dict[str, object] = {"code": code}
    if ext:
        document["extFields"] = ext
    document.update(flag=flag, language=language, opaque=opaque)
    if remark is not None:
        document["remark"] = remark
    document.update(serializeTypeCurrentRPC="JSON", version=version)
    frame = encode(command)
    (mark,) = struct.unpack_from(">I", frame, 4)
    expected = json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    assert frame[8 : 8 + (mark & 0xFFFFFF)] == expected
    assert decode(frame[4:]) == command


def test_json_header_values_are_read_leniently() -> None:
    header = json.dumps(
        {"code": 0, "language": "COBOL", "extFields": {"n": 5, "t": True, "f": False, "gone": None, "s": "x"}}
    ).encode()
    command = decode(frame_of(header)[4:])
    assert command.ext == {"n": "5", "t": "true", "f": "false", "s": "x"}
    assert command.language == "COBOL" and command.version == 0 and command.opaque == 0 and command.remark is None


def json_header(text: bytes, serialize_type: int = SERIALIZE_JSON) -> bytes:
    """A frame (without its total length) holding just this header."""
    return struct.pack(">I", serialize_type << 24 | len(text)) + text


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (b"\x00\x00\x00", "frame length 3 is below the 4-byte header-length field"),
        (struct.pack(">I", 500) + b"x" * 16, "header length 500 exceeds frame length 20"),
        (json_header(b"{}", 7), "unknown serialize type 7"),
        (json_header(b"{x}"), "JSON header is not valid"),
        (json_header(b"\xff}"), "JSON header is not valid UTF-8"),
        # deeper than the standard parser takes on any Python we support (3.13's takes about 10,000 levels)
        (json_header(b"[" * 100_000 + b"]" * 100_000), "JSON header is not valid"),
        (json_header(b"[]"), "JSON header is not an object"),
        (json_header(b"{}"), "JSON header has no code"),
        (json_header(b'{"code":1.5}'), "code is not a 32-bit integer"),
        (json_header(b'{"code":true}'), "code is not a 32-bit integer"),
        (json_header(b'{"code":2147483648}'), "code is not a 32-bit integer"),
        (json_header(b'{"code":0,"opaque":NaN}'), "JSON header is not valid"),
        (json_header(b'{"code":0,"language":3}'), "language is not a string"),
        (json_header(b'{"code":0,"remark":1}'), "remark is not a string"),
        (json_header(b'{"code":0,"extFields":[]}'), "extFields is not an object"),
        (json_header(b'{"code":0,"extFields":{"a":[]}}'), "extFields['a'] is not a string"),
        (json_header(b"\x00\x01\x02", 1), "binary header: fixed fields needs 13 bytes"),
        (json_header(bytes(13) + b"\xff\xff\xff\xff", 1), "remark length -1 is negative"),
        (json_header(bytes(13) + b"\x00\x00\x00\x05ab", 1), "remark needs 5 bytes"),
        (json_header(bytes(13) + b"\x00\x00\x00\x02\xff\xfe" + bytes(4), 1), "remark is not valid UTF-8"),
        (json_header(bytes(17) + b"\x80\x00\x00\x00", 1), "extFields length -2147483648 is negative"),
        (json_header(bytes(17) + b"\x00\x00\x00\x01" + b"\x00", 1), "binary header extFields: key length"),
        (json_header(bytes(17) + b"\x00\x00\x00\x07\x00\x01k\x00\x00\x00\x09", 1), "value of 'k' needs 9"),
        (json_header(bytes(21) + b"\x00", 1), "1 bytes left after extFields"),
    ],
)
def test_malformed_frames_say_what_is_wrong(frame: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=re.escape(message)):
        decode(frame)


def test_unknown_binary_language_is_kept_as_its_number() -> None:
    header = struct.pack(">hbhii", 0, 99, 1, 2, 3) + bytes(8)
    assert decode(frame_of(header, serialize_type=1)[4:]).language == "99"


def test_encode_refuses_what_java_could_not_read() -> None:
    with pytest.raises(TypeError, match="extFields must map str to str"):
        encode(RemotingCommand(1, ext={"offset": 5}))  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="no code in the binary header"):
        encode(RemotingCommand(1, language="COBOL"), SERIALIZE_ROCKETMQ)
    with pytest.raises(ValueError, match="code 40000 does not fit"):
        encode(RemotingCommand(40000), SERIALIZE_ROCKETMQ)
    with pytest.raises(ValueError, match="opaque 2147483648 is not a 32-bit integer"):
        encode(RemotingCommand(1, opaque=2**31))
    with pytest.raises(ProtocolError, match="exceeds the 16777216-byte maximum"):
        encode(RemotingCommand(1, body=bytes(MAX_FRAME_LENGTH)))
    with pytest.raises(ValueError, match="unknown serialize type 2"):
        encode(RemotingCommand(1), 2)


def test_request_and_response_helpers() -> None:
    ask = replace(request(RequestCode.PULL_MESSAGE, {"topic": "T"}, b"b"), opaque=41)
    assert (ask.code, ask.flag, ask.opaque, dict(ask.ext), ask.body) == (11, 0, 41, {"topic": "T"}, b"b")
    assert request(RequestCode.UPDATE_CONSUMER_OFFSET, oneway=True).is_oneway
    answer = response_to(ask, ResponseCode.PULL_NOT_FOUND, {"nextBeginOffset": "3"}, remark="OFFSET_OVERFLOW_ONE")
    assert (answer.code, answer.opaque, answer.flag, answer.remark) == (19, 41, 1, "OFFSET_OVERFLOW_ONE")
    assert answer.is_response and not answer.is_oneway


# ---------------------------------------------------------------------------------------------- round trips

_short = st.integers(-(2**15), 2**15 - 1)
_int32 = st.integers(-(2**31), 2**31 - 1)
_text = st.text(max_size=30)

commands = st.builds(
    RemotingCommand,
    code=_short,
    opaque=_int32,
    flag=_int32,
    ext=st.dictionaries(_text, _text, max_size=6),
    body=st.binary(max_size=300),
    remark=st.none() | st.text(min_size=1, max_size=40),
    language=st.sampled_from(sorted(LANGUAGE_CODES)),
    version=_short,
)


@settings(max_examples=150)
@given(st.lists(commands, min_size=1, max_size=5), st.sampled_from([SERIALIZE_JSON, SERIALIZE_ROCKETMQ]), st.data())
def test_frames_survive_any_chunking(sent: list[RemotingCommand], serialize_type: int, data: st.DataObject) -> None:
    stream = b"".join(encode(command, serialize_type) for command in sent)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    decoder = FrameDecoder()
    received: list[RemotingCommand] = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        received += decoder.feed(stream[start:end])
    assert received == sent
    assert decoder.buffered == 0


@settings(max_examples=100)
@given(commands, st.sampled_from([SERIALIZE_JSON, SERIALIZE_ROCKETMQ]))
def test_a_valid_frame_is_never_mistaken_for_another_protocol(command: RemotingCommand, serialize_type: int) -> None:
    assert sniff_non_remoting(encode(command, serialize_type)) is None


def test_every_truncation_is_incomplete_and_every_corruption_is_a_protocol_error_or_a_frame() -> None:
    frames = [
        encode(RemotingCommand(310, opaque=3, ext={"a": "x", "bb": "yy"}, body=b"0123", remark="r"), serialize_type)
        for serialize_type in (SERIALIZE_JSON, SERIALIZE_ROCKETMQ)
    ]
    for frame in frames:
        for end in range(len(frame)):
            assert FrameDecoder().feed(frame[:end]) == []
            protocol_errors_only(decode, frame[4:end])
        for index in range(len(frame)):
            for value in (0x00, 0x01, 0x7F, 0x80, 0xFF, frame[index] ^ 0x20):
                corrupted = frame[:index] + bytes([value]) + frame[index + 1 :]
                result = protocol_errors_only(FrameDecoder().feed, corrupted)
                assert result is None or isinstance(result, list)


@settings(max_examples=200)
@given(st.binary(max_size=200), st.data())
def test_random_bytes_raise_only_protocol_errors(garbage: bytes, data: st.DataObject) -> None:
    decoder = FrameDecoder()
    cut = data.draw(st.integers(0, len(garbage)))
    for chunk in (garbage[:cut], garbage[cut:]):
        if protocol_errors_only(decoder.feed, chunk) is None:
            break
    protocol_errors_only(decode, garbage)


@settings(max_examples=200)
@given(st.binary(max_size=120), st.sampled_from([SERIALIZE_JSON, SERIALIZE_ROCKETMQ]))
def test_random_headers_raise_only_protocol_errors(header: bytes, serialize_type: int) -> None:
    result = protocol_errors_only(decode, frame_of(header, b"", serialize_type)[4:])
    assert result is None or isinstance(result, RemotingCommand)


# ---------------------------------------------------------------------------------------------- stream limits


def test_a_huge_declared_length_raises_as_soon_as_its_four_bytes_are_in() -> None:
    decoder = FrameDecoder()
    for byte in b"\x7f\xff\xff":
        assert decoder.feed(bytes([byte])) == []
    with pytest.raises(ProtocolError, match="frame length 2147483647 exceeds the maximum"):
        decoder.feed(b"\xff")


def test_the_length_limit_counts_the_length_field_like_netty() -> None:
    assert FrameDecoder().feed(struct.pack(">I", MAX_FRAME_LENGTH - 4)) == []
    with pytest.raises(ProtocolError, match="exceeds the maximum"):
        FrameDecoder().feed(struct.pack(">I", MAX_FRAME_LENGTH - 3))


@pytest.mark.parametrize("length", [0, 1, 3])
def test_a_length_below_four_raises(length: int) -> None:
    with pytest.raises(ProtocolError, match=f"frame length {length} is below"):
        FrameDecoder().feed(struct.pack(">I", length))


def test_frames_before_a_bad_one_do_not_rescue_the_stream() -> None:
    decoder = FrameDecoder()
    good = encode(RemotingCommand(0))
    with pytest.raises(ProtocolError):
        decoder.feed(good + struct.pack(">I", 2))
    with pytest.raises(ProtocolError, match="unusable after an earlier error"):
        decoder.feed(good)


def test_decoding_time_is_linear_in_the_bytes_fed() -> None:
    # Re-joining the buffer on every feed would copy ~256 GiB here; appending and consuming copies ~32 MiB.
    frame = encode(RemotingCommand(11, body=bytes(MAX_FRAME_LENGTH - 1024)))
    decoder = FrameDecoder()
    started = time.perf_counter()
    received: list[RemotingCommand] = []
    for start in range(0, len(frame), 512):
        received += decoder.feed(frame[start : start + 512])
    assert time.perf_counter() - started < 5
    assert len(received) == 1 and len(received[0].body) == MAX_FRAME_LENGTH - 1024


# ---------------------------------------------------------------------------------------------- other protocols


def test_sniff_names_a_grpc_server_from_the_bytes_grpcio_really_sends() -> None:
    assert sniff_non_remoting(GRPC_FIRST_BYTES) == "a gRPC (HTTP/2) server, e.g. nameserver_stub: use grpc://HOST:PORT"
    goaway = bytes.fromhex("000008070000000000") + bytes(8)
    assert "gRPC" in (sniff_non_remoting(goaway) or "")
    assert sniff_non_remoting(b"\x00\x00\x12\x04\x00\x00\x00\x00\x00") is not None


def test_sniff_names_http1_and_tls() -> None:
    assert sniff_non_remoting(b"HTTP/1.1 400 Bad Request\r\n") == "an HTTP/1 server"
    assert sniff_non_remoting(b"\x15\x03\x01\x00\x02\x02\x32") == "a TLS server: turn TLS on (--tls, or tls=True)"


def test_sniff_never_flags_a_remoting_frame_whose_length_looks_like_http2() -> None:
    # L = 0x1204: the first four bytes equal an HTTP/2 SETTINGS frame header's, the next five do not.
    header = encode(RemotingCommand(0, flag=1))
    frame = encode(RemotingCommand(0, flag=1, body=bytes(0x1204 + 4 - len(header))))
    assert frame[:4] == b"\x00\x00\x12\x04"
    assert sniff_non_remoting(frame) is None
    assert sniff_non_remoting(frame[:4]) is None  # too short to tell


@given(st.integers(-(2**31), 2**31 - 1), st.dictionaries(texts, texts, max_size=3), st.one_of(st.none(), texts))
def test_a_numbered_command_is_the_command_with_its_opaque(
    opaque: int, ext: dict[str, str], remark: str | None
) -> None:
    command = RemotingCommand(11, 3, 1, ext, b"body", remark)
    numbered = command.with_opaque(opaque)
    assert numbered == replace(command, opaque=opaque) and repr(numbered) == repr(replace(command, opaque=opaque))
    assert command.opaque == 3 and type(numbered) is RemotingCommand
