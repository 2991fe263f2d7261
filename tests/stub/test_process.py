"""The stub as a real process: first stdout line, signals, restart durability, refusals, the console script."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2

from rocket_rebalance._proto.v1 import admin_pb2, broker_pb2, namesrv_pb2
from tests.stub.conftest import SpawnStub
from tests.stub.harness import (
    REPO_ROOT,
    Listener,
    commit,
    connect_clients,
    consumer_data,
    consumer_ids,
    heartbeat,
    pull,
    query,
    send,
    status_of,
)

pytestmark = pytest.mark.e2e


def test_prints_its_address_first_serves_and_stops_on_sigterm(spawn_stub_process: SpawnStub) -> None:
    process = spawn_stub_process()
    assert re.fullmatch(r"127\.0\.0\.1:\d+", process.address) and not process.address.endswith(":0")
    with connect_clients(process.address) as stub:
        assert stub.health.Check(health_pb2.HealthCheckRequest(), timeout=10).status == 1
        heartbeat(stub, "broker-a", "c1", consumer_data("G1", "TopicTest"))
        assert consumer_ids(stub, "broker-a", "G1") == ["c1"]
    assert process.stop(signal.SIGTERM) == 0
    assert "stopped" in process.stderr()


def test_sigint_is_a_clean_stop_too(spawn_stub_process: SpawnStub) -> None:
    process = spawn_stub_process()
    assert process.stop(signal.SIGINT) == 0


def test_notification_streams_end_cleanly_on_shutdown(spawn_stub_process: SpawnStub) -> None:
    process = spawn_stub_process()
    with connect_clients(process.address) as stub:
        listener = Listener(stub, "broker-a", "c1")
        heartbeat(stub, "broker-a", "c1", consumer_data("G1", "TopicTest"))
        assert listener.next() == "G1"
        assert process.stop(signal.SIGTERM) == 0
        assert listener.wait_ended() in (grpc.StatusCode.OK, grpc.StatusCode.UNAVAILABLE)
        assert listener.next() is None


def test_restart_keeps_topics_offsets_and_messages(spawn_stub_process: SpawnStub, tmp_path: Path) -> None:
    data = tmp_path / "durable"
    first = spawn_stub_process(data, "--enable-faults")
    with connect_clients(first.address) as stub:
        send(stub, "broker-b", "TopicTest", b"one", b"two", b"three", queue_id=2)
        commit(stub, "broker-b", "G1", {("TopicTest", 2): 2}, client_id="c1")
        stub.admin.CreateOrUpdateTopic(
            admin_pb2.CreateOrUpdateTopicRequest(
                broker_name="broker-a", topic="Created", read_queue_nums=3, write_queue_nums=3
            )
        )
    assert first.stop(signal.SIGTERM) == 0

    second = spawn_stub_process(data, topics=())  # no --topic: everything comes from the data directory
    with connect_clients(second.address) as stub:
        route = stub.namesrv.GetRouteInfoByTopic(namesrv_pb2.GetRouteInfoByTopicRequest(topic="Created"))
        assert [(q.broker_name, q.read_queue_nums) for q in route.queue_datas] == [("broker-a", 3)]
        route = stub.namesrv.GetRouteInfoByTopic(namesrv_pb2.GetRouteInfoByTopicRequest(topic="TopicTest"))
        assert [q.broker_name for q in route.queue_datas] == ["broker-a", "broker-b"]
        assert query(stub, "broker-b", "G1", ("TopicTest", 2)) == [2]
        assert [r.updated for r in commit(stub, "broker-b", "G1", {("TopicTest", 2): 1}).results] == [False]
        assert [m.body for m in pull(stub, "broker-b", "TopicTest", 2, 0).messages] == [b"one", b"two", b"three"]
        assert send(stub, "broker-b", "TopicTest", b"four", queue_id=2).results[0].queue_offset == 3
        progress = stub.admin.ConsumerProgress(admin_pb2.ConsumerProgressRequest(consumer_group="G1"))
        (row,) = [p for p in progress.queues if p.queue.broker_name == "broker-b" and p.queue.queue_id == 2]
        assert (row.consumer_offset, row.last_owner) == (2, "c1")
    assert second.stop() == 0


def test_sigkill_loses_nothing_acknowledged(spawn_stub_process: SpawnStub, tmp_path: Path) -> None:
    data = tmp_path / "killed"
    first = spawn_stub_process(data)
    with connect_clients(first.address) as stub:
        send(stub, "broker-a", "TopicTest", *[b"m"] * 5, queue_id=0)
        for offset in range(1, 6):
            commit(stub, "broker-a", "G1", {("TopicTest", 0): offset})
    first.stop(signal.SIGKILL)
    second = spawn_stub_process(data)
    with connect_clients(second.address) as stub:
        assert query(stub, "broker-a", "G1", ("TopicTest", 0)) == [5]
        assert pull(stub, "broker-a", "TopicTest", 0, 0).max_offset == 5


def test_refuses_a_non_loopback_address(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "nameserver_stub", "--listen", "0.0.0.0:0", "--data-dir", str(tmp_path / "d")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert "not a loopback address" in result.stderr and "--allow-remote" in result.stderr


def test_a_second_stub_on_the_same_data_dir_is_refused(spawn_stub_process: SpawnStub, tmp_path: Path) -> None:
    data = tmp_path / "shared"
    spawn_stub_process(data)
    result = subprocess.run(
        [sys.executable, "-m", "nameserver_stub", "--listen", "127.0.0.1:0", "--data-dir", str(data)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 2 and "in use by another stub" in result.stderr


def test_console_script_with_token_and_faults(spawn_stub_process: SpawnStub) -> None:
    script = Path(sys.executable).parent / "nameserver-stub"
    if not script.exists():
        found = shutil.which("nameserver-stub")
        if found is None:
            pytest.skip("the nameserver-stub console script is not installed (pip install -e .)")
        script = Path(found)
    process = spawn_stub_process(
        None, "--token", "tok", "--enable-faults", "--client-expiry", "30", command=[str(script)]
    )
    auth = (("authorization", "Bearer tok"),)
    with connect_clients(process.address) as stub:
        code, _ = status_of(
            stub.broker.GetConsumerListByGroup,
            broker_pb2.GetConsumerListByGroupRequest(broker_name="broker-a", consumer_group="G1"),
        )
        assert code is grpc.StatusCode.UNAUTHENTICATED
        stub.admin.SetBrokerState(admin_pb2.SetBrokerStateRequest(broker_name="broker-a", up=False), metadata=auth)
        route = stub.namesrv.GetRouteInfoByTopic(
            namesrv_pb2.GetRouteInfoByTopicRequest(topic="TopicTest"), metadata=auth
        )
        assert [q.broker_name for q in route.queue_datas] == ["broker-b"]
    assert process.stop() == 0
