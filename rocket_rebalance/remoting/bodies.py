"""Request and response bodies: the JSON a consumer rebalancer sends and reads, typed.

Bodies are fastjson-serialised Java objects (``remoting/.../protocol/{body,heartbeat,route,admin}/``). They are
written here in fastjson's shape, field names and order (fields sorted, nulls left out), so a broker cannot tell
them from a Java client's. They are read with the lenient parser of :mod:`~rocket_rebalance.remoting.fastjson`,
because several keep fastjson's non-standard map keys. A body of the wrong shape is a :class:`ProtocolError` that
names the field (``route.queueDatas[2].readQueueNums ...``).

Enum values travel as Java enum names (``CONSUME_PASSIVELY``, ``CLUSTERING``); a name Java does not know would make
the broker drop the whole heartbeat, so the encoders refuse it with a ``ValueError``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from rocket_rebalance.model import JAVA_INT_MAX, MessageQueue, java_string_key
from rocket_rebalance.remoting import fastjson
from rocket_rebalance.remoting.fastjson import queue_from_json
from rocket_rebalance.remoting.frame import ProtocolError
from rocket_rebalance.route import QueueData, RouteError, TopicRoute
from rocket_rebalance.subscription import SUB_ALL as _SUB_ALL
from rocket_rebalance.subscription import TAG as _TAG
from rocket_rebalance.subscription import SubscriptionExpression

__all__ = [
    "CONSUME_FROM_WHERE",
    "CONSUME_RESULTS",
    "CONSUME_TYPES",
    "MESSAGE_MODELS",
    "ClusterInfo",
    "ConsumeStats",
    "ConsumeStatus",
    "Connection",
    "ConsumerConnection",
    "OffsetWrapper",
    "ProcessQueueInfo",
    "RouteData",
    "RunningInfo",
    "Subscription",
    "encode_check_client",
    "encode_consume_directly_result",
    "encode_consumer_status",
    "encode_heartbeat",
    "encode_lock_body",
    "encode_query_assignment",
    "encode_running_info",
    "parse_cluster_info",
    "parse_consume_stats",
    "parse_reset_offset_body",
    "parse_consumer_connection",
    "parse_consumer_list",
    "parse_lock_result",
    "parse_query_assignment",
    "parse_route",
    "parse_running_info",
    "parse_subscription_groups",
    "parse_topic_list",
]

CONSUME_TYPES = ("CONSUME_ACTIVELY", "CONSUME_PASSIVELY", "CONSUME_POP")
MESSAGE_MODELS = ("BROADCASTING", "CLUSTERING")
CONSUME_FROM_WHERE = (
    "CONSUME_FROM_LAST_OFFSET",
    "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
    "CONSUME_FROM_MIN_OFFSET",
    "CONSUME_FROM_MAX_OFFSET",
    "CONSUME_FROM_FIRST_OFFSET",
    "CONSUME_FROM_TIMESTAMP",
)
CONSUME_RESULTS = ("CR_SUCCESS", "CR_LATER", "CR_ROLLBACK", "CR_COMMIT", "CR_THROW_EXCEPTION", "CR_RETURN_NULL")

_BROKER_ID = re.compile(r"-?[0-9]{1,19}")

_T = TypeVar("_T")


def _encode(document: object) -> bytes:
    return fastjson.dumps(document).encode("utf-8")


def _check_name(kind: str, value: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise ValueError(f"{kind} must be one of {', '.join(allowed)}; got {value!r}")


# ---------------------------------------------------------------------------------------------- reading helpers


def _document(body: bytes, name: str) -> dict[Any, Any]:
    try:
        document = fastjson.loads(body)
    except ProtocolError as error:
        raise ProtocolError(f"{name}: {error}") from None
    return _object(document, name)


def _object(value: object, where: str) -> dict[Any, Any]:
    if not isinstance(value, dict):
        raise ProtocolError(f"{where} must be an object, got {_show(value)}")
    return value


def _list(value: object, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise ProtocolError(f"{where} must be an array, got {_show(value)}")
    return value


def _str(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise ProtocolError(f"{where} must be a string, got {_show(value)}")
    return value


def _int(value: object, where: str, minimum: int = -(2**63), maximum: int = 2**63 - 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= maximum:
        raise ProtocolError(f"{where} must be an integer in {minimum}..{maximum}, got {_show(value)}")
    return value


def _float(value: object, where: str) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ProtocolError(f"{where} must be a number, got {_show(value)}")
    return float(value)


def _bool(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise ProtocolError(f"{where} must be true or false, got {_show(value)}")
    return value


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _required(document: Mapping[Any, Any], key: str, where: str) -> Any:
    value = document.get(key)
    if value is None:
        raise ProtocolError(f"{where}.{key} is missing")
    return value


def _optional(document: Mapping[Any, Any], key: str, default: _T, read: Callable[[object, str], _T], where: str) -> _T:
    """A field fastjson may leave out (Java null), read with ``read`` when present."""
    value = document.get(key)
    return default if value is None else read(value, f"{where}.{key}")


def _object_field(document: Mapping[Any, Any], key: str, where: str) -> dict[Any, Any]:
    """A map field; absent or null (a Java field left null) reads as empty."""
    value = document.get(key)
    return {} if value is None else _object(value, f"{where}.{key}")


def _list_field(document: Mapping[Any, Any], key: str, where: str) -> list[Any]:
    """A collection field; absent or null reads as empty."""
    value = document.get(key)
    return [] if value is None else _list(value, f"{where}.{key}")


def _queue(value: object, where: str) -> MessageQueue:
    try:
        return queue_from_json(value)
    except ProtocolError as error:
        raise ProtocolError(f"{where}: {error}") from None


def _queues(values: Iterable[Any], where: str) -> set[MessageQueue]:
    return {_queue(item, f"{where}[{index}]") for index, item in enumerate(values)}


# ---------------------------------------------------------------------------------------------- subscriptions


@dataclass(frozen=True)
class Subscription:
    """One topic subscription of a group (Java's ``SubscriptionData``).

    ``sub_string`` is ``*`` (everything) or tags joined by ``||``; ``sub_version`` is the millisecond version the
    broker compares pull requests with. Tag sets and hash codes are derived as ``FilterAPI.buildSubscriptionData``
    derives them; a non-TAG expression (SQL92) carries neither.
    """

    topic: str
    sub_string: str
    sub_version: int
    expression_type: str = _TAG

    def _tags(self) -> tuple[str, ...]:
        """Derived by :class:`~rocket_rebalance.subscription.SubscriptionExpression`, which mirrors Java's
        ``FilterAPI``; any other expression type (SQL92, or one a broker reports that we do not know) has none."""
        return SubscriptionExpression(self.sub_string).tags if self.expression_type == _TAG else ()

    @property
    def tags_set(self) -> tuple[str, ...]:
        return self._tags()

    @property
    def code_set(self) -> tuple[int, ...]:
        return SubscriptionExpression(self.sub_string).codes if self.expression_type == _TAG else ()

    def to_json(self) -> dict[str, Any]:
        """The ``SubscriptionData`` object; an empty TAG expression is sent as ``*``, as Java normalises it."""
        sub_string = _SUB_ALL if self.expression_type == _TAG and not self.sub_string else self.sub_string
        return {
            "classFilterMode": False,
            "codeSet": list(self.code_set),
            "expressionType": self.expression_type,
            "subString": sub_string,
            "subVersion": self.sub_version,
            "tagsSet": list(self.tags_set),
            "topic": self.topic,
        }


def _subscription(value: object, where: str) -> Subscription:
    document = _object(value, where)
    return Subscription(
        topic=_str(_required(document, "topic", where), f"{where}.topic"),
        sub_string=_optional(document, "subString", _SUB_ALL, _str, where),
        sub_version=_optional(document, "subVersion", 0, _int, where),
        expression_type=_optional(document, "expressionType", _TAG, _str, where),
    )


# ---------------------------------------------------------------------------------------------- routes, cluster


@dataclass(frozen=True)
class RouteData:
    """A GET_ROUTEINFO_BY_TOPIC answer: the topic's route and each broker's addresses by broker ID."""

    route: TopicRoute
    broker_addrs: dict[str, dict[int, str]]

    def master(self, broker_name: str) -> str | None:
        """The master's address (broker ID 0, ``MixAll.MASTER_ID``), if the route names one."""
        return self.broker_addrs.get(broker_name, {}).get(0)


def _broker_addrs(value: object, where: str) -> dict[int, str]:
    """``brokerAddrs``: keys are broker IDs, quoted (standard JSON) or bare (fastjson's default)."""
    if value is None:
        return {}
    addresses: dict[int, str] = {}
    for key, address in _object(value, where).items():
        broker_id = int(key) if isinstance(key, str) and _BROKER_ID.fullmatch(key) else key
        addresses[_int(broker_id, f"{where} key")] = _str(address, f"{where}[{key!r}]")
    return addresses


def _queue_data(value: object, where: str) -> QueueData:
    # topicSysFlag (spelled topicSynFlag before 5.x) is ignored: it does not change which queues exist.
    document = _object(value, where)
    return QueueData(
        broker_name=_str(_required(document, "brokerName", where), f"{where}.brokerName"),
        read_queue_nums=_int(_required(document, "readQueueNums", where), f"{where}.readQueueNums", 0, JAVA_INT_MAX),
        write_queue_nums=_int(_required(document, "writeQueueNums", where), f"{where}.writeQueueNums", 0, JAVA_INT_MAX),
        perm=_int(_required(document, "perm", where), f"{where}.perm", 0, JAVA_INT_MAX),
    )


def parse_route(topic: str, body: bytes) -> RouteData:
    """A ``TopicRouteData`` body, standard or with fastjson's bare integer keys."""
    document = _document(body, "route")
    datas = _list(_required(document, "queueDatas", "route"), "route.queueDatas")
    brokers = _list(_required(document, "brokerDatas", "route"), "route.brokerDatas")
    broker_addrs: dict[str, dict[int, str]] = {}
    for index, item in enumerate(brokers):
        where = f"route.brokerDatas[{index}]"
        broker = _object(item, where)
        name = _str(_required(broker, "brokerName", where), f"{where}.brokerName")
        broker_addrs[name] = _broker_addrs(broker.get("brokerAddrs"), f"{where}.brokerAddrs")
    try:
        route = TopicRoute(topic, tuple(_queue_data(item, f"route.queueDatas[{i}]") for i, item in enumerate(datas)))
    except RouteError as error:
        raise ProtocolError(f"route: {error}") from None
    return RouteData(route, broker_addrs)


@dataclass(frozen=True)
class ClusterInfo:
    """A GET_BROKER_CLUSTER_INFO answer: broker addresses by name and ID, broker names by cluster."""

    broker_addrs: dict[str, dict[int, str]]
    cluster_addrs: dict[str, frozenset[str]]


def parse_cluster_info(body: bytes) -> ClusterInfo:
    """A ``ClusterInfo`` body (always with fastjson's bare integer broker IDs)."""
    document = _document(body, "cluster info")
    table = _object_field(document, "brokerAddrTable", "clusterInfo")
    broker_addrs = {
        _str(name, "clusterInfo.brokerAddrTable key"): _broker_addrs(
            _object(broker, f"clusterInfo.brokerAddrTable[{name!r}]").get("brokerAddrs"),
            f"clusterInfo.brokerAddrTable[{name!r}].brokerAddrs",
        )
        for name, broker in table.items()
    }
    clusters = _object_field(document, "clusterAddrTable", "clusterInfo")
    cluster_addrs = {
        _str(cluster, "clusterInfo.clusterAddrTable key"): frozenset(
            _str(name, f"clusterInfo.clusterAddrTable[{cluster!r}][{index}]")
            for index, name in enumerate(_list(names, f"clusterInfo.clusterAddrTable[{cluster!r}]"))
        )
        for cluster, names in clusters.items()
    }
    return ClusterInfo(broker_addrs, cluster_addrs)


def parse_topic_list(body: bytes) -> set[str]:
    """A ``TopicList`` body (GET_ALL_TOPIC_LIST_FROM_NAMESERVER)."""
    document = _document(body, "topic list")
    topics = _list_field(document, "topicList", "topicList")
    return {_str(topic, f"topicList[{index}]") for index, topic in enumerate(topics)}


def parse_subscription_groups(body: bytes) -> set[str]:
    """The group names of a GET_ALL_SUBSCRIPTIONGROUP_CONFIG answer: the broker's ``SubscriptionGroupManager``
    serialised whole (``subscriptionGroupTable`` keyed by group name, ``forbiddenTable``, ``dataVersion``; the shape
    of ``SubscriptionGroupWrapper``). Only the table's keys are read: a broker creates a config for every group that
    ever sent it a heartbeat (``autoCreateSubscriptionGroup``), so the keys are the groups it knows."""
    document = _document(body, "subscription groups")
    table = _object_field(document, "subscriptionGroupTable", "subscriptionGroups")
    groups: set[str] = set()
    for key, value in table.items():
        name = _str(key, "subscriptionGroups.subscriptionGroupTable key")
        where = f"subscriptionGroups.subscriptionGroupTable[{name!r}]"
        config = _object(value, where)
        inner = _optional(config, "groupName", name, _str, where)
        if inner != name:
            raise ProtocolError(f"{where}.groupName is {inner!r}, not its key")
        groups.add(name)
    return groups


# ---------------------------------------------------------------------------------------------- consumer requests


def encode_check_client(client_id: str, consumer_group: str, subscription: Subscription) -> bytes:
    """CHECK_CLIENT_CONFIG's ``CheckClientRequestBody``: the broker compiles the subscription's expression (and
    refuses a non-TAG one when it does not filter by properties). ``namespace`` is null, so left out."""
    return _encode({"clientId": client_id, "group": consumer_group, "subscriptionData": subscription.to_json()})


def encode_heartbeat(
    client_id: str,
    group: str,
    consume_type: str,
    message_model: str,
    consume_from_where: str,
    subscriptions: Sequence[Subscription],
    unit_mode: bool = False,
) -> bytes:
    """A ``HeartbeatData`` body for one consumer group and no producers.

    ``heartbeatFingerprint`` 0 keeps the broker on the V1 path, which applies the full subscription set each time.
    The subscription table is per group, so pass every topic the group's Java members subscribe to, the
    ``%RETRY%<group>`` topic included in CLUSTERING mode.
    """
    _check_name("consume_type", consume_type, CONSUME_TYPES)
    _check_name("message_model", message_model, MESSAGE_MODELS)
    _check_name("consume_from_where", consume_from_where, CONSUME_FROM_WHERE)
    consumer = {
        "consumeFromWhere": consume_from_where,
        "consumeType": consume_type,
        "groupName": group,
        "messageModel": message_model,
        "subscriptionDataSet": [subscription.to_json() for subscription in subscriptions],
        "unitMode": unit_mode,
    }
    return _encode(
        {
            "clientID": client_id,
            "consumerDataSet": [consumer],
            "heartbeatFingerprint": 0,
            "producerDataSet": [],
            "withoutSub": False,
        }
    )


def parse_consumer_list(body: bytes) -> list[str]:
    """A GET_CONSUMER_LIST_BY_GROUP answer: the client IDs of the group's channels (duplicates kept)."""
    document = _document(body, "consumer list")
    ids = _list(_required(document, "consumerIdList", "consumerList"), "consumerList.consumerIdList")
    return [_str(item, f"consumerList.consumerIdList[{index}]") for index, item in enumerate(ids)]


def encode_lock_body(
    group: str, client_id: str, queues: Iterable[MessageQueue], only_this_broker: bool = False
) -> bytes:
    """A ``LockBatchRequestBody`` (LOCK_BATCH_MQ; UNLOCK_BATCH_MQ's body has the same shape)."""
    return _encode(
        {"clientId": client_id, "consumerGroup": group, "mqSet": set(queues), "onlyThisBroker": only_this_broker}
    )


def parse_lock_result(body: bytes) -> set[MessageQueue]:
    """The queues a LOCK_BATCH_MQ locked for us (``lockOKMQSet``)."""
    document = _document(body, "lock result")
    return _queues(_list_field(document, "lockOKMQSet", "lockResult"), "lockResult.lockOKMQSet")


def encode_query_assignment(
    topic: str, group: str, client_id: str, strategy_name: str = "AVG", message_model: str = "CLUSTERING"
) -> bytes:
    """A ``QueryAssignmentRequestBody``: ask the broker to run a Java allocation strategy for ``client_id``."""
    _check_name("message_model", message_model, MESSAGE_MODELS)
    return _encode(
        {
            "clientId": client_id,
            "consumerGroup": group,
            "messageModel": message_model,
            "strategyName": strategy_name,
            "topic": topic,
        }
    )


def parse_query_assignment(body: bytes) -> set[MessageQueue]:
    """The queues of a QUERY_ASSIGNMENT answer (``messageQueueAssignments[].messageQueue``)."""
    document = _document(body, "query assignment")
    assignments = _list_field(document, "messageQueueAssignments", "queryAssignment")
    queues: set[MessageQueue] = set()
    for index, item in enumerate(assignments):
        where = f"queryAssignment.messageQueueAssignments[{index}]"
        queues.add(_queue(_required(_object(item, where), "messageQueue", where), f"{where}.messageQueue"))
    return queues


# ---------------------------------------------------------------------------------------------- admin answers


@dataclass(frozen=True)
class Connection:
    """One channel of a consumer group, as the broker sees it."""

    client_id: str
    client_addr: str
    language: str
    version: int


@dataclass(frozen=True)
class ConsumerConnection:
    """A GET_CONSUMER_CONNECTION_LIST answer: the group's channels and its (group-wide) subscription table."""

    connections: tuple[Connection, ...]
    subscriptions: dict[str, Subscription]
    consume_type: str | None
    message_model: str | None
    consume_from_where: str | None

    @property
    def topics(self) -> frozenset[str]:
        return frozenset(self.subscriptions)


def parse_consumer_connection(body: bytes) -> ConsumerConnection:
    """A ``ConsumerConnection`` body."""
    document = _document(body, "consumer connection")
    connections: list[Connection] = []
    for index, item in enumerate(_list_field(document, "connectionSet", "consumerConnection")):
        where = f"consumerConnection.connectionSet[{index}]"
        row = _object(item, where)
        connections.append(
            Connection(
                client_id=_str(_required(row, "clientId", where), f"{where}.clientId"),
                client_addr=_optional(row, "clientAddr", "", _str, where),
                language=_optional(row, "language", "", _str, where),
                version=_optional(row, "version", 0, _int, where),
            )
        )
    table = _object_field(document, "subscriptionTable", "consumerConnection")
    subscriptions = {
        _str(topic, "consumerConnection.subscriptionTable key"): _subscription(
            data, f"consumerConnection.subscriptionTable[{topic!r}]"
        )
        for topic, data in table.items()
    }
    return ConsumerConnection(
        tuple(connections),
        subscriptions,
        _optional(document, "consumeType", None, _str, "consumerConnection"),
        _optional(document, "messageModel", None, _str, "consumerConnection"),
        _optional(document, "consumeFromWhere", None, _str, "consumerConnection"),
    )


@dataclass(frozen=True)
class OffsetWrapper:
    """One queue's progress in a ``ConsumeStats``: the broker's max offset, the group's committed offset."""

    broker_offset: int
    consumer_offset: int
    pull_offset: int = 0
    last_timestamp: int = 0


@dataclass(frozen=True)
class ConsumeStats:
    """A GET_CONSUME_STATS answer."""

    consume_tps: float
    offset_table: dict[MessageQueue, OffsetWrapper]


def parse_consume_stats(body: bytes) -> ConsumeStats:
    """A ``ConsumeStats`` body, whose ``offsetTable`` keys are message-queue objects (non-standard JSON)."""
    document = _document(body, "consume stats")
    table = _object_field(document, "offsetTable", "consumeStats")
    offsets: dict[MessageQueue, OffsetWrapper] = {}
    for key, value in table.items():
        mq = _queue(key, "consumeStats.offsetTable key")
        where = f"consumeStats.offsetTable[{mq}]"
        row = _object(value, where)
        offsets[mq] = OffsetWrapper(
            broker_offset=_int(_required(row, "brokerOffset", where), f"{where}.brokerOffset"),
            consumer_offset=_int(_required(row, "consumerOffset", where), f"{where}.consumerOffset"),
            pull_offset=_optional(row, "pullOffset", 0, _int, where),
            last_timestamp=_optional(row, "lastTimestamp", 0, _int, where),
        )
    return ConsumeStats(_optional(document, "consumeTps", 0.0, _float, "consumeStats"), offsets)


# ---------------------------------------------------------------------------------------------- offset resets


def parse_reset_offset_body(body: bytes) -> dict[MessageQueue, int]:
    """A ``ResetOffsetBody`` (RESET_CONSUMER_CLIENT_OFFSET's): ``offsetTable``, message-queue objects as keys."""
    document = _document(body, "reset offset body")
    offsets: dict[MessageQueue, int] = {}
    for key, value in _object_field(document, "offsetTable", "resetOffsetBody").items():
        mq = _queue(key, "resetOffsetBody.offsetTable key")
        offsets[mq] = _int(value, f"resetOffsetBody.offsetTable[{mq}]", minimum=-1)
    return offsets


def encode_consumer_status(offsets: Mapping[MessageQueue, int]) -> bytes:
    """A ``GetConsumerStatusBody``, the answer to GET_CONSUMER_STATUS_FROM_CLIENT: each held queue's offset, in
    ``MessageQueue`` order (Java's map), and no per-client table (that is filled in by the broker)."""
    return _encode({"consumerTable": {}, "messageQueueTable": dict(sorted(offsets.items()))})


# ---------------------------------------------------------------------------------------------- running info


@dataclass(frozen=True)
class ProcessQueueInfo:
    """One held queue in a ``ConsumerRunningInfo`` (Java's ``ProcessQueueInfo``, its field names and typo kept)."""

    commitOffset: int = 0
    cachedMsgMinOffset: int = 0
    cachedMsgMaxOffset: int = 0
    cachedMsgCount: int = 0
    cachedMsgSizeInMiB: int = 0
    transactionMsgMinOffset: int = 0
    transactionMsgMaxOffset: int = 0
    transactionMsgCount: int = 0
    locked: bool = False
    tryUnlockTimes: int = 0
    lastLockTimestamp: int = 0
    droped: bool = False
    lastPullTimestamp: int = 0
    lastConsumeTimestamp: int = 0


@dataclass(frozen=True)
class ConsumeStatus:
    """One topic's rates in a ``ConsumerRunningInfo`` (Java's ``ConsumeStatus``)."""

    pullRT: float = 0.0
    pullTPS: float = 0.0
    consumeRT: float = 0.0
    consumeOKTPS: float = 0.0
    consumeFailedTPS: float = 0.0
    consumeFailedMsgs: int = 0


@dataclass(frozen=True)
class RunningInfo:
    """A ``ConsumerRunningInfo``: what a consumer says about itself; ``mq_table``'s keys are its process-queue
    table, queues being given up (``droped``) included."""

    properties: dict[str, str]
    subscriptions: tuple[Subscription, ...]
    mq_table: dict[MessageQueue, ProcessQueueInfo]
    status_table: dict[str, ConsumeStatus]

    @property
    def queues(self) -> frozenset[MessageQueue]:
        """What the consumer holds: its table without the queues it is giving up, which a rebalance has
        already handed to another member (Java removes them at once, this library after their offset is saved)."""
        return frozenset(mq for mq, info in self.mq_table.items() if not info.droped)


def encode_running_info(
    properties: Mapping[str, str],
    subscriptions: Iterable[Subscription],
    mq_table: Mapping[MessageQueue, ProcessQueueInfo],
    status_table: Mapping[str, ConsumeStatus],
) -> bytes:
    """The answer to GET_CONSUMER_RUNNING_INFO, as a Java consumer writes it.

    ``mqTable`` keys are written as objects in ``MessageQueue`` order (a Java ``TreeMap``), which ``mqadmin`` and
    the broker read with fastjson. ``subscriptionSet`` is a ``TreeSet`` ordered by ``topic@subString``, which also
    drops later subscriptions equal under that order. ``jstack`` is null, so left out.
    """
    ordered: dict[str, Subscription] = {}
    for subscription in subscriptions:
        ordered.setdefault(f"{subscription.topic}@{subscription.sub_string}", subscription)
    return _encode(
        {
            "mqPopTable": {},
            "mqTable": {mq: dataclasses.asdict(info) for mq, info in mq_table.items()},
            "properties": dict(properties),
            "statusTable": {topic: dataclasses.asdict(status) for topic, status in status_table.items()},
            "subscriptionSet": [ordered[key].to_json() for key in sorted(ordered, key=java_string_key)],
            "userConsumerInfo": {},
        }
    )


_Primitives = TypeVar("_Primitives", ProcessQueueInfo, ConsumeStatus)


def _fields_of(kind: type[_Primitives], value: object, where: str) -> _Primitives:
    """A dataclass of Java primitives from its JSON object: absent fields keep their defaults (fastjson reads
    them so too). Field annotations are strings here (``from __future__ import annotations``)."""
    document = _object(value, where)
    values: dict[str, Any] = {}
    for item in dataclasses.fields(kind):
        if document.get(item.name) is None:
            continue
        if item.type == "bool":
            values[item.name] = _bool(document[item.name], f"{where}.{item.name}")
        elif item.type == "float":
            values[item.name] = _float(document[item.name], f"{where}.{item.name}")
        else:
            values[item.name] = _int(document[item.name], f"{where}.{item.name}")
    return kind(**values)


def parse_running_info(body: bytes) -> RunningInfo:
    """A ``ConsumerRunningInfo`` body (another consumer's, relayed by a broker)."""
    document = _document(body, "running info")
    properties = {
        _str(key, "runningInfo.properties key"): _str(value, f"runningInfo.properties[{key!r}]")
        for key, value in _object_field(document, "properties", "runningInfo").items()
    }
    subscriptions = tuple(
        _subscription(item, f"runningInfo.subscriptionSet[{index}]")
        for index, item in enumerate(_list_field(document, "subscriptionSet", "runningInfo"))
    )
    mq_table: dict[MessageQueue, ProcessQueueInfo] = {}
    for key, value in _object_field(document, "mqTable", "runningInfo").items():
        mq = _queue(key, "runningInfo.mqTable key")
        mq_table[mq] = _fields_of(ProcessQueueInfo, value, f"runningInfo.mqTable[{mq}]")
    status_table = {
        _str(topic, "runningInfo.statusTable key"): _fields_of(
            ConsumeStatus, value, f"runningInfo.statusTable[{topic!r}]"
        )
        for topic, value in _object_field(document, "statusTable", "runningInfo").items()
    }
    return RunningInfo(properties, subscriptions, mq_table, status_table)


def encode_consume_directly_result(
    order: bool, auto_commit: bool, consume_result: str, remark: str | None, spent_ms: int
) -> bytes:
    """A ``ConsumeMessageDirectlyResult``: the answer to CONSUME_MESSAGE_DIRECTLY (``consumeResult`` a
    ``CMResult`` name; the Java field is spelled ``spentTimeMills``)."""
    _check_name("consume_result", consume_result, CONSUME_RESULTS)
    result: dict[str, Any] = {
        "autoCommit": auto_commit,
        "consumeResult": consume_result,
        "order": order,
        "spentTimeMills": spent_ms,
    }
    if remark is not None:
        result["remark"] = remark
    return _encode(result)
