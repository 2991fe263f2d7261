"""The engine's part that hands messages to a push consumer's listener: consume tasks, their batches, the
listener's answers, send-back to the retry topic, dead letters, retries and the consume timeout.

Buffered messages go to the consume pool several batches to a task (about :data:`CHUNK_WORK` of listener time
each, by the listener's recent pace), while the core says the queue may give them out (locks, the fence, the
drain); each task stops before a batch once the queue is being released or its lock has run out. What a task did
comes back to the service context as one :class:`_Chunk`: consumed (or sent back), to retry, or never handed to the
listener. It exists only in a push consumer; a pull consumer has :mod:`.polling` instead.

**The listener's answer**, with Java's meanings (the docs' listener table): None or ``ConsumeResult.SUCCESS``, the batch
is consumed; ``RECONSUME_LATER`` (or ``SUSPEND_CURRENT_QUEUE_A_MOMENT``), or an exception, it is not;
:class:`~rocket_rebalance.runtime.listener.Reconsume` says how many of it were consumed (Java's ``ackIndex``), the
delay level of the rest and an orderly queue's suspend time. A concurrent consumer sends what was not consumed back
to the broker (the retry topic; the dead-letter queue at delay level -1 or past ``max_reconsume_times``) and moves
on; what cannot be sent back is given to the listener again after ``retry_delay`` (Java's 5 s). An orderly one
retries it in place after the suspend time, counting each attempt in the message's ``reconsume_times`` as Java
does, and past ``max_reconsume_times`` (when set) sends it to the dead-letter queue and moves on (Java's
``checkReconsumeTimes``). Anything else returned is a mistake, said once and taken as ``RECONSUME_LATER``: at least
once, never lost to a mistaken ``return False``.

**The consume timeout** (``consume_timeout``, Java's ``consumeTimeout``, 15 min): each listener call is registered
in :attr:`Dispatch._calls` while it runs, and a check every ``consume_timeout / 10`` (at most 1 s) finds the calls
that started longer ago, so a message waits at most a little more than the timeout (Java's scan runs once per
timeout, so 15 to 30 min, and may clean messages whose call had not started: apache/rocketmq #7337, #9019). Who
takes a call out of the registry decides its batch, so the listener's late answer and the timeout cannot both act:
the task when the call returns, or the check, which sends the batch back (delay level 3, as Java's
``cleanExpiredMsg``), hands the chunk's unstarted messages back for other threads, closes the task's account and
lets the queue's offset move on. A thread cannot be stopped, so health names the queue, offsets and duration until
the call returns; an ``async def`` listener's call is cancelled at the timeout instead. An orderly queue must keep
its order, so there the check only reports; an async orderly call is cancelled and retried in place.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import reprlib
import time
from collections.abc import Awaitable, Generator
from dataclasses import dataclass, field, replace
from functools import partial
from types import CoroutineType
from typing import Any, NamedTuple

from rocket_rebalance.core import MessagesConsumed, MessagesDispatched, MessagesReturned
from rocket_rebalance.model import MessageQueue, dead_letter_topic
from rocket_rebalance.runtime.listener import ConsumeResult, Reconsume
from rocket_rebalance.runtime.metrics import ConsumeMetrics
from rocket_rebalance.runtime.pulling import Pulling, QueueRun
from rocket_rebalance.runtime.service import Service
from rocket_rebalance.runtime.settings import (
    ConsumeCancelledError,
    ConsumeTimeoutError,
    ListenerError,
    ListenerResultError,
    MessageListener,
    UnreadableBodyError,
)
from rocket_rebalance.runtime.stats import ConsumeStats, Tally
from rocket_rebalance.runtime.steps import Invoke, Steps, call
from rocket_rebalance.runtime.tracing import Traced, Tracing
from rocket_rebalance.runtime.transport import Message, Transport, TransportError, body_bytes, offsets_of
from rocket_rebalance.trace import ConsumeReturnType

__all__ = ["CHUNK_WORK", "CONSUME_TIMEOUT_KIND", "MAX_CHUNK_MESSAGES", "Dispatch", "consume_directly"]

log = logging.getLogger("rocket_rebalance.runtime")

CHUNK_WORK = 0.002
"""Seconds of listener time one consume task aims to carry: a hand-off (pool, service thread, core events) costs
tens of microseconds, so a task of a quick listener's messages makes it negligible, while a slow listener's
batches still go one per task, over all the pool's threads."""
MAX_CHUNK_MESSAGES = 32  # per consume task (or one batch, if larger): what a batch that blocks can hold back
CONSUME_TIMEOUT_KIND = "consume timeout"
SEND_BACK_KIND = "send back to the retry topic"
EXPIRED_DELAY_LEVEL = 3  # a timed-out message comes back after level 3's delay (10 s), as Java's cleanExpiredMsg
DEAD_LETTER_NOW = -1  # the delay level that sends a message straight to the dead-letter queue
UNLIMITED_RECONSUME_TIMES = 2**31 - 1  # Java's Integer.MAX_VALUE, an orderly consumer's default limit


