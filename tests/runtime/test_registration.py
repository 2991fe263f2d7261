"""What the runtime tells the core a heartbeat proved (``BrokerRegistered``, core rules L6 and L9): a broker lists
a client ID once per connection, so only a heartbeat sent while our own stream is listed there registers us.

The e2e clone test failed when a clone's start heartbeat (sent before its notification stream opened) counted as
registered: the stub still listed the shared ID once, for the other clone's stream, and the newcomer took every
queue and, by the shared ID, every lock."""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from rocket_rebalance._proto.v1 import broker_pb2
from rocket_rebalance.core import BrokerRegistered, OffsetsPersistFailed, RebalanceConfig
from rocket_rebalance.model import MessageQueue
from rocket_rebalance.runtime.brokers import Brokers
from rocket_rebalance.runtime.health import Health
from rocket_rebalance.runtime.settings import EngineSettings
from rocket_rebalance.runtime.steps import run
from rocket_rebalance.runtime.transport import StreamEnd, TransportError
from rocket_rebalance.runtime.transport.grpc_calls import ConnectStream
from rocket_rebalance.runtime.transport.remoting_answers import NotificationStreams


class Wire:
    """Answers heartbeats; the subscription table is not readable (an advisory check, skipped)."""

    def __init__(self) -> None:
        self.heartbeats = 0

    def subscription_table(self, broker: str, group: str) -> Any:
        raise TransportError("no table here", "PERMISSION_DENIED")

    def heartbeat(self, broker: str, client_id: str, registration: Any) -> None:
        self.heartbeats += 1


class Service(SimpleNamespace):
    def __init__(self) -> None:
        super().__init__(
            core=SimpleNamespace(topics=("T",)),
            config=RebalanceConfig("group", "clone"),
            health=Health(),
            closing=threading.Event(),
            settings=EngineSettings(),
            expressions={},
            posted=[],
            timers=[],
        )

    def post(self, item: Any) -> None:
        self.posted.append(item)

    def later(self, delay: float, callback: Callable[[], None]) -> None:
        self.timers.append(callback)


def heartbeat(part: Brokers, wire: Wire) -> None:
    run(part._heartbeat_one(SimpleNamespace(topics=("T",)), "b0"), wire)  # type: ignore[arg-type]


def registered(service: Service) -> list[BrokerRegistered]:
    return [item for item in service.posted if isinstance(item, BrokerRegistered)]


def greeting() -> broker_pb2.BrokerNotification:
    return broker_pb2.BrokerNotification(connected=broker_pb2.Connected(broker_name="b0", client_id="clone"))


def test_a_heartbeat_before_the_stream_is_confirmed_registers_nothing_and_one_follows_the_greeting() -> None:
    service, wire = Service(), Wire()
    part = Brokers(service, offset_store=None, languages=None, metrics=None)  # type: ignore[arg-type]
    heartbeat(part, wire)  # the start's: no stream open yet
    assert registered(service) == []
    service.posted.pop()()  # what it asked for: nothing while no stream is open (its opening heartbeats)
    assert service.timers == []
    stream = ConnectStream(lambda group: None, lambda error: None, lambda request, group: None)
    part.streams["b0"] = stream
    heartbeat(part, wire)  # sent while the stream awaits the broker's greeting
    assert registered(service) == [] and wire.heartbeats == 2
    retry = service.posted.pop()
    retry()  # still no greeting: look again later, no heartbeat yet
    assert len(service.timers) == 1 and wire.heartbeats == 2
    stream.deliver(greeting())
    heartbeats_asked: list[tuple[str, ...]] = []
    part.heartbeat = lambda topics, brokers=None, then=None: heartbeats_asked.append(tuple(brokers or ()))  # type: ignore[method-assign]
    service.timers.pop()()
    assert heartbeats_asked == [("b0",)]
    heartbeat(part, wire)  # sent on the confirmed stream: the broker lists this process now
    assert registered(service) == [BrokerRegistered("b0", 0)]


def test_a_heartbeat_after_the_stream_ended_registers_nothing() -> None:
    service, wire = Service(), Wire()
    part = Brokers(service, offset_store=None, languages=None, metrics=None)  # type: ignore[arg-type]
    stream = ConnectStream(lambda group: None, lambda error: None, lambda request, group: None)
    stream.deliver(greeting())
    part.streams["b0"] = stream
    stream.end(TransportError("gone", "UNAVAILABLE"))
    heartbeat(part, wire)
    assert registered(service) == []
    service.posted.pop()()  # an ended stream is replaced by the reconnect, which heartbeats itself
    assert service.timers == []


def test_a_grpc_stream_lists_us_from_its_greeting_until_its_end() -> None:
    stream = ConnectStream(lambda group: None, lambda error: None, lambda request, group: None)
    assert not stream.lists_us
    stream.deliver(greeting())
    assert stream.lists_us and not stream.ended
    stream.cancel()
    assert not stream.lists_us and stream.ended


def test_a_remoting_stream_lists_us_at_once_since_heartbeats_travel_on_its_connection() -> None:
    ends: list[TransportError | None] = []
    streams = NotificationStreams()
    stream: StreamEnd = streams.open("10.0.0.1:10911", lambda group: None, ends.append)
    assert stream.lists_us
    streams.ended("10.0.0.1:10911", TransportError("closed", "UNAVAILABLE"))
    assert not stream.lists_us and stream.ended and len(ends) == 1


def test_a_fenced_write_decided_before_a_loss_is_not_sent_on_the_next_connection() -> None:
    """Core rule O6: a write whose broker's connection was lost since the core decided it (its epoch is older)
    is answered as failed for that broker's queues and never reaches the store; the other brokers' part, and a
    write that knows the loss, go out."""
    service = Service()
    spawned: list[str] = []
    service.spawn = lambda pool, kind, steps, answered: spawned.append(kind)
    part = Brokers(service, offset_store=None, languages=None, metrics=None)  # type: ignore[arg-type]
    a, b = MessageQueue("T", "b0", 0), MessageQueue("T", "b1", 0)
    part._stream_ended("b0", threading.Event(), None)  # b0's connection lost: its epoch is 1 now
    service.posted.clear()
    part.persist({a: 5}, {"b0": 0})
    assert service.posted == [OffsetsPersistFailed({a: 5})] and spawned == []
    service.posted.clear()
    part.persist({a: 5, b: 7}, {"b0": 0, "b1": 0})
    assert service.posted == [OffsetsPersistFailed({a: 5})] and spawned == ["persist offsets: unexpected error"]
    service.posted.clear()
    part.persist({a: 5}, {"b0": 1})  # decided after the core heard of the loss
    assert service.posted == [] and len(spawned) == 2
