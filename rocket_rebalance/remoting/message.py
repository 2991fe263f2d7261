"""Stored messages: the records of a PULL_MESSAGE response body (and of a CONSUME_MESSAGE_DIRECTLY request).

A body is records back to back, each in the broker's commit-log layout (``MessageDecoder.decode``), big-endian::

    TOTALSIZE i32 | MAGICCODE i32 | BODYCRC i32 | QUEUEID i32 | FLAG i32 | QUEUEOFFSET i64 | PHYSICALOFFSET i64 |
    SYSFLAG i32 | BORNTIMESTAMP i64 | BORNHOST (4 or 16 bytes) + port i32 | STORETIMESTAMP i64 |
    STOREHOST (4 or 16 bytes) + port i32 | RECONSUMETIMES i32 | PREPAREDTRANSACTIONOFFSET i64 |
    BODYLEN i32 + body | TOPICLEN (i8 in V1, i16 in V2) + topic | PROPERTIESLEN i16 + properties

Java's decoder stops silently at the first record it cannot read and returns the ones before it; here a bad
record is a :class:`ProtocolError` naming the record and its offset, because dropping messages silently would
leave a consumer believing it had seen everything up to the next offset.

A compressed body (``SYSFLAG`` bit 0, the kind in bits 8-10: ``MessageSysFlag``) is inflated as 5.3.3's
``CompressorFactory`` reads it: zlib (kind 3, and 0 from producers older than the kinds), an LZ4 frame as lz4-java's
``LZ4FrameOutputStream`` writes it (kind 1) and a zstd frame as zstd-jni's ``ZstdOutputStream`` writes it (kind 2),
each through a decompressor that stops at :data:`MAX_BODY_SIZE`. A body that cannot be inflated is kept as stored,
with :attr:`StoredMessage.body_error` saying why, and the rest of the answer decodes; Java's decoder would lose the
record and every one after it. A producer's batch sent to a ``queue.type=BatchCQ`` topic is stored as one record,
flagged INNER_BATCH and NEED_UNWRAP, whose body holds the batch's messages: :func:`unwrap_inner_batches` splits it
as Java's ``PullAPIWrapper.processPullResult`` does.
"""

from __future__ import annotations

import enum
import functools
import ipaddress
import struct
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import lz4.frame
import zstandard

from rocket_rebalance.remoting.frame import ProtocolError

__all__ = [
    "MAGIC_V1",
    "MAGIC_V2",
    "SYSFLAG_BORNHOST_V6",
    "MAX_BODY_SIZE",
    "SYSFLAG_COMPRESSED",
    "SYSFLAG_COMPRESSION_MASK",
    "SYSFLAG_INNER_BATCH",
    "SYSFLAG_NEED_UNWRAP",
    "SYSFLAG_STOREHOST_V6",
    "Compression",
    "StoredMessage",
    "compress_body",
    "decode_messages",
    "decode_properties",
    "encode_message_batch",
    "encode_properties",
    "encode_stored_message",
    "message_properties",
    "unwrap_inner_batches",
]

MAGIC_V1 = -626843481  # 0xDAA320A7: topic length in one byte
MAGIC_V2 = -626843477  # 0xDAA320AB: topic length in two bytes (topics longer than 127 bytes)

# MessageSysFlag.java
MAX_BODY_SIZE = 4 * 1024 * 1024
"""The largest body a compressed message may inflate to: Java's ``maxMessageSize`` default (4 MiB), which its
producer checks before it compresses, so no conforming producer stores a larger one."""
SYSFLAG_COMPRESSED = 0x1
SYSFLAG_BORNHOST_V6 = 0x10
SYSFLAG_STOREHOST_V6 = 0x20
SYSFLAG_NEED_UNWRAP = 0x40
SYSFLAG_INNER_BATCH = 0x80
SYSFLAG_COMPRESSION_MASK = 0x700
_INNER_BATCH = SYSFLAG_INNER_BATCH | SYSFLAG_NEED_UNWRAP


class Compression(enum.Enum):
    """The body compressions of ``CompressionType``, by their number in ``SYSFLAG`` bits 8-10. A Java producer
    compresses a body of at least ``compressMsgBodyOverHowmuch`` bytes (4 KiB) with ``compressType`` (the system
    property ``rocketmq.message.compressType``, ZLIB by default) at ``compressLevel`` (5); never a batch."""

    LZ4 = 1
    ZSTD = 2
    ZLIB = 3

    @property
    def sys_flag(self) -> int:
        """Its ``SYSFLAG`` bits, the compressed bit included."""
        return self.value << 8 | SYSFLAG_COMPRESSED


