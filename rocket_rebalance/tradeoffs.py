"""What each strategy trades: balance against movement, measured on the same random groups for every strategy.

One group or one hand-picked example says little about a hashing strategy, whose figures depend on where the
hashes of the queue and client names happen to fall. Here every strategy plans the *same* random groups (queues
of a random topic on a few brokers, consumers with realistic ``ip@pid`` client IDs, both sorted as the rebalance
sorts them), and each figure is a mean (or a percentile, or the worst) over the groups:

* balance: the busiest consumer's load over the mean load;
* movement: queues that change owner when one consumer joins or leaves gracefully, beside the least any balanced
  split must move (a newcomer must receive ``Q // (C + 1)`` queues; a leaver held at least ``Q // C``);
* a kill: once the broker notices, it moves what a leave moves; until then the dead consumer's queues are consumed
  by nobody (the orphaned share);
* the join window: half the live consumers already see the newcomer, half do not (:func:`plan.transition_views`),
  so some queues are taken twice and some by nobody;
* several topics (:func:`compare_topics`): each consumer's total over all the group's topics, which a strategy
  that plans each topic on its own leaves uneven (the remainders of every topic land on the same consumers).

``benchmarks/strategies.py`` prints these for four group sizes (RESULTS.md keeps the figures) and the demo draws a
chart of balance against movement. Randomness comes only from ``random.Random(seed)``: the same seed gives the same
groups and the same figures.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from statistics import fmean
from typing import NamedTuple

from rocket_rebalance.model import (
    ClientIdList,
    MessageQueue,
    QueueList,
    prepare_rebalance_input,
    retry_topic,
    sort_client_ids,
)
from rocket_rebalance.plan import Plan, balance, movement, plan, split_view, transition_views
from rocket_rebalance.strategies import (
    AllocateMessageQueueConsistentHashBounded,
    AllocateMessageQueueStrategy,
    create_strategy,
)
from rocket_rebalance.whatif import over_topics, plan_topics

__all__ = [
    "BROKERS",
    "GROUP",
    "TOPICS",
    "TOPIC_QUEUES",
    "Group",
    "Row",
    "Strategies",
    "TopicGroup",
    "TopicRow",
    "compare",
    "compare_topics",
    "default_strategies",
    "format_chart",
    "format_table",
    "format_topic_table",
    "merged_plan",
    "random_groups",
    "random_topic_groups",
    "topic_group",
]

GROUP = "GID_tradeoffs"
BROKERS = (2, 4)
"""Brokers per random group (inclusive range): a topic's queues are spread over all of them."""
TOPICS = (3, 12)
TOPIC_QUEUES = (1, 16)
"""Multi-topic groups: how many topics (besides the retry topic) and how many queues each (inclusive ranges)."""

Strategies = Mapping[str, AllocateMessageQueueStrategy]
"""Strategies to compare, by the label the tables and the chart show."""


def default_strategies() -> dict[str, AllocateMessageQueueStrategy]:
    """New instances (empty ring caches) of the strategies compared by default, by label.

    CONFIG, MACHINE_ROOM and MACHINE_ROOM_NEARBY are left out: they take the queues or rooms an operator
    configures, not a split chosen for balance or movement, so random groups say nothing about them.
    """
    return {
        "AVG": create_strategy("AVG"),
        "AVG_BY_CIRCLE": create_strategy("AVG_BY_CIRCLE"),
        "CONSISTENT_HASH nodes=10": create_strategy("CONSISTENT_HASH"),
        "CONSISTENT_HASH nodes=40": create_strategy("CONSISTENT_HASH", virtual_node_count=40),
        "CONSISTENT_HASH_BOUNDED eps=0.25": create_strategy("CONSISTENT_HASH_BOUNDED", eps=0.25),
        "CONSISTENT_HASH_BOUNDED eps=0": create_strategy("CONSISTENT_HASH_BOUNDED", eps=0),
        "CROSS_TOPIC-AVG": create_strategy("CROSS_TOPIC", inner="AVG"),
        "CROSS_TOPIC-CONSISTENT_HASH_BOUNDED": create_strategy("CROSS_TOPIC", inner="CONSISTENT_HASH_BOUNDED"),
    }


