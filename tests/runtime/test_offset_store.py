"""Offset stores: the local file (broadcasting) survives crashes mid-write; the remote one talks to real brokers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nameserver_stub.server import StubServer
from rocket_rebalance.model import MessageQueue
from rocket_rebalance.runtime.offset_store import (
    LocalFileOffsetStore,
    OffsetStoreError,
    RemoteOffsetStore,
    default_offset_path,
)
from rocket_rebalance.runtime.transport.grpc import GrpcTransport
from tests.stub.conftest import StartStub

A0, A1 = MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 1)


def test_local_store_round_trips_and_only_moves_forward(tmp_path: Path) -> None:
    path = tmp_path / "client" / "group" / "offsets.json"
    store = LocalFileOffsetStore(path)
    assert store.read(A0) is None
    assert store.persist({A0: 5, A1: 7}) == {A0: 5, A1: 7}
    store.persist({A0: 3})  # backwards: ignored
    again = LocalFileOffsetStore(path)
    assert (again.read(A0), again.read(A1)) == (5, 7)


def test_previous_file_is_kept_and_read_when_the_file_is_damaged(tmp_path: Path) -> None:
    path = tmp_path / "offsets.json"
    store = LocalFileOffsetStore(path)
    store.persist({A0: 1})
    store.persist({A0: 2})
    assert json.loads(path.with_name("offsets.json.bak").read_text())["offsets"][0]["offset"] == 1
    path.write_text("{ half a fi")  # what a crash cannot do (rename is atomic), but a person can
    assert LocalFileOffsetStore(path).read(A0) == 1
    path.unlink()  # the moment between keeping .bak and renaming the new file in
    assert LocalFileOffsetStore(path).read(A0) == 1


def test_unusable_places_are_store_errors(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    with pytest.raises(OffsetStoreError, match="cannot read"):
        LocalFileOffsetStore(blocker / "offsets.json")
    store = LocalFileOffsetStore(tmp_path / "gone" / "offsets.json")
    (tmp_path / "gone").write_text("")  # the folder it would write into is now a file
    with pytest.raises(OffsetStoreError, match="cannot write"):
        store.persist({A0: 1})
    assert store.read(A0) is None, "a failed write is not remembered as stored"


def test_default_path_is_per_client_and_group() -> None:
    expected = Path.home() / ".rocket_rebalance" / "offsets" / "10.0.0.1@42#7" / "GID_x" / "offsets.json"
    assert default_offset_path("10.0.0.1@42#7", "GID_x") == expected


def test_remote_store_reads_and_writes_broker_offsets(start_stub: StartStub) -> None:
    server: StubServer = start_stub()
    transport = GrpcTransport(server.address)
    try:
        transport.send("TopicTest", "broker-a", [b"m"] * 10, queue_id=0)
        store = RemoteOffsetStore(transport, "GID_store", "c1")
        mq = MessageQueue("TopicTest", "broker-a", 0)
        assert store.read(mq) is None
        assert store.persist({mq: 6}) == {mq: 6}
        # Backwards: the broker keeps 6, which is at least 4, so the write counts as stored (nothing to retry).
        assert store.persist({mq: 4}) == {mq: 4}
        assert store.read(mq) == 6
    finally:
        transport.close()


def test_remote_store_failure_is_a_store_error(start_stub: StartStub) -> None:
    server = start_stub()
    address = server.address
    server.stop(grace=0)
    transport = GrpcTransport(address, timeout=0.5)
    try:
        with pytest.raises(OffsetStoreError):
            RemoteOffsetStore(transport, "GID_store", "c1").read(MessageQueue("TopicTest", "broker-a", 0))
    finally:
        transport.close()


def _write(path: Path, entries: list[dict[str, object]]) -> None:
    path.write_text(json.dumps({"offsets": entries}))


@pytest.mark.parametrize(
    ("entries", "says"),
    [
        ([{"topic": "T", "brokerName": "broker-a", "queueId": 0, "offset": 1e30}], "offset 1e+30 is not an integer"),
        ([{"topic": "T", "brokerName": "broker-a", "queueId": 0, "offset": -1}], "offset -1 is not an integer"),
        ([{"topic": "T", "brokerName": "broker-a", "queueId": 0, "offset": 2**63}], "is not an integer from 0"),
        ([{"topic": "T", "brokerName": "broker-a", "queueId": 0, "offset": True}], "offset True is not"),
        ([{"topic": "T", "brokerName": "broker-a", "queueId": 0, "offset": "5"}], "offset '5' is not"),
        ([{"topic": "T", "brokerName": "broker-a", "offset": 5}], "missing field 'queueId'"),
        (
            [
                {"topic": "T", "brokerName": "broker-a", "queueId": 0, "offset": 9},
                {"topic": "T", "brokerName": "broker-a", "queueId": 0, "offset": 2},
            ],
            "appears twice (offsets 9 and 2)",
        ),
    ],
)
def test_a_file_with_a_bad_entry_is_refused_naming_it(
    tmp_path: Path, entries: list[dict[str, object]], says: str
) -> None:
    path = tmp_path / "offsets.json"
    _write(path, entries)
    with pytest.raises(OffsetStoreError) as raised:
        LocalFileOffsetStore(path)
    assert says in str(raised.value) and "refusing to start" in str(raised.value)
    assert LocalFileOffsetStore(path, reset=True).read(A0) is None  # only when asked for


def test_both_files_unusable_is_refused_and_a_good_backup_is_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path, backup = tmp_path / "offsets.json", tmp_path / "offsets.json.bak"
    path.write_text("{ half")
    backup.write_text("[]")
    with pytest.raises(OffsetStoreError) as raised:
        LocalFileOffsetStore(path)
    assert str(path) in str(raised.value) and str(backup) in str(raised.value)
    _write(backup, [{"topic": "T", "brokerName": "broker-a", "queueId": 0, "offset": 4}])
    assert LocalFileOffsetStore(path).read(A0) == 4
    assert any(str(backup) in r.getMessage() for r in caplog.records)


def test_the_consume_command_refuses_damaged_offsets_in_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "offsets.json"
    path.write_text("not json")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rocket_rebalance",
            "consume",
            "-n",
            "grpc://127.0.0.1:9",
            "-g",
            "GID_b",
            "-t",
            "T",
            "--broadcast",
            "--offsets",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "refusing to start" in done.stderr, done.stderr
