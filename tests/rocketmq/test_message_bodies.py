"""What a Java producer sends, read on a real RocketMQ 5.3.3 by two of our consumers and a Java consumer in one group:
8 KiB bodies compressed with each of its compressions (zlib by default, LZ4, ZSTD, and its
``compressMsgBodyOverHowmuch`` lowered), a batch, and batches to a BatchCQ topic, which the broker stores as one
record each (INNER_BATCH + NEED_UNWRAP) and the consumers split. Every message is consumed exactly once across the
three members, with its body equal byte for byte (by SHA-256) to what was sent; the Java consumer is the positive
control, and every member's committed offsets reach the end of each queue."""

from __future__ import annotations

import hashlib
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from rocket_rebalance.lab.rocketmq import JavaPeer, RocketMQCluster, java_produce, mqadmin
from rocket_rebalance.lab.wait import wait_until
from rocket_rebalance.model import ConsumeFromWhere
from rocket_rebalance.remoting import message as codec
from rocket_rebalance.runtime.consumer import PushConsumer
from rocket_rebalance.runtime.transport import Message, pulled

pytestmark = pytest.mark.rocketmq

QUEUES = 4
FAST: dict[str, Any] = {
    "rebalance_interval": 1.0,
    "persist_interval": 0.2,
    "heartbeat_interval": 1.0,
    "consume_from_where": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
}
KINDS = {"LZ4": 1, "ZSTD": 2, "ZLIB": 3}


class Consumed:
    """What our consumers consumed, and the sys flag of each stored record our codec decoded, by body digest."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.stored_flags: dict[str, int] = {}
        self._lock = threading.Lock()

    def listener(self, client: str) -> Any:
        def consume(batch: list[Message]) -> None:
            seen = [
                {
                    "client": client,
                    "sha256": hashlib.sha256(m.body).hexdigest(),
                    "size": len(m.body),
                    "msgId": m.msg_id,
                    "queue": m.mq.queue_id,
                    "offset": m.queue_offset,
                }
                for m in batch
            ]
            with self._lock:
                self.messages += seen

        return consume

    def spy(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Keep each decoded record's sys flag (the kind of compression stays set once a body is inflated; the
        batch flags stay on inner messages), as the pull answers pass through the codec: all of them, so without
        the compiled decoder, which reads plain records straight into messages that carry no sys flag (the two are
        held to the same messages by tests/runtime/test_pulled.py)."""
        monkeypatch.setattr(pulled, "compiled", None)
        unwrap = codec.unwrap_inner_batches

        def unwrapping(messages: Sequence[codec.StoredMessage]) -> Sequence[codec.StoredMessage]:
            split = unwrap(messages)
            with self._lock:
                self.stored_flags.update((hashlib.sha256(m.body).hexdigest(), m.sys_flag) for m in split)
            return split

        monkeypatch.setattr(codec, "unwrap_inner_batches", unwrapping)

    def all(self, peer: JavaPeer) -> list[dict[str, Any]]:
        with self._lock:
            ours = list(self.messages)
        return ours + peer.consumed()


@pytest.fixture
def group_of_three(rocketmq: RocketMQCluster, tmp_path: Path) -> Iterator[Any]:
    """Start two of our consumers and a Java consumer of ``topic`` in ``group`` and wait until they share its
    queues on broker-a; yields the function that does so (it returns the members), and stops them afterwards."""
    started: list[Any] = []

    def start(group: str, topic: str, consumed: Consumed) -> tuple[list[PushConsumer], JavaPeer]:
        assert rocketmq.lib is not None
        consumers = [
            PushConsumer(
                rocketmq.namesrv_address,
                group,
                topics=[topic],
                listener=consumed.listener(f"py-{index}"),
                client_id=f"127.0.0.1@py-{index}",
                **FAST,
            )
            for index in range(2)
        ]
        peer = JavaPeer(rocketmq.lib, tmp_path, rocketmq.namesrv_address, group, "java-1", [topic])
        started.extend([*consumers, peer])
        for consumer in consumers:
            consumer.start()
        assert peer.started.wait(60), "the Java consumer did not start"
        every = frozenset(("broker-a", queue) for queue in range(QUEUES))

        def settled() -> bool:
            owned = [frozenset((q.broker_name, q.queue_id) for q in c.owned_queues().get(topic, ())) for c in consumers]
            owned.append(peer.owned(topic))
            return all(owned) and sum(len(o) for o in owned) == QUEUES and frozenset().union(*owned) == every

        wait_until(settled, 90, "the three members share the queues")
        return consumers, peer

    yield start
    for member in started:
        if isinstance(member, PushConsumer):
            member.shutdown()
        else:
            member.stop()


