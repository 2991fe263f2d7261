"""The snapshot folder's contract: one owned-folder rule for the collector and fleet-gen, the marker, the notes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocket_rebalance.snapshot_folder import (
    COLLECTOR,
    COLLECTOR_FILES,
    FLEET_GEN,
    MARKER,
    TABLES,
    FolderOwner,
    SnapshotError,
    check_folder,
    claim_folder,
    collector_notes,
    create_file,
    publish_folder,
    snapshot_partial,
    staged_folder,
    write_marker,
)
from rocket_rebalance.strategies import STRATEGY_NAMES, strategy_name


def test_the_pipeline_types_the_tables_the_folder_names() -> None:
    import rocket_rebalance.pipeline.schema as schema

    assert tuple(schema.INPUT_TABLES) == TABLES


@pytest.mark.parametrize("owner", [COLLECTOR, FLEET_GEN], ids=lambda owner: owner.who)
def test_an_owner_replaces_only_what_its_marker_lists(tmp_path: Path, owner: FolderOwner) -> None:
    out = tmp_path / "new" / "folder"
    assert check_folder(out, owner) == []
    mine = sorted(owner.files)[:2]
    claim_folder(out, owner, [], {"files": mine})
    for name in mine:
        (out / name).write_text("{}\n")
    (out / "notes.txt").write_text("not mine")
    assert check_folder(out, owner) == mine
    claim_folder(out, owner, mine, {"files": mine[:1]})
    assert sorted(p.name for p in out.iterdir()) == sorted([owner.marker, "notes.txt"])
    assert json.loads((out / owner.marker).read_text()) == {"written_by": owner.written_by, "files": mine[:1]}


@pytest.mark.parametrize("owner", [COLLECTOR, FLEET_GEN], ids=lambda owner: owner.who)
def test_an_owner_refuses_a_folder_it_did_not_write(tmp_path: Path, owner: FolderOwner) -> None:
    (tmp_path / "groups.jsonl").write_text("precious\n")
    with pytest.raises(SnapshotError, match=f"not empty and was not written by {owner.who}"):
        check_folder(tmp_path, owner)
    other = FLEET_GEN if owner is COLLECTOR else COLLECTOR
    (tmp_path / owner.marker).write_text(json.dumps({"written_by": other.written_by, "files": ["groups.jsonl"]}))
    with pytest.raises(SnapshotError, match=f"is not a {owner.who}'s {owner.marker}"):
        check_folder(tmp_path, owner)
    write_marker(tmp_path, owner, {"files": ["../elsewhere"]})
    with pytest.raises(SnapshotError, match=f"names '../elsewhere', which {owner.who} never writes"):
        check_folder(tmp_path, owner)
    assert (tmp_path / "groups.jsonl").read_text() == "precious\n"
    assert not (tmp_path / f".{owner.marker}.part").exists()


def test_fleet_gen_errors_name_fleet_gen(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(SnapshotError, match="^fleet-gen: --out .* is a file, not a folder$"):
        check_folder(tmp_path / "file", FLEET_GEN)
    with pytest.raises(SnapshotError, match="^--out .* is a file, not a folder$"):
        check_folder(tmp_path / "file", COLLECTOR)


def test_the_collector_notes_and_partial_flag(tmp_path: Path) -> None:
    assert snapshot_partial(tmp_path) is False and collector_notes(tmp_path) == []
    (tmp_path / MARKER).write_text(json.dumps({"partial": True}))
    rows = [{"group": "B", "client_id": None, "reason": "timeout"}, {"group": "A", "reason": "offline", "x": 1}]
    (tmp_path / "rejected.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows) + "\n")
    assert snapshot_partial(tmp_path) is True
    assert collector_notes(tmp_path) == [
        {"group": "A", "client_id": None, "reason": "offline"},
        {"group": "B", "client_id": None, "reason": "timeout"},
    ]


def test_every_registered_strategy_is_named_from_its_java_class() -> None:
    classes = {
        "AVG": "AllocateMessageQueueAveragely",
        "AVG_BY_CIRCLE": "AllocateMessageQueueAveragelyByCircle",
        "CONSISTENT_HASH": "AllocateMessageQueueConsistentHash",
        "CONFIG": "AllocateMessageQueueByConfig",
        "MACHINE_ROOM": "AllocateMessageQueueByMachineRoom",
        "MACHINE_ROOM_NEARBY": "AllocateMachineRoomNearby",
        "CONSISTENT_HASH_BOUNDED": "AllocateMessageQueueConsistentHashBounded",
        "CROSS_TOPIC": "AllocateMessageQueueAcrossTopics",
    }
    assert sorted(classes) == sorted(STRATEGY_NAMES)
    for name, cls in classes.items():
        assert strategy_name(f"org.apache.rocketmq.client.consumer.rebalance.{cls}@1b6d3586") == name
    assert strategy_name("com.example.MyStrategy@12") == "MyStrategy"
    assert strategy_name("") is None


@settings(max_examples=60, deadline=None)
@given(
    earlier=st.sets(st.sampled_from(sorted(COLLECTOR.files))),
    new=st.sets(st.sampled_from(COLLECTOR_FILES), min_size=1),
    others=st.sets(st.sampled_from(["notes.txt", ".hidden", "routes.parquet"])),
    exists=st.booleans(),
)
def test_publishing_replaces_the_listed_files_and_nothing_else(
    tmp_path_factory: pytest.TempPathFactory, earlier: set[str], new: set[str], others: set[str], exists: bool
) -> None:
    """Whatever an earlier run left, the published folder holds the new files, the new marker and what was not
    the collector's, unchanged; the staging folder is gone."""
    parent = tmp_path_factory.mktemp("publish")
    out = parent / "snap"
    if exists or earlier or others:
        out.mkdir()
    for name in earlier:
        (out / name).write_text("old")
    for name in others:
        (out / name).write_text("mine")
    if earlier or others:
        write_marker(out, COLLECTOR, {"files": sorted(earlier)})
    with staged_folder(out, COLLECTOR) as staging:
        assert staging.parent == parent and staging.name.startswith(".snap.snapshot-")
        for name in new:
            (staging / name).write_text("new")
        publish_folder(staging, out, COLLECTOR, {"complete": True, "files": sorted(new)})
    contents = {path.name: path.read_text() for path in out.iterdir()}
    marker = json.loads(contents.pop(MARKER))
    assert contents == {**dict.fromkeys(others, "mine"), **dict.fromkeys(new, "new")}
    assert marker == {"written_by": COLLECTOR.written_by, "complete": True, "files": sorted(new)}
    assert [path.name for path in parent.iterdir()] == ["snap"]


