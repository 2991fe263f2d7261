"""Stored messages recorded from RocketMQ 5.3.3's own Java classes (``tests/golden/stored_message_cases.jsonl``,
``python -m rocket_rebalance.lab.stored_vectors``): bodies compressed by lz4-java, zstd-jni and zlib as its
producer compresses them, inner batches as a BatchCQ broker stores them, and what its consumer makes of each,
field by field."""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
import struct
from pathlib import Path
from typing import Any

import pytest

from rocket_rebalance.remoting.message import (
    SYSFLAG_BORNHOST_V6,
    SYSFLAG_STOREHOST_V6,
    Compression,
    StoredMessage,
    compress_body,
    decode_messages,
    encode_message_batch,
    unwrap_inner_batches,
)

CASES = [
    json.loads(line)
    for line in (Path(__file__).parents[1] / "golden" / "stored_message_cases.jsonl").read_text("utf-8").splitlines()
]


def host(recorded: list[Any]) -> str:
    address = ipaddress.ip_address(base64.b64decode(recorded[0]))
    return f"{address}:{recorded[1]}" if address.version == 4 else f"[{address}]:{recorded[1]}"


def body_of(recorded: dict[str, Any]) -> str:
    """Java's body as the file keeps it: Base64, or the SHA-256 of one over 1 KiB."""
    return (
        recorded["body_sha256"]
        if "body_sha256" in recorded
        else hashlib.sha256(base64.b64decode(recorded["body"])).hexdigest()
    )


def as_java_sees(message: StoredMessage) -> dict[str, Any]:
    """Our message in the file's terms. The offset message ID Java leaves unset on inner messages (null) is ours
    computed from the record, so it is compared only where Java has one."""
    return {
        "topic": message.topic,
        "queueId": message.queue_id,
        "queueOffset": message.queue_offset,
        "commitLogOffset": message.commit_log_offset,
        "flag": message.flag,
        "sysFlag": message.sys_flag,
        "body": hashlib.sha256(message.body).hexdigest(),
        "properties": dict(message.properties),
        "bornTimestamp": message.born_timestamp,
        "bornHost": message.born_host,
        "storeTimestamp": message.store_timestamp,
        "storeHost": message.store_host,
        "reconsumeTimes": message.reconsume_times,
        "preparedTransactionOffset": message.prepared_transaction_offset,
        "bodyCRC": message.body_crc,
        "msgId": message.msg_id,
    }


def java_saw(recorded: dict[str, Any]) -> dict[str, Any]:
    fields = {key: value for key, value in recorded.items() if key not in ("body_sha256", "body_size", "offsetMsgId")}
    return {
        **fields,
        "body": body_of(recorded),
        "bornHost": host(recorded["bornHost"]),
        "storeHost": host(recorded["storeHost"]),
    }


def stored_body(record: bytes) -> bytes:
    """The BODY field of a record, as stored (compressed or not)."""
    (sys_flag,) = struct.unpack_from(">i", record, 36)
    at = 48 + (20 if sys_flag & SYSFLAG_BORNHOST_V6 else 8) + 8 + (20 if sys_flag & SYSFLAG_STOREHOST_V6 else 8) + 12
    (length,) = struct.unpack_from(">i", record, at)
    return record[at + 4 : at + 4 + length]


def test_the_cases_cover_every_compression_and_inner_batches() -> None:
    kinds = {case["case"]["compression"] for case in CASES}
    assert kinds == {"LZ4", "ZSTD", "ZLIB", None}
    assert sum(len(case["messages"]) > 1 for case in CASES) >= 6


@pytest.mark.parametrize("case", CASES, ids=[case["case"]["id"] for case in CASES])
def test_what_java_reads_we_read(case: dict[str, Any]) -> None:
    record = base64.b64decode(case["record"])
    messages = unwrap_inner_batches(decode_messages(record))
    assert [as_java_sees(m) for m in messages] == [java_saw(m) for m in case["messages"]]
    for ours, java in zip(messages, case["messages"], strict=True):
        if java.get("offsetMsgId") is not None:
            assert ours.offset_msg_id == java["offsetMsgId"]


def test_one_pull_answer_of_every_record() -> None:
    answer = b"".join(base64.b64decode(case["record"]) for case in CASES)
    messages = unwrap_inner_batches(decode_messages(answer))
    assert [as_java_sees(m) for m in messages] == [java_saw(m) for case in CASES for m in case["messages"]]


@pytest.mark.parametrize("case", CASES, ids=[case["case"]["id"] for case in CASES])
def test_we_compress_and_batch_as_java_does(case: dict[str, Any]) -> None:
    """Our encoders (for tests and the lab) give Java's bytes: its compressors' frames, its batch layout."""
    record = base64.b64decode(case["record"])
    (stored,) = decode_messages(record)
    if stored.sys_flag & 0x80 and stored.sys_flag & 0x40:
        inner = unwrap_inner_batches([stored])
        original = encode_message_batch([(m.flag, m.body, m.properties) for m in inner])
        assert original == stored.body
    else:
        original = stored.body
    compression = case["case"]["compression"]
    expected = original if compression is None else compress_body(original, Compression[compression])
    assert stored_body(record) == expected