# ---------------------------------------------------------------------------------------------- random groups


class Group(NamedTuple):
    """One random single-topic group and the membership changes measured on it; every list is Java-sorted."""

    mq_all: QueueList
    cid_all: ClientIdList
    joined: ClientIdList
    """``cid_all`` and one newcomer."""
    left: ClientIdList
    """``cid_all`` without ``leaver``."""
    leaver: str
    """The member that leaves gracefully in one measure and is killed in another."""


class TopicGroup(NamedTuple):
    """One random group subscribed to several topics (its retry topic included)."""

    topics: list[QueueList]
    """Each topic's queues, Java-sorted: what a consumer passes per call to a strategy that plans topic by topic."""
    mq_all: QueueList
    """Every topic's queues in one Java-sorted list: what a ``spans_topics`` strategy is given in its one call."""
    cid_all: ClientIdList


def _client_ids(rng: random.Random, count: int) -> list[str]:
    """``count`` distinct client IDs shaped as the Java client's default ``ip@pid``, in the order drawn."""
    drawn: dict[str, None] = {}  # a dict, not a set: its order does not depend on the string hash seed
    while len(drawn) < count:
        ip = f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
        drawn[f"{ip}@{rng.randrange(1000, 100_000)}"] = None
    return list(drawn)


def _brokers(rng: random.Random) -> list[str]:
    return [f"broker-{chr(ord('a') + index)}" for index in range(rng.randint(*BROKERS))]


def _topic_name(rng: random.Random) -> str:
    return f"Topic_{rng.randrange(16**6):06x}"


def _topic_queues(topic: str, brokers: Sequence[str], count: int) -> list[MessageQueue]:
    """``count`` queues of ``topic`` spread over ``brokers`` as evenly as they go (the first brokers get one more)."""
    each, extra = divmod(count, len(brokers))
    return [
        MessageQueue(topic, broker, queue_id)
        for index, broker in enumerate(brokers)
        for queue_id in range(each + (index < extra))
    ]


def _sorted_ids(client_ids: Sequence[str]) -> ClientIdList:
    return ClientIdList.trusted(sort_client_ids(client_ids))


def _sorted_queues(queues: Sequence[MessageQueue]) -> QueueList:
    """Queues as the rebalance prepares them (a set, Java-sorted)."""
    return prepare_rebalance_input(queues, (), warn=False).mq_all


def _random_group(rng: random.Random, queues: int, consumers: int) -> Group:
    mq_all = _sorted_queues(_topic_queues(_topic_name(rng), _brokers(rng), queues))
    *members, newcomer = _client_ids(rng, consumers + 1)
    leaver = rng.choice(members)
    return Group(
        mq_all,
        _sorted_ids(members),
        _sorted_ids([*members, newcomer]),
        _sorted_ids([cid for cid in members if cid != leaver]),
        leaver,
    )


def random_groups(queues: int, consumers: int, groups: int, seed: int) -> list[Group]:
    """``groups`` random groups of one topic with ``queues`` queues and ``consumers`` members (at least two, so
    that one can leave); the same arguments always give equal groups (new objects each call)."""
    if queues < 1 or consumers < 2 or groups < 1:
        raise ValueError(f"need queues >= 1, consumers >= 2, groups >= 1; got {queues}, {consumers}, {groups}")
    rng = random.Random(seed)
    return [_random_group(rng, queues, consumers) for _ in range(groups)]


def topic_group(topics: Sequence[Sequence[MessageQueue]], client_ids: Sequence[str]) -> TopicGroup:
    """A multi-topic group from each topic's queues and the members, sorted as the rebalance sorts them."""
    every = _sorted_queues([mq for queues in topics for mq in queues])
    return TopicGroup([_sorted_queues(queues) for queues in topics], every, _sorted_ids(client_ids))