class _Answer(NamedTuple):
    """A listener's answer, read: the first ``consumed`` messages of its batch are done with; the rest go the way
    of ``delay_level``, and (orderly) wait ``suspend`` seconds (None: the consumer's default). A named tuple, as
    :class:`_Outcome`: one of each per listener call, and a frozen dataclass takes three times as long to make."""

    consumed: int
    delay_level: int = 0
    suspend: float | None = None


def _answer(value: object, size: int) -> _Answer | None:
    """What a listener's return value means for its batch of ``size``; None when it is not an answer."""
    if value is None or value is ConsumeResult.SUCCESS:
        return _Answer(size)
    if isinstance(value, ConsumeResult):
        return _Answer(0)
    if isinstance(value, Reconsume):
        return _Answer(min(value.consumed, size), value.delay_level, value.suspend)
    return None


@dataclass
class _Chunk:
    """What a consume task did with the messages it was handed: consumed (or sent back to the retry topic, or to
    the dead-letter queue), batches to retry later (concurrent, when sending back failed), and messages it never
    gave the listener; ``suspend``: (orderly) the returned messages wait that long, after a failed batch."""

    consumed: list[Message] = field(default_factory=list)
    retry: list[list[Message]] = field(default_factory=list)
    returned: list[Message] = field(default_factory=list)
    suspend: float | None = None


class _Outcome(NamedTuple):
    """What became of one batch: done with (consumed, sent back or dead-lettered), to be given to the listener
    again, how many the listener itself consumed (for the stats) and (orderly) how long to wait."""

    done: list[Message]
    again: list[Message]
    consumed: int
    suspend: float


@dataclass(eq=False, slots=True)
class _Call:
    """One listener call, registered while it runs (see the module docstring: the consume timeout). ``chunk``: its
    task's messages, of which those from ``after`` on come after its batch; ``result``: what the task did before it."""

    mq: MessageQueue
    run: QueueRun
    batch: list[Message]
    chunk: list[Message]
    after: int
    result: _Chunk
    started: float
    over: bool = False  # the listener returned (or raised)
    reported: bool = False  # (orderly) its overrun was reported
    task: asyncio.Task[Any] | None = None  # the consume task running it, when that is on the service's loop

    @property
    def rest(self) -> list[Message]:
        """The messages of its task's chunk after its batch (sliced only when the call is given up)."""
        return self.chunk[self.after :]


