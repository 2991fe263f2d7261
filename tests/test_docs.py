"""The docs' promises that no build checks: the first consumer a user copies from the install page is the README's,
the one tests/e2e/test_examples.py runs against the stub (the docs build only type-checks the install page's copy)."""

from __future__ import annotations

import re

from tests.e2e.test_examples import readme_consumer
from tests.stub.harness import REPO_ROOT


def test_install_page_shows_the_readme_consumer() -> None:
    page = (REPO_ROOT / "docs" / "install.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, re.DOTALL)
    assert readme_consumer() in blocks, "docs/install.md's first consumer differs from the README's"
