"""Java parity: every recorded case, results in Java's order, errors with Java's messages."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from rocket_rebalance.model import prepare_rebalance_input, queues_of
from tests.strategies.golden import golden_files, read_cases, run_case

CASES: list[tuple[str, dict[str, Any]]] = [
    (f"{path.parent.name}/{path.stem}:{case['id']}", case) for path in golden_files() for case in read_cases(path)
]


def test_the_shipped_subset_is_read() -> None:
    assert sum(1 for label, _ in CASES if label.startswith("golden/allocate_subset:")) >= 300


@pytest.mark.parametrize("case", [case for _, case in CASES], ids=[label for label, _ in CASES])
def test_java_outcome(case: dict[str, Any]) -> None:
    assert run_case(case) == case["expected"]


PRESORTED = [(label, case) for label, case in CASES if case["presorted"] and case["mqAll"] and case["cidAll"]]


@pytest.mark.parametrize("case", [case for _, case in PRESORTED], ids=[label for label, _ in PRESORTED])
def test_rebalance_sort_is_javas(case: dict[str, Any]) -> None:
    """The Java client's sort produced these lists; ours, from a shuffled copy, must give the same order."""
    queues = queues_of(case["mqAll"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prepared = prepare_rebalance_input(reversed(queues), reversed(case["cidAll"]))
    assert list(prepared.mq_all) == queues
    assert list(prepared.cid_all) == case["cidAll"]


def test_golden_files_exist() -> None:
    assert all(Path(path).exists() for path in golden_files())
