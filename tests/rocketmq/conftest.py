"""A real Apache RocketMQ (NameServer and two brokers, from Maven Central) for the compatibility tests.

Without Java or Maven these tests fail with one line saying what is missing; a developer may set
``ROCKET_REBALANCE_SKIP_ROCKETMQ=1`` to skip them instead (CI never does).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rocket_rebalance.lab.rocketmq import RocketMQCluster, RocketMQUnavailable

SKIP_ENV = "ROCKET_REBALANCE_SKIP_ROCKETMQ"


def start_cluster(
    work_dir: Path, brokers: tuple[str, ...] = ("broker-a", "broker-b"), **options: Any
) -> RocketMQCluster:
    """A started cluster (``options`` as :class:`RocketMQCluster` takes them), or the test failed in one line."""
    cluster = RocketMQCluster(work_dir, brokers, **options)
    try:
        cluster.start()
    except RocketMQUnavailable as error:
        if os.environ.get(SKIP_ENV) == "1":
            pytest.skip(f"{error} ({SKIP_ENV}=1)")
        pytest.fail(f"real RocketMQ unavailable: {error}", pytrace=False)
    return cluster


@pytest.fixture(scope="session")
def rocketmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RocketMQCluster]:
    """One cluster for the session; tests use topics and groups of their own, so they do not meet."""
    cluster = start_cluster(tmp_path_factory.mktemp("rocketmq"))
    yield cluster
    cluster.stop()


@pytest.fixture
def own_rocketmq(tmp_path: Path) -> Iterator[Callable[[], RocketMQCluster]]:
    """A cluster of the test's own, for tests that restart a broker or the NameServer."""
    started: list[RocketMQCluster] = []

    def start() -> RocketMQCluster:
        started.append(start_cluster(tmp_path / "rocketmq"))
        return started[-1]

    yield start
    for cluster in started:
        cluster.stop()
