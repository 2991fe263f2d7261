"""A client's notification stream at one broker, seen from the server: a small blocking mailbox.

The gRPC handler of ``Connect`` blocks in :meth:`Connection.next` and yields what it returns, so pushing a
notification never waits for the network, and a slow or dead client never holds up the others (fan-out is one
append per client). A notification may carry a delivery time (the delay fault); the mailbox keeps order and
hands each one out no earlier than its time.

A client that never reads its stream must not grow the mailbox without end while its groups churn. A
notification only says "group G changed, fetch its members again", so once the mailbox holds
``MAX_PENDING`` notifications a new one for a group already waiting in it adds nothing and is not queued; the
mailbox then holds at most one more entry per group the client belongs to.

A running-info request (an operator asking the client what it holds) goes into the same mailbox but ahead of
the notifications and regardless of their delay: an operator waits for its answer. Those are bounded by the
relay (:mod:`nameserver_stub.relay`), which also takes back a request that timed out before it was handed out.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from enum import Enum

MAX_PENDING = 1024
_RECHECK = 0.5  # seconds; upper bound on a wait, so a delay released by another thread is seen soon


class CloseReason(Enum):
    CLIENT = "client"  # the client closed the stream (or was cancelled)
    BROKER_DOWN = "broker down"  # fault injection took the broker down
    SHUTDOWN = "shutdown"  # the server is stopping


@dataclass(frozen=True)
class RunningInfoAsk:
    """GET_CONSUMER_RUNNING_INFO for the client, waiting to be handed out on its stream."""

    request_id: str
    consumer_group: str


class Connection:
    """One open ``Connect`` stream; thread-safe."""

    def __init__(self, broker_name: str, client_id: str) -> None:
        self.broker_name = broker_name
        self.client_id = client_id
        self._cond = threading.Condition()
        self._pending: deque[tuple[float, str]] = deque()  # (deliver at, monotonic seconds; group)
        self._asks: deque[RunningInfoAsk] = deque()
        self.close_reason: CloseReason | None = None

    def push(self, group: str, delay: float = 0.0) -> None:
        """Queue a NOTIFY_CONSUMER_IDS_CHANGED for ``group``, delivered ``delay`` seconds from now."""
        with self._cond:
            if self.close_reason is not None:
                return
            if len(self._pending) >= MAX_PENDING and any(waiting == group for _, waiting in self._pending):
                return
            self._pending.append((time.monotonic() + delay, group))
            self._cond.notify_all()

    def ask(self, request: RunningInfoAsk) -> bool:
        """Queue a running-info request, handed out before any notification; False when the stream is closed."""
        with self._cond:
            if self.close_reason is not None:
                return False
            self._asks.append(request)
            self._cond.notify_all()
            return True

    def withdraw(self, request_id: str) -> None:
        """Take back a running-info request not handed out yet (it timed out, or was answered)."""
        with self._cond:
            self._asks = deque(ask for ask in self._asks if ask.request_id != request_id)

    def release_held(self) -> None:
        """Make every held-back notification deliverable now (the delay fault was cleared)."""
        with self._cond:
            self._pending = deque((0.0, group) for _, group in self._pending)
            self._cond.notify_all()

    def close(self, reason: CloseReason) -> bool:
        """Close the mailbox (first reason wins); pending notifications are dropped. True if it was open."""
        with self._cond:
            if self.close_reason is not None:
                return False
            self.close_reason = reason
            self._pending.clear()
            self._asks.clear()
            self._cond.notify_all()
            return True

    @property
    def pending(self) -> int:
        """Notifications and running-info requests queued and not yet handed out."""
        with self._cond:
            return len(self._pending) + len(self._asks)

    @property
    def closed(self) -> bool:
        return self.close_reason is not None

    def next(self) -> str | RunningInfoAsk | None:
        """Block until a running-info request or a due notification is there and return it (a notification as
        its group), or ``None`` once the connection closed."""
        with self._cond:
            while self.close_reason is None:
                if self._asks:
                    return self._asks.popleft()
                if self._pending:
                    due, group = self._pending[0]
                    wait = due - time.monotonic()
                    if wait <= 0:
                        self._pending.popleft()
                        return group
                    self._cond.wait(min(wait, _RECHECK))
                else:
                    self._cond.wait()
            return None
