"""The shared vocabulary: message queues, client IDs, and the Java sort order.

Every consumer in a RocketMQ group computes its share alone, so all of them must sort the same inputs the same
way. Java compares strings by UTF-16 code unit; Python compares by code point. The two orders differ when one
string holds a character at or above U+E000 and the other a character beyond U+FFFF at the same position (Java
puts the supplementary character first, because its surrogate unit D800-DFFF is smaller than E000). Comparing the
UTF-16-BE encodings as bytes gives exactly Java's order, so that is the sort key used everywhere here.

This module is pure: no I/O, no clocks, no threads.
"""

from __future__ import annotations

import enum
import functools
import math
import re
import struct
import warnings
from collections import Counter, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter
from typing import Any, NamedTuple

__all__ = [
    "AclCredentials",
    "JAVA_INT_MAX",
    "MAX_GROUP_MEMBERS",
    "MAX_ROUTE_BROKERS",
    "MAX_TOPIC_QUEUES",
    "MAX_VIRTUAL_NODES",
    "MASTER_ID",
    "PERM_READ",
    "PERM_WRITE",
    "DLQ_GROUP_TOPIC_PREFIX",
    "NAMESPACE_SEPARATOR",
    "RETRY_GROUP_TOPIC_PREFIX",
    "RETRY_TOPIC_PROPERTY",
    "ConsumeFromWhere",
    "MessageModel",
    "ClientIdList",
    "DuplicateClientIdWarning",
    "check_duration",
    "duration_rule",
    "first_few",
    "MessageQueue",
    "QueueList",
    "RebalanceInput",
    "GROUP_MAX_LENGTH",
    "TOPIC_MAX_LENGTH",
    "TlsSettings",
    "build_client_id",
    "check_group_name",
    "check_namespace",
    "check_topic_name",
    "dead_letter_topic",
    "retry_topic",
    "with_namespace",
    "without_namespace",
    "check_client_id_list",
    "check_queue_list",
    "java_md5_hash",
    "java_md5_hashes",
    "java_string_key",
    "prepare_rebalance_input",
    "printable",
    "canonical_choice",
    "word_choices",
    "queues_of",
    "sort_client_ids",
    "queue_md5_hashes",
    "sort_queues",
]

JAVA_INT_MAX = 2**31 - 1

# Limits on sizes a user can type (a route file, a scenario, a command-line option), so that a typo is a clear
# error instead of gigabytes of memory. Real fleets stay far below them: RocketMQ topics have tens to a few
# thousand queues, groups tens to hundreds of consumers, and Java's consistent hash uses 10 virtual nodes.
MAX_TOPIC_QUEUES = 65_536  # readable queues of one topic, over all its brokers
# Brokers one topic's route may name: the consumer keeps a connection, a heartbeat and a notification stream per
# broker, so a route of 60,000 one-queue brokers (within the queue limit) took minutes to start and to stop.
# RocketMQ clusters run a handful to a few hundred brokers.
MAX_ROUTE_BROKERS = 1_024
MAX_GROUP_MEMBERS = 10_000  # consumers in one group: a scenario, a preview, a member list the runtime accepts
MAX_VIRTUAL_NODES = 10_000  # consistent-hash virtual nodes per consumer


def check_duration(name: str, value: object, *, zero: bool = False, unit: str = "seconds") -> float:
    """``value`` as a float when it is a finite number above 0 (at or above 0 with ``zero``, where 0 means
    something, such as no simulated work); else ``ValueError`` naming ``name``.

    The one check of every interval, timeout and delay the library takes (config, runtime settings, command
    line). ``value <= 0`` alone lets NaN and inf through: an infinite persist interval never writes an offset,
    and a NaN lock lifetime passes every comparison and consumes nothing, silently.
    """
    number = value if isinstance(value, int | float) and not isinstance(value, bool) else math.nan
    if not math.isfinite(number) or number < 0 or (number == 0 and not zero):
        raise ValueError(f"{name} {duration_rule(zero, unit)}, got {value!r}")
    return float(number)


