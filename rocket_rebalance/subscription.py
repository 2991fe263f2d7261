"""Subscription expressions as the Java client builds and applies them (pure: no I/O).

A consumer subscribes each topic with an expression: a TAG expression (``*`` for every message, or tags joined by
``||``) or an SQL92 one over message properties. The broker filters a TAG subscription by the Java
``String.hashCode`` of each tag (``SubscriptionData.codeSet``); two tags can share a code, so the client filters
again by the tag string after each pull (``PullAPIWrapper.processPullResult``). This module derives the tag and code
sets exactly as ``FilterAPI.buildSubscriptionData`` (5.3.3) does, so Python and Java members of one group announce
the same subscription; ``tests/golden/subscription_cases.jsonl`` holds the Java classes' own answers.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = [
    "SQL92",
    "SUB_ALL",
    "TAG",
    "ExpressionError",
    "NeverReceived",
    "SubscriptionExpression",
    "TopicInconsistency",
    "group_inconsistencies",
    "java_string_hash_code",
    "java_tag_split",
    "never_received",
    "subscriptions_from",
]

SUB_ALL = "*"
TAG = "TAG"
SQL92 = "SQL92"
EXPRESSION_TYPES = (TAG, SQL92)
_SEPARATOR = "||"
JAVA_WHITESPACE = "".join(chr(code) for code in range(0x21))
"""What Java's ``String.trim()`` strips from both ends: every char up to U+0020, control characters included."""
_UTF16_UNITS = struct.Struct(">H")


class ExpressionError(ValueError):
    """A subscription expression the Java client would refuse, or one that could never receive a message."""


def java_string_hash_code(text: str) -> int:
    """Java's ``String.hashCode()``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, signed 32-bit.

    Brokers filter a tag subscription by these codes (``SubscriptionData.codeSet``), so they must match Java's.
    """
    value = 0
    for (unit,) in _UTF16_UNITS.iter_unpack(text.encode("utf-16-be", "surrogatepass")):
        value = (value * 31 + unit) & 0xFFFFFFFF
    return value - 2**32 if value > 0x7FFFFFFF else value


def java_tag_split(expression: str) -> list[str] | None:
    """``expression.split("\\\\|\\\\|")`` as Java computes it: the parts, trailing empty ones removed; ``None`` where
    Java's array is empty (an expression of ``||`` only), which ``buildSubscriptionData`` refuses."""
    parts = expression.split(_SEPARATOR)
    if len(parts) == 1:
        return parts  # no separator: Java returns the whole string, even an empty one
    while parts and not parts[-1]:
        parts.pop()
    return parts or None


@dataclass(frozen=True)
class SubscriptionExpression:
    """One topic's filter: ``expression`` of ``expression_type`` (``TAG`` or ``SQL92``).

    ``sub_string``, ``tags`` and ``codes`` are what Java's ``SubscriptionData`` carries for it; an SQL92 expression
    is kept whole and has neither tags nor codes (the broker evaluates it against message properties)."""

    expression: str = SUB_ALL
    expression_type: str = TAG

    def __post_init__(self) -> None:
        if self.expression_type not in EXPRESSION_TYPES:
            raise ExpressionError(
                f"expression type must be one of {', '.join(EXPRESSION_TYPES)}; got {self.expression_type!r}"
            )

    @property
    def sub_string(self) -> str:
        """``subString``: an empty TAG expression becomes ``*`` (Java normalises it so); anything else as given."""
        return SUB_ALL if self.expression_type == TAG and self.expression in ("", SUB_ALL) else self.expression

    @property
    def is_all(self) -> bool:
        """True when every message passes (``*``, or an empty TAG expression)."""
        return self.expression_type == TAG and self.sub_string == SUB_ALL

    @property
    def tags(self) -> tuple[str, ...]:
        """``tagsSet``: each trimmed, non-empty part once, in first-seen order (Java keeps a ``HashSet``)."""
        if self.expression_type != TAG or self.is_all:
            return ()
        return tuple(dict.fromkeys(tag for part in java_tag_split(self.expression) or () if (tag := _trim(part))))

    @property
    def codes(self) -> tuple[int, ...]:
        """``codeSet``: the Java hash code of each tag, once each (colliding tags share one)."""
        return tuple(dict.fromkeys(java_string_hash_code(tag) for tag in self.tags))

    @property
    def java_error(self) -> str | None:
        """Why Java's ``FilterAPI`` refuses this expression (``||`` alone splits into nothing; an SQL92 expression
        cannot be empty), or ``None`` when Java builds it."""
        if self.expression_type == SQL92:
            return None if self.expression else "an SQL92 expression cannot be empty"
        if self.is_all or java_tag_split(self.expression) is not None:
            return None
        return f"tag expression {self.expression!r} cannot be split into tags"

    def check(self) -> SubscriptionExpression:
        """This expression if a consumer may subscribe with it, else :class:`ExpressionError` naming it: what Java
        refuses (:attr:`java_error`), and a TAG expression that names no tag (``" || "``), which Java accepts but
        with which a consumer would silently receive nothing."""
        refused = self.java_error
        if refused is not None:
            raise ExpressionError(refused)
        if self.expression_type == TAG and not self.is_all and not self.tags:
            raise ExpressionError(
                f"tag expression {self.expression!r} names no tag: it would receive nothing (use '*' for everything)"
            )
        return self

    def filters_like(self, other: SubscriptionExpression) -> bool:
        """Whether a broker filters by ``other`` as by this one: the same tag set (or both ``*``), however the
        text is spaced or ordered; an SQL92 expression only as the same text."""
        if self.expression_type != other.expression_type:
            return False
        if self.expression_type != TAG:
            return self.expression == other.expression
        return self.is_all == other.is_all and set(self.tags) == set(other.tags)

    def accepts(self, tags: str) -> bool:
        """The client-side re-filter (``PullAPIWrapper.processPullResult``): with a tag set, a message is kept only
        when its ``TAGS`` property is one of the tags (a message without tags is not); otherwise everything is kept,
        the broker having filtered already (SQL92) or nothing to filter (``*``)."""
        names = self.tags
        return not names or tags in names

    def __str__(self) -> str:
        return self.sub_string if self.expression_type == TAG else f"SQL92({self.expression})"


