"""The engine's part that tells a :class:`~rocket_rebalance.runtime.listener.RebalanceListener` (core rule L10):
each queue once assigned, then once revoked or lost, in order.

It exists only when the consumer has a rebalance listener. A callback runs where the consumer runs them: on the
callback pool (one at a time, in order), or, in a pull consumer, in ``poll()`` on the application's thread
(:meth:`~rocket_rebalance.runtime.polling.Polling.run_callback`). A revoke holds the queue's release until the
callback returned (``QueuesRevoked``); an assignment holds its messages back until then (``QueueRun.announced``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from rocket_rebalance.core import QueuesRevoked
from rocket_rebalance.model import MessageQueue, first_few
from rocket_rebalance.runtime.listener import RebalanceListener
from rocket_rebalance.runtime.metrics import ConsumeMetrics
from rocket_rebalance.runtime.service import Service
from rocket_rebalance.runtime.settings import RebalanceListenerError
from rocket_rebalance.runtime.steps import Invoke, Steps

__all__ = ["CallbackRunner", "News", "RebalanceCallbacks"]

_CALLBACK_NAMES = {"assigned": "on_queues_assigned", "revoked": "on_queues_revoked", "lost": "on_queues_lost"}

CallbackRunner = Callable[[Steps[None], str], None]
"""Runs one callback's steps where this consumer runs callbacks (the second argument names it for health)."""


@dataclass
class News:
    """What one batch of the core's actions changed, for the rebalance listener."""

    assigned: set[MessageQueue] = field(default_factory=set)
    revoked: set[MessageQueue] = field(default_factory=set)
    lost: set[MessageQueue] = field(default_factory=set)


class RebalanceCallbacks:
    """The rebalance listener told of every queue's arrival and departure (service context)."""

    def __init__(
        self,
        service: Service,
        listener: RebalanceListener,
        run: CallbackRunner,
        announced: Callable[[frozenset[MessageQueue]], None],
        metrics: ConsumeMetrics | None,
    ) -> None:
        self._service = service
        self._listener = listener
        self._run = run
        self._announced = announced  # ``on_queues_assigned`` returned: the queues' messages may be handed out
        self._metrics = metrics
        self._told: set[MessageQueue] = set()  # queues the listener was told are ours
        self._assigning: set[MessageQueue] = set()  # started, to be told together by _tell_assigned

    def was_told(self, mq: MessageQueue) -> bool:
        return mq in self._told

    def started(self, mq: MessageQueue, news: News) -> None:
        """A queue started: told as assigned with the others of its round."""
        news.assigned.add(mq)
        self._told.add(mq)

    def tell(self, news: News) -> None:
        """What one batch of the core's actions changed: queues lost, then revoked, each as one call; each queue
        once assigned, then once revoked or lost. Queues started are told together a moment later
        (:meth:`_tell_assigned`), since each starts on its own answer: one call for the queues of a round rather
        than one per queue. Queues already waiting to be told are told first, so nothing is revoked before it was
        assigned."""
        lost = news.lost & self._told
        revoked = news.revoked & self._told
        if (lost or news.revoked) and self._assigning:
            self._tell_assigned()
        self._told -= lost | revoked
        if lost:
            self._callback("lost", frozenset(lost), None)
        if news.revoked:
            queues = frozenset(news.revoked)
            self._callback("revoked", frozenset(revoked), lambda: self._service.post(QueuesRevoked(queues)))
        if news.assigned:
            if not self._assigning:
                self._service.post(self._tell_assigned)  # after the answers already waiting in the service context
            self._assigning |= news.assigned

    def _tell_assigned(self) -> None:
        """``on_queues_assigned`` for the queues started since the last call."""
        queues, self._assigning = frozenset(self._assigning), set()
        if queues:
            self._callback("assigned", queues, lambda: self._service.post(partial(self._announced, queues)))

    def _callback(self, name: str, queues: frozenset[MessageQueue], then: Callable[[], None] | None) -> None:
        """Call the listener's ``on_queues_<name>(queues)`` where this consumer calls callbacks, then ``then``
        (also when it raised, or had nothing to tell). Its time goes to the metrics; a failure to health."""
        if not queues:
            if then is not None:
                then()
            return
        method = getattr(self._listener, _CALLBACK_NAMES[name])
        self._run(self._steps(name, method, queues, then), f"rebalance listener {method.__name__}")

    def _steps(
        self, name: str, method: Callable[..., Any], queues: frozenset[MessageQueue], then: Callable[[], None] | None
    ) -> Steps[None]:
        health = self._service.health
        kind = f"rebalance listener {method.__name__}"
        began = time.monotonic()
        try:
            yield Invoke(method, (queues,))
        except Exception as error:
            failure = RebalanceListenerError(f"{type(error).__name__}: {error} ({first_few(sorted(queues))})")
            failure.__cause__ = error
            health.failed(kind, failure, traceback=True)
        else:
            health.ok(kind)
        finally:
            if self._metrics is not None:
                self._metrics.callback(name, time.monotonic() - began)
            if then is not None:
                then()