def _random_topic_group(rng: random.Random, consumers: int) -> TopicGroup:
    brokers = _brokers(rng)
    names = dict.fromkeys(_topic_name(rng) for _ in range(rng.randint(*TOPICS)))  # a repeated name would merge
    topics = [_topic_queues(name, brokers, rng.randint(*TOPIC_QUEUES)) for name in names]
    topics.append(_topic_queues(retry_topic(GROUP), brokers, len(brokers)))  # one retry queue per broker
    return topic_group(topics, _client_ids(rng, consumers))


def random_topic_groups(consumers: int, groups: int, seed: int) -> list[TopicGroup]:
    """``groups`` random groups of ``consumers`` members subscribed to several topics of a few queues each."""
    if consumers < 1 or groups < 1:
        raise ValueError(f"need consumers >= 1 and groups >= 1; got {consumers}, {groups}")
    rng = random.Random(seed)
    return [_random_topic_group(rng, consumers) for _ in range(groups)]


# ----------------------------------------------------------------------------------------------- measuring


class Row(NamedTuple):
    """One strategy's figures over the groups of one size. Shares are fractions of the topic's queues."""

    label: str
    queues: int
    consumers: int
    groups: int
    balance_mean: float
    balance_p95: float
    balance_worst: float
    balance_cap: float | None
    """The max/avg a load cap allows (CONSISTENT_HASH_BOUNDED: ``cap / (Q / C)``), ``None`` without a cap."""
    join_moved: float
    join_minimum: float
    """``(Q // (C + 1)) / Q``: what the newcomer must receive in any balanced split."""
    leave_moved: float
    leave_minimum: float
    """``(Q // C) / Q``: what the leaver held at least in a balanced split, all of which must move."""
    orphaned_mean: float
    orphaned_worst: float
    """The killed member's share: unconsumed until the broker notices it is gone."""
    double_owned: float
    unowned: float
    """Mean shares taken twice and by nobody while half the live consumers have not yet seen a join."""

    @property
    def join_ratio(self) -> float | None:
        """Moved over the least possible on a join; ``None`` when the least is 0 (fewer queues than consumers)."""
        return self.join_moved / self.join_minimum if self.join_minimum else None

    @property
    def leave_ratio(self) -> float | None:
        """Moved over the least possible on a graceful leave; ``None`` when the least is 0."""
        return self.leave_moved / self.leave_minimum if self.leave_minimum else None


class _Sample(NamedTuple):
    """One strategy on one group; counts are queues."""

    max_over_avg: float
    join_moved: int
    leave_moved: int
    orphaned: int
    double_owned: int
    unowned: int


def _measure(strategy: AllocateMessageQueueStrategy, group: Group) -> _Sample:
    """One group under one strategy: its plan, a join, a graceful leave (the leaver's share is also what a kill of
    it orphans) and the join window, all against the same plan before."""
    before = plan(strategy, GROUP, group.mq_all, group.cid_all)
    after_join = plan(strategy, GROUP, group.mq_all, group.joined)
    after_leave = plan(strategy, GROUP, group.mq_all, group.left)
    window = split_view(strategy, GROUP, group.mq_all, transition_views(group.cid_all, group.joined))
    return _Sample(
        balance(before).max_over_avg,
        len(movement(before, after_join).moved),
        len(movement(before, after_leave).moved),
        len(before[group.leaver]),
        len(window.double_owned),
        len(window.unowned),
    )


def _p95(values: Sequence[float]) -> float:
    """Nearest-rank 95th percentile: a value some group had, not one interpolated between two groups."""
    ordered = sorted(values)
    return ordered[math.ceil(0.95 * len(ordered)) - 1]


def _cap_ratio(strategy: AllocateMessageQueueStrategy, queues: int, consumers: int) -> float | None:
    """The cap as a max/avg, so that it reads beside the measured ones; only the bounded hash has a cap."""
    if not isinstance(strategy, AllocateMessageQueueConsistentHashBounded):
        return None
    return strategy.cap(queues, consumers) / (queues / consumers)


