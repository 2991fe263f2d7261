"""Sphinx configuration of the rocket-rebalance site (``make docs``; ``make lint`` runs it).

Why Sphinx (with MyST markdown and the Furo theme) rather than an MkDocs-family generator: the docstrings are
already written with Sphinx's roles (``:class:``, ``:meth:``, ``:mod:``), so autodoc renders the API reference
from them as they are, and its cross-references are checked (``nitpicky``: a reference to a name that does not
exist is a warning, and ``-W`` makes every warning an error). Sphinx is the long-maintained standard of Python
documentation; MkDocs 1.x has had no release since 2024 and its main theme is in maintenance, so building the
site on it, or on one of the newer generators that replace it, is the maturity risk the issue warns of. MyST
keeps the pages plain Markdown, readable on GitHub as they are, and lets the site include README.md as its
front page.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout's package, not an installed copy
sys.path.insert(0, str(Path(__file__).resolve().parent / "_ext"))

project = "rocket-rebalance"
copyright = "the rocket-rebalance authors"

extensions = ["myst_parser", "sphinx.ext.autodoc", "snippets"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext"]

# A broken reference (a page, an anchor, a Python name) is a warning, and the build runs with -W.
nitpicky = True
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}

html_theme = "furo"
html_title = "rocket-rebalance"
