"""Core rule L11: a broker set whose master is down grants no lock; its slave serves reads. Orderly queues of it
stop, fenced concurrent queues go on unlocked (as Java's concurrent consumer), and are locked again when the master
is back."""

from __future__ import annotations

from rocket_rebalance.core import (
    BrokerConnectionLost,
    ConsumerListFetched,
    DropQueue,
    LockQueues,
    LockResult,
    MessagesConsumed,
    MessagesDispatched,
    MessagesPulled,
    PersistOffsets,
    ReadOffset,
    RouteUpdated,
    Started,
    StartQueue,
    Tick,
)
from rocket_rebalance.model import MessageQueue
from tests.core.test_core import ME, QS, Drive, T, only

DOWN = frozenset({"b0"})


def _down(d: Drive, at: float) -> list[object]:
    return d(RouteUpdated(T, frozenset(QS), "b0", DOWN), at=at)  # type: ignore[return-value]


def _back(d: Drive, at: float) -> list[object]:
    return d(RouteUpdated(T, frozenset(QS), "b0"), at=at)  # type: ignore[return-value]


def test_fenced_queues_go_on_unlocked_while_the_master_is_down_with_their_offsets_written() -> None:
    d = Drive()
    d.start()
    _down(d, at=10.0)
    assert not only(d(Tick(), at=20.0), LockQueues)  # no renewal at a set without a master
    d(MessagesPulled(QS[0], (5,), 6), at=45.0)
    d(MessagesDispatched(QS[0], (5,)))
    d(MessagesConsumed(QS[0], (5,)))
    actions = d(Tick(), at=55.0)  # the last grant (at 0) lapsed at 30
    assert not only(actions, DropQueue)
    assert all(d.core.is_dispatchable(mq, 55.0) for mq in QS)
    assert [p.offsets[QS[0]] for p in only(actions, PersistOffsets)] == [6]  # O1's write, to the slave


def test_a_queue_waiting_for_its_lock_is_read_without_it_once_the_master_is_down() -> None:
    d = Drive()
    d(Started())
    d(RouteUpdated(T, frozenset(QS[:1]), "b0"))
    (lock,) = only(d(ConsumerListFetched(T, (ME,))), LockQueues)
    d(LockResult(frozenset(lock.queues), frozenset()))  # the master just died: the lock fails
    (read,) = only(d(RouteUpdated(T, frozenset(QS[:1]), "b0", DOWN), at=1.0), ReadOffset)
    assert [a.mq for a in only(d.answer([read]), StartQueue)] == [QS[0]]


def test_a_connection_loss_at_a_masterless_set_drops_no_unlocked_queue() -> None:
    d = Drive()
    d.start()
    _down(d, at=1.0)
    assert not only(d(BrokerConnectionLost("b0", 1), at=2.0), DropQueue)


def test_orderly_queues_of_a_masterless_set_are_not_handed_out_once_their_lock_lapses() -> None:
    d = Drive(consume_orderly=True)
    d.start()
    _down(d, at=1.0)
    renew = only(d(Tick(), at=20.0), LockQueues)
    d(LockResult(frozenset(renew[0].queues), frozenset()))  # LOCK_BATCH_MQ needs the master: it fails
    assert not any(d.core.is_dispatchable(mq, 21.0) for mq in QS)
    # The round under way since 20 s cannot start them again: they wait for a lock.
    acquire = d.answer(d(ConsumerListFetched(T, (ME,))), grant=False)
    assert not only(acquire, StartQueue) and only(acquire, LockQueues)


def test_when_the_master_is_back_started_queues_are_locked_at_once_and_a_refusal_drops_them() -> None:
    d = Drive()
    d.start()
    _down(d, at=1.0)
    (lock,) = only(_back(d, at=40.0), LockQueues)
    assert set(lock.queues) == set(QS)
    assert not d.core.is_dispatchable(QS[0], 40.0)  # fenced again: nothing handed out before the grant
    refused = QS[:1]
    actions = d(LockResult(frozenset(QS), frozenset(QS) - frozenset(refused)))
    assert only(actions, DropQueue) == [DropQueue(QS[0], lost=True)]
    assert all(d.core.is_dispatchable(mq, 41.0) for mq in QS[1:])


def test_one_topics_route_naming_the_set_masterless_is_enough() -> None:
    other = MessageQueue("U", "b0", 0)
    d = Drive(topics=(T, "U"))
    d.start()
    d(RouteUpdated("U", frozenset({other}), "b0", DOWN), at=1.0)
    assert not only(d(Tick(), at=20.0), LockQueues)
