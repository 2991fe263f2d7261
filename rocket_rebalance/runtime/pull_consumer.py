"""A consumer the application pulls from: :class:`PullConsumer`, Java's ``DefaultLitePullConsumer``.

The same engine and core as the push consumer's decide which queues are ours (or ``assign()`` names them) and keep
them pulled; instead of a listener, ``poll()`` returns what is buffered, a batch at a time, taken from the queues in
turn. Offsets follow what was polled: with auto-commit (Java's default) a polled message counts as consumed at once
and the offsets are written every ``persist_interval`` (5 s) and when a queue is released; without it, ``commit()``
marks everything polled so far consumed and writes the offsets now. Either way an offset never moves back, and a
queue revoked between two polls returns none of its messages after the revoke: the release stops it first.

Rebalance callbacks (:class:`~rocket_rebalance.runtime.listener.RebalanceListener`) run inside ``poll()`` (and
``close()``), on the application's thread, one at a time, as Kafka's consumers run them; a queue's messages are
not returned before ``on_queues_assigned`` for it ran. The release of a revoked queue waits for the next ``poll()``
to run ``on_queues_revoked`` (up to ``revoke_timeout``): keep polling.

What the asyncio twin (:mod:`rocket_rebalance.runtime.async_consumer`) shares with it is in :class:`PullBase`: the
options, ``assign()``, the reads and moves that are answered in the engine's service context at once (pause,
position) and the parts of a seek, which asks the broker for the queue's offsets first (from the application's
thread or task) and refuses an offset outside them, as Java does. Flow control bounds what is buffered per queue by
the push consumer's thresholds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from types import TracebackType
from typing import Any, TypeVar, Unpack

from rocket_rebalance.model import MessageModel, MessageQueue, check_duration
from rocket_rebalance.runtime.consumer import ConsumerBase, E, wait_blocking
from rocket_rebalance.runtime.engine import Engine
from rocket_rebalance.runtime.offset_store import read_steps
from rocket_rebalance.runtime.options import ConsumerOptions
from rocket_rebalance.runtime.polling import check_seek_offset
from rocket_rebalance.runtime.steps import Steps, call, run
from rocket_rebalance.runtime.transport import AdminTransport, AsyncTransport, Message, Transport
from rocket_rebalance.subscription import SubscriptionExpression

__all__ = ["AssignedQueues", "PullBase", "PullConsumer"]

T = TypeVar("T")


class AssignedQueues:
    """The allocation of a consumer given its queues by ``assign()``: exactly those (the ones its topics' routes
    have), whoever else is in the group. Java's lite pull consumer in assign mode does no rebalance either."""

    name = "ASSIGNED"

    def __init__(self, queues: Iterable[MessageQueue]) -> None:
        self.queues = frozenset(queues)

    def allocate(
        self,
        consumer_group: str,
        current_cid: str | None,
        mq_all: Sequence[MessageQueue] | None,
        cid_all: Sequence[str] | None,
    ) -> list[MessageQueue]:
        return [mq for mq in mq_all or () if mq in self.queues]


def _check_poll(max_messages: int, timeout: float) -> None:
    if isinstance(max_messages, bool) or not isinstance(max_messages, int) or max_messages < 1:
        raise ValueError(f"max_messages must be a whole number of at least 1, got {max_messages!r}")
    check_duration("timeout", timeout, zero=True)


