"""The queue's transition table (core rules, "Queue life") against the code, both ways.

Every write of a queue's state in ``machine.py`` is a move of ``QUEUE_TRANSITIONS`` (read from the source); every
move the cores make in random runs is a row of the table and ends where it says (checked here, and in every
hypothesis world of ``test_state_machine`` as an invariant); and every row is a move the code makes: seeded random
runs over the simulated broker make all of them but a few, which the scenarios below make by hand.
"""

from __future__ import annotations

import ast
import random
import typing
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from rocket_rebalance.core import (
    BrokerConnectionLost,
    ConsumerIdsChanged,
    ConsumerListFetched,
    DropQueue,
    LockQueues,
    LockResult,
    MessagesDispatched,
    MessagesPulled,
    OffsetIllegal,
    OffsetLookupFailed,
    OffsetQueried,
    OffsetRead,
    OffsetsPersisted,
    PersistOffsets,
    QueryMaxOffset,
    QueueState,
    ReadOffset,
    RebalanceConfig,
    RouteUpdated,
    Started,
    Tick,
    machine,
)
from rocket_rebalance.core.machine import QUEUE_TRANSITIONS, QueueCause
from rocket_rebalance.model import ConsumeFromWhere, MessageQueue, retry_topic
from tests.core.sim import Move, Sim, watch_moves
from tests.core.test_core import ME, OTHER, QS, Drive, T, expected_share, only
from tests.core.test_state_machine import ALL_QUEUES, GROUP, INTERVALS, QUEUES, REQUEST_TIMEOUT, RETRY_QUEUES, TOPIC

Row = tuple[QueueState | None, QueueCause]
TABLE: set[Row] = {(state, cause) for state, moves in QUEUE_TRANSITIONS.items() for cause in moves}


def made_rows(moves: set[Move]) -> set[Row]:
    return {(before, cause) for before, cause, _ in moves}


# ---------------------------------------------------------------------------------------- the source


def _writes_outside_move(tree: ast.Module) -> list[str]:
    """Every place outside ``RebalanceCore._move`` that writes a ``.state``, adds an entry to ``_entries`` or
    removes one, or builds an ``_Entry`` with a state."""
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef) or function.name == "_move":
            continue
        for node in ast.walk(function):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            elif isinstance(node, ast.Delete):
                targets = node.targets
            for target in (t for top in targets for t in ast.walk(top)):
                if isinstance(target, ast.Attribute) and target.attr == "state":
                    found.append(f"{function.name} line {target.lineno}: .state written")
                if isinstance(target, ast.Subscript) and ast.unparse(target.value) == "self._entries":
                    found.append(f"{function.name} line {target.lineno}: _entries changed")
            if isinstance(node, ast.Call):
                name = ast.unparse(node.func)
                if name == "_Entry" and (len(node.args) > 1 or any(k.arg == "state" for k in node.keywords)):
                    found.append(f"{function.name} line {node.lineno}: _Entry built with a state")
                if name in ("setattr", "object.__setattr__", "dataclasses.replace", "replace"):
                    found.append(f"{function.name} line {node.lineno}: {name}")
                if name.startswith("self._entries.") and name.rsplit(".", 1)[1] in ("pop", "popitem", "clear"):
                    found.append(f"{function.name} line {node.lineno}: {name}")
    return found


def test_every_state_write_in_the_core_is_a_move_of_the_table() -> None:
    tree = ast.parse(Path(machine.__file__).read_text(encoding="utf-8"))
    assert _writes_outside_move(tree) == []
    (move,) = [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name == "_move"]
    assert "QUEUE_TRANSITIONS" in ast.unparse(move) and ".state = " in ast.unparse(move)  # not vacuous


def test_the_source_check_sees_a_direct_write() -> None:
    tree = ast.parse("def _release(self, entry):\n    entry.state = 1\n    del self._entries[entry.mq]\n")
    assert [w.split(":")[1] for w in _writes_outside_move(tree)] == [" .state written", " _entries changed"]


def test_the_table_names_every_state_and_every_cause() -> None:
    assert set(QUEUE_TRANSITIONS) == {None, *QueueState}
    targets = {target for moves in QUEUE_TRANSITIONS.values() for target in moves.values()}
    assert targets == {None, *QueueState}  # every state is entered, and every one can end in no entry
    causes = {cause for moves in QUEUE_TRANSITIONS.values() for cause in moves}
    assert causes == set(typing.get_args(QueueCause))


# ---------------------------------------------------------------------------------------- random runs

MODES: list[dict[str, object]] = [
    {},
    {"consume_orderly": True},
    {"fenced_handover": False},
    {"confirm_revoke": True},
    {"confirm_revoke": True, "consume_orderly": True},
    {"confirm_revoke": True, "fenced_handover": False},
]
WHERE = [ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET]
SEEDS = 30  # the rarest row made at random, READING by "lock sent", first comes at seed 20
STEPS = 300