def duration_rule(zero: bool = False, unit: str = "seconds") -> str:
    """What :func:`check_duration` asks of a value, as the words of its error."""
    return f"must be a finite number of {unit} {'>= 0' if zero else '> 0'}"


def printable(text: str) -> str:
    """Text as it may go to a terminal: control characters escaped, so a client ID or broker name from a server
    (or an error quoting one) cannot move the cursor, clear the screen or forge a line.

    Here, with the other names the library reads from servers, so that every layer that prints them (the commands,
    the pipeline's audit table) escapes them the one same way."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


def canonical_choice(text: str, choices: Iterable[str]) -> str:
    """``text`` spelt as the one of ``choices`` it equals ignoring case, else ``text`` unchanged for the caller to
    refuse while listing ``choices``. The command line's one rule for a word value (a strategy name, ``none``, a
    format, a level): every command and the pipeline's take ``avg`` as ``AVG``, so none refuses a spelling another
    takes. Here, beside the other names, because both the commands and the pipeline parse such words."""
    return next((choice for choice in choices if choice.casefold() == text.casefold()), text)


def word_choices(choices: Sequence[str]) -> dict[str, Any]:
    """An ``add_argument`` option's ``type`` and ``choices`` under :func:`canonical_choice`'s rule: a spelling in
    any case is taken as its choice, anything else refused by argparse with ``choices`` listed."""
    return {"type": functools.partial(canonical_choice, choices=choices), "choices": choices}


def first_few(names: Sequence[object], shown: int = 5) -> str:
    """The first ``shown`` of ``names``, then how many more: a report stays one readable line however many
    brokers, queues or members it is about. Here, beside :func:`printable`, so every layer that reports names
    (the runtime's health, the pipeline's audit) shortens them the one same way."""
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(map(str, names[:shown])) + more


def java_string_key(value: str) -> bytes:
    """Sort key that orders strings exactly as Java's ``String.compareTo`` does (UTF-16 code units).

    ``surrogatepass`` keeps a lone surrogate (possible in Java strings) sortable instead of failing.
    """
    return value.encode("utf-16-be", "surrogatepass")


try:  # CPython's built-in MD5 is about twice as fast as OpenSSL's for keys this short (benchmarks/allocation.py)
    from _md5 import md5 as _new_md5
except ImportError:  # pragma: no cover - other Pythons
    from hashlib import md5 as _new_md5

_first_word = struct.Struct(">I").unpack_from
_digest = type(_new_md5()).digest


def java_md5_hash(key: str) -> int:
    """RocketMQ's default consistent-hash function: the first 4 bytes of MD5(UTF-8 key), big-endian, unsigned."""
    word: int = _first_word(_new_md5(key.encode("utf-8", "surrogatepass")).digest())[0]
    return word


@functools.lru_cache(maxsize=256)
def _first_words(count: int) -> struct.Struct:
    """The first big-endian word of each of ``count`` 16-byte digests laid end to end."""
    return struct.Struct(">" + "I12x" * count)


def java_md5_hashes(keys: Sequence[bytes]) -> list[int]:
    """:func:`java_md5_hash` of many keys, already UTF-8 (``surrogatepass``) encoded, in one batch.

    Per key, the call, the encoding and the unpacking cost more than the MD5 itself: here the digests are made by
    ``map`` (no Python frame per key), joined, and their first words read by one ``struct`` call, which about
    halves the cost of a ring's or a queue list's hashes (benchmarks/allocation.py, cold ring)."""
    return list(_first_words(len(keys)).unpack(b"".join(map(_digest, map(_new_md5, keys)))))


def _queue_text(topic: str, broker_name: str, queue_id: int) -> str:
    return f"MessageQueue [topic={topic}, brokerName={broker_name}, queueId={queue_id}]"


