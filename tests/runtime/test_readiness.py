"""``wait_for_assignment(timeout)`` against the in-process stub: every consumer returns its queues once it holds
them (or holds none because the group has more members than queues), and after the time says what failed (a name
server that does not answer, an unknown topic) by one named error. The failing cases first wait (with a hang
bound) until health saw the failure, so what is asserted is the error's reason, never how fast it came."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from rocket_rebalance.model import MessageModel, MessageQueue
from rocket_rebalance.runtime.async_consumer import AsyncPullConsumer, AsyncPushConsumer
from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.pull_consumer import PullConsumer
from rocket_rebalance.runtime.settings import ConsumerNotReadyError
from rocket_rebalance.runtime.transport import GRPC_SCHEME
from tests.aio import run
from tests.runtime.test_consumer import wait_for
from tests.stub.conftest import StartStub

WAIT = 60.0  # a hang bound for a start on a loaded machine, never a measure of speed
TOPIC_QUEUES = {
    MessageQueue("TopicTest", broker, queue_id) for broker in ("broker-a", "broker-b") for queue_id in range(4)
}


def test_push_consumers_return_their_queues_once_they_hold_them(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    with (
        PushConsumer(address, "GID_ready", topics=["TopicTest"], client_id="a", listener=lambda batch: None) as a,
        PushConsumer(address, "GID_ready", topics=["TopicTest"], client_id="b", listener=lambda batch: None) as b,
    ):
        wait_for(lambda: len(a.owned_queues().get("TopicTest", ())) == 4, WAIT)  # both are members now
        mine = a.wait_for_assignment(WAIT)["TopicTest"] | b.wait_for_assignment(WAIT)["TopicTest"]
        assert mine == TOPIC_QUEUES
        assert a.wait_for_assignment(0)["TopicTest"] == a.owned_queues()["TopicTest"]


def test_a_member_beyond_the_queue_count_is_ready_with_none(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub(topics=("Small:broker-a=1",)).address
    consumers = [PushConsumer(address, "GID_few", topics=["Small"], client_id=cid) for cid in ("a", "b")]
    for consumer in consumers:
        consumer.start()
    try:
        wait_for(lambda: sum(len(c.owned_queues().get("Small", ())) for c in consumers) == 1, WAIT)
        shares = [consumer.wait_for_assignment(WAIT)["Small"] for consumer in consumers]
    finally:
        for consumer in consumers:
            consumer.shutdown()
    assert sorted(len(share) for share in shares) == [0, 1]


def test_pull_consumer_returns_its_queues_the_retry_topic_included(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    with PullConsumer(address, "GID_ready_pull", topics=["TopicTest"]) as consumer:
        owned = consumer.wait_for_assignment(WAIT)
    assert owned["TopicTest"] == TOPIC_QUEUES


def test_asyncio_consumers_return_their_queues(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address

    async def both() -> tuple[frozenset[MessageQueue], frozenset[MessageQueue]]:
        async with AsyncPushConsumer(address, "GID_ready_a", topics=["TopicTest"]) as push:
            pushed = (await push.wait_for_assignment(WAIT))["TopicTest"]
        async with AsyncPullConsumer(address, "GID_ready_b", topics=["TopicTest"]) as pull:
            pulled = (await pull.wait_for_assignment(WAIT))["TopicTest"]
        return pushed, pulled

    assert run(both()) == (TOPIC_QUEUES, TOPIC_QUEUES)


def _refused(consumer: PushConsumer | PullConsumer) -> ConsumerNotReadyError:
    """The error of a wait that runs out once health saw the failure (waited for with a hang bound)."""
    wait_for(lambda: not consumer.healthy, WAIT)
    with pytest.raises(ConsumerNotReadyError) as refused:
        consumer.wait_for_assignment(0.2)
    return refused.value


@pytest.mark.parametrize("wire", ["grpc", "remoting"])
def test_an_unreachable_name_server_is_named(wire: str) -> None:
    address = "grpc://127.0.0.1:1" if wire == "grpc" else "127.0.0.1:1"  # nothing listens on port 1
    consumer = PushConsumer(address, "GID_nowhere", topics=["TopicTest"], request_timeout=2.0)
    consumer.start()
    try:
        error = _refused(consumer)
    finally:
        consumer.shutdown(timeout=2.0)
    assert error.reason == "name server unreachable"
    assert "route of TopicTest" in error.problems
    assert str(error).startswith("PushConsumer of GID_nowhere not ready after 0.2 s: name server unreachable; ")


def test_an_unknown_topic_is_named(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    with PullConsumer(address, "GID_unknown", topics=["TopicTest", "NoSuchTopic"]) as consumer:
        error = _refused(consumer)
    assert error.reason == "topic unknown to the name server: NoSuchTopic"
    assert isinstance(error, TimeoutError)


def test_an_asyncio_consumer_names_the_unknown_topic(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address

    async def refused() -> ConsumerNotReadyError:
        async with AsyncPushConsumer(address, "GID_unknown_a", topics=["NoSuchTopic"]) as consumer:
            while consumer.healthy or not consumer.describe().get("problems"):
                await asyncio.sleep(0.05)  # the test's hang bound is run()'s
            with pytest.raises(ConsumerNotReadyError) as caught:
                await consumer.wait_for_assignment(0.2)
            return caught.value

    assert run(refused()).reason == "topic unknown to the name server: NoSuchTopic"


@pytest.mark.parametrize("call", [lambda c: c.wait_for_assignment(1.0), lambda c: c.wait_for_assignment(-1)])
def test_waiting_on_a_consumer_not_started_or_with_a_bad_timeout_is_refused(
    call: Callable[[PushConsumer], object],
) -> None:
    consumer = PushConsumer("127.0.0.1:1", "GID_idle", topics=["TopicTest"])
    with pytest.raises((RuntimeError, ValueError)):
        call(consumer)


def test_a_broadcasting_consumer_and_an_assigned_one_are_ready_with_their_queues(
    start_stub: StartStub, tmp_path: Path
) -> None:
    """A BROADCASTING consumer reads no member list (every queue is its own), and a pull consumer given its
    queues by ``assign()`` does no rebalance for others: both are ready once they hold what they were given."""
    address = GRPC_SCHEME + start_stub().address
    broadcasting = PushConsumer(
        address,
        "GID_ready_bc",
        topics=["TopicTest"],
        message_model=MessageModel.BROADCASTING,
        offset_file=tmp_path / "offsets.json",
    )
    with broadcasting:
        assert broadcasting.wait_for_assignment(WAIT)["TopicTest"] == TOPIC_QUEUES
    assigned = PullConsumer(address, "GID_ready_assigned")
    assigned.assign([MessageQueue("TopicTest", "broker-b", 2)])
    with assigned:
        assert assigned.wait_for_assignment(WAIT)["TopicTest"] == {MessageQueue("TopicTest", "broker-b", 2)}
