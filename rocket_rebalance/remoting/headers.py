"""Request headers ("extFields") as the Java client fills them, and reading numbers out of response headers.

A Java server decodes a header by the fields of a Java class, from strings (``RemotingCommand
.decodeCommandCustomHeaderDirectly``). A missing ``@CFNotNull`` field is only logged there and fails later with a
null pointer, so every builder here sends every such field, plus the optional ones the Java client sets (``bname``,
the broker name, on queue-level calls). Values are strings as Java's ``toString`` writes them: booleans
``true``/``false``, numbers in decimal. Field names are those of the Java header classes in
``remoting/.../protocol/header/``.
"""

from __future__ import annotations

import re

from rocket_rebalance.model import MessageQueue
from rocket_rebalance.remoting.frame import ProtocolError, RemotingCommand

__all__ = [
    "DEFAULT_TOPIC",
    "PULL_CLASS_FILTER",
    "PULL_COMMIT_OFFSET",
    "PULL_LITE_PULL",
    "PULL_SUBSCRIPTION",
    "PULL_SUSPEND",
    "consumer_send_msg_back",
    "create_topic",
    "get_consume_stats",
    "get_consumer_connection_list",
    "get_consumer_list",
    "get_consumer_running_info",
    "get_max_offset",
    "get_min_offset",
    "get_route_info",
    "int_field",
    "pull_message",
    "pull_sys_flag",
    "query_consumer_offset",
    "search_offset_by_timestamp",
    "send_message_v2",
    "unregister_client",
    "update_consumer_offset",
]

# PullSysFlag.java
PULL_COMMIT_OFFSET = 0x1
PULL_SUSPEND = 0x2
PULL_SUBSCRIPTION = 0x4
PULL_CLASS_FILTER = 0x8
PULL_LITE_PULL = 0x10

DEFAULT_TOPIC = "TBW102"
"""``TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC``: the template topic a broker copies when it auto-creates one."""

_INT = (-(2**31), 2**31 - 1)
_LONG = (-(2**63), 2**63 - 1)
_JAVA_LONG = re.compile(r"[+-]?[0-9]+", re.ASCII)


