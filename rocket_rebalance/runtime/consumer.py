"""The consumers an application embeds: what they share, and the threaded push consumer.

:class:`ConsumerBase` holds what every consumer of this library takes and does alike, threaded or asyncio, push or
pull: the subscriptions, the core's settings, the wire and its credentials, the offset store, metrics, a rebalance
listener, and the reads (``describe()``, ``healthy``, ``owned_queues()``). :class:`PushConsumer` is Java's
``DefaultMQPushConsumer``: the library decides which queues this process owns, pulls them, and hands messages to
the listener (concurrently, or one at a time per queue when orderly). Without a message listener only
``queue_listener`` is told which queues are ours; :class:`~rocket_rebalance.runtime.pull_consumer.PullConsumer`
is the consumer to pull with. The asyncio twins are in :mod:`rocket_rebalance.runtime.async_consumer`.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import threading
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import fields, replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, Unpack

from rocket_rebalance.core import RebalanceConfig, default_consume_timestamp_ms
from rocket_rebalance.model import (
    AclCredentials,
    ConsumeFromWhere,
    MessageModel,
    MessageQueue,
    TlsSettings,
    build_client_id,
    check_duration,
    check_group_name,
    check_namespace,
    check_topic_name,
    with_namespace,
    without_namespace,
)
from rocket_rebalance.runtime.driver import Driver
from rocket_rebalance.runtime.engine import Engine
from rocket_rebalance.runtime.listener import RebalanceListener
from rocket_rebalance.runtime.metrics import ConsumeMetrics
from rocket_rebalance.runtime.offset_store import (
    BrokerOffsets,
    LocalFileOffsetStore,
    default_offset_path,
)
from rocket_rebalance.runtime.options import ConsumerOptions, PushOptions, check_option_names
from rocket_rebalance.runtime.settings import ConsumerNotReadyError, MessageListener, QueueListener
from rocket_rebalance.runtime.steps import Steps, call, run
from rocket_rebalance.runtime.transport import AsyncTransport, Message, Transport, TransportError
from rocket_rebalance.runtime.transport.wire import open_async_transport, open_transport
from rocket_rebalance.strategies import STRATEGY_NAMES, AllocateMessageQueueStrategy, create_strategy
from rocket_rebalance.subscription import TAG, SubscriptionExpression, subscriptions_from

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = [
    "READY_CHECK_INTERVAL",
    "WAIT_INTERVAL_ENV",
    "ConsumerBase",
    "MetricsUnavailableError",
    "PushConsumer",
    "default_client_id",
    "wait_blocking",
    "why_not_ready",
]


class MetricsUnavailableError(ImportError):
    """Metrics were asked for without ``prometheus_client`` installed (``pip install 'rocket-rebalance[metrics]'``)."""


WAIT_INTERVAL_ENV = "ROCKET_REBALANCE_WAIT_INTERVAL"
"""Seconds between periodic rebalances when not given in code (Java: ``rocketmq.client.rebalance.waitInterval``)."""


def _local_ip() -> str:
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def _credentials(access_key: str | None, secret_key: str | None, security_token: str | None) -> AclCredentials | None:
    """The ACL credentials the keyword arguments give, or None; one key without the other (or a token without
    both) is refused, because a cluster that wants credentials would refuse every unsigned request."""
    if access_key is None and secret_key is None and security_token is None:
        return None
    if access_key is None or secret_key is None:
        raise ValueError("ACL credentials need both access_key and secret_key")
    return AclCredentials(access_key, secret_key, security_token)


def _tls(
    tls: bool,
    ca_file: str | os.PathLike[str] | None,
    cert_file: str | os.PathLike[str] | None,
    key_file: str | os.PathLike[str] | None,
    verify: bool,
) -> TlsSettings | None:
    """The TLS settings the keyword arguments give, or None for plaintext. A CA file, a client certificate or key,
    or ``tls_verify=False`` turns TLS on by itself (each means nothing without it), as ``--tls-*`` do."""
    files = [None if path is None else os.fspath(path) for path in (ca_file, cert_file, key_file)]
    if not tls and verify and all(path is None for path in files):
        return None
    return TlsSettings(files[0], files[1], files[2], verify)


def _number_or_text(text: str) -> float | str:
    """An environment variable's number, or its text for the error that names it."""
    try:
        return float(text)
    except ValueError:
        return text