def consumed_exactly_once(
    rocketmq: RocketMQCluster,
    group: str,
    topic: str,
    sent: list[dict[str, Any]],
    consumed: Consumed,
    members: tuple[list[PushConsumer], JavaPeer],
) -> list[dict[str, Any]]:
    """Wait until every message sent was consumed; check each exactly once with the body sent, and that the
    group's offsets reached the end of every queue, our consumers healthy. Returns what was consumed."""
    consumers, peer = members
    wanted = {s["sha256"] for s in sent}
    assert len(wanted) == len(sent), "every body sent is different"
    wait_until(lambda: {m["sha256"] for m in consumed.all(peer)} >= wanted, 120, "every message consumed")
    seen = consumed.all(peer)
    assert Counter(m["sha256"] for m in seen) == Counter(wanted), "each exactly once, nothing else"
    by_digest = {s["sha256"]: s for s in sent}
    assert all(m["size"] == by_digest[m["sha256"]]["size"] for m in seen)
    places = [(m["queue"], m["offset"]) for m in seen]
    assert len(set(places)) == len(places), "one message per queue offset"
    clients = Counter(m["client"] for m in seen)
    assert clients["127.0.0.1@java-1"] and clients["py-0"] and clients["py-1"], clients

    def caught_up() -> bool:
        transport = rocketmq.transport()
        try:
            rows = transport.consumer_progress(group, topic, owners=False)
        finally:
            transport.close()
        mine = [row for row in rows if row.mq.broker_name == "broker-a"]
        return len(mine) == QUEUES and all(row.consumer_offset == row.broker_offset for row in mine)

    wait_until(caught_up, 60, "the group's offsets at the end of every queue")
    assert all(c.healthy for c in consumers), [c.describe().get("problems") for c in consumers]
    return seen


