"""The engine's settings, its error types and the constants its parts share.

:class:`EngineSettings` holds the runtime's knobs that are not rebalance rules (those are the core's
:class:`~rocket_rebalance.core.RebalanceConfig`); the errors are what ``on_error``, health and the log receive, so
an application can tell them apart by type; the constants are the health kinds and sizes more than one part of
the engine names. Each part of the engine (:mod:`.brokers`, :mod:`.pulling`, :mod:`.dispatch`, :mod:`.polling`,
:mod:`.callbacks`, :mod:`.reports`) keeps its own constants.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rocket_rebalance.model import MessageQueue, check_duration
from rocket_rebalance.runtime.transport import Message
from rocket_rebalance.trace import MAX_TRACE_BATCH_NUM, TRACE_BATCH_NUM, TRACE_TOPIC

__all__ = [
    "BROKER_CALL_THREADS",
    "DEFAULT_MAX_RECONSUME_TIMES",
    "HANDOVER_KIND",
    "LOCK_WAIT_KIND",
    "MIB",
    "ClientIdSharedError",
    "ConsumeCancelledError",
    "ConsumeTimeoutError",
    "ConsumerNotReadyError",
    "EngineSettings",
    "HandoverStuckError",
    "HandoverWithoutOffsetError",
    "ListenerError",
    "ListenerResultError",
    "LockWaitError",
    "MemberListTooLongError",
    "MessageListener",
    "PullAnswerError",
    "QueueListener",
    "QueueNotAssignedError",
    "RebalanceListenerError",
    "ReleaseInDoubtError",
    "SeekOffsetError",
    "SlaveReadWarning",
    "SubscriptionMismatchError",
    "UnreadableBodyError",
]


class ListenerError(Exception):
    """The application's listener raised on a batch (what ``on_error`` and the log get; ``__cause__`` is its error)."""

    def __init__(self, mq: MessageQueue, batch: Sequence[Message], then: str, error: Exception) -> None:
        offsets = [m.queue_offset for m in batch]
        super().__init__(f"{type(error).__name__}: {error} on {mq} offsets {offsets}; {then}")
        self.__cause__ = error  # logged with its traceback, as the cause


class ListenerResultError(TypeError):
    """A listener returned something that is not an answer (``False``, a string ...): said once per listener, and
    taken as ``RECONSUME_LATER``, so the messages come again rather than being lost to a mistaken ``return``."""


class ConsumeTimeoutError(TimeoutError):
    """A listener call ran past ``consume_timeout``: its batch was sent back to the retry topic and the queue moved
    on (concurrent), or the call was cancelled (``async def``), or the queue waits for it (orderly, threads)."""


class ConsumeCancelledError(Exception):
    """An ``async def`` listener's call was cancelled because the task inside ``async with`` an asyncio push
    consumer was cancelled: its batch goes back (the retry topic, or the queue's next owner), and the shutdown
    that follows does not wait for it."""


class ConsumerNotReadyError(TimeoutError):
    """``wait_for_assignment(timeout)`` ran out before the consumer held its queues. ``reason`` names what failed,
    as health knew it then (``name server unreachable``, ``topic unknown to the name server: T``, ``permission
    denied ...``, or no round applied yet); ``problems`` is health's report (each failing kind, its last error).
    The consumer itself keeps running and retrying, as Java's does: shut it down, or wait again."""

    def __init__(self, consumer: str, timeout: float, reason: str, problems: dict[str, str]) -> None:
        failing = "".join(f"; {kind}: {problem}" for kind, problem in problems.items())
        super().__init__(f"{consumer} not ready after {timeout:g} s: {reason}{failing}")
        self.reason = reason
        self.problems = problems


class QueueNotAssignedError(LookupError):
    """A pull consumer was asked to seek, pause or tell the position of a queue it does not consume now."""


class SeekOffsetError(ValueError):
    """A pull consumer was asked to seek outside the queue's offsets as its broker reports them at the seek: from
    the min offset (the oldest message still stored) to the max offset (the next message's: seeking there means
    "from the end"). Java's ``DefaultLitePullConsumerImpl.seek`` refuses it the same way ("Seek offset illegal")."""


class RebalanceListenerError(Exception):
    """A :class:`~rocket_rebalance.runtime.listener.RebalanceListener` callback raised (given to ``on_error``;
    ``__cause__`` is its error). The rebalance goes on: a revoke counts as done, so the release is not held up."""


class PullAnswerError(Exception):
    """A pull answer that cannot be right: its next offset lies below the requested one, or a message lies outside
    the range it answers for (given to ``on_error``; see :mod:`~rocket_rebalance.runtime.pulling`)."""


class SlaveReadWarning(Exception):
    """A broker set read from its slave (given to ``on_error`` and kept in health until its master answers a pull
    again): nothing is lost, but the master is down (or behind on memory), so the set's orderly queues stop and its
    offsets live on the slave meanwhile; an operator wants to know."""


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


class ReleaseInDoubtError(Exception):
    """An unlock on a gone member's behalf was not answered by its deadline (core rule L9 (c)): the broker may
    carry it out later, after the member came back; given to ``on_error``, at ERROR."""


class SubscriptionMismatchError(Exception):
    """The group's subscription table at a broker holds another expression for one of our topics than ours
    (given to ``on_error``; see :mod:`~rocket_rebalance.runtime.brokers`)."""


class ClientIdSharedError(Exception):
    """Other consumers of the group use this consumer's client ID (given to ``on_error``; see core rule L6)."""


class MemberListTooLongError(Exception):
    """A broker listed more members than :data:`~rocket_rebalance.model.MAX_GROUP_MEMBERS` for the group (given
    to ``on_error``): the list is refused, as a failed one, and the consumer keeps its queues meanwhile."""


