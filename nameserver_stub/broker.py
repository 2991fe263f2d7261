"""One logical broker's in-memory life: consumer registry, queue locks, connections, faults, up or down.

This is where membership changes turn into NOTIFY_CONSUMER_IDS_CHANGED. As in RocketMQ, every member of a
changed group that has a connection is told, including the member whose heartbeat caused the change. Memory
state is lost when the broker goes down (a restarted broker starts with an empty registry and no locks), while
offsets and messages live in the store. Not thread-safe: the cluster lock guards it.
"""

from __future__ import annotations

from collections.abc import Iterable

from nameserver_stub.clock import Clock
from nameserver_stub.connections import CloseReason, Connection
from nameserver_stub.errors import ResourceExhausted
from nameserver_stub.faults import FaultTable
from nameserver_stub.locks import LockTable
from nameserver_stub.registry import ConsumerRegistry, GroupMembership


class BrokerState:
    """Registry, locks, connections and faults of one broker."""

    def __init__(self, name: str, clock: Clock) -> None:
        self.name = name
        self.up = True
        self.registry = ConsumerRegistry()
        self.locks = LockTable()
        self.faults = FaultTable()
        self._clock = clock
        self._connections: dict[str, list[Connection]] = {}

    # -- connections ----------------------------------------------------------------------------------------

    def connect(self, client_id: str, limit: int) -> Connection:
        """Open a stream for the client, unless it already has ``limit`` here (each one holds a worker thread)."""
        streams = self._connections.setdefault(client_id, [])
        if len(streams) >= limit:
            raise ResourceExhausted(
                f"client {client_id!r} already has {len(streams)} open streams at broker {self.name!r}, the most "
                f"one client may open at one broker (max_streams_per_client, --max-streams-per-client)"
            )
        connection = Connection(self.name, client_id)
        streams.append(connection)
        if len(streams) > 1:
            self.notify(self._groups_of(client_id))  # the ID is listed once more: its groups see a new member
        return connection

    def disconnect(self, connection: Connection) -> None:
        """A stream ended. When it was the client's last one, the client leaves every group here."""
        connection.close(CloseReason.CLIENT)
        streams = self._connections.get(connection.client_id)
        if streams is None or connection not in streams:
            return  # already forgotten (broker went down, or a second callback)
        streams.remove(connection)
        if not streams:
            del self._connections[connection.client_id]
            self.leave(connection.client_id, None)
        else:
            self.notify(self._groups_of(connection.client_id))  # one of the processes sharing the ID is gone

    def latest_connection(self, client_id: str) -> Connection | None:
        """The client's most recently opened stream here (an older one may be a reconnect's leftover)."""
        streams = self._connections.get(client_id)
        return streams[-1] if streams else None

    def is_connected(self, client_id: str) -> bool:
        return client_id in self._connections

    def connection_count(self) -> int:
        return sum(len(streams) for streams in self._connections.values())

    def listings(self, client_id: str) -> int:
        """How often a member is listed: once per open stream (per connection, as RocketMQ), at least once."""
        return max(1, len(self._connections.get(client_id, ())))

    # -- membership -----------------------------------------------------------------------------------------

    def client_ids(self, group: str) -> list[str]:
        """The group's members in join order, each listed once per open stream (at least once), as a RocketMQ
        broker lists a client ID once per connection: two processes sharing an ID show it twice, so each can
        tell that its ID is not its own alone."""
        return [cid for cid in self.registry.client_ids(group) for _ in range(self.listings(cid))]

    def _groups_of(self, client_id: str) -> list[str]:
        return [group for group in self.registry.groups() if client_id in self.registry.client_ids(group)]

    def heartbeat(self, client_id: str, memberships: list[GroupMembership]) -> bool:
        """Record a heartbeat unless a fault drops it; returns whether it was recorded."""
        if self.faults.drops_heartbeat(client_id):
            return False
        self.notify(self.registry.heartbeat(client_id, memberships, self._clock.monotonic()))
        return True

    def leave(self, client_id: str, group: str | None) -> list[str]:
        """The client leaves ``group`` (or all its groups): locks released, remaining members notified."""
        left = self.registry.unregister(client_id, group)
        self.locks.release_client(client_id, left)
        self.notify(left)
        return left

    def expire(self, expiry: float) -> list[tuple[str, str]]:
        """Drop members silent for longer than ``expiry`` seconds; their groups are notified."""
        expired = self.registry.expire(self._clock.monotonic(), expiry)
        for group, client_id in expired:
            self.locks.release_client(client_id, [group])
        self.notify(dict.fromkeys(group for group, _ in expired))
        return expired

    def notify(self, groups: Iterable[str]) -> None:
        """Push NOTIFY_CONSUMER_IDS_CHANGED for each group to every connected member (faults permitting)."""
        for group in groups:
            for client_id in self.registry.client_ids(group):
                streams = self._connections.get(client_id)
                if not streams or self.faults.drops_notification(client_id):
                    continue
                delay = self.faults.notification_delay(client_id)
                for connection in streams:
                    connection.push(group, delay)

    def release_held_notifications(self) -> None:
        for streams in self._connections.values():
            for connection in streams:
                connection.release_held()

    # -- life -----------------------------------------------------------------------------------------------

    def go_down(self) -> None:
        """Lose connections, registry and locks, as a crashed broker process would."""
        self.up = False
        self._close_all(CloseReason.BROKER_DOWN)
        self.registry.clear()
        self.locks.clear()

    def come_up(self) -> None:
        self.up = True

    def shutdown(self) -> None:
        """Close every connection because the server stops (streams end with OK)."""
        self._close_all(CloseReason.SHUTDOWN)

    def _close_all(self, reason: CloseReason) -> None:
        for streams in self._connections.values():
            for connection in streams:
                connection.close(reason)
        self._connections.clear()
