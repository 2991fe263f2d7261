"""PullConsumer in-process against an in-process stub: poll across a changing group, commit, seek, pause, assign,
rebalance callbacks in ``poll()``, flow control, bad input.

Each consumer runs in a thread of its own, polling in a loop as an application would; the checks are on what the
polls returned and what the rebalance listener heard, never on timings."""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from typing import Any

import pytest

from rocket_rebalance.model import MessageQueue
from rocket_rebalance.runtime.listener import RebalanceListener
from rocket_rebalance.runtime.pull_consumer import PullConsumer
from rocket_rebalance.runtime.settings import EngineSettings, QueueNotAssignedError, SeekOffsetError
from rocket_rebalance.runtime.transport import GRPC_SCHEME, Message, TransportError
from rocket_rebalance.runtime.transport.grpc import GrpcTransport
from tests.runtime.test_consumer import FAST, produce, wait_for
from tests.stub.conftest import StartStub

TOPIC = "TopicTest"
QUEUES = [MessageQueue(TOPIC, broker, queue_id) for broker in ("broker-a", "broker-b") for queue_id in range(4)]


class Heard(RebalanceListener):
    """Every callback, in order, with when it returned (one clock for every consumer of a test)."""

    def __init__(self, log: list[tuple[str, str, frozenset[MessageQueue], float]], name: str) -> None:
        self.log = log
        self.name = name
        self.lock = threading.Lock()

    def _heard(self, kind: str, queues: frozenset[MessageQueue]) -> None:
        with self.lock:
            self.log.append((self.name, kind, queues, time.monotonic()))

    def on_queues_assigned(self, queues: frozenset[MessageQueue]) -> None:
        self._heard("assigned", queues)

    def on_queues_revoked(self, queues: frozenset[MessageQueue]) -> None:
        self._heard("revoked", queues)

    def on_queues_lost(self, queues: frozenset[MessageQueue]) -> None:
        self._heard("lost", queues)


class Poller:
    """A pull consumer polling in a thread until stopped; what each poll returned, with when."""

    def __init__(self, consumer: PullConsumer, commit: bool = False) -> None:
        self.consumer = consumer
        self.commit = commit
        self.polled: list[tuple[float, Message]] = []
        self.errors: list[BaseException] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            with self.consumer:
                while not self.stop.is_set():
                    batch = self.consumer.poll(max_messages=16, timeout=0.2)
                    now = time.monotonic()
                    self.polled += [(now, m) for m in batch]
                    if batch and self.commit:
                        self.consumer.commit()
        except BaseException as error:  # the test reads it: a poller must not die unheard
            self.errors.append(error)

    def start(self) -> Poller:
        self.thread.start()
        return self

    def leave(self) -> None:
        self.stop.set()
        self.thread.join(30)
        assert not self.thread.is_alive() and not self.errors, self.errors


def poll_until(consumer: PullConsumer, count: int, timeout: float = 15.0) -> list[Message]:
    """Poll until ``count`` messages came in all (more may come in the last poll)."""
    polled: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(polled) < count:
        assert time.monotonic() < deadline, f"{len(polled)} of {count} messages polled"
        polled += consumer.poll(timeout=0.2)
    return polled


def pull_consumer(address: str, group: str, client_id: str, **options: Any) -> PullConsumer:
    return PullConsumer(address, group, topics=[TOPIC], client_id=client_id, **{**FAST, **options})


def offsets(messages: list[tuple[float, Message]]) -> Counter[tuple[MessageQueue, int]]:
    return Counter((m.mq, m.queue_offset) for _, m in messages)


def holds(log: list[tuple[str, str, frozenset[MessageQueue], float]], name: str) -> bool:
    """Was ``name`` assigned a queue of the topic (not only of the retry topic)?"""
    return any(who == name and kind == "assigned" and mq.topic == TOPIC for who, kind, qs, _ in log for mq in qs)


def check_deltas(log: list[tuple[str, str, frozenset[MessageQueue], float]], name: str) -> set[MessageQueue]:
    """The callbacks one consumer heard form exact deltas: each queue assigned while not held, then revoked or
    lost while held. Returns what it holds at the end."""
    held: set[MessageQueue] = set()
    for who, kind, queues, _ in log:
        if who != name:
            continue
        assert queues, f"{name}: an empty {kind}"
        if kind == "assigned":
            assert not queues & held, f"{name}: {sorted(queues & held)} assigned twice"
            held |= queues
        else:
            assert queues <= held, f"{name}: {sorted(queues - held)} {kind} but not held"
            held -= queues
    return held


