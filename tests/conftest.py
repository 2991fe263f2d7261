"""Hypothesis without its timing checks, for every test: CI runs three pytest parts side by side on two cores,
where the same input takes several times longer from one minute to the next. A deadline or a "generation is
slow" health check would then fail a property that holds; timings belong in ``benchmarks/``, not in tests."""

from hypothesis import HealthCheck, settings

settings.register_profile("rocket-rebalance", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("rocket-rebalance")
