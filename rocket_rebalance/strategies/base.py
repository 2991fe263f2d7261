"""What every allocation strategy shares: the protocol, the errors, and Java's one argument check.

Java's strategies all inherit ``AbstractAllocateMessageQueueStrategy.check``; the Go client copies that check into
each strategy. Here it lives once, in :class:`CheckedStrategy`, which runs it and then asks the subclass for one
consumer's share. The same subclass hook serves the whole-group plan, so a strategy is written once and gets both
``allocate`` (one consumer's view) and ``plan_all`` (every consumer's share in one pass).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Generic, Protocol, TypeVar, runtime_checkable

from rocket_rebalance.model import ClientIdList, MessageQueue, QueueList, check_client_id_list, check_queue_list

__all__ = [
    "AllocateMessageQueueStrategy",
    "AllocationError",
    "CheckedStrategy",
    "ConsumerIdcsNotSetError",
    "MessageQueuesNotSetError",
    "Owners",
    "SizedPlacement",
    "check_allocate_args",
    "check_group_args",
    "check_sizes",
    "first_holders",
    "first_positions",
    "plan_group",
    "plan_owners",
    "shares_of",
]


class AllocationError(ValueError):
    """Where Java throws ``IllegalArgumentException``; the message is Java's, word for word."""


class ConsumerIdcsNotSetError(ValueError):
    """MACHINE_ROOM was never given its machine rooms (Java throws a ``NullPointerException`` here)."""


class MessageQueuesNotSetError(ValueError):
    """CONFIG was never given its queues (Java's returns ``null``, which its rebalance takes as no queues: every
    consumer of the group silently consumes nothing)."""


@runtime_checkable
class AllocateMessageQueueStrategy(Protocol):
    """The protocol of Java's ``AllocateMessageQueueStrategy``; user strategies implement it too.

    ``allocate`` returns the queues ``current_cid`` should own: a list, empty when there are none for it (Java's may
    return ``null``, which its rebalance takes as none; ours refuse the misuse that gives it, by name). A strategy
    may also offer ``plan_all(consumer_group, mq_all, cid_all)`` returning every consumer's
    share at once; :func:`rocket_rebalance.plan.plan` uses it when present.
    """

    @property
    def name(self) -> str: ...

    def allocate(
        self,
        consumer_group: str,
        current_cid: str | None,
        mq_all: Sequence[MessageQueue] | None,
        cid_all: Sequence[str] | None,
    ) -> list[MessageQueue]: ...


def _check_sequence(argument: str, value: object) -> None:
    if not isinstance(value, Sequence) or isinstance(value, str | bytes):
        raise TypeError(f"{argument} must be a list or tuple, got {type(value).__name__}")


def check_group_args(mq_all: Sequence[MessageQueue] | None, cid_all: Sequence[str] | None) -> None:
    """Java's checks on the queue and consumer lists, plus item types (a ``QueueList`` was checked already)."""
    if type(mq_all) is QueueList and type(cid_all) is ClientIdList and mq_all and cid_all:
        return  # checked when they were built, and not empty: every check below passes (the pipeline's plans)
    if mq_all is None or (isinstance(mq_all, Sequence) and len(mq_all) == 0):
        raise AllocationError("mqAll is null or mqAll empty")
    _check_sequence("mq_all", mq_all)
    if cid_all is None or (isinstance(cid_all, Sequence) and len(cid_all) == 0):
        raise AllocationError("cidAll is null or cidAll empty")
    _check_sequence("cid_all", cid_all)
    check_queue_list("mq_all", mq_all)
    check_client_id_list("cid_all", cid_all)


def check_allocate_args(
    current_cid: str | None, mq_all: Sequence[MessageQueue] | None, cid_all: Sequence[str] | None
) -> int | None:
    """Java's ``check``, in Java's order; returns the position of ``current_cid`` or ``None`` when absent.

    Absent is not an error in Java: the consumer simply gets nothing (it is not yet in the broker's list).
    """
    if current_cid is not None and not isinstance(current_cid, str):
        raise TypeError(f"current_cid must be a str, got {type(current_cid).__name__}")
    if not current_cid:
        raise AllocationError("currentCID is empty")
    check_group_args(mq_all, cid_all)
    assert cid_all is not None
    try:
        return cid_all.index(current_cid)
    except ValueError:
        return None


def first_positions(cid_all: Sequence[str]) -> dict[str, int]:
    """Each distinct client ID with its first position, in list order (Java's ``indexOf`` picks the first)."""
    positions: dict[str, int] = {}
    for position, cid in enumerate(cid_all):
        positions.setdefault(cid, position)
    return positions


def first_holders(cid_all: Sequence[str]) -> Sequence[str | None]:
    """Who holds the share computed for each position of ``cid_all`` in a whole-group plan: the ID at its first
    position, nobody (``None``) at a repeat of it (a plan has one share per distinct ID, the first position's)."""
    positions = first_positions(cid_all)
    if len(positions) == len(cid_all):
        return cid_all
    return [cid if positions[cid] == position else None for position, cid in enumerate(cid_all)]


Owners = list[str | None]
"""Each queue's owner in a whole-group plan, by the queue's position in ``mq_all`` (``None``: nobody's)."""