def check_exclusive(log: list[tuple[str, str, frozenset[MessageQueue], float]]) -> None:
    """The fence, as the listeners see it: no queue is held by two consumers' listeners at once, so a queue's new
    owner hears it assigned only after its old owner's revoke (logged when it returned) or loss."""
    holder: dict[MessageQueue, str] = {}
    for who, kind, queues, _ in sorted(log, key=lambda entry: entry[3]):
        for mq in queues:
            if kind == "assigned":
                assert mq not in holder, f"{mq} assigned to {who} while {holder[mq]} held it"
                holder[mq] = who
            else:
                holder.pop(mq, None)


def test_a_changing_group_of_pull_consumers_polls_every_message_once(start_stub: StartStub) -> None:
    """Members join and leave while messages keep coming: with the fence, every message is polled by exactly one
    member, each member's callbacks are exact deltas, and a queue's new owner hears it assigned only after its old
    owner's revoke returned."""
    address = GRPC_SCHEME + start_stub().address
    log: list[tuple[str, str, frozenset[MessageQueue], float]] = []
    produce(address, 10)
    first = Poller(pull_consumer(address, "GID_poll", "a", rebalance_listener=Heard(log, "a"))).start()
    wait_for(lambda: len(first.polled) >= 40)
    second = Poller(pull_consumer(address, "GID_poll", "b", rebalance_listener=Heard(log, "b"))).start()
    wait_for(lambda: holds(log, "b"))
    produce(address, 10)
    wait_for(lambda: len(second.polled) > 0)
    third = Poller(pull_consumer(address, "GID_poll", "c", rebalance_listener=Heard(log, "c"))).start()
    wait_for(lambda: holds(log, "c"))
    produce(address, 10)
    wait_for(lambda: len(third.polled) > 0)
    first.leave()
    produce(address, 10)
    wait_for(lambda: sum(len(p.polled) for p in (first, second, third)) >= 320)
    second.leave()
    third.leave()
    polled = offsets(first.polled + second.polled + third.polled)
    assert len(polled) == 320 and set(polled.values()) == {1}, [k for k, n in polled.items() if n > 1][:5]
    for name in "abc":
        assert check_deltas(log, name) == set(), f"{name} closed holding queues"
    check_exclusive(log)


