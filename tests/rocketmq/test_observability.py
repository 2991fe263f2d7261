"""What operators see of our consumers through the real ``mqadmin``: running info as Java fills it (consume
statistics, the process-queue table, the properties) and the group's progress, under steady traffic."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest

from rocket_rebalance.lab.mixed_group import new_topic
from rocket_rebalance.lab.rocketmq import RocketMQCluster, mqadmin
from rocket_rebalance.lab.wait import wait_until
from rocket_rebalance.model import ConsumeFromWhere
from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.settings import EngineSettings
from rocket_rebalance.runtime.transport import Message

RATE = 40  # messages a second the producer sends
TRAFFIC = 25.0  # seconds of steady traffic before mqadmin is asked: the minute window has two samples or more


def _section(printed: str, title: str) -> list[str]:
    """The lines of one of consumerStatus's sections, without its column titles."""
    text = printed.partition(f"#{title}#")[2].split("\n\n\n")[0]
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


@pytest.mark.rocketmq
def test_mqadmin_shows_a_python_consumers_statistics_and_queue_table(rocketmq: RocketMQCluster, tmp_path: Path) -> None:
    topic = new_topic(rocketmq, "Stats", 2)
    group, client_id = "GID_stats", "127.0.0.1@stats"
    consumed = [0]
    lock = threading.Lock()

    def listener(batch: list[Message]) -> None:
        with lock:
            consumed[0] += len(batch)

    consumer = PushConsumer(
        rocketmq.namesrv_address,
        group,
        topics=[topic],
        listener=listener,
        client_id=client_id,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        settings=EngineSettings(consume_threads=3),
    )
    transport = rocketmq.transport()
    stop = threading.Event()
    sent = [0]

    def produce() -> None:
        queue = 0
        while not stop.wait(0.1):
            broker = ("broker-a", "broker-b")[queue % 2]
            transport.send(topic, broker, [b"m"] * (RATE // 10), queue // 2 % 2)
            sent[0] += RATE // 10
            queue += 1

    producer = threading.Thread(target=produce, daemon=True)
    consumer.start()
    try:
        wait_until(lambda: len(consumer.owned_queues().get(topic, ())) == 4, 30, "the consumer owns all 4 queues")
        producer.start()
        started, sent_before = time.monotonic(), sent[0]
        time.sleep(TRAFFIC)
        produced_rate = (sent[0] - sent_before) / (time.monotonic() - started)
        assert rocketmq.lib is not None
        printed = mqadmin(
            rocketmq.lib,
            tmp_path / "mqadmin",
            "consumerStatus",
            "-n",
            rocketmq.namesrv_address,
            "-g",
            group,
            "-i",
            client_id,
        )
        # the statistics, as Java's ConsumerStatsManager computes them, in mqadmin's own columns
        rates = {line.split()[0]: line.split()[1:] for line in _section(printed, "Consumer RT&TPS")}
        assert set(rates) == {topic, f"%RETRY%{group}"}, printed
        pull_rt, pull_tps, consume_rt, ok_tps, failed_tps, failed_hour = rates[topic]
        assert produced_rate / 3 < float(ok_tps) < produced_rate * 3, (produced_rate, rates[topic])
        assert produced_rate / 3 < float(pull_tps) < produced_rate * 3, (produced_rate, rates[topic])
        assert float(pull_rt) > 0 and float(consume_rt) >= 0, rates[topic]
        assert (float(failed_tps), int(failed_hour)) == (0.0, 0)
        # the process-queue table: every queue consumed just now, pulled just now, nothing left at 1970
        rows = [line for line in _section(printed, "Consumer MQ Detail") if line.startswith(topic)]
        held = {tuple(line.split()[:3]) for line in rows}
        assert held == {(topic, broker, str(q)) for broker in ("broker-a", "broker-b") for q in (0, 1)}, printed
        for row in rows:
            fields = dict(re.findall(r"(\w+)=([^,\]]+)", row))
            assert fields["droped"] == "false" and int(fields["commitOffset"]) > 0, row
            for stamp in ("lastPullTimestamp", "lastConsumeTimestamp", "lastLockTimestamp"):
                assert not fields[stamp].startswith("1970"), row
        # the properties Java sets, read back as mqadmin prints them
        properties = dict(
            (key.strip(), value.strip())
            for key, _, value in (line.partition(": ") for line in _section(printed, "Consumer Properties"))
            if value
        )
        assert properties["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
        assert properties["PROP_THREADPOOL_CORE_SIZE"] == "3" and properties["consumeThreadMax"] == "3"
        assert properties["PROP_CLIENT_VERSION"].startswith("V5_")
        assert properties["consumerGroup"] == group
        assert 0 < int(properties["PROP_CONSUMER_START_TIMESTAMP"]) <= time.time() * 1000

        # -s true: mqadmin asks each consumer's running info for the queues it holds and prints its address
        progress = mqadmin(
            rocketmq.lib,
            tmp_path / "mqadmin",
            "consumerProgress",
            "-n",
            rocketmq.namesrv_address,
            "-g",
            group,
            "-s",
            "true",
        )
        queues = [line for line in progress.splitlines() if line.startswith(topic)]
        assert len(queues) == 4 and all("127.0.0.1" in line for line in queues), progress
    finally:
        stop.set()
        producer.join(5)
        assert consumer.shutdown()
        transport.close()
