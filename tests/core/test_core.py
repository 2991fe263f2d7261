"""Unit tests of the core's rules, one scenario each, driven by hand with explicit times (no clock anywhere)."""

from __future__ import annotations

import pytest

from rocket_rebalance.core import (
    Action,
    BrokerRegistered,
    ClientIdShared,
    ConsumerIdsChanged,
    ConsumerListFetched,
    DropQueue,
    FetchConsumerList,
    FetchRoutes,
    HandoverWithoutOffset,
    LockQueues,
    LockResult,
    MessagesConsumed,
    MessagesDispatched,
    MessagesPulled,
    OffsetIllegal,
    OffsetLookupFailed,
    OffsetQueried,
    OffsetRead,
    OffsetResetApplied,
    OffsetsPersisted,
    OffsetsPersistFailed,
    OffsetsReset,
    PersistOffsets,
    QueryMaxOffset,
    QueuesChanged,
    QueueState,
    QueuesUnlocked,
    ReadOffset,
    RebalanceConfig,
    RebalanceCore,
    RouteUpdated,
    SearchOffset,
    SendHeartbeat,
    ShutdownComplete,
    ShutdownRequested,
    Started,
    StartQueue,
    StopQueue,
    SubscriptionChanged,
    Tick,
    UnlockQueues,
    WakeAt,
    default_consume_timestamp_ms,
)
from rocket_rebalance.model import (
    ConsumeFromWhere,
    DuplicateClientIdWarning,
    MessageModel,
    MessageQueue,
    prepare_rebalance_input,
    retry_topic,
)
from rocket_rebalance.strategies import create_strategy

G = "group"
ME = "10.0.0.1@1"
OTHER = "10.0.0.2@2"
T = "T"
QS = [MessageQueue(T, "b0", i) for i in range(4)]
RETRY = retry_topic(G)


def only(actions: list[Action], kind: type) -> list:
    return [a for a in actions if isinstance(a, kind)]


class Drive:
    """One core, a hand-moved clock, and helpers that answer its requests the way a healthy broker would."""

    def __init__(self, topics: tuple[str, ...] = (T,), registered: tuple[str, ...] = ("b0", "b1"), **options: object):
        self.core = RebalanceCore(RebalanceConfig(G, ME, **options), topics)  # type: ignore[arg-type]
        self.now = 0.0
        self.log: list[Action] = []
        self.registered = registered

    def __call__(self, event: object, at: float | None = None) -> list[Action]:
        """Feed ``event``; ``Started`` comes with the start heartbeat's answers from the ``registered`` brokers
        (with locks, core rule L6 reads no member list from a broker before it lists us)."""
        if at is not None:
            self.now = at
        actions = self.core.handle(event, self.now)  # type: ignore[arg-type]
        if isinstance(event, Started):
            for broker in self.registered:
                actions += self.core.handle(BrokerRegistered(broker, 0), self.now)
        self.log.extend(actions)
        return actions

    def answer(self, actions: list[Action], offset: int | None = 5, grant: bool = True) -> list[Action]:
        """Answer every lock and offset read (recursively); returns everything emitted along the way."""
        seen = list(actions)
        todo = list(actions)
        while todo:
            action = todo.pop(0)
            if isinstance(action, LockQueues):
                granted = frozenset(action.queues) if grant else frozenset()
                out = self(LockResult(frozenset(action.queues), granted, action.epoch))
            elif isinstance(action, ReadOffset):
                out = self(OffsetRead(action.mq, offset, action.request_id))
            elif isinstance(action, QueryMaxOffset | SearchOffset):
                out = self(OffsetQueried(action.mq, 100, action.request_id))
            else:
                continue
            seen.extend(out)
            todo.extend(out)
        return seen

    def start(self, cids: tuple[str, ...] = (ME,), queues: list[MessageQueue] = QS, **answer: object) -> list[Action]:
        self(Started())
        actions = self(RouteUpdated(T, frozenset(queues), "b0"))
        assert only(actions, FetchConsumerList) == [FetchConsumerList(T, "b0")]
        return self.answer(self(ConsumerListFetched(T, cids)), **answer)  # type: ignore[arg-type]

    def round(self, cids: tuple[str, ...], at: float, **answer: object) -> list[Action]:
        """A notification at ``at``, then the consumer list ``cids`` for T; returns the round's actions."""
        actions = self(ConsumerIdsChanged(), at=at)
        assert FetchConsumerList(T, "b0") in actions
        return self.answer(actions + self(ConsumerListFetched(T, cids)), **answer)  # type: ignore[arg-type]


def expected_share(cids: tuple[str, ...], cid: str = ME) -> set[MessageQueue]:
    prepared = prepare_rebalance_input(QS, cids)
    return set(create_strategy("AVG").allocate(G, cid, prepared.mq_all, prepared.cid_all) or ())


# ---------------------------------------------------------------------------------------- config


def test_defaults_are_javas() -> None:
    c = RebalanceConfig(G, ME)
    assert (c.rebalance_interval, c.rebalance_min_interval, c.unbalanced_retry_interval) == (20, 1, 1)
    assert (c.lock_retry_interval, c.route_refresh_interval, c.heartbeat_interval) == (0.5, 30, 30)
    assert (c.persist_interval, c.lock_all_interval, c.client_lock_lifetime, c.broker_lock_lifetime) == (5, 20, 30, 60)
    assert c.pull_expiry == 120 and c.fenced_handover and c.message_model is MessageModel.CLUSTERING
    assert c.consume_from_where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET and c.strategy.name == "AVG"


