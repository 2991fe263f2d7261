"""``EngineSettings(pin_cpu=...)``: a threaded consumer's own threads, the ones each message passes through (the
service thread, the listener's, the connections' reader), kept to one CPU, and the application's threads left
where they were; the setting checked where it is made, and refused by the asyncio consumers, which have no
threads of their own to keep."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator

import pytest

from rocket_rebalance.runtime.async_consumer import AsyncPushConsumer
from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.settings import EngineSettings
from rocket_rebalance.runtime.transport import GRPC_SCHEME, Message
from rocket_rebalance.runtime.transport.remoting import RemotingTransport
from rocket_rebalance.runtime.workers import keep_to_cpu
from tests.runtime.test_consumer import FAST, produce, wait_for
from tests.runtime.test_remoting_transport import broker_like, connected
from tests.scripted_server import Handler, ScriptedServer
from tests.stub.conftest import StartStub

ALLOWED = frozenset(os.sched_getaffinity(0))
CPU = max(ALLOWED)  # on a machine of several CPUs, not the whole set: a thread left alone is told apart


def affinity(thread: threading.Thread) -> frozenset[int]:
    assert thread.native_id is not None
    return frozenset(os.sched_getaffinity(thread.native_id))


def new_threads(before: set[threading.Thread], prefix: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t not in before and t.name.startswith(prefix) and t.is_alive()]


def readers(before: set[threading.Thread]) -> list[threading.Thread]:
    """The remoting transports' reader threads started since ``before`` (not their work pools')."""
    return [t for t in new_threads(before, "rr-remoting") if t.name == "rr-remoting"]


@pytest.mark.parametrize("cpu", [-1, True, 1.0, "0"])
def test_pin_cpu_must_be_a_cpu_number(cpu: object) -> None:
    with pytest.raises(ValueError, match="pin_cpu must be None or a CPU number"):
        EngineSettings(pin_cpu=cpu)  # type: ignore[arg-type]


def test_pin_cpu_must_be_a_cpu_this_process_may_run_on() -> None:
    with pytest.raises(ValueError, match=rf"pin_cpu {CPU + 1} is not a CPU this process may run on \("):
        EngineSettings(pin_cpu=CPU + 1)


def test_an_asyncio_consumer_refuses_pin_cpu() -> None:
    async def listener(batch: list[Message]) -> None:
        pass

    with pytest.raises(ValueError, match="pin_cpu is for the threaded consumers"):
        AsyncPushConsumer("127.0.0.1:9876", "G", topics=["T"], listener=listener, settings=EngineSettings(pin_cpu=CPU))


def test_the_consumers_threads_run_on_the_pinned_cpu_and_the_applications_do_not(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    produce(address, 10)
    seen: list[frozenset[int]] = []
    lock = threading.Lock()

    def listener(batch: list[Message]) -> None:
        with lock:
            seen.extend(frozenset(os.sched_getaffinity(0)) for _ in batch)

    before = set(threading.enumerate())
    consumer = PushConsumer(
        address, "GID_pin", topics=["TopicTest"], listener=listener, settings=EngineSettings(pin_cpu=CPU), **FAST
    )
    consumer.start()
    try:
        wait_for(lambda: len(seen) >= 80)
        ours = [t for prefix in ("rebalance-service", "rr-consume", "rr-io") for t in new_threads(before, prefix)]
        assert {t.name.split("_")[0] for t in ours} == {"rebalance-service", "rr-consume", "rr-io"}
        assert {t.name: affinity(t) for t in ours} == {t.name: {CPU} for t in ours}
        assert set(seen) == {frozenset({CPU})}  # the listener ran on the pinned CPU
        assert affinity(threading.current_thread()) == ALLOWED  # the application's thread is its own
    finally:
        assert consumer.shutdown()


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    handler: Handler = broker_like()
    server = ScriptedServer(handler)
    handler.box["address"] = server.address  # type: ignore[attr-defined]
    yield server
    server.close()


@pytest.mark.parametrize("when", ["before the first connection", "while it reads"])
def test_the_remoting_reader_runs_on_the_pinned_cpu(server: ScriptedServer, when: str) -> None:
    before = set(threading.enumerate())
    transport: RemotingTransport | None = None
    try:
        if when == "while it reads":
            transport = connected(server)
            assert [affinity(t) for t in readers(before)] == [ALLOWED]
            transport.keep_to_cpu(CPU)
        else:
            transport = RemotingTransport([server.address], timeout=2.0)
            transport.keep_to_cpu(CPU)
            transport.route("TopicT")
        assert [affinity(t) for t in readers(before)] == [{CPU}]
        assert affinity(threading.current_thread()) == ALLOWED
    finally:
        if transport is not None:
            transport.close()


def test_a_cpu_gone_since_the_check_leaves_the_thread_where_it_was_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Between the settings' check and a thread's start the CPU can be taken away (a cgroup's cpuset changed): the
    thread runs on, where it may, and the log says so."""
    done: list[frozenset[int]] = []

    def body() -> None:
        keep_to_cpu(1 << 20)  # no such CPU: what the system says of a CPU gone
        done.append(frozenset(os.sched_getaffinity(0)))

    thread = threading.Thread(target=body, name="rr-gone")
    with caplog.at_level(logging.WARNING, logger="rocket_rebalance.runtime"):
        thread.start()
        thread.join(10)
    assert done == [ALLOWED]
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == [f"thread rr-gone not kept to CPU {1 << 20}"]
