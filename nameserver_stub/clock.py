"""Time sources: the stub reads time only through a :class:`Clock`, so tests can drive expiry by hand.

Two readings are needed: a monotonic one for expiry and lock lifetimes (immune to wall-clock jumps), and the
wall clock in milliseconds for message store timestamps (what SearchOffsetByTimestamp compares against).
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """What the stub needs to know about time."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards."""
        ...

    def time_ms(self) -> int:
        """Milliseconds since the Unix epoch."""
        ...


class SystemClock:
    """The real clocks."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to, for deterministic expiry tests (thread-safe)."""

    def __init__(self, start: float = 1000.0, start_ms: int = 1_700_000_000_000) -> None:
        self._lock = threading.Lock()
        self._now = start
        self._ms = start_ms

    def monotonic(self) -> float:
        with self._lock:
            return self._now

    def time_ms(self) -> int:
        with self._lock:
            return self._ms

    def advance(self, seconds: float) -> None:
        """Move both readings forward by ``seconds``."""
        if seconds < 0:
            raise ValueError("a clock does not go backwards")
        with self._lock:
            self._now += seconds
            self._ms += round(seconds * 1000)