class Dispatch:
    """A push consumer's listener fed from the queues' buffers (service context, except the consume tasks)."""

    def __init__(
        self,
        service: Service,
        pulling: Pulling,
        listener: MessageListener,
        stats: ConsumeStats,
        metrics: ConsumeMetrics | None,
        tally: Tally,
        tracing: Tracing | None = None,
        calls_on_loop: bool = False,
    ) -> None:
        self._service = service
        self._calls_on_loop = calls_on_loop
        self._tracing = tracing
        self._runs = pulling.runs
        self.listener = listener
        self._stats = stats
        self._metrics = metrics
        self._tally = tally
        self._pace = CHUNK_WORK  # the listener's recent seconds per message; a slow one until it shows otherwise
        self._send_back_works = True  # until the transport says its server keeps no retry topics
        self._mistaken = False  # the listener returned something that is not an answer (said once)
        self._kinds: dict[str, str] = {}  # see _listener_kind
        self._calls: dict[_Call, bool] = {}
        """Listener calls running now: added and taken out by consume tasks, taken out by the timeout check (one
        ``dict.pop`` is atomic, which is what decides who acts on a batch)."""
        self._overdue: list[_Call] = []  # calls past the timeout whose listener has not returned yet
        self._watching = False
        self._scopes: set[asyncio.Timeout] = set()  # the running ``async def`` calls' timeouts (see cut_short)
        self._deadlines: dict[asyncio.Task[Any], float] = {}  # (calls on the loop) each running call's, by its task
        self._expired: set[asyncio.Task[Any]] = set()  # tasks cancelled at their call's deadline
        self._watch_at: float | None = None  # when the deadline watch runs next (None: not set)
        self._cut = False
        pulling.hand_out = self.dispatch

    def dispatch(self, mq: MessageQueue) -> None:
        """Hand buffered messages to the consume pool, several batches to a task, while the core says the queue
        may give them out; none once :meth:`cut_short`."""
        run = self._runs.get(mq)
        if run is None or self._cut:
            return
        service = self._service
        core = service.core
        if not self._watching:
            self._watching = True
            service.later(self._check_interval(), self._check_calls)
        limit = 1 if service.config.consume_orderly else service.settings.consume_threads * 2
        while run.buffered and run.busy < limit and not run.stopped:
            now = time.monotonic()
            if run.paused_until > now or not core.is_dispatchable(mq, now):
                if not run.dispatch_waiting:
                    run.dispatch_waiting = True
                    delay = max(run.paused_until - now, 0.0) or service.config.lock_retry_interval
                    service.later(delay, lambda: self._dispatch_again(mq, run))
                return
            buffered = run.buffered
            size = self._chunk_size()
            if size >= len(buffered):  # all of it, as after most pulls: no Python step per message
                chunk = list(buffered)
                buffered.clear()
            else:
                chunk = [buffered.popleft() for _ in range(size)]
            service.handle(MessagesDispatched(mq, offsets_of(chunk)))
            run.busy += 1
            arrived = None if self._metrics is None else self._arrival(run, chunk[0].queue_offset)
            self._consume(mq, run, chunk, core.lock_deadline(mq), arrived)

    def _consume(
        self, mq: MessageQueue, run: QueueRun, chunk: list[Message], lock_deadline: float, arrived: float | None
    ) -> None:
        """Run a consume task on the consume pool; one the pool refuses (the engine is shut down) comes back
        undelivered at once."""
        steps = self._consume_chunk(mq, run, chunk, lock_deadline, arrived)
        if not self._service.spawn("consume", "consume task", steps):
            self._chunk_done(mq, run, _Chunk(returned=chunk))

    @staticmethod
    def _arrival(run: QueueRun, offset: int) -> float | None:
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
        batch = self._service.settings.consume_message_batch_max_size
        wanted = min(MAX_CHUNK_MESSAGES, int(CHUNK_WORK / max(self._pace, 1e-9)))
        return max(batch, wanted - wanted % batch)

    def _dispatch_again(self, mq: MessageQueue, run: QueueRun) -> None:
        run.dispatch_waiting = False
        self.dispatch(mq)

    def _consume_chunk(
        self, mq: MessageQueue, run: QueueRun, chunk: list[Message], lock_deadline: float, arrived: float | None
    ) -> Steps[None]:
        """(On the consume pool.) Give ``chunk`` to the listener batch by batch, in order; stop before a batch
        (the first too: a task may wait in the pool's queue) once the queue is being released or its lock has run
        out, so nothing is handed out that the core would not hand out now, or (orderly) after a failed batch;
        count and report it all at once. A task whose call the timeout check took reports nothing: the check
        closed its account."""
        service = self._service
        size = service.settings.consume_message_batch_max_size
        orderly = service.config.consume_orderly
        closing = service.closing
        result = _Chunk()
        calls = ok = failed = 0
        taken = works = False  # works: the last call's listener consumed its whole batch
        began = time.monotonic()
        task = asyncio.current_task() if self._calls_on_loop else None  # once a task, not once a call
        damaged = any(m.body_error for m in chunk)  # once a task: bodies that cannot be read are rare
        for start in range(0, len(chunk), size):
            if run.stopped or closing.is_set() or time.monotonic() >= lock_deadline:
                result.returned = chunk[start:]
                break
            batch = chunk[start : start + size]
            calls += 1
            running = _Call(mq, run, batch, chunk, start + size, result, began, task=task)
            outcome = self._consume_batch(running, damaged)
            if outcome is not None and not isinstance(outcome, _Outcome):
                outcome = yield from outcome
            if outcome is None:
                taken = True
                break
            works = outcome.consumed == len(batch)
            ok += outcome.consumed
            failed += len(batch) - outcome.consumed
            result.consumed += outcome.done
            if not outcome.again:
                continue
            if orderly:  # tried again first, after the suspend time, before anything behind it (Java suspends)
                again = [replace(m, reconsume_times=m.reconsume_times + 1) for m in outcome.again]
                result.returned, result.suspend = again + chunk[start + size :], outcome.suspend
                break
            result.retry.append(outcome.again)
        if calls:  # else the task gave everything back before its first listener call
            took = time.monotonic() - began
            self._stats.consumed(mq, ok, failed, took * 1000, calls)
            if self._metrics is not None:
                waited = None if arrived is None else (began - arrived) * 1000
                self._metrics.consumed(mq.topic, waited, took * 1000 / calls, ok, failed, calls)
            self._tally.add(ok)
            self._pace = (self._pace + took / max(ok + failed, 1)) / 2  # a race only blurs the estimate
        if works:  # health hears that the listener works once a task, after its last call, not once a call
            service.health.ok(self._listener_kind(mq))
        if not taken:
            service.post(partial(self._chunk_done, mq, run, result))

    def _consume_batch(self, running: _Call, damaged: bool) -> _Outcome | Steps[_Outcome | None] | None:
        """One listener call and what becomes of its batch by the answer (see the module docstring): the outcome
        at once when the listener answered at once that the batch is consumed and nothing is traced (a quick
        listener's usual case, with no steps to run: a generator per call was a fifth of its cost, issue 42; an
        ``async def`` listener's call on the service's loop counts as answering at once when it never waits, see
        :func:`_first_step`); else the steps that decide it (:meth:`_answered`: awaiting an ``async def``
        listener's call, sending back). None when the timeout check took the call while it ran. ``damaged``: its
        chunk holds a body that cannot be read."""
        mq, batch = running.mq, running.batch
        unreadable = [m for m in batch if m.body_error] if damaged else []
        tracing = None if unreadable else self._tracing  # outside the try: the trace is never the listener's failure
        traced = None if tracing is None else tracing.before(batch)
        running.started = time.monotonic()
        self._calls[running] = True
        try:
            if unreadable:  # never handed to the listener; failed as a refused batch is (retry topic, then DLQ)
                raise UnreadableBodyError(unreadable[0].body_error)
            value = self._listen(batch, running)
        except Exception as raised:
            kind = f"message bodies on {mq.topic}" if unreadable else self._listener_kind(mq)
            return self._answered(running, kind, traced, None, raised)
        if traced is not None or not (value is None or value is ConsumeResult.SUCCESS):
            return self._answered(running, self._listener_kind(mq), traced, value)
        running.over = True
        if not self._calls.pop(running, False):
            return None
        return _Outcome(batch, [], len(batch), 0.0)

    def _listener_kind(self, mq: MessageQueue) -> str:
        """Health's kind of the listener's failures on ``mq``'s topic (one a topic: a listener that always raises
        logs rarely, not once a batch)."""
        return self._kinds.get(mq.topic) or self._kinds.setdefault(mq.topic, f"listener on {mq.topic}")

    def _answered(
        self, running: _Call, kind: str, traced: Traced | None, value: object, raised: Exception | None = None
    ) -> Steps[_Outcome | None]:
        """What becomes of a batch by the listener's answer ``value`` (a coroutine of an ``async def`` listener,
        awaited first) or the exception it ``raised``, its trace ``traced`` written: :meth:`_consume_batch`'s
        steps."""
        mq, batch = running.mq, running.batch
        service = self._service
        error: Exception | None = None
        ended: ConsumeReturnType | None = None  # (traced) how the call ended, when not by an answer
        try:
            if raised is not None:
                raise raised
            if type(value) is _Pending:  # an ``async def`` listener's call: the runtime awaits the rest
                value = yield Invoke(_awaited, (value.awaitable,))
            answer = _answer(value, len(batch))
            if answer is None:
                error, answer = self._mistake(value), _Answer(0)
                ended = ConsumeReturnType.RETURNNULL  # Java's name for a call that gave no answer
        except Exception as raised:
            error, answer = raised, _Answer(0)
            timed_out = isinstance(raised, ConsumeTimeoutError)
            ended = ConsumeReturnType.TIME_OUT if timed_out else ConsumeReturnType.EXCEPTION
        running.over = True
        if traced is not None and self._tracing is not None:
            if ended is None:
                ended = ConsumeReturnType.SUCCESS if answer.consumed == len(batch) else ConsumeReturnType.FAILED
            self._tracing.after(traced, len(batch), answer.consumed == len(batch), ended)
        if not self._calls.pop(running, False):
            return None
        if answer.consumed == len(batch):
            return _Outcome(batch, [], answer.consumed, 0.0)
        done, again = batch[: answer.consumed], batch[answer.consumed :]
        suspend = service.settings.suspend_current_queue_time if answer.suspend is None else answer.suspend
        delay_level = EXPIRED_DELAY_LEVEL if isinstance(error, ConsumeTimeoutError) else answer.delay_level
        if service.config.consume_orderly:
            dead, again = yield from self._dead_letters(again, delay_level)
            retrying = f"retrying in place in {suspend:g} s"
        else:
            limit = service.settings.concurrent_max_reconsume_times
            unsent = yield from self._send_back(again, delay_level, limit)
            dead, again = again[: len(again) - len(unsent)], unsent
            retrying = f"retrying here in {service.settings.retry_delay:g} s"
        if self._cut:
            retrying = "left to the queue's next owner"
        if error is not None:
            then = "; ".join(filter(None, [self._where_sent(dead, delay_level), retrying if again else ""]))
            traceback = not isinstance(
                error, ListenerResultError | UnreadableBodyError | ConsumeTimeoutError | ConsumeCancelledError
            )
            service.health.failed(kind, ListenerError(mq, batch, then, error), traceback=traceback)
        return _Outcome(done + dead, again, answer.consumed, suspend)

    def _listen(self, batch: list[Message], running: _Call) -> Any:
        """The listener's call: its answer, or a :class:`_Pending` for what is left of an ``async def`` listener's
        call, bounded by ``consume_timeout`` (cancelled there). In a task on the service's loop the call runs up to
        its first wait at once (:func:`_first_step`: one that never waits has answered, with no timer to set, as
        nothing could cancel it), and the rest is :meth:`_watched`; elsewhere it is :meth:`_bounded`."""
        value = self.listener(batch)
        if value is None or not inspect.isawaitable(value):
            return value
        task = running.task
        if task is None:
            return _Pending(self._bounded(value))
        if type(value) is CoroutineType:
            value = _first_step(value)
            if type(value) is not _Started:
                return value
        return _Pending(self._watched(value, task, running.started))

    async def _bounded(self, awaitable: Awaitable[Any]) -> Any:
        timeout = self._service.settings.consume_timeout
        try:
            async with asyncio.timeout(0 if self._cut else timeout) as scope:
                self._scopes.add(scope)
                try:
                    return await awaitable
                finally:
                    self._scopes.discard(scope)
        except TimeoutError:
            if scope.expired() and self._cut:
                raise ConsumeCancelledError("cancelled: the task in `async with` the consumer was cancelled") from None
            if scope.expired():
                raise ConsumeTimeoutError(f"cancelled after consume_timeout {timeout:g} s") from None
            raise

    async def _watched(self, awaitable: Awaitable[Any], task: asyncio.Task[Any], started: float) -> Any:
        """:meth:`_bounded` on the service's own loop (the asyncio engine), the call awaited by ``task``: its deadline
        noted by its task, and one timer of the service (:meth:`_watch`) for the earliest deadline, instead of an
        ``asyncio.timeout`` per call, whose timer made and cancelled every time (and the current task looked up)
        was 40 % of the time of a consumer whose listener takes one message at a time (issue 42). The same
        outcome: the call (which ``started`` then) cancelled at its deadline."""
        timeout = 0 if self._cut else self._service.settings.consume_timeout
        now = time.monotonic()
        deadline = now if self._cut else started + timeout
        self._deadlines[task] = deadline
        if self._watch_at is None or deadline < self._watch_at:
            self._watch_at = deadline
            self._service.later(max(0.0, deadline - now), self._watch)
        try:
            return await awaitable
        except asyncio.CancelledError:
            if task not in self._expired:
                raise  # not ours: the task's owner cancelled it
            if self._cut:
                raise ConsumeCancelledError("cancelled: the task in `async with` the consumer was cancelled") from None
            raise ConsumeTimeoutError(f"cancelled after consume_timeout {timeout:g} s") from None
        finally:
            del self._deadlines[task]
            if task in self._expired:
                self._expired.discard(task)
                task.uncancel()  # the cancellation was this call's timeout, not a request to end the task

    def _watch(self) -> None:
        """(On the loop.) Cancel the calls past their deadline; set the next watch for the earliest one left."""
        now = time.monotonic()
        self._watch_at = None
        for task, deadline in list(self._deadlines.items()):
            if deadline <= now and task not in self._expired:
                self._expired.add(task)
                task.cancel()
        waiting = [deadline for task, deadline in self._deadlines.items() if task not in self._expired]
        if waiting:
            self._watch_at = min(waiting)
            self._service.later(max(0.0, self._watch_at - now), self._watch)

    def cut_short(self) -> None:
        """(On the loop.) Cancel the ``async def`` listener calls running now and any started from here, as their
        timeout would, and hand out nothing more: each batch goes back (retry topic, or the queue's next owner),
        so a shutdown after a cancellation does not wait for listeners the application no longer waits for."""
        self._cut = True
        now = asyncio.get_running_loop().time()
        for scope in list(self._scopes):
            scope.reschedule(now)
        self._deadlines = dict.fromkeys(self._deadlines, time.monotonic())
        self._watch()

    def _mistake(self, value: object) -> ListenerResultError | None:
        """A return value that is not an answer: said once per listener (None after that)."""
        if self._mistaken:
            return None
        self._mistaken = True
        return ListenerResultError(
            f"the listener returned {reprlib.repr(value)}, which is not an answer: return None or "
            "ConsumeResult.SUCCESS when consumed; ConsumeResult.RECONSUME_LATER, Reconsume(...) or raise to consume "
            "again later. Taken as RECONSUME_LATER (said once)"
        )

    def _where_sent(self, sent: list[Message], delay_level: int) -> str:
        """Where the broker put messages sent back: one at delay level -1, or already reconsumed the limit, goes to
        the group's dead-letter queue, not the retry topic (the broker's rule in ``consumerSendMsgBack``), and that
        is the line an operator looks for."""
        if not sent:
            return ""
        dlq = dead_letter_topic(self._service.config.consumer_group)
        if self._service.config.consume_orderly or delay_level == DEAD_LETTER_NOW:
            return f"sent to the dead-letter queue {dlq}"
        most = self._service.settings.concurrent_max_reconsume_times
        dead = sum(1 for m in sent if m.reconsume_times >= most)
        if dead == len(sent):
            return f"sent to the dead-letter queue {dlq} after {most} reconsumptions"
        if dead:
            return f"{dead} sent to the dead-letter queue {dlq}, {len(sent) - dead} back to the retry topic"
        return "sent back to the retry topic"

    def _dead_letters(self, again: list[Message], delay_level: int) -> Steps[tuple[list[Message], list[Message]]]:
        """(Orderly.) The messages to retry that go to the dead-letter queue instead (delay level -1, or
        reconsumed ``max_reconsume_times`` when set: Java's ``checkReconsumeTimes``) and are done with, and those
        retried in place: any the broker did not take, too."""
        limit = self._service.settings.max_reconsume_times
        doomed = [
            m for m in again if delay_level == DEAD_LETTER_NOW or (limit is not None and m.reconsume_times >= limit)
        ]
        if not doomed:
            return [], again
        unsent = yield from self._send_back(
            doomed, DEAD_LETTER_NOW, UNLIMITED_RECONSUME_TIMES if limit is None else limit
        )
        sent = {id(m) for m in doomed[: len(doomed) - len(unsent)]}
        return [m for m in again if id(m) in sent], [m for m in again if id(m) not in sent]

    def _send_back(self, messages: list[Message], delay_level: int, max_reconsume_times: int) -> Steps[list[Message]]:
        """Java's way with messages not consumed: the broker stores each again (the group's retry topic, with a
        delay, or its dead-letter queue), and the queue moves on. Returns those not sent back (from the first
        failure on), to be consumed again here (Java: ``consumeLater``)."""
        if not self._send_back_works:
            return messages
        service = self._service
        for index, message in enumerate(messages):
            try:
                yield from call(
                    Transport.send_back, service.config.consumer_group, message, max_reconsume_times, delay_level
                )
            except TransportError as error:
                if error.code == "UNIMPLEMENTED":
                    self._send_back_works = False
                    log.info("%s", error)
                else:
                    service.health.failed(SEND_BACK_KIND, error)
                return messages[index:]
        service.health.ok(SEND_BACK_KIND)
        return []

    def _chunk_done(self, mq: MessageQueue, run: QueueRun, result: _Chunk, ends_task: bool = True) -> None:
        """Tell the core what a consume task did (``ends_task``; else what became of a timed-out batch), put back
        in front what it did not hand out (unless the queue is being given up: then its next owner pulls them),
        and hand out more. A task of a queue dropped since (its run replaced or gone) tells nothing: the core has
        forgotten that process queue, and its offsets would be taken for those of the queue's next one."""
        if self._runs.get(mq) is not run:
            return
        service = self._service
        if ends_task:
            run.busy -= 1
        if result.consumed:
            run.cached_bytes -= body_bytes(result.consumed)
            service.handle(MessagesConsumed(mq, offsets_of(result.consumed)))
        if result.returned:
            if not run.stopped:
                run.buffered.extendleft(reversed(result.returned))
                if result.suspend is not None:
                    run.paused_until = time.monotonic() + result.suspend
            service.handle(MessagesReturned(mq, offsets_of(result.returned)))
        for batch in result.retry:
            self._retry_later(mq, run, batch)
        self.dispatch(mq)

    def _retry_later(self, mq: MessageQueue, run: QueueRun, batch: list[Message]) -> None:
        """A concurrent batch neither consumed nor sent back: give it to the listener again after
        ``retry_delay`` while the queue is ours; once it is not, return it undelivered (the next owner has it)."""
        service = self._service
        run.busy += 1
        if self._cut:  # nothing is given to the listener any more: the queue's next owner has the batch
            self._chunk_done(mq, run, _Chunk(returned=batch))
            return

        def retry() -> None:
            if self._runs.get(mq) is not run or run.stopped:
                self._chunk_done(mq, run, _Chunk(returned=batch))
            elif not service.core.is_dispatchable(mq, time.monotonic()):
                service.later(service.settings.retry_delay, retry)
            else:
                self._consume(mq, run, batch, service.core.lock_deadline(mq), None)

        service.later(service.settings.retry_delay, retry)

    # ------------------------------------------------------------------ the consume timeout

    def _check_interval(self) -> float:
        return min(1.0, self._service.settings.consume_timeout / 10)

    def _check_calls(self) -> None:
        """(Service context, every :meth:`_check_interval`.) Give up the calls past ``consume_timeout`` (orderly:
        report them), and clear the report once every such call has returned."""
        service = self._service
        if service.closing.is_set():
            return
        now = time.monotonic()
        timeout = service.settings.consume_timeout
        for running in self._calls.copy():  # one atomic copy: consume threads add and take calls meanwhile
            if now - running.started < timeout:
                continue
            if service.config.consume_orderly:
                if not running.reported:
                    running.reported = True
                    self._overdue.append(running)
                    self._report_overdue(running, now, "the queue waits for it: an orderly queue keeps its order")
            elif self._calls.pop(running, False):
                self._expire(running, now)
        was_overdue = bool(self._overdue)
        self._overdue = [c for c in self._overdue if not c.over]
        if was_overdue and not self._overdue:
            service.health.ok(CONSUME_TIMEOUT_KIND)
        service.later(self._check_interval(), self._check_calls)

    def _report_overdue(self, running: _Call, now: float, then: str) -> None:
        offsets = [m.queue_offset for m in running.batch]
        self._service.health.failed(
            CONSUME_TIMEOUT_KIND,
            ConsumeTimeoutError(
                f"a listener call on {running.mq} offsets {offsets} started {now - running.started:.1f} s ago, past "
                f"consume_timeout {self._service.settings.consume_timeout:g} s; {then}"
            ),
        )

    def _expire(self, running: _Call, now: float) -> None:
        """A concurrent call past the timeout, taken from its task: its batch is sent back (then done with, or
        retried here if it cannot be), the chunk's unstarted messages are handed out again, the task's account is
        closed for it, and health says so until the call returns."""
        self._overdue.append(running)
        self._report_overdue(running, now, "its batch is sent back and the queue moves on; the call goes on")
        result = running.result
        result.returned = running.rest
        self._chunk_done(running.mq, running.run, result)
        steps = self._send_back(
            running.batch, EXPIRED_DELAY_LEVEL, self._service.settings.concurrent_max_reconsume_times
        )
        self._service.spawn("io", "send back of a timed-out batch", steps, partial(self._expired_sent, running))

    def _expired_sent(self, running: _Call, unsent: list[Message]) -> None:
        batch = running.batch
        sent = batch[: len(batch) - len(unsent)]
        self._chunk_done(running.mq, running.run, _Chunk(consumed=sent, retry=[unsent] if unsent else []), False)


