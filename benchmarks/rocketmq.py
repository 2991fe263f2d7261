"""Side by side with Java on a real RocketMQ: how fast a group settles and what it re-delivers, and the codec.

Run: ``.venv/bin/python benchmarks/rocketmq.py [--cycles 5]`` (needs Java 17 and Maven; the jars are fetched once).

Part 1, rebalancing. One real NameServer and two brokers (16 queues), steady traffic (one message per queue every
0.2 s) and 5 ms of work per message. Three groups of four consumers run the same events in turn: all Java
(``DefaultMQPushConsumer``), all ours, and mixed (two and two). Per cycle: a fifth consumer joins, leaves
gracefully, another joins and is killed (SIGKILL); in the mixed group the newcomer alternates between kinds.
Two more groups run the same with orderly consumers (``java-ord``: Java's ``MessageListenerOrderly``;
``py-ord``: ours with ``--orderly``), compared with Java's orderly group.
Both kinds rebalance every 2 s besides the broker's notifications (Java:
``rocketmq.client.rebalance.waitInterval=2000``; ours: ``--rebalance-interval 2``). Printed per group and kind
of event:

* settle p50 / p99: seconds from the event (the newcomer appearing in the brokers' member lists, the SIGTERM
  sent, the SIGKILL done) until every live consumer reports exactly its share of the plan over the live members;
* consuming again p50 / p99: seconds from the event until every queue had a message consumed after it (the
  new owners at work; a killed consumer's broker locks last 60 s on a 5.3.3 broker: Java's orderly consumers wait
  for them, ours release the locks of a member the broker no longer lists (core rule L9), and Java's concurrent
  consumers take no locks);
* re-delivered per event: messages consumed a second time in the event's window (from the consumers' records).

Part 2, the codec: a pull answer of 32 stored messages (64-byte bodies) decoded per second by the remoting codec
against the same messages as the stub's protobuf answer; and one response frame decoded (JSON header) against a
protobuf response.

The baseline of part 1 is the all-Java group of the same run; of part 2, the protobuf path. Compare ratios.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from rocket_rebalance._proto.v1 import broker_pb2
from rocket_rebalance.lab.mixed_group import MixedGroup, new_topic
from rocket_rebalance.lab.rocketmq import RocketMQCluster
from rocket_rebalance.lab.wait import wait_until
from rocket_rebalance.remoting import FrameDecoder, RemotingCommand, ResponseCode, encode, message

WORK_MS = 5


@dataclass
class Tally:
    seconds: dict[str, list[float]] = field(default_factory=dict)
    resumed: dict[str, list[float]] = field(default_factory=dict)
    redelivered: dict[str, list[int]] = field(default_factory=dict)

    def add(self, kind: str, seconds: float, resumed: float, redelivered: int) -> None:
        self.seconds.setdefault(kind, []).append(seconds)
        self.resumed.setdefault(kind, []).append(resumed)
        self.redelivered.setdefault(kind, []).append(redelivered)


def _resumed(group: MixedGroup, began_wall: float) -> float:
    """Seconds from the event until every queue had a message consumed again (its new owner at work)."""

    def every_queue_consumed() -> bool:
        after = {(d["broker"], d["queue"]) for d in group.deliveries() if float(d["t0"]) >= began_wall}
        return len(after) == len(group.queues)

    wait_until(every_queue_consumed, 120, "every queue consumed again", poll=0.1)
    return time.time() - began_wall


def _duplicates(group: MixedGroup) -> int:
    return sum(count - 1 for count in group.counts().values() if count > 1)


def _settle(group: MixedGroup, began: float) -> float:
    wait_until(group.members_known, 90, "member lists", poll=0.05)
    wait_until(group.settled, 90, "the group settles", poll=0.05)
    return time.monotonic() - began


def _start(group: MixedGroup, kind: str, name: str) -> str:
    """``kind``: java, python, or either with ``-orderly`` (Java's orderly listener; our ``--orderly``)."""
    orderly = kind.endswith("-orderly")
    if kind.startswith("java"):
        return group.java(name, orderly=orderly, work_ms=WORK_MS).client_id
    return group.python(name, "--work-ms", str(WORK_MS), *(["--orderly"] if orderly else [])).client_id


def _stop(group: MixedGroup, client_id: str, kill: bool) -> None:
    member = group.java_members.get(client_id) or group.python_members[client_id]
    if kill:
        member.kill()
    else:
        member.stop()


def _joined(group: MixedGroup, client_id: str) -> float:
    """When the brokers first list the newcomer: the join as the group sees it (a JVM's own start-up excluded)."""
    broker = group.cluster.broker_names[0]
    wait_until(lambda: client_id in _members(group, broker), 90, f"{client_id} registered")
    return time.monotonic()


def _members(group: MixedGroup, broker: str) -> list[str]:
    try:
        return group.transport.consumer_list(broker, group.group)
    except OSError:
        return []


def run_group(cluster: RocketMQCluster, work_dir: Path, label: str, kinds: list[str], cycles: int) -> Tally:
    group = MixedGroup(cluster, work_dir / label, f"GID_bench_{label}", new_topic(cluster, f"Bench{label}"))
    tally = Tally()
    try:
        for index, kind in enumerate(kinds):
            _start(group, kind, f"{label}-{index}")
        with group.traffic(0.2):
            _events(group, kinds, cycles, tally)
        wait_until(lambda: not group.missing(), 120, "every message consumed")
    finally:
        group.close()
    return tally


def _events(group: MixedGroup, kinds: list[str], cycles: int, tally: Tally) -> None:
    _settle(group, time.monotonic())
    label = group.group.removeprefix("GID_bench_")
    for cycle in range(cycles):
        kind = kinds[cycle % len(kinds)]
        for event in ("join", "leave", "join+kill"):
            before = _duplicates(group)
            if event == "join":
                joiner = _start(group, kind, f"{label}-j{cycle}")
                began = _joined(group, joiner)
                began_wall = time.time() - (time.monotonic() - began)
            elif event == "leave":
                began, began_wall = time.monotonic(), time.time()
                _stop(group, joiner, kill=False)
            else:
                victim = _start(group, kind, f"{label}-k{cycle}")
                _settle(group, _joined(group, victim))
                _resumed(group, time.time())  # the victim is at work on its queues before it dies
                began, began_wall = time.monotonic(), time.time()
                _stop(group, victim, kill=True)
            seconds = _settle(group, began)
            resumed = _resumed(group, began_wall)
            time.sleep(2.0)  # let re-deliveries of this event arrive before counting them
            tally.add("kill" if event == "join+kill" else event, seconds, resumed, _duplicates(group) - before)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def rebalancing(cycles: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-rocketmq-") as folder:
        with RocketMQCluster(Path(folder) / "cluster", ("broker-a", "broker-b")) as cluster:
            groups = {
                "java": ["java"] * 4,
                "python": ["python"] * 4,
                "mixed": ["java", "python", "python", "java"],
                "java-ord": ["java-orderly"] * 4,
                "py-ord": ["python-orderly"] * 4,
            }
            results = {label: run_group(cluster, Path(folder), label, kinds, cycles) for label, kinds in groups.items()}
    print(f"\nrebalancing on a real RocketMQ 5.3.3: 4 consumers, 16 queues, {cycles} cycles, {WORK_MS} ms work")
    print(
        f"{'group':<8} {'event':<6} {'settle p50':>10} {'p99':>7} {'vs Java':>8} "
        f"{'consuming again p50':>19} {'p99':>7} {'vs Java':>8} {'re-delivered/event':>19}"
    )
    for label, tally in results.items():
        java = results["java-ord" if label.endswith("-ord") else "java"]  # orderly against Java's orderly
        for event, seconds in tally.seconds.items():
            p50, resumed = statistics.median(seconds), statistics.median(tally.resumed[event])
            again = tally.redelivered[event]
            print(
                f"{label:<8} {event:<6} {p50:>9.2f}s {_pct(seconds, 0.99):>6.2f}s "
                f"{p50 / statistics.median(java.seconds[event]):>7.2f}x {resumed:>18.2f}s "
                f"{_pct(tally.resumed[event], 0.99):>6.2f}s {resumed / statistics.median(java.resumed[event]):>7.2f}x "
                f"{sum(again) / len(again):>19.1f}"
            )


def _per_second(work: object, seconds: float = 1.0) -> float:
    assert callable(work)
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        work()
        count += 1
    return count / (time.perf_counter() - start)


def codec() -> None:
    stored = [
        message.StoredMessage(
            topic="TopicTest",
            queue_id=3,
            queue_offset=1000 + i,
            commit_log_offset=4096 * i,
            body=bytes(64),
            properties={"UNIQ_KEY": f"{i:032X}", "TAGS": "t", "WAIT": "true"},
            born_timestamp=1_700_000_000_000,
            store_timestamp=1_700_000_000_001,
        )
        for i in range(32)
    ]
    pull_body = b"".join(message.encode_stored_message(m) for m in stored)
    proto = broker_pb2.PullMessageResponse(
        messages=[
            broker_pb2.MessageExt(
                topic=m.topic,
                broker_name="broker-a",
                queue_id=m.queue_id,
                queue_offset=m.queue_offset,
                msg_id=m.msg_id,
                body=m.body,
                tags="t",
                properties=dict(m.properties),
                born_timestamp_ms=m.born_timestamp,
                store_timestamp_ms=m.store_timestamp,
            )
            for m in stored
        ],
        next_begin_offset=1032,
    ).SerializeToString()
    frame = encode(
        RemotingCommand(ResponseCode.SUCCESS, opaque=7, flag=1, ext={"offset": "12", "queueId": "0"}, body=b"")
    )
    small_proto = broker_pb2.GetMaxOffsetResponse(offset=12).SerializeToString()
    rows = [
        (
            "32 stored messages (pull answer)",
            _per_second(lambda: message.decode_messages(pull_body)),
            _per_second(lambda: broker_pb2.PullMessageResponse.FromString(proto)),
        ),
        (
            "one response frame",
            _per_second(lambda: FrameDecoder().feed(frame)),
            _per_second(lambda: broker_pb2.GetMaxOffsetResponse.FromString(small_proto)),
        ),
    ]
    print("\ncodec: decodes per second, remoting (ours, pure Python) vs the stub's protobuf (C++ upb)")
    print(f"{'what':<34} {'remoting/s':>12} {'protobuf/s':>12} {'ratio':>7}")
    for what, ours, theirs in rows:
        print(f"{what:<34} {ours:>12,.0f} {theirs:>12,.0f} {ours / theirs:>7.3f}")
    print(f"({len(pull_body)} bytes of stored messages, {len(proto)} bytes of protobuf)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=5)
    parser.add_argument("--codec-only", action="store_true")
    args = parser.parse_args()
    codec()
    if not args.codec_only:
        rebalancing(args.cycles)


if __name__ == "__main__":
    main()