class MessageQueue:
    """One queue of a topic on one broker, immutable and hashable, ordered like Java's ``MessageQueue``.

    Order is topic, then broker name (both in Java string order), then queue ID. Java compares queue IDs by
    int subtraction, which is only a correct order for non-negative IDs, so negative IDs are refused here: they
    cannot be sorted the way a Java consumer would sort them.
    """

    __slots__ = ("topic", "broker_name", "queue_id", "_key", "_hash", "_text", "_md5")

    topic: str
    broker_name: str
    queue_id: int
    _key: tuple[bytes, bytes, int]
    _hash: int
    _text: str | None
    _md5: int | None

    def __init__(self, topic: str, broker_name: str, queue_id: int) -> None:
        if not isinstance(topic, str):
            raise TypeError(f"topic must be a str, got {type(topic).__name__}")
        if not isinstance(broker_name, str):
            raise TypeError(f"broker_name must be a str, got {type(broker_name).__name__}")
        if not isinstance(queue_id, int) or isinstance(queue_id, bool):
            raise TypeError(f"queue_id must be an int, got {type(queue_id).__name__}")
        if not 0 <= queue_id <= JAVA_INT_MAX:
            raise ValueError(f"queue_id must be between 0 and {JAVA_INT_MAX}, got {queue_id}")
        set_ = object.__setattr__
        set_(self, "topic", topic)
        set_(self, "broker_name", broker_name)
        set_(self, "queue_id", queue_id)
        set_(self, "_key", (java_string_key(topic), java_string_key(broker_name), queue_id))
        set_(self, "_hash", hash((topic, broker_name, queue_id)))
        set_(self, "_text", None)  # built on first use: most queues are never printed or hashed
        set_(self, "_md5", None)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("MessageQueue is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("MessageQueue is immutable")

    @property
    def sort_key(self) -> tuple[bytes, bytes, int]:
        """The Java ``compareTo`` order as a tuple; use with ``sorted(..., key=...)`` for speed."""
        return self._key

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageQueue):
            return NotImplemented
        return self.queue_id == other.queue_id and self.broker_name == other.broker_name and self.topic == other.topic

    def __hash__(self) -> int:
        return self._hash

    def __lt__(self, other: MessageQueue) -> bool:
        return self._key < other._key

    def __le__(self, other: MessageQueue) -> bool:
        return self._key <= other._key

    def __gt__(self, other: MessageQueue) -> bool:
        return self._key > other._key

    def __ge__(self, other: MessageQueue) -> bool:
        return self._key >= other._key

    def __str__(self) -> str:
        """Java's ``MessageQueue.toString()``, which is also the consistent-hash key of the queue."""
        text = self._text
        if text is None:
            text = _queue_text(self.topic, self.broker_name, self.queue_id)
            object.__setattr__(self, "_text", text)
        return text

    @property
    def md5_hash(self) -> int:
        """The queue's point on RocketMQ's default consistent-hash ring, computed once per queue object."""
        value = self._md5
        if value is None:
            value = java_md5_hash(str(self))
            object.__setattr__(self, "_md5", value)
        return value

    def __repr__(self) -> str:
        return f"MessageQueue({self.topic!r}, {self.broker_name!r}, {self.queue_id!r})"

    def __reduce__(self) -> tuple[type[MessageQueue], tuple[str, str, int]]:
        return (MessageQueue, (self.topic, self.broker_name, self.queue_id))

    def to_dict(self) -> dict[str, Any]:
        """The queue in RocketMQ's JSON field names (``topic``, ``brokerName``, ``queueId``)."""
        return {"topic": self.topic, "brokerName": self.broker_name, "queueId": self.queue_id}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MessageQueue:
        """Build a queue from RocketMQ's JSON field names; a missing field is a ``ValueError`` naming it."""
        try:
            return cls(data["topic"], data["brokerName"], data["queueId"])
        except KeyError as missing:
            raise ValueError(f"message queue is missing field {missing.args[0]!r}: {dict(data)!r}") from None


_queue_key = attrgetter("_key")


