"""Core rule L10: with a rebalance listener (``confirm_revoke``), every release asks the application first.

Each scenario drives one core by hand, with explicit times, and checks the order the rule promises: the queue's
messages stop being handed out, the drain ends, ``RevokeQueues`` names it, and only after ``QueuesRevoked`` (or
``revoke_timeout``) is its final offset written, the queue dropped and its lock given back. A queue that is lost
(its lock lapsed or refused, the connection gone) is a ``DropQueue(lost=True)`` and is never revoked after.
"""

from __future__ import annotations

import pytest

from rocket_rebalance.core import (
    BrokerConnectionLost,
    DropQueue,
    LockResult,
    MessagesConsumed,
    MessagesDispatched,
    MessagesPulled,
    OffsetIllegal,
    OffsetsPersisted,
    PersistOffsets,
    PersistRequested,
    QueueSeeked,
    QueuesRevoked,
    QueueState,
    QueuesUnlocked,
    RevokeQueues,
    ShutdownComplete,
    ShutdownRequested,
    StopQueue,
    Tick,
    UnlockQueues,
)
from rocket_rebalance.model import MessageQueue
from tests.core.test_core import ME, OTHER, QS, Drive, T, expected_share, only

MOVED = sorted(set(QS) - expected_share((ME, OTHER)))  # what a join of OTHER takes from us under AVG


def consumed(d: Drive, mq: MessageQueue, offset: int) -> None:
    """One message of ``mq`` pulled, handed out and consumed at 1 s, so its commit offset moves past the stored one
    and a release has an offset to write."""
    d(MessagesPulled(mq, (offset,), offset + 1), at=1.0)
    d(MessagesDispatched(mq, (offset,)))
    d(MessagesConsumed(mq, (offset,)))


@pytest.mark.parametrize("fenced", [True, False])
def test_a_release_waits_for_the_revoke_before_its_final_offset(fenced: bool) -> None:
    d = Drive(confirm_revoke=True, fenced_handover=fenced, persist_interval=100.0)
    d.start()  # every queue starts at 5
    mq, idle = MOVED
    d(MessagesPulled(mq, (5, 6, 7), 8), at=1.0)
    d(MessagesDispatched(mq, (5, 6)))
    d(MessagesConsumed(mq, (5,)))
    actions = d.round((ME, OTHER), at=2.0)
    assert StopQueue(mq) in actions and StopQueue(idle) in actions
    if fenced:  # L3: message 6 is still out, so only the idle queue is revoked yet
        assert only(actions, RevokeQueues) == [RevokeQueues((idle,))]
        assert d.core.state_of(mq) is QueueState.DRAINING
        actions = d(MessagesConsumed(mq, (6,)), at=2.5)
        assert only(actions, RevokeQueues) == [RevokeQueues((mq,))]
    else:
        assert only(actions, RevokeQueues) == [RevokeQueues((mq, idle))]
    assert not only(actions, PersistOffsets) and not only(actions, DropQueue) and not only(actions, UnlockQueues)
    assert d.core.state_of(mq) is QueueState.REVOKING and not d.core.is_dispatchable(mq, 2.5)
    assert not only(d(Tick(), at=10.0), PersistOffsets)  # nothing moves on while the listener runs
    actions = d(QueuesRevoked(frozenset(MOVED)), at=11.0)
    (persist,) = only(actions, PersistOffsets)
    assert persist.offsets[mq] == (7 if fenced else 6)  # without the fence, 6 was in flight: re-delivered
    assert DropQueue(idle) in actions  # nothing consumed there: its stored offset is already right
    actions = d(OffsetsPersisted(dict(persist.offsets)), at=11.1)
    assert DropQueue(mq) in actions
    assert bool(only(actions, UnlockQueues)) is fenced


def test_what_the_listener_commits_while_revoking_is_in_the_final_offset() -> None:
    """A pull consumer commits in ``on_queues_revoked``: the offset is frozen only after it returned."""
    d = Drive(confirm_revoke=True, persist_interval=100.0, handover_drain_timeout=1.0)
    d.start()
    mq = MOVED[0]
    d(MessagesPulled(mq, (5, 6, 7), 8), at=1.0)
    d(MessagesDispatched(mq, (5, 6)))
    d.round((ME, OTHER), at=2.0)
    actions = d(Tick(), at=3.0)  # the drain's bound: 5 and 6 are still out
    assert only(actions, RevokeQueues) == [RevokeQueues((mq,))]
    d(MessagesConsumed(mq, (5, 6)), at=3.5)  # committed by the listener
    d(MessagesDispatched(mq, (7,)), at=3.5)  # ignored: nothing is handed out while revoking
    (persist,) = only(d(QueuesRevoked(frozenset(MOVED)), at=4.0), PersistOffsets)
    assert persist.offsets[mq] == 7


