"""The README's Python snippets type-check under ``mypy --strict``, as a user's code would be checked against the
installed package: a snippet that stops type-checking is a README that misleads.

A snippet that starts with an import is a whole program. One that does not (``consumer = PushConsumer(...)`` in
the sections on subscriptions, namespaces, credentials, TLS) continues the README's first consumer: it is checked
after :data:`CONTEXT`, the names that consumer gave (``PushConsumer``, a typed ``handle``, an address, ``os``)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONTEXT = """import os
from rocket_rebalance import Message, PushConsumer

addr = "127.0.0.1:9876"


def handle(messages: list[Message]) -> None: ...


"""


def snippets() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", (REPO / "README.md").read_text(), re.S | re.M)


def test_every_readme_snippet_passes_mypy_strict(tmp_path: Path) -> None:
    found = snippets()
    assert len(found) >= 10  # the section names above: a changed fence must not empty this test
    paths = []
    for number, code in enumerate(found):
        whole = code.startswith(("from ", "import "))
        path = tmp_path / f"readme_{number}.py"
        path.write_text(code if whole else CONTEXT + code)
        paths.append(str(path))
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"), *paths],
        capture_output=True,
        text=True,
        cwd=REPO,  # the package as this checkout has it, with its own settings for the generated code
        timeout=600,  # a hang bound on a loaded machine
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