@pytest.mark.parametrize(
    "options",
    [
        {"consume_from_where": ConsumeFromWhere.CONSUME_FROM_TIMESTAMP},
        {"client_lock_lifetime": 60.0},
        {"persist_interval": 0},
        {"rebalance_interval": -1.0},
    ],
)
def test_bad_config_is_refused(options: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        RebalanceConfig(G, ME, **options)  # type: ignore[arg-type]


def test_default_consume_timestamp_is_half_an_hour_back() -> None:
    assert default_consume_timestamp_ms(10_000_000) == 10_000_000 - 1_800_000


# ---------------------------------------------------------------------------------------- rounds


def test_start_fetches_routes_heartbeats_and_subscribes_the_retry_topic() -> None:
    d = Drive()
    actions = d(Started())
    assert actions[0] == FetchRoutes((RETRY, T))
    assert SendHeartbeat((RETRY, T)) in actions
    assert isinstance(actions[-1], WakeAt)


def test_broadcasting_takes_every_queue_without_lists_locks_or_retry_topic() -> None:
    d = Drive(message_model=MessageModel.BROADCASTING)
    assert d(Started())[0] == FetchRoutes((T,))
    actions = d.answer(d(RouteUpdated(T, frozenset(QS), "b0")))
    assert not only(actions, FetchConsumerList) and not only(actions, LockQueues)
    assert {a.mq for a in only(actions, StartQueue)} == set(QS)


def test_clustering_round_locks_reads_and_starts_the_strategys_share() -> None:
    d = Drive()
    actions = d.start(cids=(ME, OTHER))
    share = expected_share((ME, OTHER))
    locks = only(actions, LockQueues)
    assert locks and {mq for lock in locks for mq in lock.queues} == share
    assert {a.mq for a in only(actions, ReadOffset)} == share
    assert {(a.mq, a.offset) for a in only(actions, StartQueue)} == {(mq, 5) for mq in share}
    assert only(actions, QueuesChanged) == [QueuesChanged(T, tuple(QS), tuple(sorted(share)))]
    assert only(actions, SendHeartbeat)  # a change heartbeats at once
    assert d.core.active_queues() == share


def test_unchanged_assignment_is_a_no_op() -> None:
    d = Drive()
    d.start(cids=(ME, OTHER))
    actions = d.round((OTHER, ME), at=5.0)
    assert [type(a) for a in actions if not isinstance(a, WakeAt)] == [FetchConsumerList]


def test_rounds_are_at_least_the_minimum_interval_apart_and_periodic() -> None:
    d = Drive()
    d.start()
    assert not only(d(ConsumerIdsChanged(), at=0.5), FetchConsumerList)  # too soon after the first round
    assert d.core.next_wakeup == 1.0
    assert only(d(Tick(), at=1.0), FetchConsumerList)
    d(ConsumerListFetched(T, (ME,)))
    assert d.core.next_wakeup is not None and d.core.next_wakeup <= 21.0
    assert not only(d(Tick(), at=5.0), FetchConsumerList)
    assert only(d(Tick(), at=21.0), FetchConsumerList)  # every 20 s, notification or not


def test_a_notification_during_a_round_starts_another_after_it() -> None:
    d = Drive()
    d.start()
    first = d(ConsumerIdsChanged(), at=2.0)
    assert only(first, FetchConsumerList)
    assert not only(d(ConsumerIdsChanged(), at=2.1), FetchConsumerList)
    d(ConsumerListFetched(T, (ME,)), at=2.2)
    assert only(d(Tick(), at=3.0), FetchConsumerList)


def test_a_lost_notification_is_repaired_by_the_periodic_round() -> None:
    d = Drive()
    d.start(cids=(ME,))
    assert d.core.active_queues() == set(QS)
    # OTHER joined, the notification never came; the 20 s round sees it.
    actions = d(Tick(), at=20.0)
    assert only(actions, FetchConsumerList)
    actions = d(ConsumerListFetched(T, (ME, OTHER)))
    assert {a.mq for a in only(actions, StopQueue)} == set(QS) - expected_share((ME, OTHER))


def test_allocation_error_keeps_previous_queues_and_retries_in_a_second() -> None:
    d = Drive()
    d.start()
    actions = d.round((), at=3.0)  # an empty consumer list: Java's "cidAll is null or cidAll empty"
    assert not only(actions, StopQueue) and d.core.active_queues() == set(QS)
    assert d.core.next_wakeup == 4.0


def test_failed_consumer_list_is_unbalanced() -> None:
    d = Drive()
    d.start()
    d(ConsumerIdsChanged(), at=3.0)
    d(ConsumerListFetched(T, None))
    assert d.core.next_wakeup == 4.0 and d.core.active_queues() == set(QS)


def test_a_consumer_list_that_never_comes_times_out() -> None:
    d = Drive()
    d(Started())
    d(RouteUpdated(T, frozenset(QS), "b0"))
    assert not only(d(Tick(), at=9.9), FetchConsumerList)
    d(Tick(), at=10.0)  # request_timeout: the round is over, unbalanced
    assert only(d(Tick(), at=11.0), FetchConsumerList)


def test_route_change_rebalances_at_once() -> None:
    d = Drive()
    d.start()
    more = QS + [MessageQueue(T, "b1", 0)]
    actions = d(RouteUpdated(T, frozenset(more), "b0"), at=3.0)
    assert only(actions, FetchConsumerList)
    actions = d.answer(d(ConsumerListFetched(T, (ME,))))
    assert [a.mq for a in only(actions, StartQueue)] == [MessageQueue(T, "b1", 0)]


def test_the_member_list_is_asked_of_the_broker_the_latest_route_names() -> None:
    """R1: the core carries the broker of each topic's latest route into its FetchConsumerList, so the runtime
    keeps no route table of its own; a route that names no broker asks nobody (the runtime fails it at once)."""
    d = Drive(topics=(T, "U"), fenced_handover=False)
    us = [MessageQueue("U", "b2", 0)]
    d(RouteUpdated(T, frozenset(QS), "b1"))
    d(RouteUpdated("U", frozenset(us), "b2"))
    fetched = only(d(Started()), FetchConsumerList)
    assert sorted(fetched, key=lambda f: f.topic) == [FetchConsumerList(T, "b1"), FetchConsumerList("U", "b2")]
    d.answer(d(ConsumerListFetched(T, (ME,))) + d(ConsumerListFetched("U", (ME,))))
    assert d.core.active_queues() == set(QS + us)
    # same queues, another first broker: no round for that alone, but the next round asks the new broker
    assert not only(d(RouteUpdated(T, frozenset(QS), "b0"), at=2.0), FetchConsumerList)
    fetched = only(d(ConsumerIdsChanged(), at=3.0), FetchConsumerList)
    assert sorted(fetched, key=lambda f: f.topic) == [FetchConsumerList(T, "b0"), FetchConsumerList("U", "b2")]
    d(ConsumerListFetched(T, (ME,)))
    d(ConsumerListFetched("U", (ME,)))
    # an empty route (every broker of the topic gone): the round asks with no broker, and the list fails (R3)
    actions = d(RouteUpdated(T, frozenset(), None), at=5.0)
    assert only(actions, FetchConsumerList) == [FetchConsumerList(T, None), FetchConsumerList("U", "b2")]
    actions = d(ConsumerListFetched(T, None))
    assert not only(actions, StopQueue) and d.core.active_queues() == set(QS + us)  # kept, as a failed list keeps


def test_unsubscribed_topics_are_released_and_new_ones_fetched() -> None:
    d = Drive(fenced_handover=False)
    d.start()
    actions = d(SubscriptionChanged(frozenset({"U"})), at=2.0)
    assert FetchRoutes(("U",)) in actions
    assert {a.mq for a in only(actions, StopQueue)} == set(QS)
    assert d.core.topics == (RETRY, "U")


# ---------------------------------------------------------------------------------------- start offsets


@pytest.mark.parametrize(
    ("where", "topic", "expected"),
    [
        (ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, T, QueryMaxOffset),
        (ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, RETRY, 0),
        (ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, T, 0),
        (ConsumeFromWhere.CONSUME_FROM_TIMESTAMP, T, SearchOffset),
        (ConsumeFromWhere.CONSUME_FROM_TIMESTAMP, RETRY, QueryMaxOffset),
    ],
)
def test_consume_from_where_when_no_offset_is_stored(where: ConsumeFromWhere, topic: str, expected: object) -> None:
    d = Drive(topics=(T,), consume_from_where=where, consume_timestamp_ms=1234, fenced_handover=False)
    d(Started())
    mq = MessageQueue(topic, "b0", 0)
    d(RouteUpdated(topic, frozenset({mq}), "b0"))
    (read,) = only(d(ConsumerListFetched(topic, (ME,))), ReadOffset)
    assert read.consume_from_where is where
    actions = d(OffsetRead(mq, None, read.request_id))
    if isinstance(expected, int):
        assert only(actions, StartQueue) == [StartQueue(mq, expected)]
        return
    (query,) = only(actions, expected)  # type: ignore[arg-type]
    if isinstance(query, SearchOffset):
        assert query.timestamp_ms == 1234
    assert only(d(OffsetQueried(mq, 42, query.request_id)), StartQueue) == [StartQueue(mq, 42)]


def test_an_offset_read_error_skips_the_queue_and_retries_next_round() -> None:
    d = Drive(fenced_handover=False)
    d(Started())
    d(RouteUpdated(T, frozenset(QS[:1]), "b0"))
    (read,) = only(d(ConsumerListFetched(T, (ME,))), ReadOffset)
    actions = d(OffsetLookupFailed(QS[0], read.request_id))
    assert not only(actions, StartQueue) and d.core.state_of(QS[0]) is QueueState.LOOKUP_WAIT
    assert d.core.next_wakeup == 1.0  # unbalanced: another round in a second
    d(Tick(), at=1.0)
    (read2,) = only(d(ConsumerListFetched(T, (ME,))), ReadOffset)
    assert read2.request_id != read.request_id
    assert not d(OffsetRead(QS[0], 7, read.request_id))  # the late answer to the abandoned read is ignored
    assert only(d(OffsetRead(QS[0], 9, read2.request_id)), StartQueue) == [StartQueue(QS[0], 9)]


def test_a_max_offset_error_never_starts_from_a_guess() -> None:
    d = Drive(fenced_handover=False)
    d(Started())
    d(RouteUpdated(T, frozenset(QS[:1]), "b0"))
    (read,) = only(d(ConsumerListFetched(T, (ME,))), ReadOffset)
    (query,) = only(d(OffsetRead(QS[0], None, read.request_id)), QueryMaxOffset)
    assert not only(d(OffsetLookupFailed(QS[0], query.request_id)), StartQueue)
    assert QS[0] not in d.core.active_queues()


# ---------------------------------------------------------------------------------------- locks and the fence


def test_a_refused_lock_is_retried_every_half_second() -> None:
    d = Drive()
    actions = d.start(grant=False)
    assert not only(actions, StartQueue) and not only(actions, ReadOffset)
    assert d.core.next_wakeup == 0.5
    relock = only(d(Tick(), at=0.5), LockQueues)
    assert relock and set(relock[0].queues) == set(QS)
    started = d.answer(relock)
    assert {a.mq for a in only(started, StartQueue)} == set(QS)


def test_queues_refused_their_locks_are_listed_with_the_first_refusal_until_granted_or_gone() -> None:
    """L7: what the runtime reports while a holder that was killed keeps its locks."""
    d = Drive()
    d.start(grant=False)
    assert d.core.lock_waits() == dict.fromkeys(QS, 0.0)
    relock = only(d(Tick(), at=0.5), LockQueues)
    d(LockResult(frozenset(relock[0].queues), frozenset(QS[:2])))  # two granted, two still refused
    assert d.core.lock_waits() == dict.fromkeys(QS[2:], 0.0)  # still the first refusal's time
    others = set(QS) - expected_share((ME, OTHER))
    assert others == set(QS[2:])
    d.round((ME, OTHER), at=3.0, grant=False)  # the refused queues that went to OTHER are no longer ours
    assert set(d.core.lock_waits()) == set(QS[2:]) - others


def test_fenced_release_drains_persists_then_unlocks() -> None:
    d = Drive()
    d.start()
    mq = QS[3]
    d(MessagesPulled(mq, (5, 6, 7), 8), at=1.0)
    d(MessagesDispatched(mq, (5, 6)))
    d(MessagesConsumed(mq, (5,)))
    actions = d.round((ME, OTHER), at=2.0)
    assert mq not in expected_share((ME, OTHER))
    assert StopQueue(mq) in actions and not d.core.is_dispatchable(mq, 2.0)
    assert not [p for p in only(actions, PersistOffsets) if mq in p.offsets]  # 6 is still being consumed
    actions = d(MessagesConsumed(mq, (6,)), at=2.5)
    (persist,) = only(actions, PersistOffsets)
    assert persist.offsets[mq] == 7  # 7 was pulled but never handed out: the next owner gets it
    assert not only(actions, UnlockQueues) and not only(actions, DropQueue)
    actions = d(OffsetsPersisted({mq: 7}))
    assert actions.index(DropQueue(mq)) < actions.index(UnlockQueues("b0", (mq,)))


@pytest.mark.parametrize("fenced", [True, False])
def test_a_write_of_fenced_queues_names_the_connection_it_may_go_on(fenced: bool) -> None:
    """O6: a write's fenced brokers carry the connection losses the core knows, so that a write decided before a
    loss it has not heard of is sent on no newer connection; without the fence a write may go on any connection."""
    d = Drive(fenced_handover=fenced, persist_interval=1.0)
    d.start()
    (persist,) = only(d(Tick(), at=1.5), PersistOffsets)
    assert persist.offsets and persist.epochs == ({"b0": 0} if fenced else {})


def test_fenced_drain_is_bounded() -> None:
    d = Drive(persist_interval=100.0)
    d.start()
    mq = QS[3]
    d(MessagesPulled(mq, (5, 6), 7), at=1.0)
    d(MessagesDispatched(mq, (5, 6)))
    d(MessagesConsumed(mq, (5,)))
    d.round((ME, OTHER), at=2.0)
    assert d.core.state_of(mq) is QueueState.DRAINING
    assert not only(d(Tick(), at=6.9), PersistOffsets)
    (persist,) = only(d(Tick(), at=7.0), PersistOffsets)
    assert persist.offsets[mq] == 6  # the stuck message is re-delivered rather than lost


@pytest.mark.parametrize("orderly", [False, True])
def test_a_handover_whose_offset_cannot_be_saved_is_bounded(orderly: bool) -> None:
    """L8 (probe 2026-11-24 #3): a release whose offset writes keep failing held its lock forever, so the queue
    was consumed by nobody; now it is reported while it lasts and handed over without its offset after
    ``handover_persist_attempts`` failed writes (re-delivery accepted, as Java's persist is fire-and-forget)."""
    d = Drive(consume_orderly=orderly, persist_interval=100.0, handover_persist_attempts=3)
    d.start()
    mq = QS[3]
    d(MessagesPulled(mq, (5, 6), 7), at=1.0)
    d(MessagesDispatched(mq, (5,)))
    d(MessagesConsumed(mq, (5,)))
    (persist,) = only(d.round((ME, OTHER), at=2.0), PersistOffsets)
    assert persist.offsets[mq] == 6 and d.core.stuck_releases() == {}
    d(OffsetsPersistFailed(dict(persist.offsets)), at=2.1)
    assert d.core.stuck_releases() == {mq: (2.1, 1)}
    (again,) = only(d(Tick(), at=2.6), PersistOffsets)
    d(OffsetsPersistFailed(dict(again.offsets)), at=2.7)
    assert d.core.stuck_releases() == {mq: (2.1, 2)} and d.core.state_of(mq) is QueueState.PERSISTING
    (last,) = only(d(Tick(), at=3.2), PersistOffsets)
    actions = d(OffsetsPersistFailed(dict(last.offsets)), at=3.3)
    assert HandoverWithoutOffset(mq, 6, 5, 3) in actions
    assert actions.index(DropQueue(mq)) < actions.index(UnlockQueues("b0", (mq,)))
    assert d.core.state_of(mq) is None and d.core.stuck_releases() == {}


def test_a_lost_offset_write_counts_as_failed_for_the_bounded_handover() -> None:
    d = Drive(persist_interval=100.0, handover_persist_attempts=2, request_timeout=1.0)
    d.start()
    mq = QS[3]
    d(MessagesPulled(mq, (5,), 6), at=1.0)
    d(MessagesDispatched(mq, (5,)))
    d(MessagesConsumed(mq, (5,)))
    d.round((ME, OTHER), at=2.0)
    assert d.core.state_of(mq) is QueueState.PERSISTING
    d(Tick(), at=3.0)  # the write is never answered: as failed (M1)
    assert d.core.stuck_releases() == {mq: (3.0, 1)}
    d(Tick(), at=3.5)
    actions = d(Tick(), at=4.5)
    assert only(actions, HandoverWithoutOffset) == [HandoverWithoutOffset(mq, 6, 5, 2)]
    assert DropQueue(mq) in actions


def test_routine_write_failures_do_not_count_toward_the_handover_bound() -> None:
    d = Drive(persist_interval=1.0, handover_persist_attempts=2)
    d.start()
    mq = QS[3]
    for at in (1.0, 2.0, 3.0):
        (persist,) = only(d(Tick(), at=at), PersistOffsets)
        d(OffsetsPersistFailed(dict(persist.offsets)), at=at + 0.1)
    assert d.core.stuck_releases() == {}
    d(MessagesPulled(mq, (5,), 6), at=3.5)
    d(MessagesDispatched(mq, (5,)))
    d(MessagesConsumed(mq, (5,)))
    (persist,) = only(d.round((ME, OTHER), at=4.0), PersistOffsets)
    d(OffsetsPersistFailed(dict(persist.offsets)), at=4.1)
    assert d.core.stuck_releases() == {mq: (4.1, 1)} and d.core.state_of(mq) is QueueState.PERSISTING


def test_handover_persist_attempts_must_be_a_positive_count() -> None:
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="handover_persist_attempts"):
            RebalanceConfig(G, ME, handover_persist_attempts=bad)  # type: ignore[arg-type]


