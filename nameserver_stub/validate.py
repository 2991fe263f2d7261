"""Checks of request fields that need no server state, turning wire messages into plain values.

Every refusal is an :class:`~nameserver_stub.errors.InvalidArgument` naming the field and saying what was
wrong. Names follow RocketMQ's rules (``rocket_rebalance.model``); anything that depends on state (unknown
broker or topic, queue ID beyond the topic's queues) is checked by the cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nameserver_stub.errors import InvalidArgument
from nameserver_stub.faults import MAX_DELAY_MS, Fault, FaultKind
from nameserver_stub.registry import GroupMembership, Subscription
from nameserver_stub.store import NewMessage, QueueKey
from rocket_rebalance._proto.v1 import admin_pb2, common_pb2
from rocket_rebalance._proto.v1 import broker_pb2 as pb
from rocket_rebalance.model import JAVA_INT_MAX, check_group_name, check_topic_name

MAX_MESSAGE_SIZE = 4 * 1024 * 1024  # RocketMQ's default maxMessageSize
MAX_CLIENT_ID_LENGTH = 1024
# A heartbeat is kept in memory until the client's next one (or its expiry), for every client: these bound what one
# client can make the stub hold. A Java client with dozens of consumers sends a few kilobytes.
MAX_HEARTBEAT_BYTES = 1024 * 1024
MAX_HEARTBEAT_GROUPS = 1024
MAX_SUBSCRIPTIONS = 1024  # per group
MAX_PULL_NUMS = 1024
DEFAULT_PULL_NUMS = 32
DEFAULT_PULL_BYTES = 4 * 1024 * 1024
MAX_PULL_BYTES = 8 * 1024 * 1024  # a reply is built in memory: 1024 bodies of 4 MiB would be 4 GiB
SUPPORTED_EXPRESSION_TYPES = ("", "TAG")
# A running-info report is held until the operator takes it, and handed on in one answer, which gRPC clients
# receive up to 4 MiB by default; a consumer holding thousands of queues sends a few hundred kilobytes.
MAX_REPORT_BYTES = 4 * 1024 * 1024 - 64 * 1024
MAX_REQUEST_ID_LENGTH = 64
DEFAULT_RUNNING_INFO_TIMEOUT_MS = 5000
MAX_RUNNING_INFO_TIMEOUT_MS = 60000


def topic(value: str, field: str = "topic") -> str:
    try:
        return check_topic_name(value)
    except ValueError as error:
        raise InvalidArgument(f"{field}: {error}") from None


def group(value: str, field: str = "consumer_group") -> str:
    try:
        return check_group_name(value)
    except ValueError as error:
        raise InvalidArgument(f"{field}: {error}") from None


def optional_group(value: str, field: str = "consumer_group") -> str | None:
    return group(value, field) if value else None


def broker_name(value: str, field: str = "broker_name") -> str:
    """Only emptiness is checked here; an unknown broker is NOT_FOUND, from the cluster."""
    if not value:
        raise InvalidArgument(f"{field} is empty: every broker call names the broker it goes to")
    return value


def client_id(value: str, field: str = "client_id") -> str:
    if not value:
        raise InvalidArgument(f"{field} is empty")
    if len(value) > MAX_CLIENT_ID_LENGTH:
        raise InvalidArgument(f"{field} is {len(value)} characters long, at most {MAX_CLIENT_ID_LENGTH} allowed")
    return value


def queue_id(value: int, field: str = "queue_id") -> int:
    if value < 0:
        raise InvalidArgument(f"{field} {value} is negative")
    if value > JAVA_INT_MAX:  # cannot happen with int32 on the wire, kept for direct callers
        raise InvalidArgument(f"{field} {value} is above {JAVA_INT_MAX}")
    return value


def non_negative(value: int, field: str) -> int:
    if value < 0:
        raise InvalidArgument(f"{field} {value} is negative")
    return value


def queues(broker: str, items: Sequence[common_pb2.MessageQueue], field: str = "queues") -> list[QueueKey]:
    """Queues of a broker request: valid topic, broker empty or the request's broker, queue ID >= 0, no repeats."""
    keys: list[QueueKey] = []
    seen: set[QueueKey] = set()
    for position, item in enumerate(items):
        where = f"{field}[{position}]"
        if item.broker_name and item.broker_name != broker:
            raise InvalidArgument(
                f"{where}.broker_name {item.broker_name!r} differs from the broker the request went to ({broker!r})"
            )
        key = (topic(item.topic, f"{where}.topic"), queue_id(item.queue_id, f"{where}.queue_id"))
        if key in seen:
            raise InvalidArgument(f"{where} repeats queue {key[0]}/{key[1]}")
        seen.add(key)
        keys.append(key)
    return keys


