"""A failed batch of a concurrent consumer is sent back to the broker, which puts it in the retry topic or, once a
message was reconsumed ``max_reconsume_times``, in the group's dead-letter queue; the log says which (probe
2026-11-24, finding 22: a dead-lettered message was logged as "sent back to the retry topic")."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocket_rebalance.model import RETRY_TOPIC_PROPERTY, MessageQueue, retry_topic
from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.settings import EngineSettings, ListenerError
from rocket_rebalance.runtime.transport import GRPC_SCHEME, Message
from rocket_rebalance.runtime.transport.grpc import GrpcTransport
from tests.runtime.test_consumer import FAST, produce
from tests.stub.conftest import StartStub


class AcceptsSendBack(GrpcTransport):
    """The stub keeps no retry topic; here the send back is taken, as a broker takes it."""

    def __init__(self, address: str) -> None:
        super().__init__(address)
        self.sent: list[Message] = []
        self.sent_lock = threading.Lock()

    def send_back(self, consumer_group: str, message: Message, max_reconsume_times: int, delay_level: int) -> None:
        with self.sent_lock:
            self.sent.append(message)


@pytest.mark.parametrize(
    ("max_reconsume_times", "said"),
    [(16, "sent back to the retry topic"), (0, "sent to the dead-letter queue %DLQ%GID_dlq after 0 reconsumptions")],
)
def test_the_log_says_where_a_failed_batch_went(start_stub: StartStub, max_reconsume_times: int, said: str) -> None:
    address = GRPC_SCHEME + start_stub().address
    produce(address, 1)
    transport = AcceptsSendBack(address)
    errors: list[Exception] = []
    done = threading.Event()

    def on_error(kind: str, error: Exception) -> None:
        errors.append(error)
        done.set()

    def refuse(batch: list[Message]) -> None:
        raise RuntimeError("not today")

    consumer = PushConsumer(
        address,
        "GID_dlq",
        topics=["TopicTest"],
        listener=refuse,
        client_id="c1",
        transport=transport,
        settings=EngineSettings(max_reconsume_times=max_reconsume_times),
        on_error=on_error,
        **FAST,
    )
    consumer.start()
    try:
        assert done.wait(20)
        listener_errors = [e for e in errors if isinstance(e, ListenerError)]
        assert listener_errors and all(said in str(e) for e in listener_errors), [str(e) for e in errors]
        assert transport.sent
    finally:
        consumer.shutdown(10)


@given(
    topic=st.from_regex(r"[A-Za-z0-9_-]{1,20}", fullmatch=True),
    group=st.from_regex(r"[A-Za-z0-9_-]{1,20}", fullmatch=True),
    original=st.none() | st.from_regex(r"[A-Za-z0-9_-]{1,20}", fullmatch=True),
)
def test_a_retried_message_carries_its_original_topic(topic: str, group: str, original: str | None) -> None:
    """Finding 22: Java's listener sees a retried message under the topic it was sent to (resetRetryAndNamespace);
    the queue it was pulled from, which its offset belongs to, stays the retry topic's."""
    properties = {} if original is None else {RETRY_TOPIC_PROPERTY: original}
    retried = Message(MessageQueue(retry_topic(group), "broker-a", 0), 3, "id", b"", properties=properties)
    assert retried.topic == (original or retry_topic(group)) and retried.mq.topic == retry_topic(group)
    # The property means something only on a retry topic (a message sent with it set keeps its own topic)
    plain = Message(MessageQueue(topic, "broker-a", 0), 3, "id", b"", properties=properties)
    assert plain.topic == topic
