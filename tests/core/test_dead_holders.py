"""Core rule L9, one scenario each: a holder that is gone gives way, and only one that is gone.

The new owner's half (a refused lock, a client ID missing from the member lists for the grace, one
``ReleaseDeadHolders`` for the broker, a lock at once after a release) and the holder's half (after a lost
connection nothing is locked at that broker until a heartbeat sent after the loss succeeded and ``rejoin_delay``
passed; answers from before the loss are ignored). The state-machine worlds ``RocketMQFenced``/``RocketMQOrderly``
check the same rules against random interleavings.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from rocket_rebalance.core import (
    Action,
    BrokerConnectionLost,
    BrokerRegistered,
    ConsumerIdsChanged,
    ConsumerListFetched,
    DeadHoldersChecked,
    DropQueue,
    FetchConsumerList,
    LockQueues,
    LockResult,
    QueueState,
    ReadOffset,
    RebalanceConfig,
    ReleaseDeadHolders,
    StartQueue,
    StopQueue,
    Tick,
    UnlockQueues,
)
from rocket_rebalance.core.history import Failure
from rocket_rebalance.model import MessageQueue
from tests.core.sim import Request, Sim
from tests.core.test_core import ME, OTHER, QS, Drive, G, T, only
from tests.core.test_state_machine import INTERVALS, REQUEST_TIMEOUT

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
    again = only(d(DeadHoldersChecked("b0", check.request_id, frozenset(check.queues), frozenset({GONE}))), LockQueues)
    assert again and set(again[0].queues) == refused  # at once, not after the retry interval
    started = d.answer(again)
    assert {a.mq for a in only(started, StartQueue)} == refused


def test_a_holder_the_broker_still_lists_keeps_its_queues() -> None:
    d = _orphaned()
    relock = only(d(Tick(), at=10.5), LockQueues)
    [check] = only(d(LockResult(frozenset(relock[0].queues), frozenset(), relock[0].epoch)), ReleaseDeadHolders)
    after = d(DeadHoldersChecked("b0", check.request_id, frozenset(check.queues)))  # b listed it: nothing released
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
    d(DeadHoldersChecked("b0", check.request_id, frozenset(first), frozenset({GONE})))
    rest = relock[0].queues[1:]
    later = d(LockResult(frozenset(rest), frozenset(), relock[0].epoch))
    [again] = only(later, ReleaseDeadHolders)
    assert again.client_ids == (GONE,)


def test_queues_refused_again_after_a_release_are_not_checked_again_at_once() -> None:
    """The member released held none of them (someone b lists does): checking again at once would repeat the list,
    the unlock and the lock at the broker's pace for as long as that holder keeps them."""
    d = _orphaned()
    check = _checked(d)
    [again] = only(
        d(DeadHoldersChecked("b0", check.request_id, frozenset(check.queues), frozenset({GONE}))), LockQueues
    )
    assert not only(d(LockResult(frozenset(again.queues), frozenset(), again.epoch)), ReleaseDeadHolders)
    relock = only(d(Tick(), at=11.0), LockQueues)
    assert not only(d(LockResult(frozenset(relock[0].queues), frozenset(), relock[0].epoch)), ReleaseDeadHolders)
    relock = only(d(Tick(), at=12.5), LockQueues)  # four lock retries after the check
    assert only(d(LockResult(frozenset(relock[0].queues), frozenset(), relock[0].epoch)), ReleaseDeadHolders)


def test_one_check_per_broker_is_on_the_way_and_its_queues_wait_for_it() -> None:
    d = _orphaned()
    relock = only(d(Tick(), at=10.5), LockQueues)
    first, rest = relock[0].queues[:1], relock[0].queues[1:]
    [check] = only(d(LockResult(frozenset(first), frozenset(), relock[0].epoch)), ReleaseDeadHolders)
    assert check.deadline == 10.5 + d.core.config.dead_holder_window
    assert not only(d(LockResult(frozenset(rest), frozenset(), relock[0].epoch)), ReleaseDeadHolders)
    retried = only(d(Tick(), at=11.0), LockQueues)  # the rest are retried; the check's queues wait for its answer
    assert retried and not set(check.queues) & {mq for lock in retried for mq in lock.queues}


def _checked(d: Drive, at: float = 10.5) -> ReleaseDeadHolders:
    relock = only(d(Tick(), at=at), LockQueues)
    [check] = only(d(LockResult(frozenset(relock[0].queues), frozenset(), relock[0].epoch)), ReleaseDeadHolders)
    return check


