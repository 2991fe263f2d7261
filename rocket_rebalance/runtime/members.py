"""Watch the group's members for consumers that cannot run our strategy.

CONSISTENT_HASH_BOUNDED and CROSS_TOPIC exist only in this library. A Java (or Go, C++ ...) consumer in the same
group splits the queues its own way, so the group owns some queues twice and others not at all, with nothing
failing. The broker's connection list says each member's language; whenever the member list changes, a consumer
running a Python-only strategy reads it and reports the other languages through its health (the log,
``on_error`` and ``describe()``), and clears the report once they are gone.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

from rocket_rebalance.runtime.health import Health
from rocket_rebalance.runtime.steps import Steps, call
from rocket_rebalance.runtime.transport import AdminTransport, TransportError
from rocket_rebalance.strategies import AllocateMessageQueueStrategy, java_compatible

__all__ = ["ForeignMembersError", "MemberLanguages"]

log = logging.getLogger("rocket_rebalance.runtime")

OUR_LANGUAGE = "PYTHON"


class ForeignMembersError(Exception):
    """Members of another language share a group whose strategy only this library has (given to ``on_error``)."""


class MemberLanguages:
    """Checks the languages of the group's members each time its member list changes (not on every round: the
    connection list is one more request to a broker)."""

    def __init__(self, strategy: AllocateMessageQueueStrategy, consumer_group: str, health: Health) -> None:
        self.strategy = strategy
        self.consumer_group = consumer_group
        self.health = health
        self.kind = f"strategy {strategy.name} in group {consumer_group}"
        self._checked: frozenset[str] | None = None
        self._lock = threading.Lock()

    @property
    def needed(self) -> bool:
        return not java_compatible(self.strategy)

    def members_seen(self, client_ids: Iterable[str]) -> Steps[None]:
        """Called with each member list fetched (steps, run on the I/O pool); reads the connection list when it
        changed. A wire without the operator's connection list (``UNIMPLEMENTED``) checks nothing."""
        members = frozenset(client_ids)
        if not self.needed:
            return
        with self._lock:
            if members == self._checked:
                return
            self._checked = members  # one check per change, even when several topics' lists arrive together
        try:
            rows = yield from call(AdminTransport.consumer_connections, self.consumer_group)
        except TransportError as error:
            log.debug("connection list of %s: %s (checked again at the next change)", self.consumer_group, error)
            with self._lock:
                self._checked = None
            return
        foreign = sorted({(row.client_id, row.language) for row in rows if row.language not in ("", OUR_LANGUAGE)})
        if not foreign:
            self.health.ok(self.kind)
            return
        listed = ", ".join(f"{cid} ({language})" for cid, language in foreign)
        self.health.failed(
            self.kind,
            ForeignMembersError(
                f"{listed} cannot run {self.strategy.name}, which only rocket-rebalance has: they split the queues "
                "their own way, so some are consumed twice and others never; use a Java strategy (AVG, "
                "CONSISTENT_HASH ...) in a mixed group"
            ),
        )
