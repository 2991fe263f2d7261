"""One broker's queue locks for orderly consumption (RocketMQ's RebalanceLockManager).

A queue is locked per consumer group to one client. A lock lives ``lifetime`` seconds from its last grant;
the owner renews it by locking again. An expired lock is free for anyone. Unlock releases only the caller's own
locks, and a client leaving a group loses its locks in that group (the stub adds this so a departed client's
queues are not blocked for a minute).
"""

from __future__ import annotations

from collections.abc import Iterable

from rocket_rebalance.model import MessageQueue


class LockTable:
    """(group, queue) -> (client, expiry time). Not thread-safe: the cluster lock guards it."""

    def __init__(self) -> None:
        self._locks: dict[tuple[str, MessageQueue], tuple[str, float]] = {}

    def try_lock(
        self, group: str, client_id: str, queues: Iterable[MessageQueue], now: float, lifetime: float
    ) -> list[MessageQueue]:
        """Lock (or renew) every queue that is free, expired or already the client's; returns those."""
        locked: list[MessageQueue] = []
        for queue in queues:
            owner = self.owner(group, queue, now)
            if owner is None or owner == client_id:
                self._locks[(group, queue)] = (client_id, now + lifetime)
                locked.append(queue)
        return locked

    def unlock(self, group: str, client_id: str, queues: Iterable[MessageQueue]) -> list[MessageQueue]:
        """Release the listed queues the client holds (expired or not); returns those released."""
        released: list[MessageQueue] = []
        for queue in queues:
            held = self._locks.get((group, queue))
            if held is not None and held[0] == client_id:
                del self._locks[(group, queue)]
                released.append(queue)
        return released

    def release_client(self, client_id: str, groups: Iterable[str]) -> None:
        """Drop every lock the client holds in the given groups."""
        wanted = set(groups)
        for key in [key for key, (owner, _) in self._locks.items() if owner == client_id and key[0] in wanted]:
            del self._locks[key]

    def owner(self, group: str, queue: MessageQueue, now: float) -> str | None:
        """The client holding a live lock on the queue, or ``None``."""
        held = self._locks.get((group, queue))
        if held is None or held[1] <= now:
            return None
        return held[0]

    def clear(self) -> None:
        self._locks.clear()
