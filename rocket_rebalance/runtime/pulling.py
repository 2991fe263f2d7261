"""The engine's part that pulls: each started queue's run, its long polls, the checks of their answers, the buffer.

One outstanding long poll per active queue, holding no thread while it waits (the engine's ``start_pull``); its
answer is checked (:meth:`Pulling._checked`), re-filtered by tag as Java does, buffered in offset order and handed
on to whichever part hands messages out: push dispatch (the listener) or polling (``poll()``). That part is
:attr:`Pulling.hand_out`; a consumer with neither (only a queue listener) has no pulling part at all.
"""

from __future__ import annotations

import itertools
import logging
import operator
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from rocket_rebalance.core import MessagesPulled, OffsetIllegal
from rocket_rebalance.model import MASTER_ID, MessageQueue
from rocket_rebalance.runtime.metrics import ConsumeMetrics
from rocket_rebalance.runtime.service import Service
from rocket_rebalance.runtime.settings import MIB, PullAnswerError, SlaveReadWarning
from rocket_rebalance.runtime.stats import ConsumeStats, elapsed_ms
from rocket_rebalance.runtime.transport import (
    Message,
    PullResult,
    PullStatus,
    TransportError,
    body_bytes,
    offsets_of,
)

__all__ = ["FLOW_CONTROL_DELAY", "SLAVE_READS_KIND", "Pulling", "QueueRun"]

log = logging.getLogger("rocket_rebalance.runtime")

FLOW_CONTROL_DELAY = 0.05  # Java's PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL
SLAVE_RETRY_DELAY = 0.5  # before pulling again a queue its slave had nothing more of
SLAVE_READS_KIND = "reads from a slave"
"""The health kind that names each broker set read from a slave, until its master answers a pull again."""


@dataclass
class QueueRun:
    """The runtime's side of one started queue: where to pull next and what is waiting for the application.

    ``buffered`` stays in offset order without sorting: each pull answers for the offsets after the last one
    (:meth:`Pulling._checked` holds it to that), and messages that come back undelivered go back in front."""

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