def test_a_listener_that_does_not_return_is_bounded_by_revoke_timeout() -> None:
    d = Drive(confirm_revoke=True, persist_interval=100.0, revoke_timeout=3.0)
    d.start()
    mq = MOVED[0]
    consumed(d, mq, 5)
    actions = d.round((ME, OTHER), at=2.0)
    assert only(actions, RevokeQueues)
    assert not only(d(Tick(), at=4.9), PersistOffsets)
    (persist,) = only(d(Tick(), at=5.0), PersistOffsets)
    assert persist.offsets[mq] == 6
    assert not only(d(QueuesRevoked(frozenset(MOVED)), at=6.0), PersistOffsets)  # a late answer changes nothing


def test_a_lock_lapsing_while_revoking_loses_the_queue_once() -> None:
    d = Drive(confirm_revoke=True, persist_interval=100.0, lock_all_interval=100.0)
    d.start()  # locks granted at 0: valid until 30
    mq = MOVED[0]
    d.round((ME, OTHER), at=2.0)
    assert d.core.state_of(mq) is QueueState.REVOKING
    actions = d(Tick(), at=30.0)
    assert DropQueue(mq, lost=True) in actions and not only(actions, PersistOffsets)  # L5
    assert not only(d(QueuesRevoked(frozenset(MOVED)), at=31.0), DropQueue)


def test_lost_queues_are_never_revoked() -> None:
    d = Drive(confirm_revoke=True, persist_interval=100.0)
    d.start()
    actions = d(BrokerConnectionLost("b0", 1), at=2.0)
    assert sorted(a.mq for a in only(actions, DropQueue)) == QS
    assert all(a.lost for a in only(actions, DropQueue)) and not only(actions, RevokeQueues)
    actions = d(LockResult(frozenset(QS), frozenset()), at=3.0)  # an answer of the old epoch: ignored
    assert not only(actions, RevokeQueues)


def test_offset_illegal_revokes_then_freezes_at_the_brokers_offset() -> None:
    d = Drive(confirm_revoke=True, fenced_handover=False, persist_interval=100.0)
    d.start()
    mq = QS[0]
    actions = d(OffsetIllegal(mq, 40), at=2.0)
    assert StopQueue(mq) in actions and only(actions, RevokeQueues) == [RevokeQueues((mq,))]
    (persist,) = only(d(QueuesRevoked(frozenset({mq})), at=2.5), PersistOffsets)
    assert persist.offsets[mq] == 40


def test_shutdown_revokes_every_queue_in_one_call_then_completes() -> None:
    d = Drive(confirm_revoke=True, persist_interval=100.0)
    d.start()
    consumed(d, QS[0], 5)
    actions = d(ShutdownRequested(), at=2.0)
    assert only(actions, RevokeQueues) == [RevokeQueues(tuple(QS))]
    actions = d(QueuesRevoked(frozenset(QS)), at=2.5)
    (persist,) = only(actions, PersistOffsets)
    d(OffsetsPersisted(dict(persist.offsets)), at=2.6)
    assert ShutdownComplete() in d(QueuesUnlocked(frozenset(QS)), at=2.7)


def test_without_a_listener_releases_are_as_before() -> None:
    d = Drive(persist_interval=100.0)
    d.start()
    consumed(d, MOVED[0], 5)
    actions = d.round((ME, OTHER), at=2.0)
    assert not only(actions, RevokeQueues) and only(actions, PersistOffsets)


def test_a_seek_restarts_an_active_queue_and_a_persist_request_writes_every_queue() -> None:
    """O4: the pull consumer's seek and commit."""
    d = Drive(persist_interval=100.0)
    d.start()
    mq = QS[0]
    d(MessagesPulled(mq, (5, 6), 7), at=1.0)
    d(MessagesDispatched(mq, (5, 6)))
    d(QueueSeeked(mq, 9), at=1.5)
    assert d.core.process_queue(mq).dispatched_count == 0  # type: ignore[union-attr]
    (persist,) = only(d(PersistRequested(), at=2.0), PersistOffsets)
    assert persist.offsets == {mq: 9, **{q: 5 for q in QS[1:]}}  # every held queue, changed or not (as O1)
    d(OffsetsPersisted(dict(persist.offsets)), at=2.1)
    assert d.core.stored_offset(mq) == 9
    d(QueueSeeked(mq, 2), at=3.0)  # backwards
    (persist,) = only(d(PersistRequested(), at=3.5), PersistOffsets)
    assert persist.offsets[mq] == 9
    assert not d(QueueSeeked(MessageQueue(T, "b0", 9), 1))  # a queue not held: nothing to do