def test_a_staging_folder_that_is_not_published_is_removed(tmp_path: Path) -> None:
    out = tmp_path / "snap"
    with pytest.raises(RuntimeError, match="stopped"), staged_folder(out, COLLECTOR) as staging:
        (staging / "routes.jsonl").write_text("half")
        raise RuntimeError("stopped")
    assert list(tmp_path.iterdir()) == []


def test_publishing_checks_the_folder_again(tmp_path: Path) -> None:
    """A run takes minutes: a folder that somebody else filled meanwhile is refused when publishing too."""
    out = tmp_path / "snap"
    with pytest.raises(SnapshotError, match="not empty"), staged_folder(out, COLLECTOR) as staging:
        (staging / "routes.jsonl").write_text("new")
        out.mkdir()
        (out / "routes.jsonl").write_text("precious")
        publish_folder(staging, out, COLLECTOR, {"files": ["routes.jsonl"]})
    assert [path.name for path in tmp_path.iterdir()] == ["snap"]
    assert (out / "routes.jsonl").read_text() == "precious"


def test_a_staged_owner_needs_the_folder_beside_writable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Permissions as the kernel would judge them for a user (the tests may run as root, who passes them all)."""
    (tmp_path / "snap").mkdir()
    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != tmp_path)
    with pytest.raises(SnapshotError, match=r"is not writable \(the new snapshot is written beside the folder first"):
        check_folder(tmp_path / "snap", COLLECTOR)
    assert check_folder(tmp_path / "snap", FLEET_GEN) == []


def test_a_created_file_never_writes_through_a_link(tmp_path: Path) -> None:
    (tmp_path / "precious").write_text("precious")
    (tmp_path / "table").symlink_to("precious")
    with create_file(tmp_path / "table") as handle:
        handle.write("new")
    assert (tmp_path / "precious").read_text() == "precious"
    assert not (tmp_path / "table").is_symlink() and (tmp_path / "table").read_text() == "new"
