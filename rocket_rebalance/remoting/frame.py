"""Remoting frames: a ``RemotingCommand`` to bytes and back, whole or incrementally from a byte stream.

A frame is ``int32 L | int32 (serializeType << 24 | H) | header (H bytes) | body``, big-endian, where ``L`` counts
everything after itself. The header is JSON (serialize type 0, what Java and every broker send by default) or
RocketMQ's binary layout (type 1); a server picks the type per frame, so the decoder accepts both while the encoder
writes JSON unless told otherwise (``RemotingCommand.java``, ``RocketMQSerializable.java``).

Every malformed input raises :class:`ProtocolError`, never an ``IndexError``, ``struct.error`` or JSON error, so a
reader has one exception to catch before it closes the connection, which is what a Java peer does with a frame it
cannot decode (``NettyDecoder``).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from json.encoder import encode_basestring as _quote
from typing import Any

from rocket_rebalance.remoting.codes import RPC_ONEWAY, RPC_TYPE

__all__ = [
    "LANGUAGE_CODES",
    "MAX_FRAME_LENGTH",
    "SERIALIZE_JSON",
    "SERIALIZE_ROCKETMQ",
    "VERSION_5_3_3",
    "FrameDecoder",
    "ProtocolError",
    "RemotingCommand",
    "decode",
    "encode",
    "request",
    "response_to",
    "sniff_non_remoting",
]

MAX_FRAME_LENGTH = 16 * 1024 * 1024
"""RocketMQ's default ``frameMaxLength``. Like Netty's ``maxFrameLength`` it counts the 4-byte length field too, so
the largest declared length ``L`` a Java server accepts is ``MAX_FRAME_LENGTH - 4``; larger frames close the
connection there, and are refused here before a byte of them is buffered."""

SERIALIZE_JSON = 0
SERIALIZE_ROCKETMQ = 1

VERSION_5_3_3 = 479
"""``MQVersion.Version.V5_3_3.ordinal()``. Servers key behaviour on it: at 401 or more a name server sends routes
as standard JSON, above 475 a server going down answers ``GO_AWAY``, and below 62 a broker will not forward
GET_CONSUMER_RUNNING_INFO to the client."""

LANGUAGE_CODES: Mapping[str, int] = {
    "JAVA": 0,
    "CPP": 1,
    "DOTNET": 2,
    "PYTHON": 3,
    "DELPHI": 4,
    "ERLANG": 5,
    "RUBY": 6,
    "OTHER": 7,
    "HTTP": 8,
    "GO": 9,
    "PHP": 10,
    "OMS": 11,
    "RUST": 12,
    "NODE_JS": 13,
}
"""``LanguageCode.java``: the JSON header names the language, the binary header carries this byte."""
_LANGUAGE_NAMES = {code: name for name, code in LANGUAGE_CODES.items()}

_INT32 = (-(2**31), 2**31 - 1)
_INT16 = (-(2**15), 2**15 - 1)
_LENGTH = struct.Struct(">I")
_BINARY_FIXED = struct.Struct(">hbhii")  # code, language, version, opaque, flag


class ProtocolError(ValueError):
    """Bytes that are not a valid remoting frame (or body); the message says what was wrong.

    After one of these the byte stream cannot be trusted to be at a frame boundary, so the connection must close.
    """


@dataclass(frozen=True)
class RemotingCommand:
    """One request or response. ``ext`` is the ``extFields`` map ("custom header"): every value a string.

    ``opaque`` pairs a response with its request; each side numbers its own requests, so inbound requests and
    responses are told apart by :attr:`is_response`, never by opaque.
    """

    code: int
    opaque: int = 0
    flag: int = 0
    ext: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    remark: str | None = None
    language: str = "PYTHON"
    version: int = VERSION_5_3_3

    def with_opaque(self, opaque: int) -> RemotingCommand:
        """This command numbered ``opaque``, as a connection numbers every request it sends: ``dataclasses.replace``
        filled in at once (replace reads every field through the constructor: 2 % of a draining consumer's time)."""
        numbered = object.__new__(type(self))
        object.__setattr__(numbered, "__dict__", {**self.__dict__, "opaque": opaque})
        return numbered

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RPC_TYPE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & RPC_ONEWAY)


def request(
    code: int, ext: Mapping[str, str] | None = None, body: bytes = b"", oneway: bool = False
) -> RemotingCommand:
    """A request with opaque 0: the connection that sends it numbers it (:meth:`RemotingCommand.with_opaque`)."""
    return RemotingCommand(code, flag=RPC_ONEWAY if oneway else 0, ext=dict(ext or {}), body=body)


