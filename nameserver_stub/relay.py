"""Relaying GET_CONSUMER_RUNNING_INFO: an operator's question to one consumer's stream, and its answer back.

The operator's call (``Admin.ConsumerRunningInfo``) puts a request with a fresh, unguessable ID into the
consumer's stream mailbox and waits, holding its worker thread, for the consumer's ``ReportRunningInfo`` with that
ID. Two bounds keep a consumer that never answers from costing anything lasting: every wait ends by its timeout
(or as soon as the consumer's connection closes), after which the request is forgotten and taken back from the
mailbox if it is still there; and at most ``limit`` requests wait at once, so waiting operators cannot take the
workers that plain calls need. A report is accepted only for a request that is waiting, only from the client,
group and broker it was sent to, and only once; anything else is refused and changes nothing. The relay does not
interpret the report: the operator gets it as the consumer sent it.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from nameserver_stub.connections import Connection, RunningInfoAsk
from nameserver_stub.errors import DeadlineExceeded, InvalidArgument, NotFound, ResourceExhausted, Unavailable

R = TypeVar("R")
_RECHECK = 0.5  # seconds; how soon a waiting operator notices that the consumer's connection closed


@dataclass
class _Waiting(Generic[R]):
    connection: Connection
    consumer_group: str
    answered: threading.Event = field(default_factory=threading.Event)
    report: R | None = None


class RunningInfoRelay(Generic[R]):
    """Running-info requests waiting for their consumers' answers; thread-safe."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._waiting: dict[str, _Waiting[R]] = {}

    @property
    def waiting(self) -> int:
        """Requests sent (or queued) and not answered, timed out or given up yet."""
        with self._lock:
            return len(self._waiting)

    def ask(self, connection: Connection, consumer_group: str, timeout: float) -> R:
        """Send a request on ``connection`` and wait up to ``timeout`` seconds for its report."""
        request_id = secrets.token_hex(16)
        entry: _Waiting[R] = _Waiting(connection, consumer_group)
        with self._lock:
            if len(self._waiting) >= self.limit:
                raise ResourceExhausted(
                    f"{len(self._waiting)} running-info requests are already waiting for consumers' answers, the most "
                    f"the stub keeps at once (an eighth of --max-workers); retry later"
                )
            self._waiting[request_id] = entry
        who = f"consumer {connection.client_id!r} of group {consumer_group!r}"
        try:
            deadline = time.monotonic() + timeout
            if not connection.ask(RunningInfoAsk(request_id, consumer_group)):
                raise Unavailable(f"{who} lost its connection at broker {connection.broker_name!r} before it was asked")
            while not entry.answered.is_set():
                remaining = deadline - time.monotonic()
                if connection.closed:
                    raise Unavailable(
                        f"{who} closed its connection at broker {connection.broker_name!r} before it answered"
                    )
                if remaining <= 0:
                    raise DeadlineExceeded(f"consumer {connection.client_id!r} did not answer within {timeout:g} s")
                entry.answered.wait(min(remaining, _RECHECK))
        finally:
            with self._lock:
                self._waiting.pop(request_id, None)
            connection.withdraw(request_id)
        if entry.report is None:  # pragma: no cover - answered is set only together with a report
            raise AssertionError("answered without a report")
        return entry.report

    def answer(self, broker_name: str, client_id: str, request_id: str, consumer_group: str, report: R) -> None:
        """Hand ``report`` to the operator waiting for ``request_id``, if it was sent to exactly this reporter."""
        with self._lock:
            entry = self._waiting.get(request_id)
            if entry is None:
                raise NotFound(
                    f"no running-info request {request_id!r} is waiting: it was never sent, was answered already, "
                    f"or timed out"
                )
            sent_to = (entry.connection.broker_name, entry.connection.client_id, entry.consumer_group)
            if sent_to != (broker_name, client_id, consumer_group):
                raise InvalidArgument(
                    f"running-info request {request_id!r} was not sent to client {client_id!r} of group "
                    f"{consumer_group!r} at broker {broker_name!r}: only its addressee may answer it"
                )
            del self._waiting[request_id]
            entry.report = report
            entry.answered.set()
