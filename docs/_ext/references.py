"""A Sphinx extension that resolves the docstrings' short references the way a reader does.

The docstrings name classes as their own module sees them (``:class:`RebalanceConfig``` in the consumers'
module, ``:meth:`resume``` beside ``pause``), while the API reference documents each at one place, often under the
name users import (``rocket_rebalance.PushConsumer``). Sphinx looks a plain reference up only by its full name, so
without this every such link would be a warning. Here a reference Sphinx could not resolve is looked up by its
last dotted part among the documented objects, and linked when exactly one matches; none, or several, stays a
warning, so a reference to a name that exists nowhere still fails the build (``-W``).
"""

from __future__ import annotations

from typing import Any

from docutils import nodes
from sphinx.addnodes import pending_xref
from sphinx.application import Sphinx
from sphinx.domains.python import PythonDomain
from sphinx.environment import BuildEnvironment
from sphinx.util.nodes import make_refnode


def resolve_short(app: Sphinx, env: BuildEnvironment, node: pending_xref, contnode: nodes.TextElement) -> Any:
    """The one documented object whose name ends with the reference's last part, or None (Sphinx then warns)."""
    if node.get("refdomain") != "py":
        return None
    domain = env.get_domain("py")
    assert isinstance(domain, PythonDomain)
    short = node["reftarget"].lstrip(".~").rsplit(".", 1)[-1]
    roles = domain.objtypes_for_role(node["reftype"]) or []
    matches = {
        name: entry
        for name, entry in domain.objects.items()
        if name.rsplit(".", 1)[-1] == short and entry.objtype in roles and not entry.aliased
    }
    if len(matches) != 1:
        return None
    ((name, entry),) = matches.items()
    return make_refnode(app.builder, node["refdoc"], entry.docname, entry.node_id, contnode, name)


def setup(app: Sphinx) -> dict[str, bool]:
    app.connect("missing-reference", resolve_short)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
