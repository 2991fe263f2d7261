"""The snapshot folder's contract: its tables, its marker, the owned-folder rule, the collector's notes.

A snapshot is a folder of tables, one ``<table>.parquet`` or ``<table>.jsonl`` each (a file, or a folder of part
files as Spark writes them). Two commands write such folders and the fleet pipeline reads them:

* ``rocket-rebalance snapshot`` (:mod:`rocket_rebalance.admin.snapshot`) collects a live cluster into JSON Lines and
  writes :data:`MARKER` last: which files it wrote, whether the snapshot is *partial*, and its ``rejected.jsonl``
  says what it could not read (:func:`snapshot_partial`, :func:`collector_notes`). It writes into a new folder
  beside ``--out`` (:func:`staged_folder`) and moves the tables in only once they are complete
  (:func:`publish_folder`), so a run that fails leaves an earlier snapshot as it was;
* ``rocket-rebalance fleet-gen`` (:mod:`rocket_rebalance.pipeline.fleetgen`) writes a synthetic fleet, with its own
  marker.

Both follow one rule for their ``--out`` (:func:`check_folder`, :func:`claim_folder`): a folder is written only
when it is new, empty, or marked by the same writer, and then only the files its marker lists are replaced, so a
folder of real data is never overwritten by mistake. Every file is created afresh (:func:`create_file`): a link
planted under one of the names is removed, never written through. Here are only names, files and JSON: the table
*types* (which need pyarrow) are the pipeline's (:mod:`rocket_rebalance.pipeline.schema`); this module imports
neither the runtime nor the pipeline, so the collector and the pipeline share it without depending on each other.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

__all__ = [
    "AFTER_TABLES",
    "BEFORE_TABLES",
    "COLLECTOR",
    "COLLECTOR_FILES",
    "COLLECTOR_REJECTED",
    "COLLECTOR_TABLES",
    "FLEET_GEN",
    "MARKER",
    "MEMBER_SUBSCRIPTIONS",
    "OPTIONAL_TABLES",
    "STOPPED",
    "Settle",
    "TABLES",
    "FolderOwner",
    "SnapshotError",
    "check_folder",
    "claim_folder",
    "collector_notes",
    "collector_settle",
    "create_file",
    "data_files",
    "has_table",
    "publish_folder",
    "snapshot_partial",
    "staged_folder",
    "table_path",
    "write_marker",
]

TABLES = ("routes", "members", "subscriptions", "groups", "offsets", "observed", "rejected")
"""Every table the pipeline reads from a snapshot, in the order they are listed and written."""

MEMBER_SUBSCRIPTIONS = "member_subscriptions"
"""The live collector's record of what each member subscribes, by its own account (running info's
``subscriptionSet``; the stub: its heartbeat): ``group``, ``client_id``, ``topic``, ``expression_type``,
``expression``, a row per member and topic. Only ``audit`` reads it (are a group's members subscribing alike?);
snapshots taken before it existed, and fleet-gen's, have none, and their subscriptions are then not checked."""

STOPPED = "stopped"
"""The live collector's record of the groups with no online consumer: ``group``, ``topic``, ``lag`` (messages
not consumed, summed over the topic's queues) and ``later_lag`` (the same a settle interval later, read only when
``lag`` was above 0; else null), a row per group and topic with offsets (one with a null topic when it has none).
A stopped group is not a failed read; only ``audit`` reads this (does a stopped group's backlog grow?)."""

COLLECTOR_TABLES = (*TABLES, MEMBER_SUBSCRIPTIONS, STOPPED)
"""The tables the live collector writes, in the order it writes them."""

BEFORE_TABLES = ("routes", "members", "subscriptions", "groups", "offsets")
"""What an ``impact`` or ``audit`` run needs from ``--snapshot``."""

AFTER_TABLES = ("routes", "members", "subscriptions", "groups")
"""An ``--after`` snapshot needs no offsets: exposure is measured on the offsets at the moment of the change."""

OPTIONAL_TABLES = ("observed", "rejected")
"""Tables a live-cluster collector adds (``rocket-rebalance snapshot``), read from ``--snapshot`` when present:
``observed``, the queues each consumer reports holding, and ``rejected``, what the collector could not read
(``group``, ``client_id``, ``reason``)."""

_FORMATS = ((".parquet", "parquet"), (".jsonl", "json"), (".json", "json"))
"""A table's file name suffixes and the format each is read as."""

MARKER = "_snapshot.json"
"""The collector's marker, written last into its folder: what was collected, how, which files, and ``partial``."""

COLLECTOR_FILES = tuple(f"{table}.jsonl" for table in COLLECTOR_TABLES)
"""The collector's tables, one JSON Lines file each, in the order of :data:`COLLECTOR_TABLES`."""

COLLECTOR_REJECTED = "rejected.jsonl"
"""The collector's notes: one row per thing it could not read, and why."""


class SnapshotError(ValueError):
    """A snapshot folder that cannot be read or written: a missing table or column, an unknown file format, a
    marker or notes file that is not what it should be, or an ``--out`` folder that may not be written.

    A ``ValueError``: bad input, reported by the command line as one line with exit status 2."""


# ---------------------------------------------------------------------------------------------- tables


def table_path(snapshot: Path, table: str) -> tuple[Path, str]:
    """Where a table lives in a snapshot folder and its format: ``<table>.parquet`` or ``<table>.jsonl``.

    Either may be one file or a folder of part files (as Spark writes them). A table present in two formats is an
    error rather than a choice: one of them is stale (a fleet rewritten in another format), and reading either
    silently would analyse a fleet nobody asked about.
    """
    found = [
        (snapshot / f"{table}{suffix}", fmt) for suffix, fmt in _FORMATS if (snapshot / f"{table}{suffix}").exists()
    ]
    if len(found) > 1:
        names = " and ".join(path.name for path, _ in found)
        raise SnapshotError(f"snapshot {snapshot}: table {table!r} is there twice, as {names}; remove the stale one")
    if not found:
        raise SnapshotError(
            f"snapshot {snapshot}: table {table!r} not found (expected {table}.parquet or {table}.jsonl)"
        )
    return found[0]


def has_table(snapshot: Path, table: str) -> bool:
    """Whether the snapshot holds the table in any format (an optional table is read only when it does)."""
    return any((snapshot / f"{table}{suffix}").exists() for suffix, _ in _FORMATS)


def data_files(path: Path, fmt: str) -> list[Path]:
    """A table's data files: the file itself, or a folder's part files (not Spark's ``_SUCCESS`` or hidden ones)."""
    if path.is_file():
        return [path]
    pattern = "*.parquet" if fmt == "parquet" else "*.json*"
    return sorted(p for p in path.glob(pattern) if not p.name.startswith(("_", ".")))


# ---------------------------------------------------------------------------------------------- owned folders


@dataclass(frozen=True)
class FolderOwner:
    """Who writes a snapshot folder: its name in messages (``who``), its marker and the files it may ever own.

    ``prefix`` starts each of its error messages (fleet-gen's say ``fleet-gen: ``). A ``staged`` owner writes a
    new folder beside ``--out`` and moves it in when complete (:func:`staged_folder`), so it needs the folder
    that holds ``--out`` to be writable too."""

    who: str
    marker: str
    files: frozenset[str]
    prefix: str = ""
    staged: bool = False

    @property
    def written_by(self) -> str:
        """The marker's ``written_by``: a marker of another writer is not this one's, whatever files it lists."""
        return f"rocket-rebalance {self.who}"


COLLECTOR = FolderOwner(
    "snapshot",
    MARKER,
    frozenset(COLLECTOR_FILES) | {f".{name}.part" for name in COLLECTOR_FILES},
    staged=True,
)
"""The live collector: its tables as JSON Lines, written beside ``--out`` until all are read. Earlier versions
wrote them into ``--out`` under hidden ``.part`` names, which their markers list: those are its files too, so a
later run removes them."""

FLEET_GEN = FolderOwner(
    "fleet-gen",
    "_fleet-gen.json",
    frozenset(f"{table}.{suffix}" for table in TABLES if table != "rejected" for suffix in ("parquet", "jsonl")),
    prefix="fleet-gen: ",
)
"""The synthetic fleet: its marker lists the tables of one run, so a later run deletes exactly those files and
switching ``--format`` leaves no stale table of the other format."""


def check_folder(out: Path, owner: FolderOwner) -> list[str]:
    """Whether ``owner`` may write into ``out``, before anything is read or changed: the files of its earlier run
    there to replace (empty for a new or empty folder). Anything else raises :class:`SnapshotError`: a file, a
    folder that cannot be created or written, a folder with anything in it and no marker of ``owner``, or a
    marker naming a file ``owner`` never writes (which a forged or foreign marker could use to delete anything)."""
    prefix = owner.prefix
    if out.exists() and not out.is_dir():
        raise SnapshotError(f"{prefix}--out {out} is a file, not a folder")
    if not out.exists():
        parent = next((p for p in out.absolute().parents if p.exists()), None)
        if parent is None or not parent.is_dir():
            raise SnapshotError(f"{prefix}--out {out} cannot be created: {parent} is not a folder")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise SnapshotError(f"{prefix}--out {out} cannot be created: {parent} is not writable")
        return []
    if not os.access(out, os.W_OK | os.X_OK):
        raise SnapshotError(f"{prefix}--out {out} is not writable")
    beside = Path(os.path.abspath(out)).parent
    if owner.staged and not os.access(beside, os.W_OK | os.X_OK):
        raise SnapshotError(
            f"{prefix}--out {out}: {beside} is not writable (the new {owner.who} is written beside the folder first)"
        )
    if not any(out.iterdir()):
        return []
    marker = out / owner.marker
    if not marker.is_file():
        raise SnapshotError(
            f"{prefix}--out {out} is not empty and was not written by {owner.who} (no {owner.marker}); "
            "give an empty or new folder"
        )
    try:
        document = json.loads(marker.read_text(encoding="utf-8"))
        files = document["files"]
        if (
            document.get("written_by") != owner.written_by
            or not isinstance(files, list)
            or not all(isinstance(name, str) for name in files)
        ):
            raise ValueError
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise SnapshotError(
            f"{prefix}{marker} is not a {owner.who}'s {owner.marker}; give an empty or new folder"
        ) from None
    foreign = [name for name in files if name not in owner.files]
    if foreign:
        raise SnapshotError(
            f"{prefix}{marker} names {foreign[0]!r}, which {owner.who} never writes; give an empty or new folder"
        )
    return list(files)


def claim_folder(out: Path, owner: FolderOwner, earlier: Iterable[str], document: dict[str, Any]) -> None:
    """Take ``out`` for ``owner`` once :func:`check_folder` allowed it: create it, delete the ``earlier`` files it
    returned (nothing else), and mark the folder with ``document`` before any table is written, so a run that
    stops half-way leaves a folder the next run may still replace."""
    out.mkdir(parents=True, exist_ok=True)
    for name in earlier:
        (out / name).unlink(missing_ok=True)
    write_marker(out, owner, document)


def write_marker(out: Path, owner: FolderOwner, document: dict[str, Any]) -> None:
    """Replace ``owner``'s marker (``document`` with its ``written_by`` first) in one rename, so a reader sees the
    old or the new one, never half of one."""
    temporary = out / f".{owner.marker}.part"
    content = {"written_by": owner.written_by, **document}
    with create_file(temporary) as handle:
        handle.write(json.dumps(content, indent=1, ensure_ascii=False) + "\n")
    os.replace(temporary, out / owner.marker)


def create_file(path: Path) -> TextIO:
    """``path`` opened for writing UTF-8 text as a new file. Whatever had the name is removed first, a symlink
    as the link (never followed), and the file is then created exclusively without following links, so a link
    planted between the two steps fails the open instead of having its target overwritten."""
    path.unlink(missing_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.fdopen(os.open(path, flags, 0o666), "w", encoding="utf-8")


@contextmanager
def staged_folder(out: Path, owner: FolderOwner) -> Iterator[Path]:
    """A new, empty, hidden folder beside ``out`` for a ``staged`` owner to write into, created exclusively
    (``.<out's name>.<who>-<random>``, in a folder created for ``out`` when there is none yet). Whatever is left of
    it when the block ends, because :func:`publish_folder` did not move it or failed, is removed: it holds only
    what the block wrote."""
    absolute = Path(os.path.abspath(out))
    absolute.parent.mkdir(parents=True, exist_ok=True)
    staging = absolute.parent / f".{absolute.name}.{owner.who}-{secrets.token_hex(6)}"
    staging.mkdir()
    try:
        yield staging
    finally:
        if staging.exists():
            shutil.rmtree(staging)


def publish_folder(staging: Path, out: Path, owner: FolderOwner, document: dict[str, Any]) -> None:
    """Make the complete folder ``staging`` (from :func:`staged_folder`, holding ``document["files"]``) the
    content of ``out``, marker last, and only now remove the earlier run's files.

    ``out`` is checked again (:func:`check_folder`), since a long run gives others time to write there. A new
    ``out`` is the staging folder renamed, whole at once. Into an existing one the marker first says
    ``"complete": false`` and lists the earlier files and the new, the files the earlier marker lists are removed,
    the new ones moved in (each replacing its namesake in one rename), and the final marker moved in last: a run
    killed in between leaves a folder its next run may replace, and nothing else in ``out`` is touched."""
    files: Sequence[str] = document["files"]
    write_marker(staging, owner, document)
    earlier = check_folder(out, owner)
    if not os.path.lexists(out):
        os.rename(staging, out)
        return
    write_marker(out, owner, {"complete": False, "files": sorted({*earlier, *files})})
    for name in earlier:
        if name not in files:
            (out / name).unlink(missing_ok=True)
    for name in files:
        os.replace(staging / name, out / name)
    os.replace(staging / owner.marker, out / owner.marker)
    staging.rmdir()


# ---------------------------------------------------------------------------------------------- collector notes


def _marker(snapshot: Path) -> dict[str, Any] | None:
    """The collector's ``_snapshot.json`` (None when the file is absent)."""
    status = snapshot / MARKER
    if not status.is_file():
        return None
    try:
        document = json.loads(status.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise SnapshotError(f"snapshot {snapshot}: {MARKER} is not JSON: {error}") from None
    if not isinstance(document, dict):
        raise SnapshotError(f"snapshot {snapshot}: {MARKER} must be a JSON object")
    return document


def snapshot_partial(snapshot: Path) -> bool:
    """The collector's ``_snapshot.json`` partial flag (False when the file is absent)."""
    document = _marker(snapshot) or {}
    if not isinstance(document.get("partial", False), bool):
        raise SnapshotError(f'snapshot {snapshot}: {MARKER} must be an object with "partial": true or false')
    return bool(document.get("partial", False))


@dataclass(frozen=True)
class Settle:
    """The collector's second reads (``_snapshot.json``'s ``settle``): the live groups whose first read showed an
    ownership problem were read again ``seconds`` later, and showed the same holdings (``held``), other holdings
    still with a problem (``moving``), or none any more (``settled``)."""

    seconds: float
    held: frozenset[str]
    moving: frozenset[str]
    settled: frozenset[str]


def collector_settle(snapshot: Path) -> Settle | None:
    """The collector's record of its second reads, or None for a snapshot without one (taken before it existed,
    with ``--settle 0``, or by fleet-gen): its ownership findings then rest on one read."""
    record = (_marker(snapshot) or {}).get("settle")
    if record is None:
        return None
    try:
        seconds = record["seconds"]
        groups = {verdict: record[verdict] for verdict in ("held", "moving", "settled")}
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds <= 0:
            raise ValueError
        if not all(isinstance(g, list) and all(isinstance(name, str) for name in g) for g in groups.values()):
            raise ValueError
    except (KeyError, TypeError, ValueError):
        raise SnapshotError(
            f'snapshot {snapshot}: {MARKER}\'s "settle" must hold "seconds" above 0 and the lists "held", "moving" '
            'and "settled" of group names'
        ) from None
    return Settle(float(seconds), *(frozenset(groups[v]) for v in ("held", "moving", "settled")))


def collector_notes(snapshot: Path) -> list[dict[str, Any]]:
    """The collector's ``rejected.jsonl`` rows (none when the file is absent): what it could not read, and why."""
    notes: list[dict[str, Any]] = []
    rejected = snapshot / COLLECTOR_REJECTED
    if rejected.is_file():
        for number, line in enumerate(rejected.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                row = None
            if not isinstance(row, dict):
                raise SnapshotError(f"snapshot {snapshot}: {COLLECTOR_REJECTED} line {number} is not a JSON object")
            notes.append({key: row.get(key) for key in ("group", "client_id", "reason")})
    notes.sort(key=lambda r: tuple(str(r[k] or "") for k in ("group", "client_id", "reason")))
    return notes
