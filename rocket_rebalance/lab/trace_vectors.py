"""Record ``tests/golden/trace_cases.jsonl``: message trace records as the real Java client encodes them.

Draws SubBefore and SubAfter trace contexts (seeded, so a re-record gives the same cases): one or several messages,
keys absent (Java writes ``null``), empty, one or several space-separated (repeats too), unicode and characters
beyond U+FFFF in keys and groups, failed and successful calls with every context code, and has
``TraceVectors.java`` run rocketmq-client's ``TraceDataEncoder.encoderFromContextBean`` on each (jars from Maven
Central via ``ensure_jars``). Writes one JSON object a line: the context and Java's ``transData`` and ``transKey``.

Usage: ``python -m rocket_rebalance.lab.trace_vectors [--cases 120] [--out tests/golden/trace_cases.jsonl]``
(needs Java 17 and Maven, as the real-RocketMQ tests do).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
from pathlib import Path

from rocket_rebalance.lab.rocketmq import JAVA_DIR, ensure_jars

SEED = 20261128
ROOT = Path(__file__).resolve().parents[2]
WORDS = ["order-1", "k", "订单", "clé", "\U0001f600x", "a_b", "0", "Key With"]


def _msg_id(rng: random.Random) -> str:
    return "".join(rng.choice("0123456789ABCDEF") for _ in range(32))


def _keys(rng: random.Random) -> str | None:
    roll = rng.random()
    if roll < 0.25:
        return None
    if roll < 0.35:
        return ""
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))


def _case(rng: random.Random, index: int) -> dict[str, object]:
    beans = [
        {"msgId": _msg_id(rng), "keys": _keys(rng), "retryTimes": rng.choice([0, 0, 1, 3, 16]), "topic": "Orders"}
        for _ in range(rng.choice([1, 1, 2, 5]))
    ]
    return {
        "type": "SubBefore" if index % 2 == 0 else "SubAfter",
        "timestamp": 1764300000000 + rng.randint(0, 10**9),
        "region": rng.choice(["DefaultRegion", "cn-hangzhou"]),
        "group": rng.choice(["orders", "消费组", "G_\U0001f600"]),
        "requestId": _msg_id(rng),
        "costTime": rng.choice([0, 1, 17, 250000]),
        "success": rng.random() < 0.7,
        "contextCode": rng.randint(0, 4),
        "beans": beans,
    }


def main() -> None:
    """Record the cases (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=120)
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "golden" / "trace_cases.jsonl")
    args = parser.parse_args()
    rng = random.Random(SEED)
    cases = [_case(rng, index) for index in range(args.cases)]
    lib = ensure_jars()
    done = subprocess.run(
        ["java", "-Xmx128m", "-cp", f"{lib}/*", str(JAVA_DIR / "TraceVectors.java")],
        input="".join(json.dumps(case, ensure_ascii=False) + "\n" for case in cases).encode("utf-8"),
        capture_output=True,
        check=True,
    )
    records = [line[4:] for line in done.stdout.decode("utf-8").splitlines() if line.startswith("REC ")]
    if len(records) != len(cases):
        raise SystemExit(f"Java encoded {len(records)} of {len(cases)} cases: {done.stderr.decode()[-300:]}")
    with args.out.open("w", encoding="utf-8") as out:
        for case, encoded in zip(cases, records, strict=True):
            out.write(json.dumps({**case, **json.loads(encoded)}, ensure_ascii=False, sort_keys=True) + "\n")
    print(f"{len(cases)} cases written to {args.out}")


if __name__ == "__main__":
    main()