def shares_of(mq_all: Sequence[MessageQueue], cid_all: Sequence[str], owners: Owners) -> dict[str, list[MessageQueue]]:
    """A whole-group plan from each queue's owner: every distinct consumer of ``cid_all`` (in list order) with the
    queues it owns, in ``mq_all`` order."""
    shares: dict[str, list[MessageQueue]] = {cid: [] for cid in cid_all}
    for mq, owner in zip(mq_all, owners, strict=True):
        if owner is not None:
            shares[owner].append(mq)
    return shares


def plan_owners(
    strategy: AllocateMessageQueueStrategy,
    consumer_group: str,
    mq_all: Sequence[MessageQueue] | None,
    cid_all: Sequence[str] | None,
) -> Owners | None:
    """Each queue's owner in the strategy's whole-group plan, when the strategy can say so (its ``owners``);
    ``None`` when it cannot (CONFIG hands one queue to many consumers; a user strategy may not offer it).

    A strategy's ``owners(consumer_group, mq_all, cid_all)`` is its plan as one owner per queue position: with
    ``mq_all`` as the rebalance prepares it (sorted, no repeats), consumer ``c``'s share in ``plan_all`` is exactly
    the queues whose owner is ``c``, in ``mq_all`` order. Measures that compare plans position by position (the
    fleet pipeline's movement) then need no dictionary of queues."""
    owners = getattr(strategy, "owners", None)
    if not callable(owners):
        return None
    found: Owners = owners(consumer_group, mq_all, cid_all)
    return found


@runtime_checkable
class SizedPlacement(Protocol):
    """A strategy that can fill consumers to sizes chosen by someone else: CROSS_TOPIC decides how many queues of
    each topic every consumer takes (so that totals over the topics stay even) and this says which ones."""

    name: str

    def place(
        self, mq_all: Sequence[MessageQueue], cids: Sequence[str], sizes: Sequence[int]
    ) -> list[list[MessageQueue]]:
        """The queues of each of the distinct ``cids``, ``sizes[i]`` of them for ``cids[i]``, in ``mq_all`` order;
        ``sizes`` sum to ``len(mq_all)``."""
        ...


def check_sizes(mq_all: Sequence[MessageQueue], cids: Sequence[str], sizes: Sequence[int]) -> None:
    """A placement's sizes must split the queues exactly, one non-negative size per consumer."""
    if len(sizes) != len(cids) or sum(sizes) != len(mq_all) or min(sizes, default=0) < 0:
        raise ValueError(f"sizes {list(sizes)} do not split {len(mq_all)} queues among {len(cids)} consumers")


Prepared = TypeVar("Prepared")


class CheckedStrategy(ABC, Generic[Prepared]):
    """A strategy that runs Java's shared check and then computes one consumer's share.

    Subclasses give ``name``, :meth:`prepare` (the group-wide work: ring building, room grouping, eligible
    queues) and :meth:`share` (one consumer's part of it), so ``plan_all`` does the group-wide work once.
    """

    name: str

    def allocate(
        self,
        consumer_group: str,
        current_cid: str | None,
        mq_all: Sequence[MessageQueue] | None,
        cid_all: Sequence[str] | None,
    ) -> list[MessageQueue]:
        """One consumer's share, exactly as the Java strategy computes it (results in Java's order)."""
        index = check_allocate_args(current_cid, mq_all, cid_all)
        if index is None:
            return []
        assert mq_all is not None and cid_all is not None
        return self.share(self.prepare(consumer_group, mq_all, cid_all), index)

    def plan_all(
        self, consumer_group: str, mq_all: Sequence[MessageQueue] | None, cid_all: Sequence[str] | None
    ) -> dict[str, list[MessageQueue]]:
        """Every distinct consumer's share in one pass; equal to calling :meth:`allocate` for each."""
        check_group_args(mq_all, cid_all)
        assert mq_all is not None and cid_all is not None
        prepared = self.prepare(consumer_group, mq_all, cid_all)
        return {cid: self.share(prepared, index) for cid, index in first_positions(cid_all).items()}

    @abstractmethod
    def prepare(self, consumer_group: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> Prepared:
        """Group-wide work shared by every consumer's share (called after the arguments were checked)."""

    @abstractmethod
    def share(self, prepared: Prepared, index: int) -> list[MessageQueue]:
        """The share of the consumer at ``index`` of ``cid_all``, given what :meth:`prepare` returned."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def plan_group(
    strategy: AllocateMessageQueueStrategy,
    consumer_group: str,
    mq_all: Sequence[MessageQueue] | None,
    cid_all: Sequence[str] | None,
) -> dict[str, list[MessageQueue]]:
    """Every distinct consumer's share: the strategy's own ``plan_all`` when it has one, else one call each.

    A ``None`` share (CONFIG with nothing configured, or a user strategy) becomes an empty list, as the Java
    rebalance treats it.
    """
    plan_all = getattr(strategy, "plan_all", None)
    if callable(plan_all):
        result: dict[str, list[MessageQueue]] = plan_all(consumer_group, mq_all, cid_all)
        return result
    return {
        cid: list(strategy.allocate(consumer_group, cid, mq_all, cid_all) or ())
        for cid in first_positions(cid_all or ())
    }
