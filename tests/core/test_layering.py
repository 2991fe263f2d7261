"""The core is sans-I/O: it may import only the pure layers, sortedcontainers and a few harmless stdlib modules."""

from __future__ import annotations

import ast
from pathlib import Path

import rocket_rebalance.core

CORE = Path(rocket_rebalance.core.__file__).parent
ALLOWED = {
    "__future__",
    "collections",
    "dataclasses",
    "enum",
    "math",
    "typing",
    "sortedcontainers",
    "rocket_rebalance.core",
    "rocket_rebalance.model",
    "rocket_rebalance.strategies",
    "rocket_rebalance.plan",
}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_core_imports_nothing_that_does_io_threads_or_clocks() -> None:
    files = sorted(CORE.glob("*.py"))
    assert files
    for path in files:
        for name in _imports(path):
            assert any(name == ok or name.startswith(ok + ".") for ok in ALLOWED), f"{path.name} imports {name}"