def random_run(seed: int, mode: dict[str, object], where: ConsumeFromWhere, resets: bool = False) -> Sim:
    """A group on the simulated broker (``tests.core.sim``) moved at random, as the hypothesis worlds move it, plus
    answers that come after the core gave up on them (time passes and the requests stay): deterministic per seed;
    ``resets``: operators reset offsets too (O5), in a slice of the draws a run without them spends on its work."""
    rng = random.Random(seed)
    sim = Sim({TOPIC: QUEUES, retry_topic(GROUP): RETRY_QUEUES}, INTERVALS["broker_lock_lifetime"], rng.random() < 0.5)
    for mq in ALL_QUEUES:
        sim.broker.max_offset[mq] = 4
    joined = 0

    def join() -> None:
        nonlocal joined
        joined += 1
        config = RebalanceConfig(
            GROUP,
            f"10.0.0.{joined}@{joined}",
            consume_from_where=where,
            handover_drain_timeout=0.5,
            **mode,  # type: ignore[arg-type]
            **INTERVALS,  # type: ignore[arg-type]
        )
        sim.join(config, [TOPIC], registered=rng.random() < 0.3)

    for _ in range(rng.randint(1, 3)):
        join()
    for _ in range(STEPS):
        live = sim.live()
        running = [c for c in live if not c.leaving]
        busy = [c for c in live if c.pulling or any(c.dispatched.values())]
        r = rng.random()
        if r < 0.04 and len(live) < 4 and joined < 8:
            join()
        elif r < 0.06 and running:
            sim.leave(rng.choice(running))
        elif r < 0.08 and live:
            sim.crash(rng.choice(live))
        elif r < 0.11 and running:
            sim.disconnect(rng.choice(running))
        elif r < 0.45 and sim.pending:
            sim.deliver(rng.randrange(len(sim.pending)), fail=rng.random() < 0.25)
        elif r < 0.5 and sim.notifications:
            sim.deliver_notification(rng.randrange(len(sim.notifications)), lose=rng.random() < 0.3)
        elif r < 0.62:
            sim.advance(rng.choice([0.01, 0.05, 0.1, 0.3, 0.6, 1.1, 3.1, 6.1]), REQUEST_TIMEOUT)
        elif r < 0.66:
            sim.now += rng.choice([0.3, 1.1, 3.1])  # the requests on the way stay: answered late, if at all
            for consumer in sim.live():
                if consumer.alive and consumer.wake_at is not None and sim.now >= consumer.wake_at:
                    consumer.feed(Tick())
        elif r < 0.72:
            sim.broker.max_offset[rng.choice(ALL_QUEUES)] += rng.randint(1, 3)
        elif r < 0.74:
            mq = rng.choice(QUEUES)
            sim.broker.min_offset[mq] = min(sim.broker.max_offset[mq], sim.broker.min_offset[mq] + 2)
        elif resets and r < 0.75:
            mq = rng.choice(QUEUES)
            sim.reset(mq, rng.randint(sim.broker.min_offset[mq], sim.broker.max_offset[mq]))  # O5
        elif busy:
            consumer = rng.choice(busy)
            for mq in sorted(consumer.pulling):
                if consumer.alive and mq in consumer.pulling and rng.random() < 0.5:
                    consumer.pull(mq)
            for _ in range(rng.randint(0, 4)):
                if consumer.alive:
                    consumer.dispatch_any()
            for _ in range(rng.randint(0, 4)):
                in_flight = sorted((mq, o) for mq, d in consumer.dispatched.items() for o in d)
                if not in_flight or not consumer.alive:
                    break
                consumer.consume(*rng.choice(in_flight))
    return sim


# Rows no random run above makes (each needs a narrow order of late answers); the scenarios below make them.
NOT_MADE_AT_RANDOM: set[Row] = {
    (QueueState.DRAINING, "connection lost"),  # rare since L6 reads no list before the registration
    (QueueState.DRAINING, "lock refused"),
    (QueueState.DRAINING, "lock lapsed"),  # one seed of 40 made it, until L9's holds moved the runs
    (QueueState.LOCKING, "look-up failed"),  # rare since L6 reads no list before the registration
    (QueueState.LOCK_WAIT, "look-up failed"),
    (QueueState.READING, "lock deferred"),
    (QueueState.QUERYING, "lock sent"),
    (QueueState.QUERYING, "lock deferred"),
    (QueueState.LOCKING, "master down"),  # the simulated broker is a master alone
    (QueueState.LOCK_WAIT, "master down"),
}


