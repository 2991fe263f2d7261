"""The commit offset of a process queue: smallest offset in flight, else the next one; forward only."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocket_rebalance.core import ProcessQueue
from rocket_rebalance.model import MessageQueue

MQ = MessageQueue("T", "b0", 0)


def test_commit_is_the_smallest_in_flight_then_the_next_offset() -> None:
    pq = ProcessQueue(MQ, 10, now=0.0)
    assert pq.commit_offset == 10
    pq.on_pulled((10, 11, 12), 13, now=1.0)
    pq.on_dispatched((10, 11, 12))
    pq.on_consumed((11, 12))
    assert pq.commit_offset == 10 and pq.in_flight() == [10]
    pq.on_consumed((10,))
    assert pq.commit_offset == 13 and pq.in_flight_count == 0 and pq.dispatched_count == 0


def test_an_empty_pull_moves_the_next_offset_and_refreshes_the_pull_time() -> None:
    pq = ProcessQueue(MQ, 4, now=0.0)
    pq.on_pulled((), 9, now=5.0)  # filtered messages: nothing to consume, the offset still moves
    assert pq.commit_offset == 9 and pq.last_pull == 5.0


def test_late_and_duplicate_reports_never_move_it_back() -> None:
    pq = ProcessQueue(MQ, 0, now=0.0)
    pq.on_pulled((0, 1), 2, now=0.0)
    pq.on_consumed((0, 1))
    assert pq.commit_offset == 2
    pq.on_pulled((0, 1), 2, now=1.0)  # a duplicated pull below the commit offset is ignored
    assert pq.commit_offset == 2 and pq.in_flight_count == 0
    pq.on_consumed((7,))
    pq.on_dispatched((8,))
    assert pq.commit_offset == 2 and pq.dispatched_count == 0


def test_freeze_pins_the_offset() -> None:
    pq = ProcessQueue(MQ, 0, now=0.0)
    pq.on_pulled((0, 1), 2, now=0.0)
    assert pq.freeze() == 0
    pq.on_consumed((0, 1))
    assert pq.commit_offset == 0 and pq.frozen
    assert ProcessQueue(MQ, 5, now=0.0).freeze(3) == 3  # OFFSET_ILLEGAL: the broker's word


def test_negative_start_is_refused() -> None:
    with pytest.raises(ValueError):
        ProcessQueue(MQ, -1, now=0.0)


@given(st.lists(st.tuples(st.sampled_from(["pull", "dispatch", "consume"]), st.integers(1, 4)), max_size=60))
def test_commit_never_passes_an_unconsumed_message_and_never_goes_back(steps: list[tuple[str, int]]) -> None:
    pq = ProcessQueue(MQ, 0, now=0.0)
    pulled: list[int] = []
    dispatched: set[int] = set()
    consumed: set[int] = set()
    last = 0
    for kind, n in steps:
        if kind == "pull":
            start = pq.next_offset
            batch = tuple(range(start, start + n))
            pulled.extend(batch)
            pq.on_pulled(batch, start + n, now=0.0)
        elif kind == "dispatch":
            ready = [o for o in pulled if o not in dispatched][:n]
            dispatched.update(ready)
            pq.on_dispatched(ready)
        else:
            done = sorted(dispatched - consumed)[-n:]  # out of order on purpose: the largest first
            consumed.update(done)
            pq.on_consumed(done)
        unconsumed = [o for o in pulled if o not in consumed]
        assert pq.commit_offset == (min(unconsumed) if unconsumed else pq.next_offset)
        assert pq.commit_offset >= last
        assert pq.dispatched_count == len(dispatched - consumed)
        last = pq.commit_offset


class _Reference:
    """The process queue's rules written the plain way (a dict and ``min``), to hold the fast one to them."""

    def __init__(self, start: int) -> None:
        self.in_flight: dict[int, bool] = {}
        self.next_offset = self.committed = start
        self.frozen = False

    def recompute(self) -> None:
        candidate = min(self.in_flight, default=self.next_offset)
        if not self.frozen and candidate > self.committed:
            self.committed = candidate

    def pulled(self, offsets: list[int], next_offset: int) -> None:
        if self.frozen:
            return
        for offset in offsets:
            if offset >= self.committed and offset not in self.in_flight:
                self.in_flight[offset] = False
        self.next_offset = max([self.next_offset, next_offset, *(o + 1 for o in offsets)])
        self.recompute()

    def mark(self, offsets: list[int], was: bool) -> None:
        for offset in offsets:
            if self.in_flight.get(offset) is was:
                self.in_flight[offset] = not was

    def consumed(self, offsets: list[int]) -> None:
        for offset in offsets:
            self.in_flight.pop(offset, None)
        self.recompute()

    def seek(self, offset: int) -> None:
        if self.frozen:
            return
        self.in_flight.clear()
        self.next_offset = offset
        self.recompute()


