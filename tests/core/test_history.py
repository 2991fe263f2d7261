"""Core rule H1: the rounds the core keeps for ``describe()``: trigger, lists, gains and losses, problems, steps."""

from __future__ import annotations

from rocket_rebalance.core import (
    BrokerConnectionLost,
    ConsumerIdsChanged,
    ConsumerListFetched,
    MessagesConsumed,
    MessagesPulled,
    OffsetsPersisted,
    PersistOffsets,
    RouteUpdated,
    Started,
    Tick,
)
from rocket_rebalance.core.history import HISTORY_ROUNDS, LATENCY_BOUNDS, MAX_PROBLEMS, Failure, RoundRecord, Trigger
from tests.core.test_core import ME, OTHER, QS, Drive, T, expected_share, only


def _last(d: Drive) -> RoundRecord:
    record = d.core.history.last
    assert record is not None
    return record


def test_the_first_round_is_recorded_from_its_trigger_to_its_applied_table() -> None:
    d = Drive()
    d(RouteUpdated(T, frozenset(QS), "b0"))  # the engine learns the routes before it starts (Java's start())
    d.answer(d(Started()) + d(ConsumerListFetched(T, (ME, OTHER))))
    record = _last(d)
    assert (record.number, record.trigger, record.retry_reason) == (1, Trigger.START, "")
    assert record.members == {T: (ME, OTHER)} and record.lost == set()
    assert record.gained == expected_share((ME, OTHER))
    assert record.applied_at == record.acquired_at == 0.0 and not record.failed and not record.superseded


def test_a_member_list_that_cannot_be_read_fails_the_round_and_names_the_retry() -> None:
    d = Drive()
    d.start()
    d(ConsumerIdsChanged(), at=3.0)
    d(ConsumerListFetched(T, None), at=3.2)
    failed = _last(d)
    assert (failed.trigger, failed.members, failed.lists_at) == (Trigger.NOTIFY, {T: None}, 3.2)
    assert failed.problems == [f"member list of {T} not read"] and failed.failed
    assert failed.applied_at == 3.2  # nothing to change: the table stays as it was (R3)
    d(Tick(), at=4.2)
    retry = _last(d)
    assert (retry.number, retry.trigger, retry.retry_reason) == (3, Trigger.RETRY, f"member list of {T} not read")


def test_a_refused_lock_keeps_the_round_unapplied_until_a_later_round_gets_it() -> None:
    d = Drive()
    d.start(grant=False)
    first = _last(d)
    assert first.problems == ["lock refused at b0"] and first.applied_at is None
    assert first.waiting == set(QS)
    d.answer(d(Tick(), at=1.0), grant=False)  # the retry round, locks refused again
    d.answer(d(ConsumerListFetched(T, (ME,)), at=1.1), grant=False)
    assert first.superseded and first.applied_at is None
    retry = _last(d)
    assert (retry.trigger, retry.gained, retry.applied_at) == (Trigger.RETRY, set(), None)
    d.answer(d(Tick(), at=2.1), grant=True)  # the queues' own lock retry (L1) is granted
    d.answer(d(ConsumerListFetched(T, (ME,)), at=2.2), grant=True)
    assert d.core.active_queues() == set(QS)
    assert _last(d).applied_at is not None and not _last(d).superseded


def test_a_join_records_the_lost_queues_and_their_release() -> None:
    d = Drive()
    d.start(cids=(ME,))
    for mq in QS:  # consumed past the stored offset: each release must persist before the queue is dropped
        d(MessagesPulled(mq, (5,), 6), at=1.0)
        d(MessagesConsumed(mq, (5,)), at=1.0)
    actions = d.round((ME, OTHER), at=5.0)
    joined = _last(d)
    lost = set(QS) - expected_share((ME, OTHER))
    assert (joined.trigger, joined.lost, joined.gained, joined.applied_at) == (Trigger.NOTIFY, lost, set(), None)
    assert joined.waiting == lost
    [persist] = only(actions, PersistOffsets)
    d(OffsetsPersisted(dict(persist.offsets)), at=5.3)
    assert (joined.released_at, joined.applied_at) == (5.3, 5.3)


def test_the_periodic_round_is_a_timer_and_the_history_is_bounded() -> None:
    d = Drive()
    d.start()
    for number in range(HISTORY_ROUNDS + 3):
        at = 20.0 * (number + 1)
        d(Tick(), at=at)
        d(ConsumerListFetched(T, (ME,)), at=at)
    assert len(d.core.history.rounds) == HISTORY_ROUNDS
    assert _last(d).trigger == Trigger.TIMER and _last(d).number == HISTORY_ROUNDS + 4


