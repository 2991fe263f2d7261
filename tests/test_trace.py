"""Message trace records: parity with the Java client's ``TraceDataEncoder`` (golden cases recorded from the real
class, see tests/golden/README.md) and the batching of records into trace messages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocket_rebalance.trace import (
    FIELD_SEPARATOR,
    SubAfter,
    SubBefore,
    TraceBean,
    TraceRecord,
    encode_record,
    record_keys,
    trace_messages,
)

GOLDEN = Path(__file__).resolve().parent / "golden" / "trace_cases.jsonl"
CASES: list[dict[str, Any]] = [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines()]


def _record(case: dict[str, Any]) -> TraceRecord:
    beans = tuple(TraceBean(b["msgId"], b["keys"], b["retryTimes"], b["topic"]) for b in case["beans"])
    if case["type"] == "SubBefore":
        return SubBefore(case["timestamp"], case["region"], case["group"], case["requestId"], beans)
    return SubAfter(
        case["requestId"],
        beans,
        case["costTime"],
        case["success"],
        case["contextCode"],
        case["timestamp"],
        case["group"],
    )


@pytest.mark.parametrize("case", CASES, ids=[f"case{index}" for index in range(len(CASES))])
def test_record_matches_java(case: dict[str, Any]) -> None:
    record = _record(case)
    assert encode_record(record) == case["transData"]
    assert set(record_keys(record)) == set(case["transKey"])


def test_golden_cases_cover_the_hard_parts() -> None:
    """Parity proves something only if the cases hold what can differ: absent keys (Java's ``null``), empty keys,
    several keys, characters beyond U+FFFF, several messages per call, both record types and both outcomes."""
    beans = [b for case in CASES for b in case["beans"]]
    assert any(b["keys"] is None for b in beans)
    assert any(b["keys"] == "" for b in beans)
    assert any(b["keys"] and " " in b["keys"] for b in beans)
    assert any(any(ord(ch) > 0xFFFF for ch in case["group"]) for case in CASES)
    assert any(len(case["beans"]) > 1 for case in CASES)
    assert {(case["type"], case["success"]) for case in CASES} >= {
        ("SubAfter", True),
        ("SubAfter", False),
        ("SubBefore", True),
    }


_text = st.text(st.characters(exclude_characters="\x01\x02 "), min_size=1, max_size=8)
_beans = st.lists(
    st.builds(
        TraceBean,
        msg_id=_text,
        keys=st.none() | st.lists(_text, max_size=3).map(" ".join),
        retry_times=st.integers(0, 20),
        topic=st.sampled_from(["A", "B", "C"]),
    ),
    min_size=0,
    max_size=4,
).map(tuple)
_records = st.lists(
    st.builds(SubBefore, st.integers(0, 2**41), _text, _text, _text, _beans)
    | st.builds(
        SubAfter, _text, _beans, st.integers(0, 10**6), st.booleans(), st.integers(0, 4), st.integers(0), _text
    ),
    max_size=30,
)


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


@given(_records, st.integers(1, 400))
def test_trace_messages_carry_every_record_once_in_order_split_at_the_size(
    records: list[TraceRecord], max_size: int
) -> None:
    """Every record with beans is in exactly one message, those of one origin topic in order; a message is
    closed as soon as its body reaches ``max_size`` (so only a topic's last message may be shorter, and none
    is longer than that plus one record); its keys are its records' keys, once each."""
    messages = trace_messages(records, max_size)
    kept = [r for r in records if r.beans]
    wanted = {topic: [r for r in kept if r.beans[0].topic == topic] for topic in ("A", "B", "C")}
    found: dict[str, list[TraceRecord]] = {topic: [] for topic in wanted}
    remaining = {topic: list(rs) for topic, rs in wanted.items()}
    for body, keys in messages:
        topic = next(t for t, rs in remaining.items() if rs and body.startswith(encode_record(rs[0])))
        taken: list[TraceRecord] = []
        rest = body
        while rest:
            text = encode_record(remaining[topic][0])
            assert rest.startswith(text)
            rest = rest[len(text) :]
            taken.append(remaining[topic].pop(0))
        found[topic] += taken
        assert keys == list(dict.fromkeys(k for r in taken for k in record_keys(r)))
        assert _utf16(body) - _utf16(encode_record(taken[-1])) < max_size
        if remaining[topic]:
            assert _utf16(body) >= max_size
        assert body.endswith(FIELD_SEPARATOR)
    assert found == wanted
