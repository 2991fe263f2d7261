"""How fast and how cleanly a live group rebalances: 8 consumer processes, 64 queues, real gRPC, steady traffic.

Run: ``.venv/bin/python benchmarks/rebalance.py [--cycles 20]``. For each mode (fenced handover on, and off as in
Java) it runs ``cycles`` joins (a ninth consumer), graceful leaves (it stops again) and kills (a ninth consumer is
started, then an original one is SIGKILLed), with a producer sending all along. It prints, per kind of event:

* convergence: seconds from the event (a newcomer about to register, the SIGTERM sent, the SIGKILL done)
  until every live consumer reports exactly its share of the plan over the live members (p50 / p99);
* allocation overlap, queue-seconds: summed over the settling window, queues that two live consumers' latest
  allocations both contained (with the fence on, the lock keeps the newcomer from consuming those meanwhile);
* re-delivered: messages consumed more than once, counted from the consumers' own records.

After each event the group rests ``REST`` seconds, longer than a retry round plus the 1 s minimum between
rounds, so each figure is one event's convergence rather than a queue of back-to-back rounds. The traffic is
sent over one in-process connection (a producer process per batch would take a core of this 2-core machine).
Figures are from this machine in this run; compare the two modes side by side (same run, same load).
"""

from __future__ import annotations

import argparse
import signal
import statistics
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rocket_rebalance.lab.stub_cluster import ConsumerProcess, LocalCluster
from rocket_rebalance.lab.wait import wait_until
from rocket_rebalance.runtime.transport.grpc import GrpcTransport

CONSUMERS = 8
REST = 2.5  # longer than an unbalanced retry round (1 s) plus the minimum gap between rounds (1 s)
BROKERS = (("broker-a", 16), ("broker-b", 16), ("broker-c", 16), ("broker-d", 16))


@dataclass
class Tally:
    seconds: list[float] = field(default_factory=list)
    double_owned: float = 0.0
    redelivered: int = 0
    duplicates_before: int = 0


def mark(tally: Tally, duplicates: int) -> None:
    """Remember the duplicate count before an event, so the event is charged only with what it caused."""
    tally.duplicates_before = duplicates


def settle(cluster: LocalCluster, tally: Tally, began: float, gone: ConsumerProcess | None = None) -> None:
    """Wait until ``gone`` (a leaver) has exited and every live consumer reports its share of the plan; charge
    the seconds since ``began`` (wall clock, as the consumers stamp their lines) and the overlap on the way."""
    poll, timeout = 0.01, 60.0
    while time.time() - began < timeout:
        owners = Counter(q for queues in cluster.ownership().values() for q in queues)
        tally.double_owned += poll * sum(1 for count in owners.values() if count > 1)
        if (gone is None or not gone.alive) and cluster.balanced():
            tally.seconds.append(time.time() - began)
            return
        time.sleep(poll)
    raise TimeoutError(f"the group did not settle within {timeout} s")


def started_at(consumer: ConsumerProcess) -> float | None:
    """When the consumer process was about to register (its own ``starting`` line), or None before that."""
    return next((e["at"] for e in list(consumer.events) if e.get("event") == "starting"), None)


def event(cluster: LocalCluster, tally: Tally, began: float, gone: ConsumerProcess | None = None) -> None:
    """Settle after an event that began at ``began``, rest, and charge the window's re-deliveries to it."""
    settle(cluster, tally, began, gone)
    time.sleep(REST)  # the next owner reaches re-delivered messages first: they show up within this rest
    tally.redelivered += cluster.delivery().duplicates - tally.duplicates_before
    tally.duplicates_before = 0


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def run_mode(work_dir: Path, fenced: bool, cycles: int) -> dict[str, Tally | int]:
    extra = [] if fenced else ["--no-fence"]
    args = ["--rebalance-interval", "20", "--persist-interval", "0.5", "--work-ms", "2", *extra]
    tally = {"join": Tally(), "leave": Tally(), "kill": Tally()}
    results: dict[str, Tally | int] = dict(tally)
    with LocalCluster(work_dir, brokers=BROKERS, group="GID_bench", consumer_args=args) as cluster:
        for index in range(CONSUMERS):
            cluster.start_consumer(f"c{index:02d}")
        wait_until(cluster.balanced, timeout=60)
        stop = threading.Event()

        def produce() -> None:
            """64 messages every 200 ms over one in-process connection (a process per batch would eat a core)."""
            transport = GrpcTransport(cluster.address)
            targets = [(mq.broker_name, mq.queue_id) for mq in cluster.queues]
            sent = 0
            try:
                while not stop.wait(0.2):
                    for _ in range(64):
                        broker, queue_id = targets[sent % len(targets)]
                        transport.send(cluster.topic, broker, [b"x" * 64], queue_id)
                        sent += 1
            finally:
                transport.close()

        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        time.sleep(REST)
        try:
            for cycle in range(cycles):
                duplicates = cluster.delivery().duplicates
                joiner = cluster.start_consumer(f"j{cycle:02d}")
                wait_until(lambda j=joiner: started_at(j) is not None)  # type: ignore[misc]
                began = started_at(joiner)
                assert began is not None
                mark(tally["join"], duplicates)
                event(cluster, tally["join"], began)
                mark(tally["leave"], cluster.delivery().duplicates)
                began = time.time()
                joiner.process.send_signal(signal.SIGTERM)
                event(cluster, tally["leave"], began, gone=joiner)
                cluster.start_consumer(f"r{cycle:02d}")
                wait_until(cluster.balanced, timeout=60)
                time.sleep(REST)
                victim = next(c for c in cluster.live() if c.client_id != f"r{cycle:02d}")
                mark(tally["kill"], cluster.delivery().duplicates)
                began = time.time()
                victim.kill()
                event(cluster, tally["kill"], began, gone=victim)
        finally:
            stop.set()
            producer.join()
        wait_until(cluster.caught_up, timeout=120)
        delivery = cluster.delivery()
        results["redelivered"] = delivery.duplicates
        results["missing"] = delivery.missing(cluster.max_offsets())
        results["consumed"] = sum(delivery.counts.values())
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cycles", type=int, default=20, help="joins, leaves and kills per mode")
    args = parser.parse_args()
    print(f"{CONSUMERS} consumers, {sum(n for _, n in BROKERS)} queues, {args.cycles} cycles per mode")
    print(f"{'mode':<10} {'event':<6} {'p50 s':>7} {'p99 s':>7} {'max s':>7} {'overlap q*s':>12} {'re-delivered':>13}")
    summary = []
    for fenced in (True, False):
        with tempfile.TemporaryDirectory(prefix="rr-bench-") as folder:
            results = run_mode(Path(folder), fenced, args.cycles)
        mode = "fence on" if fenced else "fence off"
        for kind in ("join", "leave", "kill"):
            tally = results[kind]
            assert isinstance(tally, Tally)
            p50, p99 = statistics.median(tally.seconds), percentile(tally.seconds, 0.99)
            times = f"{p50:>7.3f} {p99:>7.3f} {max(tally.seconds):>7.3f}"
            print(f"{mode:<10} {kind:<6} {times} {tally.double_owned:>12.2f} {tally.redelivered:>13}")
        counts = f"consumed {results['consumed']}, re-delivered {results['redelivered']}, missing {results['missing']}"
        summary.append(f"{mode}: {counts}")
    print("\n".join(summary))


if __name__ == "__main__":
    main()
