"""Plans compared position by position give what the library's dictionary measures give (plan.movement, balance)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rocket_rebalance.model import MessageQueue, prepare_rebalance_input
from rocket_rebalance.pipeline.placement import NO_PLAN, TopicPlan, change
from rocket_rebalance.plan import balance, movement
from rocket_rebalance.strategies import create_strategy
from rocket_rebalance.strategies.base import plan_owners

CIDS = [f"10.0.0.{k}@{4000 + k}#17000000{k}" for k in range(8)]
QUEUES = [MessageQueue("T", broker, queue) for broker in ("broker-a", "broker-b", "broker-c") for queue in range(5)]
NAMES = ["AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH", "CONSISTENT_HASH_BOUNDED"]

members = st.lists(st.sampled_from(CIDS), max_size=7)  # repeats allowed: Java counts a listed ID as often as listed
queue_lists = st.lists(st.sampled_from(range(len(QUEUES))), max_size=len(QUEUES), unique=True)


def placed(name: str, queues: list[int], cids: list[str], copies: bool) -> TopicPlan:
    """The strategy's plan as the analysis makes it (owners by position), queue objects fresh when ``copies``."""
    picked = [QUEUES[k] if not copies else MessageQueue(QUEUES[k].topic, QUEUES[k].broker_name, k % 5) for k in queues]
    ready = prepare_rebalance_input(picked, cids, warn=False)
    if not ready.mq_all or not ready.cid_all:
        return TopicPlan.placed(ready.mq_all, (), [None] * len(ready.mq_all))
    owners = plan_owners(create_strategy(name), "G", ready.mq_all, ready.cid_all)
    assert owners is not None
    return TopicPlan.placed(ready.mq_all, ready.cid_all, owners)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(NAMES), st.sampled_from(NAMES), queue_lists, queue_lists, members, members, st.booleans())
def test_a_change_by_position_is_the_librarys_movement(
    old_name: str,
    new_name: str,
    old_queues: list[int],
    new_queues: list[int],
    old_cids: list[str],
    new_cids: list[str],
    copies: bool,
) -> None:
    """Any two plans of a topic: strategies switched, queues added and removed (as equal but distinct objects too),
    consumers joining, leaving and listed twice; and the dictionary path for a plan without owners."""
    old, new = placed(old_name, old_queues, old_cids, False), placed(new_name, new_queues, new_cids, copies)
    expected = movement(old.shares, new.shares)
    for found in (change(old, new), change(TopicPlan.given(old.queues, old.shares), new)):
        assert found.moved == expected.moved
        assert found.owner_before == [expected.owner_before.get(mq) for mq in expected.moved]
        assert found.owner_after == [expected.owner_after[mq] for mq in expected.moved]
        assert found.minimum == expected.minimum
    assert new.balance() == balance(new.shares) == TopicPlan.given(new.queues, new.shares).balance()


@given(st.sampled_from(NAMES), queue_lists, members)
def test_a_topic_on_one_side_only_moves_everything_or_nothing(name: str, queues: list[int], cids: list[str]) -> None:
    plan_ = placed(name, queues, cids, False)
    appeared, gone = change(NO_PLAN, plan_), change(plan_, NO_PLAN)
    assert (appeared.moved, appeared.minimum) == (movement({}, plan_.shares).moved, movement({}, plan_.shares).minimum)
    assert (gone.moved, gone.minimum) == ([], 0)
