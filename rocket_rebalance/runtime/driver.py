"""The rebalance engine's logic, once for both runtimes: everything above the socket and the clock.

A :class:`Driver` owns one consumer's :class:`~rocket_rebalance.core.RebalanceCore` and carries out its actions:
requests as plans (:mod:`.plans`: the same steps on either wire) run in the background and answered with core
events; pulls as one outstanding long-poll per active queue, holding no thread while it waits; messages handed to
the application (push: the listener, several batches to a consume task; poll: taken by ``poll()``); rebalance
callbacks (:mod:`.listener`) one at a time, in order; health, statistics and metrics.

All of that happens in one *service context*, where the core is read and fed: the service thread of the threaded
:class:`~rocket_rebalance.runtime.engine.Engine`, the event loop of
:class:`~rocket_rebalance.runtime.async_engine.AsyncEngine`. What differs between them is only how work is
scheduled and waited for, which each engine implements (the abstract methods below): ``post`` (run an event or a
callback in the service context, later), ``_later`` and ``_set_wake`` (timers, and the core's ``WakeAt``),
``_spawn`` (run a plan in the background on a bounded pool of threads or tasks, then hand its outcome on there),
``_start_pull`` (one long-poll pull, answered through :meth:`Driver._pull_answered`) and ``_in_service``. Time is
``time.monotonic()`` in both (the asyncio loop's clock is the same one).

Every broker a route names has a notification stream (NOTIFY_CONSUMER_IDS_CHANGED wakes a round at once, as does a
reconnect), reopened with backoff when lost; heartbeats go to every broker on a pool of
:data:`BROKER_CALL_THREADS`; a failure at many brokers is one health kind naming them. A server that is down or
restarting is retried; the consumer keeps its queues meanwhile.
"""

from __future__ import annotations

import enum
import itertools
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, Protocol

from rocket_rebalance.core import (
    Action,
    BrokerConnectionLost,
    BrokerRegistered,
    ClientIdShared,
    ConsumerIdsChanged,
    ConsumerListFetched,
    DeadHoldersChecked,
    DropQueue,
    FetchConsumerList,
    FetchRoutes,
    HandoverWithoutOffset,
    LockQueues,
    LockResult,
    MessagesConsumed,
    MessagesDispatched,
    MessagesPulled,
    MessagesReturned,
    OffsetIllegal,
    OffsetLookupFailed,
    OffsetQueried,
    OffsetRead,
    OffsetsPersisted,
    OffsetsPersistFailed,
    PersistOffsets,
    PersistRequested,
    QueryMaxOffset,
    QueuesChanged,
    QueueSeeked,
    QueuesRevoked,
    QueueState,
    QueuesUnlocked,
    ReadOffset,
    RebalanceConfig,
    RebalanceCore,
    ReleaseDeadHolders,
    RevokeQueues,
    RouteUpdated,
    SearchOffset,
    SendHeartbeat,
    ShutdownComplete,
    StartQueue,
    StopQueue,
    SubscriptionChanged,
    Tick,
    UnlockQueues,
    WakeAt,
)
from rocket_rebalance.core.events import Event
from rocket_rebalance.model import (
    MAX_GROUP_MEMBERS,
    RETRY_GROUP_TOPIC_PREFIX,
    MessageQueue,
    check_duration,
    dead_letter_topic,
)
from rocket_rebalance.route import TopicRoute
from rocket_rebalance.runtime.health import ErrorHook, Health, first_few
from rocket_rebalance.runtime.history import describe_rounds
from rocket_rebalance.runtime.listener import RebalanceListener
from rocket_rebalance.runtime.members import MemberLanguages
from rocket_rebalance.runtime.metrics import ConsumeMetrics, MetricsView, take_view
from rocket_rebalance.runtime.offset_store import BrokerOffsets, OffsetStore, OffsetStoreError, persist_plan, read_plan
from rocket_rebalance.runtime.plans import Call, Invoke, Plan
from rocket_rebalance.runtime.stats import ConsumeStats, elapsed_ms
from rocket_rebalance.runtime.transport import (
    GroupRegistration,
    GroupSubscription,
    Message,
    NotificationStream,
    PullResult,
    PullStatus,
    QueueRunInfo,
    RunningInfo,
    TransportError,
)
from rocket_rebalance.subscription import SubscriptionExpression

__all__ = [
    "BROKER_CALL_THREADS",
    "HANDOVER_KIND",
    "LOCK_WAIT_KIND",
    "ClientIdSharedError",
    "Driver",
    "EngineSettings",
    "HandoverStuckError",
    "HandoverWithoutOffsetError",
    "ListenerError",
    "MemberListTooLongError",
    "MessageListener",
    "Pool",
    "QueueListener",
    "QueueNotAssignedError",
    "RebalanceListenerError",
    "ServiceQuery",
    "SubscriptionMismatchError",
    "Wire",
]

log = logging.getLogger("rocket_rebalance.runtime")


class ListenerError(Exception):
    """The application's listener raised on a batch (what ``on_error`` and the log get; ``__cause__`` is its error)."""

    def __init__(self, mq: MessageQueue, batch: Sequence[Message], then: str, error: Exception) -> None:
        offsets = [m.queue_offset for m in batch]
        super().__init__(f"{type(error).__name__}: {error} on {mq} offsets {offsets}; {then}")
        self.__cause__ = error  # logged with its traceback, as the cause


class QueueNotAssignedError(LookupError):
    """A pull consumer was asked to seek, pause or tell the position of a queue it does not consume now."""


class RebalanceListenerError(Exception):
    """A :class:`~rocket_rebalance.runtime.listener.RebalanceListener` callback raised (given to ``on_error``;
    ``__cause__`` is its error). The rebalance goes on: a revoke counts as done, so the release is not held up."""


class PullAnswerError(Exception):
    """A pull answer that cannot be right: its next offset lies below the requested one, or a message lies outside
    the range it answers for (given to ``on_error``; see :meth:`Driver._checked_pull`)."""


class UnreadableBodyError(Exception):
    """A pulled message whose body cannot be read (see ``Message.body_error``): its batch fails without reaching
    the listener, so the queue moves on and the message goes the way of a refused one (the retry topic, and after
    ``max_reconsume_times`` the dead-letter queue), where nothing is lost and a person can look at it."""


class LockWaitError(Exception):
    """Queues allocated to us wait for a lock the broker refuses (core rule L7); given to ``on_error``."""


class HandoverStuckError(Exception):
    """Queues we are giving up cannot be handed over: their offsets cannot be saved (core rule L8)."""


class HandoverWithoutOffsetError(Exception):
    """A queue was handed over without its offset (core rule L8): reported under ``persist offsets``, at ERROR."""


class SubscriptionMismatchError(Exception):
    """The group's subscription table at a broker holds another expression for one of our topics than ours
    (given to ``on_error``; see :meth:`Driver._check_subscriptions`)."""


class ClientIdSharedError(Exception):
    """Other consumers of the group use this consumer's client ID (given to ``on_error``; see core rule L6)."""


class MemberListTooLongError(Exception):
    """A broker listed more members than :data:`~rocket_rebalance.model.MAX_GROUP_MEMBERS` for the group (given
    to ``on_error``): the list is refused, as a failed one, and the consumer keeps its queues meanwhile."""


LOCK_WAIT_KIND = "locks of allocated queues"
HANDOVER_KIND = "handovers of released queues"
NOTIFICATIONS_UNEXPECTED = "notifications: unexpected error"
DEAD_HOLDERS_KIND = "release of a gone member's locks"
DEAD_HOLDER_WINDOW = 1.0
"""Seconds within which a broker's member list must come for the locks of members it does not list to be
released on its word (core rule L9); the ``rejoin_delay`` a member waits after registering again is longer."""
FLOW_CONTROL_DELAY = 0.05  # Java's PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL
MIB = 1024 * 1024
CHUNK_WORK = 0.002
"""Seconds of listener time one consume task aims to carry: a hand-off (pool, service thread, core events) costs
tens of microseconds, so a task of a quick listener's messages makes it negligible, while a slow listener's
batches still go one per task, over all the pool's threads."""
MAX_CHUNK_MESSAGES = 32  # per consume task (or one batch, if larger): what a batch that blocks can hold back
BROKER_CALL_THREADS = 4  # heartbeats (and, at shutdown, unregisters) in flight at once, however many brokers

MessageListener = Callable[[list[Message]], Any]
"""Consumes a batch; raising means "not consumed": the batch is retried while the queue is still ours. May be
``async def`` (awaited by the asyncio consumers)."""

QueueListener = Callable[[str, Sequence[MessageQueue], Sequence[MessageQueue]], Any]
"""Java's ``MessageQueueListener.messageQueueChanged(topic, mqAll, mqDivided)``."""

Pool = Literal["io", "broker", "consume", "callback"]
"""Where a background plan runs: requests of the core (``io``), calls to every broker (``broker``: heartbeats),
the listener (``consume``), rebalance callbacks (``callback``: one at a time, in order)."""