def test_orderly_drain_waits_for_the_message_in_consumption_however_long() -> None:
    d = Drive(consume_orderly=True, persist_interval=100.0)
    d.start()
    mq = QS[3]
    d(MessagesPulled(mq, (5, 6), 7), at=1.0)
    d(MessagesDispatched(mq, (5,)))
    d.round((ME, OTHER), at=2.0)
    for at in (7.0, 20.0):
        d(Tick(), at=at)
        if renew := [a for a in d.log[-3:] if isinstance(a, LockQueues)]:
            d(LockResult(frozenset(renew[0].queues), frozenset(renew[0].queues)))
    assert d.core.state_of(mq) is QueueState.DRAINING
    (persist,) = only(d(MessagesConsumed(mq, (5,)), at=25.0), PersistOffsets)
    assert persist.offsets[mq] == 6


def test_without_the_fence_release_persists_at_once_java_style() -> None:
    d = Drive(fenced_handover=False)
    actions = d.start()
    assert not only(actions, LockQueues)
    mq = QS[3]
    d(MessagesPulled(mq, (5, 6, 7), 8), at=1.0)
    d(MessagesDispatched(mq, (5, 6)))
    d(MessagesConsumed(mq, (5,)))
    actions = d.round((ME, OTHER), at=2.0)
    assert StopQueue(mq) in actions
    assert [p.offsets[mq] for p in only(actions, PersistOffsets)] == [6]  # 6 is in flight: re-delivered
    assert DropQueue(mq) not in actions  # released only once the offset is persisted
    assert d(OffsetsPersisted({mq: 6}))[0] == DropQueue(mq)


