"""The command line against a real RocketMQ: allocate-mq equals what real consumers own and, with
``--mqadmin-order``, what the real ``mqadmin allocateMQ`` prints; produce, consume, consumer-progress and
consumer-connection work against real brokers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rocket_rebalance.lab.mixed_group import MixedGroup, new_topic
from rocket_rebalance.lab.rocketmq import RocketMQCluster, mqadmin
from rocket_rebalance.lab.wait import wait_until
from rocket_rebalance.runtime.transport import GROUP_NOT_ONLINE, TransportError

pytestmark = pytest.mark.rocketmq


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "rocket_rebalance", *args], capture_output=True, text=True, timeout=120
    )
    if check:
        assert done.returncode == 0, done.stderr
    return done


def test_allocate_mq_equals_the_real_consumers_and_mqadmin(rocketmq: RocketMQCluster, tmp_path: Path) -> None:
    topic = new_topic(rocketmq, "Preview", 3)
    group = MixedGroup(rocketmq, tmp_path, "GID_preview", topic)
    try:
        group.python("py-b")
        group.python("py-a")
        group.java("java-c")
        wait_until(group.settled, 60, "the group settles")
        owned = group.ownership()
        ids = ",".join(owned)
        printed = json.loads(cli("allocate-mq", "-n", rocketmq.namesrv_address, "-t", topic, "-i", ids).stdout)
        assert {
            cid: {(q["brokerName"], q["queueId"]) for q in queues} for cid, queues in printed["result"].items()
        } == owned

        members = cli("simulate", "-n", rocketmq.namesrv_address, "-t", topic, "-g", "GID_preview", "--json").stdout
        assert {c["clientId"] for c in json.loads(members)["outcomes"][0]["consumers"]} == set(owned)
    finally:
        group.close()
    assert rocketmq.lib is not None
    for ids in ("127.0.0.1@c,127.0.0.1@a,10.0.0.1@b", "b@1,a@2", "z@9,y@8,x@7,w@6,v@5,u@4,t@3"):
        real = mqadmin(
            rocketmq.lib, tmp_path / "mqadmin", "allocateMQ", "-n", rocketmq.namesrv_address, "-t", topic, "-i", ids
        )
        ours = cli("allocate-mq", "--mqadmin-order", "-n", rocketmq.namesrv_address, "-t", topic, "-i", ids).stdout
        assert real.splitlines()[-1] == ours.strip()


def test_produce_consume_progress_and_connection(rocketmq: RocketMQCluster, tmp_path: Path) -> None:
    address = rocketmq.namesrv_address
    topic = f"Cli_{tmp_path.name[-8:]}".replace("-", "_")
    missing = cli("produce", "-n", address, "-t", topic, "--count", "5", check=False)
    assert missing.returncode == 2 and "does not exist" in missing.stderr and missing.stderr.count("\n") == 1
    sent = json.loads(cli("produce", "-n", address, "-t", topic, "--count", "40", "--create", "4").stdout)
    assert sent["sent"] == 40 and sent["queues"] == 8

    record = tmp_path / "consumed.jsonl"
    consumer = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rocket_rebalance",
            "consume",
            "-n",
            address,
            "-g",
            "GID_cli",
            "-t",
            topic,
            "--client-id",
            "127.0.0.1@cli",
            "--consume-from",
            "first",
            "--record",
            str(record),
            "--persist-interval",
            "0.5",
            "--report-interval",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: record.exists() and len(record.read_text().splitlines()) == 40, 60, "40 consumed")

        seen: list[object] = []

        def progressed() -> bool:
            done = cli("consumer-progress", "-n", address, "-g", "GID_cli", "-t", topic, "--json", check=False)
            seen[:] = [done.returncode, done.stdout, done.stderr[-2000:]]
            rows = json.loads(done.stdout) if done.returncode == 0 else []
            return len(rows) == 8 and all(r["diff"] == 0 and r["lastOwner"] == "127.0.0.1@cli" for r in rows)

        try:
            wait_until(progressed, 60, "consumer-progress shows every queue consumed, by its owner")
        except TimeoutError as error:
            admin = rocketmq.transport()
            try:
                report: object = admin.consumer_report("GID_cli", "127.0.0.1@cli")
            except TransportError as failed:
                report = failed
            finally:
                admin.close()
            consumer.terminate()
            log = consumer.communicate(timeout=30)[1][-3000:]
            raise AssertionError(
                f"{error}; the last answer: {seen}; running info then: {report}; the consumer's log: {log}"
            ) from None
        rows = json.loads(cli("consumer-connection", "-n", address, "-g", "GID_cli", "--json").stdout)
        assert {(r["clientId"], r["brokerName"], r["language"]) for r in rows} == {
            ("127.0.0.1@cli", "broker-a", "PYTHON"),
            ("127.0.0.1@cli", "broker-b", "PYTHON"),
        }
        assert all(topic in r["topics"] and "%RETRY%GID_cli" in r["topics"] for r in rows)
        table = cli("consumer-connection", "-n", address, "-g", "GID_cli").stdout
        assert "127.0.0.1@cli" in table and "PYTHON" in table
    finally:
        consumer.terminate()
        out, _ = consumer.communicate(timeout=30)
    assert '"event": "stopped"' in out and '"clean": true' in out


def test_the_grpc_wire_pointed_at_rocketmq_is_one_clear_line(rocketmq: RocketMQCluster) -> None:
    done = cli("allocate-mq", "-n", f"grpc://{rocketmq.namesrv_address}", "-t", "T", "-i", "a", check=False)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr and "is not nameserver_stub" in done.stderr


def test_consumer_progress_of_a_group_never_online_fails_like_mqadmin(
    rocketmq: RocketMQCluster, tmp_path: Path
) -> None:
    """mqadmin 5.3.3 fails too (for a group never seen, on the route of its retry topic; for one seen but offline,
    with the words of GROUP_NOT_ONLINE); ours exits 2 with one line on either wire."""
    group = f"GID_never_{tmp_path.name[-8:]}".replace("-", "_")
    assert rocketmq.lib is not None
    with pytest.raises(RuntimeError, match="ConsumerProgressSubCommand command failed"):
        mqadmin(rocketmq.lib, tmp_path / "mqadmin", "consumerProgress", "-n", rocketmq.namesrv_address, "-g", group)
    ours = cli("consumer-progress", "-n", rocketmq.namesrv_address, "-g", group, check=False)
    assert ours.returncode == 2 and ours.stdout == ""
    assert ours.stderr.count("\n") == 1 and GROUP_NOT_ONLINE.format(group=group) in ours.stderr
