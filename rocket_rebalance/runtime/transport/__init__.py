"""How a consumer talks to name servers and brokers: the interface.

The runtime codes against :class:`Transport` (threads) and :class:`AsyncTransport` (asyncio) only; this module
imports no wire. Two implementations live beside
it and are imported only when :func:`.wire.open_transport` chooses one by the address's form:

- :mod:`.remoting`: RocketMQ's own remoting protocol over TCP, for a real Apache RocketMQ cluster. Chosen by a
  name-server list in RocketMQ's own form, ``host:port`` or ``host:port;host:port``, which is what RocketMQ users
  pass everywhere (``-n`` of mqadmin, ``setNamesrvAddr``).
- :mod:`.grpc`: gRPC to ``nameserver_stub``. Chosen explicitly with the ``grpc://host:port`` form.

Every call raises :class:`TransportError` on failure, with a message naming the call and the address, and a
``code`` shared by both wires (``UNAVAILABLE``, ``DEADLINE_EXCEEDED``, ``NOT_FOUND``, ...), so callers classify
failures without knowing the wire.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from rocket_rebalance.model import (
    RETRY_GROUP_TOPIC_PREFIX,
    RETRY_TOPIC_PROPERTY,
    ConsumeFromWhere,
    MessageModel,
    MessageQueue,
    without_namespace,
)
from rocket_rebalance.route import TopicRoute
from rocket_rebalance.subscription import TAG, ExpressionError, SubscriptionExpression

__all__ = [
    "GRPC_SCHEME",
    "GROUP_NOT_ONLINE",
    "AdminTransport",
    "AsyncBrokerRequests",
    "AsyncTransport",
    "BrokerRequests",
    "ConnectionRow",
    "ConsumerReport",
    "GroupNotified",
    "GroupRegistration",
    "GroupSubscription",
    "Message",
    "NotificationStream",
    "ProgressRow",
    "PullResult",
    "PullStatus",
    "QueueRunInfo",
    "RunningInfo",
    "StreamEnd",
    "StreamEnded",
    "StubWireUnavailableError",
    "SubscriptionRefusedError",
    "TopicConsumeStatus",
    "Transport",
    "TransportError",
    "body_bytes",
    "offsets_of",
    "reported_expression",
    "running_info_properties",
]

GRPC_SCHEME = "grpc://"
STUB_EXTRA_INSTALL = "pip install 'rocket-rebalance[stub]'"
"""How to install the ``stub`` extra: grpcio and protobuf, which only ``nameserver_stub`` and its wire need."""
GROUP_NOT_ONLINE = (
    "no consume stats of consumer group {group}: its offset table is empty, maybe the consumer is not online"
)
"""What ``consumerProgress`` of a group with no offsets says, in mqadmin's words (both wires, the command alike)."""
CLIENT_VERSION = "V5_3_3"
"""The Java client version whose behaviour this library's consumers have, as ``PROP_CLIENT_VERSION`` names it."""


