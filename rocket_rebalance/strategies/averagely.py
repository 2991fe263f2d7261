"""AVG and AVG_BY_CIRCLE: the two strategies that only look at positions in the sorted lists."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate, chain, cycle, islice, repeat

from rocket_rebalance.model import MessageQueue
from rocket_rebalance.strategies.base import (
    CheckedStrategy,
    Owners,
    check_group_args,
    check_sizes,
    first_holders,
    first_positions,
)

__all__ = ["AllocateMessageQueueAveragely", "AllocateMessageQueueAveragelyByCircle"]

Positions = tuple[Sequence[MessageQueue], int]


class AllocateMessageQueueAveragely(CheckedStrategy[Positions]):
    """AVG, Java's default: each consumer takes one contiguous run of the sorted queues.

    With n queues and c consumers the first ``n % c`` consumers take ``n // c + 1`` queues and the rest
    ``n // c``; with ``n <= c`` consumer i takes queue i and the consumers past n take nothing.
    """

    name = "AVG"

    def prepare(self, consumer_group: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> Positions:
        return (mq_all, len(cid_all))

    def share(self, prepared: Positions, index: int) -> list[MessageQueue]:
        mq_all, consumers = prepared
        queues = len(mq_all)
        mod = queues % consumers
        if queues <= consumers:
            size = 1
        else:
            size = queues // consumers + (1 if mod > 0 and index < mod else 0)
        start = index * size if mod > 0 and index < mod else index * size + mod
        # Java copies min(size, n - start) queues from start; past the end that count is <= 0 (nothing).
        return list(mq_all[start : start + max(0, min(size, queues - start))])

    def plan_all(
        self, consumer_group: str, mq_all: Sequence[MessageQueue] | None, cid_all: Sequence[str] | None
    ) -> dict[str, list[MessageQueue]]:
        """Every consumer's run cut from the run boundaries, computed once: the same runs :meth:`share` gives
        position by position (``n % c`` runs of ``n // c + 1``, then runs of ``n // c``; with ``n <= c`` that is
        one queue each for the first ``n`` and none after). Per consumer, :meth:`share`'s arithmetic cost more
        than Java's whole every-consumer loop at 1,000 queues x 100 consumers (benchmarks/allocation.py)."""
        check_group_args(mq_all, cid_all)
        assert mq_all is not None and cid_all is not None
        base, larger = divmod(len(mq_all), len(cid_all))
        starts = [0, *accumulate([base + 1] * larger + [base] * (len(cid_all) - larger))]
        return {cid: list(mq_all[starts[index] : starts[index + 1]]) for cid, index in first_positions(cid_all).items()}

    def owners(
        self, consumer_group: str, mq_all: Sequence[MessageQueue] | None, cid_all: Sequence[str] | None
    ) -> Owners:
        """Each queue's owner (:func:`~rocket_rebalance.strategies.base.plan_owners`): the runs of
        :meth:`plan_all`, each repeated for its size, without building a list per consumer."""
        check_group_args(mq_all, cid_all)
        assert mq_all is not None and cid_all is not None
        base, larger = divmod(len(mq_all), len(cid_all))
        sizes = [base + 1] * larger + [base] * (len(cid_all) - larger)
        return list(chain.from_iterable(map(repeat, first_holders(cid_all), sizes)))

    def place(
        self, mq_all: Sequence[MessageQueue], cids: Sequence[str], sizes: Sequence[int]
    ) -> list[list[MessageQueue]]:
        """Contiguous runs of the given sizes, in consumer order (CROSS_TOPIC picks who gets the remainder)."""
        check_sizes(mq_all, cids, sizes)
        ends = list(accumulate(sizes))
        return [list(mq_all[end - size : end]) for end, size in zip(ends, sizes, strict=True)]


class AllocateMessageQueueAveragelyByCircle(CheckedStrategy[Positions]):
    """AVG_BY_CIRCLE: consumer i takes the queues at positions i, i + c, i + 2c, ... (dealt like cards)."""

    name = "AVG_BY_CIRCLE"

    def prepare(self, consumer_group: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> Positions:
        return (mq_all, len(cid_all))

    def share(self, prepared: Positions, index: int) -> list[MessageQueue]:
        mq_all, consumers = prepared
        return list(mq_all[index::consumers])

    def owners(
        self, consumer_group: str, mq_all: Sequence[MessageQueue] | None, cid_all: Sequence[str] | None
    ) -> Owners:
        """Each queue's owner (:func:`~rocket_rebalance.strategies.base.plan_owners`): the consumers dealt in turn."""
        check_group_args(mq_all, cid_all)
        assert mq_all is not None and cid_all is not None
        return list(islice(cycle(first_holders(cid_all)), len(mq_all)))

    def place(
        self, mq_all: Sequence[MessageQueue], cids: Sequence[str], sizes: Sequence[int]
    ) -> list[list[MessageQueue]]:
        """Dealt like cards, skipping a consumer once it has its size (CROSS_TOPIC picks who gets more)."""
        check_sizes(mq_all, cids, sizes)
        shares: list[list[MessageQueue]] = [[] for _ in cids]
        dealt = iter(mq_all)
        for round_ in range(max(sizes, default=0)):
            for share, size in zip(shares, sizes, strict=True):
                if round_ < size:
                    share.append(next(dealt))
        return shares
