"""Subscription expressions against the Java client's own ``FilterAPI`` (golden cases) and their invariants."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocket_rebalance.remoting.bodies import Subscription
from rocket_rebalance.subscription import (
    SQL92,
    TAG,
    ExpressionError,
    SubscriptionExpression,
    java_string_hash_code,
    subscriptions_from,
)

GOLDEN = Path(__file__).parent / "golden" / "subscription_cases.jsonl"
CASES = [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines()]


def test_the_golden_file_covers_the_edge_cases() -> None:
    expressions = {case["expression"] for case in CASES}
    assert len(CASES) >= 300
    assert {"*", "", "||", "TagA||", "||TagA", "Aa||BB"} <= expressions
    assert any(case["error"] for case in CASES) and any(case["type"] == SQL92 for case in CASES)
    assert any(len(case.get("tagsSet") or ()) > len(case.get("codeSet") or ()) for case in CASES)  # a collision


@pytest.mark.parametrize("case", CASES, ids=[repr(case["expression"])[:40] for case in CASES])
def test_built_as_java_builds_it(case: dict[str, Any]) -> None:
    expression = SubscriptionExpression(case["expression"], case["type"] or TAG)
    if case["error"]:
        assert expression.java_error is not None
        with pytest.raises(ExpressionError):
            expression.check()
        return
    assert expression.java_error is None
    assert expression.sub_string == case["subString"]
    assert set(expression.tags) == set(case["tagsSet"]) and len(expression.tags) == len(case["tagsSet"])
    assert set(expression.codes) == set(case["codeSet"]) and len(expression.codes) == len(case["codeSet"])
    wire = Subscription("T", expression.sub_string, 0, expression.expression_type).to_json()
    for key in ("tagsSet", "codeSet"):
        assert sorted(wire.pop(key)) == sorted(case["wire"].pop(key))
    assert wire == case["wire"]


tag_text = st.text(st.characters(blacklist_categories=["Cs"]), max_size=12)
separators = st.sampled_from(["||", " || ", "|||", "|| ||"])


@given(st.lists(tag_text, max_size=6), separators)
def test_the_code_set_is_the_hash_of_each_tag(parts: list[str], separator: str) -> None:
    expression = SubscriptionExpression(separator.join(parts))
    assert set(expression.codes) == {java_string_hash_code(tag) for tag in expression.tags}
    assert len(set(expression.tags)) == len(expression.tags)
    assert all(tag and tag == tag.strip("".join(map(chr, range(0x21)))) for tag in expression.tags)


@given(st.lists(tag_text, min_size=1, max_size=4), st.lists(st.sampled_from(["A", "B", "C", "", "Aa", "BB"])))
def test_the_refilter_keeps_exactly_the_tagged_in_messages(parts: list[str], tags: list[str]) -> None:
    expression = SubscriptionExpression("||".join(parts))
    kept = [tag for tag in tags if expression.accepts(tag)]
    if expression.tags:
        assert kept == [tag for tag in tags if tag in expression.tags]
    else:
        assert kept == tags


def test_colliding_tags_share_a_code_and_are_told_apart_by_the_refilter() -> None:
    expression = SubscriptionExpression("Aa")
    assert java_string_hash_code("Aa") == java_string_hash_code("BB")
    assert expression.accepts("Aa") and not expression.accepts("BB") and not expression.accepts("")


def test_sql92_is_kept_whole_and_filters_nothing_on_the_client() -> None:
    expression = SubscriptionExpression("a > 5 || b", SQL92)
    assert (expression.sub_string, expression.tags, expression.codes) == ("a > 5 || b", (), ())
    assert expression.accepts("anything")


@pytest.mark.parametrize(
    ("text", "kind", "says"),
    [
        ("||", TAG, "cannot be split"),
        (" || ", TAG, "names no tag"),
        ("", SQL92, "cannot be empty"),
    ],
)
def test_an_expression_a_consumer_cannot_use_is_one_named_error(text: str, kind: str, says: str) -> None:
    with pytest.raises(ExpressionError, match=says):
        SubscriptionExpression(text, kind).check()


def test_an_unknown_expression_type_is_refused() -> None:
    with pytest.raises(ExpressionError, match="expression type"):
        SubscriptionExpression("a", "sql")


def test_topics_as_a_list_subscribe_everything_and_as_a_mapping_their_expressions() -> None:
    assert subscriptions_from(["A", "B"]) == {"A": SubscriptionExpression(), "B": SubscriptionExpression()}
    chosen = subscriptions_from({"A": "TagA || TagB", "B": SubscriptionExpression("x = 1", SQL92)})
    assert chosen["A"].tags == ("TagA", "TagB") and chosen["B"].expression_type == SQL92
    with pytest.raises(TypeError):
        subscriptions_from("Orders")
    with pytest.raises(ExpressionError):
        subscriptions_from({"A": "||"})


@given(st.lists(tag_text, max_size=5), st.lists(tag_text, max_size=5), separators, separators)
def test_expressions_filter_alike_when_their_tag_sets_are_equal(
    first: list[str], second: list[str], sep_a: str, sep_b: str
) -> None:
    """The group-consistency check compares what the broker filters by, not the text: spacing and order differ
    between members' expressions without changing a thing; SQL92 expressions are compared whole."""
    a, b = SubscriptionExpression(sep_a.join(first)), SubscriptionExpression(sep_b.join(second))
    if a.java_error or b.java_error:
        return
    assert a.filters_like(b) == (a.is_all == b.is_all and set(a.tags) == set(b.tags))
    reordered = SubscriptionExpression(" || ".join(reversed(a.tags)) or a.sub_string)
    assert a.filters_like(reordered)
    assert not a.filters_like(SubscriptionExpression(a.sub_string, SQL92))
    sql = SubscriptionExpression("a > 5", SQL92)
    assert sql.filters_like(SubscriptionExpression("a > 5", SQL92))
    assert not sql.filters_like(SubscriptionExpression("a > 6", SQL92))