class TransportError(OSError):
    """A call to the name server or a broker failed; ``code`` says how, in gRPC's status names for both wires."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code


class StubWireUnavailableError(ImportError):
    """Something that needs the ``stub`` extra (a ``grpc://`` address, ``nameserver_stub``'s wire) was asked of an
    install without it: the core installs without grpcio and protobuf, so this is refused in one line naming the
    extra where it is asked for (a consumer's construction, a command), not as a ModuleNotFoundError from inside."""

    def __init__(self, what: str) -> None:
        super().__init__(f"{what} needs the 'stub' extra (grpcio, protobuf): {STUB_EXTRA_INSTALL}")


class SubscriptionRefusedError(TransportError):
    """A broker refuses a subscription expression at the consumer's start (CHECK_CLIENT_CONFIG): it does not filter
    by that expression type (``enablePropertyFilter=false``), or the expression does not compile. Not retried: the
    consumer cannot start with it."""


@dataclass(frozen=True)
class GroupSubscription:
    """One topic's row of a group's subscription table at a broker. ``ours``: the row carries this transport's
    subscription version, so it was (most likely) written by our own heartbeat and says nothing of the others."""

    expression: SubscriptionExpression
    ours: bool


def reported_expression(sub_string: str, expression_type: str, where: str) -> SubscriptionExpression:
    """An expression as a server reports it (``""`` meaning ``*`` and TAG, as Java normalises them); one we cannot
    read is the server's error, named by ``where``."""
    try:
        return SubscriptionExpression(sub_string or "*", expression_type or TAG)
    except ExpressionError as error:
        raise TransportError(f"{where}: {error}") from None


@dataclass(frozen=True, slots=True)
class Message:
    """One pulled message (the parts a listener needs of RocketMQ's ``MessageExt``): the queue it came from
    (``queue``, also ``mq``) and its offset there, its message ID, keys (space-separated, as RocketMQ joins them),
    tags, user properties, the body as bytes, when it was born at the producer and stored at the broker (epoch
    milliseconds) and how often it was consumed before (``reconsume_times``); ``topic`` is the topic it was sent to.

    ``commit_log_offset`` and ``reconsume_times`` are what sending a failed message back to the retry topic needs
    (RocketMQ's wire has them; the stub's has not, so there they stay -1 and 0; the messages of one inner batch
    share their record's). ``body_error`` says why a body could not be read (damaged compressed data, one past the
    size cap, an inner batch that does not parse): the engine fails such a message as if the listener had refused
    it, without calling the listener.

    Slotted (no ``__dict__``): a consumer holds thousands of these at once, and a message without a dict of its own
    costs half as much to make and keep (issue 42).
    """

    mq: MessageQueue
    queue_offset: int
    msg_id: str
    body: bytes
    tags: str = ""
    keys: str = ""
    properties: Mapping[str, str] = field(default_factory=dict)
    commit_log_offset: int = -1
    reconsume_times: int = 0
    born_timestamp_ms: int = 0
    store_timestamp_ms: int = 0
    body_error: str = ""  # why the stored body could not be read; such a message never reaches the listener
    namespace: str | None = None  # the consumer's (``namespace=``): ``topic`` is given without it

    @property
    def queue(self) -> MessageQueue:
        """The queue the message was pulled from (``mq``, RocketMQ's name)."""
        return self.mq

    @property
    def topic(self) -> str:
        """The topic the message was sent to, as Java's listener sees it: one re-delivered through the group's
        retry topic carries its original topic in the ``RETRY_TOPIC`` property, which Java puts back
        (``resetRetryAndNamespace``) so a listener that checks the topic does not skip every retried message.
        ``mq`` stays the queue it was pulled from, which is what its offset belongs to. Under a consumer's
        ``namespace`` the topic is given without it (``ns%Orders`` reads ``Orders``), as Java's
        ``resetRetryAndNamespace`` gives it, while ``mq`` keeps the wire's name."""
        topic = self.mq.topic
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            topic = self.properties.get(RETRY_TOPIC_PROPERTY) or topic
        return without_namespace(topic, self.namespace)


_QUEUE_OFFSET = operator.attrgetter("queue_offset")
_BODY = operator.attrgetter("body")


def offsets_of(messages: Iterable[Message]) -> tuple[int, ...]:
    """The messages' queue offsets, in their order. Every pull, consume task and poll reports its messages to
    the core by their offsets; done without a Python step per message (the generator it replaces was 1 to 2 %
    of a draining consumer's time)."""
    return tuple(map(_QUEUE_OFFSET, messages))


def body_bytes(messages: Iterable[Message]) -> int:
    """The messages' bodies' bytes in all (flow control by size), as :func:`offsets_of` is done."""
    return sum(map(len, map(_BODY, messages)))


class PullStatus:
    """RocketMQ's pull statuses."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass(frozen=True)
class PullResult:
    status: str
    next_begin_offset: int
    messages: tuple[Message, ...] = ()
    broker_id: int = 0
    """Which broker of the queue's broker set answered: 0 its master, else a slave (the master is down, or it
    suggested reading from a slave); the pulling part says so in health."""


@dataclass(frozen=True)
class GroupRegistration:
    """What a heartbeat says about our group (RocketMQ's ``ConsumerData``).

    ``sub_version`` is the subscription version (Java: the wall-clock millisecond of the last allocation change);
    the broker refuses pulls that carry a newer version than the last heartbeat gave it.
    """

    consumer_group: str
    push: bool
    message_model: MessageModel
    consume_from_where: ConsumeFromWhere
    topics: tuple[str, ...]
    sub_version: int = 0
    expressions: Mapping[str, SubscriptionExpression] = field(default_factory=dict)
    """Each topic's expression; a topic not in it (the retry topic, for one) is subscribed with ``*``."""

    def expression(self, topic: str) -> SubscriptionExpression:
        return self.expressions.get(topic) or SubscriptionExpression()


class NotificationStream(Protocol):
    """A broker's notification stream, opened by :meth:`Transport.connect`; ``cancel()`` ends it."""

    @property
    def lists_us(self) -> bool:
        """Whether the broker now lists this process by this stream: it confirmed the stream, which has not ended.
        A broker lists a client ID once per connection, so a heartbeat answered while this is false may have been
        counted on another process's connection that uses the same ID (core rule L6)."""
        ...

    @property
    def ended(self) -> bool:
        """Whether the stream has ended (``on_end`` was told)."""
        ...

    def cancel(self) -> None: ...


GroupNotified = Callable[[str], None]
"""Called with the group whose members changed (NOTIFY_CONSUMER_IDS_CHANGED)."""

StreamEnded = Callable[["TransportError | None"], None]
"""Called once when a notification stream ends: the error that ended it, or None (``cancel()``, ``close()``, or
a server that ended it without an error)."""


class StreamEnd:
    """The end of a notification stream, said to ``on_end`` once: the reader that saw the connection go and a
    ``cancel()`` from another thread may both get here, and a consumer must hear of one end, not two. It also
    keeps whether the broker confirmed the stream (``confirmed``: at once where the stream is the connection the
    heartbeats travel on; on its greeting where it is a call of its own), for :attr:`lists_us`."""

    def __init__(self, on_end: StreamEnded, confirmed: bool) -> None:
        self._on_end = on_end
        self._ended = False
        self._confirmed = confirmed
        self._lock = threading.Lock()

    def confirm(self) -> None:
        """The broker said it registered the stream (the gRPC wire's ``connected`` greeting)."""
        self._confirmed = True

    @property
    def lists_us(self) -> bool:
        return self._confirmed and not self._ended

    @property
    def ended(self) -> bool:
        return self._ended

    def end(self, error: TransportError | None) -> None:
        with self._lock:
            if self._ended:
                return
            self._ended = True
        self._on_end(error)


@dataclass(frozen=True)
class QueueRunInfo:
    """One row of a consumer's process-queue table, as ``mqadmin consumerStatus`` shows it (Java's
    ``ProcessQueueInfo``, its units: counts, MiB rounded down, epoch milliseconds). The cached messages are those
    pulled and not yet consumed, handed to the listener or not; the ``transaction_*`` fields are Java's
    ``consumingMsgOrderlyTreeMap``: the batch an orderly consumer has handed out and not finished."""

    commit_offset: int
    cached_count: int = 0
    cached_min_offset: int = 0
    cached_max_offset: int = 0
    cached_size_mib: int = 0
    transaction_min_offset: int = 0
    transaction_max_offset: int = 0
    transaction_count: int = 0
    locked: bool = False
    try_unlock_times: int = 0
    last_lock_ms: int = 0
    dropped: bool = False
    last_pull_ms: int = 0
    last_consume_ms: int = 0


@dataclass(frozen=True)
class TopicConsumeStatus:
    """One subscribed topic's consume statistics (Java's ``ConsumeStatus``): RTs in milliseconds and rates per
    second over the last minute, failed messages over the last hour (see :mod:`rocket_rebalance.runtime.stats`)."""

    pull_rt: float = 0.0
    pull_tps: float = 0.0
    consume_rt: float = 0.0
    consume_ok_tps: float = 0.0
    consume_failed_tps: float = 0.0
    consume_failed_msgs: int = 0


@dataclass(frozen=True)
class RunningInfo:
    """What a consumer says about itself when a broker asks (RocketMQ's ``ConsumerRunningInfo``)."""

    consume_type: str  # CONSUME_PASSIVELY (push) | CONSUME_ACTIVELY (pull)
    message_model: str
    consume_from_where: str
    consume_orderly: bool
    start_timestamp_ms: int
    topics: tuple[str, ...]
    queues: Mapping[MessageQueue, QueueRunInfo]
    strategy: str = ""
    """The strategy's class, dotted, as the start of Java's ``allocateMessageQueueStrategy`` property reads
    (``org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely@1b6d3586``): the class names of
    this library's strategies are Java's, so a collector maps both kinds by the last dotted part."""
    expressions: Mapping[str, SubscriptionExpression] = field(default_factory=dict)
    """Each topic's own expression (a topic not in it: ``*``), reported in ``subscriptionSet`` as Java reports its
    own: an audit compares the members of a group by it."""
    status: Mapping[str, TopicConsumeStatus] = field(default_factory=dict)
    """Each subscribed topic's consume statistics (``statusTable``)."""
    settings: Mapping[str, str] = field(default_factory=dict)
    """The consumer's settings under the names of Java's ``DefaultMQPushConsumer`` fields (``consumeThreadMin``,
    ``pullBatchSize`` ...), which Java copies into the properties (``MixAll.object2Properties``)."""
    consume_threads: int = -1
    """The listener's thread count (``PROP_THREADPOOL_CORE_SIZE``); -1 where there is no listener pool."""


def running_info_properties(info: RunningInfo, nameserver_address: str) -> dict[str, str]:
    """The properties of a consumer's running info, with the keys Java's ``ConsumerRunningInfo`` has, built here
    once so that both wires send the same ones and a collector reads Java and Python consumers alike."""
    return {
        **info.settings,
        "PROP_CONSUME_TYPE": info.consume_type,
        "PROP_CONSUMEORDERLY": str(info.consume_orderly).lower(),
        "PROP_CLIENT_VERSION": CLIENT_VERSION,
        "PROP_CONSUMER_START_TIMESTAMP": str(info.start_timestamp_ms),
        "PROP_NAMESERVER_ADDR": nameserver_address,
        "PROP_THREADPOOL_CORE_SIZE": str(info.consume_threads),
        "PROP_CLIENT_LANGUAGE": "PYTHON",
        "messageModel": info.message_model,
        "consumeFromWhere": info.consume_from_where,
        "allocateMessageQueueStrategy": info.strategy,
    }


class BrokerRequests(Protocol):
    """What a broker may ask of a consumer on its connection (RocketMQ's ``ClientRemotingProcessor``)."""

    def running_info(self) -> RunningInfo:
        """GET_CONSUMER_RUNNING_INFO: answered so that ``mqadmin consumerStatus`` shows our queues."""
        ...

    def consume_directly(self, message: Message) -> tuple[bool, str]:
        """CONSUME_MESSAGE_DIRECTLY: hand one message to the listener now; (consumed, remark)."""
        ...

    def reset_offsets(self, consumer_group: str, offsets: Mapping[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET: an operator's reset, to apply to the queues we hold; called on the
        transport's reader, so it must return at once (it hands the reset on)."""
        ...

    def consumer_status(self, consumer_group: str, topic: str) -> dict[MessageQueue, int]:
        """GET_CONSUMER_STATUS_FROM_CLIENT: the commit offset of each queue of ``topic`` we hold."""
        ...


@dataclass(frozen=True)
class ProgressRow:
    """One queue of ``consumerProgress``: how far the group is behind, and who consumed it last."""

    mq: MessageQueue
    broker_offset: int
    consumer_offset: int
    diff: int
    last_owner: str
    lock_owner: str


@dataclass(frozen=True)
class ConsumerReport:
    """What one consumer says about itself when an operator asks (GET_CONSUMER_RUNNING_INFO, relayed by a broker
    to the consumer's connection): the queues of its process-queue table, which is what it *observes* holding,
    and its properties. Queues it reports as dropped (given up, their offset still being saved) are not in
    ``queues``: the rebalance has already handed them on. Java sends its consumer's fields there
    (``allocateMessageQueueStrategy`` as the strategy object's ``toString``, ``messageModel`` ...) and
    ``PROP_CLIENT_LANGUAGE``; this library's consumers send the same keys, so the snapshot collector reads both
    kinds alike."""

    client_id: str
    queues: frozenset[MessageQueue]
    properties: Mapping[str, str]
    subscriptions: Mapping[str, SubscriptionExpression] | None = None
    """Each topic the consumer subscribes, with its own expression (running info's ``subscriptionSet``); None when
    the wire's answer does not carry them (the stub's: its connection list has each member's instead)."""
    status: Mapping[str, TopicConsumeStatus] = field(default_factory=dict)
    """Each subscribed topic's consume statistics, as the consumer computed them (running info's ``statusTable``)."""


@dataclass(frozen=True)
class ConnectionRow:
    """One connection of the group at one broker (mqadmin ``consumerConnection``)."""

    client_id: str
    broker_name: str
    connected: bool
    last_heartbeat_ms_ago: int
    topics: tuple[str, ...]
    client_addr: str = ""
    language: str = ""
    version: int = 0
    message_model: str = ""
    """The group's ``CLUSTERING`` or ``BROADCASTING`` as the broker's connection list states it ("" where the wire
    does not say)."""
    subscriptions: tuple[tuple[str, SubscriptionExpression], ...] | None = None
    """This member's own subscriptions (topic, expression) from its heartbeat where the wire lists them per
    connection (the stub's); None where it gives only the group's merged table (RocketMQ's)."""


class Transport(Protocol):
    """Everything a consumer asks of the name server and brokers. Brokers are named as in routes.

    ``long_poll_ms`` is how long a pull may wait at the server for messages (the stub: 1 s; RocketMQ: 15 s, the
    broker's ``brokerSuspendMaxTimeMillis`` that Java's push consumer asks for).
    """

    address: str
    long_poll_ms: int

    def route(self, topic: str) -> TopicRoute: ...

    def heartbeat(self, broker: str, client_id: str, group: GroupRegistration) -> None: ...

    def unregister(self, broker: str, client_id: str, consumer_group: str) -> None: ...

    def consumer_list(self, broker: str, consumer_group: str) -> list[str]: ...

    def subscription_table(self, broker: str, consumer_group: str) -> dict[str, GroupSubscription]:
        """The group's subscription table at ``broker``: the one expression per topic the broker filters every
        member's pulls by, written by the members' heartbeats (empty when the group is not online there)."""
        ...

    def check_subscription(
        self, broker: str, consumer_group: str, client_id: str, topic: str, expression: SubscriptionExpression
    ) -> None:
        """Ask ``broker`` whether it can filter by ``expression`` (Java's ``checkClientInBroker`` before a consumer
        starts); raises :class:`SubscriptionRefusedError` when it cannot, or the wire refuses it itself."""
        ...

    def query_offsets(
        self, broker: str, consumer_group: str, queues: Sequence[MessageQueue]
    ) -> dict[MessageQueue, int | None]: ...

    def update_offsets(
        self, broker: str, consumer_group: str, client_id: str, offsets: Mapping[MessageQueue, int]
    ) -> dict[MessageQueue, int]:
        """Store offsets; the answer holds the queues now stored at least that far (with the stored value)."""
        ...

    def lock(
        self, broker: str, consumer_group: str, client_id: str, queues: Sequence[MessageQueue]
    ) -> set[MessageQueue]: ...

    def unlock(self, broker: str, consumer_group: str, client_id: str, queues: Sequence[MessageQueue]) -> None: ...

    def pull(
        self,
        mq: MessageQueue,
        consumer_group: str,
        offset: int,
        max_messages: int,
        wait_ms: int,
        done: Callable[[PullResult | TransportError], None],
    ) -> None:
        """Start a (long-polling) pull and return at once; ``done`` gets the result or the error later, so an
        idle queue waiting for messages holds no thread."""
        ...

    def max_offset(self, mq: MessageQueue) -> int: ...

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int: ...

    def send(
        self,
        topic: str,
        broker: str,
        bodies: Sequence[bytes],
        queue_id: int | None = None,
        tags: str = "",
        keys: str = "",
        properties: Mapping[str, str] | None = None,
    ) -> tuple[int, list[int]]:
        """Send bodies to one queue (the broker picks one when ``queue_id`` is None): (queue ID, offsets). Each
        message carries ``tags``, ``keys`` (space-separated) and ``properties``, as Java's ``Message`` does."""
        ...

    def send_back(self, consumer_group: str, message: Message, max_reconsume_times: int, delay_level: int) -> None:
        """Give a message the listener failed on back to the broker, as Java does: its retry topic, after the delay
        of ``delay_level`` (0: the broker picks 3 + the reconsume count), or the group's dead-letter queue once it
        was reconsumed ``max_reconsume_times`` or when ``delay_level`` is -1. Raises :class:`TransportError` with
        code ``UNIMPLEMENTED`` where the server keeps no retry topics."""
        ...

    def connect(self, broker: str, client_id: str, on_group: GroupNotified, on_end: StreamEnded) -> NotificationStream:
        """Open the broker's notification stream and return: ``on_group`` hears every group notified on it,
        then ``on_end`` its end, once (it may come before this returns). No thread waits per stream: both are
        called on the transport's own thread, shared by every stream, so they must return at once. Raises
        :class:`TransportError` when the broker cannot be reached now (or tells ``on_end``, where the wire only
        finds out later)."""
        ...

    def attach(self, client: BrokerRequests) -> None:
        """Answer brokers' requests about this consumer (running info, consume directly) from ``client``."""
        ...

    def keep_to_cpu(self, cpu: int) -> None:
        """Run the thread that reads this transport's answers on ``cpu`` only, from now on, where that thread is
        the transport's own (the consumer's ``pin_cpu``: every pulled message passes through it)."""
        ...

    def close(self, timeout: float | None = None) -> bool:
        """End every connection and stream: no request leaves after this returns, and one in flight fails at
        once. Then wait up to ``timeout`` seconds (None: the call timeout) for the transport's threads to end;
        True when they did."""
        ...


class AdminTransport(Transport, Protocol):
    """The operator's calls on top of a consumer's: topics, progress, connections."""

    def create_topic(self, topic: str, queue_nums: int, brokers: Sequence[str] = ()) -> None:
        """Create or update ``topic`` with ``queue_nums`` read and write queues on ``brokers`` (default: all)."""
        ...

    def brokers(self) -> dict[str, str]:
        """Every broker of the cluster: name -> master address."""
        ...

    def min_offset(self, mq: MessageQueue) -> int:
        """The queue's smallest offset still stored (older messages were cleaned up)."""
        ...

    def consumer_progress(self, consumer_group: str, topic: str = "", owners: bool = True) -> list[ProgressRow]:
        """Per queue: the broker's and the group's offsets, and (``owners``) who holds it; without owners the
        remoting wire asks no consumer, which a collector that asks each consumer itself does not need twice."""
        ...

    def consumer_connections(self, consumer_group: str) -> list[ConnectionRow]: ...

    def topics(self) -> list[str]:
        """Every topic the name server knows, sorted (retry and system topics included)."""
        ...

    def consumer_groups(self) -> list[str]:
        """Every consumer group the brokers know (their subscription-group configs, or for the stub every group
        with a registration or stored offsets), sorted."""
        ...

    def consumer_report(self, consumer_group: str, client_id: str) -> ConsumerReport:
        """Ask one consumer, through a broker it is connected to, what it holds. Raises :class:`TransportError`
        with code ``NOT_FOUND`` when the consumer has no connection, ``DEADLINE_EXCEEDED`` when it does not
        answer in time."""
        ...


class AsyncBrokerRequests(Protocol):
    """What a broker may ask of an asyncio consumer: as :class:`BrokerRequests`, answered on the event loop (the
    running info is read in place; consuming a message directly awaits the listener)."""

    def running_info(self) -> RunningInfo: ...

    async def consume_directly(self, message: Message) -> tuple[bool, str]: ...

    def reset_offsets(self, consumer_group: str, offsets: Mapping[MessageQueue, int]) -> None: ...

    def consumer_status(self, consumer_group: str, topic: str) -> dict[MessageQueue, int]: ...


class AsyncTransport(Protocol):
    """The asyncio twin of :class:`Transport`: the same calls with the same arguments, answers, errors and codes,
    as coroutines of the loop the transport was opened on (its sockets are that loop's streams; no thread waits
    for a call). Differences, where asyncio asks for them: :meth:`pull` is awaited for its answer instead of
    taking a callback; :meth:`connect` calls ``on_group`` and ``on_end`` on the loop; :meth:`close` is awaited.
    A call cancelled while it waits for its answer drops the answer when it comes."""

    address: str
    long_poll_ms: int

    async def route(self, topic: str) -> TopicRoute: ...

    async def heartbeat(self, broker: str, client_id: str, group: GroupRegistration) -> None: ...

    async def unregister(self, broker: str, client_id: str, consumer_group: str) -> None: ...

    async def consumer_list(self, broker: str, consumer_group: str) -> list[str]: ...

    async def subscription_table(self, broker: str, consumer_group: str) -> dict[str, GroupSubscription]: ...

    async def check_subscription(
        self, broker: str, consumer_group: str, client_id: str, topic: str, expression: SubscriptionExpression
    ) -> None: ...

    async def query_offsets(
        self, broker: str, consumer_group: str, queues: Sequence[MessageQueue]
    ) -> dict[MessageQueue, int | None]: ...

    async def update_offsets(
        self, broker: str, consumer_group: str, client_id: str, offsets: Mapping[MessageQueue, int]
    ) -> dict[MessageQueue, int]: ...

    async def lock(
        self, broker: str, consumer_group: str, client_id: str, queues: Sequence[MessageQueue]
    ) -> set[MessageQueue]: ...

    async def unlock(
        self, broker: str, consumer_group: str, client_id: str, queues: Sequence[MessageQueue]
    ) -> None: ...

    async def pull(
        self, mq: MessageQueue, consumer_group: str, offset: int, max_messages: int, wait_ms: int
    ) -> PullResult:
        """A (long-polling) pull: the answer, or :class:`TransportError`."""
        ...

    async def max_offset(self, mq: MessageQueue) -> int: ...

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int: ...

    async def min_offset(self, mq: MessageQueue) -> int:
        """The queue's smallest offset still stored (a pull consumer's ``seek`` checks against it)."""
        ...

    async def consumer_connections(self, consumer_group: str) -> list[ConnectionRow]:
        """The group's connections (``mqadmin consumerConnection``): a consumer running a Python-only strategy
        reads its members' languages here."""
        ...

    async def send(
        self,
        topic: str,
        broker: str,
        bodies: Sequence[bytes],
        queue_id: int | None = None,
        tags: str = "",
        keys: str = "",
        properties: Mapping[str, str] | None = None,
    ) -> tuple[int, list[int]]: ...

    async def send_back(
        self, consumer_group: str, message: Message, max_reconsume_times: int, delay_level: int
    ) -> None: ...

    async def connect(
        self, broker: str, client_id: str, on_group: GroupNotified, on_end: StreamEnded
    ) -> NotificationStream: ...

    def attach(self, client: AsyncBrokerRequests) -> None: ...

    async def close(self, timeout: float | None = None) -> bool: ...