def _locked(actions: list[Action]) -> set[MessageQueue]:
    return {mq for lock in only(actions, LockQueues) for mq in lock.queues}


def test_a_release_in_doubt_keeps_its_queues_unlocked_for_the_broker_lock_lifetime() -> None:
    """L9 (c): an unlock unanswered by the deadline may land after the holder came back and locked again: we do
    not take its queues for the lock lifetime (what the holder's own lock would have cost without L9)."""
    d = _orphaned()
    check = _checked(d)
    queues = set(check.queues)
    answer = DeadHoldersChecked("b0", check.request_id, frozenset(queues), in_doubt=frozenset({GONE}))
    assert not _locked(d(answer, at=12.0))
    assert d.core.history.totals.failed.get(Failure.RELEASE_IN_DOUBT) == 1
    for at in (12.5, 20.0, 71.9):
        assert not _locked(d(Tick(), at=at)) & queues
    assert set(d.core.lock_waits()) == queues  # still said to wait (L7)
    assert _locked(d(Tick(), at=72.0)) == queues  # 60 s after the answer


def test_a_release_partly_done_and_partly_in_doubt_is_in_doubt() -> None:
    d = _orphaned()
    check = _checked(d)
    answer = DeadHoldersChecked("b0", check.request_id, frozenset(check.queues), frozenset({GONE}), frozenset({OTHER}))
    assert not _locked(d(answer, at=11.0)) & set(check.queues)


def test_a_grant_of_a_queue_held_back_by_a_release_is_given_back() -> None:
    """A lock sent before the check, carried out late, may be granted after an unlock in doubt freed a fresh lock
    of the holder: it is not used, and returned."""
    d = _orphaned()
    relock = only(d(Tick(), at=10.5), LockQueues)[0]
    first = relock.queues[:1]
    [check] = only(d(LockResult(frozenset(first), frozenset(), relock.epoch)), ReleaseDeadHolders)
    d(DeadHoldersChecked("b0", check.request_id, frozenset(first), in_doubt=frozenset({GONE})), at=11.0)
    late = d(LockResult(frozenset(first), frozenset(first), relock.epoch), at=11.1)  # an older request's grant
    assert {mq for u in only(late, UnlockQueues) for mq in u.queues} == set(first)
    assert not only(late, ReadOffset) and not d.core.holds_lock(first[0], 11.1)


def test_a_check_unanswered_after_its_deadline_and_the_request_timeout_is_in_doubt() -> None:
    d = _orphaned(request_timeout=5.0)
    check = _checked(d)
    assert check.deadline == 11.5
    assert not _locked(d(Tick(), at=16.4)) & set(check.queues)  # on the way: its queues wait
    d(Tick(), at=16.5)  # given up: in doubt from now
    late = DeadHoldersChecked("b0", check.request_id, frozenset(check.queues), frozenset({GONE}))
    assert not _locked(d(late, at=17.0))  # its answer, late, changes nothing
    assert not _locked(d(Tick(), at=76.4)) & set(check.queues)
    assert _locked(d(Tick(), at=76.5)) == set(check.queues)


def test_a_connection_lost_while_a_check_is_on_the_way_leaves_it_in_doubt() -> None:
    d = _orphaned(rejoin_delay=2.0)
    check = _checked(d)
    lost = d(BrokerConnectionLost("b0", 1), at=11.0)  # b0's queues dropped; the check's unlocks may still land
    assert not only(lost + d(BrokerRegistered("b0", 1), at=11.5), FetchConsumerList)  # L6, then R2's minimum
    assert only(d(Tick(), at=12.0), FetchConsumerList)  # the retry round
    d(ConsumerListFetched(T, (ME,)))
    relocked = _locked(d(Tick(), at=13.5))  # the rejoin gate opens: all but the check's queues
    assert relocked == set(QS) - set(check.queues)
    assert not _locked(d(Tick(), at=70.9)) & set(check.queues)
    assert _locked(d(Tick(), at=71.0)) == set(check.queues)  # 60 s after the loss


