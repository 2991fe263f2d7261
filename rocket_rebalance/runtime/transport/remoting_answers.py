"""The requests a broker sends us on our own connection, and their answers, written once for both runtimes.

A RocketMQ broker talks back on the connection a consumer opened (it keys the consumer by it).
NOTIFY_CONSUMER_IDS_CHANGED (oneway, never answered) goes to the notification streams opened on that connection
(:class:`NotificationStreams`); GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY are answered as the Java
client's ``ClientRemotingProcessor`` answers them, from the attached consumer; anything else that expects an answer
gets REQUEST_CODE_NOT_SUPPORTED. :func:`answer_now` answers whatever needs no listener; a message to consume
directly is handed back to the runtime, which calls (or awaits) the listener its own way and answers with
:func:`consumed_directly`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Protocol

from rocket_rebalance.model import MessageQueue
from rocket_rebalance.remoting import (
    ProtocolError,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    bodies,
    message,
    response_to,
)
from rocket_rebalance.runtime.transport import (
    GroupNotified,
    Message,
    RunningInfo,
    StreamEnd,
    StreamEnded,
    TransportError,
    running_info_properties,
)
from rocket_rebalance.runtime.transport.remoting_wire import stored_message
from rocket_rebalance.subscription import SubscriptionExpression

__all__ = [
    "NotificationStreams",
    "RunningInfoSource",
    "answer_now",
    "consumed_directly",
    "failed_answer",
    "running_info_body",
]

log = logging.getLogger("rocket_rebalance.runtime.remoting")


class RunningInfoSource(Protocol):
    """What both runtimes' consumers answer in place: their running info, their offsets, and a reset."""

    def running_info(self) -> RunningInfo: ...

    def reset_offsets(self, consumer_group: str, offsets: Mapping[MessageQueue, int]) -> None: ...

    def consumer_status(self, consumer_group: str, topic: str) -> dict[MessageQueue, int]: ...


def offsets_reset(command: RemotingCommand, client: RunningInfoSource | None, address: str) -> bool:
    """Whether ``command`` is RESET_CONSUMER_CLIENT_OFFSET (oneway, sent when the broker leaves resets to its
    clients, ``useServerSideResetOffset=false``), then handed to the consumer at once: it only posts the reset to
    its core, so the connection's reader may call it. A body that cannot be read is said and dropped: the
    operator's ``resetOffsetByTime`` reports which clients it reached, and our offsets stay as they were."""
    if command.code != RequestCode.RESET_CONSUMER_CLIENT_OFFSET:
        return False
    try:
        offsets = bodies.parse_reset_offset_body(command.body)
    except ProtocolError as error:
        log.warning("%s sent a reset of offsets that cannot be read: %s", address, error)
        return True
    if client is not None:
        client.reset_offsets(command.ext.get("group", ""), offsets)
    return True


class _Notifications(StreamEnd):
    """The groups a broker notifies on one connection, to ``on_group``, until the connection ends or ``cancel()``
    (then ``on_end``, once). Confirmed from the start: the heartbeats travel on the same connection, and the broker
    lists the client ID for the connection a heartbeat came on."""

    def __init__(self, on_group: GroupNotified, on_end: StreamEnded) -> None:
        self._on_group = on_group
        super().__init__(on_end, confirmed=True)

    def push(self, group: str) -> None:
        if not self._ended:
            self._on_group(group)

    def cancel(self) -> None:
        self.end(None)


