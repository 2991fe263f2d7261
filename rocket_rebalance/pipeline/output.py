"""The output folder of ``impact``: refused when it overlaps an input, and cleared of nothing but our own files.

Each run replaces the previous run's tables, so the job deletes things in a folder the user named. A typo there
(``--out`` equal to ``--snapshot``, or a folder of someone else's files) must cost a one-line error, never data:

* an output folder that is, contains or lies inside an input (a snapshot folder, one of its tables, the scenario
  file) is refused before anything is written;
* a run marks its folder with :data:`MARKER` before it writes anything; a later run clears only a marked folder
  (or an unmarked one that holds nothing but our output names, at least one of them a table folder of our part
  files: an earlier version's output, written before the marker existed); any other non-empty folder is refused.
  Output names alone prove nothing: a user's own ``summary.json`` and ``report.md`` would pass for ours;
* even in our own folder only what the job writes is removed: the known tables, and in them only part files and
  Spark's bookkeeping files; a foreign file inside a table folder is refused rather than deleted or read as data.
  With ``--writer spark --format F`` a table is the folder ``<table>.F``: such folders are ours too (so switching
  the format leaves no stale table of the other), but a *file* of that name, which the job never writes, is left.

Paths are handled through pyarrow's file systems, so the same rules hold for ``hdfs://`` and ``s3a://`` outputs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath

import pyarrow.fs as pafs

from rocket_rebalance.pipeline.report import CHART_FILES, CHARTS_FOLDER, REPORT_FILES
from rocket_rebalance.pipeline.schema import OUTPUT_TABLES
from rocket_rebalance.pipeline.worker import filesystem

__all__ = ["MARKER", "OutputError", "check_output", "claim_output", "clear_output"]

MARKER = "_rocket-rebalance-impact.json"
"""Written first into every output folder; ``_``-prefixed, so Spark and pyarrow readers skip it."""

_FILES = ("summary.json", *REPORT_FILES)
_TABLES = tuple(f"{name}.parquet" for name in OUTPUT_TABLES)
_KNOWN = frozenset((*_TABLES, *_FILES, CHARTS_FOLDER, MARKER))

_OTHER_FORMAT_TABLES = re.compile(rf"({'|'.join(OUTPUT_TABLES)})\.[a-z][a-z0-9]*")
"""``<table>.<format>``: a table folder Spark's writer wrote in another format than Parquet (``--format``)."""

_OWN_TABLE_ENTRY = re.compile(r"\.?_?part-.+|\.?_SUCCESS(\.crc)?|_temporary")
"""What the job puts in a table folder: executors' part files (and their ``_``-prefixed temporaries), and what
Spark's writer adds: its part files, ``.crc`` checksums, ``_SUCCESS``, ``_temporary``."""

_PART_FILE = re.compile(r"part-.+")
"""A finished part file, the one entry every table folder the job writes holds."""


class OutputError(ValueError):
    """An output folder the job will not write to; nothing has been touched when this is raised."""


def _comparable(path: Path | str) -> tuple[str, PurePosixPath]:
    """``(file system, absolute path)`` for comparing locations: local paths resolved (symlinks followed)."""
    text = str(path)
    if text.startswith("file://"):
        text = text[len("file://") :]
    if "://" not in text:
        return "", PurePosixPath(Path(text).resolve())
    scheme, rest = text.split("://", 1)
    authority, _, tail = rest.partition("/")
    scheme = "s3" if scheme in ("s3a", "s3n") else scheme
    return f"{scheme}://{authority}", PurePosixPath("/" + tail.rstrip("/"))


def check_output(out: str, inputs: Iterable[Path | str]) -> None:
    """Refuse an output location that is, contains or lies inside one of ``inputs``; reads nothing."""
    where, target = _comparable(out)
    for source in inputs:
        source_where, path = _comparable(source)
        if source_where != where:
            continue
        if target == path:
            relation = "is"
        elif path in target.parents:
            relation = "lies inside"
        elif target in path.parents:
            relation = "contains"
        else:
            continue
        raise OutputError(f"--out {out} {relation} the input {source}; give an output folder apart from the inputs")


def _entries(fs: pafs.FileSystem, folder: str) -> list[pafs.FileInfo]:
    return list(fs.get_file_info(pafs.FileSelector(folder, allow_not_found=True)))


