"""Row-by-row checks of the snapshot tables, with the reason a bad row is rejected.

These are the rules in plain Python; :mod:`rocket_rebalance.pipeline.job` states the same rules as Spark column
expressions (so checking a billion offsets stays in the JVM), and the tests compare the two paths' ``rejected``
tables. Rules that need a whole group (no settings, unknown strategy, a member without subscription) live in
:mod:`rocket_rebalance.pipeline.sides`, where the group is at hand.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from rocket_rebalance.model import GROUP_MAX_LENGTH, MAX_TOPIC_QUEUES, TOPIC_MAX_LENGTH

__all__ = [
    "DUPLICATE_ROUTE",
    "NAME_PATTERN",
    "NOT_AN_OBJECT",
    "ORPHAN_OBSERVED",
    "ROW_CHECKS",
    "TOO_MANY_QUEUES",
    "route_key",
    "row_reason",
    "type_reason",
    "valid_name",
]

NAME_PATTERN = r"^[%|a-zA-Z0-9_-]+\z"
"""RocketMQ's topic and group name rule, in Java regex syntax (``\\z``: no trailing newline accepted)."""

_NAME = re.compile(r"[%|a-zA-Z0-9_-]+")

TOO_MANY_QUEUES = f"read queue count above {MAX_TOPIC_QUEUES}"
"""A route no broker reports (RocketMQ topics have up to a few thousand queues), which would make every consumer
of the topic allocate from billions of queues."""

NOT_AN_OBJECT = "not a JSON object"
"""The reason for a JSON Lines line that is not a JSON object at all (checked before any other rule)."""


def type_reason(column: str, spark_type: str) -> str:
    """The reason for a row whose ``column`` holds a value that is not of the column's type (a string in an int
    column, a number beyond its range): checked before any other rule, since the value cannot even be read."""
    return f"{column} is not a valid {spark_type}"


def valid_name(value: object, max_length: int) -> bool:
    return isinstance(value, str) and len(value) <= max_length and _NAME.fullmatch(value) is not None


Row = Mapping[str, Any]


def _route(row: Row) -> str | None:
    if not valid_name(row.get("topic"), TOPIC_MAX_LENGTH):
        return "invalid topic name"
    if not row.get("broker"):
        return "broker name is missing"
    if row.get("read_queue_nums") is None:
        return "read queue count is missing"
    if row["read_queue_nums"] < 0:
        return "negative read queue count"
    if row["read_queue_nums"] > MAX_TOPIC_QUEUES:
        return TOO_MANY_QUEUES
    if row.get("perm") is not None and row["perm"] < 0:
        return "negative perm"
    return None


def _group(row: Row) -> str | None:
    return None if valid_name(row.get("group"), GROUP_MAX_LENGTH) else "invalid group name"


def _member(row: Row) -> str | None:
    return _group(row) or (None if row.get("client_id") else "client ID is missing")


def _subscription(row: Row) -> str | None:
    return _group(row) or (None if valid_name(row.get("topic"), TOPIC_MAX_LENGTH) else "invalid topic name")


def _queue(row: Row) -> str | None:
    """The checks of a row naming one queue of a group (offsets, observed): group, topic, broker, queue ID."""
    if reason := _subscription(row):
        return reason
    if not row.get("broker"):
        return "broker name is missing"
    if row.get("queue_id") is None or row["queue_id"] < 0:
        return "queue ID is missing or negative"
    return None


def _offset(row: Row) -> str | None:
    if reason := _queue(row):
        return reason
    maximum, committed, in_flight = row.get("max_offset"), row.get("committed_offset"), row.get("in_flight_offset")
    if maximum is None or committed is None:
        return "offset is missing"
    if maximum < 0 or committed < 0:
        return "negative offset"
    if committed > maximum:
        return "committed offset beyond max offset"
    if in_flight is not None and not committed <= in_flight <= maximum:
        return "in-flight offset outside committed..max"
    return None


def _observed(row: Row) -> str | None:
    if reason := _subscription(row) or (None if row.get("client_id") else "client ID is missing"):
        return reason
    return _queue(row)


def _collector_note(row: Row) -> str | None:
    """The collector's own ``rejected`` rows are notes, not data: any row is kept (only its reasons are used)."""
    return None


DUPLICATE_ROUTE = "topic and broker listed more than once in routes"
"""The reason for every ``routes`` row whose topic and broker another row names too (whatever that row's own fate):
the table has one row per topic and broker, two rows (4 and 8 read queues, say) cannot both be true and which one
is cannot be told, so none is used rather than one guessed or both merged. Checked after the row checks (a row
refused for its own reason keeps it), over the whole table."""


def route_key(row: Row) -> tuple[str, str] | None:
    """The topic and broker a ``routes`` row names, for :data:`DUPLICATE_ROUTE`; ``None`` when it names neither
    fully (a line that is no JSON object, a missing column), so such rows are no one's duplicates."""
    topic, broker = row.get("topic"), row.get("broker")
    return (topic, broker) if isinstance(topic, str) and isinstance(broker, str) else None


ORPHAN_OBSERVED = "observed queue of a consumer not in members"
"""The reason for an ``observed`` row whose group and client ID match no (good) ``members`` row: checked after the
row checks, since it needs the members table."""

ROW_CHECKS: dict[str, Callable[[Row], str | None]] = {
    "routes": _route,
    "members": _member,
    "subscriptions": _subscription,
    "groups": _group,
    "offsets": _offset,
    "observed": _observed,
    "rejected": _collector_note,
}


def row_reason(table: str, row: Row) -> str | None:
    """Why ``row`` of ``table`` is rejected, or ``None`` when it is fine."""
    return ROW_CHECKS[table](row)
