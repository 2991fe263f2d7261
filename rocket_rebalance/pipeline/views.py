"""Views given by digest: a collector may record the member list a consumer last received as its MD5 only."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

from rocket_rebalance.model import sort_client_ids

__all__ = ["resolve_views", "view_digest"]


def view_digest(client_ids: Iterable[str]) -> str:
    """The digest that stands for a member list in a snapshot's ``view_digest`` column.

    Hex MD5 of the client IDs in Java order (duplicates kept), each followed by a newline, in UTF-8: a collector
    that records what each consumer last received can store this instead of the whole list.
    """
    text = "".join(f"{cid}\n" for cid in sort_client_ids(client_ids))
    return hashlib.md5(text.encode("utf-8", "surrogatepass")).hexdigest()


def resolve_views(
    members: list[dict[str, Any]], live: Sequence[str], known: Sequence[Sequence[str]]
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Members whose view is given only by digest get the list the digest names, when it names one we know.

    Known lists: the side's own member list, every view recorded in full in the group, and ``known`` (for the after
    side, the before side's list: the usual stale view right after a change). A recorded ``view`` wins over a
    digest. Returns the members, with the view of an unresolvable digest set to nothing, and those consumers'
    digests (what they take cannot be computed; they are reported, not guessed).
    """
    if not any(m.get("view_digest") for m in members):
        return members, {}
    own = view_digest(live)
    lists = {
        view_digest(ids): list(ids) for ids in (*known, *(m["view"] for m in members if m.get("view") is not None))
    }
    resolved: list[dict[str, Any]] = []
    unknown: dict[str, str] = {}
    for member in members:
        digest = member.get("view_digest")
        if member.get("view") is not None or not digest or digest == own:
            resolved.append(member)
        elif digest in lists:
            resolved.append({**member, "view": lists[digest]})
        else:
            resolved.append({**member, "view": []})
            unknown[member["client_id"]] = digest
    return resolved, unknown