def test_with_locks_no_member_list_is_read_before_the_broker_lists_us() -> None:
    """L6: until our heartbeat is answered, our ID in a list is another consumer's (a clone's), whose queues the
    strategy would give us too and whose locks the broker would grant us. The start's round waits for it."""
    d = Drive(registered=())
    d(Started())
    assert not only(d(RouteUpdated(T, frozenset(QS), "b0")), FetchConsumerList)
    assert d.core.history.last is None  # not a round yet
    assert only(d(BrokerRegistered("b0", 0), at=0.2), FetchConsumerList) == [FetchConsumerList(T, "b0")]


def test_a_round_put_off_for_the_registration_is_still_the_starts_when_a_route_comes_meanwhile() -> None:
    """L6, H1: the runtime reports a registration only once its stream there is listed, so the routes (the retry
    topic's) often come while the start's round waits; it is still the start's round, not the routes'."""
    retry = MessageQueue("%RETRY%" + G, "b0", 0)
    d = Drive(topics=(T, retry.topic), registered=())
    d(RouteUpdated(T, frozenset(QS), "b0"))  # the runtime's start learns the routes first
    d(Started())
    d(RouteUpdated(retry.topic, frozenset({retry}), "b0"), at=0.3)
    d(BrokerRegistered("b0", 0), at=0.5)
    first = d.core.history.last
    assert first is not None and first.trigger == "start"