def _trim(text: str) -> str:
    return text.strip(JAVA_WHITESPACE)


def subscriptions_from(
    topics: Iterable[str] | Mapping[str, str | SubscriptionExpression],
) -> dict[str, SubscriptionExpression]:
    """The ``topics=`` argument of a consumer as expressions per topic: a plain iterable of names subscribes each
    to ``*``; a mapping gives each topic a TAG expression string or a :class:`SubscriptionExpression`. Each
    expression is checked (:meth:`SubscriptionExpression.check`)."""
    if isinstance(topics, Mapping):
        result: dict[str, SubscriptionExpression] = {}
        for topic, value in topics.items():
            expression = value if isinstance(value, SubscriptionExpression) else SubscriptionExpression(_text(value))
            result[topic] = expression.check()
        return result
    if isinstance(topics, str):
        raise TypeError("topics must be a list of topic names or a mapping of topic to expression, not one string")
    return {topic: SubscriptionExpression() for topic in topics}


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"a subscription expression must be a string, got {type(value).__name__}")
    return value


# ---------------------------------------------------------------------------------------------- a group's members


@dataclass(frozen=True)
class NeverReceived:
    """What one member of a group would never receive of what others of the group subscribe: ``tags`` the others
    name that its tag set lacks, and ``anything_else`` when another member subscribes ``*`` (every message not
    tagged with one of its own tags)."""

    member: str
    tags: tuple[str, ...]
    anything_else: bool


@dataclass(frozen=True)
class TopicInconsistency:
    """One topic on which the members of a group do not filter alike.

    ``expressions``: each distinct filter (as :meth:`SubscriptionExpression.filters_like` judges) with the members
    subscribing by it, in member order of the first one; ``absent``: members subscribing other topics of the group
    but not this one, to whom the rebalance hands this topic's queues anyway; ``lost``: per TAG member, what it would
    never receive of what other TAG members subscribe (none for SQL92, whose loss cannot be named by tag)."""

    topic: str
    expressions: tuple[tuple[SubscriptionExpression, tuple[str, ...]], ...]
    absent: tuple[str, ...]
    lost: tuple[NeverReceived, ...]


def _filter_key(expression: SubscriptionExpression) -> tuple[str, frozenset[str] | str]:
    """Equal for two expressions exactly when :meth:`SubscriptionExpression.filters_like` says they filter alike."""
    if expression.expression_type != TAG:
        return expression.expression_type, expression.expression
    return TAG, SUB_ALL if expression.is_all else frozenset(expression.tags)


def never_received(
    member: str, mine: SubscriptionExpression, others: Iterable[SubscriptionExpression]
) -> NeverReceived | None:
    """What ``member``, subscribing ``mine``, would never receive of what the ``others`` subscribe: None for a
    member that receives everything (``*``), an SQL92 one (its loss is not a set of tags), or one that loses
    nothing. Only TAG expressions of the others count: an SQL92 one names no tag."""
    if mine.expression_type != TAG or mine.is_all:
        return None
    tags = [o for o in others if o.expression_type == TAG]
    anything_else = any(o.is_all for o in tags)
    own = set(mine.tags)
    missing = sorted({tag for o in tags for tag in o.tags} - own)
    if not missing and not anything_else:
        return None
    return NeverReceived(member, tuple(missing), anything_else)


def group_inconsistencies(members: Mapping[str, Mapping[str, SubscriptionExpression]]) -> list[TopicInconsistency]:
    """Each topic of a group on which its ``members`` (client ID → topic → expression, each member's own
    subscriptions) do not all subscribe alike, sorted by topic: some filter by another expression, or some do not
    subscribe the topic at all. A group whose members agree has none."""
    found: list[TopicInconsistency] = []
    names = sorted(members)
    for topic in sorted({topic for subscribed in members.values() for topic in subscribed}):
        subscribing = [name for name in names if topic in members[name]]
        absent = tuple(name for name in names if topic not in members[name])
        classes: dict[tuple[str, frozenset[str] | str], list[str]] = {}
        for name in subscribing:
            classes.setdefault(_filter_key(members[name][topic]), []).append(name)
        if len(classes) == 1 and not absent:
            continue
        lost = tuple(
            item
            for name in subscribing
            if (
                item := never_received(
                    name, members[name][topic], (members[o][topic] for o in subscribing if o != name)
                )
            )
            is not None
        )
        found.append(
            TopicInconsistency(
                topic,
                tuple((members[group[0]][topic], tuple(group)) for group in classes.values()),
                absent,
                lost,
            )
        )
    return found
