"""Several cores of one group against the in-memory broker, driven by hypothesis with random events in random order.

Moves: consumers join, leave gracefully and crash; requests are delivered in any order, fail, or expire when
time jumps; notifications are delayed or lost; messages are produced, pulled, handed out and consumed; the
broker deletes old messages (OFFSET_ILLEGAL); in some worlds the unlocks of a gone holder's release (L9) land
late, on their own. Checked after every move: every queue's change of state is a row of
the core's transition table (``QUEUE_TRANSITIONS``); committed offsets never go backwards (in each process queue,
and on the broker when locks fence the queues); with locks, no two consumers may hand out
the same queue's messages at once. In the graceful world (no crash, no failure, no lost request) no message is
handed out twice. After the run, everything is delivered and time passes until quiet: then every queue is owned
by exactly one live consumer, the one the strategy names, and every message still on the broker was consumed.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from rocket_rebalance.core import FetchConsumerList, RebalanceConfig
from rocket_rebalance.model import ConsumeFromWhere, MessageQueue, prepare_rebalance_input, retry_topic
from rocket_rebalance.strategies import AllocateMessageQueueStrategy, create_strategy, spans_topics
from tests.core.sim import Sim, SimConsumer

GROUP = "group"
TOPIC = "T"
QUEUES = [MessageQueue(TOPIC, f"broker-{i % 2}", i // 2) for i in range(6)]
RETRY_QUEUES = [MessageQueue(retry_topic(GROUP), "broker-0", 0)]
ALL_QUEUES = QUEUES + RETRY_QUEUES
# Every interval scaled down ~10x (same ratios as Java's defaults) so that a few dozen random steps cross them all.
REQUEST_TIMEOUT = 1.0
INTERVALS = dict(
    rebalance_interval=2.0,
    rebalance_min_interval=0.1,
    unbalanced_retry_interval=0.1,
    lock_retry_interval=0.05,
    route_refresh_interval=3.0,
    heartbeat_interval=3.0,
    persist_interval=0.5,
    lock_all_interval=2.0,
    client_lock_lifetime=3.0,
    broker_lock_lifetime=6.0,
    pull_expiry=12.0,
    release_retry_interval=0.05,
    request_timeout=REQUEST_TIMEOUT,
    dead_holder_grace=0.05,
    rejoin_delay=0.2,
    dead_holder_window=0.1,
    revoke_timeout=1.5,
)


class RebalanceWorld(RuleBasedStateMachine):
    """The general world: anything may happen. Subclasses pick the consumer mode and how hostile the world is."""

    orderly = False
    fenced = True
    graceful = False
    shared_ids = False  # joins may reuse a running consumer's client ID (cloned containers)
    broker_keeps_locks = False  # RocketMQ keeps a closed connection's locks for their lifetime; the stub frees them
    listener = False  # a rebalance listener: every release revokes first (L10)
    delayed_unlocks = False  # a release's unlocks (L9) land when a step lands them, up to their sender's deadline
    late_unlocks = False  # ... or after it (the broker carries out a queued request late): L9 (c)'s remainder
    strategy: AllocateMessageQueueStrategy = create_strategy("AVG")

    def __init__(self) -> None:
        super().__init__()
        routes = {TOPIC: QUEUES, retry_topic(GROUP): RETRY_QUEUES}
        self.sim = Sim(
            routes,
            lock_lifetime=INTERVALS["broker_lock_lifetime"],
            keeps_locks=self.broker_keeps_locks,
            delayed_unlocks=self.delayed_unlocks,
            late_unlocks=self.late_unlocks,
        )
        for mq in ALL_QUEUES:
            self.sim.broker.max_offset[mq] = 4
        self.joined = 0

    @property
    def uses_locks(self) -> bool:
        return self.orderly or self.fenced

    def config(self, cid: str) -> RebalanceConfig:
        return RebalanceConfig(
            GROUP,
            cid,
            consume_orderly=self.orderly,
            fenced_handover=self.fenced,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            # The graceful world proves the fence: a drain that never times out must re-deliver nothing.
            # (Orderly ignores the bound and waits for the message in consumption: the orderly worlds check that.)
            handover_drain_timeout=1e9 if self.graceful and not self.orderly else 0.5,
            strategy=self.strategy,
            confirm_revoke=self.listener,
            **INTERVALS,  # type: ignore[arg-type]
        )

    def _running(self) -> list[SimConsumer]:
        return [c for c in self.sim.live() if not c.leaving]

    @initialize(consumers=st.integers(1, 3))
    def start_group(self, consumers: int) -> None:
        """Start from a settled group with messages waiting, so the random steps are spent on changes."""
        for _ in range(consumers):
            self._join_new()
        self.sim.settle(REQUEST_TIMEOUT, rounds=20, step=0.05)
        for mq in ALL_QUEUES:
            self.sim.broker.max_offset[mq] += 6

    # membership ---------------------------------------------------------------------------

    @precondition(lambda self: len(self.sim.live()) < 4 and self.joined < 7)
    @rule()
    def join(self) -> None:
        self._join_new()

    def _join_new(self) -> None:
        self.joined += 1
        self.sim.join(self.config(f"10.0.0.{self.joined}@{self.joined}"), [TOPIC])

    @precondition(lambda self: self.shared_ids and 0 < len(self._running()) and len(self.sim.live()) < 5)
    @rule(data=st.data())
    def join_with_a_used_id(self, data: st.DataObject) -> None:
        """A clone: a consumer whose client ID a running consumer already has. Like the real runtime, its first
        member list may be read before its heartbeat registers it: the list then shows the ID once, the other's."""
        cid = data.draw(st.sampled_from(sorted({c.cid for c in self._running()})))
        self.sim.join(self.config(cid), [TOPIC])

    @precondition(lambda self: len([c for c in self.sim.live() if not c.leaving]) > 0)
    @rule(data=st.data())
    def leave(self, data: st.DataObject) -> None:
        self.sim.leave(data.draw(st.sampled_from(self._running())))

    @precondition(lambda self: not self.graceful and len(self.sim.live()) > 0)
    @rule(data=st.data())
    def crash(self, data: st.DataObject) -> None:
        self.sim.crash(data.draw(st.sampled_from(self.sim.live())))

    @precondition(lambda self: not self.graceful and len(self._running()) > 0)
    @rule(data=st.data())
    def lose_connection(self, data: st.DataObject) -> None:
        """A consumer's connection closes while it runs: the broker drops it from the member list (L9)."""
        self.sim.disconnect(data.draw(st.sampled_from(self._running())))

    # the network --------------------------------------------------------------------------

    @precondition(lambda self: len(self.sim.pending) > 0)
    @rule(data=st.data(), fail=st.booleans())
    def deliver(self, data: st.DataObject, fail: bool) -> None:
        index = data.draw(st.integers(0, len(self.sim.pending) - 1))
        self.sim.deliver(index, fail=fail and not self.graceful)

    @precondition(lambda self: self.delayed_unlocks and len(self._running()) > 1 and self._holders())
    @rule(
        data=st.data(),
        away=st.integers(1, 12),
        back=st.integers(0, 16),
        land_at=st.integers(-1, 16),
        land_away=st.booleans(),
    )
    def holder_cut_off_and_back(self, data: st.DataObject, away: int, back: int, land_at: int, land_away: bool) -> None:
        """L9's scenario in one step, 0.05 s at a time: a holder's connection is lost and its requests stall (its
        heartbeat among them) for ``away`` steps, while the others find it gone, are refused its queues and release
        its locks; then the others' member lists stall (a slow broker) for ``back`` steps, while it comes back,
        waits its rejoin delay and locks again. Everything else is answered in order and the consumers work. The
        releases' unlocks still on their way land at step ``land_at`` of the first part (``land_away``) or of the
        second (-1: not in this step)."""
        sim = self.sim
        holder = data.draw(st.sampled_from(self._holders()))
        sim.disconnect(holder)
        land_at = -1 if land_at < 0 else land_at if land_away else away + land_at
        for step in range(away + back):
            if step == land_at:
                while sim.unlocks:
                    sim.land(0)
            for _ in range(200):
                if step < away:
                    ready = [i for i, r in enumerate(sim.pending) if r.client is not holder]
                else:
                    ready = [
                        i
                        for i, r in enumerate(sim.pending)
                        if r.client is holder or not isinstance(r.action, FetchConsumerList)
                    ]
                if ready:
                    sim.deliver(ready[0])
                elif sim.notifications:
                    sim.deliver_notification(0)
                else:
                    break
                self.no_queue_handed_out_by_two_consumers()
            sim.consume_all()
            sim.advance(0.05, REQUEST_TIMEOUT)
            self.no_queue_handed_out_by_two_consumers()

    def _holders(self) -> list[SimConsumer]:
        return [c for c in self._running() if c.core.active_queues()]

    @precondition(lambda self: len(self.sim.unlocks) > 0)
    @rule(data=st.data())
    def land_unlock(self, data: st.DataObject) -> None:
        """The broker carries out an unlock on a gone holder's behalf (L9): before its sender's deadline, or in the
        late worlds after it, when its holder may have come back and locked again."""
        self.sim.land(data.draw(st.integers(0, len(self.sim.unlocks) - 1)))

    @precondition(lambda self: len(self.sim.notifications) > 0)
    @rule(data=st.data(), lose=st.booleans())
    def notify(self, data: st.DataObject, lose: bool) -> None:
        self.sim.deliver_notification(data.draw(st.integers(0, len(self.sim.notifications) - 1)), lose=lose)

    @rule(data=st.data(), dt=st.sampled_from([0.01, 0.05, 0.1, 0.3, 0.6, 1.1, 3.1, 6.1]))
    def advance(self, data: st.DataObject, dt: float) -> None:
        if self.graceful:
            # Nothing is lost in the graceful world: every request is answered (in any order) before time moves.
            while self.sim.pending:
                self.sim.deliver(data.draw(st.integers(0, len(self.sim.pending) - 1)))
            dt = min(dt, 0.1)
        self.sim.advance(dt, REQUEST_TIMEOUT)

    # messages -----------------------------------------------------------------------------

    @rule(mq=st.sampled_from(ALL_QUEUES), count=st.integers(1, 3))
    def produce(self, mq: MessageQueue, count: int) -> None:
        self.sim.broker.max_offset[mq] += count

    @precondition(lambda self: not self.graceful)
    @rule(mq=st.sampled_from(QUEUES))
    def delete_old_messages(self, mq: MessageQueue) -> None:
        broker = self.sim.broker
        broker.min_offset[mq] = min(broker.max_offset[mq], broker.min_offset[mq] + 2)

    @rule(mq=st.sampled_from(QUEUES), data=st.data())
    def operator_resets(self, mq: MessageQueue, data: st.DataObject) -> None:
        """``mqadmin resetOffsetByTime`` with the broker leaving the reset to its clients (rule O5): any offset
        still stored, backwards or forwards."""
        broker = self.sim.broker
        self.sim.reset(mq, data.draw(st.integers(broker.min_offset[mq], broker.max_offset[mq])))

    @precondition(lambda self: any(c.pulling or any(c.dispatched.values()) for c in self.sim.live()))
    @rule(data=st.data(), dispatch=st.integers(0, 4), consume=st.integers(0, 4))
    def work(self, data: st.DataObject, dispatch: int, consume: int) -> None:
        """A burst of one consumer's runtime: pull every queue once, hand some out, finish some (any order)."""
        consumer = data.draw(st.sampled_from([c for c in self.sim.live() if c.pulling or any(c.dispatched.values())]))
        for mq in sorted(consumer.pulling):
            if consumer.alive and mq in consumer.pulling:
                consumer.pull(mq)
        for _ in range(dispatch):
            if consumer.alive:
                consumer.dispatch_any()
        for _ in range(consume):
            in_flight = sorted((mq, o) for mq, d in consumer.dispatched.items() for o in d)
            if not in_flight or not consumer.alive:
                break
            consumer.consume(*data.draw(st.sampled_from(in_flight)))

    @precondition(lambda self: any(c.pulling for c in self.sim.live()))
    @rule(data=st.data())
    def pull(self, data: st.DataObject) -> None:
        consumer = data.draw(st.sampled_from([c for c in self.sim.live() if c.pulling]))
        consumer.pull(data.draw(st.sampled_from(sorted(consumer.pulling))))

    @precondition(lambda self: any(any(c.buffered.values()) for c in self.sim.live()))
    @rule(data=st.data())
    def dispatch(self, data: st.DataObject) -> None:
        consumer = data.draw(st.sampled_from([c for c in self.sim.live() if any(c.buffered.values())]))
        consumer.dispatch(data.draw(st.sampled_from(sorted(mq for mq, b in consumer.buffered.items() if b))))

    @precondition(lambda self: any(any(c.dispatched.values()) for c in self.sim.live()))
    @rule(data=st.data())
    def consume(self, data: st.DataObject) -> None:
        consumer = data.draw(st.sampled_from([c for c in self.sim.live() if any(c.dispatched.values())]))
        mq = data.draw(st.sampled_from(sorted(mq for mq, d in consumer.dispatched.items() if d)))
        consumer.consume(mq, data.draw(st.sampled_from(sorted(consumer.dispatched[mq]))))

    # invariants ---------------------------------------------------------------------------

    @invariant()
    def commit_offsets_never_go_backwards(self) -> None:
        assert not self.sim.violations, self.sim.violations

    @invariant()
    def every_move_is_a_move_of_the_queue_transition_table(self) -> None:
        """Each state change of every core, seen from outside, is a row of ``QUEUE_TRANSITIONS`` and ends where the
        row says (the core's ``_move`` checks this too; the harness checks it without trusting it)."""
        assert not self.sim.wrong_moves, self.sim.wrong_moves

    def _in_doubt(self) -> set[MessageQueue]:
        """With ``late_unlocks``, the queues of a release whose unlock was in doubt (L9 (c), reported at ERROR):
        such an unlock may land after its holder came back and locked again, which no client can fully prevent
        (elsewhere an unlock in doubt never lands, and nothing is excused)."""
        if not self.late_unlocks:
            return set()
        return {mq for _, _, _, queues in self.sim.in_doubt for mq in queues}

    @invariant()
    def broker_offsets_never_go_backwards(self) -> None:
        if not self.uses_locks:
            return  # without the fence an old owner's periodic write may land after the new owner's (as in Java)
        for mq, history in self.sim.broker.offset_history.items():
            for era in self._eras(mq, history):  # O5: a reset's write begins an era; each only moves forward
                assert era == sorted(era) or mq in self._in_doubt(), f"{mq}: {history} (resets {self.sim.resets})"

    def _eras(self, mq: MessageQueue, history: list[int]) -> list[list[int]]:
        """``history`` cut at each reset's first write of its offset after the reset (writes of the old position
        on their way then may land before it, never after: O3). A write of the old position after the reset's
        makes its era go backwards at the next forward write."""
        cuts = {0}
        for reset_mq, offset, written, _ in self.sim.resets:  # resets back to back: the last one's write wins
            if reset_mq == mq:
                after = next((i for i in range(written, len(history)) if history[i] == offset), None)
                if after is not None:
                    cuts.add(after)
        ordered = sorted(cuts)
        return [history[a:b] for a, b in zip(ordered, [*ordered[1:], len(history)], strict=True)]

    @invariant()
    def no_queue_handed_out_by_two_consumers(self) -> None:
        if not self.uses_locks:
            return
        now = self.sim.now
        for mq in ALL_QUEUES:
            owners = [c.cid for c in self.sim.live() if c.core.is_dispatchable(mq, now)]
            assert len(owners) <= 1 or mq in self._in_doubt(), f"{mq} dispatchable at {owners}"

    @invariant()
    def orderly_queue_processed_by_one_consumer_at_a_time(self) -> None:
        """Orderly, graceful: a queue's messages are handed out or still being consumed at one consumer at most."""
        if not (self.orderly and self.graceful):
            return  # a listener outliving the broker lock (crash, partition) is outside what a client can prevent
        now = self.sim.now
        for mq in ALL_QUEUES:
            busy = [c.cid for c in self.sim.live() if c.core.is_dispatchable(mq, now) or c.dispatched.get(mq)]
            assert len(busy) <= 1, f"{mq} busy at {busy}"

    @invariant()
    def graceful_moves_redeliver_nothing(self) -> None:
        if not self.graceful:
            return
        # L8 gives a handover up only when its offset writes fail, which the graceful world never does
        assert not [h for c in self.sim.consumers for h in c.handovers_without_offset]
        seen: dict[tuple[MessageQueue, int], tuple[str, int]] = {}
        for index, (cid, mq, offset) in enumerate(self.sim.deliveries):
            earlier = seen.get((mq, offset))
            replayed = earlier is not None and any(  # O5: an operator's reset to it, or before it, replays it
                reset_mq == mq and to <= offset and earlier[1] < delivered <= index
                for reset_mq, to, _, delivered in self.sim.resets
            )
            assert earlier is None or replayed, f"{mq}@{offset} handed to {earlier[0]} and again to {cid}"
            seen[(mq, offset)] = (cid, index)

    def teardown(self) -> None:
        sim = self.sim
        if self.shared_ids:
            self._leave_clones()
        if not self._running():
            return  # nobody left to converge on (leavers are checked by the invariants as they go)
        # What the run left on its way plays out first: a lock renewal lost just before the teardown (time jumped
        # past its answer) lapses within a client lock lifetime, and L2 drops the queue and takes it again; that is
        # the run's doing, not a group that never settles.
        lingering = INTERVALS["client_lock_lifetime"] + INTERVALS["lock_all_interval"]
        sim.settle(REQUEST_TIMEOUT, rounds=round(lingering / 0.05), step=0.05)
        for _ in range(600):
            sim.settle(REQUEST_TIMEOUT, rounds=1, step=0.05)
            if self._converged() and self._all_consumed() and not sim.pending and not self._leaving():
                break
        assert self._converged(), self._ownership()
        # Quiet must last: ownership stays put across several lock lifetimes and rebalance intervals.
        moves_before = sim.moves
        sim.settle(REQUEST_TIMEOUT, rounds=300, step=0.05)
        assert self._converged(), self._ownership()
        assert sim.moves == moves_before, "queues started or stopped while the group was quiet"
        self.commit_offsets_never_go_backwards()
        self.every_move_is_a_move_of_the_queue_transition_table()
        self.broker_offsets_never_go_backwards()
        self.graceful_moves_redeliver_nothing()
        assert self._all_consumed(), self._describe()

    def _leave_clones(self) -> None:
        """Clones leave (one consumer per ID stays), so the rest of the teardown checks the group heals: the
        queues withheld while the ID was shared are taken again and everything gets consumed."""
        seen: set[str] = set()
        for consumer in self._running():
            if consumer.cid in seen:
                self.sim.leave(consumer)
            seen.add(consumer.cid)
        for _ in range(200):
            if not any(c.leaving for c in self.sim.live()):
                break
            self.sim.settle(REQUEST_TIMEOUT, rounds=1, step=0.05)
        assert not any(c.leaving for c in self.sim.live()), "a clone never finished leaving"

    def _describe(self) -> str:
        broker = self.sim.broker
        missing = [
            f"{mq}@{offset}"
            for mq in ALL_QUEUES
            for offset in range(broker.min_offset[mq], broker.max_offset[mq])
            if (mq, offset) not in self.sim.consumed
        ]
        states = {c.cid: {str(mq): c.core.state_of(mq) for mq in c.core.held_queues()} for c in self.sim.live()}
        return f"not consumed: {missing}; offsets {broker.offsets}; states {states}; locks {broker.locks}"

    def _ownership(self) -> dict[str, list[str]]:
        return {c.cid: sorted(str(mq) for mq in c.core.active_queues()) for c in self.sim.live()}

    def _leaving(self) -> list[SimConsumer]:
        """Consumers still shutting down: their releases are moves of a group not yet quiet (without the fence the
        new owners start at once, so the group converges while a leaver's revoke may still wait its timeout)."""
        return [c for c in self.sim.live() if c.leaving]

    def _converged(self) -> bool:
        live = [c for c in self.sim.live() if not c.leaving]
        cids = [c.cid for c in live if c.cid in self.sim.broker.registered]
        if len(cids) != len(live):
            return False
        # a strategy spanning topics is asked once for all of them (core R6); the others topic by topic
        batches = [ALL_QUEUES] if spans_topics(self.strategy) else [QUEUES, RETRY_QUEUES]
        for queues in batches:
            prepared = prepare_rebalance_input(queues, cids)
            for consumer in live:
                want = set(self.strategy.allocate(GROUP, consumer.cid, prepared.mq_all, prepared.cid_all) or ())
                have = {mq for mq in consumer.core.active_queues() if mq in queues}
                if want != have or set(consumer.core.held_queues()) - consumer.core.active_queues():
                    return False
        return True

    def _all_consumed(self) -> bool:
        """Every message still stored was consumed, but those an operator's reset forward may have skipped (O5):
        below the highest offset a reset of its queue named. (A reset no member could apply is lost, as in Java:
        one that came while its queue was being acquired, or whose holder lost the lock before it wrote it.)"""
        broker = self.sim.broker
        skipped: dict[MessageQueue, int] = {}
        for mq, offset, _, _ in self.sim.resets:
            skipped[mq] = max(offset, skipped.get(mq, 0))
        return all(
            (mq, offset) in self.sim.consumed
            for mq in ALL_QUEUES
            for offset in range(max(broker.min_offset[mq], skipped.get(mq, 0)), broker.max_offset[mq])
        )


