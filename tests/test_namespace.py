"""Namespaces (``model.with_namespace`` / ``without_namespace`` / ``check_namespace``) against Java's
``NamespaceUtil``: its own test's results (golden cases), and the invariants the consumers rely on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocket_rebalance.model import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    check_namespace,
    retry_topic,
    with_namespace,
    without_namespace,
)

GOLDEN = Path(__file__).parent / "golden" / "namespace_cases.jsonl"
CASES = [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines() if line]

# Java's TopicValidator system topics, a rmq_sys_ topic and a CID_RMQ_SYS_ group: never wrapped.
SYSTEM = ["TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRACE_TOPIC", "OFFSET_MOVED_EVENT", "rmq_sys_x", "CID_RMQ_SYS_x"]

namespaces = st.text("abcXYZ019_-|", min_size=1, max_size=8).filter(lambda ns: check_namespace(ns) == ns)
names = st.text("abZ09_-|%", min_size=1, max_size=12)  # never a system name: those are tested by example
prefixes = st.sampled_from(["", RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX])


def test_the_golden_file_has_the_java_cases() -> None:
    assert len(CASES) == 15
    assert {case["function"] for case in CASES} == {"with_namespace", "without_namespace"}


@pytest.mark.parametrize("case", CASES, ids=lambda case: f"{case['function']}({case['name']})")
def test_java_namespace_util_results(case: dict[str, str]) -> None:
    if case["function"] == "with_namespace":
        assert with_namespace(case["namespace"], case["name"]) == case["expected"]
    else:
        assert without_namespace(case["name"], case["namespace"]) == case["expected"]


@pytest.mark.parametrize("name", SYSTEM)
def test_system_names_are_never_wrapped_or_unwrapped(name: str) -> None:
    assert with_namespace("ns", name) == name
    assert without_namespace(name, "ns") == name


@pytest.mark.parametrize("empty", [None, ""])
def test_no_namespace_changes_nothing(empty: str | None) -> None:
    assert check_namespace(empty) is None
    assert with_namespace(empty, "T") == "T"
    assert without_namespace("ns%T", empty) == "ns%T"
    assert with_namespace("ns", "") == ""


@pytest.mark.parametrize(
    ("namespace", "text"),
    [
        ("a%b", "characters outside"),
        ("a b", "characters outside"),
        ("ns\n", "characters outside"),
        ("rmq_sys_ns", "system name"),
        ("CID_RMQ_SYS_ns", "system name"),
    ],
)
def test_bad_namespaces_are_named(namespace: str, text: str) -> None:
    with pytest.raises(ValueError, match=text):
        check_namespace(namespace)


def test_a_namespace_must_be_text() -> None:
    with pytest.raises(TypeError, match="str"):
        check_namespace(7)


@given(namespaces, prefixes, names)
def test_wrapping_twice_is_wrapping_once(namespace: str, prefix: str, name: str) -> None:
    once = with_namespace(namespace, prefix + name)
    assert with_namespace(namespace, once) == once


@given(namespaces, prefixes, names)
def test_unwrapping_gives_back_what_was_wrapped(namespace: str, prefix: str, name: str) -> None:
    resource = prefix + name
    if name.startswith(namespace + "%"):
        return  # already wrapped: kept as it is, and unwraps to the bare name
    assert without_namespace(with_namespace(namespace, resource), namespace) == resource


@given(namespaces, names)
def test_the_retry_topic_of_the_wrapped_group_is_java_s(namespace: str, group: str) -> None:
    wrapped = with_namespace(namespace, group)
    assert wrapped == f"{namespace}%{group}" or group.startswith(namespace + "%")
    # Java's wrapNamespaceAndRetry: what the core subscribes (the retry topic of the wrapped group) is the same
    # as the user's retry topic wrapped, and unwraps back to it.
    assert retry_topic(wrapped) == with_namespace(namespace, retry_topic(group))
    assert with_namespace(namespace, DLQ_GROUP_TOPIC_PREFIX + group) == DLQ_GROUP_TOPIC_PREFIX + wrapped
    if not group.startswith(namespace + "%"):
        assert without_namespace(retry_topic(wrapped), namespace) == retry_topic(group)


@given(namespaces, namespaces, prefixes, names)
def test_another_namespace_is_left_alone(namespace: str, other: str, prefix: str, name: str) -> None:
    wrapped = with_namespace(other, prefix + name)
    if wrapped.removeprefix(prefix).startswith(namespace + "%"):
        return  # the other namespace's wrapping also begins like this one's (``a`` and ``a%...``)
    assert without_namespace(wrapped, namespace) == wrapped