@dataclass(frozen=True)
class EngineSettings:
    """Runtime knobs that are not rebalance rules (those are in :class:`RebalanceConfig`). Where Java's push
    consumer has the knob, the name and the default are Java's (``consumeMessageBatchMaxSize`` ...)."""

    pull_batch_size: int = 32  # messages a pull asks for
    pull_wait_ms: int | None = None  # how long a pull may wait at the server; None: the transport's long_poll_ms
    pull_error_backoff: float = 1.0
    consume_message_batch_max_size: int = 1  # messages per listener call
    consume_threads: int = 20  # listener threads (Java's consumeThreadMin and Max): for listeners that wait on I/O
    pull_threshold_for_queue: int = 1000  # a queue with this many messages pulled and not consumed pulls no more
    pull_threshold_size_for_queue: int = 100  # ... or this many MiB of bodies
    consume_concurrently_max_span: int = 2000  # ... or (concurrent) this many offsets from its oldest to its newest
    io_threads: int = 8
    retry_delay: float = 1.0
    reconnect_backoff: tuple[float, float] = (0.2, 5.0)
    max_reconsume_times: int = 16  # Java's default for concurrent consumers; the broker then moves it to the DLQ
    lock_wait_report: float = 10.0  # a queue of ours whose lock is refused this long is reported (core rule L7)

    def __post_init__(self) -> None:
        """The durations, by the library's one check: a NaN or zero backoff would spin a thread; the counts
        must be positive, or nothing would ever be pulled or handed out."""
        check_duration("pull_error_backoff", self.pull_error_backoff)
        check_duration("retry_delay", self.retry_delay)
        check_duration("lock_wait_report", self.lock_wait_report)
        low, high = self.reconnect_backoff
        check_duration("reconnect_backoff", low)
        check_duration("reconnect_backoff", high)
        if low > high:
            raise ValueError(f"reconnect_backoff must be (shortest, longest), got {self.reconnect_backoff!r}")
        if self.pull_wait_ms is not None:  # 0: the server answers at once when it has nothing
            check_duration("pull_wait_ms", self.pull_wait_ms, zero=True, unit="milliseconds")
        for name in (
            "pull_batch_size",
            "consume_message_batch_max_size",
            "consume_threads",
            "pull_threshold_for_queue",
            "pull_threshold_size_for_queue",
            "consume_concurrently_max_span",
            "io_threads",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number of at least 1, got {value!r}")


class ServiceQuery:
    """A read of the core posted to the service context (describe, owned, running info): answered even when it
    arrives as the context ends, where other posted work is dropped."""

    def __init__(self, work: Callable[[], None]) -> None:
        self._work = work

    def __call__(self) -> None:
        self._work()


@dataclass
class _QueueRun:
    """The runtime's side of one started queue: where to pull next and what is waiting for the application.

    ``buffered`` stays in offset order without sorting: each pull answers for the offsets after the last one
    (:meth:`Driver._checked_pull` holds it to that), and messages that come back undelivered go back in front."""

    generation: int
    next_offset: int
    buffered: deque[Message] = field(default_factory=deque)
    cached_bytes: int = 0  # bodies pulled and not yet consumed (flow control)
    pulling: bool = False
    busy: int = 0  # chunks handed to the consume pool and not yet finished
    stopped: bool = False  # read by the consume threads too: they start no further batch of a chunk once set
    dispatch_waiting: bool = False  # a retry of dispatch is scheduled (the lock is not valid yet)
    paused_until: float = 0.0  # orderly: after a failed batch, nothing is handed out before this
    paused: bool = False  # the application paused it (pull consumer): neither pulled nor polled
    announced: bool = True  # the rebalance listener heard of it (poll: its messages wait until then)
    # with metrics on: (the offset after a pulled batch, when it came), oldest first, for the await time
    arrivals: deque[tuple[int, float]] = field(default_factory=deque)


class _Verdict(enum.Enum):
    """What became of one batch given to the listener."""

    CONSUMED = "consumed"
    SENT_BACK = "refused, sent back to the retry topic"
    RETRY = "refused, to be tried again here"


@dataclass
class _Chunk:
    """What a consume task did with the messages it was handed: consumed (or sent back to the retry topic),
    batches to retry later (concurrent, when sending back failed), and messages it never gave the listener."""

    consumed: list[Message] = field(default_factory=list)
    retry: list[list[Message]] = field(default_factory=list)
    returned: list[Message] = field(default_factory=list)
    orderly_failure: bool = False


class Wire(Protocol):
    """What the driver reads of a transport directly (everything else goes through plans' calls): both
    :class:`~rocket_rebalance.runtime.transport.Transport` and its asyncio twin have it."""

    address: str
    long_poll_ms: int


_CALLBACK_NAMES = {"assigned": "on_queues_assigned", "revoked": "on_queues_revoked", "lost": "on_queues_lost"}


class Driver(ABC):
    """Drives one consumer's core against a transport and an offset store (see the module docstring).

    ``listener``: a push consumer (the listener gets every message). ``polling``: a pull consumer (messages wait
    in their queue's buffer for :meth:`take`). Neither: only ``queue_listener`` hears of the queues and nothing is
    pulled. ``rebalance_listener`` hears every queue assigned, revoked and lost (core rule L10)."""

    def __init__(
        self,
        config: RebalanceConfig,
        topics: Iterable[str],
        transport: Wire,
        offset_store: OffsetStore | BrokerOffsets,
        listener: MessageListener | None = None,
        queue_listener: QueueListener | None = None,
        settings: EngineSettings | None = None,
        on_error: ErrorHook | None = None,
        expressions: Mapping[str, SubscriptionExpression] | None = None,
        metrics: ConsumeMetrics | None = None,
        rebalance_listener: RebalanceListener | None = None,
        polling: bool = False,
        auto_commit: bool = True,
    ) -> None:
        if rebalance_listener is not None and not config.confirm_revoke:
            raise ValueError("a rebalance listener needs a config with confirm_revoke=True (core rule L10)")
        self.config = config
        self.core = RebalanceCore(config, topics)
        self.expressions = dict(expressions or {})  # a topic not in it is subscribed with "*"
        self.transport = transport
        self.offset_store = offset_store
        self.listener = listener
        self.queue_listener = queue_listener
        self.rebalance_listener = rebalance_listener
        self.polling = polling
        self.auto_commit = auto_commit
        self.settings = settings or EngineSettings()
        self.health = Health(on_error)
        self._languages = MemberLanguages(config.strategy, config.consumer_group, self.health)
        self._wake_at: float | None = None
        self._runs: dict[MessageQueue, _QueueRun] = {}
        self._generations = itertools.count(1)
        self._routes: dict[str, TopicRoute] = {}
        self._listening: set[str] = set()  # brokers whose notification stream is kept open (service context)
        self._listen_backoff: dict[str, float] = {}  # each broker's next reconnect delay (service context)
        self._topics = self.core.topics  # what heartbeats announce; refreshed from each SendHeartbeat
        self._known_brokers: set[str] = set()
        self._brokers_lock = threading.Lock()
        self._heartbeating: set[str] = set()  # brokers with a heartbeat under way (under _brokers_lock)
        self._heartbeat_again: set[str] = set()  # brokers asked for one while one was under way (same lock)
        self._losses: dict[str, int] = {}  # broker -> connections to it lost so far (core rule L9's epochs)
        self._open_streams: dict[str, NotificationStream] = {}
        self._closing = threading.Event()  # a flag under either runtime: read from pool threads too
        self._service_lock = threading.Lock()
        self._service_ended = False  # the service context took its last item: the core is read in place from now
        self._stats_lock = threading.Lock()
        self._pace = CHUNK_WORK  # the listener's recent seconds per message; a slow one until it shows otherwise
        self._told: set[MessageQueue] = set()  # queues the rebalance listener was told are ours (L10)
        self._assigning: set[MessageQueue] = set()  # started, to be told together by _tell_assigned
        self._polled: dict[MessageQueue, list[Message]] = {}  # poll, manual commit: taken and not yet committed
        self._rotation: deque[MessageQueue] = deque()  # poll: the queues in the order they are taken from
        self.callbacks: deque[Plan[None]] = deque()  # poll: rebalance callbacks for poll() to run, in order
        self._stored: dict[MessageQueue, int] = {}  # offsets the store acknowledged (commit(), committed())
        self._commits: list[tuple[dict[MessageQueue, int], Callable[[bool], None]]] = []  # commit() waiting
        self._lost_since_commit: set[MessageQueue] = set()
        self.consumed = 0
        self.failed = 0
        self.filtered = 0  # messages the tag re-filter skipped (their offsets move on as if consumed)
        self.stats = ConsumeStats()  # Java's consume statistics, for running info: one call per batch
        self.metrics = metrics  # None unless metrics are on: then one call per pull, consume task and offset write
        self._send_back = True  # until the transport says its server keeps no retry topics
        self._started_ms = int(time.time() * 1000)
        self._init_runtime()

    @abstractmethod
    def _init_runtime(self) -> None:
        """The runtime's own state (inbox, pools, loop handles), built at the end of the constructor."""

    # ------------------------------------------------------------------ what each runtime provides

    @abstractmethod
    def post(self, item: Event | Callable[[], None]) -> None:
        """Hand an event (or a callback) to the service context, from anywhere; it runs there later, in order."""

    @abstractmethod
    def _later(self, delay: float, callback: Callable[[], None]) -> None:
        """(Service context.) Run ``callback`` there after ``delay`` seconds."""

    @abstractmethod
    def _set_wake(self, at: float | None) -> None:
        """(Service context.) Feed the core a ``Tick`` at ``at`` (``time.monotonic()``), replacing the last."""

    @abstractmethod
    def _spawn(self, pool: Pool, what: str, plan: Plan[Any], then: Callable[[Any], None] | None = None) -> bool:
        """Run ``plan`` in the background on ``pool``, then ``then(outcome)`` there; an exception it lets through
        is reported as ``_unexpected(what, error)`` and ``then`` is not called. False (nothing run) once the engine
        is shut down."""

    @abstractmethod
    def _start_pull(self, mq: MessageQueue, generation: int, offset: int, wait_ms: int) -> None:
        """(Service context.) Start one long-poll pull; its answer (or ``TransportError``) goes to
        :meth:`_pull_answered` in the service context."""

    @abstractmethod
    def _in_service(self) -> bool:
        """Is the caller in the service context (the service thread, the loop's thread)?"""

    @abstractmethod
    def _wait_for(self, done: threading.Event, timeout: float) -> bool:
        """Block the calling thread (not in the service context) until ``done`` is set or ``timeout`` passed."""

    # ------------------------------------------------------------------ the service context

    def _serve(self, item: Event | Callable[[], None]) -> None:
        """(Service context.) One posted item: an event for the core, or a callback. Nothing may stop the service
        context: an exception no code expected is reported (``_unexpected``), never raised."""
        try:
            if isinstance(item, Event):
                now = time.monotonic()
                if isinstance(item, OffsetsPersisted):
                    for mq, offset in item.offsets.items():
                        self._stored[mq] = max(offset, self._stored.get(mq, offset))
                self._apply(self.core.handle(item, now))
                if self._commits and isinstance(item, OffsetsPersisted | OffsetsPersistFailed):
                    self._check_commits()
                if isinstance(item, Tick | LockResult | OffsetsPersisted | OffsetsPersistFailed):
                    self._report_waits(now)
                if isinstance(item, Tick):
                    # The core announces WakeAt only when its earliest deadline changes; after a tick that left
                    # it unchanged (a round deferred by the minimum interval, say) ask for it, or no tick follows.
                    self._set_wake(self.core.next_wakeup)
            else:
                item()
        except Exception as error:
            self._unexpected("rebalance service", error)

    def _handle(self, event: Event) -> None:
        """Feed an event from the service context itself (e.g. while dispatching)."""
        self._apply(self.core.handle(event, time.monotonic()))

    def _apply(self, actions: list[Action]) -> None:
        if not actions:  # the hot path: the core answers a message event with nothing
            return
        news: dict[str, set[MessageQueue]] = {"assigned": set(), "revoked": set(), "lost": set()}
        for action in actions:
            try:
                self._carry_out(action, news)
            except Exception as error:  # an action must never kill the service context
                self._unexpected(f"carrying out {type(action).__name__}", error)
        if self.rebalance_listener is not None:
            self._tell(news)

    def _unexpected(self, kind: str, error: Exception) -> None:
        """An exception no code here expected, anywhere in the engine: an ERROR with its traceback, a health problem
        of its own kind and ``on_error``, never only a log line or a dead thread or task."""
        self.health.failed(kind, error, logging.ERROR, traceback=True)

    def _end_service(self) -> None:
        """Mark the service context ended: from now on readers run in place (the runtime answers the queries
        already posted)."""
        with self._service_lock:
            self._service_ended = True

    def on_service(self, work: Callable[[], None], timeout: float = 5.0) -> bool:
        """Run ``work`` in the service context (the only one that may read the core) and wait for it; in place when
        the caller is there already, or once the context has ended (nothing else touches the core then). False
        when it did not run within ``timeout``."""
        if self._in_service():
            work()
            return True
        done = threading.Event()

        def run() -> None:
            try:
                work()
            finally:
                done.set()

        with self._service_lock:  # posted before the service context ends, or run here after: never lost
            ended = self._service_ended
            if not ended:
                self.post(ServiceQuery(run))
        if ended:
            run()
            return True
        return self._wait_for(done, timeout)

    # ------------------------------------------------------------------ reads, from any thread

    def describe(self) -> dict[str, object]:
        """A snapshot of the engine for operators (``kill -USR1`` on ``consume``): rounds, wake-up, queues, the last
        rebalances (``rebalances``: trigger, member lists, queues gained and lost, problems, each step's time); after
        the shutdown, its final state (``shut_down`` True), at once."""
        state: dict[str, object] = {}

        def snapshot() -> None:
            now = time.monotonic()
            state.update(
                shut_down=self._service_ended,
                rounds=self.core.rounds,
                next_wakeup_in=None if self.core.next_wakeup is None else round(self.core.next_wakeup - now, 3),
                engine_wake_in=None if self._wake_at is None else round(self._wake_at - now, 3),
                allocated={topic: sorted(map(str, self.core.allocated(topic))) for topic in self.core.topics},
                queues={str(mq): str(self.core.state_of(mq)) for mq in self.core.held_queues()},
                filtered=self.filtered,
                healthy=self.health.healthy,
                problems=self.health.report(),
                rebalances=describe_rounds(self.core.history.rounds, now, time.time()),
                **self._describe_runtime(),
            )

        if not self.on_service(snapshot):
            return {"service": "not answering within 5 s"}
        return state

    def _describe_runtime(self) -> dict[str, object]:
        """(Service context.) What the runtime adds to :meth:`describe` (its queues and timers)."""
        return {}

    def metrics_view(self) -> MetricsView | None:
        """The core's figures for a metrics scrape (:func:`~rocket_rebalance.runtime.metrics.take_view`); None
        when the service context does not answer within 5 s."""
        views: list[MetricsView] = []

        def snapshot() -> None:
            cached = {mq: run.cached_bytes for mq, run in self._runs.items()}
            views.append(take_view(self.core, cached, time.monotonic()))

        return views[0] if self.on_service(snapshot) and views else None

    def owned(self) -> dict[str, frozenset[MessageQueue]]:
        """What the queue listener was last told, per topic (safe to call from any thread: a snapshot). Once
        shutting down, the queues still held, which is none after a clean shutdown."""
        result: dict[str, frozenset[MessageQueue]] = {}

        def snapshot() -> None:
            held = self.core.held_queues() if self.core.shutting_down else None
            for topic in self.core.topics:
                allocated = self.core.allocated(topic)
                result[topic] = allocated if held is None else frozenset(mq for mq in held if mq.topic == topic)

        self.on_service(snapshot)
        return result

    def running_info(self) -> RunningInfo:
        """What a broker relays to ``mqadmin consumerStatus`` (BrokerRequests): our process-queue table with the
        fields Java's ``ProcessQueue.fillProcessQueueInfo`` fills, each topic's consume statistics, and our
        settings under the names of Java's consumer fields."""
        rows: dict[MessageQueue, QueueRunInfo] = {}

        def snapshot() -> None:
            now, wall = time.monotonic(), time.time()

            def epoch_ms(at: float) -> int:
                return int((wall - (now - at)) * 1000)

            for mq in self.core.held_queues():
                rows[mq] = self._queue_row(mq, epoch_ms, now)

        self.on_service(snapshot)
        config, settings = self.config, self.settings
        return RunningInfo(
            consume_type="CONSUME_PASSIVELY" if config.push_consumer else "CONSUME_ACTIVELY",
            message_model=config.message_model.value,
            consume_from_where=config.consume_from_where.value,
            consume_orderly=config.consume_orderly,
            start_timestamp_ms=self._started_ms,
            topics=self._topics,
            queues=rows,
            strategy=f"{type(config.strategy).__module__}.{type(config.strategy).__qualname__}",
            expressions=dict(self.expressions),
            status={topic: self.stats.status(topic) for topic in self._topics},
            settings={
                "consumerGroup": config.consumer_group,
                "consumeThreadMin": str(settings.consume_threads),
                "consumeThreadMax": str(settings.consume_threads),
                "pullBatchSize": str(settings.pull_batch_size),
                "consumeMessageBatchMaxSize": str(settings.consume_message_batch_max_size),
                "pullThresholdForQueue": str(settings.pull_threshold_for_queue),
                "pullThresholdSizeForQueue": str(settings.pull_threshold_size_for_queue),
                "consumeConcurrentlyMaxSpan": str(settings.consume_concurrently_max_span),
                "maxReconsumeTimes": str(settings.max_reconsume_times),
                "heartbeatBrokerInterval": str(round(config.heartbeat_interval * 1000)),
                "persistConsumerOffsetInterval": str(round(config.persist_interval * 1000)),
                "pollNameServerInterval": str(round(config.route_refresh_interval * 1000)),
            },
            consume_threads=settings.consume_threads if self.listener is not None else -1,
        )

    def _queue_row(self, mq: MessageQueue, epoch_ms: Callable[[float], int], now: float) -> QueueRunInfo:
        """(Service context.) One queue's ``ProcessQueueInfo``. Cached: pulled and not yet consumed, handed out or
        not (Java's ``msgTreeMap``), and the size of their bodies. Handed out and unfinished, when orderly: Java's
        ``consumingMsgOrderlyTreeMap``."""
        pq = self.core.process_queue(mq)
        run = self._runs.get(mq)
        cached = pq.in_flight() if pq is not None else []
        handed = pq.handed_out() if pq is not None and self.config.consume_orderly else []
        granted = self.core.last_lock_grant(mq)
        size = run.cached_bytes if run is not None else 0
        return QueueRunInfo(
            commit_offset=pq.commit_offset if pq is not None else -1,
            cached_count=len(cached),
            cached_min_offset=cached[0] if cached else 0,
            cached_max_offset=cached[-1] if cached else 0,
            cached_size_mib=size // MIB,
            transaction_min_offset=handed[0] if handed else 0,
            transaction_max_offset=handed[-1] if handed else 0,
            transaction_count=len(handed),
            locked=self.core.holds_lock(mq, now),
            last_lock_ms=epoch_ms(granted) if granted is not None else self.stats.started_ms(mq),
            dropped=self.core.state_of(mq) in (QueueState.DRAINING, QueueState.REVOKING, QueueState.PERSISTING),
            last_pull_ms=epoch_ms(pq.last_pull) if pq is not None else 0,
            last_consume_ms=self.stats.last_consume_ms(mq),
        )

    def consume_directly_plan(self, message: Message) -> Plan[tuple[bool, str]]:
        """CONSUME_MESSAGE_DIRECTLY (``mqadmin consumeMessage``): the listener's verdict on one message, outside
        the queue's order and offsets, as Java does it (BrokerRequests)."""
        if self.listener is None:
            return False, "pull-style consumer: no message listener"
        try:
            yield Invoke(self.listener, ([message],))
        except Exception as error:
            return False, f"{type(error).__name__}: {error}"
        return True, ""

    # ------------------------------------------------------------------ waits worth reporting

    def _report_waits(self, now: float) -> None:
        """Say which queues wait, since with the fence such a queue is consumed by nobody meanwhile; each report
        clears once nothing of its kind waits."""
        self._report_lock_waits(now)
        self._report_stuck_releases(now)

    def _report_lock_waits(self, now: float) -> None:
        """Queues allocated to us whose lock the broker has refused for ``lock_wait_report`` seconds or more (L7)."""
        waits = {mq: now - since for mq, since in self.core.lock_waits().items()}
        long = sorted(mq for mq, waited in waits.items() if waited >= self.settings.lock_wait_report)
        if not long:
            self.health.ok(LOCK_WAIT_KIND)
            return
        self.health.failed(
            LOCK_WAIT_KIND,
            LockWaitError(
                f"{len(long)} queues allocated to us are consumed by nobody: the broker has refused their locks "
                f"for up to {max(waits[mq] for mq in long):.0f} s ({first_few(long)}). Another consumer holds "
                "them that the broker still lists as a member (one that is leaving hands them over within its "
                "drain timeout; a frozen one keeps them until it goes on or the broker drops it), or one this "
                "consumer never saw listed, whose locks lapse with the broker's lock lifetime (60 s); the broker "
                "does not say which consumer it is"
            ),
        )

    def _report_stuck_releases(self, now: float) -> None:
        """Queues we are giving up whose offset cannot be saved (L8)."""
        stuck = self.core.stuck_releases()
        if not stuck:
            self.health.ok(HANDOVER_KIND)
            return
        failures = max(count for _, count in stuck.values())
        self.health.failed(
            HANDOVER_KIND,
            HandoverStuckError(
                f"{len(stuck)} queues we are giving up cannot be handed over: their offsets cannot be saved "
                f"({failures} failed writes over {now - min(since for since, _ in stuck.values()):.0f} s; "
                f"{first_few(sorted(stuck))}). They are consumed by nobody meanwhile; after "
                f"{self.config.handover_persist_attempts} failed writes each is handed over without its offset"
            ),
        )

    # ------------------------------------------------------------------ the core's actions

    def _io_call(self, what: str, plan: Plan[Event | None]) -> None:
        """Run ``plan`` on the I/O pool and post the event it returns. An exception the plan did not expect (a
        codec error a wire let through, say) is reported under a kind of its own: otherwise it would vanish, and the
        core would only see a request that never answered."""
        kind = f"{what}: unexpected error"

        def answered(event: Event | None) -> None:
            self.health.ok(kind)
            if event is not None:
                self.post(event)

        if not self._closing.is_set():
            self._spawn("io", kind, plan, answered)

    def _carry_out(self, action: Action, news: dict[str, set[MessageQueue]]) -> None:
        match action:
            case WakeAt(time=at):
                self._set_wake(at)
            case FetchRoutes(topics=topics):
                for topic in topics:
                    self._io_call(f"route of {topic}", self._fetch_route(topic, self._post_if_event))
            case FetchConsumerList(topic=topic):
                self._io_call(f"member list for {topic}", self._fetch_consumers(topic))
            case SendHeartbeat(topics=topics):
                self._topics = topics
                self._heartbeat(topics)  # on the broker pool: it does not wait here
            case LockQueues(broker_name=broker, queues=queues, epoch=epoch):
                self._io_call(f"lock at {broker}", self._lock(broker, queues, epoch))
            case ReleaseDeadHolders(broker_name=broker, client_ids=holders, queues=queues):
                self._io_call(DEAD_HOLDERS_KIND, self._release_dead_holders(broker, holders, queues))
            case UnlockQueues(broker_name=broker, queues=queues):
                self._io_call(f"unlock at {broker}", self._unlock(broker, queues))
            case ReadOffset(mq=mq, request_id=request):
                stored = read_plan(self.offset_store, mq)
                self._io_call(f"offset of {mq}", self._lookup(mq, request, stored, OffsetRead))
            case QueryMaxOffset(mq=mq, request_id=request):
                highest = self._transport_call("max_offset", mq)
                self._io_call(f"max offset of {mq}", self._lookup(mq, request, highest, OffsetQueried))
            case SearchOffset(mq=mq, request_id=request, timestamp_ms=at):
                search = self._transport_call("search_offset", mq, at)
                self._io_call(f"offset search of {mq}", self._lookup(mq, request, search, OffsetQueried))
            case PersistOffsets(offsets=offsets):
                self._io_call("persist offsets", self._persist(dict(offsets)))
            case StartQueue(mq=mq, offset=offset):
                self._start(mq, offset, news)
            case StopQueue(mq=mq):
                run = self._runs.get(mq)
                if run is not None:
                    run.stopped = True
                    run.buffered.clear()  # never handed out: the next owner pulls them again
                    self._stop_polled(mq)
            case DropQueue(mq=mq, lost=lost):
                if lost and self._commits:
                    self._lost_since_commit.add(mq)
                    self.post(self._check_commits)
                self._runs.pop(mq, None)
                self._polled.pop(mq, None)
                if mq in self._rotation:
                    self._rotation.remove(mq)
                self.stats.queue_dropped(mq)
                if lost and mq in self._told:
                    news["lost"].add(mq)
            case RevokeQueues(queues=queues):
                if self.rebalance_listener is None:
                    self.post(QueuesRevoked(frozenset(queues)))
                else:
                    news["revoked"].update(queues)
            case QueuesChanged(topic=topic, mq_all=mq_all, mq_divided=mq_divided):
                if self.queue_listener is not None:
                    self._queues_changed(topic, mq_all, mq_divided)
            case ClientIdShared(topic=topic, client_id=client_id, consumers=consumers, withheld=withheld):
                self._client_id_shared(topic, client_id, consumers, withheld)
            case HandoverWithoutOffset(mq=mq, offset=offset, saved=saved, attempts=attempts):
                since = "where it starts (no offset was saved)" if saved is None else f"offset {saved}, the last saved"
                error = HandoverWithoutOffsetError(
                    f"{mq} handed over without its offset {offset} after {attempts} failed writes: the next owner "
                    f"re-delivers from {since}"
                )
                self.health.failed("persist offsets", error, logging.ERROR)
            case ShutdownComplete():
                self._shutdown_complete()
            case _:
                raise TypeError(f"unknown action {action!r}")

    @abstractmethod
    def _shutdown_complete(self) -> None:
        """(Service context.) The core released every queue: the runtime may unregister and close."""

    def _queues_changed(self, topic: str, mq_all: Sequence[MessageQueue], mq_divided: Sequence[MessageQueue]) -> None:
        """Java's ``messageQueueChanged``: called in the service context, as Java calls it in its rebalance thread
        (an ``async def`` one is awaited in the background, in order with the rebalance callbacks)."""
        assert self.queue_listener is not None
        try:
            result = self.queue_listener(topic, mq_all, mq_divided)
        except Exception:
            log.exception("the queue listener failed for topic %s", topic)
            return
        if result is not None and hasattr(result, "__await__"):
            self._spawn("callback", f"queue listener for {topic}", self._awaited(result))

    @staticmethod
    def _awaited(awaitable: Any) -> Plan[None]:
        yield Invoke(lambda: awaitable)

    def _start(self, mq: MessageQueue, offset: int, news: dict[str, set[MessageQueue]]) -> None:
        """StartQueue: a run for the queue, pulled at once (push, poll), unless the rebalance listener must hear of
        it first: then a push consumer pulls once ``on_queues_assigned`` returned, and a pull consumer's poll
        hands out none of its messages before that."""
        told_first = self.rebalance_listener is not None
        self._runs[mq] = _QueueRun(next(self._generations), offset, announced=not told_first)
        self.stats.queue_started(mq)
        if told_first:
            news["assigned"].add(mq)
            self._told.add(mq)
        if self.polling:
            self._rotation.append(mq)
        if self.polling or (self.listener is not None and not told_first):
            self._pull(mq)

    def _client_id_shared(self, topic: str, client_id: str, consumers: int, withheld: bool) -> None:
        kind = f"client ID {client_id} in {topic}"
        if consumers == 1:
            self.health.ok(kind)
            return
        effect = (
            "their queues of this topic are not consumed until only one is left"
            if withheld
            else "they consume the same queues twice and leave others unconsumed (the fenced handover prevents it)"
        )
        error = ClientIdSharedError(
            f"used by {consumers} consumers of group {self.config.consumer_group}: {effect}; give each consumer "
            "its own instance name"
        )
        self.health.failed(kind, error, level=logging.ERROR)

    # ------------------------------------------------------------------ rebalance callbacks (L10)

    def _tell(self, news: dict[str, set[MessageQueue]]) -> None:
        """(Service context.) What one batch of the core's actions changed, to the rebalance listener: queues lost,
        then revoked, each as one call; each queue once assigned, then once revoked or lost. Queues started are
        told together a moment later (:meth:`_tell_assigned`), since each starts on its own answer: one call for
        the queues of a round rather than one per queue. Queues already waiting to be told are told first, so
        nothing is revoked before it was assigned."""
        lost = news["lost"] & self._told
        revoked = news["revoked"] & self._told
        if (lost or news["revoked"]) and self._assigning:
            self._tell_assigned()
        self._told -= lost | revoked
        if lost:
            self._callback("lost", frozenset(lost), None)
        if news["revoked"]:
            queues = frozenset(news["revoked"])
            self._callback("revoked", frozenset(revoked), lambda: self.post(QueuesRevoked(queues)))
        if news["assigned"]:
            if not self._assigning:
                self.post(self._tell_assigned)  # after the answers already waiting in the service context
            self._assigning |= news["assigned"]

    def _tell_assigned(self) -> None:
        """(Service context.) ``on_queues_assigned`` for the queues started since the last call."""
        queues, self._assigning = frozenset(self._assigning), set()
        if queues:
            self._callback("assigned", queues, lambda: self.post(partial(self._announced, queues)))

    def _announced(self, queues: frozenset[MessageQueue]) -> None:
        """(Service context.) ``on_queues_assigned`` returned: the queues' messages may be handed out now."""
        for mq in sorted(queues):
            run = self._runs.get(mq)
            if run is not None and not run.announced:
                run.announced = True
                if self.listener is not None:
                    self._pull(mq)
        self._messages_ready()

    def _callback(self, name: str, queues: frozenset[MessageQueue], then: Callable[[], None] | None) -> None:
        """Call the rebalance listener's ``on_queues_<name>(queues)`` where this consumer calls callbacks (the
        callback pool; a pull consumer's ``poll()``), then ``then`` (also when it raised, or had nothing to tell).
        Its time goes to the metrics; a failure to health."""
        assert self.rebalance_listener is not None
        if not queues:
            if then is not None:
                then()
            return
        method = getattr(self.rebalance_listener, _CALLBACK_NAMES[name])
        self._run_callback(self._callback_plan(name, method, queues, then), f"rebalance listener {method.__name__}")

    def _callback_plan(
        self, name: str, method: Callable[..., Any], queues: frozenset[MessageQueue], then: Callable[[], None] | None
    ) -> Plan[None]:
        kind = f"rebalance listener {method.__name__}"
        began = time.monotonic()
        try:
            yield Invoke(method, (queues,))
        except Exception as error:
            failure = RebalanceListenerError(f"{type(error).__name__}: {error} ({first_few(sorted(queues))})")
            failure.__cause__ = error
            self.health.failed(kind, failure, traceback=True)
        else:
            self.health.ok(kind)
        finally:
            if self.metrics is not None:
                self.metrics.callback(name, time.monotonic() - began)
            if then is not None:
                then()

    def _run_callback(self, plan: Plan[None], what: str) -> None:
        """Run a rebalance callback: on the callback pool, one at a time, in order; a pull consumer runs them in
        ``poll()`` instead, on the application's thread (:attr:`callbacks`)."""
        if self.polling:
            self.callbacks.append(plan)
            self._messages_ready()
        else:
            self._spawn("callback", what, plan)

    # ------------------------------------------------------------------ requests (as plans)

    @staticmethod
    def _transport_call(method: str, *args: Any) -> Plan[Any]:
        result = yield Call(method, args)
        return result

    def _post_if_event(self, event: Event | None) -> None:
        if event is not None:
            self.post(event)

    def _fetch_route(self, topic: str, report: Callable[[Event | None], None]) -> Plan[None]:
        """Fetch a route and ``report`` its ``RouteUpdated`` (None when it failed), once. A broker seen for the
        first time is sent a heartbeat before the route is reported, so this client is a member there before any
        round asks it for the member list (the periodic heartbeat is 30 s away); the heartbeats run on the broker
        pool, and the route is kept (its new brokers' streams opened) and reported after the last."""
        try:
            route: TopicRoute = yield Call("route", (topic,))
        except TransportError as error:
            if error.code == "NOT_FOUND" and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                log.debug("route of %s: %s (the broker creates it at our first heartbeat)", topic, error)
            else:
                self.health.failed(f"route of {topic}", error)
            report(None)
            return
        self.health.ok(f"route of {topic}")
        with self._brokers_lock:
            new = [broker for broker in dict.fromkeys(route.brokers()) if broker not in self._known_brokers]
            self._known_brokers.update(new)
        updated = RouteUpdated(topic, frozenset(route.subscribe_queues()))

        def known() -> None:
            self.post(partial(self._route_known, route, new))
            report(updated)

        if new:
            self._heartbeat(self._topics, new, then=known)
        else:
            known()

    def _route_known(self, route: TopicRoute, new_brokers: list[str]) -> None:
        """Keep the route, and open a notification stream to each broker seen for the first time."""
        self._routes[route.topic] = route
        for broker in new_brokers:
            if broker not in self._listening and not self._closing.is_set():
                self._listening.add(broker)
                self._open_stream(broker)

    def _brokers(self) -> list[str]:
        """Every broker any route has named (read from pool threads too, hence the lock)."""
        with self._brokers_lock:
            return sorted(self._known_brokers)

    def _fetch_consumers(self, topic: str) -> Plan[Event]:
        route = self._routes.get(topic)
        if route is None or not route.queue_datas:
            return ConsumerListFetched(topic, None)
        broker = route.queue_datas[0].broker_name
        try:
            ids: list[str] = yield Call("consumer_list", (broker, self.config.consumer_group))
        except TransportError as error:
            self.health.failed(f"member list for {topic}", error)
            return ConsumerListFetched(topic, None)
        if len(ids) > MAX_GROUP_MEMBERS:
            # Sorting and allocating it, let alone building a hash ring of it, would hold the service context and
            # gigabytes; no real group comes near. Refused as a failed list (core rule R3), and said loudly.
            refusal = MemberListTooLongError(
                f"{len(ids)} members of group {self.config.consumer_group} listed by {broker}; "
                f"the limit is {MAX_GROUP_MEMBERS} per group, so this consumer keeps its queues and does not rebalance"
            )
            self.health.failed(f"member list for {topic}", refusal, logging.ERROR)
            return ConsumerListFetched(topic, None)
        self.health.ok(f"member list for {topic}")
        yield from self._languages.members_seen(ids)
        return ConsumerListFetched(topic, tuple(ids))

    def _heartbeat(
        self, topics: tuple[str, ...], brokers: Sequence[str] | None = None, then: Callable[[], None] | None = None
    ) -> None:
        """Register at ``brokers`` (every broker a route named, by default) on the broker pool, without waiting:
        ``then`` is called once each has answered or failed. A broker whose heartbeat is still under way is not sent
        another (a round of unresponsive brokers must not queue up behind the last)."""
        registration = GroupRegistration(
            self.config.consumer_group,
            push=self.config.push_consumer,
            message_model=self.config.message_model,
            consume_from_where=self.config.consume_from_where,
            topics=topics,
            expressions=self.expressions,
        )
        with self._brokers_lock:
            wanted = sorted(self._known_brokers) if brokers is None else brokers
            targets = [broker for broker in wanted if broker not in self._heartbeating]
            self._heartbeat_again.update(broker for broker in wanted if broker in self._heartbeating)
            self._heartbeating.update(targets)
        self._at_brokers("broker", "heartbeat task", targets, partial(self._heartbeat_one, registration), then)

    def _heartbeat_one(self, registration: GroupRegistration, broker: str) -> Plan[None]:
        """One heartbeat, and once more if another was asked for meanwhile (a reconnect's must not be lost behind
        a periodic one under way on the connection that closed). A success is told to the core with the number
        of connection losses before it was sent (rule L9: only one sent after the last loss lists us again)."""
        again = True
        while again:
            if self._closing.is_set():
                break
            with self._brokers_lock:
                epoch = self._losses.get(broker, 0)
            try:
                yield from self._check_subscriptions(broker, registration.topics)
                yield Call("heartbeat", (broker, self.config.client_id, registration))
            except TransportError as error:
                self.health.failed("heartbeat", error, at=broker)
            else:
                self.health.ok("heartbeat", at=broker)
                self.post(BrokerRegistered(broker, epoch))
            with self._brokers_lock:
                again = broker in self._heartbeat_again
                self._heartbeat_again.discard(broker)
                if not again:
                    self._heartbeating.discard(broker)

    def _at_brokers(
        self,
        pool: Pool,
        what: str,
        brokers: Sequence[str],
        plan: Callable[[str], Plan[None]],
        then: Callable[[], None] | None = None,
    ) -> threading.Event:
        """``plan(broker)`` for each broker on ``pool``; the event is set, and ``then`` called, once every plan
        has ended (or was refused: the engine is shut down)."""
        done = threading.Event()
        left = [len(brokers)]
        lock = threading.Lock()

        def finished(_: object = None) -> None:
            with lock:
                left[0] -= 1
                last = left[0] == 0
            if last:
                done.set()
                if then is not None:
                    then()

        def one(broker: str) -> Plan[None]:
            try:
                yield from plan(broker)
            finally:
                finished()

        if not brokers:
            left[0] = 1
            finished()
        for broker in brokers:
            if not self._spawn(pool, what, one(broker)):
                finished()
        return done

    def _check_subscriptions(self, broker: str, topics: Iterable[str]) -> Plan[None]:
        """Compare the group's subscription table at ``broker`` with ours, just before our heartbeat rewrites it:
        the broker filters every member's pulls by that one table, so a member subscribing otherwise (``*`` beside
        ``TagA``, or other tags) makes the broker withhold messages from some members, which are then lost to the
        group. Reported per topic and broker until a later look there finds another member's row alike
        (RocketMQ's "inconsistent subscription"; mqadmin only says "different subscription", this names what
        differs)."""
        try:
            table: dict[str, GroupSubscription] = yield Call("subscription_table", (broker, self.config.consumer_group))
        except TransportError as error:
            # advisory: an unreachable broker is the heartbeat's failure to report, and a user allowed to consume
            # may not be allowed this read (ACL), which must not make a working consumer look unhealthy
            log.debug("subscription check at %s skipped: %s", broker, error)
            return
        for topic in topics:
            ours = self.expressions.get(topic) or SubscriptionExpression()
            row = table.get(topic)
            topic_kind = f"subscription of {topic}"
            if row is None or (row.expression.filters_like(ours) and not row.ours):
                self.health.ok(topic_kind, at=broker)  # nobody else's row, or another member's and alike
                continue
            if row.expression.filters_like(ours):
                continue  # our own heartbeat's row: it says nothing of the other members, so a report stands
            self.health.failed(
                topic_kind,
                SubscriptionMismatchError(
                    f"group {self.config.consumer_group} subscribes {topic} with {str(row.expression)!r} at "
                    f"{broker}, this consumer with {str(ours)!r}: the broker filters every member's pulls by one of "
                    "them, so messages that only one expression accepts are lost to the group; subscribe every "
                    "member alike"
                ),
                logging.ERROR,
                at=broker,  # each broker has its table: one where it agrees clears nothing at another
            )

    def _lock(self, broker: str, queues: tuple[MessageQueue, ...], epoch: int) -> Plan[Event]:
        try:
            granted: set[MessageQueue] = yield Call(
                "lock", (broker, self.config.consumer_group, self.config.client_id, queues)
            )
        except TransportError as error:
            self.health.failed(f"lock at {broker}", error)
            granted = set()
        else:
            self.health.ok(f"lock at {broker}")
        return LockResult(frozenset(queues), frozenset(granted), epoch)

    def _release_dead_holders(
        self, broker: str, holders: tuple[str, ...], queues: tuple[MessageQueue, ...]
    ) -> Plan[Event]:
        """Core rule L9: ask the broker whom it lists, and release the locks of ``queues`` held by each of
        ``holders`` it does not list, at once. A list that took longer than :data:`DEAD_HOLDER_WINDOW` to come
        is not acted on: the decision must rest on the broker's present view, and a holder that registered again
        meanwhile waits only its ``rejoin_delay`` before it locks."""
        group = self.config.consumer_group
        asked = time.monotonic()
        try:
            listed = set((yield Call("consumer_list", (broker, group))))
        except TransportError as error:
            self.health.failed(DEAD_HOLDERS_KIND, error, at=broker)
            return DeadHoldersChecked(broker, frozenset(queues))
        if time.monotonic() - asked > DEAD_HOLDER_WINDOW:
            log.info("member list of %s came after %.1f s: no locks released on its word", broker, DEAD_HOLDER_WINDOW)
            return DeadHoldersChecked(broker, frozenset(queues))
        released: set[str] = set()
        failure: TransportError | None = None
        for holder in holders:
            if holder in listed or holder == self.config.client_id:
                continue
            try:
                yield Call("unlock", (broker, group, holder, queues))
            except TransportError as error:
                failure = error
                continue
            released.add(holder)
        if failure is None:
            self.health.ok(DEAD_HOLDERS_KIND, at=broker)
        else:  # reported once, and not cleared by the same check's other releases
            self.health.failed(DEAD_HOLDERS_KIND, failure, at=broker)
        if released:
            log.warning(
                "released the locks %s held on %d queue(s) of %s (%s): it is no longer a member there, so it "
                "stopped consuming them when the broker dropped it",
                ", ".join(sorted(released)),
                len(queues),
                broker,
                first_few(queues),
            )
        return DeadHoldersChecked(broker, frozenset(queues), frozenset(released))

    def _unlock(self, broker: str, queues: tuple[MessageQueue, ...]) -> Plan[Event]:
        try:
            yield Call("unlock", (broker, self.config.consumer_group, self.config.client_id, queues))
        except TransportError as error:
            self.health.failed(f"unlock at {broker}", error)
        else:
            self.health.ok(f"unlock at {broker}")
        return QueuesUnlocked(frozenset(queues))

    def _unregister(self, deadline: float, broker: str) -> Plan[None]:
        if time.monotonic() >= deadline:
            return  # abandoned: the shutdown's time is spent
        try:
            yield Call("unregister", (broker, self.config.client_id, self.config.consumer_group))
        except TransportError as error:
            self.health.failed("unregister", error, at=broker)

    def _lookup(
        self,
        mq: MessageQueue,
        request: int,
        read: Plan[int | None],
        answer: Callable[[MessageQueue, int, int], Event],
    ) -> Plan[Event]:
        try:
            offset = yield from read
        except (TransportError, OffsetStoreError) as error:
            self.health.failed(f"offset look-up at {mq.broker_name}", error)
            return OffsetLookupFailed(mq, request)
        self.health.ok(f"offset look-up at {mq.broker_name}")
        if offset is None and answer is OffsetRead:
            return OffsetRead(mq, None, request)
        if offset is None:
            return OffsetLookupFailed(mq, request)
        return answer(mq, offset, request)

    def _persist(self, offsets: Mapping[MessageQueue, int]) -> Plan[Event]:
        started = time.monotonic()
        try:
            stored = yield from persist_plan(self.offset_store, offsets)
        except OffsetStoreError as error:
            if self.metrics is not None:
                self.metrics.persisted(time.monotonic() - started, ok=False)
            self.health.failed("persist offsets", error, logging.ERROR)  # consumed work is not saved meanwhile
            return OffsetsPersistFailed(offsets)
        missing = {mq: offset for mq, offset in offsets.items() if mq not in stored}
        if self.metrics is not None:
            self.metrics.persisted(time.monotonic() - started, ok=not missing)
        if missing:
            failed = OffsetStoreError(f"{len(missing)} queues not stored: {', '.join(sorted(map(str, missing))[:3])}")
            self.health.failed("persist offsets", failed, logging.ERROR)
            self.post(OffsetsPersistFailed(missing))
        else:
            self.health.ok("persist offsets")
        return OffsetsPersisted(stored)

    # ------------------------------------------------------------------ pulling

    def _pull(self, mq: MessageQueue) -> None:
        run = self._runs.get(mq)
        if run is None or run.stopped or run.pulling or run.paused or self._closing.is_set():
            return
        if self._flow_controlled(mq, run):
            self._later(FLOW_CONTROL_DELAY, lambda: self._pull(mq))  # let the application catch up first
            return
        run.pulling = True
        wait = self.transport.long_poll_ms if self.settings.pull_wait_ms is None else self.settings.pull_wait_ms
        self._start_pull(mq, run.generation, run.next_offset, wait)

    def _pull_answered(
        self, mq: MessageQueue, generation: int, started: float, result: PullResult | TransportError
    ) -> None:
        """(Service context.) A pull's answer: buffered and handed on, or after a failure pulled again later."""
        if isinstance(result, TransportError):
            if not self._closing.is_set():  # a shutdown closes the connections under the long polls it ends
                self.health.failed("pull", result, at=mq.broker_name)
            if self._current(mq, generation) is not None:
                self._later(self.settings.pull_error_backoff, lambda: self._pull(mq))
            return
        self.health.ok("pull", at=mq.broker_name)
        if result.status == PullStatus.FOUND:
            self.stats.pulled(mq, len(result.messages), elapsed_ms(started))
        self._pulled(mq, generation, result.status, result.next_begin_offset, result.messages)

    def _flow_controlled(self, mq: MessageQueue, run: _QueueRun) -> bool:
        """Java's flow control, by its thresholds: too many messages pulled and not consumed, too many bytes of
        them, or (concurrent) too wide a span from the oldest to the newest, which a stuck message makes grow."""
        pq = self.core.process_queue(mq)
        if pq is None:
            return False
        settings = self.settings
        return (
            pq.in_flight_count > settings.pull_threshold_for_queue
            or run.cached_bytes > settings.pull_threshold_size_for_queue * MIB
            or (not self.config.consume_orderly and pq.span > settings.consume_concurrently_max_span)
        )

    def _current(self, mq: MessageQueue, generation: int) -> _QueueRun | None:
        run = self._runs.get(mq)
        if run is None or run.generation != generation:
            return None
        run.pulling = False
        return None if run.stopped else run

    def _pulled(
        self, mq: MessageQueue, generation: int, status: str, next_offset: int, messages: tuple[Message, ...]
    ) -> None:
        run = self._current(mq, generation)
        if run is None:
            return
        if status == PullStatus.OFFSET_ILLEGAL:
            self._handle(OffsetIllegal(mq, next_offset))
            return
        messages, next_offset = self._checked_pull(mq, run.next_offset, next_offset, messages)
        messages = self._refiltered(mq, messages)
        run.next_offset = next_offset
        if messages:
            run.buffered.extend(messages)
            run.cached_bytes += sum(len(m.body) for m in messages)
            if self.metrics is not None:
                run.arrivals.append((next_offset, time.monotonic()))
        self._handle(MessagesPulled(mq, tuple(m.queue_offset for m in messages), next_offset))
        if messages:
            if self.polling:
                self._messages_ready()
            else:
                self._dispatch(mq)
        self._pull(mq)

    @abstractmethod
    def _messages_ready(self) -> None:
        """(Service context.) A pull consumer's ``poll()`` may find something now (messages, or a callback to
        run): wake a waiting one."""

    def _refiltered(self, mq: MessageQueue, messages: tuple[Message, ...]) -> tuple[Message, ...]:
        """Java's re-filter after the broker's (``PullAPIWrapper.processPullResult``): the broker matched tags by
        hash code, and two tags can share one, so only messages whose tag is one of the subscription's are kept.
        The others are never buffered: the queue's commit offset moves past them with the pull's next offset."""
        expression = self.expressions.get(mq.topic)
        if expression is None or not expression.tags:
            return messages
        kept = tuple(m for m in messages if expression.accepts(m.tags))
        self.filtered += len(messages) - len(kept)
        return kept

    def _checked_pull(
        self, mq: MessageQueue, requested: int, next_offset: int, messages: tuple[Message, ...]
    ) -> tuple[tuple[Message, ...], int]:
        """A pull answer held to what it must be: messages in ``[requested, next_offset)`` in ascending order,
        and a next offset not below the requested one. A broker (or anything posing as one) that answers
        otherwise would make us hand out again what was consumed, endlessly (a next offset that goes back), carry
        an impossible offset into every later offset write, or break an orderly queue's order. Java only logs
        "[BUG] pull message result maybe data wrong"; we also keep the queue where it was and hand out only what
        lies in the range, in order, and say so through health until the queue's answers are sound again."""
        kind = f"pull answers of {mq}"
        offsets = [m.queue_offset for m in messages]
        if (
            next_offset >= requested
            and (not offsets or (requested <= offsets[0] and offsets[-1] < next_offset))
            and all(a < b for a, b in itertools.pairwise(offsets))
        ):
            self.health.ok(kind)
            return messages, next_offset
        wrong = [offset for offset in offsets if not requested <= offset < next_offset]
        self.health.failed(
            kind,
            PullAnswerError(
                f"[BUG] pull message result maybe data wrong: requested offset {requested}, next offset "
                f"{next_offset}, {len(wrong)} of {len(messages)} messages outside [{requested}, {next_offset}) "
                f"(first {wrong[:3]}){'' if wrong else ' or out of order'}; those are not handed out, the rest "
                "are handed out in order and the queue does not move back"
            ),
            logging.ERROR,
        )
        kept = {m.queue_offset: m for m in messages if requested <= m.queue_offset < next_offset}
        return tuple(kept[offset] for offset in sorted(kept)), max(next_offset, requested)

    # ------------------------------------------------------------------ push: handing out to the listener

    def _dispatch(self, mq: MessageQueue) -> None:
        """Hand buffered messages to the consume pool, several batches to a task, while the core says the queue
        may give them out."""
        run = self._runs.get(mq)
        if run is None or self.listener is None:
            return
        limit = 1 if self.config.consume_orderly else self.settings.consume_threads * 2
        while run.buffered and run.busy < limit and not run.stopped:
            now = time.monotonic()
            if run.paused_until > now or not self.core.is_dispatchable(mq, now):
                if not run.dispatch_waiting:
                    run.dispatch_waiting = True
                    delay = max(run.paused_until - now, 0.0) or self.config.lock_retry_interval
                    self._later(delay, lambda: self._dispatch_again(mq, run))
                return
            buffered = run.buffered
            chunk = [buffered.popleft() for _ in range(min(self._chunk_size(), len(buffered)))]
            self._handle(MessagesDispatched(mq, tuple(m.queue_offset for m in chunk)))
            run.busy += 1
            arrived = None if self.metrics is None else self._arrival(run, chunk[0].queue_offset)
            self._consume(mq, run, chunk, self.core.lock_deadline(mq), arrived)

    def _consume(
        self, mq: MessageQueue, run: _QueueRun, chunk: list[Message], lock_deadline: float, arrived: float | None
    ) -> None:
        """Run a consume task on the consume pool; one the pool refuses (the engine is shut down) comes back
        undelivered at once."""
        plan = self._consume_chunk(mq, run, chunk, lock_deadline, arrived)
        if not self._spawn("consume", "consume task", plan):
            self._chunk_done(mq, run, _Chunk(returned=chunk))

    @staticmethod
    def _arrival(run: _QueueRun, offset: int) -> float | None:
        """When the pull that brought ``offset`` came (metrics on). Chunks are handed out in offset order, so
        the pulls before it are forgotten; a message given back after its pull was forgotten (a stopped task)
        counts from the next pull kept, which shortens its wait."""
        arrivals = run.arrivals
        while len(arrivals) > 1 and arrivals[0][0] <= offset:
            arrivals.popleft()
        return arrivals[0][1] if arrivals else None

    def _chunk_size(self) -> int:
        """Messages per consume task: as many whole batches as make about :data:`CHUNK_WORK` of listener time
        (by the listener's recent pace), so that a quick listener pays one hand-off for many messages and a slow
        one gets a batch per task, spread over the pool's threads as Java spreads them; at most
        :data:`MAX_CHUNK_MESSAGES` (or one batch, if larger)."""
        batch = self.settings.consume_message_batch_max_size
        wanted = min(MAX_CHUNK_MESSAGES, int(CHUNK_WORK / max(self._pace, 1e-9)))
        return max(batch, wanted - wanted % batch)

    def _dispatch_again(self, mq: MessageQueue, run: _QueueRun) -> None:
        run.dispatch_waiting = False
        self._dispatch(mq)

    def _consume_chunk(
        self, mq: MessageQueue, run: _QueueRun, chunk: list[Message], lock_deadline: float, arrived: float | None
    ) -> Plan[None]:
        """(On the consume pool.) Give ``chunk`` to the listener batch by batch, in order; stop before a batch
        (the first too: a task may wait in the pool's queue) once the queue is being released or its lock has run
        out, so nothing is handed out that the core would not hand out now, or (orderly) after a failed batch;
        count and report it all at once."""
        size = self.settings.consume_message_batch_max_size
        orderly = self.config.consume_orderly
        result = _Chunk()
        calls = ok = failed = 0
        began = time.monotonic()
        for start in range(0, len(chunk), size):
            if run.stopped or self._closing.is_set() or time.monotonic() >= lock_deadline:
                result.returned = chunk[start:]
                break
            batch = chunk[start : start + size]
            calls += 1
            verdict = yield from self._consume_batch(mq, batch)
            if verdict is _Verdict.CONSUMED:
                ok += len(batch)
            else:
                failed += len(batch)
            if verdict is not _Verdict.RETRY:
                result.consumed += batch
            elif orderly:  # tried again first, after retry_delay, before anything behind it (Java suspends)
                result.returned, result.orderly_failure = chunk[start:], True
                break
            else:
                result.retry.append(batch)
        if calls:  # else the task gave everything back before its first listener call
            took = time.monotonic() - began
            self.stats.consumed(mq, ok, failed, took * 1000, calls)
            if self.metrics is not None:
                waited = None if arrived is None else (began - arrived) * 1000
                self.metrics.consumed(mq.topic, waited, took * 1000 / calls, ok, failed, calls)
            with self._stats_lock:
                self.consumed += ok
                self.failed += failed
            self._pace = (self._pace + took / (ok + failed)) / 2  # a race only blurs the estimate
        self.post(partial(self._chunk_done, mq, run, result))

    def _consume_batch(self, mq: MessageQueue, batch: list[Message]) -> Plan[_Verdict]:
        """One listener call: consumed; or refused and (concurrent) sent back to the retry topic, so done with;
        or refused and to be tried again here."""
        assert self.listener is not None
        kind = f"listener on {mq.topic}"  # one kind per topic: a listener that always raises logs rarely, not per batch
        try:
            unreadable = [m for m in batch if m.body_error]
            if unreadable:  # never handed to the listener; failed as a refused batch is (retry topic, then DLQ)
                kind = f"message bodies on {mq.topic}"
                raise UnreadableBodyError(unreadable[0].body_error)
            yield Invoke(self.listener, (batch,))
        except Exception as error:
            sent_back = not self.config.consume_orderly and (yield from self._sent_back(batch))
            then = self._where_sent(batch) if sent_back else "retrying"
            self.health.failed(kind, ListenerError(mq, batch, then, error), traceback=True)
            return _Verdict.SENT_BACK if sent_back else _Verdict.RETRY
        self.health.ok(kind)
        return _Verdict.CONSUMED

    def _where_sent(self, batch: list[Message]) -> str:
        """Where the broker put a batch sent back: a message already reconsumed ``max_reconsume_times`` goes to
        the group's dead-letter queue, not the retry topic (the broker's rule in ``consumerSendMsgBack``), and that
        is the line an operator looks for."""
        dead = sum(1 for m in batch if m.reconsume_times >= self.settings.max_reconsume_times)
        dlq = dead_letter_topic(self.config.consumer_group)
        if dead == len(batch):
            return f"sent to the dead-letter queue {dlq} after {self.settings.max_reconsume_times} reconsumptions"
        if dead:
            return f"{dead} sent to the dead-letter queue {dlq}, {len(batch) - dead} back to the retry topic"
        return "sent back to the retry topic"

    def _sent_back(self, batch: list[Message]) -> Plan[bool]:
        """Java's way with a failed concurrent batch: the broker stores each message again in the group's retry
        topic (a later delivery, with a growing delay), and the queue moves on. False when that could not be
        done for every message, and the batch is retried here instead (Java: consumeLater)."""
        if not self._send_back:
            return False
        for message in batch:
            try:
                yield Call("send_back", (self.config.consumer_group, message, self.settings.max_reconsume_times))
            except TransportError as error:
                if error.code == "UNIMPLEMENTED":
                    self._send_back = False
                    log.info("%s", error)
                else:
                    self.health.failed("send back to the retry topic", error)
                return False
        return True

    def _chunk_done(self, mq: MessageQueue, run: _QueueRun, result: _Chunk) -> None:
        """(Service context.) Tell the core what a consume task did, put back in front what it did not hand out
        (unless the queue is being given up: then its next owner pulls them), and hand out more. A task of a
        queue dropped since (its run replaced or gone) tells nothing: the core has forgotten that process queue,
        and its offsets would be taken for those of the queue's next one."""
        if self._runs.get(mq) is not run:
            return
        run.busy -= 1
        if result.consumed:
            run.cached_bytes -= sum(len(m.body) for m in result.consumed)
            self._handle(MessagesConsumed(mq, tuple(m.queue_offset for m in result.consumed)))
        if result.returned:
            if not run.stopped:
                run.buffered.extendleft(reversed(result.returned))
                if result.orderly_failure:
                    run.paused_until = time.monotonic() + self.settings.retry_delay
            self._handle(MessagesReturned(mq, tuple(m.queue_offset for m in result.returned)))
        for batch in result.retry:
            self._retry_later(mq, run, batch)
        self._dispatch(mq)

    def _retry_later(self, mq: MessageQueue, run: _QueueRun, batch: list[Message]) -> None:
        """A concurrent batch neither consumed nor sent back: give it to the listener again after
        ``retry_delay`` while the queue is ours; once it is not, return it undelivered (the next owner has it)."""
        run.busy += 1

        def retry() -> None:
            if self._runs.get(mq) is not run or run.stopped:
                self._chunk_done(mq, run, _Chunk(returned=batch))
            elif not self.core.is_dispatchable(mq, time.monotonic()):
                self._later(self.settings.retry_delay, retry)
            else:
                self._consume(mq, run, batch, self.core.lock_deadline(mq), None)

        self._later(self.settings.retry_delay, retry)

    # ------------------------------------------------------------------ poll: the application takes messages

    def take(self, max_messages: int) -> list[Message]:
        """(Service context.) Up to ``max_messages`` buffered messages for a pull consumer's ``poll()``, taken from
        the queues in turn (each queue's in offset order), only from queues the core lets give messages out and
        the rebalance listener has heard of. With auto-commit they count as consumed at once (Java's
        ``DefaultLitePullConsumer``: the offset moves as soon as ``poll()`` returns them); else they stay handed out
        until :meth:`commit_polled`."""
        taken: list[Message] = []
        now = time.monotonic()
        for _ in range(len(self._rotation)):
            if len(taken) >= max_messages:
                break
            mq = self._rotation[0]
            self._rotation.rotate(-1)
            run = self._runs.get(mq)
            if run is None:
                self._rotation.remove(mq)
                continue
            if not run.buffered or run.paused or not run.announced or not self.core.is_dispatchable(mq, now):
                continue
            count = min(max_messages - len(taken), len(run.buffered))
            batch = [run.buffered.popleft() for _ in range(count)]
            offsets = tuple(m.queue_offset for m in batch)
            self._handle(MessagesDispatched(mq, offsets))
            if self.auto_commit:
                self._handed_back(mq, run, batch)
            else:
                self._polled.setdefault(mq, []).extend(batch)
            taken += batch
        return taken

    def _stop_polled(self, mq: MessageQueue) -> None:
        """(Service context.) A queue being released whose messages a pull consumer polled and has not committed:
        they are the application's now, in its own thread, so the release does not wait for them (the drain is
        for a push consumer's listener). They come back to the core as not handed out, so the revoke follows at
        once and reaches ``poll()`` after the application is done with its batch; what it commits until the
        offset is frozen (in its loop, or in ``on_queues_revoked``) still counts."""
        polled = self._polled.get(mq)
        if polled:
            self._handle(MessagesReturned(mq, tuple(m.queue_offset for m in polled)))

    def _handed_back(self, mq: MessageQueue, run: _QueueRun, batch: list[Message]) -> None:
        """(Service context.) Polled messages done with: consumed for the core, their bytes off the flow control."""
        run.cached_bytes -= sum(len(m.body) for m in batch)
        self._handle(MessagesConsumed(mq, tuple(m.queue_offset for m in batch)))
        with self._stats_lock:
            self.consumed += len(batch)

    def commit(self, done: Callable[[bool], None]) -> None:
        """(Service context.) Everything polled so far counts as consumed, and every held queue's commit offset is
        written now (core rule O4); ``done(True)`` once the store has acknowledged each of those offsets (a queue
        released meanwhile counts when its release wrote at least as far), ``done(False)`` when a queue was lost
        first. A caller that stops waiting simply never hears."""
        for mq, batch in self._polled.items():
            run = self._runs.get(mq)
            if run is not None:
                self._handed_back(mq, run, batch)
        self._polled.clear()
        wanted = {}
        for mq in self._runs:
            pq = self.core.process_queue(mq)
            if pq is not None and pq.commit_offset != self.core.stored_offset(mq):
                wanted[mq] = pq.commit_offset
        if not wanted:
            done(True)
            return
        self._commits.append((wanted, done))
        self._handle(PersistRequested())

    def _check_commits(self) -> None:
        """(Service context, after offsets were written or queues lost.) Answer the commits now settled."""
        waiting = []
        for wanted, done in self._commits:
            if any(mq in self._lost_since_commit for mq in wanted):
                done(False)
            elif all(self._stored.get(mq, -1) >= offset for mq, offset in wanted.items()):
                done(True)
            else:
                waiting.append((wanted, done))
        self._commits = waiting
        self._lost_since_commit.clear()

    def committed(self, mq: MessageQueue) -> int | None:
        """(Service context.) The offset the store is known to hold for ``mq`` (None: not known here; read the
        store)."""
        return self._stored.get(mq, self.core.stored_offset(mq))

    def _assigned_run(self, mq: MessageQueue) -> _QueueRun:
        run = self._runs.get(mq)
        if run is None or run.stopped:
            raise QueueNotAssignedError(f"{mq} is not assigned to this consumer (poll() assigns queues)")
        return run

    def seek(self, mq: MessageQueue, offset: int) -> None:
        """(Service context.) ``poll()`` returns ``mq``'s messages from ``offset`` next (core rule O4). Raises
        :class:`QueueNotAssignedError` when the queue is not ours now."""
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset must be a whole number of at least 0, got {offset!r}")
        run = self._assigned_run(mq)
        run.buffered.clear()
        run.cached_bytes = 0
        self._polled.pop(mq, None)
        run.generation = next(self._generations)  # the pull on the way answers for the old position: ignored
        run.pulling = False
        run.next_offset = offset
        self._handle(QueueSeeked(mq, offset))
        self._pull(mq)

    def position(self, mq: MessageQueue) -> int:
        """(Service context.) The offset of the next message ``poll()`` returns from ``mq``."""
        run = self._assigned_run(mq)
        return run.buffered[0].queue_offset if run.buffered else run.next_offset

    def pause(self, queues: Iterable[MessageQueue], paused: bool = True) -> None:
        """(Service context.) Neither pull nor poll ``queues`` until resumed (``paused=False``); a queue revoked
        meanwhile forgets it. Raises :class:`QueueNotAssignedError` for a queue not ours now."""
        runs = {mq: self._assigned_run(mq) for mq in queues}
        for mq, run in runs.items():
            run.paused = paused
            if not paused:
                self._pull(mq)
        if not paused:
            self._messages_ready()

    def resubscribe(self, expressions: Mapping[str, SubscriptionExpression]) -> None:
        """(Service context.) Consume these topics from now on (a pull consumer's ``assign()`` after its start), and
        rebalance at once: the next heartbeats announce them, and the queues allocated change with the next round."""
        self.expressions = dict(expressions)
        self._handle(SubscriptionChanged(frozenset(expressions)))
        self._handle(ConsumerIdsChanged())

    def assignment(self) -> frozenset[MessageQueue]:
        """(Service context.) The queues this consumer consumes now (started and not being released)."""
        return frozenset(mq for mq, run in self._runs.items() if not run.stopped)

    # ------------------------------------------------------------------ notifications

    def _open_stream(self, broker: str) -> None:
        """Open the broker's notification stream on the I/O pool (refused once the engine shuts down: nothing to
        reopen then)."""
        self._spawn("io", NOTIFICATIONS_UNEXPECTED, self._listen(broker))

    def _listen(self, broker: str) -> Plan[None]:
        """Open this broker's notification stream; what it says, and its end, come back by the transport's
        callbacks, posted to the service context. Any failure to open it is reported and the stream tried again
        after the backoff: a broker whose stream is given up would have its notifications unheard for good."""
        if self._closing.is_set():
            return
        ended = threading.Event()  # this attempt's stream has ended: what comes after it is stale
        try:
            stream: NotificationStream = yield Call(
                "connect",
                (
                    broker,
                    self.config.client_id,
                    partial(self._notified, broker),
                    partial(self._stream_ended, broker, ended),
                ),
            )
        except Exception as error:
            if self._closing.is_set():
                return  # the shutdown closed the transport under it
            if isinstance(error, TransportError):
                self.health.failed("broker connection", error, at=broker)
            else:
                self.health.failed(NOTIFICATIONS_UNEXPECTED, error, logging.ERROR, traceback=True, at=broker)
            self.post(partial(self._reconnect_later, broker))
            return
        self.health.ok(NOTIFICATIONS_UNEXPECTED, at=broker)  # a new stream: whatever broke is past
        self._open_streams[broker] = stream
        if self._closing.is_set():  # shutdown began while connecting
            stream.cancel()
            return
        if not ended.is_set():
            self.health.ok("broker connection", at=broker)
        # A (re)connected broker may have restarted and forgotten us: register before rebalancing.
        self._heartbeat(self._topics, [broker], then=lambda: self.post(ConsumerIdsChanged()))

    def _notified(self, broker: str, group: str) -> None:
        """(On the transport's thread or loop.) A notification: the stream is good, and a round is due if ours."""
        self.post(partial(self._heard, broker, group))

    def _heard(self, broker: str, group: str) -> None:
        self._listen_backoff.pop(broker, None)  # a good connection: the next one is tried after the shortest wait
        if group == self.config.consumer_group:
            self._handle(ConsumerIdsChanged())

    def _stream_ended(self, broker: str, ended: threading.Event, error: TransportError | None) -> None:
        """(On the transport's thread or loop, or in ``connect`` itself.) Report the loss and reconnect after the
        backoff; nothing of it when it is the shutdown that ended the stream."""
        ended.set()
        if self._closing.is_set():
            return
        if error is not None:
            self.health.failed("broker connection", error, at=broker)
        with self._brokers_lock:
            epoch = self._losses[broker] = self._losses.get(broker, 0) + 1
        self.post(BrokerConnectionLost(broker, epoch))
        self.post(partial(self._reconnect_later, broker))

    def _reconnect_later(self, broker: str) -> None:
        """Open the broker's stream again after its backoff, which doubles up to the longest until it hears."""
        low, high = self.settings.reconnect_backoff
        delay = self._listen_backoff.get(broker, low)
        self._listen_backoff[broker] = min(high, delay * 2)
        self._later(delay, partial(self._open_stream, broker))
