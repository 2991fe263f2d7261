"""Files a person names (``--route``, ``--members``, ``--offsets``, and the API's offsets file) are read only when
they are regular files of a sane size: ``/dev/zero``, a FIFO, a folder or a huge file is one line, not a hang, a
memory blow-up or a traceback (probe 2026-11-24, finding 12)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rocket_rebalance.inputs import MAX_INPUT_BYTES, InputFileError, read_input_text
from rocket_rebalance.pipeline import SAMPLE_SNAPSHOT
from rocket_rebalance.runtime.offset_store import LocalFileOffsetStore, OffsetStoreError
from tests.hostile.cli import one_line_error, run_cli


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


@pytest.fixture
def huge(tmp_path: Path) -> Path:
    """A sparse file just over the limit: its size is real, its disk use nil."""
    path = tmp_path / "huge.json"
    with path.open("wb") as handle:
        handle.truncate(MAX_INPUT_BYTES + 1)
    return path


def hostile_paths(tmp_path: Path, fifo: Path, huge: Path) -> list[tuple[Path, str]]:
    return [
        (Path("/dev/zero"), "not a regular file"),
        (fifo, "not a regular file"),
        (tmp_path, "not a regular file"),
        (huge, f"larger than the {MAX_INPUT_BYTES} bytes"),
    ]


def test_the_reader_refuses_what_is_not_a_small_regular_file(tmp_path: Path, fifo: Path, huge: Path) -> None:
    for path, reason in hostile_paths(tmp_path, fifo, huge):
        with pytest.raises(InputFileError, match=reason):
            read_input_text(path, "--route")
    small = tmp_path / "ok.json"
    small.write_text("[1]", encoding="utf-8")
    assert read_input_text(small, "--route") == "[1]"
    with pytest.raises(InputFileError, match="larger than the 2 bytes"):
        read_input_text(small, "--route", limit=2)
    small.write_bytes(b"\xff\xfe")
    with pytest.raises(InputFileError, match="not UTF-8"):
        read_input_text(small, "--route")
    with pytest.raises(FileNotFoundError):  # callers decide what a missing file means
        read_input_text(tmp_path / "absent", "--route")


def test_route_and_member_files_are_one_line(tmp_path: Path, fifo: Path, huge: Path) -> None:
    route = tmp_path / "route.json"
    route.write_text('{"queueDatas": [{"brokerName": "b", "readQueueNums": 4}]}', encoding="utf-8")
    for path, reason in hostile_paths(tmp_path, fifo, huge):
        one_line_error(run_cli("allocate-mq", "-t", "T", "-i", "a,b", "--route", path, timeout=60), "--route", reason)
        one_line_error(
            run_cli("simulate", "-t", "T", "--route", route, "--members", path, "--join", "x", timeout=60),
            "--members",
            reason,
        )


def test_an_offsets_file_that_is_no_file_stops_the_consumer_in_one_line(tmp_path: Path, fifo: Path) -> None:
    for path in (Path("/dev/zero"), fifo):
        with pytest.raises(OffsetStoreError, match="not a regular file"):
            LocalFileOffsetStore(path)
        done = run_cli(
            "consume",
            "-n",
            "127.0.0.1:9",
            "-g",
            "GID_x",
            "-t",
            "TopicTest",
            "--broadcast",
            "--offsets",
            path,
            timeout=60,
        )
        one_line_error(done, "not a regular file")


def test_a_scenario_file_that_is_no_file_is_one_line_before_spark_starts(tmp_path: Path, fifo: Path) -> None:
    for path in (Path("/dev/zero"), fifo):
        done = run_cli(
            "impact", "--snapshot", SAMPLE_SNAPSHOT, "--scenario", path, "--out", tmp_path / "out", timeout=60
        )
        one_line_error(done, "--scenario", "not a regular file")
