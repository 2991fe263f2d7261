"""Record the golden subscription cases from the real Java classes: ``python -m
rocket_rebalance.lab.golden_subscriptions [OUT]`` (default ``tests/golden/subscription_cases.jsonl``).

The expressions are drawn deterministically (fixed seed) from edge-case pieces: spaces and control characters Java's
``trim`` strips, empty parts, ``||`` at the ends, ``*``, the empty string, unicode (supplementary characters count
two UTF-16 units in ``String.hashCode``) and tags whose hash codes collide (``Aa``/``BB``). Each is handed to
``RecordSubscriptions.java``, which runs RocketMQ's own ``FilterAPI`` from the Maven jars (:func:`ensure_jars`).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from rocket_rebalance.lab.rocketmq import JAVA_DIR, ensure_jars

__all__ = ["expressions", "record"]

DEFAULT_OUT = Path("tests/golden/subscription_cases.jsonl")
_SEED = 20261124
_PIECES = (
    "TagA", "TagB", "TagC", " TagA", "TagA ", "\tTagB\n", "Aa", "BB", "AaAa", "BBBB", "AaBB", "BBAa", "*", " * ",
    "", " ", "\u00a0TagA", "\x00", "タグ", "标签", "😀", "𝄞x", "a|b", "|", "a b", "tag-1", "TAGA", "taga",
)  # fmt: skip
_SEPARATORS = ("||", " || ", "|| ", "|||", "||||", " ||  ||")
_FIXED = (
    ("*", None), ("", None), (" ", None), ("||", None), ("||||", None), ("|| ||", None), ("TagA", None),
    ("TagA||", None), ("||TagA", None), ("||TagA||", None), ("TagA||TagA", None), ("Aa||BB", None),
    ("AaAa||BBBB||AaBB||BBAa", None), ("*||TagA", None), (" * ", None), ("TagA", "TAG"), ("*", "TAG"),
    ("", "TAG"), ("||", "TAG"), ("a > 5", "SQL92"), ("TAGS in ('A','B')", "SQL92"), ("", "SQL92"),
    (" ", "SQL92"), ("*", "SQL92"), ("a||b", "SQL92"), ("color = 'red' AND size > 10", "SQL92"),
)  # fmt: skip


def expressions(count: int = 300) -> list[tuple[str, str | None]]:
    """The fixed cases, then random joins of pieces until ``count`` distinct (expression, type) pairs."""
    chosen = dict.fromkeys(_FIXED)
    rng = random.Random(_SEED)
    while len(chosen) < count:
        parts = [rng.choice(_PIECES) for _ in range(rng.randint(1, 5))]
        text = rng.choice(_SEPARATORS).join(parts)
        if rng.random() < 0.2:
            text = rng.choice(("||", " ", "|| ")) + text
        if rng.random() < 0.2:
            text += rng.choice(("||", " ", " ||"))
        chosen.setdefault((text, rng.choice((None, None, None, "TAG"))))
    return list(chosen)


def record(cases: Sequence[tuple[str, str | None]], lib: Path) -> list[dict[str, object]]:
    """Java's answers for ``cases``, one dict each (see ``RecordSubscriptions.java``)."""
    lines = "".join(json.dumps({"expression": text, "type": kind}, ensure_ascii=False) + "\n" for text, kind in cases)
    done = subprocess.run(
        ["java", "-Xmx128m", "-cp", f"{lib}/*", str(JAVA_DIR / "RecordSubscriptions.java")],
        input=lines.encode("utf-8"),
        capture_output=True,
        check=True,
        timeout=300,
    )
    return [json.loads(line) for line in done.stdout.decode("utf-8").splitlines()]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    out = Path(args[0]) if args else DEFAULT_OUT
    rows = record(expressions(), ensure_jars())
    out.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    print(f"{len(rows)} cases written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
