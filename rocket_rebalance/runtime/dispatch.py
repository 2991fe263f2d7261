"""The engine's part that hands messages to a push consumer's listener: consume tasks, their batches, the
listener's verdicts, send-back to the retry topic and retries.

Buffered messages go to the consume pool several batches to a task (about :data:`CHUNK_WORK` of listener time
each, by the listener's recent pace), while the core says the queue may give them out (locks, the fence, the
drain); each task stops before a batch once the queue is being released or its lock has run out. What a task did
comes back to the service context as one :class:`_Chunk`: consumed, to retry, or never handed to the listener.
It exists only in a push consumer; a pull consumer has :mod:`.polling` instead.
"""

from __future__ import annotations

import enum
import logging
import time
from dataclasses import dataclass, field
from functools import partial

from rocket_rebalance.core import MessagesConsumed, MessagesDispatched, MessagesReturned
from rocket_rebalance.model import MessageQueue, dead_letter_topic
from rocket_rebalance.runtime.metrics import ConsumeMetrics
from rocket_rebalance.runtime.pulling import Pulling, QueueRun
from rocket_rebalance.runtime.service import Service
from rocket_rebalance.runtime.settings import ListenerError, MessageListener, UnreadableBodyError
from rocket_rebalance.runtime.stats import ConsumeStats, Tally
from rocket_rebalance.runtime.steps import Invoke, Steps, call
from rocket_rebalance.runtime.transport import Message, Transport, TransportError

__all__ = ["CHUNK_WORK", "MAX_CHUNK_MESSAGES", "Dispatch", "consume_directly"]

log = logging.getLogger("rocket_rebalance.runtime")