def _name(info: pafs.FileInfo) -> str:
    return str(info.path).rstrip("/").rsplit("/", 1)[-1]


def _is_table(info: pafs.FileInfo) -> bool:
    """An output table's entry: ``<table>.parquet`` whatever it is, or a folder ``<table>.<format>``."""
    name = _name(info)
    return name in _TABLES or (info.type == pafs.FileType.Directory and bool(_OTHER_FORMAT_TABLES.fullmatch(name)))


def _foreign_in_tables(fs: pafs.FileSystem, base: str, entries: Sequence[pafs.FileInfo]) -> str | None:
    """The first path under an output name that the job would not have written there, or ``None``."""
    for info in entries:
        name = _name(info)
        if _is_table(info):
            if info.type != pafs.FileType.Directory:  # the job writes every table as a folder of part files
                return str(info.path)
            for inner in _entries(fs, info.path):
                if not _OWN_TABLE_ENTRY.fullmatch(_name(inner)):
                    return str(inner.path)
        elif name in _FILES and info.type != pafs.FileType.File:
            return str(info.path)
    return None


def _our_table(fs: pafs.FileSystem, info: pafs.FileInfo) -> bool:
    """A table folder of our making: at least one part file, and nothing the job would not have written."""
    if not _is_table(info) or info.type != pafs.FileType.Directory:
        return False
    names = [_name(inner) for inner in _entries(fs, info.path)]
    return any(_PART_FILE.fullmatch(n) for n in names) and all(_OWN_TABLE_ENTRY.fullmatch(n) for n in names)


def claim_output(out: str, inputs: Iterable[Path | str] = ()) -> None:
    """Check ``out`` (see the module's rules), create it and mark it as ours; raises :class:`OutputError`.

    Run before Spark starts, so a wrong ``--out`` costs a second. Nothing is deleted here: :func:`clear_output`
    does that once the job is about to write.
    """
    check_output(out, inputs)
    fs, base = filesystem(out)
    try:
        info = fs.get_file_info(base)
        if info.type not in (pafs.FileType.NotFound, pafs.FileType.Directory):
            raise OutputError(f"--out {out} is a file, not a folder")
        entries = _entries(fs, base) if info.type == pafs.FileType.Directory else []
        names = {_name(entry) for entry in entries}
        earlier_version = names <= _KNOWN and any(_our_table(fs, entry) for entry in entries)
        if entries and MARKER not in names and not earlier_version:
            shown = ", ".join(sorted(names)[:3]) + (", ..." if len(names) > 3 else "")
            raise OutputError(
                f"--out {out} is not empty and holds no earlier impact output (it has {shown}); "
                "give an empty or new folder"
            )
        foreign = _foreign_in_tables(fs, base, entries)
        if foreign is not None:
            raise OutputError(
                f"--out {out}: {foreign} was not written by rocket-rebalance; remove it or give another folder"
            )
        fs.create_dir(base, recursive=True)
        with fs.open_output_stream(f"{base}/{MARKER}") as marker:
            marker.write(json.dumps({"written_by": "rocket-rebalance impact"}).encode())
    except OSError as error:
        raise OutputError(f"--out {out}: cannot write there ({error})") from None


def clear_output(out: str) -> None:
    """Remove what an earlier run wrote into a claimed ``out``: its tables, summary, report and charts, only."""
    fs, base = filesystem(out)
    for info in _entries(fs, base):
        name = _name(info)
        if _is_table(info) and info.type == pafs.FileType.Directory:
            for inner in _entries(fs, info.path):
                if not _OWN_TABLE_ENTRY.fullmatch(_name(inner)):
                    raise OutputError(f"--out {out}: {inner.path} was not written by rocket-rebalance; remove it")
                if inner.type == pafs.FileType.Directory:
                    fs.delete_dir(inner.path)
                else:
                    fs.delete_file(inner.path)
            fs.delete_dir(info.path)
        elif name in _FILES and info.type == pafs.FileType.File:
            fs.delete_file(info.path)
        elif name == CHARTS_FOLDER and info.type == pafs.FileType.Directory:
            for chart in _entries(fs, info.path):
                if _name(chart) in CHART_FILES and chart.type == pafs.FileType.File:
                    fs.delete_file(chart.path)
