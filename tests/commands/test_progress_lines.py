"""Each long command says how far it is on stderr, every line labelled with the command's own name; a stream that
is not a terminal (here: pytest's capture, or a pipe) gets plain lines; ``--quiet`` silences them, not the result.

``impact`` and ``audit`` need Spark for their whole run: theirs are in tests/pipeline/test_progress_commands.py; their
``--quiet`` is checked here, on a snapshot refused before Spark starts (after their first step's line)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from rocket_rebalance.cli import main as cli_main
from tests.hostile.test_snapshot_cli import run, vanishing_cluster  # noqa: F401  (the fixture)
from tests.progress_lines import progress_of
from tests.scripted_server import ScriptedServer


def test_fleet_gen_says_how_many_groups_it_generated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["fleet-gen", "--groups", "40", "--out", str(tmp_path / "fleet")]) == 0
    err = capsys.readouterr().err
    lines = progress_of(err, "fleet-gen")
    assert lines[0].endswith(f"generating 40 groups into {tmp_path / 'fleet'}"), err
    assert " generating 40 groups into " in lines[-1] and lines[-1].split(": ")[-1].startswith("40/40 groups in ")
    assert err.splitlines()[len(lines)] == f"fleet-gen: 40 groups written to {tmp_path / 'fleet'}"  # then the result


def test_fleet_gen_quiet_says_only_its_result(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["fleet-gen", "--groups", "5", "--out", str(tmp_path / "fleet"), "--quiet"]) == 0
    captured = capsys.readouterr()
    assert captured.err == f"fleet-gen: 5 groups written to {tmp_path / 'fleet'}\n"
    assert "groups" in captured.out  # the row counts


def test_snapshot_says_how_many_groups_it_read(
    tmp_path: Path,
    vanishing_cluster: Callable[[set[str]], ScriptedServer],  # noqa: F811
) -> None:
    """GID_a read, then the cluster goes before GID_b is: the progress says both were tried, then the partial
    line."""
    server = vanishing_cluster({"GID_a"})
    done = run("-n", server.address, "--out", tmp_path / "snap", "--timeout", "2", "--concurrency", "1")
    *lines, result = done.stderr.splitlines()
    assert lines == progress_of(done.stderr, "snapshot") and lines, done.stderr
    assert lines[0].endswith(" reading consumer groups") and lines[-1].endswith(" rejected"), lines
    assert lines[-1].split(": ")[-1].startswith("2/2 groups in "), lines
    assert result.startswith("rocket-rebalance: the snapshot is partial"), result
    server = vanishing_cluster({"GID_a"})
    quiet = run("-n", server.address, "--out", tmp_path / "snap", "--timeout", "2", "--concurrency", "1", "--quiet")
    assert quiet.stderr.splitlines() == [result], quiet.stderr


@pytest.mark.parametrize("command", ["impact", "audit"])
def test_quiet_leaves_only_the_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    (tmp_path / "empty").mkdir()
    argv = [command, "--snapshot", str(tmp_path / "empty"), "--out", str(tmp_path / "out")]
    assert cli_main(argv) == 2
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 2 and said[0] in progress_of(said[0], command) and said[1].startswith("rocket-rebalance: ")
    assert cli_main([*argv, "--quiet"]) == 2
    assert capsys.readouterr().err.splitlines() == said[1:]