def test_a_start_heartbeat_that_fails_is_sent_again_and_after_the_request_timeout_the_rounds_fail() -> None:
    d = Drive(registered=())
    d(Started())
    d(RouteUpdated(T, frozenset(QS), "b0"))
    again = d(Tick(), at=1.0)  # the put-off round tries again, and so does the heartbeat
    assert only(again, SendHeartbeat) and not only(again, FetchConsumerList)
    for at in range(2, 10):
        assert not only(d(Tick(), at=float(at)), FetchConsumerList)
    d(Tick(), at=10.0)  # request_timeout after the start: a round, whose list is not read
    last = d.core.history.last
    assert last is not None and last.failed
    assert last.problems == ["member list of T not read: b0 has not listed us yet"]
    assert FetchConsumerList(T, "b0") in d(BrokerRegistered("b0", 0), at=11.0)  # the registration's round


def test_without_locks_the_list_is_read_at_once_as_java_does() -> None:
    d = Drive(registered=(), fenced_handover=False)
    d(Started())
    assert only(d(RouteUpdated(T, frozenset(QS), "b0")), FetchConsumerList) == [FetchConsumerList(T, "b0")]


def test_a_shared_client_id_withholds_the_topic_until_only_one_is_left() -> None:
    d = Drive()
    d.start(cids=(ME, OTHER))
    mine = expected_share((ME, OTHER))
    assert d.core.active_queues() == mine and not only(d.log, ClientIdShared)
    actions = d.round((ME, ME, OTHER), at=2.0)  # a clone of us joined
    assert only(actions, ClientIdShared) == [ClientIdShared(T, ME, 2, True)]
    assert {a.mq for a in only(actions, StopQueue)} == mine  # the fence cannot tell us apart: nothing is kept
    assert only(actions, QueuesChanged)[-1].mq_divided == ()
    assert {mq for unlock in only(actions, UnlockQueues) for mq in unlock.queues} == mine  # nothing in flight
    d(QueuesUnlocked(frozenset(mine)))
    assert not d.core.held_queues()
    actions = d.round((ME, ME, OTHER), at=4.0)
    assert not only(actions, ClientIdShared) and not only(actions, LockQueues)  # reported once per change
    assert only(d.round((ME, ME, ME, OTHER), at=6.0), ClientIdShared) == [ClientIdShared(T, ME, 3, True)]
    actions = d.round((ME, OTHER), at=8.0)  # the clones left
    assert only(actions, ClientIdShared) == [ClientIdShared(T, ME, 1, True)]
    assert d.core.active_queues() == mine


def test_without_locks_a_shared_client_id_is_reported_and_allocated_as_java_does() -> None:
    d = Drive(fenced_handover=False)
    d.start(cids=(ME, OTHER))
    actions = d.round((ME, ME, OTHER), at=2.0)
    assert only(actions, ClientIdShared) == [ClientIdShared(T, ME, 2, False)]
    with pytest.warns(DuplicateClientIdWarning):
        prepared = prepare_rebalance_input(QS, (ME, ME, OTHER))
    java = set(create_strategy("AVG").allocate(G, ME, prepared.mq_all, prepared.cid_all) or ())
    assert d.core.active_queues() == java


def test_a_failed_release_write_is_retried() -> None:
    d = Drive(fenced_handover=False)
    d.start(offset=None)  # no stored offset: the max offset (100) is not persisted yet
    actions = d.round((ME, OTHER), at=2.0)
    (persist,) = only(actions, PersistOffsets)
    d(OffsetsPersistFailed(dict(persist.offsets)), at=2.1)
    assert d.core.next_wakeup == pytest.approx(2.6)
    again = only(d(Tick(), at=2.6), PersistOffsets)
    assert again and set(again[0].offsets) == set(persist.offsets)


def test_one_offset_write_per_queue_on_the_way() -> None:
    d = Drive(fenced_handover=False)
    d.start()
    mq = QS[3]
    d(MessagesPulled(mq, (5,), 6), at=1.0)
    d(MessagesDispatched(mq, (5,)))
    d(MessagesConsumed(mq, (5,)))
    (periodic,) = only(d(Tick(), at=5.0), PersistOffsets)
    assert periodic.offsets[mq] == 6
    d(MessagesPulled(mq, (6,), 7), at=5.5)
    d(MessagesDispatched(mq, (6,)))
    d(MessagesConsumed(mq, (6,)))
    actions = d.round((ME, OTHER), at=6.0)
    assert not [p for p in only(actions, PersistOffsets) if mq in p.offsets]  # 6 is still on the way
    actions = d(OffsetsPersisted({mq: 6}), at=6.1)
    assert [p.offsets[mq] for p in only(actions, PersistOffsets)] == [7]
    assert not only(actions, DropQueue)
    assert DropQueue(mq) in d(OffsetsPersisted({mq: 7}))