def test_bodies_of_every_compression_are_read_as_java_reads_them(
    rocketmq: RocketMQCluster, tmp_path: Path, group_of_three: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic, group = "BodiesCompressed", "GID_bodies_compressed"
    rocketmq.create_topic(topic, QUEUES, ["broker-a"])
    consumed = Consumed()
    consumed.spy(monkeypatch)
    members = group_of_three(group, topic, consumed)
    peer = members[1]
    assert rocketmq.lib is not None
    sent = java_produce(
        rocketmq.lib,
        tmp_path / "producer",
        rocketmq.namesrv_address,
        topic,
        [
            "mode=single,count=20,size=8192",  # the producer's defaults: zlib over 4 KiB
            "mode=single,compress=LZ4,count=20,size=8192",
            "mode=single,compress=ZSTD,count=20,size=8192",
            "mode=single,compress=LZ4,count=8,size=2048,over=1024",  # compressMsgBodyOverHowmuch lowered
            "mode=single,compress=ZSTD,count=8,size=2048",  # under the default 4 KiB: sent as it is
            "mode=batch,compress=ZSTD,count=16,size=8192",  # a batch: never compressed
        ],
    )
    seen = consumed_exactly_once(rocketmq, group, topic, sent, consumed, members)

    def expected_kind(s: dict[str, Any]) -> int:
        return KINDS[s["compress"]] if s["mode"] == "single" and s["size"] >= s["over"] else 0

    by_digest = {s["sha256"]: s for s in sent}
    flags = {m["sha256"]: m["sysFlag"] for m in peer.consumed()} | consumed.stored_flags
    kinds = {digest: flags[digest] >> 8 & 7 for digest in by_digest}
    assert kinds == {digest: expected_kind(s) for digest, s in by_digest.items()}
    java_kinds = {kinds[m["sha256"]] for m in peer.consumed()}
    assert java_kinds >= {1, 2, 3}, "the Java consumer read every compression too"
    for m in seen:
        s = by_digest[m["sha256"]]
        if s["mode"] == "single":
            assert m["msgId"] == s["msgId"]
    # The broker appends a batch's properties (its own UNIQ_KEY among them) after each message's, and the later
    # UNIQ_KEY wins in both languages: every message of the batch has the batch's ID, in Java as here.
    batch_ids = {m["msgId"] for m in seen if by_digest[m["sha256"]]["mode"] == "batch"}
    assert len(batch_ids) == 1 and batch_ids.isdisjoint(s["msgId"] for s in sent)


def test_batches_to_a_batch_cq_topic_are_split_as_java_splits_them(
    rocketmq: RocketMQCluster, tmp_path: Path, group_of_three: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A topic with ``queue.type=BatchCQ`` (created as an operator does, with mqadmin; 5.3.3 needs nothing else on
    one machine): a producer's batch with a UNIQ_KEY of its own (every batch of 5.3.3's producer) is stored as one
    record numbered as many queue offsets as it holds messages."""
    topic, group = "BodiesBatchCQ", "GID_bodies_batch_cq"
    assert rocketmq.lib is not None
    broker = rocketmq.brokers["broker-a"].address
    mqadmin(
        rocketmq.lib,
        tmp_path / "admin",
        *("updateTopic", "-n", rocketmq.namesrv_address, "-b", broker, "-t", topic),
        *("-r", str(QUEUES), "-w", str(QUEUES), "-a", "+queue.type=BatchCQ"),
    )
    consumed = Consumed()
    consumed.spy(monkeypatch)
    members = group_of_three(group, topic, consumed)
    peer = members[1]
    sent = java_produce(
        rocketmq.lib,
        tmp_path / "producer",
        rocketmq.namesrv_address,
        topic,
        [
            # send(Collection): a batch to each queue, so the Java consumer has some whichever queue it holds
            *[f"mode=batch,count=16,size=1024,queue={queue}" for queue in range(QUEUES)],
            "mode=batch,count=6,size=8192",
            "mode=auto,count=64,size=512",  # setAutoBatch(true): the accumulator's batches
            "mode=single,compress=LZ4,count=4,size=8192",  # a plain message to a BatchCQ topic, compressed
        ],
    )
    seen = consumed_exactly_once(rocketmq, group, topic, sent, consumed, members)
    by_digest = {s["sha256"]: s for s in sent}
    assert all(m["msgId"] == by_digest[m["sha256"]]["msgId"] for m in seen), "each inner message its own ID"
    flags = {m["sha256"]: m["sysFlag"] for m in peer.consumed()} | consumed.stored_flags
    inner = {digest for digest, flag in flags.items() if flag & 0xC0 == 0xC0}
    batched = {digest for digest, s in by_digest.items() if s["mode"] != "single"}
    assert batched and inner == batched, "every batch came as an inner batch, the accumulator's too"
    assert {m["sha256"] for m in peer.consumed()} & inner, "the Java consumer split inner batches too"
    assert all(flags[digest] >> 8 & 7 == 1 for digest, s in by_digest.items() if s["mode"] == "single")
    per_queue: dict[int, list[int]] = {}
    for m in seen:
        per_queue.setdefault(m["queue"], []).append(m["offset"])
    assert all(sorted(offsets) == list(range(len(offsets))) for offsets in per_queue.values()), per_queue
