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
