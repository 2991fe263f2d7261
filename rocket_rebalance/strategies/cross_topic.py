"""CROSS_TOPIC: balance a group's total over all its topics, not each topic on its own.

Every built-in strategy balances one topic at a time, and gives the remainder of every topic to the first
consumers of the sorted list; a group subscribed to several topics piles all the remainders on the same few
consumers (apache/rocketmq#1945: 10 topics of 10 queues over 4 consumers give 30, 30, 20, 20). This wrapper
allocates the queues of all the group's topics in one call (``mq_all`` holds every topic's queues):

* topics in Java string order; each topic's queues split in sizes ``n // c`` or ``n // c + 1``;
* the ``n % c`` larger sizes go to the consumers with the fewest queues so far over the earlier topics (ties to
  the earlier consumer of the sorted list), so the running totals never differ by more than one;
* the inner strategy (AVG, AVG_BY_CIRCLE or CONSISTENT_HASH_BOUNDED) says which queues fill those sizes.

So each topic stays within one queue per consumer, and so does every consumer's total over the topics. With a
single topic the result is the inner strategy's own (AVG and AVG_BY_CIRCLE exactly Java's).

What every consumer must see alike, or the group splits (queues owned twice or by nobody): the member list, the
set of topics the group subscribes to (the retry topic included) and every topic's queues, since one topic's
queue count moves the remainders of every topic after it. Plain strategies need only agree topic by topic.
Python only: a Java consumer in the same group would split each topic its own way.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from itertools import groupby, repeat
from operator import attrgetter
from typing import cast

from rocket_rebalance.model import MessageQueue, java_string_key
from rocket_rebalance.strategies.averagely import AllocateMessageQueueAveragely
from rocket_rebalance.strategies.base import (
    AllocateMessageQueueStrategy,
    CheckedStrategy,
    Owners,
    SizedPlacement,
    check_group_args,
    first_positions,
)

__all__ = ["AllocateMessageQueueAcrossTopics", "cross_topic_sizes"]

Shares = dict[str, list[MessageQueue]]
_topic = attrgetter("topic")
Planned = tuple[Sequence[str], Shares]


def cross_topic_sizes(queue_counts: Sequence[int], consumers: int) -> list[list[int]]:
    """Per topic (in the given order), each consumer's number of queues: even within the topic, and the running
    totals over the topics so far never more than one apart."""
    totals = [0] * consumers
    sizes: list[list[int]] = []
    for count in queue_counts:
        base, remainder = divmod(count, consumers)
        larger = set(sorted(range(consumers), key=lambda i: (totals[i], i))[:remainder])
        topic_sizes = [base + (i in larger) for i in range(consumers)]
        totals = [total + size for total, size in zip(totals, topic_sizes, strict=True)]
        sizes.append(topic_sizes)
    return sizes


class AllocateMessageQueueAcrossTopics(CheckedStrategy[Planned]):
    """CROSS_TOPIC-<inner>: the queues of all the group's topics at once, totals within one queue (module doc)."""

    java_compatible = False
    spans_topics = True
    """``mq_all`` must hold the queues of every topic the group subscribes to: the core and the tools pass them
    all in one call instead of one call per topic."""

    def __init__(self, inner: AllocateMessageQueueStrategy | None = None) -> None:
        if inner is None:
            inner = AllocateMessageQueueAveragely()
        if not isinstance(inner, SizedPlacement):
            raise TypeError(
                f"CROSS_TOPIC's inner strategy must fill given sizes (AVG, AVG_BY_CIRCLE, CONSISTENT_HASH_BOUNDED), "
                f"not {getattr(inner, 'name', type(inner).__name__)}"
            )
        self.inner = cast(SizedPlacement, inner)

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"CROSS_TOPIC-{self.inner.name}"

    def prepare(self, consumer_group: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> Planned:
        cids = list(first_positions(cid_all))
        by_topic: dict[str, list[MessageQueue]] = {}
        for topic, run in groupby(mq_all, _topic):  # a run of one topic at a time: mq_all is usually sorted
            by_topic.setdefault(topic, []).extend(run)
        topics = sorted(by_topic, key=java_string_key)
        shares: Shares = {cid: [] for cid in cids}
        sizes = cross_topic_sizes([len(by_topic[topic]) for topic in topics], len(cids))
        for topic, topic_sizes in zip(topics, sizes, strict=True):
            for cid, queues in zip(cids, self.inner.place(by_topic[topic], cids, topic_sizes), strict=True):
                shares[cid].extend(queues)
        return (cid_all, shares)

    def share(self, prepared: Planned, index: int) -> list[MessageQueue]:
        cid_all, shares = prepared
        return list(shares[cid_all[index]])

    def owners(
        self, consumer_group: str, mq_all: Sequence[MessageQueue] | None, cid_all: Sequence[str] | None
    ) -> Owners:
        """Each queue's owner (:func:`~rocket_rebalance.strategies.base.plan_owners`), ``mq_all`` without repeats:
        the inner placements hand back ``mq_all``'s own queue objects, found by identity."""
        check_group_args(mq_all, cid_all)
        assert mq_all is not None and cid_all is not None
        position = {id(mq): k for k, mq in enumerate(mq_all)}
        found: Owners = [None] * len(mq_all)
        for cid, share in self.prepare(consumer_group, mq_all, cid_all)[1].items():
            deque(map(found.__setitem__, map(position.__getitem__, map(id, share)), repeat(cid)), maxlen=0)
        return found

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"