def test_a_round_keeps_a_bounded_number_of_problems() -> None:
    record = RoundRecord(1, Trigger.START, 0.0)
    for number in range(MAX_PROBLEMS + 5):
        record.problem(f"problem {number}", "kind")
        record.problem(f"problem {number}", "kind")  # the same twice counts once
    assert len(record.problems) == MAX_PROBLEMS and record.problems_dropped == 5


# ---------------------------------------------------------------------------------------- totals (for metrics)


def test_the_totals_count_every_round_by_trigger_beyond_the_rounds_kept() -> None:
    d = Drive(fenced_handover=False, push_consumer=False)  # no locks to renew, no pulls to expire: only timers
    d.start()
    for number in range(HISTORY_ROUNDS + 3):
        at = 20.0 * (number + 1)
        d(Tick(), at=at)
        d(ConsumerListFetched(T, (ME,)), at=at)
    totals = d.core.history.totals
    assert totals.rounds == {Trigger.ROUTE: 1, Trigger.TIMER: HISTORY_ROUNDS + 3}  # routes came after the start
    assert totals.applied == HISTORY_ROUNDS + 4 and sum(totals.latency_counts) == totals.applied
    assert totals.assigned == {T: len(QS)} and totals.revoked == totals.lost == totals.failed == {}
    assert totals.last_applied_at == 20.0 * (HISTORY_ROUNDS + 3)
    assert totals.last_change is not None and totals.last_change.number == 1  # unchanged rounds change nothing
    assert totals.last_change.cause == "routes changed"


def test_a_failed_list_counts_once_per_round_and_names_the_retry() -> None:
    d = Drive()
    d.start()
    d(ConsumerIdsChanged(), at=3.0)
    d(ConsumerListFetched(T, None), at=3.2)  # reported twice for the round (the list and R3): counted once
    totals = d.core.history.totals
    assert totals.failed == {Failure.MEMBER_LIST: 1}
    d(Tick(), at=4.2)
    retry = _last(d)
    assert (retry.retry_kind, retry.cause) == (Failure.MEMBER_LIST, f"retry: {Failure.MEMBER_LIST}")
    d(ConsumerListFetched(T, None), at=4.3)
    assert totals.failed == {Failure.MEMBER_LIST: 2}
    assert totals.rounds == {Trigger.ROUTE: 1, Trigger.NOTIFY: 1, Trigger.RETRY: 1}
    assert totals.last_change is retry


def test_refused_locks_are_counted_per_queue_and_fail_their_rounds() -> None:
    d = Drive()
    d.start(grant=False)
    totals = d.core.history.totals
    assert totals.lock_refusals == {T: len(QS)} and totals.failed == {Failure.LOCK_REFUSED: 1}
    assert totals.applied == 0 and totals.last_applied_at is None  # the table is not applied


def test_a_join_counts_the_revoked_queues_and_the_latency_from_the_notification() -> None:
    d = Drive()
    d.start(cids=(ME,))
    for mq in QS:
        d(MessagesPulled(mq, (5,), 6), at=0.2)
        d(MessagesConsumed(mq, (5,)), at=0.2)
    d(ConsumerIdsChanged(), at=0.5)  # within the minimum interval of the first round: the round waits for it
    assert _last(d).number == 1
    actions = d.answer(d(Tick(), at=1.0) + d(ConsumerListFetched(T, (ME, OTHER)), at=1.0))
    joined = _last(d)
    assert (joined.trigger, joined.requested_at, joined.cause) == (Trigger.NOTIFY, 0.5, "members changed")
    [persist] = only(actions, PersistOffsets)
    d(OffsetsPersisted(dict(persist.offsets)), at=1.3)
    totals = d.core.history.totals
    revoked = len(QS) - len(expected_share((ME, OTHER)))
    assert (totals.assigned, totals.revoked, totals.lost) == ({T: len(QS)}, {T: revoked}, {})
    assert joined.latency == 1.3 - 0.5 and totals.last_applied_at == 1.3 and totals.last_change is joined
    bucket = next(i for i, bound in enumerate(LATENCY_BOUNDS) if joined.latency <= bound)
    assert totals.latency_counts[bucket] >= 1 and abs(totals.latency_sum - joined.latency) < 1e-9


def test_queues_dropped_without_a_handover_are_lost() -> None:
    d = Drive()
    d.start()
    d(BrokerConnectionLost("b0", 1), at=3.0)
    totals = d.core.history.totals
    assert (totals.lost, totals.revoked) == ({T: len(QS)}, {})
    assert totals.failed == {Failure.CONNECTION: 1, Failure.LOCK_LOST: 1}
