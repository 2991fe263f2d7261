"""Record ``tests/golden/acl_signature_cases.jsonl``: request signatures computed by the real Java client.

Draws requests (seeded, so a re-record gives the same cases) with varied header fields (unicode keys and values,
characters beyond U+FFFF whose UTF-16 order differs from code-point order, empty values, a stale ``Signature`` or
``AccessKey`` among the fields) and bodies (empty, text, binary), has ``AclVectors.java`` sign each with
rocketmq-client's ``AclClientRPCHook`` (jars from Maven Central via ``ensure_jars``), and writes one JSON object a
line: the credentials, the fields, the Base64 body and Java's signature.

Usage: ``python -m rocket_rebalance.lab.acl_vectors [--cases 300] [--out tests/golden/acl_signature_cases.jsonl]``
(needs Java 17 and Maven, as the real-RocketMQ tests do).
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import subprocess
from pathlib import Path

from rocket_rebalance.lab.rocketmq import JAVA_DIR, ensure_jars

SEED = 20261124
ROOT = Path(__file__).resolve().parents[2]
ALPHABETS = [
    "abcdefghijklmnopqrstuvwxyz",
    "ABCXYZ0123456789_-%|:;,.",
    "éüßøñ中文字段",
    "\ue000\uffef\U0001f600\U00010437\U0002070e",  # above the surrogates and beyond the BMP: UTF-16 order matters
    " \t=",
]
COMMON_KEYS = ["topic", "consumerGroup", "queueId", "Signature", "AccessKey", "SecurityToken", "bname", "lo"]


def _text(rng: random.Random, most: int) -> str:
    alphabet = "".join(rng.sample(ALPHABETS, rng.randint(1, len(ALPHABETS))))
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, most)))


def _case(rng: random.Random, index: int) -> dict[str, object]:
    fields: dict[str, str] = {}
    for _ in range(rng.randint(0, 8)):
        key = rng.choice(COMMON_KEYS) if rng.random() < 0.3 else _text(rng, 12) or "k"
        fields[key] = "" if rng.random() < 0.2 else _text(rng, 40)
    kind = index % 4
    body = b"" if kind == 0 else _text(rng, 80).encode() if kind == 1 else rng.randbytes(rng.randint(1, 300))
    if kind == 3:
        body = b"\x00\xff" + body
    token = (_text(rng, 30) or "t") if rng.random() < 0.3 else None
    return {
        "access_key": _text(rng, 20).strip() or "ak",
        "secret_key": _text(rng, 40).strip() or "sk",
        "security_token": token,
        "fields": fields,
        "body_b64": base64.b64encode(body).decode(),
    }


def _line(case: dict[str, object]) -> str:
    def b64(text: str) -> str:
        return base64.b64encode(text.encode("utf-8")).decode()

    fields = case["fields"]
    assert isinstance(fields, dict)
    token = case["security_token"]
    parts = [b64(str(case["access_key"])), b64(str(case["secret_key"])), "-" if token is None else b64(str(token))]
    parts.append(str(case["body_b64"]))
    parts += [f"{b64(key)}:{b64(value)}" for key, value in fields.items()]
    return "\t".join(parts)


def main() -> None:
    """Record the cases (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "golden" / "acl_signature_cases.jsonl")
    args = parser.parse_args()
    rng = random.Random(SEED)
    cases = [_case(rng, index) for index in range(args.cases)]
    lib = ensure_jars()
    done = subprocess.run(
        ["java", "-cp", f"{lib}/*", str(JAVA_DIR / "AclVectors.java")],
        input="".join(_line(case) + "\n" for case in cases),
        capture_output=True,
        text=True,
        check=True,
    )
    signatures = [line[4:] for line in done.stdout.splitlines() if line.startswith("SIG ")]
    if len(signatures) != len(cases):
        raise SystemExit(f"Java signed {len(signatures)} of {len(cases)} cases: {done.stderr.strip()[-300:]}")
    with args.out.open("w", encoding="utf-8") as out:
        for case, signed in zip(cases, signatures, strict=True):
            out.write(json.dumps({**case, "signature": signed}, ensure_ascii=False, sort_keys=True) + "\n")
    print(f"{len(cases)} cases written to {args.out}")


if __name__ == "__main__":
    main()
