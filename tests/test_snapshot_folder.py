"""The snapshot folder's contract: one owned-folder rule for the collector and fleet-gen, the marker, the notes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocket_rebalance.snapshot_folder import (
    COLLECTOR,
    FLEET_GEN,
    MARKER,
    TABLES,
    FolderOwner,
    SnapshotError,
    check_folder,
    claim_folder,
    collector_notes,
    snapshot_partial,
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
