"""Wall time of ``rocket-rebalance allocate-mq`` for a 10,000-queue topic over 1,000 client IDs, per strategy,
and the route-file parser's time per entry as files grow (it must stay flat: parsing is linear).

Run: ``.venv/bin/python benchmarks/preview.py``. Each figure is the median of 5 runs of the real command in a new
process (reading a route file), beside the same-run baseline of the command doing no work (``--help``), so the
start-up of Python and the imports can be told apart from the allocation itself.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BROKERS, QUEUES_PER_BROKER, CONSUMERS = 10, 1_000, 1_000
STRATEGIES = [
    ["--strategy", "AVG"],
    ["--strategy", "AVG_BY_CIRCLE"],
    ["--strategy", "CONSISTENT_HASH"],
    ["--strategy", "CONFIG", "--config-queues", "hz@broker-0:0,hz@broker-1:1"],
    ["--strategy", "MACHINE_ROOM", "--idcs", "hz"],
    ["--strategy", "MACHINE_ROOM_NEARBY", "--inner", "AVG"],
]


def timed(args: list[str], repeat: int = 5) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "rocket_rebalance", *args], check=True, stdout=subprocess.DEVNULL)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def parse_per_entry(entries: int) -> float:
    """Seconds per queue data to parse a pretty-printed route file of ``entries`` brokers (median of 3)."""
    from rocket_rebalance.route import TopicRoute

    text = json.dumps({"queueDatas": [{"brokerName": f"b{i}", "readQueueNums": 0} for i in range(entries)]}, indent=1)
    samples = []
    for _ in range(3):
        start = time.perf_counter()
        TopicRoute.from_json("T", text)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) / entries


def main() -> None:
    baseline = parse_per_entry(1_000)
    print(f"{'route entries':>13} {'per entry':>10} {'vs 1,000 entries':>17}")
    for entries in (1_000, 10_000, 100_000):
        per_entry = baseline if entries == 1_000 else parse_per_entry(entries)
        print(f"{entries:>13,} {per_entry * 1e6:>7.1f} us {per_entry / baseline:>16.2f}x")
    print()
    with tempfile.TemporaryDirectory() as folder:
        route = Path(folder) / "route.json"
        rooms = ("hz", "sh")
        datas = [
            {"brokerName": f"{rooms[b % 2]}@broker-{b}", "readQueueNums": QUEUES_PER_BROKER} for b in range(BROKERS)
        ]
        route.write_text(json.dumps({"queueDatas": datas}), encoding="utf-8")
        ids = ",".join(f"{rooms[i % 2]}@10.0.{i // 250}.{i % 250}@{4000 + i}" for i in range(CONSUMERS))
        base = ["allocate-mq", "-t", "BenchTopic", "-i", ids, "--route", str(route)]
        startup = timed(["--help"])
        print(f"{'strategy':<22} {'queues x IDs':>16} {'wall (median of 5)':>19} {'minus start-up':>15}")
        print(f"{'(start-up: --help)':<22} {'-':>16} {startup * 1e3:>16.0f} ms {'-':>15}")
        for options in STRATEGIES:
            wall = timed(base + options)
            print(
                f"{options[1]:<22} {f'{BROKERS * QUEUES_PER_BROKER:,} x {CONSUMERS:,}':>16} "
                f"{wall * 1e3:>16.0f} ms {(wall - startup) * 1e3:>12.0f} ms"
            )


if __name__ == "__main__":
    main()
