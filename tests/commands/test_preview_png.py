"""``allocate-mq --format png`` and ``simulate --format png``: ownership grids written to ``--output``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from rocket_rebalance import cli
from rocket_rebalance.model import MessageQueue
from rocket_rebalance.pictures import OwnershipGrid, grid_figure
from rocket_rebalance.plan import movement, plan
from rocket_rebalance.strategies import create_strategy
from tests.commands.conftest import RunCli

PNG = b"\x89PNG\r\n\x1a\n"
QUEUES = [MessageQueue("TopicTest", broker, i) for broker in ("broker-a", "broker-b") for i in range(4)]


def test_allocate_mq_draws_who_owns_what(route_file: Path, tmp_path: Path, run_cli: RunCli) -> None:
    out = tmp_path / "grid.png"
    done = run_cli("allocate-mq", "-t", "TopicTest", "-i", "c1,c2,c3", "--route", route_file, "--format", "png",
                   "--output", out)  # fmt: skip
    assert out.read_bytes().startswith(PNG)
    assert done.stdout == f"wrote {out}: 1 ownership grid\n"


def test_simulate_draws_a_grid_per_strategy_and_topic(route_file: Path, tmp_path: Path, run_cli: RunCli) -> None:
    out = tmp_path / "grid.png"
    done = run_cli("simulate", "-t", "TopicTest", "-i", "c1,c2", "--join", "c3", "--route", route_file, "--strategy",
                   "AVG", "--strategy", "CONSISTENT_HASH", "--format", "png", "--output", out)  # fmt: skip
    assert out.read_bytes().startswith(PNG)
    assert done.stdout == f"wrote {out}: 2 ownership grids\n"


def test_the_simulated_grid_marks_exactly_the_moved_queues(
    route_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drawn: list[OwnershipGrid] = []
    real = grid_figure

    def keep(grids: list[OwnershipGrid], compare: bool) -> Any:
        drawn.extend(grids)
        return real(grids, compare)

    monkeypatch.setattr("rocket_rebalance.commands.preview.grid_figure", keep)
    argv = ["simulate", "-t", "TopicTest", "-i", "c1,c2", "--join", "c3", "--route", str(route_file), "--format",
            "png", "--output", str(tmp_path / "g.png")]  # fmt: skip
    assert cli.main(argv) == 0
    (grid,) = drawn
    before = plan(create_strategy("AVG"), "simulated_group", QUEUES, ["c1", "c2"])
    after = plan(create_strategy("AVG"), "simulated_group", QUEUES, ["c1", "c2", "c3"])
    assert {grid.queues[i] for i in grid.changed} == set(movement(before, after).moved)
    assert grid.consumers == ("c1", "c2", "c3")


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--format", "png"], "simulate --format png writes a file: give --output FILE"),
        (["--output", "x.png"], "--output is where --format png writes its picture; simulate --format text prints"),
        (["--json", "--format", "png", "--output", "x.png"], "--json is --format json; give one of --json and"),
    ],
)
def test_a_picture_without_a_file_or_a_file_without_a_picture_is_one_line(
    route_file: Path, run_cli: RunCli, extra: list[str], said: str
) -> None:
    done = run_cli("simulate", "-t", "TopicTest", "-i", "c1,c2", "--route", route_file, *extra, check=False)
    assert done.returncode == 2
    assert done.stderr.startswith(f"rocket-rebalance: {said}") and done.stderr.count("\n") == 1
    assert not Path("x.png").exists()


def test_without_matplotlib_the_command_names_the_extra(
    route_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what find_spec reports for a module that is not there
    out = tmp_path / "grid.png"
    argv = ["allocate-mq", "-t", "TopicTest", "-i", "c1", "--route", str(route_file), "--format", "png",
            "--output", str(out)]  # fmt: skip
    assert cli.main(argv) == 2
    assert capsys.readouterr().err == (
        "rocket-rebalance: allocate-mq --format png needs matplotlib, which comes with the spark extra: "
        "pip install 'rocket-rebalance[spark]'\n"
    )
    assert not out.exists()
