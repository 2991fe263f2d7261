"""One local[2] SparkSession for every Spark test: a JVM start costs several seconds, so it is started once."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from rocket_rebalance.pipeline.job import build_session

    session = build_session(
        "local[2]",
        {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false", "spark.sql.adaptive.enabled": "false"},
    )
    yield session
    session.stop()