def test_the_window_must_be_shorter_than_the_rejoin_delay() -> None:
    with pytest.raises(ValueError, match="dead_holder_window"):
        RebalanceConfig(G, ME, rejoin_delay=1.0, dead_holder_window=1.0)
    assert RebalanceConfig(G, ME).dead_holder_window < RebalanceConfig(G, ME).rejoin_delay


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
    # a round wants them back: no list is read and nothing locked while the broker has not listed us again (L6)
    assert not only(d(ConsumerIdsChanged(), at=4.5), FetchConsumerList)
    assert not only(d(Tick(), at=20.0), LockQueues)
    assert not only(d(BrokerRegistered("b0", 0), at=21.0), FetchConsumerList)  # a heartbeat from before the loss
    assert FetchConsumerList(T, "b0") in d(BrokerRegistered("b0", 1), at=22.0)  # the round put off runs
    assert not only(d.answer(d(ConsumerListFetched(T, (ME,)))), LockQueues)  # the gate: rejoin_delay after that
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


# ---------------------------------------------------------------------------------------- a delayed unlock (sim)

SIM_QS = [MessageQueue(T, "b0", i) for i in range(4)]


def _sim_config(cid: str, **options: object) -> RebalanceConfig:
    return RebalanceConfig(G, cid, consume_orderly=True, **{**INTERVALS, **options})  # type: ignore[arg-type]


def _one_owner_each(sim: Sim) -> None:
    """The fence: no queue's messages may be handed out by two consumers at once."""
    for mq in SIM_QS:
        owners = [c.cid for c in sim.live() if c.core.is_dispatchable(mq, sim.now)]
        assert len(owners) <= 1, f"{mq} handed out by {owners} at {sim.now:.2f}"


def _pump(sim: Sim, steps: int, hold: Callable[[Request], bool] = lambda r: False) -> None:
    """``steps`` times: deliver every request not held and every notification, let the consumers work, and let
    0.05 s pass; the fence is checked after every move. Unlocks on their way are not landed."""
    for _ in range(steps):
        while True:
            ready = [i for i, r in enumerate(sim.pending) if not hold(r)]
            if ready:
                sim.deliver(ready[0])
            elif sim.notifications:
                sim.deliver_notification(0)
            else:
                break
            _one_owner_each(sim)
        sim.consume_all()
        _one_owner_each(sim)
        sim.advance(0.05, REQUEST_TIMEOUT)
        _one_owner_each(sim)


def test_an_unlock_landing_after_the_holder_came_back_and_locked_again_hands_its_queues_to_nobody_else() -> None:
    """Issue 37.3: A releases the locks of H, which the broker no longer lists; the unlock lands late, after H came
    back, waited its rejoin delay and locked its queues again. A must not take them then: H still consumes them."""
    sim = Sim({T: SIM_QS}, lock_lifetime=6.0, keeps_locks=True, delayed_unlocks=True, late_unlocks=True)
    for mq in SIM_QS:
        sim.broker.max_offset[mq] = 5
    a = sim.join(_sim_config(ME), [T])
    h = sim.join(_sim_config(GONE), [T])
    sim.settle(REQUEST_TIMEOUT, rounds=40, step=0.05)
    held = h.core.active_queues()
    assert held and a.core.active_queues() == frozenset(SIM_QS) - held
    sim.disconnect(h)  # the broker drops H, and keeps its locks
    assert not h.core.held_queues()

    # A alone: H's requests wait (its heartbeat among them) until A has asked b to release H's locks
    for _ in range(20):
        if any(isinstance(r.action, ReleaseDeadHolders) for r in sim.pending):
            break
        _pump(sim, 1, hold=lambda r: r.client is h or isinstance(r.action, ReleaseDeadHolders))
    [check] = [i for i, r in enumerate(sim.pending) if isinstance(r.action, ReleaseDeadHolders)]
    sim.deliver(check)  # b lists A only: the unlock on H's behalf is sent, and is slow to land
    assert [u.holder for u in sim.unlocks] == [GONE]

    # H comes back, waits its rejoin delay and locks its queues again; A's member lists are slow meanwhile
    for _ in range(30):
        _pump(sim, 1, hold=lambda r: r.client is a and isinstance(r.action, FetchConsumerList))
        if h.core.active_queues() == held:
            break
    assert h.core.active_queues() == held
    assert [(cid, holder) for _, cid, holder, _ in sim.in_doubt] == [(ME, GONE)]  # A's deadline passed long ago
    sim.land(0)  # the unlock lands now: H's fresh locks are gone at the broker
    assert not any(mq in sim.broker.locks for mq in held)
    _pump(sim, 20, hold=lambda r: r.client is a and isinstance(r.action, FetchConsumerList))
    _pump(sim, 60)
    assert h.core.active_queues() == held and a.core.active_queues() == frozenset(SIM_QS) - held