def queue_md5_hashes(queues: Sequence[MessageQueue]) -> list[int]:
    """Each queue's :attr:`MessageQueue.md5_hash`, those not known yet computed in one batch
    (:func:`java_md5_hashes`) and remembered on their queues, as the property remembers one."""
    hashes = [mq._md5 for mq in queues]
    if None not in hashes:
        return hashes  # type: ignore[return-value]  # no None left: every hash is an int
    cold = hashes.count(None) == len(hashes)  # new queue objects: no second pass over them below
    missing = queues if cold else [mq for mq in queues if mq._md5 is None]
    # the text of __str__, formatted inline: a call to _queue_text per queue cost a sixth of the batch
    keys = [
        f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]".encode(
            "utf-8", "surrogatepass"
        )
        for mq in missing
    ]
    found = java_md5_hashes(keys)
    deque(map(object.__setattr__, missing, repeat("_md5"), found), maxlen=0)  # remembered, in C
    return found if cold else [mq._md5 for mq in queues]  # type: ignore[misc]  # every hash is set now


def sort_queues(queues: Iterable[MessageQueue]) -> list[MessageQueue]:
    """Queues sorted as Java's ``Collections.sort`` sorts them (duplicates kept)."""
    return sorted(queues, key=_queue_key)


def sort_client_ids(client_ids: Iterable[str]) -> list[str]:
    """Client IDs sorted as Java's ``Collections.sort`` sorts them (duplicates kept).

    For ASCII text (nearly every client ID) Java's order is Python's own, so the key is only computed when some ID
    holds another character: encoding every ID was the largest part of sorting the pipeline's member lists."""
    listed = list(client_ids)
    if all(map(str.isascii, listed)):
        return sorted(listed)
    return sorted(listed, key=java_string_key)


def _check_items(argument: str, items: Iterable[object], expected: type, name: str) -> None:
    listed = items if isinstance(items, Sequence) else list(items)
    if all(map(isinstance, listed, repeat(expected))):
        return  # the usual case, checked in C: a loop in Python was a sixth of a cold ring's allocation
    for position, item in enumerate(listed):
        if not isinstance(item, expected):
            raise TypeError(f"{argument}[{position}] must be a {name}, got {type(item).__name__}")


def check_queue_list(argument: str, queues: Iterable[object]) -> None:
    """Raise ``TypeError`` naming ``argument`` when an item is not a ``MessageQueue``; nothing is coerced."""
    if not isinstance(queues, QueueList):
        _check_items(argument, queues, MessageQueue, "MessageQueue")


def check_client_id_list(argument: str, client_ids: Iterable[object]) -> None:
    """Raise ``TypeError`` naming ``argument`` when an item is not a ``str``; nothing is coerced."""
    if not isinstance(client_ids, ClientIdList):
        _check_items(argument, client_ids, str, "str")


class QueueList(tuple[MessageQueue, ...]):
    """An immutable queue list whose items were type-checked when it was built.

    Allocation checks every item of a plain list it is given (O(n)); a ``QueueList`` was checked once, when the
    rebalance input was prepared, so the per-round hot path skips that scan.
    """

    __slots__ = ()

    def __new__(cls, items: Iterable[MessageQueue] = ()) -> QueueList:
        self = super().__new__(cls, items)
        _check_items("mq_all", self, MessageQueue, "MessageQueue")
        return self

    @classmethod
    def trusted(cls, items: Iterable[MessageQueue]) -> QueueList:
        """Wrap items already checked by the caller (a re-ordering of a ``QueueList``) without a second scan."""
        return tuple.__new__(cls, items)


class ClientIdList(tuple[str, ...]):
    """An immutable client-ID list whose items were type-checked when it was built (see :class:`QueueList`)."""

    __slots__ = ()

    def __new__(cls, items: Iterable[str] = ()) -> ClientIdList:
        self = super().__new__(cls, items)
        _check_items("cid_all", self, str, "str")
        return self

    @classmethod
    def trusted(cls, items: Iterable[str]) -> ClientIdList:
        """Wrap items already checked by the caller without a second scan (see :meth:`QueueList.trusted`)."""
        return tuple.__new__(cls, items)


