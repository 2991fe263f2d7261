"""Waiting for a condition of a live cluster, the one way the lab, the demo, the tests and the benchmarks do."""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["wait_until"]


def wait_until(condition: Callable[[], bool], timeout: float = 60.0, what: str = "", poll: float = 0.1) -> float:
    """Seconds until ``condition()`` held, asked every ``poll`` seconds; a ``TimeoutError`` naming ``what`` (or the
    condition's name) after ``timeout`` seconds. A timeout, not an assertion: callers that expect the wait to work
    let it fail the test, while the demo reports it and goes on."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if condition():
            return time.monotonic() - start
        time.sleep(poll)
    raise TimeoutError(f"not reached within {timeout} s: {what or getattr(condition, '__name__', 'condition')}")