def _number(name: str, value: int, bounds: tuple[int, int] = _LONG) -> str:
    """``value`` as Java's ``Integer``/``Long.toString``; a bool or a value Java cannot parse is refused here."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not bounds[0] <= value <= bounds[1]:
        raise ValueError(f"{name} {value} is out of range {bounds[0]}..{bounds[1]}")
    return str(value)


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _queue(mq: MessageQueue) -> dict[str, str]:
    """The queue fields of a queue-level header: ``topic``, ``queueId`` and ``bname`` as Java sets them."""
    return {"topic": mq.topic, "queueId": str(mq.queue_id), "bname": mq.broker_name}


def pull_sys_flag(commit_offset: bool, suspend: bool, subscription: bool) -> int:
    """``PullSysFlag.buildSysFlag`` without class filtering (never used by a 5.x consumer)."""
    return (
        (PULL_COMMIT_OFFSET if commit_offset else 0)
        | (PULL_SUSPEND if suspend else 0)
        | (PULL_SUBSCRIPTION if subscription else 0)
    )


def get_route_info(topic: str) -> dict[str, str]:
    """GET_ROUTEINFO_BY_TOPIC. ``acceptStandardJsonOnly`` asks for quoted integer keys whatever our version."""
    return {"topic": topic, "acceptStandardJsonOnly": "true"}


def unregister_client(client_id: str, consumer_group: str) -> dict[str, str]:
    """UNREGISTER_CLIENT of a consumer (``clientID`` is spelled so in Java)."""
    return {"clientID": client_id, "consumerGroup": consumer_group}


def get_consumer_list(consumer_group: str) -> dict[str, str]:
    """GET_CONSUMER_LIST_BY_GROUP."""
    return {"consumerGroup": consumer_group}


def query_consumer_offset(
    consumer_group: str, mq: MessageQueue, set_zero_if_not_found: bool | None = None
) -> dict[str, str]:
    """QUERY_CONSUMER_OFFSET.

    ``setZeroIfNotFound`` is left out by default, as the Java consumer leaves it out: then a broker answers
    offset 0 for a group without an offset on a queue whose first message is still in memory, instead of
    QUERY_NOT_FOUND. Sending ``false`` always gets QUERY_NOT_FOUND, which is not what a Java peer would see.
    """
    ext = {"consumerGroup": consumer_group, **_queue(mq)}
    if set_zero_if_not_found is not None:
        ext["setZeroIfNotFound"] = _flag(set_zero_if_not_found)
    return ext


def update_consumer_offset(consumer_group: str, mq: MessageQueue, offset: int) -> dict[str, str]:
    """UPDATE_CONSUMER_OFFSET."""
    return {"consumerGroup": consumer_group, **_queue(mq), "commitOffset": _number("offset", offset)}


def pull_message(
    consumer_group: str,
    mq: MessageQueue,
    queue_offset: int,
    max_msg_nums: int,
    sys_flag: int,
    commit_offset: int,
    suspend_timeout_ms: int,
    sub_version: int,
    subscription: str | None = None,
    expression_type: str = "TAG",
    max_msg_bytes: int | None = None,
) -> dict[str, str]:
    """PULL_MESSAGE, every ``@CFNotNull`` field of ``PullMessageRequestHeader`` included.

    ``subscription`` is read by the broker only with the SUBSCRIPTION sys flag; the Java push consumer sends
    neither (it relies on its heartbeat), hence the default.
    """
    ext = {
        "consumerGroup": consumer_group,
        **_queue(mq),
        "queueOffset": _number("queue_offset", queue_offset),
        "maxMsgNums": _number("max_msg_nums", max_msg_nums, _INT),
        "sysFlag": _number("sys_flag", sys_flag, _INT),
        "commitOffset": _number("commit_offset", commit_offset),
        "suspendTimeoutMillis": _number("suspend_timeout_ms", suspend_timeout_ms),
        "subVersion": _number("sub_version", sub_version),
        "expressionType": expression_type,
    }
    if subscription is not None:
        ext["subscription"] = subscription
    if max_msg_bytes is not None:
        ext["maxMsgBytes"] = _number("max_msg_bytes", max_msg_bytes, _INT)
    return ext


def get_max_offset(mq: MessageQueue) -> dict[str, str]:
    """GET_MAX_OFFSET. ``committed`` is a primitive ``boolean`` defaulting to true, so Java always sends it."""
    return {**_queue(mq), "committed": "true"}


def get_min_offset(mq: MessageQueue) -> dict[str, str]:
    """GET_MIN_OFFSET."""
    return _queue(mq)


def search_offset_by_timestamp(mq: MessageQueue, timestamp_ms: int, boundary: str = "lower") -> dict[str, str]:
    """SEARCH_OFFSET_BY_TIMESTAMP. Java sends the ``BoundaryType`` enum's name (``LOWER``/``UPPER``); the broker
    reads it case-blind."""
    if boundary.lower() not in ("lower", "upper"):
        raise ValueError(f"boundary must be 'lower' or 'upper', got {boundary!r}")
    return {**_queue(mq), "timestamp": _number("timestamp_ms", timestamp_ms), "boundaryType": boundary.upper()}


def send_message_v2(
    producer_group: str,
    mq: MessageQueue,
    properties: str,
    born_timestamp_ms: int,
    sys_flag: int = 0,
    flag: int = 0,
    reconsume_times: int = 0,
    max_reconsume_times: int | None = None,
    batch: bool = False,
    unit_mode: bool = False,
    default_topic_queue_nums: int = 4,
) -> dict[str, str]:
    """SEND_MESSAGE_V2, with the one-letter names of ``SendMessageRequestHeaderV2``.

    ``properties`` is the encoded property string (``message.encode_properties``). ``max_reconsume_times`` is
    sent by Java only for retry-topic messages.
    """
    ext = {
        "a": producer_group,
        "b": mq.topic,
        "c": DEFAULT_TOPIC,
        "d": _number("default_topic_queue_nums", default_topic_queue_nums, _INT),
        "e": str(mq.queue_id),
        "f": _number("sys_flag", sys_flag, _INT),
        "g": _number("born_timestamp_ms", born_timestamp_ms),
        "h": _number("flag", flag, _INT),
        "i": properties,
        "j": _number("reconsume_times", reconsume_times, _INT),
        "k": _flag(unit_mode),
        "m": _flag(batch),
        "n": mq.broker_name,
    }
    if max_reconsume_times is not None:
        ext["l"] = _number("max_reconsume_times", max_reconsume_times, _INT)
    return ext


def consumer_send_msg_back(
    group: str,
    commit_log_offset: int,
    delay_level: int,
    origin_msg_id: str,
    origin_topic: str,
    max_reconsume_times: int,
    broker_name: str | None = None,
) -> dict[str, str]:
    """CONSUMER_SEND_MSG_BACK: ``offset`` is the message's commit-log offset; ``unitMode`` is a primitive
    ``boolean``, so Java always sends it."""
    ext = {
        "offset": _number("commit_log_offset", commit_log_offset),
        "group": group,
        "delayLevel": _number("delay_level", delay_level, _INT),
        "originMsgId": origin_msg_id,
        "originTopic": origin_topic,
        "unitMode": "false",
        "maxReconsumeTimes": _number("max_reconsume_times", max_reconsume_times, _INT),
    }
    if broker_name is not None:
        ext["bname"] = broker_name
    return ext


def create_topic(
    topic: str, read_queue_nums: int, write_queue_nums: int, perm: int = 6, order: bool = False
) -> dict[str, str]:
    """UPDATE_AND_CREATE_TOPIC as ``MQClientAPIImpl.createTopic`` sends it for a plain topic (no attributes).

    ``force`` is a ``Boolean`` defaulting to false, so Java sends it too.
    """
    return {
        "topic": topic,
        "defaultTopic": DEFAULT_TOPIC,
        "readQueueNums": _number("read_queue_nums", read_queue_nums, _INT),
        "writeQueueNums": _number("write_queue_nums", write_queue_nums, _INT),
        "perm": _number("perm", perm, _INT),
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0",
        "order": _flag(order),
        "attributes": "",
        "force": "false",
    }


def get_consumer_connection_list(consumer_group: str) -> dict[str, str]:
    """GET_CONSUMER_CONNECTION_LIST."""
    return {"consumerGroup": consumer_group}


def get_consume_stats(consumer_group: str, topic: str | None = None) -> dict[str, str]:
    """GET_CONSUME_STATS; without a topic the broker reports every topic the group subscribes to."""
    ext = {"consumerGroup": consumer_group}
    if topic is not None:
        ext["topic"] = topic
    return ext


def get_consumer_running_info(consumer_group: str, client_id: str, jstack: bool = False) -> dict[str, str]:
    """GET_CONSUMER_RUNNING_INFO (``jstackEnable`` is a primitive ``boolean``: always sent)."""
    return {"consumerGroup": consumer_group, "clientId": client_id, "jstackEnable": _flag(jstack)}


def int_field(command: RemotingCommand, name: str, what: str = "response") -> int:
    """A numeric response-header field, parsed as Java's ``Long.parseLong`` parses it.

    ``what`` names the command in the error, e.g. ``"response to PULL_MESSAGE"`` gives
    ``response to PULL_MESSAGE lacks nextBeginOffset``.
    """
    value = command.ext.get(name)
    if value is None:
        raise ProtocolError(f"{what} lacks {name}")
    number = int(value) if _JAVA_LONG.fullmatch(value) and len(value) <= 40 else None  # 40: leading zeros allowed
    if number is None or not _LONG[0] <= number <= _LONG[1]:
        raise ProtocolError(f"{what} has {name}={value[:40]!r}, not a 64-bit integer")
    return number
