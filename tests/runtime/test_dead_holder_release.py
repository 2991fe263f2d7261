"""The runtime's half of core rule L9's release (``Brokers._release_dead_holders``) against a scripted transport and
clock: everything by the action's deadline, an unlock not answered by then is in doubt, and said at ERROR."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from types import SimpleNamespace

import pytest

from rocket_rebalance.core import DeadHoldersChecked, RebalanceConfig
from rocket_rebalance.model import MessageQueue
from rocket_rebalance.runtime import brokers
from rocket_rebalance.runtime.brokers import Brokers
from rocket_rebalance.runtime.health import Health
from rocket_rebalance.runtime.settings import ReleaseInDoubtError
from rocket_rebalance.runtime.steps import run
from rocket_rebalance.runtime.transport import TransportError

ME, GONE, ALSO_GONE, LISTED = "10.0.0.1@1", "10.0.0.9@9", "10.0.0.8@8", "10.0.0.2@2"
QUEUES = (MessageQueue("T", "b0", 0), MessageQueue("T", "b0", 1))
DEADLINE = 101.0  # the core's: emitted at 100.0, with the default window of 1 s


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


class Broker:
    """Answers the member list and each unlock after the given times, or fails them."""

    def __init__(self, clock: Clock, listed: Sequence[str], list_takes: float = 0.01) -> None:
        self.clock = clock
        self.listed = list(listed)
        self.list_takes = list_takes
        self.unlock_takes: dict[str, float] = {}
        self.unlock_fails: set[str] = set()
        self.unlocked: list[str] = []

    def consumer_list(self, broker: str, group: str) -> list[str]:
        self.clock.now += self.list_takes
        return self.listed

    def unlock(self, broker: str, group: str, client_id: str, queues: Sequence[MessageQueue]) -> None:
        self.unlocked.append(client_id)
        self.clock.now += self.unlock_takes.get(client_id, 0.01)
        if client_id in self.unlock_fails:
            raise TransportError(f"unlock at {broker}: no answer in time", "DEADLINE_EXCEEDED")


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(brokers, "time", clock)
    return clock


def release(broker: Broker, holders: tuple[str, ...] = (GONE,)) -> tuple[DeadHoldersChecked, list[Exception]]:
    """Run the release's steps; its answer, and what ``on_error`` heard (health is left failing, or healthy)."""
    errors: list[Exception] = []
    health = Health(on_error=lambda kind, error: errors.append(error))
    config = RebalanceConfig("group", ME)
    service = SimpleNamespace(core=SimpleNamespace(topics=("T",)), config=config, health=health)
    part = Brokers(service, offset_store=None, languages=None, metrics=None)  # type: ignore[arg-type]
    answer = run(part._release_dead_holders("b0", holders, QUEUES, 7, DEADLINE), broker)
    assert isinstance(answer, DeadHoldersChecked)
    assert health.healthy == (not errors)
    return answer, errors


def test_unlocks_answered_by_the_deadline_are_released(clock: Clock) -> None:
    answer, errors = release(Broker(clock, [ME, LISTED]), (GONE, LISTED))
    assert answer == DeadHoldersChecked("b0", 7, frozenset(QUEUES), frozenset({GONE}))  # a listed member is kept
    assert not errors


def test_an_unlock_answered_after_the_deadline_is_in_doubt_and_said_at_error(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    broker = Broker(clock, [ME])
    broker.unlock_takes[GONE] = 1.5  # carried out some time before its answer: maybe after GONE came back
    with caplog.at_level(logging.ERROR, logger="rocket_rebalance.runtime"):
        answer, errors = release(broker)
    assert answer.released == frozenset() and answer.in_doubt == frozenset({GONE})
    [error] = errors
    assert isinstance(error, ReleaseInDoubtError) and GONE in str(error) and "answered after" in str(error)
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR and GONE in r.getMessage()]


def test_a_failed_unlock_is_in_doubt(clock: Clock) -> None:
    broker = Broker(clock, [ME])
    broker.unlock_fails.add(GONE)  # it may have reached the broker before the connection failed
    answer, errors = release(broker)
    assert answer.in_doubt == frozenset({GONE}) and not answer.released
    assert [type(error) for error in errors] == [ReleaseInDoubtError]


def test_a_list_after_the_deadline_releases_nothing(clock: Clock) -> None:
    broker = Broker(clock, [ME], list_takes=1.2)
    answer, errors = release(broker)
    assert answer == DeadHoldersChecked("b0", 7, frozenset(QUEUES)) and broker.unlocked == [] and not errors


def test_no_unlock_is_sent_after_the_deadline(clock: Clock) -> None:
    broker = Broker(clock, [ME], list_takes=0.0)
    broker.unlock_takes[GONE] = 1.0  # answered at the deadline, in time; the next one would be sent too late
    answer, errors = release(broker, (GONE, ALSO_GONE))
    assert broker.unlocked == [GONE]
    assert answer.released == frozenset({GONE}) and answer.in_doubt == frozenset()  # not sent: not in doubt
    assert not errors


def test_a_release_begun_after_its_deadline_asks_nothing(clock: Clock) -> None:
    clock.now = DEADLINE  # the I/O pool was busy
    broker = Broker(clock, [ME])
    answer, errors = release(broker)
    assert answer == DeadHoldersChecked("b0", 7, frozenset(QUEUES)) and broker.unlocked == [] and not errors