class PullBase(ConsumerBase[E]):
    """What the threaded and the asyncio pull consumers share (see the module docstring). ``auto_commit``: polled
    messages count as consumed at once (True, Java's default), or when ``commit()`` is called."""

    _option_names = ConsumerOptions.__optional_keys__

    def __init__(
        self,
        namesrv_addr: str,
        consumer_group: str,
        *,
        asynchronous: bool,
        auto_commit: bool,
        transport: Transport | AsyncTransport | None,
        **options: Unpack[ConsumerOptions],
    ) -> None:
        if "listener" in options or "consume_orderly" in options:
            raise TypeError(
                f"{type(self).__name__} takes no listener and is not orderly: poll() hands out the messages"
            )
        super().__init__(
            namesrv_addr, consumer_group, asynchronous=asynchronous, push=False, transport=transport, **options
        )
        self.auto_commit = auto_commit
        self._assigned: AssignedQueues | None = None

    def _engine_args(self) -> dict[str, Any]:
        return {**super()._engine_args(), "polling": True, "auto_commit": self.auto_commit}

    def assign(self, queues: Iterable[MessageQueue]) -> None:
        """Consume exactly ``queues``, with no rebalance (Java's ``assign``; exclusive with ``subscribe``, as
        there). Before ``start()`` or after it (the new set replaces the old at once). Every queue is consumed from
        its stored offset (else by ``consume_from_where``) and without the fence: the queues are the application's
        to divide."""
        given = frozenset(queues)
        if not given or not all(isinstance(mq, MessageQueue) for mq in given):
            raise ValueError("assign() takes at least one MessageQueue")
        chosen = frozenset(map(self._wire_queue, given))
        if self.config.message_model is not MessageModel.CLUSTERING:
            raise ValueError("assign() is for CLUSTERING consumers: a BROADCASTING one consumes every queue anyway")
        if self._subscriptions and self._assigned is None:
            raise RuntimeError("subscribe and assign are mutually exclusive: this consumer subscribed already")
        expressions = {topic: SubscriptionExpression() for topic in sorted({mq.topic for mq in chosen})}
        engine = self._engine
        if engine is None:
            self._assigned = AssignedQueues(chosen)
            self._subscriptions = expressions
            self.config = replace(self.config, strategy=self._assigned, fenced_handover=False)
            return
        assigned = self._assigned
        assert assigned is not None

        def change(driver: E) -> None:
            assigned.queues = chosen
            driver.resubscribe(expressions)

        self._service(change)

    def subscribe(self, topic: str, expression: str = "*", expression_type: str = "TAG") -> None:
        if self._assigned is not None:
            raise RuntimeError("subscribe and assign are mutually exclusive: this consumer was assigned queues")
        super().subscribe(topic, expression, expression_type)

    def _running(self) -> E:
        if self._closed:
            raise RuntimeError(f"this {type(self).__name__} is closed")
        if self._engine is None:
            raise RuntimeError("start() the consumer first")
        return self._engine

    def _service(self, work: Callable[[E], T]) -> T:
        """``work(engine)`` in the engine's service context (in place when there already), its answer or its
        exception."""
        engine = self._running()
        answer: list[tuple[bool, Any]] = []

        def go() -> None:
            try:
                answer.append((True, work(engine)))
            except Exception as error:
                answer.append((False, error))

        if not engine.on_service(go) or not answer:
            raise TimeoutError(f"{type(self).__name__}: the consumer's service context did not answer in 5 s")
        ok, value = answer[0]
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    def _wire_queue(self, queue: MessageQueue) -> MessageQueue:
        """``queue`` as the wire names it: under a ``namespace`` each method that takes queues takes their topic
        with it or without, as Java's ``queueWithNamespace`` (wrapping twice is wrapping once)."""
        if self.namespace is None:
            return queue
        return MessageQueue(self._wire_name(queue.topic), queue.broker_name, queue.queue_id)

    def _seek_checked(self, queue: MessageQueue, offset: int | None = None) -> None:
        """A seek's checks that need no broker, made before one is asked: the offset (when one is given) is a whole
        number, not negative, and the queue is ours now (:class:`~rocket_rebalance.runtime.settings.
        QueueNotAssignedError`)."""
        if offset is not None:
            check_seek_offset(offset)
        self._service(lambda engine: engine.polling_part().check_assigned(queue))

    def _seek_within(self, queue: MessageQueue, offset: int, offsets: tuple[int, int]) -> None:
        """Move ``queue`` to ``offset`` if it lies in ``offsets``, the queue's min and max offset as its broker
        just reported them (:class:`~rocket_rebalance.runtime.settings.SeekOffsetError` otherwise)."""
        self._service(lambda engine: engine.polling_part().seek(queue, offset, offsets))

    def position(self, queue: MessageQueue) -> int:
        """The offset of the next message ``poll()`` returns from ``queue``."""
        queue = self._wire_queue(queue)
        return self._service(lambda engine: engine.polling_part().position(queue))

    def pause(self, queues: Iterable[MessageQueue]) -> None:
        """Neither pull nor return messages of ``queues`` until :meth:`resume`; a queue revoked meanwhile forgets
        it (as Kafka's consumers do). The queues stay ours: pausing is not leaving."""
        chosen = list(map(self._wire_queue, queues))
        self._service(lambda engine: engine.polling_part().pause(chosen))

    def resume(self, queues: Iterable[MessageQueue]) -> None:
        """Pull and hand out these queues again after :meth:`pause`, from where they stood."""
        chosen = list(map(self._wire_queue, queues))
        self._service(lambda engine: engine.polling_part().pause(chosen, paused=False))

    def assignment(self) -> frozenset[MessageQueue]:
        """The queues this consumer consumes now."""
        return self._service(lambda engine: engine.polling_part().assignment())

    def _committed_here(self, queue: MessageQueue) -> int | None:
        """What the running engine knows was written for ``queue`` (None before the start: the store is read)."""
        if self._engine is None and not self._closed:
            return None
        return self._service(lambda engine: engine.polling_part().committed(queue))

    @staticmethod
    def _offsets(queue: MessageQueue) -> Steps[tuple[int, int]]:
        """The queue's min and max offset (the oldest message still stored, the next to be written), asked of its
        broker: by a seek, from the application's thread or task, never in the service context."""
        low = yield from call(AdminTransport.min_offset, queue)
        high = yield from call(Transport.max_offset, queue)
        return low, high