_CONFIG_KNOBS = frozenset(field.name for field in fields(RebalanceConfig)) & ConsumerOptions.__optional_keys__ - {
    "client_id",
    "message_model",
    "consume_from_where",
    "consume_timestamp_ms",
    "strategy",
    "fenced_handover",
}
"""The options that go to :class:`RebalanceConfig` as given (the intervals and the rules' knobs); the rest of its
fields are read by ConsumerBase.__init__, or set by the consumer itself (``push_consumer``, ``confirm_revoke``)."""


def _strategy(consumer: type, strategy: object) -> AllocateMessageQueueStrategy:
    """The strategy a consumer is given: an object with ``name`` and ``allocate``, or a name for
    :func:`create_strategy` (an unknown one is its ``UnknownStrategyError``); anything else is refused here, at
    the constructor, rather than as an ``AttributeError`` in the first rebalance."""
    if isinstance(strategy, str):
        return create_strategy(strategy)
    if isinstance(strategy, AllocateMessageQueueStrategy):
        return strategy
    raise TypeError(
        f"{consumer.__name__}(strategy=...) takes a strategy object (with name and allocate) or a name "
        f"({', '.join(STRATEGY_NAMES)}), got {type(strategy).__name__}"
    )


_UNREACHABLE = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED"})
_DENIED = frozenset({"PERMISSION_DENIED", "UNAUTHENTICATED"})
READY_CHECK_INTERVAL = 0.05
"""Seconds between two looks at the engine while ``wait_for_assignment`` waits (a snapshot in its service
context: cheap, and the wait is once per start)."""


def why_not_ready(codes: Mapping[str, str]) -> str:
    """What keeps a consumer from its queues, from health's failing kinds and their errors' codes
    (:meth:`Health.codes`): a refused permission first (nothing else can work), then an unknown topic, then a
    name server that does not answer."""
    denied = [kind for kind, code in codes.items() if code in _DENIED]
    if denied:
        return f"permission denied ({', '.join(denied)})"
    routes = {kind.removeprefix("route of "): code for kind, code in codes.items() if kind.startswith("route of ")}
    unknown = [topic for topic, code in routes.items() if code == "NOT_FOUND"]
    if unknown:
        return f"topic unknown to the name server: {', '.join(unknown)}"
    if any(code in _UNREACHABLE for code in routes.values()):
        return "name server unreachable"
    if codes:
        return f"failing: {', '.join(codes)}"
    return "no rebalance round has read every topic's member list and applied its allocation yet"


def wait_blocking(
    consumer: ConsumerBase[Any], timeout: float, pause: Callable[[float], object]
) -> dict[str, frozenset[MessageQueue]]:
    """A threaded consumer's ``wait_for_assignment``: :meth:`ConsumerBase._looks`, each pause slept by
    ``pause(seconds)`` (a pull consumer runs its due rebalance callbacks meanwhile)."""
    looks = consumer._looks(timeout)
    try:
        while True:
            pause(next(looks))
    except StopIteration as ready:
        return ready.value  # type: ignore[no-any-return]


def default_client_id(unit_name: str | None = None) -> str:
    """``ip@pid#nanotime``: unique per process, as the Java client makes the default instance name unique."""
    return build_client_id(_local_ip(), f"{os.getpid()}#{time.monotonic_ns()}", unit_name)


E = TypeVar("E", bound=Driver)


