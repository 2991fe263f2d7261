"""A broker restart and a NameServer restart under a mixed group: consumers recover and nothing is lost."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from rocket_rebalance.lab.mixed_group import MixedGroup, new_topic, ownership_problems
from rocket_rebalance.lab.rocketmq import RocketMQCluster
from rocket_rebalance.lab.wait import wait_until

pytestmark = pytest.mark.rocketmq


def test_consumers_recover_from_broker_and_namesrv_restarts(
    own_rocketmq: Callable[[], RocketMQCluster], tmp_path: Path
) -> None:
    cluster = own_rocketmq()
    group = MixedGroup(cluster, tmp_path / "group", "GID_restart", new_topic(cluster, "Restart", 4))
    try:
        group.python("py-1")
        group.java("java-1")
        group.produce(5)
        wait_until(group.settled, 60, "the group settles")
        wait_until(lambda: not group.missing(), 60, "everything consumed before the restarts")

        cluster.restart_broker("broker-a")
        group.produce(5)
        wait_until(lambda: not group.missing(), 90, "everything consumed after the broker restart")
        wait_until(group.settled, 60, "the group settles after the broker restart")
        assert not ownership_problems(group), group.describe()

        cluster.restart_namesrv()
        group.produce(5)
        group.python("py-2")  # a join while routes come from a NameServer that just restarted
        wait_until(group.settled, 90, "the group settles after the NameServer restart")
        wait_until(lambda: not group.missing(), 90, "everything consumed after the NameServer restart")
        assert all(member.alive for member in group.python_members.values())
    finally:
        group.close()
