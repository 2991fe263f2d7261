"""A Sphinx extension that keeps the site's code honest: when the build ends, every ``python`` block of every page
(the README's too, included as the front page) is written out as a module of its own and type-checked with
``mypy --strict``, and every program in ``examples/`` must be included by a page.

Why here rather than in a test: the build is what publishes the snippets, so the build is what refuses a wrong
one. Each error is a warning naming the page and line (``docs/consumers.md:42``), and the site is built with
``-W``, so it fails ``make docs`` and ``make lint``. A snippet must therefore be a whole program: it imports what it
uses and defines the helpers it calls (``def handle(messages: list[Message]) -> None: ...``). The examples are
included with ``literalinclude`` and checked as files (``mypy --strict examples``) and run against the stub by
``tests/e2e/test_examples.py``, so their blocks are left out here.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
MYPY_LINE = re.compile(r"^(?P<file>[^:]+\.py):(?P<line>\d+): (?P<kind>error|note): (?P<message>.*)$")


@dataclass(frozen=True)
class Snippet:
    """One code block as found: the file it came from (a page, or the README it includes) and its fence's line."""

    source: str
    line: int
    code: str


def snippets(app: Sphinx) -> tuple[list[Snippet], set[Path]]:
    """Every ``python`` block of the built pages, and the files that ``literalinclude`` brought in."""
    found: list[Snippet] = []
    included: set[Path] = set()
    for docname in sorted(app.env.found_docs):
        for block in app.env.get_doctree(docname).findall(nodes.literal_block):
            if "source" in block.attributes:  # a literalinclude: the file is checked as itself
                included.add(Path(block["source"]).resolve())
                continue
            if block.get("language") not in ("python", "python3", "py"):
                continue
            source = block.source or str(app.env.doc2path(docname))
            found.append(Snippet(source, block.line or 0, block.astext()))
    return found, included


def report(problem: str) -> None:
    """A warning (an error under ``-W``) in the form editors jump to."""
    logger.warning(problem, type="snippets")


def type_check(app: Sphinx, found: list[Snippet]) -> None:
    """Write each snippet as a module under the build folder and run ``mypy --strict`` over them all at once."""
    folder = Path(app.outdir).parent / "snippets"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    origin: dict[str, Snippet] = {}
    for number, snippet in enumerate(found):
        path = folder / f"snippet_{number}_{Path(snippet.source).stem.replace('-', '_')}.py"
        path.write_text(snippet.code + "\n", encoding="utf-8")
        origin[str(path.relative_to(ROOT))] = snippet
    # From the checkout, so pyproject.toml's mypy settings (the overrides for untyped dependencies) apply.
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--show-error-codes", *sorted(origin)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode == 0:
        logger.info("snippets: %d python blocks type-check with mypy --strict", len(found))
        return
    matched = False
    for text in done.stdout.splitlines():
        hit = MYPY_LINE.match(text)
        if hit is None or hit["file"] not in origin:
            continue
        matched = True
        snippet = origin[hit["file"]]
        where = Path(snippet.source).resolve().relative_to(ROOT)
        report(f"{where}:{snippet.line + int(hit['line'])}: the snippet does not type-check: {hit['message']}")
    if not matched:  # mypy itself failed (a crash, a bad option): say what it said
        report(f"mypy --strict over the snippets exited {done.returncode}: {(done.stdout + done.stderr).strip()}")


def check(app: Sphinx, error: Exception | None) -> None:
    """At the end of a successful build: the snippets type-check, and every example is on a page."""
    if error is not None:
        return
    found, included = snippets(app)
    if not found:
        report("no python block found in the pages: the snippet check found nothing to check")
    else:
        type_check(app, found)
    for example in sorted(EXAMPLES.glob("*.py")):
        if example.resolve() not in included:
            report(f"examples/{example.name} is not included by any page (docs/examples.md includes each)")


def setup(app: Sphinx) -> dict[str, bool]:
    app.connect("build-finished", check)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