def test_queues_are_not_locked_again_while_their_unlock_is_on_the_way() -> None:
    d = Drive()
    d.start()
    mq = QS[3]
    actions = d.round((ME, OTHER), at=2.0)  # nothing consumed: the stored offset stands, release at once
    (unlock,) = only(actions, UnlockQueues)
    assert mq in unlock.queues and actions.index(DropQueue(mq)) < actions.index(unlock)
    actions = d.round((ME,), at=3.0)  # OTHER left again before our unlock was answered
    assert not [lock for lock in only(actions, LockQueues) if mq in lock.queues]
    relock = only(d(QueuesUnlocked(frozenset({mq}))), LockQueues)
    assert relock and mq in relock[0].queues


def test_a_late_grant_for_an_unwanted_queue_is_given_back() -> None:
    d = Drive()
    d(Started())
    stranger = MessageQueue(T, "b9", 0)
    actions = d(LockResult(frozenset({stranger}), frozenset({stranger})))
    assert UnlockQueues("b9", (stranger,)) in actions


def test_held_locks_are_renewed_and_a_lapsed_lock_drops_the_queue_without_writing() -> None:
    d = Drive()
    d.start()
    assert all(d.core.is_dispatchable(mq, 29.0) for mq in QS)
    renew = only(d(Tick(), at=20.0), LockQueues)
    assert renew and set(renew[0].queues) == set(QS)
    d(LockResult(frozenset(QS), frozenset(QS)))
    assert all(d.core.is_dispatchable(mq, 45.0) for mq in QS)  # renewed at 20: valid until 50
    d(MessagesPulled(QS[0], (5,), 6), at=45.0)
    d(MessagesDispatched(QS[0], (5,)))
    d(MessagesConsumed(QS[0], (5,)))
    d(Tick(), at=40.0)  # the next renewal is lost
    assert not d.core.is_dispatchable(QS[0], 50.0)
    actions = d(Tick(), at=50.0)
    assert {a.mq for a in only(actions, DropQueue)} == set(QS)
    assert not only(actions, PersistOffsets)  # L5: someone else may own it now
    assert not only(actions, UnlockQueues)


def test_a_renewal_refused_drops_the_queue() -> None:
    d = Drive()
    d.start()
    d(Tick(), at=20.0)
    actions = d(LockResult(frozenset(QS), frozenset(QS[1:])))
    assert only(actions, DropQueue) == [DropQueue(QS[0], lost=True)] and StopQueue(QS[0]) in actions
    # The round that started at 20 s takes it again: lock first, then a fresh read.
    relock = only(d(ConsumerListFetched(T, (ME,))), LockQueues)
    assert relock and relock[0].queues == (QS[0],)


def test_a_lock_lost_while_reading_the_offset_is_taken_again_before_starting() -> None:
    d = Drive()
    d(Started())
    d(RouteUpdated(T, frozenset(QS[:1]), "b0"))
    (lock,) = only(d(ConsumerListFetched(T, (ME,))), LockQueues)
    (read,) = only(d(LockResult(frozenset(lock.queues), frozenset(lock.queues))), ReadOffset)
    d(LockResult(frozenset(lock.queues), frozenset()))  # e.g. a renewal refused in between
    actions = d(OffsetRead(QS[0], 5, read.request_id))
    assert not only(actions, StartQueue) and only(actions, LockQueues)


def test_no_periodic_write_without_a_valid_lock() -> None:
    d = Drive(persist_interval=30.0)
    d.start()
    d(MessagesPulled(QS[0], (5,), 6), at=1.0)
    d(MessagesDispatched(QS[0], (5,)))
    d(MessagesConsumed(QS[0], (5,)))
    d(Tick(), at=20.0)  # renewal lost
    assert not only(d(Tick(), at=30.0), PersistOffsets)


def test_orderly_locks_even_without_the_fence_but_broadcasting_never_locks() -> None:
    assert only(Drive(consume_orderly=True, fenced_handover=False).start(), LockQueues)
    d = Drive(consume_orderly=True, message_model=MessageModel.BROADCASTING)
    d(Started())
    assert not only(d.answer(d(RouteUpdated(T, frozenset(QS), "b0"))), LockQueues)


# ---------------------------------------------------------------------------------------- offsets


def test_offset_illegal_freezes_persists_drops_and_rebalances_at_once() -> None:
    d = Drive(fenced_handover=False)
    d.start()
    mq = QS[0]
    d(MessagesPulled(mq, (5, 6), 7), at=2.0)
    actions = d(OffsetIllegal(mq, 40))
    assert StopQueue(mq) in actions
    assert [p.offsets[mq] for p in only(actions, PersistOffsets)] == [40]
    d(MessagesConsumed(mq, (5, 6)))  # frozen: nothing moves it now
    actions = d(OffsetsPersisted({mq: 40}), at=2.1)
    assert DropQueue(mq) in actions and FetchConsumerList(T, "b0") in actions
    started = d.answer(d(ConsumerListFetched(T, (ME,))), offset=40)
    assert only(started, StartQueue) == [StartQueue(mq, 40)]


def test_an_operators_reset_waits_for_the_write_on_its_way_and_nothing_writes_the_old_offset_after_it() -> None:
    """O5: an active queue with a periodic write of its old position on the way when the reset comes: the reset
    offset is written after that write's answer (O3), the queue drains (the fence), is dropped, unlocked and taken
    again from the reset offset; no write after the reset's carries the old position, the drain's included."""
    d = Drive()
    d.start()
    mq = QS[0]
    d(MessagesPulled(mq, (5, 6, 7), 8), at=1.0)
    d(MessagesDispatched(mq, (5,)))
    (periodic,) = only(d(Tick(), at=5.0), PersistOffsets)
    assert periodic.offsets[mq] == 5
    actions = d(OffsetsReset({mq: 2, MessageQueue(T, "elsewhere", 0): 9}), at=5.1)  # not ours: not touched
    assert only(actions, OffsetResetApplied) == [OffsetResetApplied(mq, 5, 2)]
    assert StopQueue(mq) in actions and not only(actions, PersistOffsets)  # draining; a write is on the way
    actions = d(MessagesConsumed(mq, (5,)), at=5.2)  # drained: frozen at 2, written after the old write's answer
    assert not [p for p in only(actions, PersistOffsets) if mq in p.offsets]
    actions = d(OffsetsPersisted(dict(periodic.offsets)), at=5.3)  # the old position lands first
    assert [p.offsets[mq] for p in only(actions, PersistOffsets) if mq in p.offsets] == [2]
    actions = d(OffsetsPersisted({mq: 2}), at=5.4)
    assert actions.index(DropQueue(mq)) < actions.index(UnlockQueues("b0", (mq,)))
    d(QueuesUnlocked(frozenset({mq})), at=5.45)
    started = d.answer(d(ConsumerListFetched(T, (ME,)), at=5.5), offset=2)  # the round its release asked for
    assert only(started, StartQueue) == [StartQueue(mq, 2)]
    later = [p.offsets[mq] for p in only(d(Tick(), at=10.0), PersistOffsets) if mq in p.offsets]
    assert later == [2]


