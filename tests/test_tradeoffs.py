"""The trade-off measures: random groups as the rebalance sees them, and figures that follow from the strategies'
own rules (computed here a second way where one exists), reproducible from the seed."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from fractions import Fraction

import pytest

from rocket_rebalance.model import MessageQueue, prepare_rebalance_input
from rocket_rebalance.plan import balance, movement, plan
from rocket_rebalance.strategies import create_strategy
from rocket_rebalance.tradeoffs import (
    BROKERS,
    GROUP,
    TOPICS,
    compare,
    compare_topics,
    default_strategies,
    format_chart,
    format_table,
    format_topic_table,
    merged_plan,
    random_groups,
    random_topic_groups,
    topic_group,
)

SHAPES = [(64, 8), (64, 100), (1000, 8), (97, 13)]


@pytest.mark.parametrize(("queues", "consumers"), SHAPES)
def test_random_groups_are_what_the_rebalance_prepares(queues: int, consumers: int) -> None:
    for group in random_groups(queues, consumers, 5, seed=3):
        ready = prepare_rebalance_input(list(reversed(group.mq_all)), list(reversed(group.cid_all)))
        assert (ready.mq_all, ready.cid_all) == (group.mq_all, group.cid_all)
        assert len(group.mq_all) == queues and len(set(group.cid_all)) == consumers
        assert BROKERS[0] <= len({mq.broker_name for mq in group.mq_all}) <= BROKERS[1]
        assert all("@" in cid for cid in group.cid_all)
        newcomer = set(group.joined) - set(group.cid_all)
        assert len(newcomer) == 1 and set(group.joined) == set(group.cid_all) | newcomer
        assert group.leaver in group.cid_all and set(group.left) == set(group.cid_all) - {group.leaver}
        assert prepare_rebalance_input((), list(reversed(group.joined))).cid_all == group.joined


def test_random_topic_groups_hold_every_topic_and_the_retry_topic() -> None:
    for group in random_topic_groups(6, 10, seed=3):
        topics = [queues[0].topic for queues in group.topics]
        assert TOPICS[0] + 1 <= len(topics) <= TOPICS[1] + 1 and f"%RETRY%{GROUP}" in topics
        assert sorted(group.mq_all) == sorted(mq for queues in group.topics for mq in queues)
        assert all({mq.topic for mq in queues} == {topic} for queues, topic in zip(group.topics, topics, strict=True))


def test_avg_is_perfectly_balanced_when_consumers_divide_the_queues() -> None:
    (row,) = compare({"AVG": create_strategy("AVG")}, 96, 12, 30, seed=5)
    assert row.balance_mean == row.balance_p95 == row.balance_worst == 1.0
    # every member holds 96 / 12 queues, so a killed one orphans exactly 1/12 of the topic
    assert row.orphaned_mean == row.orphaned_worst == pytest.approx(1 / 12)


@pytest.mark.parametrize("nodes", [1, 10, 40])
def test_consistent_hash_moves_only_what_the_newcomer_takes(nodes: int) -> None:
    strategy = create_strategy("CONSISTENT_HASH", virtual_node_count=nodes)
    groups = random_groups(64, 8, 20, seed=7)
    taken = []
    for group in groups:
        before = plan(strategy, GROUP, group.mq_all, group.cid_all)
        after = plan(strategy, GROUP, group.mq_all, group.joined)
        (newcomer,) = set(group.joined) - set(group.cid_all)
        moves = movement(before, after)
        assert all(moves.owner_after[mq] == newcomer for mq in moves.moved)
        taken.append(len(after[newcomer]))
    (row,) = compare({"CH": strategy}, 64, 8, 20, seed=7)
    assert row.join_moved == pytest.approx(sum(taken) / len(taken) / 64)


def _balanced(shares: dict[str, list[MessageQueue]]) -> bool:
    loads = balance(shares)
    return loads.max - loads.min <= 1


@pytest.mark.parametrize(("queues", "consumers"), SHAPES)
def test_balanced_splits_never_move_less_than_the_minimum(queues: int, consumers: int) -> None:
    """The minimums are what balanced splits must move: a join whose result is balanced gives the newcomer at least
    ``Q // (C + 1)``, and a leaver from a balanced split held at least ``Q // C``. An unbalanced strategy (plain
    consistent hashing) can move less, by giving a newcomer less than its share or losing a light leaver."""
    groups = random_groups(queues, consumers, 8, seed=11)
    for strategy in default_strategies().values():
        for group in groups:
            before = plan(strategy, GROUP, group.mq_all, group.cid_all)
            after_join = plan(strategy, GROUP, group.mq_all, group.joined)
            if _balanced(after_join):
                assert len(movement(before, after_join).moved) >= queues // (consumers + 1), (strategy, group)
            if _balanced(before):
                after_leave = plan(strategy, GROUP, group.mq_all, group.left)
                assert len(movement(before, after_leave).moved) >= queues // consumers, (strategy, group)


@pytest.mark.parametrize(("queues", "consumers"), SHAPES)
@pytest.mark.parametrize("eps", [0, 0.1, 0.25, 1.0])
def test_bounded_hash_stays_within_its_cap_in_every_group(queues: int, consumers: int, eps: float) -> None:
    (row,) = compare({"bounded": create_strategy("CONSISTENT_HASH_BOUNDED", eps=eps)}, queues, consumers, 10, seed=13)
    assert row.balance_cap is not None and row.balance_worst <= row.balance_cap + 1e-12
    # the cap allows ceil((1 + eps) * Q / C) queues: a second computation, from the definition
    cap = math.ceil((1 + Fraction(str(eps))) * queues / consumers)
    assert row.balance_cap == pytest.approx(float(cap / Fraction(queues, consumers)))


def test_only_capped_strategies_report_a_cap() -> None:
    rows = compare(default_strategies(), 64, 8, 3, seed=1)
    capped = {row.label for row in rows if row.balance_cap is not None}
    assert capped == {"CONSISTENT_HASH_BOUNDED eps=0.25", "CONSISTENT_HASH_BOUNDED eps=0"}


def test_minimums_and_their_ratios() -> None:
    rows = compare(default_strategies(), 64, 8, 5, seed=2)
    assert all(row.join_minimum == 7 / 64 and row.leave_minimum == 8 / 64 for row in rows)
    assert all(row.join_ratio == pytest.approx(row.join_moved / row.join_minimum) for row in rows)
    (few_queues,) = compare({"AVG": create_strategy("AVG")}, 64, 100, 3, seed=2)
    assert few_queues.join_minimum == 0 and few_queues.join_ratio is None and few_queues.leave_ratio is None


def test_split_view_shares_never_exceed_the_moved_share() -> None:
    """A window shares out what one of its two plans moves: every share taken twice or by nobody is a queue that
    changes owner on the join, so neither share can exceed the share moved."""
    for row in compare(default_strategies(), 64, 8, 20, seed=4):
        assert 0 <= row.double_owned <= row.join_moved and 0 <= row.unowned <= row.join_moved


def test_across_topics_totals_stay_within_one_where_avg_piles_up_remainders() -> None:
    """apache/rocketmq#1945: ten topics of ten queues over four consumers give AVG totals 30, 30, 20, 20."""
    topics = [[MessageQueue(f"Topic{t}", "broker-a", q) for q in range(10)] for t in range(10)]
    group = topic_group(topics, ["10.0.0.1@1", "10.0.0.2@2", "10.0.0.3@3", "10.0.0.4@4"])
    avg_totals = sorted(len(queues) for queues in merged_plan(create_strategy("AVG"), group).values())
    assert avg_totals == [20, 20, 30, 30]
    for inner in ("AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH_BOUNDED"):
        shares = merged_plan(create_strategy("CROSS_TOPIC", inner=inner), group)
        assert sorted(len(queues) for queues in shares.values()) == [25, 25, 25, 25]
        assert sorted(mq for queues in shares.values() for mq in queues) == sorted(group.mq_all)