def response_to(
    request_command: RemotingCommand,
    code: int,
    ext: Mapping[str, str] | None = None,
    body: bytes = b"",
    remark: str | None = None,
) -> RemotingCommand:
    """The response to an inbound request: its opaque, the response bit set."""
    return RemotingCommand(
        code, opaque=request_command.opaque, flag=RPC_TYPE, ext=dict(ext or {}), body=body, remark=remark
    )


# ---------------------------------------------------------------------------------------------------------- encoding


def encode(command: RemotingCommand, serialize_type: int = SERIALIZE_JSON) -> bytes:
    """The whole frame, length field included.

    ``ext`` keys and values must be ``str`` (a ``TypeError`` otherwise: converting here would hide a caller's
    bug, and the header builders already convert). Text that cannot be UTF-8 (a lone surrogate) is a
    ``ValueError``; a frame a server would refuse as too long is a :class:`ProtocolError`.
    """
    for key, value in command.ext.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"extFields must map str to str, got {key!r}: {value!r}")
    if serialize_type == SERIALIZE_JSON:
        header = _json_header(command)
    elif serialize_type == SERIALIZE_ROCKETMQ:
        header = _binary_header(command)
    else:
        raise ValueError(f"unknown serialize type {serialize_type}")
    length = 4 + len(header) + len(command.body)
    if length + 4 > MAX_FRAME_LENGTH:
        raise ProtocolError(f"a frame of {length + 4} bytes exceeds the {MAX_FRAME_LENGTH}-byte maximum")
    return b"".join((_LENGTH.pack(length), _LENGTH.pack(serialize_type << 24 | len(header)), header, command.body))


def _json_header(command: RemotingCommand) -> bytes:
    for name, number in (
        ("code", command.code),
        ("opaque", command.opaque),
        ("flag", command.flag),
        ("version", command.version),
    ):
        if not _INT32[0] <= number <= _INT32[1]:
            raise ValueError(f"{name} {number} is not a 32-bit integer")
    # Keys in fastjson's order (sorted), nulls and an empty map left out as fastjson leaves them out. Written by
    # hand, each string quoted by json's own (C) quoting: the bytes json.dumps(..., ensure_ascii=False,
    # separators=(",", ":")) writes (tests/remoting/test_frame.py holds it to that), at a third of its cost, which
    # builds an encoder for every call (a pull request's header was 5 % of a draining consumer's time).
    parts = ['{"code":', str(command.code)]
    if command.ext:
        parts += [',"extFields":{', ",".join(f"{_quote(k)}:{_quote(v)}" for k, v in command.ext.items()), "}"]
    parts += [',"flag":', str(command.flag), ',"language":', _quote(command.language)]
    parts += [',"opaque":', str(command.opaque)]
    if command.remark is not None:
        parts += [',"remark":', _quote(command.remark)]
    parts += [',"serializeTypeCurrentRPC":"JSON","version":', str(command.version), "}"]
    return "".join(parts).encode("utf-8")


def _binary_header(command: RemotingCommand) -> bytes:
    language = LANGUAGE_CODES.get(command.language)
    if language is None:
        raise ValueError(f"language {command.language!r} has no code in the binary header")
    for name, number, (low, high) in (
        ("code", command.code, _INT16),
        ("version", command.version, _INT16),
        ("opaque", command.opaque, _INT32),
        ("flag", command.flag, _INT32),
    ):
        if not low <= number <= high:
            raise ValueError(f"{name} {number} does not fit the binary header ({low}..{high})")
    parts = [_BINARY_FIXED.pack(command.code, language, command.version, command.opaque, command.flag)]
    remark = (command.remark or "").encode("utf-8")  # Java writes an empty remark as length 0, which reads as null
    parts += [struct.pack(">i", len(remark)), remark]
    ext: list[bytes] = []
    for key, value in command.ext.items():
        key_bytes, value_bytes = key.encode("utf-8"), value.encode("utf-8")
        if len(key_bytes) > _INT16[1]:
            raise ValueError(f"extFields key {key[:40]!r}... is longer than the binary header allows")
        ext += [struct.pack(">h", len(key_bytes)), key_bytes, struct.pack(">i", len(value_bytes)), value_bytes]
    ext_bytes = b"".join(ext)
    parts += [struct.pack(">i", len(ext_bytes)), ext_bytes]
    return b"".join(parts)


# ---------------------------------------------------------------------------------------------------------- decoding