def test_a_reset_while_the_offset_is_read_starts_there_and_writes_it() -> None:
    """O5: a queue being acquired (its stored offset, the old one, on its way) starts at the reset offset."""
    d = Drive(fenced_handover=False)
    d(Started())
    d(RouteUpdated(T, frozenset(QS), "b0"))
    reads = only(d(ConsumerListFetched(T, (ME,))), ReadOffset)
    mq = reads[0].mq
    d(OffsetsReset({mq: 1}), at=0.1)
    actions = d(OffsetRead(mq, 7, reads[0].request_id), at=0.2)
    assert only(actions, StartQueue) == [StartQueue(mq, 1)]
    assert [p.offsets[mq] for p in only(actions, PersistOffsets)] == [1]


def test_a_reset_while_the_lock_is_asked_for_is_the_holders_and_the_start_reads_what_it_wrote() -> None:
    """O5, fenced: a queue whose lock is still asked for when the reset comes is its holder's to reset (found by
    the state machine: the old owner applied the reset, consumed from it to 20 and let go; the new owner, applying
    it again once its lock came, wrote 14 after 20). The start takes the offset read, and writes nothing older."""
    d = Drive()
    d(Started())
    d(RouteUpdated(T, frozenset(QS), "b0"))
    locks = only(d(ConsumerListFetched(T, (ME,))), LockQueues)
    mq = locks[0].queues[0]
    actions = d(OffsetsReset({mq: 14}), at=0.1)
    assert not only(actions, OffsetResetApplied) and not only(actions, PersistOffsets)
    granted = d(LockResult(frozenset(locks[0].queues), frozenset(locks[0].queues), locks[0].epoch), at=0.2)
    reads = [r for r in only(granted, ReadOffset) if r.mq == mq]
    started = d(OffsetRead(mq, 20, reads[0].request_id), at=0.3)
    assert only(started, StartQueue) == [StartQueue(mq, 20)]
    assert not [p for p in only(started, PersistOffsets) if mq in p.offsets]


def test_a_reset_during_a_release_freezes_at_the_reset_offset() -> None:
    """O5: a queue already frozen for its release writes the reset offset after the frozen one's write."""
    d = Drive()
    d.start()
    mq = QS[3]
    d(MessagesPulled(mq, (5, 6), 7), at=1.0)
    d(MessagesDispatched(mq, (5, 6)))
    d(MessagesConsumed(mq, (5, 6)))
    actions = d.round((ME, OTHER), at=2.0)  # drained at once, frozen at 7, written
    assert [p.offsets[mq] for p in only(actions, PersistOffsets) if mq in p.offsets] == [7]
    actions = d(OffsetsReset({mq: 0}), at=2.1)
    assert not only(actions, PersistOffsets) and not only(actions, DropQueue)
    actions = d(OffsetsPersisted({mq: 7}), at=2.2)  # the frozen write's answer: not the end, the reset follows
    assert [p.offsets[mq] for p in only(actions, PersistOffsets)] == [0] and not only(actions, DropQueue)
    assert DropQueue(mq) in d(OffsetsPersisted({mq: 0}), at=2.3)


def test_pushed_queues_not_pulled_for_two_minutes_are_dropped() -> None:
    d = Drive(fenced_handover=False)
    d.start()
    for mq in QS[1:]:
        d(MessagesPulled(mq, (), 5), at=100.0)
    actions = d.round((ME,), at=121.0)
    assert [a.mq for a in only(actions, StopQueue)] == [QS[0]]
    pull = Drive(fenced_handover=False, push_consumer=False)
    pull.start()
    assert not only(pull.round((ME,), at=121.0), StopQueue)


def test_periodic_persist_writes_every_held_offset_so_a_lost_write_is_repaired() -> None:
    """O1: every interval writes every held queue's commit offset, as Java's persistAll: a write the broker
    acknowledged but lost (or that a late, timed-out write overtook) is written again at the next interval."""
    d = Drive(fenced_handover=False)
    d.start()
    (first,) = only(d(Tick(), at=5.0), PersistOffsets)
    assert dict(first.offsets) == {mq: 5 for mq in QS}  # unchanged read offsets too
    d(OffsetsPersisted(dict(first.offsets)))
    d(MessagesPulled(QS[1], (5, 6), 7), at=6.0)
    d(MessagesDispatched(QS[1], (5, 6)))
    d(MessagesConsumed(QS[1], (6,)))
    assert d.core.process_queue(QS[1]).commit_offset == 5  # type: ignore[union-attr]
    d(MessagesConsumed(QS[1], (5,)))
    (second,) = only(d(Tick(), at=10.0), PersistOffsets)
    assert dict(second.offsets) == {**{mq: 5 for mq in QS}, QS[1]: 7}
    d(OffsetsPersisted(dict(second.offsets)))  # acknowledged; say the broker lost QS[1]'s write
    (third,) = only(d(Tick(), at=15.0), PersistOffsets)
    assert dict(third.offsets)[QS[1]] == 7


def test_a_write_still_on_the_way_is_not_doubled_by_the_interval() -> None:
    """O3 holds under O1: a queue whose write is unanswered is left out of the next interval's batch."""
    d = Drive(fenced_handover=False)
    d.start()
    (first,) = only(d(Tick(), at=5.0), PersistOffsets)
    d(OffsetsPersisted({mq: 5 for mq in QS[1:]}))  # QS[0]'s answer has not come yet
    (second,) = only(d(Tick(), at=10.0), PersistOffsets)
    assert QS[0] not in dict(second.offsets) and set(dict(second.offsets)) == set(QS[1:])


# ---------------------------------------------------------------------------------------- shutdown and time