class ConsumerBase(Generic[E]):
    """What every consumer shares (see the module docstring). ``namesrv_addr`` picks the wire: a RocketMQ
    name-server list (``host:port;host:port``) speaks RocketMQ's remoting protocol, ``grpc://host:port`` talks to
    ``nameserver_stub``; ``asynchronous`` opens the asyncio twin of the wire. ``topics`` is a list of topic names
    (each subscribed with ``*``) or a mapping of topic to a TAG expression (``{"Orders": "TagA || TagB"}``) or a
    :class:`~rocket_rebalance.subscription.SubscriptionExpression` (SQL92); :meth:`subscribe` adds one. Every member
    of a group must subscribe each topic alike (the broker keeps one subscription per topic for the whole group).

    ``on_error(kind, error)`` hears of the failures the consumer retries as the log does: the first of a kind, then
    at most every 30 s per kind, and each new type of error at once (``healthy`` and ``describe()`` say what is
    failing now). Every option is listed, typed and described once, in
    :mod:`rocket_rebalance.runtime.options` (intervals such as ``rebalance_interval`` included; defaults are the
    Java client's); an unknown one is a ``TypeError`` naming the consumer class. ``rebalance_listener`` (a
    :class:`~rocket_rebalance.runtime.listener.RebalanceListener`)
    hears each queue assigned, revoked and lost. ``metrics=True`` exposes this consumer's metrics through
    ``prometheus_client``'s default registry, ``metrics=registry`` through that registry (see
    :mod:`rocket_rebalance.runtime.prometheus`); off by default, and then ``prometheus_client`` is never loaded.

    ``namespace="ns"`` joins a group on an instance with (v1) namespaces, as Java's ``setNamespace``: on the wire
    the group is ``ns%<group>``, each topic ``ns%<topic>``, the retry topic ``%RETRY%ns%<group>``; the names
    given here, ``subscriptions``, ``owned_queues()``' keys and each message's ``topic`` are without it. Queues
    (``MessageQueue``: a message's ``queue``, the queue and rebalance listeners', ``owned_queues()``' values) keep
    the wire's topic, as Java gives them; a pull consumer's methods that take queues take them named either way."""

    _option_names: ClassVar[frozenset[str]] = PushOptions.__optional_keys__
    """The options this class takes (``**options`` of :class:`~rocket_rebalance.runtime.options.PushOptions`)."""

    def __init__(
        self,
        namesrv_addr: str,
        consumer_group: str,
        *,
        asynchronous: bool,
        push: bool,
        transport: Transport | AsyncTransport | None = None,
        **options: Unpack[PushOptions],
    ) -> None:
        check_option_names(type(self), options, self._option_names)
        settings = options.get("settings")
        if asynchronous and settings is not None and settings.pin_cpu is not None:
            raise ValueError("pin_cpu is for the threaded consumers: an asyncio consumer runs on its loop's one thread")
        self.namespace = check_namespace(options.get("namespace"))
        consumer_group = check_group_name(self._wire_name(check_group_name(consumer_group)))
        self._subscriptions = {
            self._wire_topic(topic): expr for topic, expr in subscriptions_from(options.get("topics", ())).items()
        }
        self.client_id = options.get("client_id") or default_client_id()
        given: Mapping[str, Any] = options
        config = {name: given[name] for name in _CONFIG_KNOBS if name in given}
        waited = os.environ.get(WAIT_INTERVAL_ENV)
        if "rebalance_interval" not in config and waited:
            config["rebalance_interval"] = check_duration(WAIT_INTERVAL_ENV, _number_or_text(waited))
        message_model = options.get("message_model", MessageModel.CLUSTERING)
        consume_from_where = options.get("consume_from_where", ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET)
        timestamp = None
        if consume_from_where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
            timestamp = int(options.get("consume_timestamp_ms", default_consume_timestamp_ms(int(time.time() * 1000))))
        rebalance_listener = options.get("rebalance_listener")
        if rebalance_listener is not None and not isinstance(rebalance_listener, RebalanceListener):
            raise TypeError(
                f"rebalance_listener must be a RebalanceListener (subclass it), got {type(rebalance_listener).__name__}"
            )
        self.config = RebalanceConfig(
            consumer_group=consumer_group,
            client_id=self.client_id,
            message_model=message_model,
            consume_orderly=options.get("consume_orderly", False),
            consume_from_where=consume_from_where,
            consume_timestamp_ms=timestamp,
            strategy=_strategy(type(self), options.get("strategy", "AVG")),
            fenced_handover=options.get("fenced_handover", True),
            push_consumer=push,
            confirm_revoke=rebalance_listener is not None,
            **config,
        )
        credentials = _credentials(options.get("access_key"), options.get("secret_key"), options.get("security_token"))
        if transport is not None and credentials is not None:
            raise ValueError("access_key and secret_key are for the transport the consumer opens, not a given one")
        tls_settings = _tls(
            options.get("tls", False),
            options.get("tls_ca_file"),
            options.get("tls_cert_file"),
            options.get("tls_key_file"),
            options.get("tls_verify", True),
        )
        if transport is not None and tls_settings is not None:
            raise ValueError("the tls options are for the transport the consumer opens, not a given one")
        opener = open_async_transport if asynchronous else open_transport
        self.transport = transport or opener(
            namesrv_addr, token=options.get("token"), credentials=credentials, tls=tls_settings
        )
        offset_store = options.get("offset_store")
        if offset_store is None:
            if message_model is MessageModel.BROADCASTING:
                path = options.get("offset_file") or default_offset_path(self.client_id, consumer_group)
                offset_store = LocalFileOffsetStore(path, reset=options.get("reset_offsets", False))
            else:  # on the consumer's own wire, threaded or asyncio
                offset_store = BrokerOffsets(consumer_group, self.client_id)
        self._offset_store = offset_store
        self._settings = settings
        self._on_error = options.get("on_error")
        self._rebalance_listener = rebalance_listener
        self._engine: E | None = None
        self._closed = False
        self._metrics_registry = self._check_metrics(options.get("metrics", False))
        self._metrics: ConsumeMetrics | None = None
        self._remove_metrics: Callable[[], None] | None = None

    def _wire_name(self, name: str) -> str:
        """A group or topic as the wire names it: in ``namespace``, when there is one."""
        return with_namespace(self.namespace, name)

    def _wire_topic(self, topic: str) -> str:
        """A topic the user gives, checked as given and as the wire names it (the namespace counts towards the
        length)."""
        return check_topic_name(self._wire_name(check_topic_name(topic)))

    def _user_name(self, name: str) -> str:
        """A wire name as the user gave it: without ``namespace``."""
        return without_namespace(name, self.namespace)

    def _named(self, messages: list[Message]) -> list[Message]:
        """Messages as the user reads them: their ``topic`` without ``namespace``."""
        if self.namespace is None:
            return messages
        return [replace(message, namespace=self.namespace) for message in messages]

    def _named_listener(self, listener: MessageListener | None) -> MessageListener | None:
        """The listener, given messages whose ``topic`` is without ``namespace`` (an ``async def`` one's awaitable
        is returned as it is)."""
        if listener is None or self.namespace is None:
            return listener
        given = listener
        return lambda messages: given(self._named(messages))

    @staticmethod
    def _check_metrics(metrics: bool | CollectorRegistry) -> CollectorRegistry | bool:
        """The registry metrics go to (True: the default one), or False; refused at once when they cannot be
        exported, not at ``start()``."""
        if metrics is False:
            return False
        if importlib.util.find_spec("prometheus_client") is None:
            raise MetricsUnavailableError("metrics need prometheus_client: pip install 'rocket-rebalance[metrics]'")
        return metrics

    def subscribe(self, topic: str, expression: str = "*", expression_type: str = TAG) -> None:
        """Consume ``topic`` too (before ``start``), filtered by ``expression``: tags (``"TagA || TagB"``, or
        ``"*"`` for every message) or, with ``expression_type="SQL92"``, a condition over message properties
        (``"a > 5"``; the brokers need ``enablePropertyFilter=true``). A later call for the same topic replaces the
        earlier one, as in Java. An expression no consumer can use raises
        :class:`~rocket_rebalance.subscription.ExpressionError`."""
        if self._engine is not None:
            raise RuntimeError("subscribe before start()")
        self._subscriptions[self._wire_topic(topic)] = SubscriptionExpression(expression, expression_type).check()

    @property
    def subscriptions(self) -> dict[str, SubscriptionExpression]:
        """Each subscribed topic's expression (topics without ``namespace``)."""
        return {self._user_name(topic): expression for topic, expression in self._subscriptions.items()}

    def _starting(self) -> None:
        """What ``start()`` checks and sets up before the engine exists."""
        if self._closed:
            raise RuntimeError(f"this consumer was shut down: build a new {type(self).__name__} to consume again")
        if self._engine is not None:
            raise RuntimeError("already started")
        if not self._subscriptions:
            raise ValueError("subscribe to at least one topic before start()")
        if self._metrics_registry is not False:
            self._metrics = ConsumeMetrics()

    def _engine_args(self) -> dict[str, Any]:
        """The engine's arguments every consumer passes alike."""
        return {
            "config": self.config,
            "topics": self._subscriptions,
            "transport": self.transport,
            "offset_store": self._offset_store,
            "settings": self._settings,
            "on_error": self._on_error,
            "expressions": self._subscriptions,
            "metrics": self._metrics,
            "rebalance_listener": self._rebalance_listener,
        }

    def _started(self, engine: E) -> None:
        self._engine = engine
        if self._metrics is not None:
            self._remove_metrics = self._export_metrics(self._metrics)

    def _export_metrics(self, recorded: ConsumeMetrics) -> Callable[[], None]:
        from rocket_rebalance.runtime.prometheus import ConsumerSource, add_consumer

        source = ConsumerSource(
            self.config.consumer_group, self.client_id, self.config.strategy.name, lambda: self._engine, recorded
        )
        registry = self._metrics_registry
        return add_consumer(source, None if isinstance(registry, bool) else registry)

    def _ended(self) -> None:
        """After the shutdown: the consumer leaves the metrics registry."""
        if self._remove_metrics is not None:
            self._remove_metrics()
            self._remove_metrics = None

    def _check_subscriptions(self) -> Steps[None]:
        """As Java's ``checkClientInBroker`` at start: each broker of a topic subscribed with something other than
        tags is asked whether it can filter by it; a refusal (:class:`SubscriptionRefusedError`: the broker's
        ``enablePropertyFilter`` is off, or the expression does not compile) fails the start. A topic whose route
        cannot be read now is not checked, as in Java: its pulls report a refusal later, through health."""
        for topic, expression in self._subscriptions.items():
            if expression.expression_type == TAG:
                continue
            try:
                route = yield from call(Transport.route, topic)
            except TransportError:
                continue
            for broker in sorted({data.broker_name for data in route.queue_datas}):
                yield from call(
                    Transport.check_subscription, broker, self.config.consumer_group, self.client_id, topic, expression
                )

    def owned_queues(self) -> dict[str, frozenset[MessageQueue]]:
        """The queues this consumer owns now, per topic (the retry topic included; keyed without ``namespace``,
        the queues with the wire's names)."""
        owned = {} if self._engine is None else self._engine.owned()
        return {self._user_name(topic): queues for topic, queues in owned.items()}

    def _looks(self, timeout: float) -> Generator[float, None, dict[str, frozenset[MessageQueue]]]:
        """``wait_for_assignment`` once, for a blocking and an async caller alike: it yields the seconds to pause
        between two looks at the engine (:meth:`Driver.settled`) and returns ``owned_queues()`` once settled, or
        raises :class:`ConsumerNotReadyError` with what health knows after ``timeout``."""
        check_duration("timeout", timeout, zero=True)
        if self._closed:
            raise RuntimeError(f"this {type(self).__name__} is shut down")
        engine = self._engine
        if engine is None:
            raise RuntimeError("start() the consumer first")
        deadline = time.monotonic() + timeout
        while not engine.settled():
            left = deadline - time.monotonic()
            if left <= 0:
                name = f"{type(self).__name__} of {self._user_name(self.config.consumer_group)}"
                reason = why_not_ready(engine.health.codes())
                raise ConsumerNotReadyError(name, timeout, reason, engine.health.report())
            yield min(left, READY_CHECK_INTERVAL)
        return self.owned_queues()

    def describe(self) -> dict[str, object]:
        """What the engine is doing now (rounds, next wake-up, each queue's state), for diagnosis; the names in it
        are the wire's, and ``namespace`` says which one wraps them."""
        state: dict[str, object] = {"started": False} if self._engine is None else self._engine.describe()
        return state if self.namespace is None else {"namespace": self.namespace, **state}

    @property
    def healthy(self) -> bool:
        """False while something keeps failing (a route, a heartbeat, pulls, offset writes ...): see
        ``describe()["problems"]``; failures also reach ``on_error(kind, error)`` and the log."""
        return self._engine is not None and self._engine.health.healthy

    @property
    def problems(self) -> dict[str, str]:
        """What fails now, by kind (``route of T``, ``heartbeat``, ``pull`` ...): its last error, how often, for how
        long; empty while ``healthy`` (``describe()["problems"]`` without asking the engine's service context)."""
        return {} if self._engine is None else self._engine.health.report()

    @property
    def consumed(self) -> int:
        """Messages consumed so far (a push consumer's listener finished them; a pull consumer's were committed,
        or polled with auto-commit)."""
        return 0 if self._engine is None else self._engine.consumed


