"""CONFIG: every consumer takes a fixed, configured list of queues."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rocket_rebalance.model import MessageQueue, QueueList

__all__ = ["AllocateMessageQueueByConfig"]


class AllocateMessageQueueByConfig:
    """CONFIG returns the configured list as configured, whatever it is asked, and never raises (as in Java).

    With no list configured it returns ``None``, which the rebalance treats as no queues. Because every consumer
    gets the same list, queues are shared by all consumers that use it: the operator pins them by hand.
    """

    name = "CONFIG"

    def __init__(self, message_queues: Iterable[MessageQueue] | None = None) -> None:
        self.message_queues = None if message_queues is None else QueueList(message_queues)

    def allocate(
        self,
        consumer_group: str,
        current_cid: str | None,
        mq_all: Sequence[MessageQueue] | None,
        cid_all: Sequence[str] | None,
    ) -> list[MessageQueue] | None:
        return None if self.message_queues is None else list(self.message_queues)

    def plan_all(
        self, consumer_group: str, mq_all: Sequence[MessageQueue] | None, cid_all: Sequence[str] | None
    ) -> dict[str, list[MessageQueue]]:
        """Every consumer's share: the configured list (``None`` counts as no queues), one list object for all.

        Java's ``allocate`` hands every consumer the very list it was configured with; a copy per consumer made
        this plan dearer than Java's whole every-consumer loop (benchmarks/allocation.py). So every share of one
        plan is the same new list: a caller that changes a share in place changes them all (no caller in the
        library does), and the configured list itself is never handed out."""
        return dict.fromkeys(cid_all or (), list(self.message_queues or ()))

    def __repr__(self) -> str:
        configured = "unset" if self.message_queues is None else f"{len(self.message_queues)} queues"
        return f"<{type(self).__name__} {self.name} {configured}>"