_NAME_VALUE_SEPARATOR = "\x01"
_PROPERTY_SEPARATOR = "\x02"
_PROPERTIES_MAX_BYTES = 2**15 - 1  # the length is a Java short

_HEAD = struct.Struct(">iiiiiqqiq")  # TOTALSIZE .. BORNTIMESTAMP
_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_SHORT = struct.Struct(">h")
_BYTE = struct.Struct(">b")
_UINT = struct.Struct(">I")
_ULONG = struct.Struct(">Q")
_MAX_PORT = 65535
_MIN_RECORD = _HEAD.size + 8 + 8 + 8 + 4 + 8 + 4 + 1 + 2  # IPv4 hosts, empty body, topic and properties
_FIXED_V4 = struct.Struct(">iiiiiqqiq4siq4siiqi")  # TOTALSIZE .. BODYLEN of a record with IPv4 hosts
_INNER_HEAD = struct.Struct(">iiiii")  # TOTALSIZE .. BODYLEN of a message in a batch body
_SLOW_FLAGS = SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6


@dataclass(frozen=True)
class StoredMessage:
    """One message as stored by the broker, its body already inflated.

    Hosts are ``ip:port`` (``[ip]:port`` for IPv6). ``sys_flag`` is as stored except that the compressed bit is
    cleared once the body is inflated, as Java's decoder clears it. ``body_crc`` is the stored checksum (of the
    body as sent, i.e. compressed when it was; Java masks it to 31 bits).
    """

    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    body: bytes
    properties: Mapping[str, str] = field(default_factory=dict)
    sys_flag: int = 0
    flag: int = 0
    born_timestamp: int = 0
    born_host: str = "127.0.0.1:0"
    store_timestamp: int = 0
    store_host: str = "127.0.0.1:10911"
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    body_crc: int = 0
    body_error: str = ""
    """Why the body could not be read (an unknown compression, damaged or cut-short compressed data, a frame
    lz4-java refuses, more than the inflation cap, an inner batch that does not parse): ``body`` is then the stored
    bytes as they are. The record itself was sound, so the pull goes on; what to do with such a message is the
    consumer's decision, not the codec's."""

    @property
    def tags(self) -> str:
        return self.properties.get("TAGS", "")

    @property
    def keys(self) -> str:
        """Space-separated keys, as the producer set them."""
        return self.properties.get("KEYS", "")

    @property
    def offset_msg_id(self) -> str:
        """The broker's message ID: store host address, port and commit-log offset in upper-case hex
        (``MessageDecoder.createMessageId``), 32 characters for IPv4 and 56 for IPv6."""
        address, port = _split_host(self.store_host)
        return (address.packed + _UINT.pack(port) + _ULONG.pack(self.commit_log_offset % 2**64)).hex().upper()

    @property
    def msg_id(self) -> str:
        """What Java's ``MessageExt.getMsgId()`` returns on a consumer: the producer's ``UNIQ_KEY`` when the
        message has one, else :attr:`offset_msg_id`."""
        return self.properties.get("UNIQ_KEY") or self.offset_msg_id


