"""Injected faults at one broker, for tests that need split or late consumer views.

Faults exist only when the server was started with fault injection enabled; the admin service checks that.
A fault names one client, or every client when its client ID is empty.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class FaultKind(IntEnum):
    """Same numbers as the wire's FaultKind."""

    DROP_HEARTBEATS = 1
    DROP_NOTIFICATIONS = 2
    DELAY_NOTIFICATIONS = 3


MAX_DELAY_MS = 3_600_000


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    client_id: str = ""  # empty: every client
    delay_ms: int = 0

    def applies_to(self, client_id: str) -> bool:
        return not self.client_id or self.client_id == client_id


class FaultTable:
    """The faults in force at one broker. Not thread-safe: the cluster lock guards it."""

    def __init__(self) -> None:
        self._faults: dict[tuple[FaultKind, str], Fault] = {}

    def add(self, fault: Fault) -> None:
        """Add a fault; the same kind for the same client replaces the earlier one (a new delay)."""
        self._faults[(fault.kind, fault.client_id)] = fault

    def clear(self) -> None:
        self._faults.clear()

    def faults(self) -> list[Fault]:
        return list(self._faults.values())

    def drops_heartbeat(self, client_id: str) -> bool:
        return self._matches(FaultKind.DROP_HEARTBEATS, client_id)

    def drops_notification(self, client_id: str) -> bool:
        return self._matches(FaultKind.DROP_NOTIFICATIONS, client_id)

    def notification_delay(self, client_id: str) -> float:
        """Seconds to hold back a notification to the client (the largest matching delay)."""
        delays = [
            fault.delay_ms
            for fault in self._faults.values()
            if fault.kind is FaultKind.DELAY_NOTIFICATIONS and fault.applies_to(client_id)
        ]
        return max(delays, default=0) / 1000

    def _matches(self, kind: FaultKind, client_id: str) -> bool:
        return any(fault.kind is kind and fault.applies_to(client_id) for fault in self._faults.values())