class PullConsumer(PullBase[Engine]):
    """A member of a consumer group the application pulls from (see the module docstring, and
    :class:`~rocket_rebalance.runtime.consumer.ConsumerBase` for the options every consumer shares). Not for use
    from several threads at once, except :meth:`close`. ``with PullConsumer(...) as consumer:`` starts and closes
    it; ``for message in consumer:`` polls until it is closed."""

    transport: Transport

    def __init__(
        self,
        namesrv_addr: str,
        consumer_group: str,
        *,
        auto_commit: bool = True,
        transport: Transport | None = None,
        **options: Unpack[ConsumerOptions],
    ) -> None:
        super().__init__(
            namesrv_addr, consumer_group, asynchronous=False, auto_commit=auto_commit, transport=transport, **options
        )
        self._callbacks_lock = threading.Lock()

    def __enter__(self) -> PullConsumer:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def __iter__(self) -> Iterator[Message]:
        while not self._closed:
            yield from self.poll()

    def start(self) -> None:
        self._starting()
        run(self._check_subscriptions(), self.transport)
        engine = Engine(**self._engine_args())
        self._started(engine)
        engine.start()

    def poll(self, max_messages: int = 32, timeout: float = 1.0) -> list[Message]:
        """Up to ``max_messages`` messages, waiting up to ``timeout`` seconds for the first; an empty list when none
        came. Runs the rebalance callbacks that are due first."""
        _check_poll(max_messages, timeout)
        engine = self._running()
        deadline = time.monotonic() + timeout
        while True:
            self._run_callbacks(engine)
            engine.ready.clear()
            taken = self._service(lambda driver: driver.polling_part().take(max_messages))
            if taken:
                return self._named(taken)
            if engine.polling_part().callbacks:
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                return []
            engine.ready.wait(left)

    def wait_for_assignment(self, timeout: float) -> dict[str, frozenset[MessageQueue]]:
        """The push consumer's :meth:`~rocket_rebalance.PushConsumer.wait_for_assignment`;
        the rebalance callbacks due meanwhile run here, on the caller's thread, as in ``poll()``. The queues
        include the retry topic's, as Java's lite pull consumer's assignment does."""
        engine = self._running()

        def pause(seconds: float) -> None:
            self._run_callbacks(engine)
            time.sleep(seconds)

        return wait_blocking(self, timeout, pause)

    def _run_callbacks(self, engine: Engine) -> None:
        with self._callbacks_lock:
            while engine.polling_part().callbacks:
                run(engine.polling_part().callbacks.popleft(), self.transport)

    def commit(self, timeout: float = 5.0) -> bool:
        """Everything polled so far counts as consumed, and the offsets are written now; True once the store has
        them, False when it did not say so within ``timeout`` (they are written again with the next periodic
        write) or a queue was lost first."""
        check_duration("timeout", timeout, zero=True)
        done = threading.Event()
        result = [False]

        def answered(ok: bool) -> None:
            result[0] = ok
            done.set()

        self._service(lambda engine: engine.polling_part().commit(answered))
        return done.wait(timeout) and result[0]

    def committed(self, queue: MessageQueue) -> int | None:
        """The offset stored for ``queue`` (None: none yet): what this consumer knows was written, else read from
        the store."""
        queue = self._wire_queue(queue)
        known = self._committed_here(queue)
        return known if known is not None else run(read_steps(self._offset_store, queue), self.transport)

    def seek(self, queue: MessageQueue, offset: int) -> None:
        """The next ``poll()`` returns ``queue``'s messages from ``offset`` on. A seek backwards re-delivers what
        lies between, but the committed offset does not move back (offsets never go backwards: unlike Java's
        ``seek``, which rewinds the stored offset); a seek forward skips, and commits up to it. As in Java,
        ``offset`` must lie in the queue's offsets as its broker reports them now, from its min offset to its max
        offset (the next to be written: seeking there means "from the end"). Raises
        :class:`~rocket_rebalance.runtime.settings.QueueNotAssignedError` when the queue is not this consumer's
        now, :class:`~rocket_rebalance.runtime.settings.SeekOffsetError` when ``offset`` is outside, and
        :class:`~rocket_rebalance.runtime.transport.TransportError` when the broker could not be asked; then
        nothing moved."""
        queue = self._wire_queue(queue)
        self._seek_checked(queue, offset)
        self._seek_within(queue, offset, run(self._offsets(queue), self.transport))

    def seek_to_beginning(self, queue: MessageQueue) -> None:
        """Seek to the queue's oldest stored message (the committed offset does not move back: see :meth:`seek`)."""
        queue = self._wire_queue(queue)
        self._seek_checked(queue)
        low, high = run(self._offsets(queue), self.transport)
        self._seek_within(queue, low, (low, high))

    def seek_to_end(self, queue: MessageQueue) -> None:
        """Seek past the queue's newest message: only what comes after is returned."""
        queue = self._wire_queue(queue)
        self._seek_checked(queue)
        low, high = run(self._offsets(queue), self.transport)
        self._seek_within(queue, high, (low, high))

    def close(self, timeout: float = 15.0) -> bool:
        """Release every queue (running ``on_queues_revoked``), write the offsets, unregister, close the wire, all
        within ``timeout``; True when clean. A closed consumer stays closed."""
        check_duration("timeout", timeout, zero=True)
        engine = self._engine
        if engine is None or self._closed:
            self._closed = True
            return True
        deadline = time.monotonic() + timeout
        engine.begin_shutdown()
        while not engine.shut_down.is_set() and time.monotonic() < deadline:
            self._run_callbacks(engine)
            engine.ready.clear()
            if not engine.polling_part().callbacks and not engine.shut_down.is_set():
                engine.ready.wait(max(0.0, deadline - time.monotonic()))
        clean = engine.shut_down.is_set()
        self._closed = True
        clean = engine.finish_shutdown(deadline) and clean
        self._ended()
        return clean

    shutdown = close
