"""Message trace on a real RocketMQ 5.3.3 (issue 39): a broker with ``traceTopicEnable=true`` keeps
``RMQ_SYS_TRACE_TOPIC``, and ``mqadmin queryMsgTraceById`` on a message our consumer (``enable_trace=True``)
consumed shows our group, our client host, the cost time and the status, as it does for a Java consumer with
``enableMsgTrace`` (Peer.java ``--trace``, the positive control, in the same scenario beside ours).

The scenario, for each language's group on a topic of its own: three messages, each taking the listener 50 ms;
``later`` is refused on its first delivery (RECONSUME_LATER), so it comes back through the retry topic (level 3,
10 s) and shows two consumptions, the first failed. One broker: the trace topic is the broker's own."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocket_rebalance.lab.mixed_group import new_topic
from rocket_rebalance.lab.rocketmq import JavaPeer, RocketMQCluster, mqadmin
from rocket_rebalance.lab.wait import wait_until
from rocket_rebalance.model import ConsumeFromWhere
from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.listener import ConsumeResult
from rocket_rebalance.runtime.settings import EngineSettings
from rocket_rebalance.runtime.transport import Message
from rocket_rebalance.trace import TRACE_TOPIC
from tests.rocketmq.conftest import start_cluster

pytestmark = pytest.mark.rocketmq

TAGS = ["ok1", "later", "ok2"]
WORK_MS = 50
SUB_ROW = re.compile(r"^Sub\s+(\S+)\s+(\S+)\s+(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\s+(-?\d+)ms\s+(\S+)\s*$")


@pytest.fixture(scope="module")
def trace_rocketmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RocketMQCluster]:
    """One broker that keeps the trace topic (``traceTopicEnable``, false by default)."""
    cluster = start_cluster(
        tmp_path_factory.mktemp("rocketmq-trace"), ("broker-a",), broker_settings={"traceTopicEnable": "true"}
    )
    yield cluster
    cluster.stop()


def fill(cluster: RocketMQCluster, name: str) -> str:
    """A topic of its own, one queue, one message per tag (the tag also its key and body)."""
    topic = new_topic(cluster, name, 1)
    transport = cluster.transport()
    try:
        for tag in TAGS:
            transport.send(topic, "broker-a", [tag.encode()], 0, tags=tag, keys=tag)
    finally:
        transport.close()
    return topic


def sub_rows(cluster: RocketMQCluster, home: Path, msg_id: str) -> list[tuple[str, str, int, str]]:
    """The consumer rows ``mqadmin queryMsgTraceById`` prints for ``msg_id``: (group, client host, cost ms,
    status)."""
    assert cluster.lib is not None
    out = mqadmin(cluster.lib, home, "queryMsgTraceById", "-n", cluster.namesrv_address, "-i", msg_id)
    rows = []
    for line in out.splitlines():
        found = SUB_ROW.match(line)
        if found:
            group, host, _, cost, status = found.groups()
            rows.append((group, host, int(cost), status))
    return rows


def shown_rows(
    cluster: RocketMQCluster, home: Path, msg_id: str, count: int, what: str
) -> list[tuple[str, str, int, str]]:
    """The consumer rows of ``msg_id`` once there are ``count`` (the broker indexes a trace message's keys a little
    after it stored it, and our records may wait up to 5 s for their batch)."""
    rows: list[tuple[str, str, int, str]] = []

    def shown() -> bool:
        try:
            rows[:] = sub_rows(cluster, home, msg_id)
        except RuntimeError:  # mqadmin fails while no trace message has the key ("no message" from queryMessage)
            return False
        return len(rows) >= count

    wait_until(shown, 120, what, poll=1.0)
    return rows


def check_trace(cluster: RocketMQCluster, home: Path, group: str, ids: dict[str, str]) -> None:
    """What mqadmin shows for each message: one row per consumption, in ``group``, from 127.0.0.1, at least the
    listener's work in cost time; ``later`` failed once, then succeeded; the others succeeded once."""
    for tag, msg_id in ids.items():
        wanted = ["failed", "success"] if tag == "later" else ["success"]
        rows = shown_rows(cluster, home, msg_id, len(wanted), f"{group}'s trace of {tag} in queryMsgTraceById")
        assert sorted(status for *_, status in rows) == sorted(wanted), rows
        assert all(g == group and host == "127.0.0.1" and cost >= WORK_MS for g, host, cost, _ in rows), rows


def test_query_msg_trace_by_id_shows_our_consumer_as_it_shows_a_java_one(
    trace_rocketmq: RocketMQCluster, tmp_path: Path
) -> None:
    cluster = trace_rocketmq
    assert cluster.lib is not None
    python_group, java_group = "GID_trace_py", "GID_trace_java"
    python_topic, java_topic = fill(cluster, "TracePy"), fill(cluster, "TraceJava")
    ours: dict[str, str] = {}
    done: dict[str, int] = {}

    def listener(batch: list[Message]) -> ConsumeResult:
        (message,) = batch
        time.sleep(WORK_MS / 1000)
        ours[message.tags] = message.msg_id
        if message.tags == "later" and message.reconsume_times == 0:
            return ConsumeResult.RECONSUME_LATER
        done[message.tags] = done.get(message.tags, 0) + 1
        return ConsumeResult.SUCCESS

    java = JavaPeer(
        cluster.lib,
        tmp_path,
        cluster.namesrv_address,
        java_group,
        java_group,
        [java_topic],
        work_ms=WORK_MS,
        extra=("--answers", "--trace"),
    )
    python = PushConsumer(
        cluster.namesrv_address,
        python_group,
        topics=[python_topic],
        listener=listener,
        client_id=f"127.0.0.1@{python_group}",
        settings=EngineSettings(enable_trace=True),
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        rebalance_interval=2.0,
        route_refresh_interval=1.0,
    )
    python.start()
    try:
        wait_until(lambda: len(done) == len(TAGS), 120, "our group consumed every message")
        wait_until(lambda: {e["tags"] for e in java.consumed() if e["reconsumeTimes"]} == {"later"}, 120, "Java's")
        java_ids = {e["tags"]: e["msgId"] for e in java.consumed()}
        check_trace(cluster, tmp_path / "mqadmin", java_group, java_ids)  # the positive control
        check_trace(cluster, tmp_path / "mqadmin", python_group, ours)
        trace = python.describe()["trace"]
        assert isinstance(trace, dict) and trace["dropped"] == trace["lost"] == 0, trace
        assert python.healthy, python.describe()["problems"]
    finally:
        python.shutdown(10)
        java.stop()
    assert TRACE_TOPIC in mqadmin(cluster.lib, tmp_path / "mqadmin", "topicList", "-n", cluster.namesrv_address)