class NotificationStreams:
    """The notification streams open on each connection (by address). A stream holds no thread or task: the
    connection's reader hands each notification, and the connection's end, straight to the stream's callbacks."""

    def __init__(self) -> None:
        self._streams: dict[str, list[_Notifications]] = {}
        self._lock = threading.Lock()

    def open(self, address: str, on_group: GroupNotified, on_end: StreamEnded) -> _Notifications:
        stream = _Notifications(on_group, on_end)
        with self._lock:
            self._streams.setdefault(address, []).append(stream)
        return stream

    def ended(self, address: str, error: TransportError | None) -> None:
        """The connection to ``address`` ended: each of its streams hears ``error`` (None: the transport closed)."""
        with self._lock:
            streams = self._streams.pop(address, [])
        for stream in streams:
            stream.end(error)

    def take(self, address: str, command: RemotingCommand) -> bool:
        """Whether ``command``, a request from the server at ``address``, is done with: a notification (told to
        the address's streams) or another oneway request (ignored: answering it would be a protocol error). A
        request that is not needs an answer, which may wait for the consumer, so the reader must not build it."""
        if command.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            group = command.ext.get("consumerGroup", "")
            with self._lock:
                streams = list(self._streams.get(address, ()))
            for stream in streams:
                stream.push(group)
            return True
        if command.is_oneway:
            log.debug("%s sent oneway request code %d; ignored", address, command.code)
            return True
        return False


_ANSWERED = frozenset(
    {
        RequestCode.GET_CONSUMER_RUNNING_INFO,
        RequestCode.CONSUME_MESSAGE_DIRECTLY,
        RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT,
    }
)


def answer_now(
    command: RemotingCommand, client: RunningInfoSource | None, nameserver_address: str, sub_version: int
) -> RemotingCommand | Message:
    """The answer to a broker's ``command``, or, for CONSUME_MESSAGE_DIRECTLY to an attached consumer, the message
    to consume (then :func:`consumed_directly` is the answer)."""
    if command.code not in _ANSWERED:
        return response_to(
            command,
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
            remark=f"request code {command.code} is not supported by rocket-rebalance (Python)",
        )
    if client is None:
        return response_to(command, ResponseCode.SYSTEM_ERROR, remark="no consumer runs on this connection")
    if command.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
        body = running_info_body(client.running_info(), nameserver_address, sub_version)
        return response_to(command, ResponseCode.SUCCESS, body=body)
    if command.code == RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT:
        offsets = client.consumer_status(command.ext.get("group", ""), command.ext.get("topic", ""))
        return response_to(command, ResponseCode.SUCCESS, body=bodies.encode_consumer_status(offsets))
    stored = message.decode_messages(command.body)
    if len(stored) != 1:
        return response_to(command, ResponseCode.SYSTEM_ERROR, remark=f"{len(stored)} messages, expected 1")
    item = stored[0]
    return stored_message(MessageQueue(item.topic, command.ext.get("brokerName", ""), item.queue_id), item)


def consumed_directly(command: RemotingCommand, consumed: bool, remark: str, spent_ms: int) -> RemotingCommand:
    """The answer to CONSUME_MESSAGE_DIRECTLY once the listener had the message (Java's ``ConsumeMessageDirectly
    Result``: not orderly, auto-commit, the listener's verdict and the time it took)."""
    body = bodies.encode_consume_directly_result(
        order=False,
        auto_commit=True,
        consume_result="CR_SUCCESS" if consumed else "CR_THROW_EXCEPTION",
        remark=remark,
        spent_ms=spent_ms,
    )
    return response_to(command, ResponseCode.SUCCESS, body=body)


def failed_answer(command: RemotingCommand, error: Exception) -> RemotingCommand:
    """What answering ``command`` raised, as Java answers it: SYSTEM_ERROR with the exception's text."""
    return response_to(command, ResponseCode.SYSTEM_ERROR, remark=f"{type(error).__name__}: {error}")


def running_info_body(info: RunningInfo, nameserver_address: str, sub_version: int) -> bytes:
    """A consumer's running info as Java's ``ConsumerRunningInfo`` body: the properties, each subscribed topic's
    own expression, the process-queue table and the consume statistics."""
    properties = running_info_properties(info, nameserver_address)
    expressions = {topic: info.expressions.get(topic) or SubscriptionExpression() for topic in info.topics}
    subscriptions = [
        bodies.Subscription(topic, e.sub_string, sub_version, e.expression_type) for topic, e in expressions.items()
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
