"""Topic routes: which brokers serve a topic, and the queues a consumer subscribes to because of it.

The JSON shape is RocketMQ's ``TopicRouteData`` as ``mqadmin topicRoute`` prints it (and as
``GetRouteInfoByTopic`` returns it)::

    {"queueDatas": [{"brokerName": "broker-a", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}, ...],
     "brokerDatas": [...]}

Only ``queueDatas`` matters for allocation: a consumer takes queues 0 .. readQueueNums-1 of every broker whose
``perm`` is readable (bit 4), in route order, which is the insertion order of the Java client's queue set.
``writeQueueNums`` defaults to ``readQueueNums``, ``perm`` to 6 (read and write); other fields are ignored.
A malformed file is a :class:`RouteError` naming the field and the line. Pure: parsing text, no file access.

The topic is checked by the library's one name check, as Java's ``TopicValidator``. Limits, so that a typo cannot
make a preview allocate gigabytes: a route holds at most :data:`~rocket_rebalance.model.MAX_TOPIC_QUEUES` readable
queues over all its brokers, and names at most :data:`~rocket_rebalance.model.MAX_ROUTE_BROKERS` brokers (a
:class:`TooManyBrokersError` past it: a consumer keeps a connection, a heartbeat and a notification stream per
broker), whatever its source (a file, the stub, a RocketMQ name server); JSON nests at most :data:`MAX_JSON_DEPTH`
deep. Parsing is linear in the text.
"""

from __future__ import annotations

import bisect
import json
import json.scanner
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from rocket_rebalance.model import (
    JAVA_INT_MAX,
    MAX_ROUTE_BROKERS,
    MAX_TOPIC_QUEUES,
    PERM_READ,
    PERM_WRITE,
    MessageQueue,
    check_topic_name,
)

__all__ = [
    "MAX_JSON_DEPTH",
    "QueueData",
    "RouteError",
    "TooManyBrokersError",
    "TopicRoute",
]

MAX_JSON_DEPTH = 64  # a TopicRouteData nests 4 deep; Python's parser recurses and would overflow near 1,000


class RouteError(ValueError):
    """A route that cannot be used; the message names the source, line and field."""


class TooManyBrokersError(RouteError):
    """A route naming more than :data:`~rocket_rebalance.model.MAX_ROUTE_BROKERS` brokers."""


@dataclass(frozen=True)
class QueueData:
    """One broker's share of a topic (RocketMQ's ``QueueData``)."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int = PERM_READ | PERM_WRITE

    @property
    def readable(self) -> bool:
        return bool(self.perm & PERM_READ)

    @property
    def writable(self) -> bool:
        return bool(self.perm & PERM_WRITE)

    def to_dict(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums,
            "perm": self.perm,
        }


@dataclass(frozen=True)
class TopicRoute:
    """A topic's route: its queue datas in the order the name server gave them. The topic follows RocketMQ's name
    rules (:func:`~rocket_rebalance.model.check_topic_name`), whatever the route's source, else :class:`RouteError`."""

    topic: str
    queue_datas: tuple[QueueData, ...]
    masterless: frozenset[str] = frozenset()
    """Broker sets the route names with no master address (broker ID 0): the master is down and a slave serves
    its reads. Known only from a name server's answer (its ``brokerDatas``); route files and the stub leave it
    empty."""

    def __post_init__(self) -> None:
        try:
            check_topic_name(self.topic)
        except ValueError as error:
            raise RouteError(str(error)) from None
        if len(self.queue_datas) > MAX_ROUTE_BROKERS:  # checked first: it is also what bounds the sums below
            count, names = len(self.queue_datas), len({data.broker_name for data in self.queue_datas})
            named = f"{count} brokers" if names == count else f"{count} queue datas ({names} brokers)"
            raise TooManyBrokersError(
                f"the route of topic {self.topic} names {named}; the limit is {MAX_ROUTE_BROKERS} brokers per route"
            )
        for kind, total in (
            ("readable", sum(data.read_queue_nums for data in self.queue_datas if data.readable)),
            ("writable", sum(data.write_queue_nums for data in self.queue_datas if data.writable)),
        ):
            if total > MAX_TOPIC_QUEUES:
                raise RouteError(
                    f"topic {self.topic} would have {total} {kind} queues; the limit is {MAX_TOPIC_QUEUES} per topic"
                )

    def subscribe_queues(self) -> list[MessageQueue]:
        """The queues a consumer subscribes to, in route order (Java's ``topicRouteData2TopicSubscribeInfo``)."""
        return [
            MessageQueue(self.topic, data.broker_name, queue_id)
            for data in self.queue_datas
            if data.readable
            for queue_id in range(data.read_queue_nums)
        ]

    def brokers(self) -> list[str]:
        return [data.broker_name for data in self.queue_datas]

    def member_list_broker(self) -> str | None:
        """The broker asked for the group's member list of this topic: the one of the route's first queue data, in
        the name server's order; None when the route names no broker (that fetch counts as failed).

        Every consumer of this library asks that same broker, so the whole group reads one broker's view (brokers
        can disagree for a moment after a member comes or goes); Java asks a random broker of the topic. This is
        the one place of the rule: the runtime sends it to the core with the route, and operator reads use it.
        """
        return self.queue_datas[0].broker_name if self.queue_datas else None

    def without_brokers(self, broker_names: Iterable[str]) -> TopicRoute:
        """The route once these brokers are down: a broker going down leaves every route it served."""
        gone = set(broker_names)
        unknown = sorted(gone - set(self.brokers()))
        if unknown:
            raise RouteError(
                f"topic {self.topic} has no broker {', '.join(unknown)}; brokers: {', '.join(self.brokers())}"
            )
        return replace(self, queue_datas=tuple(data for data in self.queue_datas if data.broker_name not in gone))

    def to_dict(self) -> dict[str, Any]:
        return {"queueDatas": [data.to_dict() for data in self.queue_datas]}

    @classmethod
    def from_json(cls, topic: str, text: str, source: str = "route") -> TopicRoute:
        """Parse RocketMQ's route JSON; errors say ``<source> line N: <field> ...``."""
        depth = _max_depth(text)
        if depth > MAX_JSON_DEPTH:
            raise RouteError(f"{source}: JSON nested {depth} deep; a route nests 4 deep (limit {MAX_JSON_DEPTH})")
        try:
            document = _load_with_lines(text)
        except json.JSONDecodeError as error:
            raise RouteError(f"{source} line {error.lineno}: not valid JSON ({error.msg})") from None
        if not isinstance(document, dict):
            raise RouteError(f"{source} line 1: expected an object with a queueDatas list")
        datas = document.get("queueDatas")
        if not isinstance(datas, list):
            raise RouteError(f"{source} line {_line(document)}: queueDatas must be a list of queue datas")
        return cls(topic, tuple(_queue_data(item, f"queueDatas[{i}]", source) for i, item in enumerate(datas)))


