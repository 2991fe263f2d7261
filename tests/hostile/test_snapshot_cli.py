"""Hostile input to ``rocket-rebalance snapshot``: a bad address, a name server that is not there or never answers,
an ``--out`` that is a file or somebody else's folder, bad patterns, concurrency or timeout out of range. Each is
one line on stderr and exit status 2, and an ``--out`` that is refused is left exactly as it was."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hostile.cli import one_line_error, run_cli


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return run_cli("snapshot", *args, timeout=60)


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A TCP port that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield f"127.0.0.1:{server.getsockname()[1]}"


def free_address() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"  # closed again: nothing listens there


@pytest.mark.parametrize("address", ["localhost", "127.0.0.1:99999", "grpc://", "host name:9876"])
def test_a_bad_address_is_one_line(address: str, tmp_path: Path) -> None:
    one_line_error(run("-n", address, "--out", tmp_path / "out"), "is not HOST:PORT")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("scheme", ["", "grpc://"])
def test_an_unreachable_name_server_is_one_line_and_writes_nothing(tmp_path: Path, scheme: str) -> None:
    out = tmp_path / "out"
    one_line_error(run("-n", scheme + free_address(), "--out", out), "cannot reach the name server")
    assert not out.exists()


def test_a_name_server_that_never_answers_times_out_in_one_line(tmp_path: Path, silent_server: str) -> None:
    one_line_error(run("-n", silent_server, "--out", tmp_path / "out", "--timeout", "0.5"), "cannot reach", "no answer")


def test_out_must_not_be_a_file(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("mine", encoding="utf-8")
    one_line_error(run("-n", free_address(), "--out", target), "is a file")
    one_line_error(run("-n", free_address(), "--out", target / "below"), "cannot be created", "not a folder")
    assert target.read_text(encoding="utf-8") == "mine"


def test_a_foreign_folder_is_refused_and_left_alone(tmp_path: Path) -> None:
    out = tmp_path / "data"
    out.mkdir()
    (out / "routes.jsonl").write_text("precious\n", encoding="utf-8")
    one_line_error(run("-n", free_address(), "--out", out), "not empty", "_snapshot.json")
    (out / "_snapshot.json").write_text(
        json.dumps({"written_by": "rocket-rebalance snapshot", "files": ["routes.jsonl", "../elsewhere"]}),
        encoding="utf-8",
    )
    one_line_error(run("-n", free_address(), "--out", out), "../elsewhere", "never writes")
    for forged in ('{"files": ["routes.jsonl"]}', '{"written_by": "rocket-rebalance snapshot", "files": "routes"}'):
        (out / "_snapshot.json").write_text(forged, encoding="utf-8")
        one_line_error(run("-n", free_address(), "--out", out), "is not a snapshot's _snapshot.json")
    assert (out / "routes.jsonl").read_text(encoding="utf-8") == "precious\n"


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("--group", "", "--group '' is not a pattern"),
        ("--group", "GID orders", "is not a pattern of RocketMQ names"),
        ("--topic", "Topic[", "--topic 'Topic['"),
        ("--topic", "a/b", "is not a pattern"),
        ("--concurrency", "0", "--concurrency must be 1 to 64"),
        ("--concurrency", "65", "--concurrency must be 1 to 64"),
    ],
)
def test_bad_options_are_one_line(option: str, value: str, expected: str, tmp_path: Path) -> None:
    one_line_error(run("-n", free_address(), "--out", tmp_path / "out", option, value), expected)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", ["0", "nan", "inf", "-1"])
def test_a_timeout_that_is_no_duration_is_a_usage_error(value: str, tmp_path: Path) -> None:
    """Refused while the command line is parsed, by the library's one duration check (issue 26: 11)."""
    done = run("-n", free_address(), "--out", tmp_path / "out", "--timeout", value)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("rocket-rebalance snapshot: error: argument --timeout: must be a finite number")
    assert not (tmp_path / "out").exists()
