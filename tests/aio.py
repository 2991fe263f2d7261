"""Running coroutines in tests without pytest-asyncio (not a dependency): :func:`run`."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run"]

T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
    """Run ``coroutine`` on a new event loop; one that hangs fails its test after ``timeout`` seconds (a bound
    for hangs, never a measure of speed) instead of stalling the suite."""

    async def bounded() -> T:
        async with asyncio.timeout(timeout):
            return await coroutine

    return asyncio.run(bounded())
