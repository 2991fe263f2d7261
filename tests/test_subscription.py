"""Subscription expressions against the Java client's own ``FilterAPI`` (golden cases) and their invariants."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from rocket_rebalance.remoting.bodies import Subscription
from rocket_rebalance.subscription import (
    SQL92,
    TAG,
    ExpressionError,
    SubscriptionExpression,
    group_inconsistencies,
    java_string_hash_code,
    never_received,
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


# ---------------------------------------------------------------------------------------------- a group's members

short_tags = st.sampled_from(["TagA", "TagB", "TagC", "Aa", "BB"])
tag_expressions = st.one_of(
    st.just(SubscriptionExpression("*")),
    st.lists(short_tags, min_size=1, max_size=3).map(lambda tags: SubscriptionExpression(" || ".join(tags))),
)
expressions = st.one_of(
    tag_expressions, st.sampled_from(["a > 5", "b = 1"]).map(lambda sql: SubscriptionExpression(sql, SQL92))
)
member_names = st.lists(st.sampled_from([f"10.0.0.{n}@{n}" for n in range(6)]), min_size=1, max_size=6, unique=True)
topic_names = st.lists(st.sampled_from(["Orders", "Pay", "%RETRY%G"]), min_size=1, max_size=3, unique=True)


@given(member_names, topic_names, st.lists(expressions, min_size=3, max_size=3), st.data())
def test_members_subscribing_alike_are_consistent(
    names: list[str], topics: list[str], chosen: list[SubscriptionExpression], data: st.DataObject
) -> None:
    """However each member spells an expression (order, spaces, repeats), filtering alike is no finding."""
    per_topic = dict(zip(topics, chosen, strict=False))

    def respelled(expression: SubscriptionExpression) -> SubscriptionExpression:
        if expression.expression_type != TAG or expression.is_all:
            return expression
        tags = data.draw(st.permutations(list(expression.tags)))
        return SubscriptionExpression(data.draw(st.sampled_from(["||", " || ", "||  "])).join(tags))

    members = {name: {topic: respelled(e) for topic, e in per_topic.items()} for name in names}
    assert group_inconsistencies(members) == []


@given(member_names.filter(lambda names: len(names) >= 2), tag_expressions, expressions, st.data())
def test_two_expressions_are_one_finding_per_topic_naming_both(
    names: list[str], first: SubscriptionExpression, second: SubscriptionExpression, data: st.DataObject
) -> None:
    assume(not first.filters_like(second))
    names = sorted(names)  # the order findings name members in
    split = data.draw(st.integers(1, len(names) - 1))
    members = {
        name: {"Orders": first if i < split else second, "Pay": SubscriptionExpression()}
        for i, name in enumerate(names)
    }
    found = group_inconsistencies(members)
    assert [f.topic for f in found] == ["Orders"]
    (finding,) = found
    assert finding.absent == ()
    assert [(e, list(who)) for e, who in finding.expressions] == [(first, names[:split]), (second, names[split:])]


@given(st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), tag_expressions, min_size=1))
def test_lost_tags_are_the_others_tags_minus_mine(members: dict[str, SubscriptionExpression]) -> None:
    for name, mine in members.items():
        others = [e for other, e in members.items() if other != name]
        lost = never_received(name, mine, others)
        if mine.is_all:
            assert lost is None  # '*' receives everything
            continue
        expected = {tag for e in others for tag in e.tags} - set(mine.tags)
        anything_else = any(e.is_all for e in others)
        if not expected and not anything_else:
            assert lost is None
        else:
            assert lost is not None and set(lost.tags) == expected and lost.anything_else == anything_else


def test_tag_a_beside_star_never_receives_anything_else_and_sql_names_no_tags() -> None:
    members = {
        "A": {"Orders": SubscriptionExpression("TagA"), "Pay": SubscriptionExpression()},
        "B": {"Orders": SubscriptionExpression("*"), "Pay": SubscriptionExpression()},
        "C": {"Orders": SubscriptionExpression("TagA || TagB"), "Pay": SubscriptionExpression("a > 1", SQL92)},
        "D": {"Orders": SubscriptionExpression("TagA")},
    }
    orders, pay = group_inconsistencies(members)
    assert orders.topic == "Orders" and orders.absent == ()
    assert [(str(e), who) for e, who in orders.expressions] == [
        ("TagA", ("A", "D")),
        ("*", ("B",)),
        ("TagA || TagB", ("C",)),
    ]
    assert [(n.member, n.tags, n.anything_else) for n in orders.lost] == [
        ("A", ("TagB",), True),
        ("C", (), True),
        ("D", ("TagB",), True),
    ]
    assert pay.topic == "Pay" and pay.absent == ("D",)
    assert [(str(e), who) for e, who in pay.expressions] == [("*", ("A", "B")), ("SQL92(a > 1)", ("C",))]
    assert pay.lost == ()  # '*' members lose nothing, and an SQL92 member's loss is not a set of tags