def _first_step(coroutine: CoroutineType[Any, Any, Any]) -> Any:
    """An ``async def`` listener's call on the service's loop, in its consume task, run up to its first wait as
    ``await`` runs it: its answer when it never waits (a quick listener's usual case, which then needs no steps),
    else a :class:`_Started` to await for the rest."""
    try:
        waited_for = coroutine.send(None)
    except StopIteration as done:
        return done.value
    return _Started(coroutine, waited_for)


class _Pending(NamedTuple):
    """What is left to await of a listener's call (:meth:`Dispatch._listen`), told apart from an answer."""

    awaitable: Awaitable[Any]


class _Started:
    """A coroutine whose first step ran and yielded ``waited_for`` (the future it waits for): awaited, it goes on
    as ``await`` would have (what the task sends, throws or closes goes to the coroutine, PEP 380's delegation)."""

    __slots__ = ("coroutine", "waited_for")

    def __init__(self, coroutine: CoroutineType[Any, Any, Any], waited_for: Any) -> None:
        self.coroutine = coroutine
        self.waited_for = waited_for

    def __await__(self) -> Generator[Any, Any, Any]:
        coroutine, yielded = self.coroutine, self.waited_for
        while True:
            try:
                sent = yield yielded
            except GeneratorExit:
                coroutine.close()
                raise
            except BaseException as error:  # a cancellation included: the coroutine decides what it means
                try:
                    yielded = coroutine.throw(error)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    yielded = coroutine.send(sent)
                except StopIteration as done:
                    return done.value


def _awaited(awaitable: Awaitable[Any]) -> Awaitable[Any]:
    """The ``Invoke`` of an awaitable the listener's call made already (:meth:`Dispatch._listen`): the steps'
    interpreter awaits it on the loop, or runs it to its end on a pool thread."""
    return awaitable


def consume_directly(listener: MessageListener | None, message: Message) -> Steps[tuple[bool, str]]:
    """CONSUME_MESSAGE_DIRECTLY (``mqadmin consumeMessage``): the listener's answer on one message, outside the
    queue's order and offsets, as Java does it (BrokerRequests)."""
    if listener is None:
        return False, "pull-style consumer: no message listener"
    try:
        value = yield Invoke(listener, ([message],))
    except Exception as error:
        return False, f"{type(error).__name__}: {error}"
    answer = _answer(value, 1)
    if answer is None:
        return False, f"the listener returned {reprlib.repr(value)}, which is not an answer"
    return (True, "") if answer.consumed else (False, "RECONSUME_LATER")