def test_random_runs_make_only_moves_of_the_table_and_all_of_them_but_a_few() -> None:
    made: set[Move] = set()
    for seed in range(SEEDS):
        for index, mode in enumerate(MODES):
            for where in WHERE:
                for resets in (False, True):  # runs with operators' resets (O5) beside the same runs without
                    sim = random_run(seed * 100 + index, mode, where, resets)
                    assert not sim.wrong_moves, sim.wrong_moves
                    made |= sim.queue_moves
    assert made_rows(made) <= TABLE
    assert {(before, cause): after for before, cause, after in made} == {  # each row always ends where it says
        row: QUEUE_TRANSITIONS[row[0]][row[1]] for row in made_rows(made)
    }
    never = TABLE - made_rows(made)
    assert never <= NOT_MADE_AT_RANDOM, f"rows of the table no run makes: {sorted(map(str, never))}"


# ---------------------------------------------------------------------------------------- what random runs miss


def _watched(**options: object) -> tuple[Drive, set[Move]]:
    d = Drive(**options)
    made: set[Move] = set()
    wrong: list[str] = []
    watch_moves(d.core, made, wrong)
    return d, made


def _one_queue_locked_and_reading(d: Drive) -> ReadOffset:
    d(Started())
    d(RouteUpdated(T, frozenset(QS[:1]), "b0"))
    (lock,) = only(d(ConsumerListFetched(T, (ME,))), LockQueues)
    (read,) = only(d(LockResult(frozenset(lock.queues), frozenset(lock.queues))), ReadOffset)
    return read


def _orderly_draining() -> tuple[Drive, set[Move], MessageQueue]:
    """An orderly consumer whose queue is draining (L3: without limit) with a message being consumed."""
    d, made = _watched(consume_orderly=True)
    d.start()
    theirs = sorted(set(QS) - expected_share((ME, OTHER)))[0]
    d(MessagesPulled(theirs, (5,), 6), at=1.0)
    d(MessagesDispatched(theirs, (5,)))
    d.round((ME, OTHER), at=2.0)
    assert d.core.state_of(theirs) is QueueState.DRAINING
    return d, made, theirs


def connection_lost_while_draining() -> set[Move]:
    """L9 (b) while L3 drains: the broker's connection closes with a message being consumed."""
    d, made, theirs = _orderly_draining()
    assert DropQueue(theirs, lost=True) in d(BrokerConnectionLost("b0", 1), at=3.0)
    return made


def renewal_refused_while_draining() -> set[Move]:
    """L2 while L3 drains: orderly waits for the message being consumed, and the renewal is refused meanwhile."""
    d, made, theirs = _orderly_draining()
    (renewal,) = only(d(Tick(), at=20.0), LockQueues)
    actions = d(LockResult(frozenset(renewal.queues), frozenset(renewal.queues) - {theirs}))
    assert DropQueue(theirs, lost=True) in actions
    return made


def lock_lapsed_while_draining() -> set[Move]:
    """L2 while L3 drains (orderly: without limit), and the renewal is never answered: the client lock lapses."""
    d, made, theirs = _orderly_draining()
    assert only(d(Tick(), at=20.0), LockQueues)  # the renewal, never answered
    assert DropQueue(theirs, lost=True) in d(Tick(), at=30.0)
    return made


def _read_timed_out_and_locking_again(d: Drive) -> tuple[ReadOffset, LockQueues]:
    """A read times out (M1); by the next round the lock lapsed, so the queue is locked again."""
    read = _one_queue_locked_and_reading(d)
    d(Tick(), at=10.0)
    assert d.core.state_of(QS[0]) is QueueState.LOOKUP_WAIT
    d(ConsumerIdsChanged(), at=31.0)
    (lock,) = only(d(ConsumerListFetched(T, (ME,))), LockQueues)
    assert d.core.state_of(QS[0]) is QueueState.LOCKING
    return read, lock


def late_lookup_failure_while_locking() -> set[Move]:
    """The timed-out read's failure comes while the new lock is on the way."""
    d, made = _watched()
    read, _ = _read_timed_out_and_locking_again(d)
    d(OffsetLookupFailed(QS[0], read.request_id))
    assert d.core.state_of(QS[0]) is QueueState.LOOKUP_WAIT
    return made


def late_lookup_failure_while_waiting_for_the_lock() -> set[Move]:
    """The new lock is refused; then the timed-out read's failure comes."""
    d, made = _watched()
    read, lock = _read_timed_out_and_locking_again(d)
    d(LockResult(frozenset(lock.queues), frozenset()))
    assert d.core.state_of(QS[0]) is QueueState.LOCK_WAIT
    d(OffsetLookupFailed(QS[0], read.request_id))
    assert d.core.state_of(QS[0]) is QueueState.LOOKUP_WAIT
    return made