def _split_host(host: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    if host.startswith("["):
        address, separator, port = host[1:].partition("]:")
    else:
        address, separator, port = host.rpartition(":")
    if not separator or not (port.isascii() and port.isdigit()) or int(port) > _MAX_PORT:
        raise ValueError(f"host {host!r} is not ip:port or [ipv6]:port")
    return ipaddress.ip_address(address), int(port)


@functools.lru_cache(maxsize=1024)  # a pull answer repeats its few hosts (one store host): formatting was 40 % of it
def _format_host(address: bytes, port: int) -> str:
    if len(address) == 4:
        return f"{ipaddress.IPv4Address(address)}:{port}"
    return f"[{ipaddress.IPv6Address(address)}]:{port}"


# ---------------------------------------------------------------------------------------------------------- properties


SYSTEM_PROPERTIES = frozenset(
    {
        "1ST_POP_TIME",
        "ARRIVE_TIME",
        "BORN_TIMESTAMP",
        "BUYER_ID",
        "CLUSTER",
        "CONSUME_START_TIME",
        "CORRECTION_FLAG",
        "CORRELATION_ID",
        "DELAY",
        "DLQ_ORIGIN_MESSAGE_ID",
        "DLQ_ORIGIN_TOPIC",
        "DUP_INFO",
        "EXTEND_UNIQ_INFO",
        "INNER_MULTI_QUEUE_OFFSET",
        "INSTANCE_ID",
        "KEYS",
        "MAX_OFFSET",
        "MAX_RECONSUME_TIMES",
        "MIN_OFFSET",
        "MQ2_FLAG",
        "MSG_REGION",
        "MSG_TYPE",
        "ORIGIN_MESSAGE_ID",
        "PGROUP",
        "POP_CK",
        "POP_CK_OFFSET",
        "PUSH_REPLY_TIME",
        "REAL_QID",
        "REAL_TOPIC",
        "RECONSUME_TIME",
        "REPLY_TO_CLIENT",
        "RETRY_TOPIC",
        "TAGS",
        "TIMER_DELAY_LEVEL",
        "TIMER_DELAY_MS",
        "TIMER_DELAY_SEC",
        "TIMER_DELIVER_MS",
        "TIMER_DEL_UNIQKEY",
        "TIMER_DEQUEUE_MS",
        "TIMER_ENQUEUE_MS",
        "TIMER_OUT_MS",
        "TIMER_ROLL_TIMES",
        "TRACE_ON",
        "TRANSFER_FLAG",
        "TRAN_MSG",
        "TRAN_PREPARED_QUEUE_OFFSET",
        "TTL",
        "UNIQ_KEY",
        "WAIT",
        "__BORNHOST",
        "__CRC32#",
    }
)
"""The property names Java's ``Message.putUserProperty`` refuses (``MessageConst.STRING_HASH_SET``, 5.3.3)."""


def message_properties(tags: str = "", keys: str = "", user: Mapping[str, str] | None = None) -> dict[str, str]:
    """The properties of a message sent with ``tags``, ``keys`` (space-separated) and ``user`` properties, as
    Java's ``Message`` holds them (``TAGS``, ``KEYS``, then each ``putUserProperty``). A user property Java's
    ``putUserProperty`` refuses (a system name, a blank name or value) is a ``ValueError`` here too."""
    properties: dict[str, str] = {}
    if tags:
        properties["TAGS"] = tags
    if keys:
        properties["KEYS"] = keys
    for name, value in (user or {}).items():
        if name in SYSTEM_PROPERTIES:
            raise ValueError(f"property {name} is used by RocketMQ itself; choose another name")
        if not name.strip() or not value.strip():
            raise ValueError(f"property {name!r}={value!r}: names and values must not be blank")
        properties[name] = value
    return properties


def encode_properties(properties: Mapping[str, str]) -> str:
    """``name\\x01value\\x02`` per property (``MessageDecoder.messageProperties2String``).

    Java's parser drops what this format cannot carry, so it is refused here instead of being lost on the way:
    an empty name or value, a separator inside a name, or a ``\\x02`` inside a value is a ``ValueError``.
    """
    parts: list[str] = []
    for name, value in properties.items():
        if not name or not value:
            raise ValueError(f"property {name!r}={value!r}: names and values must be non-empty")
        if _NAME_VALUE_SEPARATOR in name or _PROPERTY_SEPARATOR in name or _PROPERTY_SEPARATOR in value:
            raise ValueError(f"property {name!r}={value!r} contains a separator character")
        parts += [name, _NAME_VALUE_SEPARATOR, value, _PROPERTY_SEPARATOR]
    return "".join(parts)


def decode_properties(text: str) -> dict[str, str]:
    """Java's ``string2messageProperties``: segments split at ``\\x02``, each ``name\\x01value`` split at its first
    ``\\x01``; a segment without one, or with an empty name or value, is skipped; a later name wins."""
    properties: dict[str, str] = {}
    for segment in text.split(_PROPERTY_SEPARATOR):
        name, separator, value = segment.partition(_NAME_VALUE_SEPARATOR)
        if separator and name and value:
            properties[name] = value
    return properties


# ---------------------------------------------------------------------------------------------------------- decoding


class _Record:
    """Reads one record's fields in order, never past the record's end; failures name the record and offset."""

    def __init__(self, data: memoryview, start: int, end: int, index: int) -> None:
        self.data = data
        self.position = start
        self.end = end
        self.where = f"message {index} at offset {start}"

    def error(self, message: str) -> ProtocolError:
        return ProtocolError(f"{self.where}: {message}")

    def take(self, size: int, name: str) -> memoryview:
        stop = self.position + size
        if stop > self.end:
            raise self.error(f"truncated record: {name} needs {size} bytes, {self.end - self.position} left")
        chunk = self.data[self.position : stop]
        self.position = stop
        return chunk

    def number(self, shape: struct.Struct, name: str) -> int:
        value: int = shape.unpack(self.take(shape.size, name))[0]
        return value

    def length(self, shape: struct.Struct, name: str) -> int:
        size = self.number(shape, f"{name} length")
        if size < 0:
            raise self.error(f"{name} length {size} is negative")
        return size

    def text(self, shape: struct.Struct, name: str) -> str:
        raw = self.take(self.length(shape, name), name)
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError as error:
            raise self.error(f"{name} is not valid UTF-8: {error}") from None

    def host(self, v6: bool, name: str) -> str:
        address = bytes(self.take(16 if v6 else 4, name))
        port = self.number(_INT, f"{name} port")
        if not 0 <= port <= _MAX_PORT:  # Java's InetSocketAddress refuses it, and so the whole record
            raise self.error(f"{name} port {port} is out of range")
        return _format_host(address, port)


def decode_messages(body: bytes | bytearray | memoryview, max_body_size: int = MAX_BODY_SIZE) -> list[StoredMessage]:
    """Every record of ``body``, in order; a compressed body inflates to at most ``max_body_size`` bytes (see
    :attr:`StoredMessage.body_error`).

    A pull answer is mostly plain records (IPv4 hosts, sound, a compressed body that inflates), read by
    :func:`_decode_plain` with one ``struct`` call for the fixed part; any other record, and any record that is not
    sound, is read field by field by :func:`_decode_record`, which also names what is wrong. The profile of a
    consumer draining a topic had the field-by-field reading at half its time (and at 10 of the 13 us an 8 KiB LZ4
    body cost)."""
    messages: list[StoredMessage] = []
    data = bytes(body)
    with memoryview(data) as view:
        start, end = 0, len(data)
        topics: dict[bytes, str] = {}
        while start < end:
            plain = _decode_plain(data, start, topics, max_body_size)
            if plain is None:
                message, start = _decode_record(view, start, len(messages), max_body_size)
            else:
                message, start = plain
            messages.append(message)
    return messages


def _decode_plain(
    data: bytes, start: int, topics: dict[bytes, str], max_body_size: int
) -> tuple[StoredMessage, int] | None:
    """The plain record at ``start`` (IPv4 hosts; a compressed body inflated) and the offset after it, or None when
    the record is anything else, not sound, or its body cannot be inflated, for :func:`_decode_record` to read or
    refuse, naming the record. Topic names repeat in an answer, so each is decoded once (``topics``)."""
    if len(data) - start < _FIXED_V4.size:
        return None
    (
        total,
        magic,
        body_crc,
        queue_id,
        flag,
        queue_offset,
        commit_log_offset,
        sys_flag,
        born_timestamp,
        born_address,
        born_port,
        store_timestamp,
        store_address,
        store_port,
        reconsume_times,
        prepared_transaction_offset,
        body_length,
    ) = _FIXED_V4.unpack_from(data, start)
    end = start + total
    position = start + _FIXED_V4.size + body_length
    if (
        sys_flag & _SLOW_FLAGS
        or magic != MAGIC_V1
        or total < _MIN_RECORD
        or end > len(data)
        or body_length < 0
        or position + 3 > end
        or not (0 <= born_port <= _MAX_PORT and 0 <= store_port <= _MAX_PORT)
    ):
        return None
    topic_raw = data[position + 1 : position + 1 + data[position]] if data[position] < 0x80 else None
    if topic_raw is None:
        return None
    position += 1 + len(topic_raw)
    if position + 2 > end:
        return None
    properties_end = position + 2 + ((data[position] << 8) | data[position + 1])
    if data[position] >= 0x80 or properties_end != end:
        return None
    topic = topics.get(topic_raw)
    try:
        if topic is None:
            topic = topics[topic_raw] = topic_raw.decode("utf-8")
        properties = decode_properties(data[position + 2 : end].decode("utf-8"))
    except UnicodeDecodeError:
        return None
    body_start = start + _FIXED_V4.size
    body = data[body_start : body_start + body_length]
    if body and sys_flag & SYSFLAG_COMPRESSED:  # Java inflates only a non-empty body
        try:
            body = _inflate(body, sys_flag, max_body_size)
        except _Unreadable:
            return None
        sys_flag &= ~SYSFLAG_COMPRESSED
    fields = {
        "topic": topic,
        "queue_id": queue_id,
        "queue_offset": queue_offset,
        "commit_log_offset": commit_log_offset,
        "body": body,
        "properties": properties,
        "sys_flag": sys_flag,
        "flag": flag,
        "born_timestamp": born_timestamp,
        "born_host": _format_host(born_address, born_port),
        "store_timestamp": store_timestamp,
        "store_host": _format_host(store_address, store_port),
        "reconsume_times": reconsume_times,
        "prepared_transaction_offset": prepared_transaction_offset,
        "body_crc": body_crc,
        "body_error": "",
    }
    message = object.__new__(StoredMessage)
    object.__setattr__(message, "__dict__", fields)  # what __init__ would set, field by field, at five times the cost
    return message, end


def _decode_record(data: memoryview, start: int, index: int, max_body_size: int) -> tuple[StoredMessage, int]:
    """The record at ``start`` and the offset just after it."""
    where = f"message {index} at offset {start}"
    left = len(data) - start
    if left < _INT.size:
        raise ProtocolError(f"{where}: truncated record: {left} bytes cannot hold TOTALSIZE")
    (total,) = _INT.unpack_from(data, start)
    if total < _MIN_RECORD:
        raise ProtocolError(f"{where}: TOTALSIZE {total} is below the {_MIN_RECORD}-byte minimum record")
    if total > left:
        raise ProtocolError(f"{where}: truncated record: TOTALSIZE {total} but {left} bytes left")
    record = _Record(data, start, start + total, index)
    (
        _,
        magic,
        body_crc,
        queue_id,
        flag,
        queue_offset,
        commit_log_offset,
        sys_flag,
        born_timestamp,
    ) = _HEAD.unpack(record.take(_HEAD.size, "fixed fields"))
    if magic not in (MAGIC_V1, MAGIC_V2):
        raise record.error(f"bad magic code {magic & 0xFFFFFFFF:#010x}")
    born_host = record.host(bool(sys_flag & SYSFLAG_BORNHOST_V6), "BORNHOST")
    store_timestamp = record.number(_LONG, "STORETIMESTAMP")
    store_host = record.host(bool(sys_flag & SYSFLAG_STOREHOST_V6), "STOREHOST")
    reconsume_times = record.number(_INT, "RECONSUMETIMES")
    prepared_transaction_offset = record.number(_LONG, "PREPAREDTRANSACTIONOFFSET")
    body = bytes(record.take(record.length(_INT, "BODY"), "BODY"))
    body_error = ""
    if body and sys_flag & SYSFLAG_COMPRESSED:  # Java inflates only a non-empty body
        try:
            body = _inflate(body, sys_flag, max_body_size)
            sys_flag &= ~SYSFLAG_COMPRESSED
        except _Unreadable as error:
            body_error = str(record.error(str(error)))
    topic = record.text(_BYTE if magic == MAGIC_V1 else _SHORT, "TOPIC")
    properties = decode_properties(record.text(_SHORT, "PROPERTIES"))
    if record.position != record.end:
        raise record.error(f"TOTALSIZE {total} but the fields end after {record.position - start} bytes")
    message = StoredMessage(
        topic=topic,
        queue_id=queue_id,
        queue_offset=queue_offset,
        commit_log_offset=commit_log_offset,
        body=body,
        properties=properties,
        sys_flag=sys_flag,
        flag=flag,
        born_timestamp=born_timestamp,
        born_host=born_host,
        store_timestamp=store_timestamp,
        store_host=store_host,
        reconsume_times=reconsume_times,
        prepared_transaction_offset=prepared_transaction_offset,
        body_crc=body_crc,
        body_error=body_error,
    )
    return message, record.end


class _Unreadable(Exception):
    """Why a body (or an inner batch) cannot be read; the record around it is sound."""


def _inflate(body: bytes, sys_flag: int, max_body_size: int) -> bytes:
    """The body inflated by the compression its ``sys_flag`` names, never past ``max_body_size`` bytes: a small
    stored body can inflate to gigabytes."""
    kind = (sys_flag & SYSFLAG_COMPRESSION_MASK) >> 8
    if kind == Compression.LZ4.value:
        return _inflate_lz4(body, max_body_size)
    if kind == Compression.ZSTD.value:
        return _inflate_zstd(body, max_body_size)
    if kind not in (0, Compression.ZLIB.value):
        raise _Unreadable(f"unknown compression type {kind}")
    inflater = zlib.decompressobj()
    try:
        inflated = inflater.decompress(body, max_body_size + 1)
    except zlib.error as error:
        raise _Unreadable(f"body is not valid zlib data: {error}") from None
    _check_size(len(inflated), max_body_size)
    if not inflater.eof:  # what follows the stream is ignored, as Java's InflaterInputStream ignores it
        raise _Unreadable("body is not valid zlib data: the compressed stream is incomplete")
    return inflated


def _check_size(size: int, max_body_size: int) -> None:
    if size > max_body_size:
        raise _Unreadable(f"body inflates past {max_body_size} bytes, the largest message body allowed")


_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_FLG_JAVA = 0x21  # FLG bits lz4-java checks: block independence (0x20) set, the dictionary ID (0x01) not


_LZ4_CONTEXTS: list[lz4.frame.LZ4FrameDecompressor] = []
"""LZ4 decompression contexts not in use. A new one allocates a block buffer of the frame's block size, 4 MiB for
lz4-java's frames, which cost 23 us of an 8 KiB body's 26; a reset one keeps it. One is used by one thread at a
time: a caller takes one (``pop``) and puts it back (``append``), both atomic."""


def _inflate_lz4(body: bytes, max_body_size: int) -> bytes:
    """LZ4 frames back to back, as lz4-java's ``LZ4FrameInputStream`` reads them: skippable frames skipped, each
    frame ended by its end mark (and checksums, when flagged), nothing after the last. Frames lz4-java refuses
    (dependent blocks, a dictionary ID) are refused here too, though liblz4 could read the first kind."""
    try:
        frame = _LZ4_CONTEXTS.pop()
    except IndexError:
        frame = lz4.frame.LZ4FrameDecompressor()
    try:
        return _lz4_frames(frame, body, max_body_size)
    finally:
        _LZ4_CONTEXTS.append(frame)


def _lz4_frames(frame: lz4.frame.LZ4FrameDecompressor, body: bytes, max_body_size: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    rest = body
    while rest:
        if rest[:4] == _LZ4_MAGIC and len(rest) > 4 and rest[4] & _LZ4_FLG_JAVA != 0x20:
            raise _Unreadable("body is an LZ4 frame lz4-java cannot read (dependent blocks or a dictionary)")
        frame.reset()
        try:
            part = frame.decompress(rest, max_length=max_body_size + 1 - size)
        except RuntimeError as error:  # what the lz4 binding raises for LZ4F errors
            raise _Unreadable(f"body is not valid LZ4 frame data: {error}") from None
        size += len(part)
        _check_size(size, max_body_size)
        if not frame.eof:
            raise _Unreadable("body is not valid LZ4 frame data: a frame is incomplete")
        parts.append(part)
        rest = frame.unused_data or b""
    return b"".join(parts)


_ZSTD_STEP = 128
"""Compressed bytes given to the zstd decompressor at a time. zstd has no output bound per call, and 4 bytes (an
RLE block) can stand for 128 KiB; so after a step the output is at most about 4 MiB past what was allowed, and
the decompression stops there."""
_ZSTD_CONTEXTS: list[zstandard.ZstdDecompressor] = []
"""Decompression contexts not in use. Making one costs more than inflating an 8 KiB body, and one may be used by
one thread at a time: a caller takes one (``pop``) and puts it back (``append``), both atomic."""


def _inflate_zstd(body: bytes, max_body_size: int) -> bytes:
    """zstd frames back to back, as zstd-jni's ``ZstdInputStream`` reads them: skippable frames skipped, each frame
    complete, nothing after the last."""
    try:
        context = _ZSTD_CONTEXTS.pop()
    except IndexError:
        context = zstandard.ZstdDecompressor()
    try:
        return _zstd_frames(context, memoryview(body), max_body_size)
    except zstandard.ZstdError as error:
        raise _Unreadable(f"body is not valid zstd data: {error}") from None
    finally:
        _ZSTD_CONTEXTS.append(context)


def _zstd_frames(context: zstandard.ZstdDecompressor, body: memoryview, max_body_size: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    rest: bytes | memoryview = body
    while rest:
        frame = context.decompressobj()
        position = 0
        while position < len(rest) and not frame.eof:
            part = frame.decompress(rest[position : position + _ZSTD_STEP])
            position += _ZSTD_STEP
            size += len(part)
            _check_size(size, max_body_size)
            parts.append(part)
        if not frame.eof:
            raise _Unreadable("body is not valid zstd data: a frame is incomplete")
        rest = frame.unused_data + rest[position:]
    return b"".join(parts)


# ---------------------------------------------------------------------------------------------------------- encoding


def encode_stored_message(
    message: StoredMessage, compress: Compression | None = None, version: int | None = None
) -> bytes:
    """``message`` as the broker stores it: what :func:`decode_messages` reads back.

    The host flags of ``sys_flag`` follow the hosts given; ``compress`` compresses the body as a Java producer
    does (:func:`compress_body`) and sets the compressed flag and its kind (otherwise the compressed flag is
    cleared). ``BODYCRC`` is computed as the broker computes it (CRC32 of the stored body, masked to 31 bits) and
    ``message.body_crc`` is ignored. The record is V2 when ``version`` is 2 or the topic is longer than 127 UTF-8
    bytes (the broker's rule), else V1. Values that do not fit their field are a ``ValueError``.
    """
    born_address, born_port = _split_host(message.born_host)
    store_address, store_port = _split_host(message.store_host)
    sys_flag = message.sys_flag & ~(SYSFLAG_COMPRESSED | SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6)
    sys_flag |= SYSFLAG_BORNHOST_V6 if born_address.version == 6 else 0
    sys_flag |= SYSFLAG_STOREHOST_V6 if store_address.version == 6 else 0
    body = message.body
    if compress is not None:
        body = compress_body(body, compress)
        sys_flag = sys_flag & ~SYSFLAG_COMPRESSION_MASK | compress.sys_flag
    topic = message.topic.encode("utf-8")
    if version is None:
        version = 2 if len(topic) > 127 else 1
    if version not in (1, 2) or (version == 1 and len(topic) > 127) or len(topic) > 2**15 - 1:
        raise ValueError(f"a topic of {len(topic)} bytes cannot be stored in a V{version} record")
    properties = encode_properties(message.properties).encode("utf-8")
    if len(properties) > _PROPERTIES_MAX_BYTES:
        raise ValueError(f"properties of {len(properties)} bytes exceed the {_PROPERTIES_MAX_BYTES}-byte limit")
    try:
        tail = b"".join(
            (
                born_address.packed,
                _INT.pack(born_port),
                _LONG.pack(message.store_timestamp),
                store_address.packed,
                _INT.pack(store_port),
                _INT.pack(message.reconsume_times),
                _LONG.pack(message.prepared_transaction_offset),
                _INT.pack(len(body)),
                body,
                (_BYTE if version == 1 else _SHORT).pack(len(topic)),
                topic,
                _SHORT.pack(len(properties)),
                properties,
            )
        )
        total = _HEAD.size + len(tail)
        head = _HEAD.pack(
            total,
            MAGIC_V1 if version == 1 else MAGIC_V2,
            zlib.crc32(body) & 0x7FFFFFFF,
            message.queue_id,
            message.flag,
            message.queue_offset,
            message.commit_log_offset,
            sys_flag,
            message.born_timestamp,
        )
    except struct.error as error:
        raise ValueError(f"a field of {message!r} does not fit the stored format: {error}") from None
    return head + tail


def compress_body(body: bytes, compression: Compression) -> bytes:
    """``body`` compressed as a 5.3.3 producer's ``Compressor`` does at its default level 5: zlib with a zlib
    header; one LZ4 frame as lz4-java's ``LZ4FrameOutputStream`` writes it (4 MiB blocks, independent, no
    checksums, no content size); one zstd frame as zstd-jni's ``ZstdOutputStream`` writes it when written,
    flushed and closed (no content size, no checksum, an empty last block). Streamed as those are, so that the
    frames come out as Java's do (``tests/golden/stored_message_cases.jsonl`` holds it to that)."""
    if compression is Compression.LZ4:
        frame = lz4.frame.LZ4FrameCompressor(
            block_size=lz4.frame.BLOCKSIZE_MAX4MB, block_linked=False, content_checksum=False
        )
        return bytes(frame.begin() + frame.compress(body) + frame.flush())
    if compression is Compression.ZSTD:
        stream = zstandard.ZstdCompressor(level=5).compressobj()
        return b"".join(
            (
                stream.compress(body),
                stream.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK),
                stream.flush(zstandard.COMPRESSOBJ_FLUSH_FINISH),
            )
        )
    return zlib.compress(body, 5)


def encode_message_batch(messages: Iterable[tuple[int, bytes, Mapping[str, str]]]) -> bytes:
    """The body of a producer's batch (``MessageBatch.encode``): each message's ``(flag, body, properties)`` as
    ``MessageDecoder.encodeMessage`` lays it out, back to back::

        TOTALSIZE i32 | MAGICCODE i32 (0) | BODYCRC i32 (0) | FLAG i32 | BODYLEN i32 + body | PROPERTIESLEN i16 +
        properties

    Values that do not fit their field are a ``ValueError``."""
    parts: list[bytes] = []
    for flag, body, properties in messages:
        encoded = encode_properties(properties).encode("utf-8")
        if len(encoded) > _PROPERTIES_MAX_BYTES:
            raise ValueError(f"properties of {len(encoded)} bytes exceed the {_PROPERTIES_MAX_BYTES}-byte limit")
        try:
            head = _INNER_HEAD.pack(_INNER_HEAD.size + len(body) + 2 + len(encoded), 0, 0, flag, len(body))
        except struct.error as error:
            raise ValueError(f"a field of a batch message does not fit: {error}") from None
        parts += [head, body, _SHORT.pack(len(encoded)), encoded]
    return b"".join(parts)


# ---------------------------------------------------------------------------------------------------------- batches


def unwrap_inner_batches(messages: Sequence[StoredMessage]) -> Sequence[StoredMessage]:
    """``messages`` with each record flagged INNER_BATCH and NEED_UNWRAP replaced by the messages its body holds,
    as Java's consumer does with a pull answer (``PullAPIWrapper.processPullResult``, ``MessageDecoder
    .decodeMessage``), field by field: the i-th inner message has the record's topic, queue, queue offset + i,
    commit-log offset, ``sys_flag`` (the batch flags stay set), hosts and timestamps, and its own flag, body and
    properties (so its ``UNIQ_KEY``, its message ID); its reconsume times, prepared-transaction offset and body CRC
    are 0, as Java leaves them. The broker numbers a BatchCQ queue's offsets per inner message (``INNER_BASE`` is
    the record's queue offset, ``INNER_NUM`` the count), so these are the queue offsets it answers for.

    Java reads the inner fields in order and ignores TOTALSIZE, MAGICCODE and BODYCRC; so does this. A body that
    cannot be read so (cut short, a negative length, properties not UTF-8) leaves its record whole with
    :attr:`StoredMessage.body_error` set; Java would deliver every record of the answer whole instead. A record
    whose body could not be inflated is left as it is."""
    if not any(message.sys_flag & _INNER_BATCH == _INNER_BATCH for message in messages):
        return messages
    unwrapped: list[StoredMessage] = []
    for message in messages:
        if message.sys_flag & _INNER_BATCH != _INNER_BATCH or message.body_error:
            unwrapped.append(message)
            continue
        try:
            inner = _inner_messages(message.body)
        except _Unreadable as error:
            where = f"inner batch at queue offset {message.queue_offset}"
            unwrapped.append(replace(message, body_error=f"{where}: {error}"))
            continue
        shared = {**message.__dict__, "reconsume_times": 0, "prepared_transaction_offset": 0, "body_crc": 0}
        for index, (flag, body, properties) in enumerate(inner):
            fields = {**shared, "queue_offset": message.queue_offset + index, "body": body}
            fields.update(properties=properties, flag=flag)
            split = object.__new__(StoredMessage)
            object.__setattr__(split, "__dict__", fields)  # as _decode_plain builds one: __init__ costs 5 times more
            unwrapped.append(split)
    return unwrapped


def _inner_messages(body: bytes) -> list[tuple[int, bytes, dict[str, str]]]:
    """``(flag, body, properties)`` of each message of a batch body (``MessageDecoder.decodeMessages``)."""
    messages: list[tuple[int, bytes, dict[str, str]]] = []
    position = 0
    while position < len(body):
        where = f"message {len(messages)} at offset {position}"
        if len(body) - position < _INNER_HEAD.size:
            raise _Unreadable(f"{where}: cut short in its fixed fields")
        _, _, _, flag, body_length = _INNER_HEAD.unpack_from(body, position)
        position += _INNER_HEAD.size
        if body_length < 0 or position + body_length + 2 > len(body):
            raise _Unreadable(f"{where}: body length {body_length} does not fit the batch")
        inner_body = body[position : position + body_length]
        position += body_length
        (properties_length,) = _SHORT.unpack_from(body, position)
        position += 2
        if properties_length < 0 or position + properties_length > len(body):
            raise _Unreadable(f"{where}: properties length {properties_length} does not fit the batch")
        try:
            text = body[position : position + properties_length].decode("utf-8")
        except UnicodeDecodeError as error:
            raise _Unreadable(f"{where}: properties are not valid UTF-8: {error}") from None
        position += properties_length
        messages.append((flag, inner_body, decode_properties(text)))
    return messages
