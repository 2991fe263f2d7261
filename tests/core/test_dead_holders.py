"""Core rule L9, one scenario each: a holder that is gone gives way, and only one that is gone.

The new owner's half (a refused lock, a client ID missing from the member lists for the grace, one
``ReleaseDeadHolders`` for the broker, a lock at once after a release) and the holder's half (after a lost
connection nothing is locked at that broker until a heartbeat sent after the loss succeeded and ``rejoin_delay``
passed; answers from before the loss are ignored). The state-machine worlds ``RocketMQFenced``/``RocketMQOrderly``
check the same rules against random interleavings.
"""

from __future__ import annotations

from rocket_rebalance.core import (
    BrokerConnectionLost,
    BrokerRegistered,
    DeadHoldersChecked,
    DropQueue,
    LockQueues,
    LockResult,
    QueueState,
    ReadOffset,
    ReleaseDeadHolders,
    StartQueue,
    StopQueue,
    Tick,
    UnlockQueues,
)
from tests.core.test_core import ME, OTHER, QS, Drive, only

GONE = "10.0.0.9@9"


def _orphaned(**options: object) -> Drive:
    """We run beside GONE, which held half the queues; then GONE vanishes from the lists at t=10 and the broker
    still refuses its queues (it keeps a dead member's locks for their lifetime)."""
    d = Drive(**options)
    d.start((ME, GONE))
    d.round((ME, GONE), at=5.0)
    d.round((ME,), at=10.0, grant=False)
    return d


def test_a_member_missing_for_the_grace_has_its_locks_released_and_the_queues_start() -> None:
    d = _orphaned()
    refused = set(d.core.lock_waits())
    assert refused and not only(d.log, ReleaseDeadHolders)  # missing for 0 s: not yet
    relock = only(d(Tick(), at=10.5), LockQueues)
    actions = d(LockResult(frozenset(relock[0].queues), frozenset(), relock[0].epoch))
    [check] = only(actions, ReleaseDeadHolders)
    assert check.broker_name == "b0" and check.client_ids == (GONE,) and set(check.queues) == refused
    assert ME not in check.client_ids
    again = only(d(DeadHoldersChecked("b0", frozenset(check.queues), frozenset({GONE}))), LockQueues)
    assert again and set(again[0].queues) == refused  # at once, not after the retry interval
    started = d.answer(again)
    assert {a.mq for a in only(started, StartQueue)} == refused


def test_a_holder_the_broker_still_lists_keeps_its_queues() -> None:
    d = _orphaned()
    relock = only(d(Tick(), at=10.5), LockQueues)
    [check] = only(d(LockResult(frozenset(relock[0].queues), frozenset(), relock[0].epoch)), ReleaseDeadHolders)
    after = d(DeadHoldersChecked("b0", frozenset(check.queues), frozenset()))  # b listed it: nothing released
    assert not only(after, LockQueues) and set(d.core.lock_waits()) == set(check.queues)
    # a check that released nothing is not repeated for four lock retries: the holder is alive
    relock = only(d(Tick(), at=11.0), LockQueues)
    assert not only(d(LockResult(frozenset(relock[0].queues), frozenset(), relock[0].epoch)), ReleaseDeadHolders)
    relock = only(d(Tick(), at=12.5), LockQueues)
    assert only(d(LockResult(frozenset(relock[0].queues), frozenset(), relock[0].epoch)), ReleaseDeadHolders)


def test_every_refused_queue_of_the_broker_is_checked_and_a_release_allows_another_check() -> None:
    """Refusals come in batches; the dead holder may hold queues of a later batch too."""
    d = _orphaned()
    relock = only(d(Tick(), at=10.5), LockQueues)
    first = relock[0].queues[:1]
    [check] = only(d(LockResult(frozenset(first), frozenset(), relock[0].epoch)), ReleaseDeadHolders)
    assert set(check.queues) == set(d.core.lock_waits())  # every refused queue of b0, not just this batch's
    d(DeadHoldersChecked("b0", frozenset(first), frozenset({GONE})))
    rest = relock[0].queues[1:]
    later = d(LockResult(frozenset(rest), frozenset(), relock[0].epoch))
    [again] = only(later, ReleaseDeadHolders)
    assert again.client_ids == (GONE,)


def test_queues_refused_again_after_a_release_are_not_checked_again_at_once() -> None:
    """The member released held none of them (someone b lists does): checking again at once would repeat the list,
    the unlock and the lock at the broker's pace for as long as that holder keeps them."""
    d = _orphaned()
    relock = only(d(Tick(), at=10.5), LockQueues)
    [check] = only(d(LockResult(frozenset(relock[0].queues), frozenset(), relock[0].epoch)), ReleaseDeadHolders)
    [again] = only(d(DeadHoldersChecked("b0", frozenset(check.queues), frozenset({GONE}))), LockQueues)
    assert not only(d(LockResult(frozenset(again.queues), frozenset(), again.epoch)), ReleaseDeadHolders)
    relock = only(d(Tick(), at=11.0), LockQueues)
    assert not only(d(LockResult(frozenset(relock[0].queues), frozenset(), relock[0].epoch)), ReleaseDeadHolders)
    relock = only(d(Tick(), at=12.5), LockQueues)  # four lock retries after the check
    assert only(d(LockResult(frozenset(relock[0].queues), frozenset(), relock[0].epoch)), ReleaseDeadHolders)


