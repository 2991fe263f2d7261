"""The requests a broker sends us on our own connection, answered as the Java client answers them.

A RocketMQ broker talks back on the connection a consumer opened (it keys the consumer by it), so this is part of
the remoting transport rather than a server of its own. NOTIFY_CONSUMER_IDS_CHANGED (oneway, never answered) wakes
a rebalance through the notification stream of :meth:`RemotingInbound.connect`; GET_CONSUMER_RUNNING_INFO and
CONSUME_MESSAGE_DIRECTLY are answered from the consumer given to :meth:`RemotingInbound.attach`; anything else that
expects an answer gets REQUEST_CODE_NOT_SUPPORTED.

A notification stream holds no thread: the one reader of every connection (:class:`~.connection.Reactor`) hands
each notification, and the stream's end, straight to the stream's callbacks, which only queue them. Answers are
built on the pool's small work pool, because building one waits for the consumer, and the reader must go on
delivering responses meanwhile.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from functools import partial

from rocket_rebalance.model import AclCredentials, MessageQueue, TlsSettings
from rocket_rebalance.remoting import RemotingCommand, RequestCode, ResponseCode, bodies, message, response_to
from rocket_rebalance.runtime.transport import (
    BrokerRequests,
    GroupNotified,
    NotificationStream,
    StreamEnded,
    TransportError,
    running_info_properties,
)
from rocket_rebalance.runtime.transport.connection import Connection
from rocket_rebalance.runtime.transport.remoting_pool import RemotingPool, stored_message
from rocket_rebalance.subscription import SubscriptionExpression

__all__ = ["RemotingInbound"]

log = logging.getLogger("rocket_rebalance.runtime.remoting")


class _Notifications:
    """The groups a broker notifies on one connection, to ``on_group``, until the connection ends or ``cancel()``
    (then ``on_end``, once)."""

    def __init__(self, address: str, on_group: GroupNotified, on_end: StreamEnded) -> None:
        self.address = address
        self._on_group = on_group
        self._on_end = on_end
        self._ended = False
        self._lock = threading.Lock()

    def push(self, group: str) -> None:
        if not self._ended:
            self._on_group(group)

    def end(self, error: TransportError | None) -> None:
        with self._lock:
            if self._ended:
                return
            self._ended = True
        self._on_end(error)

    def cancel(self) -> None:
        self.end(None)


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
        self._streams: dict[str, list[_Notifications]] = {}
        self._streams_lock = threading.Lock()
        self._client: BrokerRequests | None = None

    def attach(self, client: BrokerRequests) -> None:
        self._client = client

    def connect(self, broker: str, client_id: str, on_group: GroupNotified, on_end: StreamEnded) -> NotificationStream:
        """The broker's NOTIFY_CONSUMER_IDS_CHANGED requests on our connection to its master, until it closes."""
        address = self._master(broker)
        connection = self._connection(address)
        stream = _Notifications(address, on_group, on_end)
        with self._streams_lock:
            self._streams.setdefault(address, []).append(stream)
        if not connection.alive:
            stream.end(TransportError(f"connection to {address} closed", "UNAVAILABLE"))
        return stream

    def _connection_ended(self, address: str, error: TransportError) -> None:
        with self._streams_lock:
            streams = self._streams.pop(address, [])
        for stream in streams:
            stream.end(None if self._closed else error)

    def _on_request(self, connection: Connection, command: RemotingCommand) -> None:
        """Runs on the reader: oneway notifications at once, anything slower on the work pool."""
        if command.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            group = command.ext.get("consumerGroup", "")
            with self._streams_lock:
                streams = list(self._streams.get(connection.address, ()))
            for stream in streams:
                stream.push(group)
            return  # oneway: answering it would be a protocol error
        if command.is_oneway:
            log.debug("%s sent oneway request code %d; ignored", connection.address, command.code)
            return
        if not self._work.submit(partial(self._answer, connection, command)):
            log.debug("%s sent request code %d after close; not answered", connection.address, command.code)

    def _answer(self, connection: Connection, command: RemotingCommand) -> None:
        try:
            reply = self._reply(command)
        except Exception as error:  # Java answers SYSTEM_ERROR with the exception's text
            log.exception("answering request code %d from %s failed", command.code, connection.address)
            reply = response_to(command, ResponseCode.SYSTEM_ERROR, remark=f"{type(error).__name__}: {error}")
        try:
            connection.send(reply)
        except TransportError as error:
            log.debug("could not answer %s: %s", connection.address, error)

    def _reply(self, command: RemotingCommand) -> RemotingCommand:
        client = self._client
        if command.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
            if client is None:
                return response_to(command, ResponseCode.SYSTEM_ERROR, remark="no consumer runs on this connection")
            return response_to(command, ResponseCode.SUCCESS, body=self._running_info_body(client))
        if command.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
            if client is None:
                return response_to(command, ResponseCode.SYSTEM_ERROR, remark="no consumer runs on this connection")
            stored = message.decode_messages(command.body)
            if len(stored) != 1:
                return response_to(command, ResponseCode.SYSTEM_ERROR, remark=f"{len(stored)} messages, expected 1")
            item = stored[0]
            broker = command.ext.get("brokerName", "")
            started = time.monotonic()
            consumed, remark = client.consume_directly(
                stored_message(MessageQueue(item.topic, broker, item.queue_id), item)
            )
            body = bodies.encode_consume_directly_result(
                order=False,
                auto_commit=True,
                consume_result="CR_SUCCESS" if consumed else "CR_THROW_EXCEPTION",
                remark=remark,
                spent_ms=int((time.monotonic() - started) * 1000),
            )
            return response_to(command, ResponseCode.SUCCESS, body=body)
        return response_to(
            command,
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
            remark=f"request code {command.code} is not supported by rocket-rebalance (Python)",
        )

    def _running_info_body(self, client: BrokerRequests) -> bytes:
        info = client.running_info()
        properties = running_info_properties(info, self.address)
        expressions = {topic: info.expressions.get(topic) or SubscriptionExpression() for topic in info.topics}
        subscriptions = [
            bodies.Subscription(topic, e.sub_string, self._sub_version, e.expression_type)
            for topic, e in expressions.items()
        ]
        table = {
            mq: bodies.ProcessQueueInfo(
                commitOffset=row.commit_offset,
                cachedMsgMinOffset=row.cached_min_offset,
                cachedMsgMaxOffset=row.cached_max_offset,
                cachedMsgCount=row.cached_count,
                cachedMsgSizeInMiB=row.cached_size_mib,
                transactionMsgMinOffset=row.transaction_min_offset,
                transactionMsgMaxOffset=row.transaction_max_offset,
                transactionMsgCount=row.transaction_count,
                locked=row.locked,
                tryUnlockTimes=row.try_unlock_times,
                lastLockTimestamp=row.last_lock_ms,
                droped=row.dropped,
                lastPullTimestamp=row.last_pull_ms,
                lastConsumeTimestamp=row.last_consume_ms,
            )
            for mq, row in info.queues.items()
        }
        status = {
            topic: bodies.ConsumeStatus(
                pullRT=figures.pull_rt,
                pullTPS=figures.pull_tps,
                consumeRT=figures.consume_rt,
                consumeOKTPS=figures.consume_ok_tps,
                consumeFailedTPS=figures.consume_failed_tps,
                consumeFailedMsgs=figures.consume_failed_msgs,
            )
            for topic, figures in info.status.items()
        }
        return bodies.encode_running_info(properties, subscriptions, table, status)
