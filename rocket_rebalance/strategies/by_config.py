"""CONFIG: every consumer takes a fixed, configured list of queues."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rocket_rebalance.model import MessageQueue, QueueList
from rocket_rebalance.strategies.base import MessageQueuesNotSetError

__all__ = ["AllocateMessageQueueByConfig"]


class AllocateMessageQueueByConfig:
    """CONFIG returns the configured list as configured, whatever it is asked (as in Java).

    With no list configured it raises :class:`MessageQueuesNotSetError` where Java returns ``null`` (which its
    rebalance takes as no queues, so a forgotten list consumes nothing, silently). Because every consumer gets the
    same list, queues are shared by all consumers that use it: the operator pins them by hand.
    """

    name = "CONFIG"

    def __init__(self, message_queues: Iterable[MessageQueue] | None = None) -> None:
        self.message_queues = None if message_queues is None else QueueList(message_queues)
        self._last: tuple[tuple[str, ...], dict[str, list[MessageQueue]]] | None = None

    def allocate(
        self,
        consumer_group: str,
        current_cid: str | None,
        mq_all: Sequence[MessageQueue] | None,
        cid_all: Sequence[str] | None,
    ) -> list[MessageQueue]:
        return list(self._configured())

    def _configured(self) -> QueueList:
        if self.message_queues is None:
            raise MessageQueuesNotSetError(
                "CONFIG has no message_queues configured (Java returns null, and its consumers consume nothing); "
                "configure the queues every consumer takes"
            )
        return self.message_queues

    def plan_all(
        self, consumer_group: str, mq_all: Sequence[MessageQueue] | None, cid_all: Sequence[str] | None
    ) -> dict[str, list[MessageQueue]]:
        """Every consumer's share: the configured list (none configured raises, as :meth:`allocate` does).

        Java's ``allocate`` hands every consumer the very list it was configured with, so its every-consumer loop
        builds nothing; a dictionary of 1,000 consumers built anew cost four times that loop, and its copy a
        fraction (benchmarks/allocation.py). A consumer plans with the same member list round after round, so
        the last plan is kept (one entry, replaced whole, so threads need no lock) and a plan of an equal list is
        its copy. Like Java's, every share is one list object, also shared with the later plans of that list:
        shares are read, not changed (no caller in the library changes one), and the configured list itself is
        never handed out."""
        members = cid_all if isinstance(cid_all, tuple) else tuple(cid_all or ())  # a tuple cannot change later
        last = self._last
        if last is None or (last[0] is not members and last[0] != members):
            last = self._last = (members, dict.fromkeys(members, list(self._configured())))
        return last[1].copy()

    def __repr__(self) -> str:
        configured = "unset" if self.message_queues is None else f"{len(self.message_queues)} queues"
        return f"<{type(self).__name__} {self.name} {configured}>"