@pytest.mark.parametrize("consumers", [3, 8, 40])
def test_compare_topics_keeps_cross_topic_within_one(consumers: int) -> None:
    rows = {row.label: row for row in compare_topics(default_strategies(), consumers, 30, seed=1)}
    for label in ("CROSS_TOPIC-AVG", "CROSS_TOPIC-CONSISTENT_HASH_BOUNDED"):
        assert rows[label].spread_worst <= 1
    assert rows["AVG"].spread_worst > 1  # random topics of 1-16 queues leave remainders that pile up


def test_same_seed_same_rows_and_another_seed_other_rows() -> None:
    first = compare(default_strategies(), 64, 8, 10, seed=9)
    assert compare(default_strategies(), 64, 8, 10, seed=9) == first
    assert compare(default_strategies(), 64, 8, 10, seed=10) != first
    topics = compare_topics(default_strategies(), 5, 10, seed=9)
    assert compare_topics(default_strategies(), 5, 10, seed=9) == topics


def test_rows_do_not_depend_on_the_string_hash_seed() -> None:
    code = (
        "from rocket_rebalance.tradeoffs import compare, default_strategies, format_table;"
        "print(format_table(compare(default_strategies(), 40, 6, 5, seed=1)))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for hash_seed in ("1", "2")
    }
    assert len(outputs) == 1


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="consumers >= 2"):
        random_groups(8, 1, 1, seed=1)
    with pytest.raises(ValueError, match="groups >= 1"):
        random_topic_groups(4, 0, seed=1)


def test_tables_and_chart_show_every_strategy() -> None:
    strategies = default_strategies()
    rows = compare(strategies, 64, 8, 5, seed=1)
    table = format_table(rows).splitlines()
    assert table[0].startswith("64 queues, 8 consumers, 5 random groups")
    assert [line.split("  ")[0] for line in table[3:]] == list(strategies)
    topic_table = format_topic_table(compare_topics(strategies, 4, 5, seed=1)).splitlines()
    assert [line.split("  ")[0] for line in topic_table[2:]] == list(strategies)
    chart, legend_text = format_chart(rows).split("\n\n")
    legend = legend_text.splitlines()
    assert [line.split()[0] for line in legend] == list("ABCDEFGH")
    assert all(label in line for label, line in zip(strategies, legend, strict=True))
    plotted = "".join(line.split("|", 1)[1] for line in chart.splitlines() if "|" in line)
    hidden = {line.split()[-1].rstrip(")") for line in legend if "(under" in line}
    drawn = {line.split()[0] for line in legend if "(under" not in line}
    assert hidden <= drawn and all(marker in plotted for marker in drawn)
