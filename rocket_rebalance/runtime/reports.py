"""The engine's part that says what the core knows is wrong but no request failed for: queues that wait for a
lock (core rule L7), releases that cannot save their offset (L8), a queue handed over without it, a client ID
shared by several consumers (L6).

With the fence such a queue is consumed by nobody meanwhile, and nothing else would say so: each becomes a
health problem (``on_error``, the log, ``healthy``) that clears once nothing of its kind waits.
"""

from __future__ import annotations

import logging

from rocket_rebalance.core import RebalanceConfig, RebalanceCore
from rocket_rebalance.model import MessageQueue, first_few
from rocket_rebalance.runtime.health import Health
from rocket_rebalance.runtime.settings import (
    HANDOVER_KIND,
    LOCK_WAIT_KIND,
    ClientIdSharedError,
    EngineSettings,
    HandoverStuckError,
    HandoverWithoutOffsetError,
    LockWaitError,
)

__all__ = ["Reports"]


class Reports:
    """The core's waits and warnings, to health (service context: it reads the core)."""

    def __init__(self, core: RebalanceCore, config: RebalanceConfig, settings: EngineSettings, health: Health) -> None:
        self._core = core
        self._config = config
        self._settings = settings
        self._health = health

    def waits(self, now: float) -> None:
        """Say which queues wait (after a tick, a lock's answer or an offset write's); each report clears once
        nothing of its kind waits."""
        self._lock_waits(now)
        self._stuck_releases(now)

    def _lock_waits(self, now: float) -> None:
        """Queues allocated to us whose lock the broker has refused for ``lock_wait_report`` seconds or more (L7)."""
        waits = {mq: now - since for mq, since in self._core.lock_waits().items()}
        long = sorted(mq for mq, waited in waits.items() if waited >= self._settings.lock_wait_report)
        if not long:
            self._health.ok(LOCK_WAIT_KIND)
            return
        self._health.failed(
            LOCK_WAIT_KIND,
            LockWaitError(
                f"{len(long)} queues allocated to us are consumed by nobody: the broker has refused their locks "
                f"for up to {max(waits[mq] for mq in long):.0f} s ({first_few(long)}). Another consumer holds "
                "them that the broker still lists as a member (one that is leaving hands them over within its "
                "drain timeout; a frozen one keeps them until it goes on or the broker drops it), or one this "
                "consumer never saw listed, whose locks lapse with the broker's lock lifetime (60 s); the broker "
                "does not say which consumer it is"
            ),
        )

    def _stuck_releases(self, now: float) -> None:
        """Queues we are giving up whose offset cannot be saved (L8)."""
        stuck = self._core.stuck_releases()
        if not stuck:
            self._health.ok(HANDOVER_KIND)
            return
        failures = max(count for _, count in stuck.values())
        self._health.failed(
            HANDOVER_KIND,
            HandoverStuckError(
                f"{len(stuck)} queues we are giving up cannot be handed over: their offsets cannot be saved "
                f"({failures} failed writes over {now - min(since for since, _ in stuck.values()):.0f} s; "
                f"{first_few(sorted(stuck))}). They are consumed by nobody meanwhile; after "
                f"{self._config.handover_persist_attempts} failed writes each is handed over without its offset"
            ),
        )

    def handover_without_offset(self, mq: MessageQueue, offset: int, saved: int | None, attempts: int) -> None:
        """HandoverWithoutOffset (L8): the next owner re-delivers, and an operator must hear of it."""
        since = "where it starts (no offset was saved)" if saved is None else f"offset {saved}, the last saved"
        error = HandoverWithoutOffsetError(
            f"{mq} handed over without its offset {offset} after {attempts} failed writes: the next owner "
            f"re-delivers from {since}"
        )
        self._health.failed("persist offsets", error, logging.ERROR)

    def client_id_shared(self, topic: str, client_id: str, consumers: int, withheld: bool) -> None:
        """ClientIdShared (L6): ``consumers`` is how many use our ID in the topic's list, 1 meaning resolved."""
        kind = f"client ID {client_id} in {topic}"
        if consumers == 1:
            self._health.ok(kind)
            return
        effect = (
            "their queues of this topic are not consumed until only one is left"
            if withheld
            else "they consume the same queues twice and leave others unconsumed (the fenced handover prevents it)"
        )
        error = ClientIdSharedError(
            f"used by {consumers} consumers of group {self._config.consumer_group}: {effect}; give each consumer "
            "its own instance name"
        )
        self._health.failed(kind, error, level=logging.ERROR)