def _row(label: str, strategy: AllocateMessageQueueStrategy, groups: Sequence[Group]) -> Row:
    """The samples of one strategy over groups of one size, summed up (shares of the topic's queues)."""
    samples = [_measure(strategy, group) for group in groups]
    queues, consumers = len(groups[0].mq_all), len(groups[0].cid_all)
    loads = [sample.max_over_avg for sample in samples]
    orphaned = [sample.orphaned / queues for sample in samples]

    def share(counts: Sequence[int]) -> float:
        return fmean(counts) / queues

    return Row(
        label,
        queues,
        consumers,
        len(groups),
        fmean(loads),
        _p95(loads),
        max(loads),
        _cap_ratio(strategy, queues, consumers),
        share([sample.join_moved for sample in samples]),
        queues // (consumers + 1) / queues,
        share([sample.leave_moved for sample in samples]),
        queues // consumers / queues,
        fmean(orphaned),
        max(orphaned),
        share([sample.double_owned for sample in samples]),
        share([sample.unowned for sample in samples]),
    )


def compare(strategies: Strategies, queues: int, consumers: int, groups: int, seed: int) -> list[Row]:
    """One row per strategy, every strategy measured on the same ``groups`` random groups (:func:`random_groups`)."""
    sample = random_groups(queues, consumers, groups, seed)
    return [_row(label, strategy, sample) for label, strategy in strategies.items()]


class TopicRow(NamedTuple):
    """One strategy's per-consumer totals over all of a group's topics, over many random groups."""

    label: str
    consumers: int
    groups: int
    queues_mean: float
    """Mean queues per group over all its topics."""
    spread_mean: float
    spread_worst: int
    """Max minus min of the consumers' totals."""
    ratio_mean: float
    ratio_worst: float
    """Max over mean of the consumers' totals."""


def merged_plan(strategy: AllocateMessageQueueStrategy, group: TopicGroup) -> Plan:
    """Each consumer's queues over all the group's topics, planned as consumers plan them: in one call for a
    ``spans_topics`` strategy, else one call per topic."""
    queues = {topic[0].topic: topic for topic in group.topics}
    return over_topics(plan_topics(strategy, GROUP, queues, group.cid_all))


def compare_topics(strategies: Strategies, consumers: int, groups: int, seed: int) -> list[TopicRow]:
    """One row per strategy, every strategy on the same random multi-topic groups (:func:`random_topic_groups`)."""
    sample = random_topic_groups(consumers, groups, seed)
    rows = []
    for label, strategy in strategies.items():
        loads = [balance(merged_plan(strategy, group)) for group in sample]
        spreads = [load.max - load.min for load in loads]
        ratios = [load.max_over_avg for load in loads]
        rows.append(
            TopicRow(
                label,
                consumers,
                len(sample),
                fmean(load.queues for load in loads),
                fmean(spreads),
                max(spreads),
                fmean(ratios),
                max(ratios),
            )
        )
    return rows


# ------------------------------------------------------------------------------------------------ printing


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def format_table(rows: Sequence[Row]) -> str:
    """The rows of one group size as a text table, with a line saying which size."""
    if not rows:
        return ""
    width = max(len("strategy"), *(len(row.label) for row in rows))
    first = rows[0]
    lines = [
        f"{first.queues} queues, {first.consumers} consumers, {first.groups} random groups "
        "(shares are of the topic's queues; min = the least a balanced split moves)",
        f"{'':<{width}}  {'max/avg of loads':^27}  {'one join':^19}  {'one leave':^19}  "
        f"{'kill: orphaned':^14}  {'join window':^14}",
        f"{'strategy':<{width}}  {'mean':>6}{'p95':>7}{'worst':>7}{'cap':>7}  "
        f"{'moved':>6}{'min':>6}{'ratio':>7}  {'moved':>6}{'min':>6}{'ratio':>7}  "
        f"{'mean':>7}{'worst':>7}  {'double':>7}{'nobody':>7}",
    ]
    for row in rows:
        lines.append(
            f"{row.label:<{width}}  {row.balance_mean:>6.2f}{row.balance_p95:>7.2f}{row.balance_worst:>7.2f}"
            f"{_ratio(row.balance_cap):>7}  "
            f"{row.join_moved:>6.3f}{row.join_minimum:>6.3f}{_ratio(row.join_ratio):>7}  "
            f"{row.leave_moved:>6.3f}{row.leave_minimum:>6.3f}{_ratio(row.leave_ratio):>7}  "
            f"{row.orphaned_mean:>7.3f}{row.orphaned_worst:>7.3f}  {row.double_owned:>7.3f}{row.unowned:>7.3f}"
        )
    return "\n".join(line.rstrip() for line in lines)


