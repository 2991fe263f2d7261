"""A logging filter that lets through at most one line of each kind per interval, and counts the rest.

A client sending junk in a loop (or with a wrong token) would otherwise write one line per request, burying
everything else and filling the disk. A kind is the logger, the level and the message template (before its
arguments are filled in), so "refused an undecodable request to %s from %s" is one kind whatever the method or
peer. Nothing goes unsaid: the next line of a kind let through says how many were held back since the last, and
:meth:`RepeatFilter.flush` reports what is still held back when the stub stops.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

MAX_KINDS = 1024  # beyond it, kinds with nothing held back are forgotten (templates from other libraries vary)
_UNTHROTTLED = "repeat_filter_unthrottled"


@dataclass
class _Seen:
    last: float
    suppressed: int = 0


class RepeatFilter(logging.Filter):
    """Attach to a handler; thread-safe. ``clock`` returns monotonic seconds (tests pass their own)."""

    def __init__(self, interval: float, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._kinds: dict[tuple[str, int, str], _Seen] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, _UNTHROTTLED, False):
            return True
        kind = (record.name, record.levelno, str(record.msg))
        with self._lock:
            now = self._clock()
            seen = self._kinds.get(kind)
            if seen is not None and now - seen.last < self._interval:
                seen.suppressed += 1
                return False
            held_back = seen.suppressed if seen is not None else 0
            if seen is None and len(self._kinds) >= MAX_KINDS:
                self._kinds = {k: s for k, s in self._kinds.items() if s.suppressed}
            self._kinds[kind] = _Seen(now)
        if held_back:
            record.msg = f"{record.getMessage()} ({held_back} more like this suppressed)"
            record.args = None
        return True

    def flush(self, logger: logging.Logger) -> None:
        """Log, on ``logger``, how many lines of each kind are still held back (the stub is stopping)."""
        with self._lock:
            held = [(kind, seen.suppressed) for kind, seen in self._kinds.items() if seen.suppressed]
            for _, seen in self._kinds.items():
                seen.suppressed = 0
        for (name, level, template), count in held:
            logger.log(
                level, "%d more lines like %r (%s) were suppressed", count, template, name, extra={_UNTHROTTLED: True}
            )
