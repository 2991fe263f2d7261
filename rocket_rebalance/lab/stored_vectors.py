"""Record ``tests/golden/stored_message_cases.jsonl``: stored messages as RocketMQ 5.3.3 writes them and its Java
consumer reads them.

Builds cases (seeded, so a re-record gives the same cases): bodies of many sizes and kinds compressed with each of
5.3.3's compressors (LZ4 through lz4-java, ZSTD through zstd-jni, ZLIB), and producer batches stored as a BatchCQ
broker stores them (INNER_BATCH and NEED_UNWRAP, ``INNER_NUM``, ``INNER_BASE``), some of them compressed whole.
``StoredVectors.java`` compresses and lays out each record with 5.3.3's own classes and decodes it as the Java
consumer does a pull answer; each line holds the case (its bodies left out), the record and the messages Java made
of it, field by field (a body of more than 1 KiB as its SHA-256 and size).

Usage: ``python -m rocket_rebalance.lab.stored_vectors [--out tests/golden/stored_message_cases.jsonl]`` (needs
Java 17 and Maven, as the real-RocketMQ tests do).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import random
import subprocess
from pathlib import Path
from typing import Any

from rocket_rebalance.lab.rocketmq import JAVA_DIR, ensure_jars

SEED = 20261128
ROOT = Path(__file__).resolve().parents[2]
COMPRESSIONS = ("LZ4", "ZSTD", "ZLIB")
INNER_BATCH_FLAGS = 0x80 | 0x40


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def compressible(rng: random.Random, size: int) -> bytes:
    """JSON-like lines with varying numbers: what message bodies mostly are, and what compresses."""
    lines: list[bytes] = []
    total = 0
    while total < size:
        line = b'{"order":%d,"customer":"c%05d","amount":%d.%02d,"sku":"sku-%04d","state":"%s"}\n' % (
            rng.randrange(10**9),
            rng.randrange(10**5),
            rng.randrange(500),
            rng.randrange(100),
            rng.randrange(10**4),
            rng.choice([b"NEW", b"PAID", b"SHIPPED", b"RETURNED"]),
        )
        lines.append(line)
        total += len(line)
    return b"".join(lines)[:size]


def _bodies(rng: random.Random) -> list[bytes]:
    return [
        b"x",
        rng.randbytes(5),
        compressible(rng, 100),
        compressible(rng, 4096),
        compressible(rng, 8192),
        rng.randbytes(8192),  # incompressible: the frames hold raw blocks
        bytes(20_000),
        compressible(rng, 140_000),  # past a zstd block (128 KiB)
        "主题 ключ \U0001f600 ".encode() * 300,
    ]


def _record(rng: random.Random, **fields: Any) -> dict[str, Any]:
    v6 = rng.random() < 0.2
    queue_offset = rng.randrange(10**6)
    case: dict[str, Any] = {
        "topic": rng.choice(["TopicTest", "orders", "主题"]),
        "queueId": rng.randrange(16),
        "queueOffset": queue_offset,
        "commitLogOffset": rng.randrange(2**40),
        "bornTimestamp": 1_764_000_000_000 + rng.randrange(10**9),
        "storeTimestamp": 1_764_000_000_000 + rng.randrange(10**9),
        "bornHost": [_b64(rng.randbytes(16) if v6 else bytes([10, 0, 0, rng.randrange(1, 255)])), rng.randrange(65536)],
        "storeHost": [_b64(bytes(15) + b"\x01" if v6 else bytes([127, 0, 0, 1])), 10911],
        "flag": rng.choice([0, 0, 7, -1]),
        "reconsumeTimes": rng.choice([0, 0, 3]),
        "preparedTransactionOffset": 0,
        "sysFlag": rng.choice([0, 0, 0x2]),  # MULTI_TAGS, as a broker of a MULTI_TAG topic sets it
        "properties": {
            "UNIQ_KEY": f"7F000001{rng.randrange(16**24):024X}",
            "WAIT": "true",
            "CLUSTER": "DefaultCluster",
        },
        "compression": None,
    }
    case.update(fields)
    return case


def _inner(rng: random.Random, index: int, body: bytes) -> dict[str, Any]:
    properties = {"UNIQ_KEY": f"7F000001{rng.randrange(16**24):024X}", "WAIT": "true"}
    if rng.random() < 0.5:
        properties["TAGS"] = rng.choice(["TagA", "TagB", "标签"])
    if rng.random() < 0.3:
        properties["KEYS"] = f"key-{index} other-{index}"
    if rng.random() < 0.3:
        properties["color"] = rng.choice(["red", "grün"])
    return {"flag": rng.choice([0, 0, 5]), "body": _b64(body), "properties": properties}


def _batch(rng: random.Random, bodies: list[bytes], compression: str | None, flags: int) -> dict[str, Any]:
    case = _record(rng, sysFlag=flags, compression=compression)
    case["inner"] = [_inner(rng, index, body) for index, body in enumerate(bodies)]
    if flags & 0x80:  # what SendMessageProcessor and BatchConsumeQueue add to an inner batch
        case["properties"]["INNER_NUM"] = str(len(bodies))
        case["properties"]["INNER_BASE"] = str(case["queueOffset"])
    return case


def cases(rng: random.Random) -> list[dict[str, Any]]:
    made: list[dict[str, Any]] = []
    for compression in COMPRESSIONS:
        for index, body in enumerate(_bodies(rng)):
            made.append(
                {"id": f"{compression.lower()}-{index}", **_record(rng, compression=compression, body=_b64(body))}
            )
    made.append({"id": "plain", **_record(rng, body=_b64(compressible(rng, 300)))})
    batches: list[tuple[str, list[bytes], str | None, int]] = [
        ("batch-one", [compressible(rng, 200)], None, INNER_BATCH_FLAGS),
        ("batch-three", [compressible(rng, 50), b"", rng.randbytes(30)], None, INNER_BATCH_FLAGS),
        ("batch-sixteen", [compressible(rng, 1024) for _ in range(16)], None, INNER_BATCH_FLAGS),
        ("batch-8k", [compressible(rng, 8192) for _ in range(4)], None, INNER_BATCH_FLAGS),
        ("batch-not-unwrapped", [b"a", b"b"], None, 0x80),  # INNER_BATCH without NEED_UNWRAP: Java keeps it whole
        ("batch-unwrap-flag-only", [b"a", b"b"], None, 0x40),
    ]
    batches += [
        (f"batch-{compression.lower()}", [compressible(rng, 3000) for _ in range(5)], compression, INNER_BATCH_FLAGS)
        for compression in COMPRESSIONS
    ]
    made += [{"id": name, **_batch(rng, bodies, compression, flags)} for name, bodies, compression, flags in batches]
    return made


def _digested(message: dict[str, Any]) -> dict[str, Any]:
    """A body of more than 1 KiB as its SHA-256 and size, which keeps the file small (the record holds it)."""
    body = base64.b64decode(message["body"] or "")
    if len(body) <= 1024:
        return message
    digest = {"body_sha256": hashlib.sha256(body).hexdigest(), "body_size": len(body)}
    return {**{key: value for key, value in message.items() if key != "body"}, **digest}


def main() -> None:
    """Record the cases (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "golden" / "stored_message_cases.jsonl")
    args = parser.parse_args()
    made = cases(random.Random(SEED))
    lib = ensure_jars()
    done = subprocess.run(
        ["java", "-Xmx256m", "-cp", f"{lib}/*", str(JAVA_DIR / "StoredVectors.java")],
        input="".join(json.dumps({k: v for k, v in case.items() if k != "id"}) + "\n" for case in made),
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=True,
    )
    answers = [json.loads(line[5:]) for line in done.stdout.splitlines() if line.startswith("CASE ")]
    if len(answers) != len(made):
        raise SystemExit(f"Java recorded {len(answers)} of {len(made)} cases: {done.stderr.strip()[-300:]}")
    with args.out.open("w", encoding="utf-8") as out:
        for case, answer in zip(made, answers, strict=True):
            described = {key: value for key, value in case.items() if key not in ("body", "inner")}
            messages = [_digested(message) for message in answer["messages"]]
            line = {"case": described, "record": answer["record"], "messages": messages}
            out.write(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n")
    print(f"{len(made)} cases written to {args.out}")


if __name__ == "__main__":
    main()