def test_shutdown_releases_everything_then_completes() -> None:
    d = Drive()
    d.start()
    d(MessagesPulled(QS[2], (5,), 6), at=1.0)
    d(MessagesDispatched(QS[2], (5,)))
    d(MessagesConsumed(QS[2], (5,)))
    actions = d(ShutdownRequested(), at=3.0)
    assert {a.mq for a in only(actions, StopQueue)} == set(QS)
    assert not only(actions, ShutdownComplete)
    (persist,) = only(actions, PersistOffsets)
    assert dict(persist.offsets) == {QS[2]: 6}  # the others' stored offsets stand
    actions = d(OffsetsPersisted(dict(persist.offsets)))
    assert {a.mq for a in only(d.log, DropQueue)} == set(QS)
    assert not only(actions, ShutdownComplete)  # M2: not while unlocks are on their way
    unlocked = {mq for a in only(d.log, UnlockQueues) for mq in a.queues}
    assert unlocked == set(QS)
    actions = d(QueuesUnlocked(frozenset(QS[:3])))
    assert not only(actions, ShutdownComplete)
    assert only(d(QueuesUnlocked(frozenset(QS[3:]))), ShutdownComplete)
    assert not only(d(ConsumerIdsChanged(), at=10.0), FetchConsumerList)


def test_a_shutdown_whose_unlock_is_never_answered_completes_when_it_times_out() -> None:
    d = Drive(request_timeout=2.0)
    d.start()
    d(ShutdownRequested(), at=3.0)
    assert not only(d(Tick(), at=4.9), ShutdownComplete)
    assert only(d(Tick(), at=5.0), ShutdownComplete)


def test_shutdown_with_nothing_held_completes_at_once() -> None:
    d = Drive()
    d(Started())
    assert only(d(ShutdownRequested()), ShutdownComplete)


def test_wake_ups_are_announced_for_every_timer() -> None:
    d = Drive()
    d.start()
    wakes = [a.time for a in d.log if isinstance(a, WakeAt)]
    assert wakes[-1] == d.core.next_wakeup == 5.0  # persist
    seen = set()
    for _ in range(20):
        at = d.core.next_wakeup
        assert at is not None
        for action in d.answer(d(Tick(), at=at)):
            seen.add(type(action))
        if isinstance(action := d.log[-1], FetchConsumerList):
            d(ConsumerListFetched(T, (ME,)))
    assert {FetchRoutes, SendHeartbeat, LockQueues, FetchConsumerList} <= seen


def test_unknown_events_are_refused() -> None:
    with pytest.raises(TypeError):
        RebalanceCore(RebalanceConfig(G, ME)).handle(object(), 0.0)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ R6: strategies spanning topics

U = "U"
US = [MessageQueue(U, "b0", i) for i in range(3)]
RETRY_QS = [MessageQueue(RETRY, "b0", 0)]
EVERY_QUEUE = QS + US + RETRY_QS
CROSS = {"strategy": create_strategy("CROSS_TOPIC")}


def cross_share(cids: tuple[str, ...]) -> set[MessageQueue]:
    prepared = prepare_rebalance_input(EVERY_QUEUE, cids, warn=False)
    return set(create_strategy("CROSS_TOPIC").allocate(G, ME, prepared.mq_all, prepared.cid_all))


def start_across(d: Drive, lists: dict[str, tuple[str, ...] | None]) -> list[Action]:
    """Routes of T, U and the retry topic first, then start: one round fetches the three lists; answer ``lists``."""
    for topic, queues in ((T, QS), (U, US), (RETRY, RETRY_QS)):
        d(RouteUpdated(topic, frozenset(queues), "b0"))
    fetched = only(d(Started()), FetchConsumerList)
    assert {f.topic for f in fetched} == {T, U, RETRY}
    actions: list[Action] = []
    for topic, cids in lists.items():
        actions += d(ConsumerListFetched(topic, cids))
    return d.answer(actions)


def test_a_strategy_spanning_topics_is_asked_once_with_every_topics_queues() -> None:
    d = Drive(topics=(T, U), **CROSS)
    assert not only(start_across(d, {T: (ME, OTHER), U: (ME, OTHER)}), StartQueue)  # the retry list is still due
    d.answer(d(ConsumerListFetched(RETRY, (ME, OTHER))))
    assert d.core.active_queues() == cross_share((ME, OTHER))
    # 8 queues, 4 each; topic by topic AVG would give us 2 of T, 2 of U and the retry queue: 5 against 3
    assert len(d.core.active_queues()) == 4
    assert {topic: len(d.core.allocated(topic)) for topic in (T, U, RETRY)} == {T: 2, U: 1, RETRY: 1}


def test_one_failed_list_leaves_every_topic_as_it_was_when_the_strategy_spans_topics() -> None:
    d = Drive(topics=(T, U), **CROSS)
    start_across(d, {T: (ME,), U: (ME,), RETRY: (ME,)})
    assert d.core.active_queues() == set(EVERY_QUEUE)
    actions = d(ConsumerIdsChanged(), at=3.0)
    actions += d(ConsumerListFetched(T, (ME, OTHER)))
    actions += d(ConsumerListFetched(U, None))
    actions += d(ConsumerListFetched(RETRY, (ME, OTHER)))
    assert not only(actions, StopQueue) and d.core.active_queues() == set(EVERY_QUEUE)  # T was not split alone
    assert d.core.next_wakeup == 4.0  # R3: unbalanced, again in a second


def test_the_union_of_the_lists_is_the_member_list_when_the_strategy_spans_topics() -> None:
    d = Drive(topics=(T, U), **CROSS)
    start_across(d, {T: (ME, OTHER), U: (ME,), RETRY: (ME,)})  # U's broker has not seen OTHER's heartbeat yet
    assert d.core.active_queues() == cross_share((ME, OTHER))


def test_a_shared_id_in_any_topic_withholds_every_topic_when_the_strategy_spans_topics() -> None:
    d = Drive(topics=(T, U), **CROSS)
    actions = start_across(d, {T: (ME, OTHER), U: (ME, ME, OTHER), RETRY: (ME, OTHER)})
    assert only(actions, ClientIdShared) == [ClientIdShared(U, ME, 2, True)]
    assert not d.core.held_queues()
    d.answer(d(ConsumerIdsChanged(), at=3.0) + d(ConsumerListFetched(T, (ME, OTHER))))
    d.answer(d(ConsumerListFetched(U, (ME, OTHER))) + d(ConsumerListFetched(RETRY, (ME, OTHER))))
    assert d.core.active_queues() == cross_share((ME, OTHER))  # the clone left: every topic taken again
