"""Offset bookkeeping for one owned queue: which messages are in flight, and the offset it is safe to commit.

A message is in flight from the moment it is pulled until the listener is done with it; while any is, the
commit offset is the smallest of them (committing past it would lose it if we crashed), else the next offset to
pull. Committed offsets only move forward, so a late or duplicated report can never rewind the queue. In-flight
messages are kept in a ``SortedDict`` (offset -> handed out to the listener or not), so the smallest is O(1) and
each report is O(log n), as Java's ``ProcessQueue`` does with its ``TreeMap``.
"""

from __future__ import annotations

from collections.abc import Iterable

from sortedcontainers import SortedDict  # type: ignore[import-untyped]

from rocket_rebalance.model import MessageQueue

__all__ = ["ProcessQueue"]


class ProcessQueue:
    """The core's view of one queue it consumes: in-flight messages and the commit offset.

    ``dispatched_count`` counts in-flight messages already handed to the listener; a fenced handover waits for it
    to reach zero. :meth:`freeze` pins the offset (release or OFFSET_ILLEGAL) so nothing moves it afterwards.
    """

    __slots__ = ("mq", "_in_flight", "_dispatched", "_next_offset", "_committed", "_frozen", "last_pull")

    def __init__(self, mq: MessageQueue, start_offset: int, now: float) -> None:
        if start_offset < 0:
            raise ValueError(f"start offset of {mq} must be >= 0, got {start_offset}")
        self.mq = mq
        self._in_flight: SortedDict = SortedDict()
        self._dispatched = 0
        self._next_offset = start_offset
        self._committed = start_offset
        self._frozen = False
        self.last_pull = now

    @property
    def commit_offset(self) -> int:
        """The offset to persist: never behind what was committed before, never past a message in flight."""
        return self._committed

    @property
    def next_offset(self) -> int:
        """The next offset the runtime will pull (what a queue with nothing in flight commits)."""
        return self._next_offset

    @property
    def frozen(self) -> bool:
        return self._frozen

    @property
    def in_flight_count(self) -> int:
        return len(self._in_flight)

    @property
    def dispatched_count(self) -> int:
        return self._dispatched

    def in_flight(self) -> list[int]:
        """Offsets in flight, smallest first (for inspection and tests)."""
        return list(self._in_flight.keys())

    def handed_out(self) -> list[int]:
        """Offsets in flight that the listener has, smallest first (running info's orderly "transaction" range)."""
        return [offset for offset, dispatched in self._in_flight.items() if dispatched]

    def _recompute(self) -> None:
        if self._frozen:
            return
        candidate = self._in_flight.keys()[0] if self._in_flight else self._next_offset
        if candidate > self._committed:
            self._committed = candidate

    def on_pulled(self, offsets: Iterable[int], next_offset: int, now: float) -> None:
        """Buffer pulled messages; offsets below the commit offset (already done) are ignored."""
        self.last_pull = now
        if self._frozen:
            return
        highest = self._next_offset
        for offset in offsets:
            if offset >= self._committed and offset not in self._in_flight:
                self._in_flight[offset] = False
            highest = max(highest, offset + 1)
        self._next_offset = max(highest, next_offset)
        self._recompute()

    def on_dispatched(self, offsets: Iterable[int]) -> None:
        """Mark buffered messages as handed to the listener; unknown offsets are ignored."""
        for offset in offsets:
            if self._in_flight.get(offset) is False:
                self._in_flight[offset] = True
                self._dispatched += 1

    def on_consumed(self, offsets: Iterable[int]) -> None:
        """The listener is done with these messages: they leave the in-flight set and the offset may advance."""
        for offset in offsets:
            dispatched = self._in_flight.pop(offset, None)
            if dispatched:
                self._dispatched -= 1
        self._recompute()

    def freeze(self, offset: int | None = None) -> int:
        """Pin the commit offset (the current one, or ``offset`` as the broker dictates) and return it."""
        if offset is not None:
            self._committed = offset
        self._frozen = True
        return self._committed
