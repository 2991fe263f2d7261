"""The rebalance engine's logic, once for both runtimes: the core's actions and events dispatched to the engine's
parts, and the reads of the engine from any thread.

A :class:`Driver` owns one consumer's :class:`~rocket_rebalance.core.RebalanceCore` and is composed of parts, each
owning its state, which reach it only through the service interface (:class:`~.service.Service`):

* :class:`~.brokers.Brokers`: routes, member lists, heartbeats, locks, offsets, unregister, notification streams;
* :class:`~.pulling.Pulling`: each started queue's run, its long polls and their checks, the buffer;
* :class:`~.dispatch.Dispatch` (a push consumer): consume tasks for the listener, send-back, retries;
* :class:`~.polling.Polling` (a pull consumer): what ``poll()``, ``commit()``, ``seek()`` read and write;
* :class:`~.tracing.Tracing` (``enable_trace``): message trace records of what either consumes, to the trace topic;
* :class:`~.callbacks.RebalanceCallbacks` (a rebalance listener, core rule L10);
* :class:`~.reports.Reports`: what the core knows waits (locks refused, releases stuck, a shared client ID).

A mode is which part exists: a push consumer has dispatch, a pull consumer polling, a consumer with only a queue
listener neither (and nothing is pulled); a rebalance listener adds its callbacks.

All of that happens in one *service context*, where the core is read and fed: the service thread of the threaded
:class:`~rocket_rebalance.runtime.engine.Engine`, the event loop of
:class:`~rocket_rebalance.runtime.async_engine.AsyncEngine`. What differs between them is only how work is
scheduled and waited for, which each engine implements (the abstract methods below). Time is
``time.monotonic()`` in both (the asyncio loop's clock is the same one).
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from rocket_rebalance.core import (
    Action,
    ClientIdShared,
    ConsumerIdsChanged,
    DropQueue,
    FetchConsumerList,
    FetchRoutes,
    HandoverWithoutOffset,
    LockQueues,
    LockResult,
    OffsetResetApplied,
    OffsetsPersisted,
    OffsetsPersistFailed,
    OffsetsReset,
    PersistOffsets,
    QueryMaxOffset,
    QueuesChanged,
    QueuesRevoked,
    QueueState,
    ReadOffset,
    RebalanceConfig,
    RebalanceCore,
    ReleaseDeadHolders,
    RevokeQueues,
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
from rocket_rebalance.model import RETRY_GROUP_TOPIC_PREFIX, MessageModel, MessageQueue
from rocket_rebalance.runtime.brokers import Brokers
from rocket_rebalance.runtime.callbacks import News, RebalanceCallbacks
from rocket_rebalance.runtime.dispatch import Dispatch, consume_directly
from rocket_rebalance.runtime.health import ErrorHook, Health
from rocket_rebalance.runtime.history import describe_rounds
from rocket_rebalance.runtime.listener import RebalanceListener
from rocket_rebalance.runtime.members import MemberLanguages
from rocket_rebalance.runtime.metrics import ConsumeMetrics, MetricsView, take_view
from rocket_rebalance.runtime.offset_store import BrokerOffsets, OffsetStore
from rocket_rebalance.runtime.polling import Polling
from rocket_rebalance.runtime.pulling import Pulling
from rocket_rebalance.runtime.reports import Reports
from rocket_rebalance.runtime.service import Pool, PullDone
from rocket_rebalance.runtime.settings import (
    MIB,
    EngineSettings,
    MessageListener,
    QueueListener,
)
from rocket_rebalance.runtime.stats import ConsumeStats, Tally
from rocket_rebalance.runtime.steps import Invoke, Steps
from rocket_rebalance.runtime.tracing import Tracing
from rocket_rebalance.runtime.transport import Message, QueueRunInfo, RunningInfo
from rocket_rebalance.subscription import SubscriptionExpression

__all__ = ["Driver", "ServiceQuery", "Wire"]

log = logging.getLogger("rocket_rebalance.runtime")


class ServiceQuery:
    """A read of the core posted to the service context (describe, owned, running info): answered even when it
    arrives as the context ends, where other posted work is dropped."""

    def __init__(self, work: Callable[[], None]) -> None:
        self._work = work

    def __call__(self) -> None:
        self._work()


class Wire(Protocol):
    """What the driver reads of a transport directly (everything else goes through steps' calls): both
    :class:`~rocket_rebalance.runtime.transport.Transport` and its asyncio twin have it."""

    address: str
    long_poll_ms: int


class Driver(ABC):
    """Drives one consumer's core against a transport and an offset store (see the module docstring).

    ``listener``: a push consumer (the listener gets every message). ``polling``: a pull consumer (messages wait
    in their queue's buffer for ``poll()``). Neither: only ``queue_listener`` hears of the queues and nothing is
    pulled. ``rebalance_listener`` hears every queue assigned, revoked and lost (core rule L10)."""

    calls_on_loop = False
    """Whether an ``async def`` listener's calls run on the service context's own event loop (the asyncio engine's),
    where their consume timeout is kept by one timer of the service (:class:`Dispatch`); the threaded engine runs
    each on a loop of its own."""

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
        self.expressions: Mapping[str, SubscriptionExpression] = dict(expressions or {})
        self.transport = transport
        self.queue_listener = queue_listener
        self.settings = settings or EngineSettings()
        self.health = Health(on_error)
        self.closing = threading.Event()  # a flag under either runtime: read from pool threads too
        self._wake_at: float | None = None
        self._service_lock = threading.Lock()
        self._service_ended = False  # the service context took its last item: the core is read in place from now
        self.tally = Tally()
        self.stats = ConsumeStats()  # Java's consume statistics, for running info: one call per batch
        self.metrics = metrics  # None unless metrics are on: then one call per pull, consume task and offset write
        self._started_ms = int(time.time() * 1000)
        languages = MemberLanguages(config.strategy, config.consumer_group, self.health)
        self.brokers = Brokers(self, offset_store, languages, metrics)
        self.reports = Reports(self.core, self.config, self.settings, self.health)
        # The modes: which parts exist.
        self.pulling: Pulling | None = None
        self.dispatch: Dispatch | None = None
        self.polling: Polling | None = None
        self.tracing: Tracing | None = None
        if listener is not None or polling:
            self.pulling = Pulling(self, transport.long_poll_ms, self.stats, metrics)
            self.tracing = Tracing(self) if self.settings.enable_trace else None
            if polling:
                self.polling = Polling(self, self.pulling, auto_commit, self.tally, self.tracing)
            else:
                assert listener is not None
                self.dispatch = Dispatch(
                    self, self.pulling, listener, self.stats, metrics, self.tally, self.tracing, self.calls_on_loop
                )
        self.callbacks: RebalanceCallbacks | None = None
        if rebalance_listener is not None:
            run = self.polling.run_callback if self.polling is not None else self._run_callback
            self.callbacks = RebalanceCallbacks(self, rebalance_listener, run, self._announced, metrics)
        self._init_runtime()

    @abstractmethod
    def _init_runtime(self) -> None:
        """The runtime's own state (inbox, pools, loop handles), built at the end of the constructor."""

    # ------------------------------------------------------------------ what each runtime provides

    @abstractmethod
    def post(self, item: Event | Callable[[], None]) -> None:
        """Hand an event (or a callback) to the service context, from anywhere; it runs there later, in order."""

    @abstractmethod
    def later(self, delay: float, callback: Callable[[], None]) -> None:
        """(Service context.) Run ``callback`` there after ``delay`` seconds."""

    @abstractmethod
    def _set_wake(self, at: float | None) -> None:
        """(Service context.) Feed the core a ``Tick`` at ``at`` (``time.monotonic()``), replacing the last."""

    @abstractmethod
    def spawn(self, pool: Pool, what: str, steps: Steps[Any], then: Callable[[Any], None] | None = None) -> bool:
        """Run ``steps`` in the background on ``pool``, then ``then(outcome)`` there; an exception they let through
        is reported as ``unexpected(what, error)`` and ``then`` is not called. False (nothing run) once the engine
        is shut down."""

    @abstractmethod
    def start_pull(self, mq: MessageQueue, offset: int, wait_ms: int, done: PullDone) -> None:
        """(Service context.) Start one long-poll pull; its answer (or ``TransportError``) goes to ``done`` in the
        service context."""

    @abstractmethod
    def messages_ready(self) -> None:
        """(Service context.) A pull consumer's ``poll()`` may find something now (messages, or a callback to
        run): wake a waiting one."""

    @abstractmethod
    def _in_service(self) -> bool:
        """Is the caller in the service context (the service thread, the loop's thread)?"""

    @abstractmethod
    def _wait_for(self, done: threading.Event, timeout: float) -> bool:
        """Block the calling thread (not in the service context) until ``done`` is set or ``timeout`` passed."""

    @abstractmethod
    def _shutdown_complete(self) -> None:
        """(Service context.) The core released every queue: the runtime may unregister and close."""

    # ------------------------------------------------------------------ the service context

    def _serve(self, item: Event | Callable[[], None]) -> None:
        """(Service context.) One posted item: an event for the core, or a callback. Nothing may stop the service
        context: an exception no code expected is reported (``unexpected``), never raised."""
        try:
            if isinstance(item, Event):
                now = time.monotonic()
                offsets = item if isinstance(item, OffsetsPersisted | OffsetsPersistFailed) else None
                if offsets is not None and self.polling is not None:
                    self.polling.persisted(offsets)
                self._apply(self.core.handle(item, now))
                if offsets is not None and self.polling is not None:
                    self.polling.settle()
                if offsets is not None or isinstance(item, Tick | LockResult):
                    self.reports.waits(now)
                if isinstance(item, Tick):
                    # The core announces WakeAt only when its earliest deadline changes; after a tick that left
                    # it unchanged (a round deferred by the minimum interval, say) ask for it, or no tick follows.
                    self._set_wake(self.core.next_wakeup)
            else:
                item()
        except Exception as error:
            self.unexpected("rebalance service", error)

    def handle(self, event: Event) -> None:
        """Feed an event from the service context itself (e.g. while dispatching)."""
        self._apply(self.core.handle(event, time.monotonic()))

    def _apply(self, actions: list[Action]) -> None:
        if not actions:  # the hot path: the core answers a message event with nothing
            return
        news = News()
        for action in actions:
            try:
                self._carry_out(action, news)
            except Exception as error:  # an action must never kill the service context
                self.unexpected(f"carrying out {type(action).__name__}", error)
        if self.callbacks is not None:
            self.callbacks.tell(news)

    def unexpected(self, kind: str, error: Exception) -> None:
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

    # ------------------------------------------------------------------ the core's actions

    def _carry_out(self, action: Action, news: News) -> None:
        brokers = self.brokers
        match action:
            case WakeAt(time=at):
                self._set_wake(at)
            case FetchRoutes(topics=topics):
                brokers.fetch_routes(topics)
            case FetchConsumerList(topic=topic, broker_name=broker):
                brokers.fetch_consumer_list(topic, broker)
            case SendHeartbeat(topics=topics):
                brokers.send_heartbeat(topics)
            case LockQueues(broker_name=broker, queues=queues, epoch=epoch):
                brokers.lock(broker, queues, epoch)
            case ReleaseDeadHolders(
                broker_name=broker, client_ids=holders, queues=queues, request_id=request, deadline=deadline
            ):
                brokers.release_dead_holders(broker, holders, queues, request, deadline)
            case UnlockQueues(broker_name=broker, queues=queues):
                brokers.unlock(broker, queues)
            case ReadOffset(mq=mq, request_id=request):
                brokers.read_offset(mq, request)
            case QueryMaxOffset(mq=mq, request_id=request):
                brokers.query_max_offset(mq, request)
            case SearchOffset(mq=mq, request_id=request, timestamp_ms=at):
                brokers.search_offset(mq, request, at)
            case PersistOffsets(offsets=offsets, epochs=epochs):
                brokers.persist(offsets, epochs)
            case StartQueue(mq=mq, offset=offset):
                self._start(mq, offset, news)
            case StopQueue(mq=mq):
                if self.pulling is not None:
                    self.pulling.stop(mq)
                if self.polling is not None:
                    self.polling.stopped(mq)
            case DropQueue(mq=mq, lost=lost):
                if self.polling is not None:
                    self.polling.dropped(mq, lost)
                if self.pulling is not None:
                    self.pulling.runs.pop(mq, None)
                self.stats.queue_dropped(mq)
                if lost and self.callbacks is not None and self.callbacks.was_told(mq):
                    news.lost.add(mq)
            case RevokeQueues(queues=queues):
                if self.callbacks is None:
                    self.post(QueuesRevoked(frozenset(queues)))
                else:
                    news.revoked.update(queues)
            case QueuesChanged(topic=topic, mq_all=mq_all, mq_divided=mq_divided):
                if self.queue_listener is not None:
                    self._queues_changed(topic, mq_all, mq_divided)
            case ClientIdShared(topic=topic, client_id=client_id, consumers=consumers, withheld=withheld):
                self.reports.client_id_shared(topic, client_id, consumers, withheld)
            case HandoverWithoutOffset(mq=mq, offset=offset, saved=saved, attempts=attempts):
                self.reports.handover_without_offset(mq, offset, saved, attempts)
            case OffsetResetApplied(mq=mq, previous=previous, offset=offset):
                log.warning("%s: offset reset by an operator from %s to %d; consuming from there", mq, previous, offset)
            case ShutdownComplete():
                self._shutdown_complete()
            case _:
                raise TypeError(f"unknown action {action!r}")

    def _start(self, mq: MessageQueue, offset: int, news: News) -> None:
        """StartQueue: a run for the queue, pulled at once (push, poll), unless the rebalance listener must hear of
        it first: then a push consumer pulls once ``on_queues_assigned`` returned, and a pull consumer's poll
        hands out none of its messages before that."""
        told_first = self.callbacks is not None
        self.stats.queue_started(mq)
        if self.callbacks is not None:
            self.callbacks.started(mq, news)
        if self.pulling is None:
            return
        self.pulling.start(mq, offset, announced=not told_first)
        if self.polling is not None:
            self.polling.started(mq)
        if self.polling is not None or not told_first:
            self.pulling.pull(mq)

    def _announced(self, queues: frozenset[MessageQueue]) -> None:
        """(Service context.) ``on_queues_assigned`` returned: the queues' messages may be handed out now."""
        if self.pulling is not None:
            for mq in sorted(queues):
                run = self.pulling.runs.get(mq)
                if run is not None and not run.announced:
                    run.announced = True
                    if self.dispatch is not None:
                        self.pulling.pull(mq)
        self.messages_ready()

    def _run_callback(self, steps: Steps[None], what: str) -> None:
        """A rebalance callback on the callback pool: one at a time, in order."""
        self.spawn("callback", what, steps)

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
            self.spawn("callback", f"queue listener for {topic}", _awaited(result))

    def resubscribe(self, expressions: Mapping[str, SubscriptionExpression]) -> None:
        """(Service context.) Consume these topics from now on (a pull consumer's ``assign()`` after its start), and
        rebalance at once: the next heartbeats announce them, and the queues allocated change with the next round."""
        self.expressions = dict(expressions)
        self.handle(SubscriptionChanged(frozenset(expressions)))
        self.handle(ConsumerIdsChanged())

    def polling_part(self) -> Polling:
        """The pull consumer's part (``poll()``, ``commit()``, ``seek()`` ...); a push consumer has none."""
        if self.polling is None:
            raise TypeError("this engine drives a push consumer: it has no polling part")
        return self.polling

    # ------------------------------------------------------------------ reads, from any thread

    @property
    def consumed(self) -> int:
        """Messages consumed so far (by the listener, or returned by ``poll()``)."""
        return self.tally.total

    def describe(self) -> dict[str, object]:
        """A snapshot of the engine for operators (``kill -USR1`` on ``consume``): rounds, wake-up, queues, the last
        rebalances (``rebalances``: trigger, member lists, queues gained and lost, problems, each step's time), with
        ``enable_trace`` the trace lines written, dropped, lost and waiting (``trace``); after the shutdown, its final
        state (``shut_down`` True), at once."""
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
                filtered=0 if self.pulling is None else self.pulling.filtered,
                **({} if self.tracing is None else {"trace": self.tracing.describe()}),
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
            runs = {} if self.pulling is None else self.pulling.runs
            cached = {mq: run.cached_bytes for mq, run in runs.items()}
            trace = None if self.tracing is None else self.tracing.describe()
            views.append(take_view(self.core, cached, time.monotonic(), trace))

        return views[0] if self.on_service(snapshot) and views else None

    def settled(self) -> bool:
        """Has a round read the member list of every subscribed topic and applied its allocation (every queue it
        gave us started, every queue it took released)? Then the consumer holds its queues, or knows it holds none
        (more members than queues). A BROADCASTING consumer reads no member list: each topic's queues (its whole
        route) allocated is its answer. The retry topic does not count: its route exists only once a broker saw
        our first heartbeat, and its queues are the user's topics' retries. False also when the service context
        does not answer within 5 s."""
        answer: list[bool] = []
        broadcasting = self.config.message_model is MessageModel.BROADCASTING

        def snapshot() -> None:
            topics = [topic for topic in self.core.topics if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX)]
            applied = next((r for r in reversed(self.core.history.rounds) if r.applied_at is not None), None)
            if applied is None:
                answer.append(False)
            elif broadcasting:
                answer.append(all(self.core.allocated(topic) for topic in topics))
            else:
                answer.append(all(applied.members.get(topic) is not None for topic in topics))

        return self.on_service(snapshot) and answer[0]

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

    def reset_offsets(self, consumer_group: str, offsets: Mapping[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET (BrokerRequests), on the transport's reader: posted to the core (rule O5),
        which applies it to the queues we hold."""
        if consumer_group == self.config.consumer_group and offsets:
            self.post(OffsetsReset(dict(offsets)))

    def consumer_status(self, consumer_group: str, topic: str) -> dict[MessageQueue, int]:
        """GET_CONSUMER_STATUS_FROM_CLIENT (BrokerRequests, ``mqadmin getConsumerStatus``): the commit offset of
        each queue of ``topic`` we hold, as Java answers with its offset store's table."""
        offsets: dict[MessageQueue, int] = {}
        if consumer_group != self.config.consumer_group:
            return offsets

        def snapshot() -> None:
            for mq in self.core.held_queues():
                pq = self.core.process_queue(mq)
                if mq.topic == topic and pq is not None:
                    offsets[mq] = pq.commit_offset

        self.on_service(snapshot)
        return offsets

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
        topics = self.brokers.topics
        return RunningInfo(
            consume_type="CONSUME_PASSIVELY" if config.push_consumer else "CONSUME_ACTIVELY",
            message_model=config.message_model.value,
            consume_from_where=config.consume_from_where.value,
            consume_orderly=config.consume_orderly,
            start_timestamp_ms=self._started_ms,
            topics=topics,
            queues=rows,
            strategy=f"{type(config.strategy).__module__}.{type(config.strategy).__qualname__}",
            expressions=dict(self.expressions),
            status={topic: self.stats.status(topic) for topic in topics},
            settings={
                "consumerGroup": config.consumer_group,
                "consumeThreadMin": str(settings.consume_threads),
                "consumeThreadMax": str(settings.consume_threads),
                "pullBatchSize": str(settings.pull_batch_size),
                "consumeMessageBatchMaxSize": str(settings.consume_message_batch_max_size),
                "pullThresholdForQueue": str(settings.pull_threshold_for_queue),
                "pullThresholdSizeForQueue": str(settings.pull_threshold_size_for_queue),
                "consumeConcurrentlyMaxSpan": str(settings.consume_concurrently_max_span),
                "maxReconsumeTimes": str(-1 if settings.max_reconsume_times is None else settings.max_reconsume_times),
                "consumeTimeout": str(round(settings.consume_timeout / 60)),  # Java's is in minutes
                "suspendCurrentQueueTimeMillis": str(round(settings.suspend_current_queue_time * 1000)),
                "heartbeatBrokerInterval": str(round(config.heartbeat_interval * 1000)),
                "persistConsumerOffsetInterval": str(round(config.persist_interval * 1000)),
                "pollNameServerInterval": str(round(config.route_refresh_interval * 1000)),
            },
            consume_threads=settings.consume_threads if self.dispatch is not None else -1,
        )

    def _queue_row(self, mq: MessageQueue, epoch_ms: Callable[[float], int], now: float) -> QueueRunInfo:
        """(Service context.) One queue's ``ProcessQueueInfo``. Cached: pulled and not yet consumed, handed out or
        not (Java's ``msgTreeMap``), and the size of their bodies. Handed out and unfinished, when orderly: Java's
        ``consumingMsgOrderlyTreeMap``."""
        pq = self.core.process_queue(mq)
        run = None if self.pulling is None else self.pulling.runs.get(mq)
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

    def consume_directly_steps(self, message: Message) -> Steps[tuple[bool, str]]:
        """CONSUME_MESSAGE_DIRECTLY (``mqadmin consumeMessage``), as Java does it (BrokerRequests)."""
        return consume_directly(None if self.dispatch is None else self.dispatch.listener, message)


def _awaited(awaitable: Any) -> Steps[None]:
    yield Invoke(lambda: awaitable)
