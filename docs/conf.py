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

extensions = ["myst_parser", "sphinx.ext.autodoc", "references", "snippets"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext"]

# A broken reference (a page, an anchor, a Python name) is a warning, and the build runs with -W.
nitpicky = True
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"show-inheritance": True}

# The site is built offline, so the standard library's and other projects' inventories (intersphinx) cannot be
# fetched: their names in signatures stay plain text instead of failing the build.
nitpick_ignore_regex = [
    (r"py:.*", r"(collections\.abc|os|enum|abc|pathlib|typing|asyncio|hypothesis|prometheus_client)\..*"),
    (r"py:class", r"(Path|CollectorRegistry)"),  # names of a string annotation, as its module imports them
]
# Internal names that public signatures mention but users never touch: the engines a consumer runs on, type
# variables, the wire's interface (a test seam), and the core's helpers. Listed one by one, so any other
# reference that points nowhere still fails the build.
nitpick_ignore = [
    ("py:class", "rocket_rebalance.runtime.engine.Engine"),
    ("py:class", "rocket_rebalance.runtime.async_engine.AsyncEngine"),
    ("py:obj", "rocket_rebalance.runtime.consumer.E"),
    ("py:class", "rocket_rebalance.strategies.base.Prepared"),
    ("py:obj", "rocket_rebalance.strategies.base.Prepared"),
    ("py:class", "rocket_rebalance.model.QueueList"),
    ("py:class", "rocket_rebalance.model.ClientIdList"),
    ("py:class", "QueueList"),
    ("py:class", "ClientIdList"),
    ("py:class", "rocket_rebalance.runtime.transport.Transport"),
    ("py:class", "rocket_rebalance.runtime.transport.AsyncTransport"),
    ("py:class", "Transport"),
    ("py:class", "AsyncTransport"),
    ("py:func", "default_consume_timestamp_ms"),
    ("py:class", "rocket_rebalance.runtime.offset_store.BrokerOffsets"),
    ("py:class", "BrokerOffsets"),
    ("py:mod", "dispatch"),  # the listener's answers, which docs/listeners.md tells
    ("py:mod", "rocket_rebalance.runtime.dispatch"),
    ("py:mod", "rocket_rebalance.runtime.metrics"),
    ("py:class", "ConsumeMetrics"),
]

html_theme = "furo"
html_title = "rocket-rebalance"
