"""Hostile offsets files for the local (broadcasting) offset store: whatever is in the file and its backup, the
store either loads offsets that are all valid or refuses with an OffsetStoreError that says which file and why;
it never starts silently empty over a damaged file, never raises anything else, and never goes backwards."""

from __future__ import annotations

import json
from pathlib import Path
from tempfile import TemporaryDirectory

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocket_rebalance.model import MessageQueue
from rocket_rebalance.runtime.offset_store import JAVA_LONG_MAX, LocalFileOffsetStore, OffsetStoreError

MQ = MessageQueue("T", "broker-a", 0)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
entries = st.fixed_dictionaries(
    {
        "topic": st.sampled_from(["T", "", 1]),
        "brokerName": st.sampled_from(["broker-a", None]),
        "queueId": st.integers(-1, 2),
    },
    optional={"offset": st.one_of(st.integers(-2, 2**64), st.floats(), st.text(max_size=3), st.none())},
)
documents = st.one_of(
    json_values.map(json.dumps),
    st.lists(entries, max_size=4).map(lambda items: json.dumps({"offsets": items})),
    st.binary(max_size=64).map(lambda data: data.decode("latin-1")),
)


def check_store(folder: Path, reset: bool = False) -> LocalFileOffsetStore | None:
    try:
        store = LocalFileOffsetStore(folder / "offsets.json", reset=reset)
    except OffsetStoreError as error:
        assert "offsets" in str(error) and "\n" not in str(error)
        return None
    for offset in store._offsets.values():  # noqa: SLF001 - what the consumer would start from
        assert isinstance(offset, int) and 0 <= offset <= JAVA_LONG_MAX
    return store


@settings(max_examples=300, deadline=None)
@given(main=st.none() | documents, backup=st.none() | documents)
def test_any_file_and_backup_load_valid_offsets_or_are_refused(main: str | None, backup: str | None) -> None:
    with TemporaryDirectory() as name:
        folder = Path(name)
        for path, text in ((folder / "offsets.json", main), (folder / "offsets.json.bak", backup)):
            if text is not None:
                path.write_text(text, encoding="utf-8")
        store = check_store(folder)
        if store is None:
            assert check_store(folder, reset=True) is not None  # asked for: starts from consume-from-where
        elif main is None and backup is None:
            assert store.read(MQ) is None


def test_a_deeply_nested_file_is_refused_not_a_recursion_error(tmp_path: Path) -> None:
    (tmp_path / "offsets.json").write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(OffsetStoreError, match="offsets.json"):
        LocalFileOffsetStore(tmp_path / "offsets.json")


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 2**63 - 1), min_size=1, max_size=8))
def test_persisted_offsets_never_go_backwards_whatever_the_order(offsets: list[int]) -> None:
    with TemporaryDirectory() as name:
        store = LocalFileOffsetStore(Path(name) / "offsets.json")
        for offset in offsets:
            store.persist({MQ: offset})
        reopened = LocalFileOffsetStore(Path(name) / "offsets.json")
        assert reopened.read(MQ) == max(offsets)
