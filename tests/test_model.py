"""MessageQueue and the Java sort order."""

from __future__ import annotations

import pickle
import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocket_rebalance.model import (
    ClientIdList,
    DuplicateClientIdWarning,
    MessageQueue,
    QueueList,
    canonical_choice,
    check_group_name,
    check_topic_name,
    java_md5_hash,
    java_md5_hashes,
    prepare_rebalance_input,
    queue_md5_hashes,
    sort_client_ids,
    sort_queues,
)
from rocket_rebalance.testing import client_ids, message_queues


def utf16_units(text: str) -> list[int]:
    """UTF-16 code units computed by hand (surrogate pairs), independent of the codec the library uses."""
    units: list[int] = []
    for char in text:
        point = ord(char)
        if point > 0xFFFF:
            point -= 0x10000
            units += [0xD800 + (point >> 10), 0xDC00 + (point & 0x3FF)]
        else:
            units.append(point)
    return units


def java_compare(left: str, right: str) -> int:
    """Java's String.compareTo written out: first differing code unit, else the shorter string first."""
    a, b = utf16_units(left), utf16_units(right)
    for x, y in zip(a, b, strict=False):
        if x != y:
            return x - y
    return len(a) - len(b)


@given(st.text(), st.text())
def test_string_order_is_javas(left: str, right: str) -> None:
    expected = java_compare(left, right)
    ours = sort_client_ids([left, right])
    if expected < 0:
        assert ours == [left, right]
    elif expected > 0:
        assert ours == [right, left]
    else:
        assert left == right


@given(st.lists(st.text() | st.text(alphabet=st.characters(max_codepoint=127)), max_size=8))
def test_a_list_sorts_in_javas_order(texts: list[str]) -> None:
    """Whole lists, ASCII only (sorted without a key) or not."""
    ordered = sort_client_ids(texts)
    assert sorted(ordered) == sorted(texts)
    assert all(java_compare(a, b) <= 0 for a, b in zip(ordered, ordered[1:], strict=False))


def test_supplementary_characters_sort_before_high_bmp_characters() -> None:
    # U+1D538 is a surrogate pair (D835 DD38) in UTF-16, which Java sorts before U+FF21; Python does the reverse.
    assert sort_client_ids(["c@\uff21", "c@\U0001d538"]) == ["c@\U0001d538", "c@\uff21"]
    assert sorted(["c@\uff21", "c@\U0001d538"]) == ["c@\uff21", "c@\U0001d538"]


@given(st.lists(message_queues(), max_size=20))
def test_queue_order_is_topic_then_broker_then_id(queues: list[MessageQueue]) -> None:
    ordered = sort_queues(queues)
    for first, second in zip(ordered, ordered[1:], strict=False):
        key = java_compare(first.topic, second.topic) or java_compare(first.broker_name, second.broker_name)
        assert key < 0 or (key == 0 and first.queue_id <= second.queue_id)
        assert first <= second and not first > second


def test_str_is_javas_to_string() -> None:
    assert str(MessageQueue("T", "broker-a", 3)) == "MessageQueue [topic=T, brokerName=broker-a, queueId=3]"


def test_md5_hash_is_first_four_digest_bytes() -> None:
    # md5("a") = 0cc175b9c0f1b6a831c399e269772661
    assert java_md5_hash("a") == 0x0CC175B9
    mq = MessageQueue("T", "b", 0)
    assert mq.md5_hash == java_md5_hash(str(mq))


@given(st.lists(st.text(), max_size=40))
def test_batched_md5_hashes_are_the_hashes_of_each_key(keys: list[str]) -> None:
    """Lone surrogates included (a Java string may hold one): each key encoded as java_md5_hash encodes it."""
    encoded = [key.encode("utf-8", "surrogatepass") for key in keys]
    assert java_md5_hashes(encoded) == [java_md5_hash(key) for key in keys]