def decode(frame: bytes | bytearray | memoryview) -> RemotingCommand:
    """Decode one frame given without its 4-byte total length (what follows it, ``L`` bytes)."""
    with memoryview(frame) as data:
        if len(data) < 4:
            raise ProtocolError(f"frame length {len(data)} is below the 4-byte header-length field")
        (mark,) = _LENGTH.unpack_from(data)
        serialize_type, header_length = mark >> 24, mark & 0xFFFFFF
        if header_length > len(data) - 4:
            raise ProtocolError(f"header length {header_length} exceeds frame length {len(data)}")
        header = bytes(data[4 : 4 + header_length])
        body = bytes(data[4 + header_length :])
    if serialize_type == SERIALIZE_JSON:
        return _decode_json_header(header, body)
    if serialize_type == SERIALIZE_ROCKETMQ:
        return _decode_binary_header(header, body)
    raise ProtocolError(f"unknown serialize type {serialize_type}")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_JSON = json.JSONDecoder(parse_constant=_reject_constant)  # json.loads would build one for every header


def _decode_json_header(header: bytes, body: bytes) -> RemotingCommand:
    try:
        document = _JSON.decode(header.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise ProtocolError(f"JSON header is not valid UTF-8: {error}") from None
    except (ValueError, RecursionError) as error:
        raise ProtocolError(f"JSON header is not valid: {error}") from None
    if not isinstance(document, dict):
        raise ProtocolError(f"JSON header is not an object: {header[:80]!r}")
    if "code" not in document:
        raise ProtocolError(f"JSON header has no code: {header[:200]!r}")
    language = document.get("language")
    if language is None:  # absent or null: fastjson leaves Java's field default
        language = "JAVA"
    if not isinstance(language, str):
        raise ProtocolError(f"JSON header language is not a string: {language!r}")
    remark = document.get("remark")
    if remark is not None and not isinstance(remark, str):
        raise ProtocolError(f"JSON header remark is not a string: {remark!r}")
    return RemotingCommand(
        code=_header_int(document, "code"),
        opaque=_header_int(document, "opaque"),
        flag=_header_int(document, "flag"),
        ext=_ext_fields(document.get("extFields")),
        body=body,
        remark=remark,
        language=language,
        version=_header_int(document, "version"),
    )


def _header_int(document: dict[str, Any], name: str) -> int:
    value = document.get(name)
    if value is None:  # absent or null: fastjson leaves Java's field default, 0
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or not _INT32[0] <= value <= _INT32[1]:
        raise ProtocolError(f"JSON header {name} is not a 32-bit integer: {value!r}")
    return value


def _ext_fields(value: object) -> dict[str, str]:
    """extFields as strings. Java servers send strings only, but other servers have been seen to send numbers and
    booleans; those become the text Java's ``toString`` would give. A null is an absent field, as in Java."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ProtocolError(f"JSON header extFields is not an object: {value!r}")
    ext: dict[str, str] = {}
    for key, item in value.items():
        if isinstance(item, str):
            ext[key] = item
        elif isinstance(item, bool):
            ext[key] = "true" if item else "false"
        elif isinstance(item, int):
            ext[key] = str(item)
        elif item is not None:
            raise ProtocolError(f"JSON header extFields[{key!r}] is not a string: {item!r}")
    return ext


class _Reader:
    """Bounds-checked big-endian reads over one header, each failure a ProtocolError naming the field."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.position = 0
        self.what = what

    def take(self, size: int, field_name: str) -> bytes:
        end = self.position + size
        if size < 0 or end > len(self.data):
            raise ProtocolError(
                f"{self.what}: {field_name} needs {size} bytes at offset {self.position}, "
                f"{len(self.data) - self.position} left"
            )
        chunk = self.data[self.position : end]
        self.position = end
        return chunk

    def unpack(self, shape: struct.Struct, field_name: str) -> tuple[Any, ...]:
        return shape.unpack(self.take(shape.size, field_name))

    def text(self, length_shape: struct.Struct, field_name: str) -> str:
        (size,) = self.unpack(length_shape, f"{field_name} length")
        if size < 0:
            raise ProtocolError(f"{self.what}: {field_name} length {size} is negative")
        try:
            return self.take(size, field_name).decode("utf-8")
        except UnicodeDecodeError as error:
            raise ProtocolError(f"{self.what}: {field_name} is not valid UTF-8: {error}") from None


_INT = struct.Struct(">i")
_SHORT = struct.Struct(">h")


def _decode_binary_header(header: bytes, body: bytes) -> RemotingCommand:
    reader = _Reader(header, "binary header")
    code, language_code, version, opaque, flag = reader.unpack(_BINARY_FIXED, "fixed fields")
    remark = reader.text(_INT, "remark") or None  # Java reads a zero length as null
    (ext_length,) = reader.unpack(_INT, "extFields length")
    if ext_length < 0:
        raise ProtocolError(f"binary header: extFields length {ext_length} is negative")
    fields = _Reader(reader.take(ext_length, "extFields"), "binary header extFields")
    ext: dict[str, str] = {}
    while fields.position < len(fields.data):
        key = fields.text(_SHORT, "key")
        ext[key] = fields.text(_INT, f"value of {key!r}")
    if reader.position != len(header):
        raise ProtocolError(f"binary header: {len(header) - reader.position} bytes left after extFields")
    return RemotingCommand(
        code=code,
        opaque=opaque,
        flag=flag,
        ext=ext,
        body=body,
        remark=remark,
        # An unknown code is kept as its number: Java reads it as a null language and carries on.
        language=_LANGUAGE_NAMES.get(language_code, str(language_code)),
        version=version,
    )


class FrameDecoder:
    """Incremental decoding of a byte stream into commands: feed it whatever the socket gave.

    Bytes are appended to one buffer and consumed from an offset, and the consumed prefix is dropped once per
    :meth:`feed`, so decoding costs time proportional to the bytes fed however they are chunked. A declared
    length that is too small or too large raises as soon as its 4 bytes are in, so a garbage length never makes
    the reader wait for (or buffer) gigabytes. After a :class:`ProtocolError` the stream position is lost: every
    later :meth:`feed` raises too.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._failure: ProtocolError | None = None

    def feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        """Every command completed by ``data`` (maybe none); the incomplete rest is kept for the next call."""
        if self._failure is not None:
            raise ProtocolError(f"the stream is unusable after an earlier error: {self._failure}")
        buffer = self._buffer
        buffer += data
        commands: list[RemotingCommand] = []
        start = 0
        try:
            while len(buffer) - start >= 4:
                (length,) = _LENGTH.unpack_from(buffer, start)
                if length < 4:
                    raise ProtocolError(f"frame length {length} is below the 4-byte header-length field")
                if length + 4 > MAX_FRAME_LENGTH:
                    raise ProtocolError(
                        f"frame length {length} exceeds the maximum of {MAX_FRAME_LENGTH - 4} "
                        f"({MAX_FRAME_LENGTH} bytes with the length field)"
                    )
                end = start + 4 + length
                if end > len(buffer):
                    break
                commands.append(decode(buffer[start + 4 : end]))
                start = end
        except ProtocolError as error:
            self._failure = error
            raise
        del buffer[:start]  # CPython drops a bytearray's prefix without moving the rest
        return commands

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete frame held back for the next :meth:`feed`."""
        return len(self._buffer)


# ---------------------------------------------------------------------------------------------------------- sniffing

_HTTP2_SETTINGS = 0x04
_HTTP2_GOAWAY = 0x07


def sniff_non_remoting(first_bytes: bytes) -> str | None:
    """What a server seems to be, from the first bytes it sent, when those bytes cannot start a remoting frame.

    Observed with this project's ``nameserver_stub`` (a grpcio server): on accepting a connection it sends an
    HTTP/2 SETTINGS frame at once, without waiting for the client (``00 00 18 04 00 00 00 00 00`` + 24 bytes of
    settings, then a WINDOW_UPDATE), and closes the connection when our remoting frame turns out not to be the
    HTTP/2 preface, without a GOAWAY. Other HTTP/2 servers send SETTINGS with a different length, or a GOAWAY.
    An HTTP/2 frame header is 3 bytes length, 1 byte type, 1 byte flags, 4 bytes stream ID (0 for these two types).
    Read as remoting, those 9 bytes would be a frame whose header length (bytes 5-7) is 0, which no remoting
    server sends, so the test is unambiguous; with fewer than 9 bytes it is not, and None is returned.
    HTTP/1 and TLS answers start with a byte no remoting frame under 16 MiB can start with.
    """
    if first_bytes.startswith(b"HTTP/"):
        return "an HTTP/1 server"
    if len(first_bytes) >= 2 and first_bytes[0] == 0x15 and first_bytes[1] == 0x03:  # TLS alert record, TLS 1.x
        return "a TLS server: turn TLS on (--tls, or tls=True)"
    if (
        len(first_bytes) >= 9
        and first_bytes[3] in (_HTTP2_SETTINGS, _HTTP2_GOAWAY)
        and first_bytes[4] in (0, 1)  # flags: none, or SETTINGS' ACK
        and first_bytes[5:9] == b"\x00\x00\x00\x00"
    ):
        return "a gRPC (HTTP/2) server, e.g. nameserver_stub: use grpc://HOST:PORT"
    return None