def queue_offsets(
    broker: str, items: Sequence[common_pb2.QueueOffset], field: str = "offsets"
) -> list[tuple[QueueKey, int]]:
    keys = queues(broker, [item.queue for item in items], field)
    return [
        (key, non_negative(item.offset, f"{field}[{position}].offset"))
        for position, (key, item) in enumerate(zip(keys, items, strict=True))
    ]


def running_info_timeout(value: int) -> float:
    """Seconds an operator waits for a consumer's answer: ``timeout_ms`` 0 means the default."""
    if not 0 <= value <= MAX_RUNNING_INFO_TIMEOUT_MS:
        raise InvalidArgument(f"timeout_ms {value} is outside 0..{MAX_RUNNING_INFO_TIMEOUT_MS} (0: 5000)")
    return (value or DEFAULT_RUNNING_INFO_TIMEOUT_MS) / 1000


def running_info_report(request: pb.ReportRunningInfoRequest) -> tuple[str, str, str, str]:
    """Check a consumer's report before it is matched to its request: (broker, client ID, request ID, group)."""
    size = request.ByteSize()
    if size > MAX_REPORT_BYTES:
        raise InvalidArgument(f"the report is {size} bytes, more than the {MAX_REPORT_BYTES}-byte limit")
    if not request.request_id or len(request.request_id) > MAX_REQUEST_ID_LENGTH:
        raise InvalidArgument(
            f"request_id must be the ID of the running-info request (1..{MAX_REQUEST_ID_LENGTH} characters), "
            f"got {len(request.request_id)} characters"
        )
    seen: set[tuple[str, str, int]] = set()
    for position, row in enumerate(request.queues):
        where = f"queues[{position}].queue"
        key = (
            topic(row.queue.topic, f"{where}.topic"),
            broker_name(row.queue.broker_name, f"{where}.broker_name"),
            queue_id(row.queue.queue_id, f"{where}.queue_id"),
        )
        if key in seen:
            raise InvalidArgument(f"{where} repeats queue {key[0]}/{key[1]}/{key[2]}")
        seen.add(key)
    return (
        broker_name(request.broker_name),
        client_id(request.client_id),
        request.request_id,
        group(request.consumer_group),
    )


def _enum(value: int, enum: Any, field: str) -> int:
    """``value`` must be a known, specified value of the wire enum (proto3 enums accept any int32)."""
    names: dict[int, str] = {number: name for name, number in enum.items()}
    if value not in names or value == 0:
        known = ", ".join(names[number] for number in sorted(names) if number)
        raise InvalidArgument(f"{field} {value} is not a known value ({known})")
    return value


def heartbeat_size(request: pb.HeartbeatRequest) -> None:
    """Refuse a heartbeat too large to keep, before anything of it is turned into registry entries."""
    size = request.ByteSize()
    if size > MAX_HEARTBEAT_BYTES:
        raise InvalidArgument(f"the heartbeat is {size} bytes, more than the {MAX_HEARTBEAT_BYTES}-byte (1 MiB) limit")
    if len(request.consumer_datas) > MAX_HEARTBEAT_GROUPS:
        raise InvalidArgument(
            f"consumer_datas has {len(request.consumer_datas)} groups, at most {MAX_HEARTBEAT_GROUPS} allowed"
        )