@given(st.lists(message_queues(), max_size=30), st.lists(st.booleans(), min_size=30, max_size=30))
def test_batched_queue_hashes_fill_in_the_unknown_ones(queues: list[MessageQueue], known: list[bool]) -> None:
    fresh = [MessageQueue(mq.topic, mq.broker_name, mq.queue_id) for mq in queues]
    for mq, asked in zip(fresh, known, strict=False):
        if asked:
            assert mq.md5_hash == java_md5_hash(str(mq))  # remembered before the batch
    expected = [java_md5_hash(str(mq)) for mq in queues]
    assert queue_md5_hashes(fresh) == expected
    assert [mq.md5_hash for mq in fresh] == expected  # and remembered by the batch
    assert queue_md5_hashes(fresh) == expected


def test_queue_is_immutable_hashable_and_picklable() -> None:
    mq = MessageQueue("T", "b", 1)
    with pytest.raises(AttributeError):
        mq.queue_id = 2  # type: ignore[misc]
    assert {mq, MessageQueue("T", "b", 1)} == {mq}
    assert pickle.loads(pickle.dumps(mq)) == mq
    assert MessageQueue.from_dict(mq.to_dict()) == mq


@pytest.mark.parametrize(
    ("args", "error", "text"),
    [
        (("T", "b", "1"), TypeError, "queue_id must be an int"),
        (("T", "b", True), TypeError, "queue_id must be an int"),
        (("T", "b", -1), ValueError, "queue_id must be between"),
        (("T", "b", 2**31), ValueError, "queue_id must be between"),
        ((1, "b", 1), TypeError, "topic must be a str"),
        (("T", None, 1), TypeError, "broker_name must be a str"),
    ],
)
def test_bad_queue_fields_are_named(args: tuple[object, object, object], error: type[Exception], text: str) -> None:
    with pytest.raises(error, match=text):
        MessageQueue(*args)  # type: ignore[arg-type]


def test_from_dict_names_missing_field() -> None:
    with pytest.raises(ValueError, match="queueId"):
        MessageQueue.from_dict({"topic": "T", "brokerName": "b"})


def test_checked_lists_refuse_wrong_items() -> None:
    with pytest.raises(TypeError, match=r"mq_all\[1\] must be a MessageQueue"):
        QueueList([MessageQueue("T", "b", 0), "T:b:1"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"cid_all\[0\] must be a str"):
        ClientIdList([1])  # type: ignore[list-item]


@given(st.lists(message_queues(), max_size=15), st.lists(client_ids(), min_size=1, max_size=8, unique=True))
def test_prepare_is_order_independent_and_deduplicates_queues(queues: list[MessageQueue], cids: list[str]) -> None:
    first = prepare_rebalance_input(queues + queues, cids)
    second = prepare_rebalance_input(list(reversed(queues)), list(reversed(cids)))
    assert first == second
    assert len(first.mq_all) == len(set(queues))


def test_duplicate_client_ids_are_kept_and_named() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prepared = prepare_rebalance_input([MessageQueue("T", "b", 0)], ["b@2", "a@1", "b@2"])
    assert list(prepared.cid_all) == ["a@1", "b@2", "b@2"]
    assert prepared.duplicate_client_ids == ["b@2"]
    assert any(issubclass(w.category, DuplicateClientIdWarning) and "b@2" in str(w.message) for w in caught)


@pytest.mark.parametrize("name", ["", "a b", "topic!", "x" * 128, "TopicTest\n", "\nTopicTest", "Topic\x1b[2J"])
def test_bad_topic_names(name: str) -> None:
    with pytest.raises(ValueError):
        check_topic_name(name)


def test_good_names() -> None:
    assert check_topic_name("%RETRY%GID_a|b-1") == "%RETRY%GID_a|b-1"
    assert check_group_name("GID_" + "x" * 200)


WORDS = ("AVG", "CONSISTENT_HASH", "none", "async-push", "table")


@given(st.sampled_from(WORDS), st.lists(st.booleans(), min_size=20, max_size=20))
def test_a_word_value_is_its_choice_whatever_its_case(word: str, upper: list[bool]) -> None:
    typed = "".join(ch.upper() if up else ch.lower() for ch, up in zip(word, upper, strict=False))
    assert canonical_choice(typed, WORDS) == word


@given(st.text(max_size=20))
def test_a_word_that_is_no_choice_is_left_for_the_caller_to_refuse(text: str) -> None:
    if text.casefold() not in {word.casefold() for word in WORDS}:
        assert canonical_choice(text, WORDS) == text
