"""What an application hears of its queues: :class:`RebalanceListener`.

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

from collections.abc import Awaitable

from rocket_rebalance.model import MessageQueue

__all__ = ["RebalanceListener"]


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
