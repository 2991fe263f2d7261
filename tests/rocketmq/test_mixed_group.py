"""Java and Python consumers in one group on a real RocketMQ: after every join, graceful leave and kill -9 of
either kind, each queue has exactly one owner across both languages, each member owns what the Java strategy gives
it (and, for AVG, what the broker's own Java allocation says: QUERY_ASSIGNMENT), and no message is missed.

Client IDs are chosen so that Java's UTF-16 order differs from Python's default code-point order: a Python
member whose ID ends in U+10400 and a Java member whose ID ends in U+E000 sort one way in Java and the other way
in Python, so a client that sorted the Python way would disagree with the Java members about who is first.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rocket_rebalance.lab.mixed_group import MixedGroup, new_topic, ownership_problems
from rocket_rebalance.lab.rocketmq import RocketMQCluster
from rocket_rebalance.lab.wait import wait_until
from rocket_rebalance.model import sort_client_ids

pytestmark = pytest.mark.rocketmq

PY_SUPPLEMENTARY = "m\U00010400"  # Java order: before U+E000 (its high surrogate D801 < E000)
JAVA_PRIVATE_USE = "m\ue000"


def test_the_chosen_ids_sort_differently_in_java_and_python() -> None:
    ids = [f"127.0.0.1@{PY_SUPPLEMENTARY}", f"127.0.0.1@{JAVA_PRIVATE_USE}"]
    assert sort_client_ids(ids) != sorted(ids)


def settle(group: MixedGroup, check_oracle: bool) -> None:
    wait_until(group.members_known, 60, "every broker lists exactly the live members")
    wait_until(group.settled, 60, f"the group settles on the plan: {group.describe()}")
    assert not ownership_problems(group), group.describe()
    if check_oracle:
        assert group.oracle() == group.ownership(), group.describe()


@pytest.mark.parametrize(
    ("strategy", "api"),
    [("AVG", "push"), ("AVG_BY_CIRCLE", "push"), ("CONSISTENT_HASH", "push"), ("AVG", "async-push"), ("AVG", "pull")],
)
def test_java_and_python_share_a_group(rocketmq: RocketMQCluster, tmp_path: Path, strategy: str, api: str) -> None:
    """Java and Python members of one group agree on the plan through joins, leaves and kills of both, with the
    Python members as each of our consumers (``consume --api``: the asyncio push consumer, the pull consumer)."""
    name = f"{strategy}_{api}".replace("-", "_")
    topic = new_topic(rocketmq, f"Mixed{name.replace('_', '')}")
    group = MixedGroup(rocketmq, tmp_path, f"GID_mixed_{name}", topic, strategy)
    oracle = strategy == "AVG"
    try:
        group.produce(5)
        group.python("py-1", "--api", api)
        group.java(JAVA_PRIVATE_USE)
        settle(group, oracle)

        group.python(PY_SUPPLEMENTARY, "--api", api)
        group.java("java-2")
        group.produce(5)
        settle(group, oracle)

        stopped = group.python_members["127.0.0.1@py-1"].stop()
        assert stopped is not None and stopped["clean"] is True
        settle(group, oracle)

        assert group.java_members["127.0.0.1@java-2"].stop()
        group.produce(5)
        settle(group, oracle)

        group.java("java-3")
        group.java_members[f"127.0.0.1@{JAVA_PRIVATE_USE}"].kill()  # kill -9 of a Java member
        settle(group, oracle)

        group.python("py-4", "--api", api)
        group.python_members[f"127.0.0.1@{PY_SUPPLEMENTARY}"].kill()  # kill -9 of a Python member
        group.produce(5)
        settle(group, oracle)

        wait_until(lambda: not group.missing(), 60, "every produced message consumed")
    finally:
        group.close()
