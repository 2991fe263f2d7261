"""What an application hears and answers: :class:`RebalanceListener` for its queues, and what a push consumer's
message listener may return of a batch (:class:`ConsumeResult`, :class:`Reconsume`).

RocketMQ's Java client only calls ``MessageQueueListener.messageQueueChanged(topic, mqAll, mqDivided)`` with the
whole new share of a topic; an application that keeps state per queue (a cache, an aggregate, its own offsets)
wants the changes instead, and a moment to save its state before the queue goes. These are the callbacks Kafka
clients have (``ConsumerRebalanceListener``), with RocketMQ's meaning:

- ``on_queues_assigned(queues)``: these queues are now ours (locked, when the fence is on, and their start offsets
  read); called before any of their messages is handed out.
- ``on_queues_revoked(queues)``: these queues are being given up gracefully. None of their messages is handed out
  any more and those handed out before have finished (a push consumer's listener returned, or the drain's bound
  passed); called *before* their final offsets are persisted and their locks released, so whatever the application
  commits or flushes here counts. The release waits for it (up to ``revoke_timeout``, 15 s).
- ``on_queues_lost(queues)``: these queues were taken away without a graceful release (a lock that lapsed or was
  refused, a connection to the broker that went away): nothing could be committed, and another consumer may
  already be consuming them. By default it calls ``on_queues_revoked``, as Kafka's does.

Every queue is assigned once and then revoked or lost once, in order, one callback at a time. Each method may be a
plain function or ``async def`` (awaited on the consumer's event loop by the asyncio consumers; a threaded consumer
runs a coroutine function to its end with ``asyncio.run``). A push consumer calls them on a thread (or task) of
their own; a pull consumer calls them inside ``poll()``, on the application's thread, as Kafka's do.

What RocketMQ does not promise, and what the fence adds: RocketMQ has no group barrier. Without the fence
(``fenced_handover=False``, Java's behaviour), the member a queue moves to starts it as soon as its own rebalance
says so, which may be before our ``on_queues_revoked`` has returned, so both may work on the queue at once for a
moment, and the new owner starts from the offset persisted last. With the fence (the default), the new owner's
lock of the queue is refused until we have revoked it, persisted its offset and unlocked it, so the new owner's
``on_queues_assigned`` comes after our ``on_queues_revoked`` returned and it starts from what we committed there.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable
from dataclasses import dataclass

from rocket_rebalance.model import MessageQueue, check_duration

__all__ = ["ConsumeResult", "RebalanceListener", "Reconsume"]

MAX_SUSPEND = 30.0
"""The longest an orderly queue may be suspended after a batch it must retry (Java clamps to 10 ms .. 30 s)."""
MIN_SUSPEND = 0.01


class ConsumeResult(enum.Enum):
    """What a push consumer's listener says of its batch (returning ``None`` is ``SUCCESS``; raising is
    ``RECONSUME_LATER``).

    - ``SUCCESS``: every message of the batch is consumed (Java: ``ConsumeConcurrentlyStatus.CONSUME_SUCCESS``,
      ``ConsumeOrderlyStatus.SUCCESS``).
    - ``RECONSUME_LATER``: none is; a concurrent consumer sends the batch back to the group's retry topic, from
      which it comes again later (after ``max_reconsume_times``: the dead-letter queue); an orderly one retries it
      in place after ``suspend_current_queue_time`` (Java: ``RECONSUME_LATER``).
    - ``SUSPEND_CURRENT_QUEUE_A_MOMENT``: the orderly name of the same answer (Java's ``ConsumeOrderlyStatus``);
      a concurrent consumer takes it as ``RECONSUME_LATER``.

    :class:`Reconsume` says more: how many of the batch were consumed, the delay level, the suspend time.
    """

    SUCCESS = "SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


@dataclass(frozen=True)
class Reconsume:
    """ "Consume (the rest of) this batch later", with the details Java's consume contexts carry.

    ``consumed``: the first this many messages of the batch are consumed, the rest are not (Java's ``ackIndex`` is
    ``consumed - 1``, set on ``ConsumeConcurrentlyContext`` with ``CONSUME_SUCCESS``); 0, the default, means none.

    ``delay_level``: what happens next to the messages not consumed (Java's ``delayLevelWhenNextConsume``). 0, the
    default, lets the broker decide (a concurrent consumer's message comes back from the retry topic after the
    delay of level 3 + its reconsume count); ``-1`` sends them straight to the group's dead-letter queue, concurrent
    or orderly (an orderly queue then moves on); a level from 1 (1 s, 5 s, 10 s, 30 s, 1 min, ... 2 h: the broker's
    ``messageDelayLevel``) brings a concurrent consumer's message back after that delay. An orderly consumer
    retries in place, so it has no use for a level above 0.

    ``suspend``: orderly only, seconds before the queue's next attempt (Java's
    ``suspendCurrentQueueTimeMillis``; None: the consumer's ``suspend_current_queue_time``, 1 s), 0.01 to 30.
    """

    consumed: int = 0
    delay_level: int = 0
    suspend: float | None = None

    def __post_init__(self) -> None:
        """Refused at once, where the listener made it: a wrong answer found only at consumption would send
        messages the wrong way."""
        if isinstance(self.consumed, bool) or not isinstance(self.consumed, int) or self.consumed < 0:
            raise ValueError(f"consumed must be a count of messages (0 or more), got {self.consumed!r}")
        if isinstance(self.delay_level, bool) or not isinstance(self.delay_level, int) or self.delay_level < -1:
            raise ValueError(
                f"delay_level must be -1 (dead-letter queue), 0 (the broker decides) or a level, "
                f"got {self.delay_level!r}"
            )
        if self.suspend is not None:
            check_duration("suspend", self.suspend)
            if not MIN_SUSPEND <= self.suspend <= MAX_SUSPEND:
                raise ValueError(f"suspend must be from {MIN_SUSPEND} to {MAX_SUSPEND} seconds, got {self.suspend!r}")


class RebalanceListener:
    """Override what you need; each method may be ``async def``. See the module docstring for when each is
    called and what it may rely on."""

    def on_queues_assigned(self, queues: frozenset[MessageQueue]) -> Awaitable[None] | None:
        """These queues are ours now; none of their messages has been handed out yet."""
        return None

    def on_queues_revoked(self, queues: frozenset[MessageQueue]) -> Awaitable[None] | None:
        """These queues are being given up; commit or flush what belongs to them now."""
        return None

    def on_queues_lost(self, queues: frozenset[MessageQueue]) -> Awaitable[None] | None:
        """These queues were taken away without a graceful release; by default, as revoked."""
        return self.on_queues_revoked(queues)