_OFFSETS = st.lists(st.integers(0, 40), max_size=8)
_ASCENDING = st.one_of(  # what pulls answer (the process queue's fast path): runs, and ascending with gaps
    st.tuples(st.integers(0, 40), st.integers(0, 8)).map(lambda run: list(range(run[0], run[0] + run[1]))),
    st.sets(st.integers(0, 40), max_size=8).map(sorted),
)


@given(
    st.integers(0, 10),
    st.lists(
        st.one_of(
            st.tuples(st.just("pull"), _OFFSETS, st.integers(0, 45)),
            st.tuples(st.just("pull"), _ASCENDING, st.integers(0, 45)),
            st.tuples(st.sampled_from(["dispatch", "return", "consume"]), _OFFSETS, st.just(0)),
            st.tuples(st.just("freeze"), st.just([]), st.just(0)),
            st.tuples(st.just("seek"), st.just([]), st.integers(0, 45)),
        ),
        max_size=40,
    ),
)
def test_it_follows_the_plain_rules_whatever_the_order_of_reports(
    start: int, steps: list[tuple[str, list[int], int]]
) -> None:
    """Pulls out of order, duplicated or below the commit offset, reports of unknown offsets, messages returned
    undelivered, seeks either way (O4): the deque-and-dict process queue answers as the plain model does, span
    included."""
    pq, reference = ProcessQueue(MQ, start, now=0.0), _Reference(start)
    for kind, offsets, next_offset in steps:
        if kind == "pull":
            pq.on_pulled(tuple(offsets) if next_offset % 2 else offsets, next_offset, now=0.0)
            reference.pulled(offsets, next_offset)
        elif kind == "dispatch":
            pq.on_dispatched(offsets)
            reference.mark(offsets, was=False)
        elif kind == "return":
            pq.on_returned(offsets)
            reference.mark(offsets, was=True)
        elif kind == "consume":
            pq.on_consumed(offsets)
            reference.consumed(offsets)
        elif kind == "seek":
            pq.seek(next_offset)
            reference.seek(next_offset)
        else:
            pq.freeze()
            reference.frozen = True
        assert pq.commit_offset == reference.committed
        assert pq.next_offset == reference.next_offset
        assert pq.in_flight() == sorted(reference.in_flight)
        assert pq.dispatched_count == sum(reference.in_flight.values())
        flying = reference.in_flight
        assert pq.span == (max(flying) - min(flying) if flying else 0)


def test_a_finished_offset_pulled_again_is_in_flight_once() -> None:
    pq = ProcessQueue(MQ, 0, now=0.0)
    pq.on_pulled((0, 1, 2), 3, now=0.0)
    pq.on_consumed((1,))
    pq.on_pulled((1,), 3, now=0.0)  # still above the commit offset (0): in flight again, as Java's TreeMap.put
    assert pq.in_flight() == [0, 1, 2] and pq.in_flight_count == 3 and pq.span == 2


def test_a_seek_goes_on_from_its_offset_and_the_commit_never_goes_back() -> None:
    pq = ProcessQueue(MQ, 0, now=0.0)
    pq.on_pulled((0, 1, 2), 3, now=0.0)
    pq.on_dispatched((0,))
    pq.on_consumed((0, 1, 2))
    pq.seek(1)  # backwards: re-read, committed stays
    assert pq.commit_offset == 3 and pq.next_offset == 1 and pq.in_flight() == []
    pq.on_pulled((1, 2, 3), 4, now=0.0)
    assert pq.in_flight() == [3] and pq.commit_offset == 3  # below the commit offset: done already
    pq.on_dispatched((3,))
    pq.seek(9)  # forwards: what was out is forgotten, the commit moves up to the seek
    assert pq.commit_offset == 9 and pq.dispatched_count == 0
    with pytest.raises(ValueError):
        pq.seek(-1)