LOCK_WAIT_KIND = "locks of allocated queues"
HANDOVER_KIND = "handovers of released queues"
MIB = 1024 * 1024
DEFAULT_MAX_RECONSUME_TIMES = 16  # Java's for a concurrent consumer that sets none
BROKER_CALL_THREADS = 4  # heartbeats (and, at shutdown, unregisters) in flight at once, however many brokers

MessageListener = Callable[[list[Message]], Any]
"""Consumes a batch and says how it went: returns None or a :class:`~rocket_rebalance.runtime.listener.ConsumeResult`
or :class:`~rocket_rebalance.runtime.listener.Reconsume`; raising means ``RECONSUME_LATER``. May be ``async def``
(awaited by the asyncio consumers)."""

QueueListener = Callable[[str, Sequence[MessageQueue], Sequence[MessageQueue]], Any]
"""Java's ``MessageQueueListener.messageQueueChanged(topic, mqAll, mqDivided)``."""


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
    retry_delay: float = 5.0
    """A concurrent batch the listener refused that could not be sent back is given to it again after this
    (Java's ``submitConsumeRequestLater``, 5 s)."""
    suspend_current_queue_time: float = 1.0  # an orderly queue waits this long after a failed batch (Java, in ms)
    consume_timeout: float = 900.0
    """A listener call running this long is given up (Java's ``consumeTimeout``, 15 min): see
    :mod:`~rocket_rebalance.runtime.dispatch`."""
    reconnect_backoff: tuple[float, float] = (0.2, 5.0)
    max_reconsume_times: int | None = None
    """Consumptions of a failing message before it goes to the dead-letter queue. None is Java's default (its -1):
    16 for a concurrent consumer (the broker's rule), no limit for an orderly one, which retries in place."""
    lock_wait_report: float = 10.0  # a queue of ours whose lock is refused this long is reported (core rule L7)
    enable_trace: bool = False
    """Write message trace (Java's ``enableMsgTrace``): SubBefore and SubAfter records of each listener call (a
    pull consumer: of each queue's messages ``poll()`` hands out) to ``trace_topic``, for ``mqadmin
    queryMsgTraceById`` and the dashboard (the operators guide: "What operators do to a group")."""
    trace_topic: str = TRACE_TOPIC  # Java's default, which a broker creates with traceTopicEnable=true
    trace_batch_size: int = TRACE_BATCH_NUM  # records per trace message (Java's traceMsgBatchNum), at most 20
    pin_cpu: int | None = None
    """(Linux, threaded consumers) The one CPU the consumer's own threads run on: the service thread, the
    listener's and I/O threads, the connections' reader. Under the GIL only one of them runs Python at a time,
    and each message passes from one to the next; spread over several CPUs, every hand-off wakes a thread on
    another CPU, which costs more than the work handed over (on the benchmark's 2-core machine, kept to one CPU
    it drained 30 to 35 % more messages a second, with less CPU per message: the consumers' docs). None (the
    default): the operating system places them. Keep it None when the listener's own work runs outside the GIL
    (numpy, compression) and should spread over CPUs, or when the CPU may be busy with other processes, which
    the consumer could then not leave."""

    @property
    def concurrent_max_reconsume_times(self) -> int:
        """The broker's limit for a concurrent consumer's messages: ``max_reconsume_times``, or Java's 16."""
        return DEFAULT_MAX_RECONSUME_TIMES if self.max_reconsume_times is None else self.max_reconsume_times

    def __post_init__(self) -> None:
        """The durations, by the library's one check: a NaN or zero backoff would spin a thread; the counts
        must be positive, or nothing would ever be pulled or handed out."""
        check_duration("pull_error_backoff", self.pull_error_backoff)
        check_duration("retry_delay", self.retry_delay)
        check_duration("suspend_current_queue_time", self.suspend_current_queue_time)
        check_duration("consume_timeout", self.consume_timeout)
        if self.max_reconsume_times is not None and (
            isinstance(self.max_reconsume_times, bool)
            or not isinstance(self.max_reconsume_times, int)
            or self.max_reconsume_times < 0
        ):
            raise ValueError(f"max_reconsume_times must be None or 0 or more, got {self.max_reconsume_times!r}")
        check_duration("lock_wait_report", self.lock_wait_report)
        if not isinstance(self.enable_trace, bool):
            raise ValueError(f"enable_trace must be True or False, got {self.enable_trace!r}")
        if not isinstance(self.trace_topic, str) or not self.trace_topic.strip():
            raise ValueError(f"trace_topic must be a topic name, got {self.trace_topic!r}")
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
            "trace_batch_size",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number of at least 1, got {value!r}")
        _check_cpu(self.pin_cpu)
        if self.trace_batch_size > MAX_TRACE_BATCH_NUM:  # Java caps it silently; a setting it ignores is a mistake
            raise ValueError(f"trace_batch_size must be at most {MAX_TRACE_BATCH_NUM}, got {self.trace_batch_size!r}")


def _check_cpu(cpu: int | None) -> None:
    """``pin_cpu``: None, or a CPU this process may run on, where threads can be kept to one CPU at all."""
    if cpu is None:
        return
    if isinstance(cpu, bool) or not isinstance(cpu, int) or cpu < 0:
        raise ValueError(f"pin_cpu must be None or a CPU number, got {cpu!r}")
    if not hasattr(os, "sched_setaffinity"):
        raise ValueError("pin_cpu needs threads kept to one CPU (os.sched_setaffinity), which this platform lacks")
    allowed = os.sched_getaffinity(0)
    if cpu not in allowed:
        raise ValueError(f"pin_cpu {cpu} is not a CPU this process may run on ({', '.join(map(str, sorted(allowed)))})")