def _count(item: dict[str, Any], key: str, field: str, source: str, default: int | None = None) -> int:
    value = item.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= JAVA_INT_MAX:
        raise RouteError(f"{source} line {_line(item)}: {field}.{key} must be a whole number >= 0, got {value!r}")
    return value


def _queue_data(item: object, field: str, source: str) -> QueueData:
    if not isinstance(item, dict):
        raise RouteError(f"{source}: {field} must be an object, got {item!r}")
    name = item.get("brokerName")
    if not isinstance(name, str) or not name:
        raise RouteError(f"{source} line {_line(item)}: {field}.brokerName must be a non-empty string, got {name!r}")
    reads = _count(item, "readQueueNums", field, source)
    return QueueData(
        name,
        reads,
        _count(item, "writeQueueNums", field, source, default=reads),
        _count(item, "perm", field, source, default=PERM_READ | PERM_WRITE),
    )


class _LineDict(dict[str, Any]):
    """A JSON object that remembers the line it started on, so errors can point at it."""

    line = 1


def _line(item: object) -> int:
    return item.line if isinstance(item, _LineDict) else 1


def _max_depth(text: str) -> int:
    """How deep the brackets of ``text`` nest, strings skipped: checked before parsing, which recurses."""
    depth = deepest = 0
    for token in _BRACKETS_OUTSIDE_STRINGS.finditer(text):
        bracket = token.group(1)
        if bracket is None:  # a string
            continue
        if bracket in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


_BRACKETS_OUTSIDE_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|([\[\]{}])')


def _load_with_lines(text: str) -> Any:
    """``json.loads`` whose objects are :class:`_LineDict` s carrying their starting line.

    Line numbers come from a bisection over the newline positions, found once, so parsing stays linear.
    """
    decoder = json.JSONDecoder()
    parse_object = getattr(decoder, "parse_object")  # noqa: B009 - not declared by typeshed
    newlines = [match.start() for match in re.finditer("\n", text)]

    def parse_with_line(state: tuple[str, int], *args: Any) -> tuple[dict[str, Any], int]:
        _, start = state
        value, end = parse_object(state, *args)
        positioned = _LineDict(value)
        positioned.line = bisect.bisect_left(newlines, start) + 1
        return positioned, end

    # The pure-Python scanner looks parse_object up on the decoder, so replacing it there is enough; typeshed
    # does not declare these attributes, hence setattr/getattr.
    setattr(decoder, "parse_object", parse_with_line)  # noqa: B010
    setattr(decoder, "scan_once", getattr(json.scanner, "py_make_scanner")(decoder))  # noqa: B009, B010
    return decoder.decode(text)
