"""The core's round history (:mod:`rocket_rebalance.core.history`) as ``describe()`` and the SIGUSR1 dump show it:
wall-clock times, step durations in milliseconds, and each member list as its size and a digest, so that two
members that read the same list show the same digest without the dump carrying a thousand client IDs a round."""

from __future__ import annotations

import datetime
import hashlib
from collections.abc import Iterable

from rocket_rebalance.core.history import RoundRecord

__all__ = ["describe_rounds", "member_digest"]


def member_digest(members: Iterable[str]) -> str:
    """A short digest of a member list, the same whatever order a broker listed it in."""
    return hashlib.sha256("\n".join(sorted(members)).encode()).hexdigest()[:12]


def describe_rounds(rounds: Iterable[RoundRecord], now: float, wall: float) -> list[dict[str, object]]:
    """Each round, oldest first; ``now`` is the core's clock (``time.monotonic()``) read at ``wall``
    (``time.time()``). A step not reached yet is None."""

    def step(at: float | None, record: RoundRecord) -> float | None:
        return None if at is None else round((at - record.started_at) * 1000, 1)

    described: list[dict[str, object]] = []
    for record in rounds:
        started = datetime.datetime.fromtimestamp(wall - (now - record.started_at), datetime.UTC)
        described.append(
            {
                "round": record.number,
                "started": started.isoformat(timespec="milliseconds"),
                "trigger": record.trigger,
                "retry_reason": record.retry_reason or None,
                "members": {
                    topic: None if ids is None else {"count": len(ids), "digest": member_digest(ids)}
                    for topic, ids in sorted(record.members.items())
                },
                "gained": sorted(map(str, record.gained)),
                "lost": sorted(map(str, record.lost)),
                "failed": record.failed,
                "problems": record.problems
                + ([f"... {record.problems_dropped} more"] if record.problems_dropped else []),
                "steps_ms": {
                    "member lists": step(record.lists_at, record),
                    "queues started": step(record.acquired_at, record),
                    "queues dropped": step(record.released_at, record),
                    "table applied": step(record.applied_at, record),
                },
                "waiting": len(record.waiting),
                "superseded": record.superseded,
            }
        )
    return described
