"""Scenarios: a change (joins, leaves, a broker down, a strategy switch) applied to every group of a snapshot.

A scenario is checked whole before any work starts (:func:`load_scenario`), then applied group by group in the
executors (:func:`apply_scenario`), which derive each group's ``after`` side from its ``before`` side.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rocket_rebalance.model import MAX_GROUP_MEMBERS, check_group_name, sort_client_ids
from rocket_rebalance.pipeline.settings import parse_strategy

__all__ = ["ACTIONS", "Scenario", "ScenarioError", "apply_scenario", "joiner_ids", "load_scenario"]


class ScenarioError(ValueError):
    """A scenario file that cannot be applied: unknown action, a missing field, a group name RocketMQ refuses."""


ACTIONS = ("join", "leave", "broker_down", "strategy")


@dataclass(frozen=True)
class Scenario:
    """A change to apply to every group of a snapshot; see :func:`load_scenario` for the file format."""

    changes: tuple[Mapping[str, Any], ...]
    name: str = "scenario"


def _check_change(position: int, change: object) -> Mapping[str, Any]:
    where = f"scenario change {position}"
    if not isinstance(change, dict):
        raise ScenarioError(f"{where}: must be a JSON object")
    action = change.get("action")
    if action not in ACTIONS:
        raise ScenarioError(f"{where}: unknown action {action!r}; valid: {', '.join(ACTIONS)}")
    group = change.get("group", "*")
    if not (isinstance(group, str) or (isinstance(group, list) and all(isinstance(g, str) for g in group))):
        raise ScenarioError(f"{where}: group must be a name, a list of names or '*'")
    for name in [group] if isinstance(group, str) else group:
        if name != "*":  # a group no broker would accept matches none of the snapshot: a typo, not a wish
            try:
                check_group_name(name)
            except ValueError as error:
                raise ScenarioError(f"{where}: {error}") from None
    if action in ("join", "leave"):
        ids, count = change.get("client_ids"), change.get("count")
        if ids is None and count is None:
            raise ScenarioError(f"{where}: {action} needs client_ids or count")
        if ids is not None and not (isinstance(ids, list) and all(isinstance(c, str) and c for c in ids)):
            raise ScenarioError(f"{where}: client_ids must be a list of non-empty strings")
        if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 0):
            raise ScenarioError(f"{where}: count must be a non-negative integer")
        if len(ids or ()) > MAX_GROUP_MEMBERS or (count or 0) > MAX_GROUP_MEMBERS:
            # every executor would build the joiners of every group: a typed extra digit must not exhaust them
            raise ScenarioError(f"{where}: at most {MAX_GROUP_MEMBERS} consumers join or leave a group at once")
    elif action == "broker_down":
        if not isinstance(change.get("broker"), str) or not change["broker"]:
            raise ScenarioError(f"{where}: broker_down needs a broker name")
    else:
        options = change.get("options")
        try:
            parse_strategy(change.get("strategy"), json.dumps(options) if options else None)
        except (ValueError, TypeError) as error:
            raise ScenarioError(f"{where}: {error}") from None
    return change


def load_scenario(data: Mapping[str, Any] | str) -> Scenario:
    """Check a scenario (a parsed JSON object or its text) before any work starts.

    ``{"name": "...", "changes": [change, ...]}`` where each change has an ``action`` and, except
    ``broker_down``, a ``group`` (a name, a list of names, or ``"*"`` for the whole fleet; default ``"*"``):

    * ``join``: ``client_ids`` (list) or ``count`` (generated IDs ``10.254.x.y@scenario#k``) join the group;
    * ``leave``: ``client_ids`` leave, or the last ``count`` consumers in Java order (all, in a smaller group);
    * ``broker_down``: ``broker``: its queues vanish from every route;
    * ``strategy``: ``strategy`` and optional ``options`` (an object) replace the group's settings.

    ``"notified": false`` on a join or leave keeps the consumers already there on the old member list (a split
    view: the window before NOTIFY_CONSUMER_IDS_CHANGED arrives); by default everybody sees the new list.
    """
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as error:
            raise ScenarioError(f"scenario is not JSON: {error}") from None
    if not isinstance(data, dict) or not isinstance(data.get("changes"), list):
        raise ScenarioError('a scenario is a JSON object with a list of changes: {"changes": [...]}')
    changes = tuple(_check_change(position, change) for position, change in enumerate(data["changes"]))
    return Scenario(changes, str(data.get("name", "scenario")))


def _applies(change: Mapping[str, Any], group: str) -> bool:
    target = change.get("group", "*")
    return target == "*" or target == group or (isinstance(target, list) and group in target)


def joiner_ids(count: int) -> list[str]:
    """Client IDs for ``count`` generated joiners, in the Java client's ``ip@pid#nanotime`` shape."""
    return [f"10.254.{k // 250}.{k % 250 + 1}@scenario#{k}" for k in range(count)]


def apply_scenario(group: str, before: Mapping[str, Any] | None, scenario: Scenario) -> dict[str, Any] | None:
    """The group's ``after`` side: ``before`` with the scenario's changes; consumers see the new member list.

    A broker going down is recorded in ``brokers_down`` and taken out of the routes by the route model
    (:meth:`~rocket_rebalance.route.TopicRoute.without_brokers`) when the side is analysed. What consumers observe
    holding describes the snapshot, not the change, so it is not carried over.
    """
    if before is None:
        return None
    members = [dict(m) for m in before.get("members") or ()]
    down = set(before.get("brokers_down") or ())
    settings = list(before.get("settings") or ())
    old_ids = sort_client_ids(m["client_id"] for m in members)
    stale = False
    for change in scenario.changes:
        action = change["action"]
        if action == "broker_down":
            down.add(change["broker"])
            continue
        if not _applies(change, group):
            continue
        if action == "join":
            ids = change.get("client_ids") or joiner_ids(change.get("count") or 0)
            members.extend({"client_id": cid, "view": None, "_new": True} for cid in ids)
        elif action == "leave":
            if change.get("client_ids") is not None:
                gone = set(change["client_ids"])
            else:
                live = sort_client_ids({m["client_id"] for m in members})
                gone = set(live[max(0, len(live) - change["count"]) :]) if change["count"] else set()
            members = [m for m in members if m["client_id"] not in gone]
        else:
            options = change.get("options")
            model = settings[0].get("message_model") if len(settings) == 1 else None
            settings = [
                {
                    "strategy": change["strategy"],
                    "message_model": model,
                    "options": json.dumps(options, sort_keys=True) if options else None,
                }
            ]
        if action in ("join", "leave") and change.get("notified") is False:
            stale = True
    for member in members:
        new = member.pop("_new", False)
        member["view"] = list(old_ids) if stale and not new else None
        member["view_digest"] = None  # the scenario decides every view after the change
    return {
        "settings": settings,
        "topics": before.get("topics"),
        "routes": before.get("routes"),
        "brokers_down": sorted(down),
        "members": members,
    }