class DuplicateClientIdWarning(UserWarning):
    """Two consumers share one client ID: they take the same queues and leave others unconsumed."""


class RebalanceInput(NamedTuple):
    """What every allocation is given: queues and client IDs in the order a Java consumer sorts them."""

    mq_all: QueueList
    cid_all: ClientIdList
    duplicate_client_ids: list[str]


def prepare_rebalance_input(
    queues: Iterable[MessageQueue], client_ids: Iterable[str], warn: bool = True
) -> RebalanceInput:
    """Prepare a rebalance round's inputs exactly as the Java client's ``RebalanceImpl`` does.

    The topic's queues are a set (duplicates vanish) and are sorted; client IDs are sorted but *not*
    deduplicated, because Java does not deduplicate them and a Python consumer must compute what its Java
    neighbours compute. A duplicated ID is reported with a :class:`DuplicateClientIdWarning`, since two
    consumers sharing one ID silently consume the same queues; ``warn=False`` is for callers that report
    ``duplicate_client_ids`` their own way (the core, previews, the pipeline).
    """
    mq_sorted = QueueList.trusted(sort_queues(set(QueueList(queues))))
    cid_list = ClientIdList(client_ids)
    cid_sorted = ClientIdList.trusted(sort_client_ids(cid_list))
    duplicates = sort_client_ids(cid for cid, count in Counter(cid_list).items() if count > 1)
    if duplicates and warn:
        warnings.warn(
            DuplicateClientIdWarning(
                f"client IDs used by more than one consumer: {', '.join(duplicates)}; "
                "consumers sharing an ID take the same queues and leave others unconsumed"
            ),
            stacklevel=2,
        )
    return RebalanceInput(mq_sorted, cid_sorted, duplicates)


def build_client_id(ip: str, instance_name: str, unit_name: str | None = None) -> str:
    """A client ID in the Java client's shape: ``ip@instanceName`` or ``ip@instanceName@unitName``.

    The Java client replaces the default instance name with ``pid#nanotime`` so that each process is unique;
    callers pass that in as ``instance_name`` (this module reads no clock).
    """
    if not ip or not instance_name:
        raise ValueError("ip and instance_name must both be non-empty")
    return f"{ip}@{instance_name}" + (f"@{unit_name}" if unit_name else "")


def queues_of(items: Sequence[Mapping[str, Any]]) -> list[MessageQueue]:
    """Queues from a list of RocketMQ-style JSON objects (``topic``, ``brokerName``, ``queueId``)."""
    return [MessageQueue.from_dict(item) for item in items]


PERM_READ = 4
PERM_WRITE = 2
"""RocketMQ's ``PermName`` bits of a topic on a broker: consumers take the read queues of brokers with PERM_READ."""

MASTER_ID = 0
"""The broker ID of a broker set's master (RocketMQ's ``MixAll.MASTER_ID``); its slaves have 1, 2, ..."""

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
RETRY_TOPIC_PROPERTY = "RETRY_TOPIC"
"""Java's ``MessageConst.PROPERTY_RETRY_TOPIC``: a message in a retry topic keeps its original topic here."""


class MessageModel(enum.Enum):
    """CLUSTERING shares the queues out among the group; BROADCASTING gives every consumer every queue."""

    CLUSTERING = "CLUSTERING"
    BROADCASTING = "BROADCASTING"


class ConsumeFromWhere(enum.Enum):
    """Where a queue with no stored offset starts (Java's ``ConsumeFromWhere``, the three non-deprecated values)."""

    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


# Java's TopicValidator pattern. fullmatch: with match and "$", a trailing newline would pass.
_NAME_PATTERN = re.compile(r"[%|a-zA-Z0-9_-]+")
TOPIC_MAX_LENGTH = 127
GROUP_MAX_LENGTH = 255