def test_one_check_per_broker_is_on_the_way() -> None:
    d = _orphaned()
    relock = only(d(Tick(), at=10.5), LockQueues)
    assert only(d(LockResult(frozenset(relock[0].queues), frozenset(), relock[0].epoch)), ReleaseDeadHolders)
    relock = only(d(Tick(), at=11.0), LockQueues)
    assert not only(d(LockResult(frozenset(relock[0].queues), frozenset(), relock[0].epoch)), ReleaseDeadHolders)


def test_without_recover_dead_holders_the_queues_wait_for_the_lock_lifetime() -> None:
    d = _orphaned(recover_dead_holders=False)
    for at in (10.5, 11.0, 15.0):
        relock = only(d(Tick(), at=at), LockQueues)
        assert not only(d(LockResult(frozenset(relock[0].queues), frozenset(), relock[0].epoch)), ReleaseDeadHolders)


def test_members_never_seen_are_not_candidates_and_long_gone_ones_are_forgotten() -> None:
    d = Drive(broker_lock_lifetime=60.0)
    d.start((ME,), grant=False)  # a lock refused by a holder we never saw: nobody to release
    relock = only(d(Tick(), at=1.0), LockQueues)
    assert not only(d(LockResult(frozenset(relock[0].queues), frozenset(), relock[0].epoch)), ReleaseDeadHolders)
    d = _orphaned()
    d.round((ME, OTHER), at=80.0, grant=False)  # GONE missing for 70 s: its broker locks have lapsed by now
    relock = only(d(Tick(), at=80.5), LockQueues)
    actions = d(LockResult(frozenset(relock[0].queues), frozenset(), relock[0].epoch))
    assert not only(actions, ReleaseDeadHolders)


def test_a_lost_connection_drops_the_brokers_queues_and_gates_locking_until_registered_and_the_delay() -> None:
    d = Drive(rejoin_delay=2.0)
    d.start()
    assert d.core.active_queues() == frozenset(QS)
    lost = d(BrokerConnectionLost("b0", 1), at=3.0)
    assert {a.mq for a in only(lost, StopQueue)} == set(QS) and {a.mq for a in only(lost, DropQueue)} == set(QS)
    assert not d.core.is_dispatchable(QS[0], 3.0)
    actions = d.round((ME,), at=4.5)  # a round wants them back: no lock while the broker has not listed us again
    assert not only(actions, LockQueues) and not only(d(Tick(), at=20.0), LockQueues)
    assert not only(d(BrokerRegistered("b0", 0), at=21.0), LockQueues)  # a heartbeat from before the loss
    d(BrokerRegistered("b0", 1), at=22.0)
    assert not only(d(Tick(), at=23.0), LockQueues)
    relock = only(d(Tick(), at=24.0), LockQueues)
    assert relock and relock[0].epoch == 1
    started = d.answer(relock)
    assert {a.mq for a in only(started, StartQueue)} == set(QS)


def test_a_lock_answer_to_a_request_sent_before_the_loss_is_ignored() -> None:
    """A grant sent before the loss may have come before the broker listed us again, so a peer may have released
    it since: neither a start nor an unlock (which could undo the lock asked for after the gate) follows it."""
    d = Drive(rejoin_delay=2.0)
    d.start(grant=False)
    stale = only(d(Tick(), at=0.5), LockQueues)[0]
    assert stale.epoch == 0
    d(BrokerConnectionLost("b0", 1), at=0.6)
    d(BrokerRegistered("b0", 1), at=0.8)  # the gate opens at 2.8
    fresh = only(d.round((ME,), at=3.5, grant=False) + d(Tick(), at=4.0), LockQueues)
    assert fresh and fresh[-1].epoch == 1
    actions = d(LockResult(frozenset(stale.queues), frozenset(stale.queues), stale.epoch), at=4.1)
    assert not only(actions, ReadOffset) and not only(actions, UnlockQueues)
    assert {d.core.state_of(mq) for mq in QS} == {QueueState.LOCKING}


def test_an_older_loss_reported_late_does_not_close_the_gate_again() -> None:
    d = Drive(rejoin_delay=2.0)
    d.start()
    d(BrokerConnectionLost("b0", 2), at=1.0)
    assert not d.core.held_queues()
    d(BrokerRegistered("b0", 2), at=1.5)
    assert not d(BrokerConnectionLost("b0", 1), at=1.6)
    relock = only(d.round((ME,), at=4.0), LockQueues)
    assert relock and relock[0].epoch == 2
