"""PushConsumer's lifecycle at its edges (probe 2026-11-24 section 21): ``shutdown()`` from inside the listener,
a listener that never returns, and reading the consumer after it was shut down."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.transport import GRPC_SCHEME, Message
from tests.runtime.test_consumer import FAST, produce, wait_for
from tests.stub.conftest import StartStub


def test_shutdown_from_the_listener_returns_at_once_and_the_shutdown_completes_cleanly(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    produce(address, 2)
    answers: list[bool] = []
    first = threading.Lock()  # batches run side by side: only the first of them asks
    consumer: PushConsumer

    def listener(batch: list[Message]) -> None:
        if first.acquire(blocking=False):
            # a long timeout: waiting on itself would hold this batch, and so the shutdown, for all of it
            answers.append(consumer.shutdown(timeout=600))

    consumer = PushConsumer(address, "GID_self_stop", topics=["TopicTest"], listener=listener, client_id="a", **FAST)
    consumer.start()
    wait_for(lambda: bool(answers))
    assert answers == [False]  # not known to be clean yet: the batch that asked is still running
    assert consumer.shutdown() is True  # another thread waits for that same shutdown, which ends cleanly
    assert consumer.owned_queues() == {"TopicTest": frozenset(), "%RETRY%GID_self_stop": frozenset()}


def test_describe_and_owned_queues_after_shutdown_give_the_final_state(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    consumer = PushConsumer(address, "GID_after", topics=["TopicTest"], listener=lambda batch: None, **FAST)
    consumer.start()
    wait_for(lambda: len(consumer.owned_queues().get("TopicTest", ())) == 8)
    assert consumer.shutdown() is True
    state = consumer.describe()
    assert "service_thread" not in state, state  # answered, not "not answering within 5 s"
    assert state["queues"] == {} and state["shut_down"] is True, state
    assert consumer.owned_queues() == {"TopicTest": frozenset(), "%RETRY%GID_after": frozenset()}


BLOCKED = textwrap.dedent(
    """
    import sys, threading
    from rocket_rebalance.runtime.consumer import PushConsumer
    from rocket_rebalance.model import ConsumeFromWhere

    entered = threading.Event()

    def listener(batch):
        entered.set()
        threading.Event().wait()  # never returns

    consumer = PushConsumer(
        sys.argv[1], "GID_blocked", topics=["TopicTest"], listener=listener, client_id="b",
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.start()
    entered.wait()
    print(consumer.shutdown(timeout=1), flush=True)
    """
)


def test_a_listener_that_never_returns_does_not_keep_the_process_alive_after_shutdown(
    start_stub: StartStub,
) -> None:
    address = GRPC_SCHEME + start_stub().address
    produce(address, 1)
    # the timeout only keeps a hang from holding the suite: the process must end once shutdown() returned
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED, address], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"  # the blocked batch could not be drained within the timeout


def test_shutdown_from_the_queue_listener_does_not_wait_on_the_service_thread(start_stub: StartStub) -> None:
    address = GRPC_SCHEME + start_stub().address
    answers: list[bool] = []
    asked = threading.Event()
    consumer: PushConsumer

    def queues_changed(topic: str, mq_all: object, mine: object) -> None:
        if topic == "TopicTest" and not asked.is_set():
            asked.set()
            answers.append(consumer.shutdown(timeout=600))

    consumer = PushConsumer(
        address, "GID_ql", topics=["TopicTest"], queue_listener=queues_changed, client_id="q", **FAST
    )
    consumer.start()
    wait_for(lambda: bool(answers))
    assert answers == [False]
    assert consumer.shutdown() is True
