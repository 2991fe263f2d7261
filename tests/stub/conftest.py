"""Fixtures for a running stub: in-process (``stub_server``, ``start_stub``), as clients (``stub``), and as a
subprocess (``spawn_stub_process``). Every server and process started here is stopped at teardown.

Other test packages can reuse them with ``from tests.stub.conftest import start_stub, stub_server, stub``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from nameserver_stub.clock import ManualClock
from nameserver_stub.config import StubConfig, parse_topic_spec
from nameserver_stub.server import StubServer
from tests.stub.harness import DEFAULT_TOPIC_SPEC, StubClients, StubProcess, connect_clients, spawn_stub

StartStub = Callable[..., StubServer]
SpawnStub = Callable[..., StubProcess]


@pytest.fixture
def start_stub(tmp_path: Path) -> Iterator[StartStub]:
    """``start_stub(clock=None, **config)`` starts an in-process stub on 127.0.0.1:0 (stopped at teardown).

    Defaults: topic TopicTest on broker-a and broker-b with 4 queues each, fault injection enabled, a fresh data
    directory under ``tmp_path`` (pass ``data_dir`` to reuse one, e.g. for restart tests).
    """
    servers: list[StubServer] = []
    counter = itertools.count()

    def start(
        *, clock: ManualClock | None = None, topics: tuple[str, ...] = (DEFAULT_TOPIC_SPEC,), **overrides: Any
    ) -> StubServer:
        settings: dict[str, Any] = {
            "listen": "127.0.0.1:0",
            "data_dir": tmp_path / f"stub-data-{next(counter)}",
            "topics": tuple(parse_topic_spec(spec) for spec in topics),
            "enable_faults": True,
            "sweep_interval": 0.05,
        }
        settings.update(overrides)
        server = StubServer(StubConfig(**settings), clock=clock)
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.stop(grace=1.0)


@pytest.fixture
def stub_server(start_stub: StartStub) -> StubServer:
    """A default in-process stub (real clock)."""
    return start_stub()


@pytest.fixture
def stub(stub_server: StubServer) -> Iterator[StubClients]:
    """Clients of ``stub_server``."""
    with connect_clients(stub_server.address) as clients:
        yield clients


@pytest.fixture
def manual_clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def spawn_stub_process(tmp_path: Path) -> Iterator[SpawnStub]:
    """``spawn_stub_process(data_dir=None, *args, **kw)`` runs ``python -m nameserver_stub`` and returns a
    :class:`~tests.stub.harness.StubProcess` once its first stdout line (the bound address) arrived."""
    processes: list[StubProcess] = []
    counter = itertools.count()

    def spawn(data_dir: Path | None = None, *args: str, **kwargs: Any) -> StubProcess:
        process = spawn_stub(data_dir or tmp_path / f"proc-data-{next(counter)}", *args, **kwargs)
        processes.append(process)
        return process

    yield spawn
    for process in processes:
        if process.process.poll() is None:
            process.process.kill()
            process.process.wait(30)
