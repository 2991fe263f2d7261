"""The requests a broker sends us on our own connection, answered on the threaded transport.

What the requests are and how each is answered is :mod:`.remoting_answers` (shared with the asyncio transport);
this module is how the threaded transport runs them. A notification stream holds no thread: the one reader of
every connection (:class:`~.connection.Reactor`) hands each notification, and the stream's end, straight to the
stream's callbacks, which only queue them. Answers are built on the pool's small work pool, because building one
waits for the consumer, and the reader must go on delivering responses meanwhile.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from functools import partial

from rocket_rebalance.model import AclCredentials, TlsSettings
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
)
from rocket_rebalance.runtime.transport.remoting_pool import RemotingPool

__all__ = ["RemotingInbound"]

log = logging.getLogger("rocket_rebalance.runtime.remoting")


class RemotingInbound(RemotingPool):
    """The pool's answers to the requests brokers send on its connections."""

    def __init__(
        self,
        namesrv_addrs: Sequence[str],
        timeout: float = 5.0,
        credentials: AclCredentials | None = None,
        tls: TlsSettings | None = None,
    ) -> None:
        super().__init__(namesrv_addrs, timeout, credentials, tls)
        self._streams = NotificationStreams()
        self._client: BrokerRequests | None = None

    def attach(self, client: BrokerRequests) -> None:
        self._client = client

    def connect(self, broker: str, client_id: str, on_group: GroupNotified, on_end: StreamEnded) -> NotificationStream:
        """The broker's NOTIFY_CONSUMER_IDS_CHANGED requests on our connection to its master, until it closes."""
        address = self._master(broker)
        connection = self._connection(address)
        stream = self._streams.open(address, on_group, on_end)
        if not connection.alive:
            stream.end(TransportError(f"connection to {address} closed", "UNAVAILABLE"))
        return stream

    def _connection_ended(self, address: str, error: TransportError) -> None:
        self._streams.ended(address, None if self._closed else error)

    def _on_request(self, connection: Connection, command: RemotingCommand) -> None:
        """Runs on the reader: notifications at once, anything slower on the work pool."""
        if self._streams.take(connection.address, command):
            return
        if not self._work.submit(partial(self._answer, connection, command)):
            log.debug("%s sent request code %d after close; not answered", connection.address, command.code)

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
        found = answer_now(command, client, self.address, self._wire.sub_version)
        if isinstance(found, RemotingCommand):
            return found
        assert client is not None  # a message to consume is handed on only when a consumer is attached
        started = time.monotonic()
        consumed, remark = client.consume_directly(found)
        return consumed_directly(command, consumed, remark, int((time.monotonic() - started) * 1000))
