"""The service interface: what the engine's parts ask of the engine, and nothing more.

The engine is split by job into parts (:mod:`.brokers`, :mod:`.pulling`, :mod:`.dispatch`, :mod:`.polling`,
:mod:`.callbacks`), each owning its state. They all live in one *service context* (the threaded engine's service
thread, the asyncio engine's loop), where the core is read and fed, and they reach the engine only through this
interface: ``post`` (an event or a callback for the service context, from anywhere), ``later`` (a timer there),
``spawn`` (steps in the background on a bounded pool, their outcome handed back there), ``handle`` (feed the core
from the service context itself), ``start_pull`` (one long poll, answered there) and ``messages_ready`` (a pull
consumer's ``poll()`` may find something). A part never imports the driver, so a newcomer fixing push dispatch
reads the interface and that one part, not the whole engine.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol

from rocket_rebalance.core import RebalanceConfig, RebalanceCore
from rocket_rebalance.core.events import Event
from rocket_rebalance.model import MessageQueue
from rocket_rebalance.runtime.health import Health
from rocket_rebalance.runtime.settings import EngineSettings
from rocket_rebalance.runtime.steps import Steps
from rocket_rebalance.runtime.transport import PullResult, TransportError
from rocket_rebalance.subscription import SubscriptionExpression

__all__ = ["Pool", "PullDone", "Service"]

Pool = Literal["io", "broker", "consume", "callback"]
"""Where background steps run: requests of the core (``io``), calls to every broker (``broker``: heartbeats),
the listener (``consume``), rebalance callbacks (``callback``: one at a time, in order)."""

PullDone = Callable[[PullResult | TransportError], None]
"""A pull's answer, called in the service context."""


class Service(Protocol):
    """The engine as its parts see it. Everything but ``post`` and ``closing`` is for the service context."""

    core: RebalanceCore
    config: RebalanceConfig
    settings: EngineSettings
    health: Health
    expressions: Mapping[str, SubscriptionExpression]
    """Each subscribed topic's expression (a topic not in it is subscribed with ``*``); replaced, never changed
    in place, so a heartbeat on its way keeps the one it was built with."""
    closing: threading.Event
    """Set once the engine shuts its wire down: no new request, heartbeat, pull or reconnect (read from pool
    threads too)."""

    def post(self, item: Event | Callable[[], None]) -> None:
        """Hand an event (or a callback) to the service context, from anywhere; it runs there later, in order."""

    def later(self, delay: float, callback: Callable[[], None]) -> None:
        """Run ``callback`` in the service context after ``delay`` seconds."""

    def spawn(self, pool: Pool, what: str, steps: Steps[Any], then: Callable[[Any], None] | None = None) -> bool:
        """Run ``steps`` in the background on ``pool``, then ``then(outcome)`` there; an exception they let
        through is reported as ``unexpected(what, error)`` and ``then`` is not called. False (nothing run) once the
        engine is shut down."""

    def handle(self, event: Event) -> None:
        """Feed the core an event from the service context itself, and carry out its actions."""

    def unexpected(self, kind: str, error: Exception) -> None:
        """An exception no code expected: an ERROR with its traceback, a health problem and ``on_error``."""

    def start_pull(self, mq: MessageQueue, offset: int, wait_ms: int, done: PullDone) -> None:
        """Start one long-poll pull; its answer (or ``TransportError``) goes to ``done`` in the service context."""

    def messages_ready(self) -> None:
        """A pull consumer's ``poll()`` may find something now (messages, or a callback to run): wake it."""