class Pulling:
    """Every started queue's run and its pulls (service context)."""

    def __init__(
        self, service: Service, long_poll_ms: int, stats: ConsumeStats, metrics: ConsumeMetrics | None
    ) -> None:
        self._service = service
        self._wait_ms = long_poll_ms if service.settings.pull_wait_ms is None else service.settings.pull_wait_ms
        self._stats = stats
        self._metrics = metrics
        self.runs: dict[MessageQueue, QueueRun] = {}
        self._generations = itertools.count(1)
        self.filtered = 0  # messages the tag re-filter skipped (their offsets move on as if consumed)
        self.hand_out: Callable[[MessageQueue], None] = _nobody
        """Called when a queue's buffer has new messages: the part that hands them out sets it."""

    # ------------------------------------------------------------------ a queue's run

    def start(self, mq: MessageQueue, offset: int, announced: bool) -> None:
        """StartQueue: a run for the queue from ``offset`` (not pulled yet: see :meth:`pull`)."""
        self.runs[mq] = QueueRun(next(self._generations), offset, announced=announced)

    def stop(self, mq: MessageQueue) -> None:
        """StopQueue: nothing more is pulled or handed out; what was buffered was never handed out, so the next
        owner pulls it again."""
        run = self.runs.get(mq)
        if run is not None:
            run.stopped = True
            run.buffered.clear()

    def move(self, mq: MessageQueue, run: QueueRun, offset: int) -> None:
        """Pull ``mq`` from ``offset`` next (a seek): what was buffered is forgotten, and the pull on its way
        answers for the old position, so it is ignored."""
        run.buffered.clear()
        run.cached_bytes = 0
        run.generation = next(self._generations)
        run.pulling = False
        run.next_offset = offset

    # ------------------------------------------------------------------ pulls

    def pull(self, mq: MessageQueue) -> None:
        run = self.runs.get(mq)
        service = self._service
        if run is None or run.stopped or run.pulling or run.paused or service.closing.is_set():
            return
        if self._flow_controlled(mq, run):
            service.later(FLOW_CONTROL_DELAY, lambda: self.pull(mq))  # let the application catch up first
            return
        run.pulling = True
        done = partial(self._answered, mq, run.generation, time.monotonic())
        service.start_pull(mq, run.next_offset, self._wait_ms, done)

    def _answered(self, mq: MessageQueue, generation: int, started: float, result: PullResult | TransportError) -> None:
        """(Service context.) A pull's answer: buffered and handed on, or after a failure pulled again later."""
        service = self._service
        if isinstance(result, TransportError):
            if not service.closing.is_set():  # a shutdown closes the connections under the long polls it ends
                service.health.failed("pull", result, at=mq.broker_name)
            if self._current(mq, generation) is not None:
                service.later(service.settings.pull_error_backoff, lambda: self.pull(mq))
            return
        service.health.ok("pull", at=mq.broker_name)
        if result.broker_id == MASTER_ID:
            service.health.ok(SLAVE_READS_KIND, at=mq.broker_name)
        else:
            service.health.failed(
                SLAVE_READS_KIND,
                SlaveReadWarning(
                    f"broker set {mq.broker_name} is read from its slave (broker ID {result.broker_id}): its master "
                    "is down, or suggested the slave; offsets go to the slave while the master is down, and "
                    "orderly queues of the set are not consumed (no lock without a master)"
                ),
                at=mq.broker_name,
            )
        if result.status == PullStatus.FOUND:
            self._stats.pulled(mq, len(result.messages), elapsed_ms(started))
        # A slave answers a pull it has nothing for at once, telling the client to ask again (PULL_RETRY_IMMEDIATELY,
        # while it still believes its master alive): Java's consumer asks again at once, a busy loop for as long as
        # the master is down; ours waits a moment.
        idle_slave = result.broker_id != MASTER_ID and result.status == PullStatus.NO_MATCHED_MSG
        self._pulled(mq, generation, result.status, result.next_begin_offset, result.messages, idle_slave)

    def _flow_controlled(self, mq: MessageQueue, run: QueueRun) -> bool:
        """Java's flow control, by its thresholds: too many messages pulled and not consumed, too many bytes of
        them, or (concurrent) too wide a span from the oldest to the newest, which a stuck message makes grow."""
        pq = self._service.core.process_queue(mq)
        if pq is None:
            return False
        settings = self._service.settings
        return (
            pq.in_flight_count > settings.pull_threshold_for_queue
            or run.cached_bytes > settings.pull_threshold_size_for_queue * MIB
            or (not self._service.config.consume_orderly and pq.span > settings.consume_concurrently_max_span)
        )

    def _current(self, mq: MessageQueue, generation: int) -> QueueRun | None:
        run = self.runs.get(mq)
        if run is None or run.generation != generation:
            return None
        run.pulling = False
        return None if run.stopped else run

    def _pulled(
        self,
        mq: MessageQueue,
        generation: int,
        status: str,
        next_offset: int,
        messages: tuple[Message, ...],
        idle_slave: bool,
    ) -> None:
        run = self._current(mq, generation)
        if run is None:
            return
        if status == PullStatus.OFFSET_ILLEGAL:  # O2; also how a broker's own reset (its default) is announced
            log.warning(
                "%s: the broker moved the offset from %d to %d (an operator's reset, or messages gone); "
                "consuming from there",
                mq,
                run.next_offset,
                next_offset,
            )
            self._service.handle(OffsetIllegal(mq, next_offset))
            return
        messages, next_offset = self._checked(mq, run.next_offset, next_offset, messages)
        messages = self._refiltered(mq, messages)
        run.next_offset = next_offset
        if messages:
            run.buffered.extend(messages)
            run.cached_bytes += body_bytes(messages)
            if self._metrics is not None:
                run.arrivals.append((next_offset, time.monotonic()))
        self._service.handle(MessagesPulled(mq, offsets_of(messages), next_offset))
        if messages:
            self.hand_out(mq)
        if idle_slave:
            self._service.later(SLAVE_RETRY_DELAY, lambda: self.pull(mq))
        else:
            self.pull(mq)

    def _refiltered(self, mq: MessageQueue, messages: tuple[Message, ...]) -> tuple[Message, ...]:
        """Java's re-filter after the broker's (``PullAPIWrapper.processPullResult``): the broker matched tags by
        hash code, and two tags can share one, so only messages whose tag is one of the subscription's are kept.
        The others are never buffered: the queue's commit offset moves past them with the pull's next offset."""
        expression = self._service.expressions.get(mq.topic)
        if expression is None or not expression.tags:
            return messages
        kept = tuple(m for m in messages if expression.accepts(m.tags))
        self.filtered += len(messages) - len(kept)
        return kept

    def _checked(
        self, mq: MessageQueue, requested: int, next_offset: int, messages: tuple[Message, ...]
    ) -> tuple[tuple[Message, ...], int]:
        """A pull answer held to what it must be: messages in ``[requested, next_offset)`` in ascending order
        (once the head of an inner batch is dropped: :func:`_without_batch_head`), and a next offset not below the
        requested one. A broker (or anything posing as one) that answers
        otherwise would make us hand out again what was consumed, endlessly (a next offset that goes back), carry
        an impossible offset into every later offset write, or break an orderly queue's order. Java only logs
        "[BUG] pull message result maybe data wrong"; we also keep the queue where it was and hand out only what
        lies in the range, in order, and say so through health until the queue's answers are sound again."""
        health = self._service.health
        kind = f"pull answers of {mq}"
        messages = _without_batch_head(requested, messages)
        offsets = offsets_of(messages)
        if (
            next_offset >= requested
            and (not offsets or (requested <= offsets[0] and offsets[-1] < next_offset))
            and all(map(operator.lt, offsets, offsets[1:]))
        ):
            health.ok(kind)
            return messages, next_offset
        wrong = [offset for offset in offsets if not requested <= offset < next_offset]
        health.failed(
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


def _without_batch_head(requested: int, messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """``messages`` without those of the answer's first inner batch that lie before ``requested``.

    A BatchCQ queue indexes batches, not messages: a pull from an offset inside an inner batch (a commit offset
    left there by a consumer that stopped mid-batch) is answered with the whole batch, from its first message
    (``BatchConsumeQueue.getBatchMsgIndexBuffer``). Those before the requested offset were consumed already, so they
    are dropped, as the broker's way rather than its fault (Java's consumer hands them out again). They are told
    by their commit-log offset: the messages of one inner batch share its record's. The stub's messages have none
    (-1), and anything else before the requested offset stays for :meth:`Pulling._checked` to refuse."""
    if not messages or messages[0].queue_offset >= requested:
        return messages
    record = messages[0].commit_log_offset
    head = 0
    while head < len(messages) and messages[head].queue_offset < requested:
        if messages[head].commit_log_offset != record:
            return messages
        head += 1
    if record < 0 or head == len(messages) or messages[head].commit_log_offset != record:
        return messages
    return messages[head:]


def _nobody(mq: MessageQueue) -> None:
    """:attr:`Pulling.hand_out` until the part that hands messages out is wired in."""
    raise RuntimeError(f"messages of {mq} pulled with no part to hand them out")
