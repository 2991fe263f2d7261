"""The requests a broker sends us on our own connections, answered on the threaded transport.

What the requests are and how each is answered is :mod:`.remoting_answers` (shared with the asyncio transport);
this module is how the threaded transport runs them. :class:`RemotingInbound` is the one role the connection pool
(:mod:`.remoting_pool`) calls rather than is called by: the pool's reader hands it every request a server sends and
every connection's end. So it opens no connection and owns no thread (the transport finds the connection a
notification stream listens on, and the pool runs answers on its work threads), and it is built before the pool,
over the wire alone, and given to it.

A notification stream holds no thread: the one reader of every connection (:class:`~.connection.Reactor`) hands
each notification, and the stream's end, straight to the stream's callbacks, which only queue them. An answer is
returned to the pool as work for its small work pool, because building one waits for the consumer, and the reader
must go on delivering responses meanwhile.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial

from rocket_rebalance.remoting import RemotingCommand
from rocket_rebalance.runtime.transport import (
    BrokerRequests,
    GroupNotified,
    NotificationStream,
    StreamEnded,
    TransportError,
)
from rocket_rebalance.runtime.transport.connection import Connection
from rocket_rebalance.runtime.transport.remoting_answers import (
    NotificationStreams,
    answer_now,
    consumed_directly,
    failed_answer,
    offsets_reset,
)
from rocket_rebalance.runtime.transport.remoting_wire import RemotingWire

__all__ = ["RemotingInbound"]

log = logging.getLogger("rocket_rebalance.runtime.remoting")


class RemotingInbound:
    """The answers to the requests brokers send on the pool's connections, and the notification streams on them;
    ``wire`` gives the cluster's address and the subscription version the answers carry."""

    def __init__(self, wire: RemotingWire) -> None:
        self._wire = wire
        self._streams = NotificationStreams()
        self._client: BrokerRequests | None = None

    def attach(self, client: BrokerRequests) -> None:
        self._client = client

    def notifications(self, connection: Connection, on_group: GroupNotified, on_end: StreamEnded) -> NotificationStream:
        """The NOTIFY_CONSUMER_IDS_CHANGED requests the server sends on ``connection``, until it closes."""
        stream = self._streams.open(connection.address, on_group, on_end)
        if not connection.alive:
            stream.end(TransportError(f"connection to {connection.address} closed", "UNAVAILABLE"))
        return stream

    def received(self, connection: Connection, command: RemotingCommand) -> Callable[[], None] | None:
        """A request the server sent on ``connection``, on the reader: a notification goes to its streams and a
        reset of offsets to the consumer at once (None); any other request comes back as the work that answers it,
        to run off the reader."""
        if offsets_reset(command, self._client, connection.address) or self._streams.take(connection.address, command):
            return None
        return partial(self._answer, connection, command)

    def ended(self, address: str, error: TransportError | None) -> None:
        """The connection to ``address`` ended with ``error`` (None: the transport was closed), on the reader."""
        self._streams.ended(address, error)

    def _answer(self, connection: Connection, command: RemotingCommand) -> None:
        try:
            reply = self._reply(command)
        except Exception as error:  # Java answers SYSTEM_ERROR with the exception's text
            log.exception("answering request code %d from %s failed", command.code, connection.address)
            reply = failed_answer(command, error)
        try:
            connection.send(reply)
        except TransportError as error:
            log.debug("could not answer %s: %s", connection.address, error)

    def _reply(self, command: RemotingCommand) -> RemotingCommand:
        client = self._client
        found = answer_now(command, client, self._wire.address, self._wire.sub_version)
        if isinstance(found, RemotingCommand):
            return found
        assert client is not None  # a message to consume is handed on only when a consumer is attached
        started = time.monotonic()
        consumed, remark = client.consume_directly(found)
        return consumed_directly(command, consumed, remark, int((time.monotonic() - started) * 1000))
