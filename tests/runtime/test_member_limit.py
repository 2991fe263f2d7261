"""A broker's member list above the group limit is refused, visibly, instead of allocated (probe 2026-11-24 section
19: 500,000 IDs took 1 GB and the service thread). The consumer keeps what it holds and says why in its health."""

from __future__ import annotations

import pytest

from rocket_rebalance.model import MAX_GROUP_MEMBERS
from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.transport import GRPC_SCHEME
from rocket_rebalance.runtime.transport.grpc import GrpcTransport
from tests.runtime.test_consumer import FAST, wait_for
from tests.stub.conftest import StartStub


class CrowdedTransport(GrpcTransport):
    """The stub's member list padded to ``members`` IDs with ones that sort after ours ("a")."""

    def __init__(self, address: str, members: int) -> None:
        super().__init__(address)
        self.members = members

    def consumer_list(self, broker: str, consumer_group: str) -> list[str]:
        real = super().consumer_list(broker, consumer_group)
        return [*real, *(f"z{i}" for i in range(self.members - len(real)))]


@pytest.mark.parametrize("members", [MAX_GROUP_MEMBERS, MAX_GROUP_MEMBERS + 1])
def test_a_member_list_over_the_limit_is_a_health_error_not_an_allocation(start_stub: StartStub, members: int) -> None:
    address = GRPC_SCHEME + start_stub().address
    transport = CrowdedTransport(address, members)
    consumer = PushConsumer(
        address, "GID_crowd", topics=["TopicTest"], listener=lambda batch: None, client_id="a",
        transport=transport, **FAST,
    )  # fmt: skip
    consumer.start()
    try:
        if members <= MAX_GROUP_MEMBERS:
            # first of the sorted list of 10,000: AVG gives it the first of the 8 queues
            wait_for(lambda: len(consumer.owned_queues().get("TopicTest", ())) == 1)
            assert consumer.healthy
        else:
            wait_for(lambda: "member list for TopicTest" in str(consumer.describe().get("problems")))
            problems = consumer.describe()["problems"]
            assert isinstance(problems, dict)
            assert f"{members} members" in problems["member list for TopicTest"]
            assert f"limit is {MAX_GROUP_MEMBERS}" in problems["member list for TopicTest"]
            assert not consumer.healthy
            assert consumer.owned_queues().get("TopicTest", frozenset()) == frozenset()
    finally:
        consumer.shutdown()