def _check_name(kind: str, name: object, max_length: int) -> str:
    if not isinstance(name, str):
        raise TypeError(f"{kind} must be a str, got {type(name).__name__}")
    if not name:
        raise ValueError(f"{kind} is empty")
    if len(name) > max_length:
        raise ValueError(f"{kind} {name[:40]!r}... is {len(name)} characters long, at most {max_length} allowed")
    if not _NAME_PATTERN.fullmatch(name):
        raise ValueError(f"{kind} {name!r} has characters outside [%|a-zA-Z0-9_-]")
    return name


def check_topic_name(topic: object) -> str:
    """Return ``topic`` when it follows RocketMQ's topic rules, else raise ``ValueError`` saying what is wrong."""
    return _check_name("topic", topic, TOPIC_MAX_LENGTH)


def check_group_name(group: object) -> str:
    """Return ``group`` when it follows RocketMQ's consumer-group rules, else raise ``ValueError``."""
    return _check_name("consumer group", group, GROUP_MAX_LENGTH)


def retry_topic(group: str) -> str:
    """The retry topic a clustering consumer of ``group`` subscribes to automatically: ``%RETRY%<group>``."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def dead_letter_topic(group: str) -> str:
    """Where the broker moves a message of ``group`` reconsumed too often: ``%DLQ%<group>`` (Java's
    ``MixAll.getDLQTopic``)."""
    return DLQ_GROUP_TOPIC_PREFIX + group


NAMESPACE_SEPARATOR = "%"
"""Between a namespace and the name it wraps: ``ns%Topic``, ``ns%GID``, ``%RETRY%ns%GID`` (Java's
``NamespaceUtil.NAMESPACE_SEPARATOR``)."""

# Java's TopicValidator system topics and MixAll's system group prefix: a namespace never wraps them.
_SYSTEM_TOPICS = frozenset(
    {
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "BenchmarkTest",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRACE_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
        "CHECKPOINT_TOPIC",
    }
)
_SYSTEM_TOPIC_PREFIX = "rmq_sys_"
_SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"
_NAMESPACE_PATTERN = re.compile(r"[|a-zA-Z0-9_-]+")


def _is_system_resource(name: str) -> bool:
    return name in _SYSTEM_TOPICS or name.startswith((_SYSTEM_TOPIC_PREFIX, _SYSTEM_GROUP_PREFIX))


def _split_retry_or_dlq(name: str) -> tuple[str, str]:
    """``%RETRY%`` or ``%DLQ%`` (or nothing) and the rest: the namespace goes after that prefix, as in Java."""
    for prefix in (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX):
        if name.startswith(prefix):
            return prefix, name[len(prefix) :]
    return "", name


def check_namespace(namespace: object) -> str | None:
    """The namespace a consumer wraps its names in, or None for none (None or ``""``, as Java's ``isEmpty``).

    Java checks a namespace only inside the names it wraps (``ns%GID`` must be a legal group); we also refuse what
    Java accepts and then unwraps wrongly: a ``%`` (Java unwraps at the first one, so ``a%b`` would give back
    ``b%GID``), and a ``rmq_sys_`` or ``CID_RMQ_SYS_`` start (the wrapped names would count as system names and
    never be unwrapped)."""
    if namespace is None or namespace == "":
        return None
    if not isinstance(namespace, str):
        raise TypeError(f"namespace must be a str, got {type(namespace).__name__}")
    if not _NAMESPACE_PATTERN.fullmatch(namespace):
        raise ValueError(f"namespace {namespace!r} has characters outside [|a-zA-Z0-9_-]")
    if namespace.startswith((_SYSTEM_TOPIC_PREFIX, _SYSTEM_GROUP_PREFIX)):
        raise ValueError(f"namespace {namespace!r} starts like a system name; its wrapped names would not unwrap")
    return namespace


def with_namespace(namespace: str | None, name: str) -> str:
    """``name`` (a topic or group) as the wire knows it under ``namespace`` (Java's ``NamespaceUtil.wrapNamespace``):
    ``Topic`` becomes ``ns%Topic``, ``%RETRY%GID`` becomes ``%RETRY%ns%GID``; a system name, an empty one, or one
    already wrapped in this namespace is kept, so wrapping twice is wrapping once."""
    if not namespace or not name or _is_system_resource(name):
        return name
    prefix, rest = _split_retry_or_dlq(name)
    if rest.startswith(namespace + NAMESPACE_SEPARATOR):
        return name
    return prefix + namespace + NAMESPACE_SEPARATOR + rest


def without_namespace(name: str, namespace: str | None) -> str:
    """``name`` as the user of ``namespace`` calls it (Java's two-argument ``NamespaceUtil.withoutNamespace``):
    ``ns%Topic`` becomes ``Topic``, ``%RETRY%ns%GID`` becomes ``%RETRY%GID``; a name in another namespace, or
    in none, is kept."""
    if not namespace or not name or _is_system_resource(name):
        return name
    prefix, rest = _split_retry_or_dlq(name)
    if not rest.startswith(namespace + NAMESPACE_SEPARATOR):
        return name
    return prefix + rest[rest.index(NAMESPACE_SEPARATOR) + 1 :]


@dataclass(frozen=True)
class AclCredentials:
    """RocketMQ ACL credentials: an access key and its secret (and, for temporary credentials, a security token),
    as Java's ``SessionCredentials``; the remoting wire signs every request with them
    (:mod:`rocket_rebalance.remoting.acl`). Blank keys are refused here: the Java client would silently not sign.
    The secret and the token never show: ``repr`` and ``str`` name the access key only, because a credentials
    object ends up in tracebacks, ``describe()`` output and log lines."""

    access_key: str
    secret_key: str = field(repr=False)
    security_token: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        for name in ("access_key", "secret_key"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise TypeError(f"{name} must be a str, got {type(value).__name__}")
            if not value.strip():
                raise ValueError(f"{name} must not be blank")
        if self.security_token is not None and not isinstance(self.security_token, str):
            raise TypeError(f"security_token must be a str or None, got {type(self.security_token).__name__}")

    def __str__(self) -> str:
        return f"access key {self.access_key}"


@dataclass(frozen=True)
class TlsSettings:
    """TLS for every connection of the remoting wire (name servers and brokers), as Java's ``useTLS``.

    ``verify`` (the default) checks the server's certificate chain against ``ca_file`` (PEM), or against the
    system's trusted certificates when no CA file is given. Host names are *not* checked: a broker registers its
    IP address at the name server and a client connects to whatever the route says, and cluster certificates
    rarely name every broker IP; Java's client does not check host names either (Netty's client context, as
    RocketMQ builds it, has no endpoint identification). The chain check is what keeps a stranger out.
    ``verify=False`` trusts any certificate: an explicit choice, warned about once per process when a transport
    is opened with it, and refused together with a CA file (which would then check nothing).
    ``cert_file`` is a client certificate (PEM) for servers that require one (mutual TLS), its private key in
    ``key_file`` or in the certificate file itself. The files are read when a transport is opened (a missing
    file, one that is not PEM, or a key that does not match its certificate is one line naming the file); this
    class only holds the settings, so it stays pure like the rest of this module."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify: bool = True

    def __post_init__(self) -> None:
        for name in ("ca_file", "cert_file", "key_file"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise TypeError(f"tls {name} must be a file name (a non-empty str) or None, got {value!r}")
        if not isinstance(self.verify, bool):
            raise TypeError(f"tls verify must be a bool, got {type(self.verify).__name__}")
        if self.key_file is not None and self.cert_file is None:
            raise ValueError(f"a TLS key file ({self.key_file}) needs its certificate file (tls_cert_file)")
        if not self.verify and self.ca_file is not None:
            raise ValueError(
                f"a TLS CA file ({self.ca_file}) is for verifying the server, which tls_verify=False turns off: "
                "give one or the other"
            )

    def __str__(self) -> str:
        if not self.verify:
            trust = "no certificate verification"
        elif self.ca_file is not None:
            trust = f"verified against {self.ca_file}"
        else:
            trust = "verified against the system's trusted certificates"
        client = "" if self.cert_file is None else f", client certificate {self.cert_file}"
        return f"TLS ({trust}{client})"
