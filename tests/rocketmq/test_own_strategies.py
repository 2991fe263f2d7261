"""This library's own strategies on a real RocketMQ: Python consumers run them, and a consumer warns when the
broker's connection list shows a Java member in its group, which would split the queues its own way."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocket_rebalance.lab.mixed_group import MixedGroup, new_topic
from rocket_rebalance.lab.rocketmq import RocketMQCluster
from rocket_rebalance.lab.wait import wait_until

pytestmark = pytest.mark.rocketmq

WARNING = "cannot run CONSISTENT_HASH_BOUNDED, which only rocket-rebalance has"


def test_a_java_member_beside_a_python_only_strategy_is_warned_about(rocketmq: RocketMQCluster, tmp_path: Path) -> None:
    topic = new_topic(rocketmq, "Own", 4)
    group = MixedGroup(rocketmq, tmp_path, "GID_own", topic, strategy="CONSISTENT_HASH_BOUNDED")
    logs = [tmp_path / f"consumer-127.0.0.1_{name}.log" for name in ("py-a", "py-b")]

    def warned(log: Path) -> bool:
        return log.exists() and WARNING in log.read_text(encoding="utf-8")

    try:
        group.python("py-a")
        group.python("py-b")
        wait_until(group.settled, 90, "two Python consumers split the queues by the bounded hash")
        assert not any(warned(log) for log in logs)  # an all-Python group is as it should be
        java = group.java("java-c", strategy="AVG")
        wait_until(lambda: all(warned(log) for log in logs), 90, "both Python consumers warn")
        text = logs[0].read_text(encoding="utf-8")
        assert f"{java.client_id} (JAVA) {WARNING}" in text
    finally:
        group.close()