SETTINGS = settings(
    max_examples=50,
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


class FencedConcurrentWorld(RebalanceWorld):
    orderly = False
    fenced = True


class OrderlyWorld(RebalanceWorld):
    orderly = True
    fenced = True


class RocketMQFencedWorld(RebalanceWorld):
    """A broker that keeps a crashed or cut-off member's locks for their lifetime, as RocketMQ does: only core rule
    L9 frees them early, and the invariants must hold all the same (one consumer per queue, offsets forward)."""

    broker_keeps_locks = True


class RocketMQOrderlyWorld(RocketMQFencedWorld):
    orderly = True


class DelayedUnlockFencedWorld(RocketMQFencedWorld):
    """Issue 37.3: a release's unlocks land on their own, up to their sender's deadline (``dead_holder_window``),
    or never: a holder that came back locks again only ``rejoin_delay`` after it registered, so after every unlock
    the releaser counted, and one it did not count holds the queues back from it (L9 (c))."""

    delayed_unlocks = True


class DelayedUnlockOrderlyWorld(DelayedUnlockFencedWorld):
    orderly = True


class LateUnlockOrderlyWorld(DelayedUnlockOrderlyWorld):
    """Unlocks that land after their sender stopped waiting, at any time: two consumers may then hand out one queue,
    but only a queue of a release that was in doubt (reported), never one the releaser counted as released."""

    late_unlocks = True


class JavaWorld(RebalanceWorld):
    """Fence off: Java's concurrent behaviour; only convergence, no loss and forward-only commits are promised."""

    orderly = False
    fenced = False


class GracefulFencedWorld(RebalanceWorld):
    graceful = True


class GracefulOrderlyWorld(RebalanceWorld):
    orderly = True
    graceful = True


class SharedIdFencedWorld(RebalanceWorld):
    """Cloned consumers share client IDs. The broker's locks cannot tell them apart, so only core rule L6 keeps
    them from consuming the same queues: the invariants (one consumer per queue, nothing handed out twice) and the
    teardown (the group heals once the clones leave) are the same as for a group of distinct IDs."""

    shared_ids = True
    graceful = True


class SharedIdOrderlyWorld(SharedIdFencedWorld):
    orderly = True


class CrossTopicWorld(RebalanceWorld):
    """CROSS_TOPIC over the bounded hash: one allocation for the topic and the retry topic together (core R6),
    in the general world (crashes, failed and lost requests); it must converge to the strategy's plan as well."""

    strategy = create_strategy("CROSS_TOPIC", inner="CONSISTENT_HASH_BOUNDED")


class ListenerFencedWorld(RebalanceWorld):
    """A rebalance listener on every consumer (L10), in the general world: its revokes return late, raise, or
    never return (they expire and ``revoke_timeout`` goes on); the fence's invariants hold as without it, and every
    consumer's listener sees each queue assigned once, then revoked or lost once (checked by the harness)."""

    listener = True


class ListenerGracefulWorld(RebalanceWorld):
    """With a listener and nothing lost: a revoke between drain and persist must not make a move re-deliver."""

    listener = True
    graceful = True


class ListenerOrderlyWorld(RebalanceWorld):
    listener = True
    orderly = True


class ListenerJavaWorld(RebalanceWorld):
    """With a listener and no fence: revoke still comes before the release's offset write."""

    listener = True
    fenced = False


TestFencedConcurrent = FencedConcurrentWorld.TestCase
TestFencedConcurrent.settings = SETTINGS
TestOrderly = OrderlyWorld.TestCase
TestOrderly.settings = SETTINGS
TestRocketMQFenced = RocketMQFencedWorld.TestCase
TestRocketMQFenced.settings = SETTINGS
TestRocketMQOrderly = RocketMQOrderlyWorld.TestCase
TestRocketMQOrderly.settings = SETTINGS
TestDelayedUnlockFenced = DelayedUnlockFencedWorld.TestCase
TestDelayedUnlockFenced.settings = SETTINGS
TestDelayedUnlockOrderly = DelayedUnlockOrderlyWorld.TestCase
TestDelayedUnlockOrderly.settings = SETTINGS
TestLateUnlockOrderly = LateUnlockOrderlyWorld.TestCase
TestLateUnlockOrderly.settings = SETTINGS
TestJavaBehaviour = JavaWorld.TestCase
TestJavaBehaviour.settings = SETTINGS
TestGracefulFenced = GracefulFencedWorld.TestCase
TestGracefulFenced.settings = SETTINGS
TestGracefulOrderly = GracefulOrderlyWorld.TestCase
TestGracefulOrderly.settings = SETTINGS
TestSharedIdFenced = SharedIdFencedWorld.TestCase
TestSharedIdFenced.settings = SETTINGS
TestSharedIdOrderly = SharedIdOrderlyWorld.TestCase
TestSharedIdOrderly.settings = SETTINGS
TestCrossTopic = CrossTopicWorld.TestCase
TestCrossTopic.settings = SETTINGS
TestListenerFenced = ListenerFencedWorld.TestCase
TestListenerFenced.settings = SETTINGS
TestListenerGraceful = ListenerGracefulWorld.TestCase
TestListenerGraceful.settings = SETTINGS
TestListenerOrderly = ListenerOrderlyWorld.TestCase
TestListenerOrderly.settings = SETTINGS
TestListenerJava = ListenerJavaWorld.TestCase
TestListenerJava.settings = SETTINGS