def memberships(items: Sequence[pb.ConsumerData]) -> list[GroupMembership]:
    result: list[GroupMembership] = []
    seen: set[str] = set()
    for position, data in enumerate(items):
        where = f"consumer_datas[{position}]"
        name = group(data.group_name, f"{where}.group_name")
        if name in seen:
            raise InvalidArgument(f"{where}.group_name {name!r} appears twice in one heartbeat")
        seen.add(name)
        result.append(
            GroupMembership(
                name,
                _enum(data.consume_type, common_pb2.ConsumeType, f"{where}.consume_type"),
                _enum(data.message_model, common_pb2.MessageModel, f"{where}.message_model"),
                _enum(data.consume_from_where, common_pb2.ConsumeFromWhere, f"{where}.consume_from_where"),
                subscriptions(data.subscriptions, f"{where}.subscriptions"),
            )
        )
    return result


def subscriptions(items: Sequence[common_pb2.SubscriptionData], field: str) -> tuple[Subscription, ...]:
    if len(items) > MAX_SUBSCRIPTIONS:
        raise InvalidArgument(f"{field} has {len(items)} entries, at most {MAX_SUBSCRIPTIONS} allowed")
    result: dict[str, Subscription] = {}
    for position, sub in enumerate(items):
        where = f"{field}[{position}]"
        name = topic(sub.topic, f"{where}.topic")
        if name in result:
            raise InvalidArgument(f"{where}.topic {name!r} appears twice")
        if sub.expression_type.upper() not in SUPPORTED_EXPRESSION_TYPES:
            raise InvalidArgument(
                f"{where}.expression_type {sub.expression_type!r} is not supported (only TAG filtering)"
            )
        result[name] = Subscription(name, sub.sub_string or "*", sub.expression_type.upper() or "TAG", sub.sub_version)
    return tuple(result.values())


def messages(items: Sequence[pb.MessageToSend], born_default: int) -> list[NewMessage]:
    if not items:
        raise InvalidArgument("messages is empty: send at least one message")
    result: list[NewMessage] = []
    for position, item in enumerate(items):
        size = len(item.body)
        if size == 0:
            raise InvalidArgument(f"messages[{position}].body is empty")
        if size > MAX_MESSAGE_SIZE:
            raise InvalidArgument(
                f"messages[{position}].body is {size} bytes, more than the {MAX_MESSAGE_SIZE}-byte (4 MiB) limit"
            )
        result.append(
            NewMessage(
                item.body,
                item.tags,
                item.keys,
                tuple(sorted(item.properties.items())),
                item.born_timestamp_ms or born_default,
            )
        )
    return result


def pull_nums(value: int) -> int:
    if value < 0:
        raise InvalidArgument(f"max_msg_nums {value} is negative")
    return min(value or DEFAULT_PULL_NUMS, MAX_PULL_NUMS)


def pull_bytes(value: int) -> int:
    if value < 0:
        raise InvalidArgument(f"max_bytes {value} is negative")
    return min(value or DEFAULT_PULL_BYTES, MAX_PULL_BYTES)


def fault(item: admin_pb2.Fault) -> Fault:
    kind = _enum(item.kind, admin_pb2.FaultKind, "fault.kind")
    if not 0 <= item.delay_ms <= MAX_DELAY_MS:
        raise InvalidArgument(f"fault.delay_ms {item.delay_ms} is outside 0..{MAX_DELAY_MS}")
    if item.delay_ms and kind != FaultKind.DELAY_NOTIFICATIONS:
        raise InvalidArgument("fault.delay_ms is only for DELAY_NOTIFICATIONS")
    if item.client_id:
        client_id(item.client_id, "fault.client_id")
    return Fault(FaultKind(kind), item.client_id, item.delay_ms)