def test_messages_of_a_revoked_queue_are_not_polled_after_its_revoke(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    log: list[tuple[str, str, frozenset[MessageQueue], float]] = []
    produce(address, 20)
    first = Poller(pull_consumer(address, "GID_revoke", "a", rebalance_listener=Heard(log, "a"))).start()
    wait_for(lambda: len(first.polled) >= 20)
    second = Poller(pull_consumer(address, "GID_revoke", "b", rebalance_listener=Heard(log, "b"))).start()
    wait_for(lambda: any(who == "a" and kind == "revoked" for who, kind, _, _ in log))
    produce(address, 20)
    wait_for(lambda: len(first.polled) + len(second.polled) >= 320)
    first.leave()
    second.leave()
    revoked_at = {mq: at for who, kind, queues, at in log if who == "a" and kind == "revoked" for mq in queues}
    reassigned = {mq for who, kind, queues, _ in log if who == "a" and kind == "assigned" for mq in queues}
    late = [(at, m) for at, m in first.polled if m.mq in revoked_at and at > revoked_at[m.mq]]
    assert revoked_at and not late, late[:3]
    assert reassigned  # (the first assignment) so the check above compared something real


def test_without_commit_what_was_polled_comes_again_and_commit_makes_it_stay(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    produce(address, 3)
    consumer = pull_consumer(address, "GID_commit", "a", auto_commit=False)
    with consumer:
        assert len(poll_until(consumer, 24)) == 24  # and closed without a commit
    again = pull_consumer(address, "GID_commit", "b", auto_commit=False)
    with again:
        poll_until(again, 24)
        assert again.commit()
        assert {again.committed(mq) for mq in QUEUES} == {3}
    third = pull_consumer(address, "GID_commit", "c", auto_commit=False)
    with third:
        assert third.poll(timeout=1.0) == []
        assert {third.committed(mq) for mq in QUEUES} == {3}


def test_auto_commit_writes_what_poll_returned(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    produce(address, 2)
    consumer = pull_consumer(address, "GID_auto", "a")
    with consumer:
        poll_until(consumer, 16)
        wait_for(lambda: {consumer.committed(mq) for mq in QUEUES} == {2})  # the periodic write, 0.2 s here
        assert consumer.consumed == 16


def test_seek_position_and_a_commit_never_going_back(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    produce(address, 5)
    consumer = pull_consumer(address, "GID_seek", "a", auto_commit=False)
    mq = QUEUES[0]
    with consumer:
        poll_until(consumer, 40)
        assert consumer.position(mq) == 5
        assert consumer.commit() and consumer.committed(mq) == 5
        consumer.seek(mq, 1)
        assert consumer.position(mq) == 1
        again = poll_until(consumer, 4)
        assert [m.queue_offset for m in again if m.mq == mq] == [1, 2, 3, 4]
        assert consumer.commit() and consumer.committed(mq) == 5  # re-read, but the offset does not move back
        consumer.seek_to_beginning(mq)
        assert consumer.position(mq) == 0
        consumer.seek_to_end(mq)
        assert consumer.position(mq) == 5 and consumer.poll(timeout=0.3) == []
        consumer.seek(mq, 3)
        with pytest.raises(ValueError, match="at least 0"):
            consumer.seek(mq, -1)
        with pytest.raises(QueueNotAssignedError):
            consumer.seek(MessageQueue("Other", "broker-a", 0), 0)


def refused(mq: MessageQueue, offset: int, low: int, high: int) -> str:
    """What a seek outside ``[low, high]`` is refused with (as a ``match`` pattern): Java's words and the queue."""
    java = f"Seek offset illegal, seek offset = {offset}, min offset = {low}, max offset = {high}"
    return f"^{re.escape(java)}: .*{re.escape(str(mq))}"


def stored(address: str, group: str, mq: MessageQueue) -> int | None:
    """The offset the broker (the stub) holds for ``mq``, asked afresh."""
    transport = GrpcTransport(address)
    try:
        return transport.query_offsets(mq.broker_name, group, [mq])[mq]
    finally:
        transport.close()


def closes_cleanly(consumer: PullConsumer) -> None:
    started = time.monotonic()
    assert consumer.close(10) and time.monotonic() - started < 5


def test_a_seek_beyond_the_max_offset_is_refused_and_a_seek_to_it_commits_exactly_it(start_stub: StartStub) -> None:
    """Probe 2026-11-27, finding 2: beyond the queue's max offset (the next to be written), a seek is refused as
    Java refuses it, and nothing moves; a real broker would store the commit that followed, and at 2**63 - 1 the
    queue was never pulled again and ``close()`` timed out. Exactly the max ("from the end") and exactly the min
    are seeks like any other: the commit after the first stores exactly the max."""
    address = GRPC_SCHEME + start_stub().address
    produce(address, 5)
    consumer = pull_consumer(address, "GID_seek_max", "a", auto_commit=False)
    mq = QUEUES[0]
    consumer.start()
    try:
        wait_for(lambda: mq in consumer.assignment())
        for offset in (6, 1000, 2**63 - 1):
            with pytest.raises(SeekOffsetError, match=refused(mq, offset, 0, 5)):
                consumer.seek(mq, offset)
            assert consumer.position(mq) == 0
        consumer.seek(mq, 5)
        assert consumer.position(mq) == 5
        assert consumer.commit() and consumer.committed(mq) == 5 and stored(address, "GID_seek_max", mq) == 5
        assert {m.mq for m in poll_until(consumer, 35)} == set(QUEUES[1:])
        produce(address, 1)
        assert [m.queue_offset for m in poll_until(consumer, 8) if m.mq == mq] == [5]
        consumer.seek(mq, 0)
        assert [m.queue_offset for m in poll_until(consumer, 6) if m.mq == mq] == [0, 1, 2, 3, 4, 5]
        assert consumer.commit() and stored(address, "GID_seek_max", mq) == 6
    finally:
        closes_cleanly(consumer)


class ReportedOffsets(GrpcTransport):
    """The stub's transport with the min offsets a broker reports once it cleaned up each queue's first ``low``
    messages (the stub deletes none: its min offset is always 0), or with the ask failing (``broken``)."""

    def __init__(self, address: str, low: int) -> None:
        super().__init__(address)
        self.low = low
        self.broken: TransportError | None = None

    def min_offset(self, mq: MessageQueue) -> int:
        if self.broken is not None:
            raise self.broken
        return max(self.low, super().min_offset(mq))


def test_a_seek_below_the_min_offset_or_unasked_is_refused_and_moves_nothing(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    produce(address, 5)
    transport = ReportedOffsets(address, low=2)
    consumer = pull_consumer(address, "GID_seek_min", "a", auto_commit=False, transport=transport)
    mq = QUEUES[0]
    consumer.start()
    try:
        poll_until(consumer, 40)
        for offset in (0, 1):
            with pytest.raises(SeekOffsetError, match=refused(mq, offset, 2, 5)):
                consumer.seek(mq, offset)
        transport.broken = TransportError("the broker cannot be reached", "UNAVAILABLE")
        with pytest.raises(TransportError, match="cannot be reached"):
            consumer.seek(mq, 3)
        assert consumer.position(mq) == 5 and consumer.poll(timeout=0.3) == []
        transport.broken = None
        consumer.seek(mq, 2)
        assert [m.queue_offset for m in poll_until(consumer, 3) if m.mq == mq] == [2, 3, 4]
        consumer.seek_to_beginning(mq)
        assert consumer.position(mq) == 2
    finally:
        closes_cleanly(consumer)


def test_a_paused_queue_is_neither_polled_nor_lost(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    consumer = pull_consumer(address, "GID_pause", "a")
    with consumer:
        # TopicTest's queues (the retry topic's come in the same round or a later one)
        wait_for(lambda: consumer.poll(timeout=0.1) == [] and set(QUEUES) <= set(consumer.assignment()))
        paused = set(QUEUES[:4])
        consumer.pause(paused)
        produce(address, 2)
        polled = poll_until(consumer, 8)
        time.sleep(0.5)
        polled += consumer.poll(timeout=0.2)
        assert {m.mq for m in polled} == set(QUEUES[4:]) and len(polled) == 8
        consumer.resume(paused)
        polled += poll_until(consumer, 8)
        assert len(polled) == 16 and {m.mq for m in polled} == set(QUEUES)


def test_assigned_queues_are_consumed_whoever_else_is_in_the_group(start_stub: StartStub) -> None:
    """assign(): exactly the queues named, with no rebalance: two members of one group split the topic their own
    way, and a new assignment replaces the old one while running. (A group mixing assign and subscribe is the
    user's error, as in Java: an assigned member is listed like any other, so subscribers leave it a share.)"""
    address = GRPC_SCHEME + start_stub().address
    produce(address, 2)
    left = PullConsumer(address, "GID_assign", client_id="l", **FAST)
    right = PullConsumer(address, "GID_assign", client_id="r", **FAST)
    left.assign(QUEUES[:3])
    right.assign(QUEUES[3:])
    with pytest.raises(RuntimeError, match="mutually exclusive"):
        left.subscribe(TOPIC)
    with left, right:
        from_left = poll_until(left, 6)
        from_right = poll_until(right, 10)
        assert {m.mq for m in from_left} == set(QUEUES[:3]) and {m.mq for m in from_right} == set(QUEUES[3:])
        assert left.assignment() == frozenset(QUEUES[:3])
        left.assign(QUEUES[7:])  # the same queue as right's last: assignments are the application's to divide
        wait_for(lambda: left.assignment() == frozenset(QUEUES[7:]))
        left.seek(QUEUES[7], 0)
        again = poll_until(left, 2)
        assert [(m.mq, m.queue_offset) for m in again] == [(QUEUES[7], 0), (QUEUES[7], 1)]
    with pytest.raises(ValueError, match="at least one"):
        PullConsumer(address, "GID_assign").assign([])


def test_flow_control_bounds_what_waits_unpolled(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    produce(address, 300)
    settings = EngineSettings(pull_threshold_for_queue=50, pull_batch_size=32)
    consumer = pull_consumer(address, "GID_flow", "a", settings=settings)
    with consumer:
        wait_for(lambda: set(QUEUES) <= set(consumer.assignment()))  # and the retry topic's, now or later
        time.sleep(1.5)  # nobody polls: pulls stop at the threshold
        rows = consumer._service(lambda engine: engine.running_info().queues)
        assert rows and all(row.cached_count <= 50 + 32 for row in rows.values()), rows
        total = 0
        while total < 2400:
            total += len(consumer.poll(max_messages=500, timeout=2.0))
        assert total == 2400


def test_callbacks_run_inside_poll_on_the_applications_thread(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    threads: list[str] = []

    class Where(RebalanceListener):
        def on_queues_assigned(self, queues: frozenset[MessageQueue]) -> None:
            threads.append(threading.current_thread().name)

    consumer = pull_consumer(address, "GID_where", "a", rebalance_listener=Where())
    with consumer:
        wait_for(lambda: consumer.poll(timeout=0.1) == [] and bool(threads))
    assert set(threads) == {threading.current_thread().name}


def test_iteration_and_bad_input(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    produce(address, 1)
    consumer = pull_consumer(address, "GID_iter", "a")
    with pytest.raises(RuntimeError, match="start"):
        consumer.poll()
    seen: list[Message] = []
    with consumer:
        for message in consumer:
            seen.append(message)
            if len(seen) == 8:
                break
        with pytest.raises(ValueError, match="max_messages"):
            consumer.poll(max_messages=0)
        with pytest.raises(ValueError, match="timeout"):
            consumer.poll(timeout=-1)
    assert len({(m.mq, m.queue_offset) for m in seen}) == 8
    with pytest.raises(RuntimeError, match="closed"):
        consumer.poll()
    with pytest.raises(TypeError, match="no listener"):
        PullConsumer(address, "GID_iter", topics=[TOPIC], listener=lambda batch: None)  # type: ignore[call-arg]