class PushConsumer(ConsumerBase[Engine]):
    """One member of a consumer group whose messages go to ``listener`` (see :class:`ConsumerBase` for the options
    every consumer shares). ``with PushConsumer(...) as consumer:`` starts it and shuts it down.

    ``listener(messages)`` consumes a batch and answers: None (consumed), a
    :class:`~rocket_rebalance.runtime.listener.ConsumeResult` or a
    :class:`~rocket_rebalance.runtime.listener.Reconsume` (Java's meanings: see :mod:`.dispatch`); raising means
    ``RECONSUME_LATER``; an ``async def`` one is run to its end on the listener's thread. ``consume_orderly=True``
    gives one batch at a time per queue, holding its broker lock. ``queue_listener(topic, mq_all, mq_divided)`` is
    Java's ``MessageQueueListener``; without a ``listener`` it is all the application hears, and nothing is pulled."""

    def __init__(
        self,
        namesrv_addr: str,
        consumer_group: str,
        *,
        listener: MessageListener | None = None,
        queue_listener: QueueListener | None = None,
        transport: Transport | None = None,
        **options: Unpack[PushOptions],
    ) -> None:
        super().__init__(
            namesrv_addr, consumer_group, asynchronous=False, push=listener is not None, transport=transport, **options
        )
        self._listener = listener
        self._queue_listener = queue_listener
        self._stopper: threading.Thread | None = None
        self._clean: bool | None = None
        self._stop_lock = threading.Lock()

    def __enter__(self) -> PushConsumer:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.shutdown()

    def start(self) -> None:
        if self._stopper is not None:
            self._closed = True
        self._starting()
        run(self._check_subscriptions(), self.transport)
        listener = self._named_listener(self._listener)
        engine = Engine(listener=listener, queue_listener=self._queue_listener, **self._engine_args())
        self._started(engine)
        engine.start()

    def wait_for_assignment(self, timeout: float) -> dict[str, frozenset[MessageQueue]]:
        """Wait until the consumer holds its queues (or knows it holds none: the group has more members than
        queues) and return them (``owned_queues()``); after ``timeout`` seconds raise
        :class:`~rocket_rebalance.runtime.settings.ConsumerNotReadyError` naming what failed. Without this call
        the consumer is as resilient as Java's: it retries for ever, and health says what fails."""
        return wait_blocking(self, timeout, time.sleep)

    def shutdown(self, timeout: float = 15.0) -> bool:
        """Stop taking messages, finish in-flight ones (bounded), persist offsets, unregister, close.

        Returns True when every queue was released cleanly within ``timeout``. A later call waits for the same
        shutdown and gives its answer. Called from one of this consumer's own threads (the listener, the queue
        listener, ``on_error``), it cannot wait for the shutdown, which waits for that very call: it starts the
        shutdown and returns False at once (not known to be clean yet); the shutdown goes on once the caller
        returns. Listener threads are daemon threads: a listener still running after ``shutdown()`` returned
        does not keep the process alive, and the batch it holds goes to the queue's next owner.
        """
        check_duration("timeout", timeout, zero=True)
        engine = self._engine
        if engine is None:
            return True
        with self._stop_lock:
            if self._stopper is None:
                self._stopper = threading.Thread(target=self._stop, args=(engine, timeout), name="rr-shutdown")
                self._stopper.start()
            stopper = self._stopper
        if engine.owns_current_thread():
            return False
        stopper.join()
        return bool(self._clean)

    def _stop(self, engine: Engine, timeout: float) -> None:
        """The shutdown itself, on a thread of its own (not a daemon: it persists the offsets, within timeout);
        the consumer leaves the metrics registry once done."""
        self._clean = engine.shutdown(timeout)
        self._ended()