def lock_lapsed_while_querying() -> set[Move]:
    """L1: the max offset comes after the lock lapsed: locked again before the queue starts."""
    d, made = _watched()
    read = _one_queue_locked_and_reading(d)
    (query,) = only(d(OffsetRead(QS[0], None, read.request_id)), QueryMaxOffset)
    assert only(d(OffsetQueried(QS[0], 7, query.request_id), at=31.0), LockQueues)
    return made


def _granted_while_its_unlock_is_on_the_way(d: Drive) -> ReadOffset:
    """A renewal answered late grants the lock to the queue's next entry while the last one's unlock is still on
    its way (L4 holds the new entry back, the grant lets it through), so its look-up runs with that unlock pending."""
    mq = QS[0]
    d.start(queues=QS[:1])
    actions = d(Tick(), at=20.0)
    (renewal,) = only(actions, LockQueues)
    for persist in only(actions, PersistOffsets):
        d(OffsetsPersisted(dict(persist.offsets)))
    d(ConsumerListFetched(T, (ME,)))  # the timer round of 20 s
    (persist,) = only(d(OffsetIllegal(mq, 40), at=20.1), PersistOffsets)  # O2: released, wanted back
    d(OffsetsPersisted(dict(persist.offsets)), at=20.2)  # dropped and unlocked
    d(Tick(), at=21.2)
    assert not only(d(ConsumerListFetched(T, (ME,))), LockQueues)  # L4
    (read,) = only(d(LockResult(frozenset({mq}), frozenset({mq}))), ReadOffset)
    return read


def lock_lapsed_while_reading_with_an_unlock_on_the_way() -> set[Move]:
    d, made = _watched()
    read = _granted_while_its_unlock_is_on_the_way(d)
    assert not only(d(OffsetRead(QS[0], 40, read.request_id), at=60.0), LockQueues)  # L1, held back by L4
    assert d.core.state_of(QS[0]) is QueueState.LOCK_WAIT
    return made


def lock_lapsed_while_querying_with_an_unlock_on_the_way() -> set[Move]:
    d, made = _watched()
    read = _granted_while_its_unlock_is_on_the_way(d)
    (query,) = only(d(OffsetRead(QS[0], None, read.request_id)), QueryMaxOffset)
    assert not only(d(OffsetQueried(QS[0], 40, query.request_id), at=60.0), LockQueues)
    assert d.core.state_of(QS[0]) is QueueState.LOCK_WAIT
    return made


def _master_down_while_acquiring(answer_lock: bool) -> set[Move]:
    """L11: the route names the set without its master while the queue's lock is on the way (or was refused)."""
    d, made = _watched()
    d(Started())
    d(RouteUpdated(T, frozenset(QS[:1]), "b0"))
    (lock,) = only(d(ConsumerListFetched(T, (ME,))), LockQueues)
    if answer_lock:
        d(LockResult(frozenset(lock.queues), frozenset()))
        assert d.core.state_of(QS[0]) is QueueState.LOCK_WAIT
    assert only(d(RouteUpdated(T, frozenset(QS[:1]), "b0", frozenset({"b0"}))), ReadOffset)
    return made


SCENARIOS: dict[Row, Callable[[], set[Move]]] = {
    (QueueState.DRAINING, "connection lost"): connection_lost_while_draining,
    (QueueState.LOCKING, "master down"): partial(_master_down_while_acquiring, answer_lock=False),
    (QueueState.LOCK_WAIT, "master down"): partial(_master_down_while_acquiring, answer_lock=True),
    (QueueState.DRAINING, "lock refused"): renewal_refused_while_draining,
    (QueueState.DRAINING, "lock lapsed"): lock_lapsed_while_draining,
    (QueueState.LOCKING, "look-up failed"): late_lookup_failure_while_locking,
    (QueueState.LOCK_WAIT, "look-up failed"): late_lookup_failure_while_waiting_for_the_lock,
    (QueueState.QUERYING, "lock sent"): lock_lapsed_while_querying,
    (QueueState.READING, "lock deferred"): lock_lapsed_while_reading_with_an_unlock_on_the_way,
    (QueueState.QUERYING, "lock deferred"): lock_lapsed_while_querying_with_an_unlock_on_the_way,
}


@pytest.mark.parametrize("row", sorted(SCENARIOS, key=str), ids=lambda row: f"{row[0]} by {row[1]}")
def test_a_scenario_makes_each_move_random_runs_do_not(row: Row) -> None:
    made = made_rows(SCENARIOS[row]())
    assert row in made and made <= TABLE


def test_every_move_of_the_table_is_made() -> None:
    """The random runs make every row but ``NOT_MADE_AT_RANDOM`` (tested above), and the scenarios make those."""
    assert set(SCENARIOS) == NOT_MADE_AT_RANDOM <= TABLE