def format_topic_table(rows: Sequence[TopicRow]) -> str:
    """The multi-topic rows of one group size as a text table, with a line saying which size."""
    if not rows:
        return ""
    width = max(len("strategy"), *(len(row.label) for row in rows))
    first = rows[0]
    lines = [
        f"{first.consumers} consumers, {first.groups} random groups of {TOPICS[0]}-{TOPICS[1]} topics x "
        f"{TOPIC_QUEUES[0]}-{TOPIC_QUEUES[1]} queues + the retry topic ({first.queues_mean:.1f} queues on average); "
        "per-consumer totals over all topics",
        f"{'strategy':<{width}}  {'max-min mean':>12}{'worst':>7}  {'max/avg mean':>12}{'worst':>7}",
    ]
    for row in rows:
        lines.append(
            f"{row.label:<{width}}  {row.spread_mean:>12.2f}{row.spread_worst:>7}  "
            f"{row.ratio_mean:>12.2f}{row.ratio_worst:>7.2f}"
        )
    return "\n".join(lines)


def _markers(count: int) -> str:
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    if count > len(letters):
        raise ValueError(f"a chart shows at most {len(letters)} strategies, got {count}")
    return letters[:count]


def format_chart(rows: Sequence[Row], width: int = 56, height: int = 11) -> str:
    """A text scatter of the rows: x is the mean share moved on a join, y the mean max/avg, one letter a strategy.

    The column of ``:`` is the least share a balanced split moves on a join, so a strategy's distance to its right
    is movement beyond what balance costs. A letter hidden under another (same cell) says so in the legend.
    """
    if not rows:
        return ""
    x_top = math.ceil(max(row.join_moved for row in rows) * 20 + 1e-9) / 20  # next 0.05 above the largest
    y_top = max(1.1, math.ceil(max(row.balance_mean for row in rows) * 10 + 1e-9) / 10)

    def column(x: float) -> int:
        return round(x / x_top * (width - 1))

    def line(y: float) -> int:
        return round((y - 1.0) / (y_top - 1.0) * (height - 1))

    grid = [[" "] * width for _ in range(height)]
    for cells in grid:
        cells[column(rows[0].join_minimum)] = ":"
    drawn: dict[tuple[int, int], str] = {}
    legend = []
    label_width = max(len(row.label) for row in rows)
    for marker, row in zip(_markers(len(rows)), rows, strict=True):
        cell = (line(row.balance_mean), column(row.join_moved))
        note = f"  (under {drawn[cell]})" if cell in drawn else ""
        drawn.setdefault(cell, marker)
        grid[cell[0]][cell[1]] = drawn[cell]
        legend.append(
            f"  {marker}  {row.label:<{label_width}}  moved {row.join_moved:.3f}  max/avg {row.balance_mean:.2f}{note}"
        )
    labelled = (0, (height - 1) // 2, height - 1)  # bottom, middle and top lines carry their max/avg
    chart = ["max/avg (mean)"]
    for index in range(height - 1, -1, -1):
        label = f"{1.0 + (y_top - 1.0) * index / (height - 1):.2f}" if index in labelled else ""
        chart.append(f"{label:>6} |{''.join(grid[index]).rstrip()}")
    chart.append(f"{'':>6} +{'-' * width}")
    chart.append(f"{'':>8}{0:.2f}{x_top / 2:^{width - 8}.3f}{x_top:.2f}")
    chart.append(f"{'':>8}share of queues moved on one join (mean); ':' = the least a balanced split moves")
    return "\n".join(chart + ["", *legend])
