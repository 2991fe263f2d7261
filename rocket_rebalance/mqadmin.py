"""``mqadmin allocateMQ``, reproduced: both what it prints and what consumers would really compute.

mqadmin's command asks AVG for each ID with the queues in Java ``HashSet`` order and the IDs in the order typed,
and prints a ``HashMap``, so its answer can differ from what consumers compute (they sort both lists). This
module computes the consumers' answer (the rebalance's input preparation plus a whole-group plan) and, for
comparison, mqadmin's own: Java's ``String.hashCode``/``MessageQueue.hashCode`` and ``HashMap`` bucket order are
emulated exactly, so the printed JSON matches mqadmin's byte for byte. (Java turns a bucket of eight or more
colliding keys into a tree, which can change the order inside that bucket; that is not emulated.)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from rocket_rebalance.model import MessageQueue, java_string_key, prepare_rebalance_input
from rocket_rebalance.plan import Plan, plan
from rocket_rebalance.route import TopicRoute
from rocket_rebalance.strategies import AllocateMessageQueueStrategy, create_strategy
from rocket_rebalance.strategies.machine_room import java_split

__all__ = [
    "MQADMIN_GROUP",
    "allocate_mq",
    "java_hash_order",
    "java_queue_hash",
    "java_string_hash",
    "mqadmin_allocate_mq",
    "parse_id_list",
    "parse_mqadmin_id_list",
    "to_mqadmin_json",
]

MQADMIN_GROUP = "aa"  # the consumer group mqadmin's allocateMQ passes to the strategy

T = TypeVar("T")


def _to_int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: 31-polynomial over UTF-16 code units, in 32-bit signed arithmetic."""
    units = java_string_key(text)
    value = 0
    for index in range(0, len(units), 2):
        value = (31 * value + (units[index] << 8 | units[index + 1])) & 0xFFFFFFFF
    return _to_int32(value)


def java_queue_hash(mq: MessageQueue) -> int:
    """Java's ``MessageQueue.hashCode`` (brokerName, queueId, topic with prime 31)."""
    value = 31 + java_string_hash(mq.broker_name)
    value = 31 * _to_int32(value) + mq.queue_id
    value = 31 * _to_int32(value) + java_string_hash(mq.topic)
    return _to_int32(value)


def java_hash_order(items: Sequence[T], hash_code: Callable[[T], int]) -> list[T]:
    """The iteration order of a Java ``HashSet``/``HashMap`` into which ``items`` were inserted in this order.

    The table starts at 16 buckets and doubles while it is more than 3/4 full; a key's bucket is
    ``(h ^ (h >>> 16)) & (capacity - 1)``, and a resize keeps the insertion order within a bucket.
    """
    unique = list(dict.fromkeys(items))
    capacity = 16
    while len(unique) > capacity * 3 // 4:
        capacity *= 2

    def bucket(item: T) -> int:
        code = hash_code(item) & 0xFFFFFFFF
        return (code ^ (code >> 16)) & (capacity - 1)

    return sorted(unique, key=bucket)  # sorted() is stable: insertion order within a bucket


def parse_id_list(argument: str) -> list[str]:
    """Client IDs from ``-i``: split on commas, each trimmed; an empty one is an error naming its position."""
    ids = [part.strip() for part in argument.split(",")]
    for position, cid in enumerate(ids, start=1):
        if not cid:
            raise ValueError(f"client ID number {position} in {argument!r} is empty")
    return ids


def parse_mqadmin_id_list(argument: str) -> list[str]:
    """mqadmin's own reading of ``-i``: trim the whole argument once, then Java's ``split(",")``."""
    return java_split(argument.strip(), ",")


def allocate_mq(
    route: TopicRoute, client_ids: Sequence[str], strategy: AllocateMessageQueueStrategy | None = None, group: str = ""
) -> Plan:
    """What consumers with these IDs would really own: the rebalance's sort, then a plan; IDs in Java order."""
    ready = prepare_rebalance_input(route.subscribe_queues(), client_ids, warn=False)  # the command warns
    return plan(strategy or create_strategy("AVG"), group or MQADMIN_GROUP, ready.mq_all, ready.cid_all)


def mqadmin_allocate_mq(route: TopicRoute, client_ids: Sequence[str]) -> Plan:
    """What mqadmin prints: AVG over unsorted queues (HashSet order) and IDs as typed, keys in HashMap order."""
    queues = java_hash_order(route.subscribe_queues(), java_queue_hash)
    strategy = create_strategy("AVG")
    result = {cid: list(strategy.allocate(MQADMIN_GROUP, cid, queues, client_ids) or ()) for cid in client_ids}
    return {cid: result[cid] for cid in java_hash_order(list(client_ids), java_string_hash)}


def to_mqadmin_json(result: Plan, extra: Mapping[str, Any] | None = None) -> str:
    """mqadmin's compact JSON: ``{"result": {id: [{brokerName, queueId, topic}, ...]}}`` (fields alphabetical),
    followed by the ``extra`` fields mqadmin never prints (so that its own output stays byte for byte)."""
    body = {
        cid: [{"brokerName": mq.broker_name, "queueId": mq.queue_id, "topic": mq.topic} for mq in queues]
        for cid, queues in result.items()
    }
    return json.dumps({"result": body, **(extra or {})}, ensure_ascii=False, separators=(",", ":"))