CHUNK_WORK = 0.002
"""Seconds of listener time one consume task aims to carry: a hand-off (pool, service thread, core events) costs
tens of microseconds, so a task of a quick listener's messages makes it negligible, while a slow listener's
batches still go one per task, over all the pool's threads."""
MAX_CHUNK_MESSAGES = 32  # per consume task (or one batch, if larger): what a batch that blocks can hold back


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
    ) -> None:
        self._service = service
        self._runs = pulling.runs
        self.listener = listener
        self._stats = stats
        self._metrics = metrics
        self._tally = tally
        self._pace = CHUNK_WORK  # the listener's recent seconds per message; a slow one until it shows otherwise
        self._send_back = True  # until the transport says its server keeps no retry topics
        pulling.hand_out = self.dispatch

    def dispatch(self, mq: MessageQueue) -> None:
        """Hand buffered messages to the consume pool, several batches to a task, while the core says the queue
        may give them out."""
        run = self._runs.get(mq)
        if run is None:
            return
        service = self._service
        core = service.core
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
            chunk = [buffered.popleft() for _ in range(min(self._chunk_size(), len(buffered)))]
            service.handle(MessagesDispatched(mq, tuple(m.queue_offset for m in chunk)))
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
        count and report it all at once."""
        service = self._service
        size = service.settings.consume_message_batch_max_size
        orderly = service.config.consume_orderly
        closing = service.closing
        result = _Chunk()
        calls = ok = failed = 0
        began = time.monotonic()
        for start in range(0, len(chunk), size):
            if run.stopped or closing.is_set() or time.monotonic() >= lock_deadline:
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
            self._stats.consumed(mq, ok, failed, took * 1000, calls)
            if self._metrics is not None:
                waited = None if arrived is None else (began - arrived) * 1000
                self._metrics.consumed(mq.topic, waited, took * 1000 / calls, ok, failed, calls)
            self._tally.add(ok)
            self._pace = (self._pace + took / (ok + failed)) / 2  # a race only blurs the estimate
        service.post(partial(self._chunk_done, mq, run, result))

    def _consume_batch(self, mq: MessageQueue, batch: list[Message]) -> Steps[_Verdict]:
        """One listener call: consumed; or refused and (concurrent) sent back to the retry topic, so done with;
        or refused and to be tried again here."""
        kind = f"listener on {mq.topic}"  # one kind per topic: a listener that always raises logs rarely, not per batch
        try:
            unreadable = [m for m in batch if m.body_error]
            if unreadable:  # never handed to the listener; failed as a refused batch is (retry topic, then DLQ)
                kind = f"message bodies on {mq.topic}"
                raise UnreadableBodyError(unreadable[0].body_error)
            yield Invoke(self.listener, (batch,))
        except Exception as error:
            sent_back = not self._service.config.consume_orderly and (yield from self._sent_back(batch))
            then = self._where_sent(batch) if sent_back else "retrying"
            self._service.health.failed(kind, ListenerError(mq, batch, then, error), traceback=True)
            return _Verdict.SENT_BACK if sent_back else _Verdict.RETRY
        self._service.health.ok(kind)
        return _Verdict.CONSUMED

    def _where_sent(self, batch: list[Message]) -> str:
        """Where the broker put a batch sent back: a message already reconsumed ``max_reconsume_times`` goes to
        the group's dead-letter queue, not the retry topic (the broker's rule in ``consumerSendMsgBack``), and that
        is the line an operator looks for."""
        most = self._service.settings.max_reconsume_times
        dead = sum(1 for m in batch if m.reconsume_times >= most)
        dlq = dead_letter_topic(self._service.config.consumer_group)
        if dead == len(batch):
            return f"sent to the dead-letter queue {dlq} after {most} reconsumptions"
        if dead:
            return f"{dead} sent to the dead-letter queue {dlq}, {len(batch) - dead} back to the retry topic"
        return "sent back to the retry topic"

    def _sent_back(self, batch: list[Message]) -> Steps[bool]:
        """Java's way with a failed concurrent batch: the broker stores each message again in the group's retry
        topic (a later delivery, with a growing delay), and the queue moves on. False when that could not be
        done for every message, and the batch is retried here instead (Java: consumeLater)."""
        if not self._send_back:
            return False
        service = self._service
        for message in batch:
            try:
                yield from call(
                    Transport.send_back, service.config.consumer_group, message, service.settings.max_reconsume_times
                )
            except TransportError as error:
                if error.code == "UNIMPLEMENTED":
                    self._send_back = False
                    log.info("%s", error)
                else:
                    service.health.failed("send back to the retry topic", error)
                return False
        return True

    def _chunk_done(self, mq: MessageQueue, run: QueueRun, result: _Chunk) -> None:
        """(Service context.) Tell the core what a consume task did, put back in front what it did not hand out
        (unless the queue is being given up: then its next owner pulls them), and hand out more. A task of a
        queue dropped since (its run replaced or gone) tells nothing: the core has forgotten that process queue,
        and its offsets would be taken for those of the queue's next one."""
        if self._runs.get(mq) is not run:
            return
        service = self._service
        run.busy -= 1
        if result.consumed:
            run.cached_bytes -= sum(len(m.body) for m in result.consumed)
            service.handle(MessagesConsumed(mq, tuple(m.queue_offset for m in result.consumed)))
        if result.returned:
            if not run.stopped:
                run.buffered.extendleft(reversed(result.returned))
                if result.orderly_failure:
                    run.paused_until = time.monotonic() + service.settings.retry_delay
            service.handle(MessagesReturned(mq, tuple(m.queue_offset for m in result.returned)))
        for batch in result.retry:
            self._retry_later(mq, run, batch)
        self.dispatch(mq)

    def _retry_later(self, mq: MessageQueue, run: QueueRun, batch: list[Message]) -> None:
        """A concurrent batch neither consumed nor sent back: give it to the listener again after
        ``retry_delay`` while the queue is ours; once it is not, return it undelivered (the next owner has it)."""
        service = self._service
        run.busy += 1

        def retry() -> None:
            if self._runs.get(mq) is not run or run.stopped:
                self._chunk_done(mq, run, _Chunk(returned=batch))
            elif not service.core.is_dispatchable(mq, time.monotonic()):
                service.later(service.settings.retry_delay, retry)
            else:
                self._consume(mq, run, batch, service.core.lock_deadline(mq), None)

        service.later(service.settings.retry_delay, retry)


def consume_directly(listener: MessageListener | None, message: Message) -> Steps[tuple[bool, str]]:
    """CONSUME_MESSAGE_DIRECTLY (``mqadmin consumeMessage``): the listener's verdict on one message, outside the
    queue's order and offsets, as Java does it (BrokerRequests)."""
    if listener is None:
        return False, "pull-style consumer: no message listener"
    try:
        yield Invoke(listener, ([message],))
    except Exception as error:
        return False, f"{type(error).__name__}: {error}"
    return True, ""
