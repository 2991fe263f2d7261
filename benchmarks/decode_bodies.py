"""What a compressed body costs the consumer: decoding a pull answer of 8 KiB bodies, per message, for each of the
compressions a 5.3.3 Java producer uses, beside Java's consumer decoding the same bytes.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/decode_bodies.py [--rounds 15] [--repeats 200]`` (Java 17 and
Maven for the Java column; ``--no-java`` without). Each pull answer holds 32 records as the broker stores them, every
body different and compressible (JSON-like lines, ``rocket_rebalance.lab.stored_vectors.compressible``): stored as
sent (``plain``), compressed as the Java producer compresses them (``ZLIB``, its default; ``LZ4``; ``ZSTD``), and,
for the inner-batch split, one BatchCQ record of 32 messages of 256 B (``batch``). Ours: ``decode_messages`` then
``unwrap_inner_batches``, what a pull answer goes through. Java: ``benchmarks/java/DecodeLoop.java``,
``MessageDecoder.decodesBatch`` and the split of ``PullAPIWrapper.processPullResult``, in one JVM kept running.
A round decodes each answer ``--repeats`` times, the formats in a rotating order; our rounds and Java's alternate,
so both see the same minutes of a shared machine. The first two rounds of each side are warm-up (the JIT) and not
counted; the table has the medians of the rest, and each format's cost against ``plain`` and ``ZLIB`` of the same
side, and against Java.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

from rocket_rebalance.lab.rocketmq import ensure_jars
from rocket_rebalance.lab.stored_vectors import compressible
from rocket_rebalance.remoting.message import (
    SYSFLAG_INNER_BATCH,
    SYSFLAG_NEED_UNWRAP,
    Compression,
    StoredMessage,
    decode_messages,
    encode_message_batch,
    encode_stored_message,
    unwrap_inner_batches,
)

RECORDS = 32
BODY = 8192
WARM_UP = 2
FORMATS = ("plain", "ZLIB", "LZ4", "ZSTD", "batch")


def _answers() -> dict[str, bytes]:
    rng = random.Random(20261128)
    bodies = [compressible(rng, BODY) for _ in range(RECORDS)]

    def record(index: int, body: bytes, compress: Compression | None, sys_flag: int = 0) -> bytes:
        properties = {"UNIQ_KEY": f"7F000001{index:024X}", "TAGS": "TagA", "WAIT": "true"}
        stored = StoredMessage("BodiesTopic", 0, index, index * 9000, body, properties, sys_flag=sys_flag)
        return encode_stored_message(stored, compress)

    answers = {"plain": b"".join(record(i, body, None) for i, body in enumerate(bodies))}
    for compression in Compression:
        answers[compression.name] = b"".join(record(i, body, compression) for i, body in enumerate(bodies))
    inner = [(0, compressible(rng, 256), {"UNIQ_KEY": f"7F000001{i:024X}", "TAGS": "TagA"}) for i in range(RECORDS)]
    answers["batch"] = record(0, encode_message_batch(inner), None, SYSFLAG_INNER_BATCH | SYSFLAG_NEED_UNWRAP)
    return answers


def _ours(answers: dict[str, bytes], repeats: int, order: list[str]) -> dict[str, float]:
    spent: dict[str, float] = {}
    for name in order:
        answer = answers[name]
        began = time.perf_counter()
        count = 0
        for _ in range(repeats):
            count += len(unwrap_inner_batches(decode_messages(answer)))
        spent[name] = (time.perf_counter() - began) * 1e6 / count
    return spent


def _java(answers: dict[str, bytes]) -> subprocess.Popen[str]:
    lib = ensure_jars()
    source = Path(__file__).with_name("java") / "DecodeLoop.java"
    command = ["java", "-Xms256m", "-Xmx512m", "-cp", f"{lib}/*", str(source)]
    java = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert java.stdin is not None
    for name in FORMATS:
        java.stdin.write(f"{name} {base64.b64encode(answers[name]).decode()}\n")
    java.stdin.write("\n")
    java.stdin.flush()
    return java


def _java_round(java: subprocess.Popen[str], repeats: int) -> dict[str, float]:
    assert java.stdin is not None and java.stdout is not None
    java.stdin.write(f"ROUND {repeats}\n")
    java.stdin.flush()
    while True:
        line = java.stdout.readline()
        if not line:
            raise SystemExit("the Java decode loop ended")
        if line.startswith("ROUND "):
            times: dict[str, float] = json.loads(line[6:])
            return times


def _fmt(us: float) -> str:
    return f"{us:.2f}" if us < 10 else f"{us:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--repeats", type=int, default=200, help="decodes of each answer per round")
    parser.add_argument("--no-java", action="store_true", help="ours only")
    args = parser.parse_args()
    answers = _answers()
    java = None if args.no_java else _java(answers)
    ours: dict[str, list[float]] = {name: [] for name in FORMATS}
    theirs: dict[str, list[float]] = {name: [] for name in FORMATS}
    try:
        for index in range(args.rounds + WARM_UP):
            order = list(FORMATS[index % len(FORMATS) :] + FORMATS[: index % len(FORMATS)])
            spent = _ours(answers, args.repeats, order)
            java_spent = {} if java is None else _java_round(java, args.repeats)
            if index >= WARM_UP:
                for name in FORMATS:
                    ours[name].append(spent[name])
                    if java_spent:
                        theirs[name].append(java_spent[name])
            print(f"  round {index}: " + " ".join(f"{n} {_fmt(spent[n])}" for n in FORMATS), flush=True)
    finally:
        if java is not None:
            java.kill()
            java.wait()
    mine = {name: statistics.median(values) for name, values in ours.items()}
    java_median = {name: statistics.median(values) for name, values in theirs.items() if values}
    stored = {name: len(answers[name]) / RECORDS for name in FORMATS}
    print(
        f"\n{date.today()} {platform.machine()} {os.cpu_count()} cores, CPython {platform.python_version()}; "
        f"pull answers of {RECORDS} records of {BODY} B bodies (batch: one record of {RECORDS} x 256 B), "
        f"medians of {args.rounds} rounds x {args.repeats} decodes, after {WARM_UP} warm-up rounds"
    )
    print("| format | stored B/msg | ours us/msg | x plain | x ZLIB | Java us/msg | x plain | ours / Java |")
    print("|---|---|---|---|---|---|---|---|")
    for name in FORMATS:
        java_us = java_median.get(name, float("nan"))
        print(
            f"| {name} | {stored[name]:,.0f} | {_fmt(mine[name])} | {mine[name] / mine['plain']:.2f} | "
            f"{mine[name] / mine['ZLIB']:.2f} | {_fmt(java_us)} | {java_us / java_median.get('plain', java_us):.2f} | "
            f"{mine[name] / java_us:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
