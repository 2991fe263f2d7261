"""Message trace records as the Java client writes them (pure): what ``mqadmin queryMsgTraceById`` and the
dashboard read back from the trace topic.

A consumer with trace on writes, for each listener call, a ``SubBefore`` record (before the call: when, the
group, the messages' IDs, keys and reconsume counts) and a ``SubAfter`` record (after it: the cost per message,
success and how the call ended), sharing one request ID. Records are text: fields joined by ``\\x01``, each record
ended by ``\\x02``, one record per message of the call (Java's ``TraceDataEncoder.encoderFromContextBean``, 5.3.3).
Many records travel in one message to the trace topic, whose keys are every message ID and key the records name,
so that the broker's index finds the trace by the traced message's ID (``queryMessage`` by key, which is what
``queryMsgTraceById`` does). ``tests/golden/trace_cases.jsonl`` holds Java's own output for the encoder.

Pure, like :mod:`~rocket_rebalance.subscription`, and beside it rather than in the remoting codec: trace records are
an ordinary message's body, which either wire sends.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

__all__ = [
    "CONTENT_SEPARATOR",
    "FIELD_SEPARATOR",
    "MAX_TRACE_BATCH_NUM",
    "MAX_TRACE_MESSAGE_SIZE",
    "TRACE_BATCH_NUM",
    "TRACE_TOPIC",
    "ConsumeReturnType",
    "SubAfter",
    "SubBefore",
    "TraceBean",
    "TraceRecord",
    "encode_record",
    "record_keys",
    "trace_messages",
]

TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"  # Java's TopicValidator.RMQ_SYS_TRACE_TOPIC, the default trace topic
TRACE_BATCH_NUM = 10  # Java's ClientConfig.traceMsgBatchNum: records sent together
MAX_TRACE_BATCH_NUM = 20  # AsyncTraceDispatcher caps the batch there
MAX_TRACE_MESSAGE_SIZE = 128_000  # the trace producer's maxMessageSize: a longer batch is split
CONTENT_SEPARATOR = "\x01"  # between a record's fields (TraceConstants.CONTENT_SPLITOR)
FIELD_SEPARATOR = "\x02"  # after each record (TraceConstants.FIELD_SPLITOR)
KEY_SEPARATOR = " "  # MessageConst.KEY_SEPARATOR: a message's keys are space-separated


class ConsumeReturnType(IntEnum):
    """How a listener call ended (Java's ``ConsumeReturnType``; a SubAfter record carries its ordinal as the
    context code)."""

    SUCCESS = 0
    TIME_OUT = 1
    EXCEPTION = 2
    RETURNNULL = 3
    FAILED = 4


@dataclass(frozen=True, slots=True)
class TraceBean:
    """One traced message: its ID (the producer's ``UNIQ_KEY``), keys (``None`` when it has none, which Java
    writes as ``null``), how often it was consumed before, and its topic (which batches records by origin)."""

    msg_id: str
    keys: str | None
    retry_times: int
    topic: str


@dataclass(frozen=True, slots=True)
class SubBefore:
    """Written before a listener call: when (epoch ms), the broker's region, the group (without namespace)."""

    timestamp_ms: int
    region_id: str
    group: str
    request_id: str
    beans: tuple[TraceBean, ...]


@dataclass(frozen=True, slots=True)
class SubAfter:
    """Written after a listener call: the call's time divided by its messages (ms), whether it consumed them, how
    it ended (:class:`ConsumeReturnType`), when the record was made (epoch ms) and the group."""

    request_id: str
    beans: tuple[TraceBean, ...]
    cost_time_ms: int
    success: bool
    context_code: int
    timestamp_ms: int
    group: str


TraceRecord = SubBefore | SubAfter


def _java(value: str | None) -> str:
    """A string as Java's ``StringBuilder.append`` writes it: ``null`` for none."""
    return "null" if value is None else value


def encode_record(record: TraceRecord) -> str:
    """One trace record per bean, as ``TraceDataEncoder.encoderFromContextBean`` writes them (a SubAfter with the
    timestamp and group that a non-cloud access channel adds)."""
    c = CONTENT_SEPARATOR
    if isinstance(record, SubBefore):
        head = f"SubBefore{c}{record.timestamp_ms}{c}{record.region_id}{c}{record.group}{c}{record.request_id}{c}"
        return "".join(
            f"{head}{bean.msg_id}{c}{bean.retry_times}{c}{_java(bean.keys)}{FIELD_SEPARATOR}" for bean in record.beans
        )
    success = "true" if record.success else "false"
    return "".join(
        f"SubAfter{c}{record.request_id}{c}{bean.msg_id}{c}{record.cost_time_ms}{c}{success}{c}{_java(bean.keys)}{c}"
        f"{record.context_code}{c}{record.timestamp_ms}{c}{record.group}{FIELD_SEPARATOR}"
        for bean in record.beans
    )


def record_keys(record: TraceRecord) -> list[str]:
    """The keys the trace message carries for ``record``: each bean's message ID, then its own keys."""
    keys: list[str] = []
    for bean in record.beans:
        keys.append(bean.msg_id)
        if bean.keys:
            keys += bean.keys.split(KEY_SEPARATOR)
    return keys


def trace_messages(
    records: Iterable[TraceRecord], max_size: int = MAX_TRACE_MESSAGE_SIZE
) -> list[tuple[str, list[str]]]:
    """The trace messages for ``records`` (body text, keys without repeats), as Java's ``AsyncDataSendTask``
    builds them: one run of messages per origin topic (the first bean's), records appended in order, a message
    closed as soon as its body reaches ``max_size``. Records without beans are left out, as Java leaves them."""
    by_topic: dict[str, list[TraceRecord]] = {}
    for record in records:
        if record.beans:
            by_topic.setdefault(record.beans[0].topic, []).append(record)
    messages: list[tuple[str, list[str]]] = []
    for topic_records in by_topic.values():
        body: list[str] = []
        size = 0
        keys: dict[str, None] = {}
        for record in topic_records:
            text = encode_record(record)
            body.append(text)
            size += len(text.encode("utf-16-le", "surrogatepass")) // 2  # Java's StringBuilder length: UTF-16 units
            keys.update(dict.fromkeys(record_keys(record)))
            if size >= max_size:
                messages.append(("".join(body), list(keys)))
                body, size, keys = [], 0, {}
        if body:
            messages.append(("".join(body), list(keys)))
    return messages
