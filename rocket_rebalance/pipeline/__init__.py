"""Fleet impact analysis: what a rebalance does to every consumer group at once, on Spark.

The per-group work (:mod:`rocket_rebalance.pipeline.analysis`) is plain Python over the library's own ``plan``,
``movement`` and ``balance``, so the Spark job (:mod:`rocket_rebalance.pipeline.job`) and the single-process
reference (:mod:`rocket_rebalance.pipeline.reference`) agree with the library by construction. Nothing here imports
pyspark at import time: only :mod:`~rocket_rebalance.pipeline.job` does, when its functions run, so
``import rocket_rebalance.pipeline`` stays cheap and works without the ``spark`` extra.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["SAMPLE_SCENARIO", "SAMPLE_SNAPSHOT"]

SAMPLE_SNAPSHOT = Path(__file__).with_name("sample") / "snapshot"
"""A small fleet snapshot shipped with the package, so ``rocket-rebalance impact`` works out of the box."""

SAMPLE_SCENARIO = Path(__file__).with_name("sample") / "scenario.json"
"""A scenario for the sample snapshot: a join, a leave, a broker restart and a strategy switch."""
