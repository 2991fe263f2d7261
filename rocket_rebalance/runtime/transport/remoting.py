"""The remoting transport: RocketMQ's own protocol to a real Apache RocketMQ cluster.

Chosen by a name-server list in RocketMQ's form (``host:port;host:port``). It behaves on the wire as the Java
client does (``MQClientAPIImpl``): one TCP connection per name server or broker address (the broker keys a
consumer by its connection, so heartbeats, pulls and the unregister all share it), requests multiplexed by
opaque, every required header field sent as a string, Java enum names in bodies, and the retry topic
``%RETRY%<group>`` in every heartbeat of a clustering consumer, so Java and Python members of one group keep one
subscription table.

Brokers are named as in routes; their addresses are learnt from every route (and, for operator calls, the
cluster info). A connection that fails is reopened on the next call, with a backoff (0.2 s doubling to 5 s) so a
broker that is down is not hammered; a response ``GO_AWAY`` (a broker shutting down) retires the connection and
the request is sent once more on a new one. The name servers of the list are tried in turn.

Requests a broker sends on our connection are answered as Java answers them: NOTIFY_CONSUMER_IDS_CHANGED (oneway,
never answered) wakes a rebalance through the notification stream; GET_CONSUMER_RUNNING_INFO and
CONSUME_MESSAGE_DIRECTLY are answered from the attached consumer; anything else that expects an answer gets
REQUEST_CODE_NOT_SUPPORTED.
"""

from __future__ import annotations

import logging
import queue
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from rocket_rebalance.model import MessageModel, MessageQueue, retry_topic, sort_queues
from rocket_rebalance.remoting import (
    ProtocolError,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    bodies,
    headers,
    message,
    request,
    response_to,
)
from rocket_rebalance.route import TopicRoute
from rocket_rebalance.runtime.transport import (
    BrokerRequests,
    ConnectionRow,
    ConsumerReport,
    GroupRegistration,
    Message,
    NotificationStream,
    ProgressRow,
    PullResult,
    PullStatus,
    TransportError,
    running_info_properties,
)
from rocket_rebalance.runtime.transport.connection import Connection

__all__ = ["RemotingTransport"]

log = logging.getLogger("rocket_rebalance.runtime.remoting")

PRODUCER_GROUP = "PID_rocket_rebalance"
_BACKOFF = (0.2, 5.0)
_CODE_NAMES: dict[int, str] = {
    ResponseCode.TOPIC_NOT_EXIST: "NOT_FOUND",
    ResponseCode.QUERY_NOT_FOUND: "NOT_FOUND",
    ResponseCode.CONSUMER_NOT_ONLINE: "NOT_FOUND",
    ResponseCode.SYSTEM_BUSY: "UNAVAILABLE",
    ResponseCode.SERVICE_NOT_AVAILABLE: "UNAVAILABLE",
    ResponseCode.NO_PERMISSION: "PERMISSION_DENIED",
}


def _error(name: str, address: str, answer: RemotingCommand) -> TransportError:
    """A non-success response as a TransportError naming the call, the address, the code and the remark."""
    try:
        code_name = ResponseCode(answer.code).name
    except ValueError:
        code_name = f"code {answer.code}"
    remark = (answer.remark or "").strip().splitlines()
    text = f"{name} at {address}: {code_name}" + (f" {remark[0]}" if remark else "")
    return TransportError(text, _CODE_NAMES.get(answer.code, code_name))


class _Notifications:
    """The groups a broker notified on one connection, until the connection ends or ``cancel()``."""

    _END = object()

    def __init__(self, address: str) -> None:
        self.address = address
        self._queue: queue.Queue[object] = queue.Queue()
        self._error: TransportError | None = None

    def push(self, group: str) -> None:
        self._queue.put(group)

    def end(self, error: TransportError | None) -> None:
        self._error = error
        self._queue.put(self._END)

    def __iter__(self) -> Iterator[str]:
        while True:
            item = self._queue.get()
            if item is self._END:
                if self._error is not None:
                    raise self._error
                return
            assert isinstance(item, str)
            yield item

    def cancel(self) -> None:
        self.end(None)


@dataclass
class _Link:
    """What the transport knows of one address: its live connection and, after failures, when to try again."""

    lock: threading.Lock
    connection: Connection | None = None
    retry_at: float = 0.0
    backoff: float = _BACKOFF[0]
    last_error: TransportError | None = None


class RemotingTransport:
    """A RocketMQ client's wire to the name servers ``namesrv_addrs`` and the brokers their routes name."""

    def __init__(self, namesrv_addrs: Sequence[str], timeout: float = 5.0) -> None:
        if not namesrv_addrs:
            raise ValueError("at least one name-server address is needed")
        self._namesrvs = list(namesrv_addrs)
        self._namesrv_index = random.randrange(len(self._namesrvs))  # Java spreads clients over the list too
        self.address = ";".join(self._namesrvs)
        self.long_poll_ms = 15000
        self._timeout = timeout
        self._links: dict[str, _Link] = {}
        self._links_lock = threading.Lock()
        self._broker_addrs: dict[str, dict[int, str]] = {}
        self._addrs_lock = threading.Lock()
        self._streams: dict[str, list[_Notifications]] = {}
        self._client: BrokerRequests | None = None
        self._inbound = ThreadPoolExecutor(2, thread_name_prefix="rr-inbound")
        self._sub_version = int(time.time() * 1000)
        self._next_queue: dict[str, int] = {}
        self._closed = False

    # ------------------------------------------------------------------ connections

    def _link(self, address: str) -> _Link:
        with self._links_lock:
            link = self._links.get(address)
            if link is None:
                link = self._links[address] = _Link(threading.Lock())
            return link

    def _connection(self, address: str) -> Connection:
        if self._closed:
            raise TransportError(f"transport to {address} is closed", "UNAVAILABLE")
        link = self._link(address)
        with link.lock:
            if link.connection is not None and link.connection.alive:
                return link.connection
            now = time.monotonic()
            if now < link.retry_at and link.last_error is not None:
                raise TransportError(f"{link.last_error} (next try in {link.retry_at - now:.1f} s)", "UNAVAILABLE")
            try:
                link.connection = Connection.open(address, self._timeout, self._on_request, self._on_close)
            except TransportError as error:
                link.last_error = error
                link.retry_at = now + link.backoff
                link.backoff = min(_BACKOFF[1], link.backoff * 2)
                raise
            link.backoff = _BACKOFF[0]
            link.last_error = None
            return link.connection

    def _on_close(self, connection: Connection, error: TransportError) -> None:
        link = self._link(connection.address)
        with link.lock:
            if link.connection is connection:
                link.connection = None
                if error.code in ("FAILED_PRECONDITION",):  # a server of another kind: do not retry at once
                    link.last_error, link.retry_at = error, time.monotonic() + _BACKOFF[1]
        with self._addrs_lock:
            streams = self._streams.pop(connection.address, [])
        for stream in streams:
            stream.end(None if self._closed else error)

    def _call(self, address: str, name: str, command: RemotingCommand, timeout: float | None = None) -> RemotingCommand:
        """One request and its response; a GO_AWAY answer retires the connection and the request goes again."""
        for attempt in (1, 2):
            connection = self._connection(address)
            answer = connection.call(name, command, timeout or self._timeout)
            if answer.code != ResponseCode.GO_AWAY or attempt == 2:
                return answer
            log.info("%s answered GO_AWAY: reconnecting", address)
            connection.close()
        raise AssertionError("unreachable")

    def _ok(self, address: str, name: str, command: RemotingCommand, timeout: float | None = None) -> RemotingCommand:
        answer = self._call(address, name, command, timeout)
        if answer.code != ResponseCode.SUCCESS:
            raise _error(name, address, answer)
        return answer

    def _namesrv_call(self, name: str, command: RemotingCommand) -> tuple[str, RemotingCommand]:
        """Ask the name servers in turn, from the one that answered last, until one answers."""
        last: TransportError | None = None
        for step in range(len(self._namesrvs)):
            index = (self._namesrv_index + step) % len(self._namesrvs)
            address = self._namesrvs[index]
            try:
                answer = self._call(address, name, command)
            except TransportError as error:
                if error.code not in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
                    raise
                last = error
                continue
            self._namesrv_index = index
            return address, answer
        assert last is not None
        raise last

    def _addresses(self, broker: str) -> dict[int, str]:
        """The broker's addresses from the routes learnt so far, else from the name server's cluster info."""
        with self._addrs_lock:
            addrs = self._broker_addrs.get(broker)
        if not addrs:
            self.brokers()  # learns every broker's addresses
            with self._addrs_lock:
                addrs = self._broker_addrs.get(broker)
        if not addrs:
            raise TransportError(f"no broker named {broker} in the cluster at {self.address}", "NOT_FOUND")
        return dict(addrs)

    def _master(self, broker: str) -> str:
        addrs = self._addresses(broker)
        if 0 not in addrs:
            raise TransportError(f"broker {broker} has no master in the route from {self.address}", "UNAVAILABLE")
        return addrs[0]

    def _learn(self, broker_addrs: Mapping[str, Mapping[int, str]]) -> None:
        with self._addrs_lock:
            for broker, addrs in broker_addrs.items():
                self._broker_addrs[broker] = dict(addrs)

    # ------------------------------------------------------------------ inbound requests

    def _on_request(self, connection: Connection, command: RemotingCommand) -> None:
        """Runs on the connection's reader: oneway notifications at once, anything slower on the inbound pool."""
        if command.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            group = command.ext.get("consumerGroup", "")
            with self._addrs_lock:
                streams = list(self._streams.get(connection.address, ()))
            for stream in streams:
                stream.push(group)
            return  # oneway: answering it would be a protocol error
        if command.is_oneway:
            log.debug("%s sent oneway request code %d; ignored", connection.address, command.code)
            return
        self._inbound.submit(self._answer, connection, command)

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
            consumed, remark = client.consume_directly(_message(MessageQueue(item.topic, broker, item.queue_id), item))
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
        subscriptions = [bodies.Subscription(topic, "*", self._sub_version) for topic in info.topics]
        table = {
            mq: bodies.ProcessQueueInfo(
                commitOffset=row.commit_offset,
                cachedMsgMinOffset=row.cached_min_offset,
                cachedMsgMaxOffset=row.cached_max_offset,
                cachedMsgCount=row.cached_count,
                locked=row.locked,
                droped=row.dropped,
                lastPullTimestamp=row.last_pull_ms,
                lastConsumeTimestamp=row.last_consume_ms,
            )
            for mq, row in info.queues.items()
        }
        status = {
            topic: bodies.ConsumeStatus(consumeOKTPS=0.0, consumeFailedMsgs=info.consumed_failed)
            for topic in info.topics
        }
        return bodies.encode_running_info(properties, subscriptions, table, status)

    def attach(self, client: BrokerRequests) -> None:
        self._client = client

    # ------------------------------------------------------------------ name server

    def route(self, topic: str) -> TopicRoute:
        address, answer = self._namesrv_call(
            "GET_ROUTEINFO_BY_TOPIC", request(RequestCode.GET_ROUTEINFO_BY_TOPIC, headers.get_route_info(topic))
        )
        if answer.code != ResponseCode.SUCCESS:
            raise _error(f"route of {topic}", address, answer)
        try:
            data = bodies.parse_route(topic, answer.body)
        except ProtocolError as error:
            raise TransportError(f"route of {topic} from {address}: {error}", "INTERNAL") from None
        self._learn(data.broker_addrs)
        return data.route

    def brokers(self) -> dict[str, str]:
        address, answer = self._namesrv_call("GET_BROKER_CLUSTER_INFO", request(RequestCode.GET_BROKER_CLUSTER_INFO))
        if answer.code != ResponseCode.SUCCESS:
            raise _error("cluster info", address, answer)
        try:
            info = bodies.parse_cluster_info(answer.body)
        except ProtocolError as error:
            raise TransportError(f"cluster info from {address}: {error}", "INTERNAL") from None
        self._learn(info.broker_addrs)
        return {name: addrs[0] for name, addrs in sorted(info.broker_addrs.items()) if 0 in addrs}

    # ------------------------------------------------------------------ consumer calls

    def heartbeat(self, broker: str, client_id: str, group: GroupRegistration) -> None:
        topics = set(group.topics)
        if group.message_model is MessageModel.CLUSTERING:
            topics.add(retry_topic(group.consumer_group))  # as Java's copySubscription: one table for the group
        body = bodies.encode_heartbeat(
            client_id,
            group.consumer_group,
            consume_type="CONSUME_PASSIVELY" if group.push else "CONSUME_ACTIVELY",
            message_model=group.message_model.value,
            consume_from_where=group.consume_from_where.value,
            subscriptions=[bodies.Subscription(topic, "*", self._sub_version) for topic in sorted(topics)],
        )
        for address in self._addresses(broker).values():
            self._ok(address, f"HEART_BEAT to {broker}", request(RequestCode.HEART_BEAT, body=body))

    def unregister(self, broker: str, client_id: str, consumer_group: str) -> None:
        ext = headers.unregister_client(client_id, consumer_group)
        for address in self._addresses(broker).values():
            self._ok(address, f"UNREGISTER_CLIENT at {broker}", request(RequestCode.UNREGISTER_CLIENT, ext))

    def consumer_list(self, broker: str, consumer_group: str) -> list[str]:
        answer = self._ok(
            self._master(broker),
            f"GET_CONSUMER_LIST_BY_GROUP {consumer_group} at {broker}",
            request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, headers.get_consumer_list(consumer_group)),
        )
        return bodies.parse_consumer_list(answer.body)

    def _each(
        self, address: str, name: str, commands: Sequence[RemotingCommand], timeout: float | None = None
    ) -> list[RemotingCommand | TransportError]:
        """Send several requests on one connection at once and wait for all answers (in order)."""
        results: list[RemotingCommand | TransportError | None] = [None] * len(commands)
        remaining = [len(commands)]
        finished = threading.Event()
        lock = threading.Lock()
        if not commands:
            return []
        try:
            connection = self._connection(address)
        except TransportError as error:
            return [error] * len(commands)

        def done_at(index: int) -> Callable[[RemotingCommand | TransportError], None]:
            def done(result: RemotingCommand | TransportError) -> None:
                results[index] = result
                with lock:
                    remaining[0] -= 1
                    if remaining[0] == 0:
                        finished.set()

            return done

        for index, command in enumerate(commands):
            connection.request(name, command, timeout or self._timeout, done_at(index))
        finished.wait()
        return [result for result in results if result is not None]

    def query_offsets(
        self, broker: str, consumer_group: str, queues: Sequence[MessageQueue]
    ) -> dict[MessageQueue, int | None]:
        address = self._master(broker)
        commands = [
            request(RequestCode.QUERY_CONSUMER_OFFSET, headers.query_consumer_offset(consumer_group, mq))
            for mq in queues
        ]
        found: dict[MessageQueue, int | None] = {}
        for mq, answer in zip(queues, self._each(address, "QUERY_CONSUMER_OFFSET", commands), strict=True):
            if isinstance(answer, TransportError):
                raise answer
            if answer.code == ResponseCode.QUERY_NOT_FOUND:
                found[mq] = None
            elif answer.code == ResponseCode.SUCCESS:
                found[mq] = _int_field(answer, "offset", "QUERY_CONSUMER_OFFSET", address)
            else:
                raise _error(f"QUERY_CONSUMER_OFFSET of {mq}", address, answer)
        return found

    def update_offsets(
        self, broker: str, consumer_group: str, client_id: str, offsets: Mapping[MessageQueue, int]
    ) -> dict[MessageQueue, int]:
        """Sent as requests, not oneway as Java does, so a lost write is known and retried by the core."""
        address = self._master(broker)
        items = list(offsets.items())
        commands = [
            request(RequestCode.UPDATE_CONSUMER_OFFSET, headers.update_consumer_offset(consumer_group, mq, offset))
            for mq, offset in items
        ]
        stored: dict[MessageQueue, int] = {}
        failures: list[str] = []
        for (mq, offset), answer in zip(items, self._each(address, "UPDATE_CONSUMER_OFFSET", commands), strict=True):
            if isinstance(answer, TransportError):
                failures.append(str(answer))
            elif answer.code == ResponseCode.SUCCESS:
                stored[mq] = offset
            else:
                failures.append(str(_error(f"UPDATE_CONSUMER_OFFSET of {mq}", address, answer)))
        if failures and not stored:
            raise TransportError(failures[0], "UNAVAILABLE")
        return stored

    def lock(
        self, broker: str, consumer_group: str, client_id: str, queues: Sequence[MessageQueue]
    ) -> set[MessageQueue]:
        body = bodies.encode_lock_body(consumer_group, client_id, queues)
        answer = self._ok(
            self._master(broker), f"LOCK_BATCH_MQ at {broker}", request(RequestCode.LOCK_BATCH_MQ, body=body)
        )
        return bodies.parse_lock_result(answer.body)

    def unlock(self, broker: str, consumer_group: str, client_id: str, queues: Sequence[MessageQueue]) -> None:
        body = bodies.encode_lock_body(consumer_group, client_id, queues)
        self._ok(self._master(broker), f"UNLOCK_BATCH_MQ at {broker}", request(RequestCode.UNLOCK_BATCH_MQ, body=body))

    def pull(
        self,
        mq: MessageQueue,
        consumer_group: str,
        offset: int,
        max_messages: int,
        wait_ms: int,
        done: Callable[[PullResult | TransportError], None],
    ) -> None:
        """A long-poll pull as Java's push consumer sends it (suspend flag, the group's heartbeat subscription);
        the broker holds it up to ``wait_ms`` and the socket waits 15 s longer than that."""
        try:
            address = self._master(mq.broker_name)
            connection = self._connection(address)
        except TransportError as error:
            done(error)
            return
        ext = headers.pull_message(
            consumer_group,
            mq,
            queue_offset=offset,
            max_msg_nums=max_messages,
            sys_flag=headers.pull_sys_flag(commit_offset=False, suspend=wait_ms > 0, subscription=False),
            commit_offset=0,
            suspend_timeout_ms=wait_ms,
            sub_version=self._sub_version,
        )

        def finished(answer: RemotingCommand | TransportError) -> None:
            if isinstance(answer, TransportError):
                done(answer)
                return
            try:
                done(_pull_result(mq, address, answer))
            except TransportError as error:
                done(error)

        connection.request(f"PULL_MESSAGE {mq}", request(RequestCode.PULL_MESSAGE, ext), wait_ms / 1000 + 15, finished)

    def max_offset(self, mq: MessageQueue) -> int:
        address = self._master(mq.broker_name)
        answer = self._ok(
            address, f"GET_MAX_OFFSET {mq}", request(RequestCode.GET_MAX_OFFSET, headers.get_max_offset(mq))
        )
        return _int_field(answer, "offset", "GET_MAX_OFFSET", address)

    def min_offset(self, mq: MessageQueue) -> int:
        address = self._master(mq.broker_name)
        answer = self._ok(
            address, f"GET_MIN_OFFSET {mq}", request(RequestCode.GET_MIN_OFFSET, headers.get_min_offset(mq))
        )
        return _int_field(answer, "offset", "GET_MIN_OFFSET", address)

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        address = self._master(mq.broker_name)
        ext = headers.search_offset_by_timestamp(mq, timestamp_ms)
        answer = self._ok(
            address, f"SEARCH_OFFSET_BY_TIMESTAMP {mq}", request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, ext)
        )
        return _int_field(answer, "offset", "SEARCH_OFFSET_BY_TIMESTAMP", address)

    def send(
        self, topic: str, broker: str, bodies_: Sequence[bytes], queue_id: int | None = None
    ) -> tuple[int, list[int]]:
        """SEND_MESSAGE_V2 per body, one after another as Java's producer sends: the broker stores concurrent
        requests in any order, and a queue's messages must keep the order they were given in."""
        if queue_id is None:
            queue_id = self._next_queue.get(broker, 0)
            self._next_queue[broker] = queue_id + 1
            queue_id %= max(1, self._write_queue_nums(topic, broker))
        address = self._master(broker)
        mq = MessageQueue(topic, broker, queue_id)
        offsets: list[int] = []
        for body in bodies_:
            properties = message.encode_properties({"UNIQ_KEY": uuid.uuid4().hex.upper(), "WAIT": "true"})
            ext = headers.send_message_v2(PRODUCER_GROUP, mq, properties, born_timestamp_ms=int(time.time() * 1000))
            answer = self._ok(address, f"SEND_MESSAGE_V2 to {mq}", request(RequestCode.SEND_MESSAGE_V2, ext, body))
            offsets.append(_int_field(answer, "queueOffset", "SEND_MESSAGE_V2", address))
        return queue_id, offsets

    def _write_queue_nums(self, topic: str, broker: str) -> int:
        for data in self.route(topic).queue_datas:
            if data.broker_name == broker:
                return data.write_queue_nums
        raise TransportError(f"topic {topic} has no queue on broker {broker}", "NOT_FOUND")

    def send_back(self, consumer_group: str, message_: Message, max_reconsume_times: int) -> None:
        """CONSUMER_SEND_MSG_BACK: the broker stores the message again in ``%RETRY%<group>`` (delay level 0: the
        broker picks 3 + reconsume times) or, past ``max_reconsume_times``, in the dead-letter queue."""
        address = self._master(message_.mq.broker_name)
        ext = headers.consumer_send_msg_back(
            consumer_group,
            commit_log_offset=message_.commit_log_offset,
            delay_level=0,
            origin_msg_id=message_.msg_id,
            origin_topic=message_.properties.get("RETRY_TOPIC", message_.mq.topic),
            max_reconsume_times=max_reconsume_times,
        )
        self._ok(address, f"CONSUMER_SEND_MSG_BACK {message_.mq}", request(RequestCode.CONSUMER_SEND_MSG_BACK, ext))

    def connect(self, broker: str, client_id: str) -> NotificationStream:
        """The broker's NOTIFY_CONSUMER_IDS_CHANGED requests on our connection to its master, until it closes."""
        address = self._master(broker)
        connection = self._connection(address)
        stream = _Notifications(address)
        with self._addrs_lock:
            self._streams.setdefault(address, []).append(stream)
        if not connection.alive:
            stream.end(TransportError(f"connection to {address} closed", "UNAVAILABLE"))
        return stream

    # ------------------------------------------------------------------ operator calls

    def create_topic(self, topic: str, queue_nums: int, brokers: Sequence[str] = ()) -> None:
        """UPDATE_AND_CREATE_TOPIC at each broker's master, then wait until the name server's route shows it."""
        masters = self.brokers()
        names = list(brokers) or sorted(masters)
        unknown = [name for name in names if name not in masters]
        if unknown:
            raise TransportError(f"no broker named {', '.join(unknown)} in the cluster at {self.address}", "NOT_FOUND")
        ext = headers.create_topic(topic, queue_nums, queue_nums)
        for name in names:
            self._ok(
                masters[name],
                f"UPDATE_AND_CREATE_TOPIC {topic} at {name}",
                request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext),
            )
        deadline = time.monotonic() + 15
        while True:
            try:
                datas = {d.broker_name: d.read_queue_nums for d in self.route(topic).queue_datas}
            except TransportError as error:
                if error.code != "NOT_FOUND":
                    raise
                datas = {}
            if all(datas.get(name) == queue_nums for name in names):
                return
            if time.monotonic() > deadline:
                raise TransportError(
                    f"topic {topic} was created but the name server's route does not show it", "DEADLINE_EXCEEDED"
                )
            time.sleep(0.1)

    def consumer_connections(self, consumer_group: str) -> list[ConnectionRow]:
        rows: list[ConnectionRow] = []
        for broker, address in self.brokers().items():
            ext = headers.get_consumer_connection_list(consumer_group)
            answer = self._call(
                address, "GET_CONSUMER_CONNECTION_LIST", request(RequestCode.GET_CONSUMER_CONNECTION_LIST, ext)
            )
            if answer.code == ResponseCode.CONSUMER_NOT_ONLINE:
                continue
            if answer.code != ResponseCode.SUCCESS:
                raise _error(f"GET_CONSUMER_CONNECTION_LIST {consumer_group} at {broker}", address, answer)
            connection = bodies.parse_consumer_connection(answer.body)
            topics = tuple(sorted(connection.topics))
            rows.extend(
                ConnectionRow(
                    row.client_id,
                    broker,
                    True,
                    -1,
                    topics,
                    row.client_addr,
                    row.language,
                    row.version,
                    connection.message_model or "",
                )
                for row in sorted(connection.connections, key=lambda r: r.client_id)
            )
        if not rows:
            raise TransportError(f"consumer group {consumer_group} is not online at {self.address}", "NOT_FOUND")
        return rows

    def topics(self) -> list[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER."""
        address, answer = self._namesrv_call(
            "GET_ALL_TOPIC_LIST_FROM_NAMESERVER", request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        )
        if answer.code != ResponseCode.SUCCESS:
            raise _error("topic list", address, answer)
        try:
            return sorted(bodies.parse_topic_list(answer.body))
        except ProtocolError as error:
            raise TransportError(f"topic list from {address}: {error}", "INTERNAL") from None

    def consumer_groups(self) -> list[str]:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG at every master, merged. Every master must answer: a group known only
        to a broker that did not would be missing without a word, so one that fails fails the call."""
        groups: set[str] = set()
        for broker, address in self.brokers().items():
            name = f"GET_ALL_SUBSCRIPTIONGROUP_CONFIG at {broker}"
            answer = self._ok(address, name, request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
            try:
                groups |= bodies.parse_subscription_groups(answer.body)
            except ProtocolError as error:
                raise TransportError(f"{name} ({address}): {error}", "INTERNAL") from None
        return sorted(groups)

    def consumer_report(self, consumer_group: str, client_id: str) -> ConsumerReport:
        """GET_CONSUMER_RUNNING_INFO through each master in turn until one has the consumer's connection.

        A broker without it answers SYSTEM_ERROR "... not online" (``AdminBrokerProcessor.callConsumer``): the
        next broker is asked, and so is the next after a broker we cannot reach (the consumer may be connected
        elsewhere; if no broker has it, that broker's error is raised). One that has it but gets no answer from the
        consumer in its own 10 s answers CONSUME_MSG_TIMEOUT, and our own deadline may pass first; either is
        ``DEADLINE_EXCEEDED`` at once, since asking another broker would only wait for the same silent consumer."""
        offline: TransportError | None = None
        unreachable: TransportError | None = None
        for broker, address in self.brokers().items():
            name = f"GET_CONSUMER_RUNNING_INFO {client_id} at {broker}"
            ext = headers.get_consumer_running_info(consumer_group, client_id)
            try:
                answer = self._call(address, name, request(RequestCode.GET_CONSUMER_RUNNING_INFO, ext))
            except TransportError as error:
                if error.code != "UNAVAILABLE":
                    raise
                unreachable = error  # the consumer may be connected to another broker
                continue
            if answer.code == ResponseCode.SUCCESS:
                try:
                    info = bodies.parse_running_info(answer.body)
                except ProtocolError as error:
                    raise TransportError(f"running info of {client_id}: {error}", "INTERNAL") from None
                return ConsumerReport(client_id, info.queues, info.properties)
            if answer.code == ResponseCode.CONSUME_MSG_TIMEOUT:
                raise TransportError(str(_error(name, address, answer)), "DEADLINE_EXCEEDED")
            if answer.code == ResponseCode.CONSUMER_NOT_ONLINE or (
                answer.code == ResponseCode.SYSTEM_ERROR and "not online" in (answer.remark or "")
            ):
                offline = TransportError(
                    f"consumer {client_id} of {consumer_group} is not online at {self.address}", "NOT_FOUND"
                )
                continue
            raise _error(name, address, answer)
        raise unreachable or offline or TransportError(f"no broker in the cluster at {self.address}", "UNAVAILABLE")

    def running_info(self, consumer_group: str, client_id: str) -> frozenset[MessageQueue]:
        """The queues a consumer of the group says it holds (its :meth:`consumer_report`)."""
        return self.consumer_report(consumer_group, client_id).queues

    def query_assignment(self, broker: str, topic: str, consumer_group: str, client_id: str) -> set[MessageQueue]:
        """QUERY_ASSIGNMENT: the broker runs Java's AllocateMessageQueueAveragely for ``client_id`` over its own
        member list and route cache, an oracle for what a Java consumer of the group computes."""
        body = bodies.encode_query_assignment(topic, consumer_group, client_id, "AVG", "CLUSTERING")
        answer = self._ok(
            self._master(broker), f"QUERY_ASSIGNMENT {topic}", request(RequestCode.QUERY_ASSIGNMENT, body=body)
        )
        return bodies.parse_query_assignment(answer.body)

    def consumer_progress(self, consumer_group: str, topic: str = "", owners: bool = True) -> list[ProgressRow]:
        """GET_CONSUME_STATS at every broker; with ``owners``, each queue's owner from its consumers' running info,
        as mqadmin's ``consumerProgress`` finds it (one request to every consumer)."""
        holders: dict[MessageQueue, str] = {}
        client_ids: set[str] = set()
        if owners:
            try:
                client_ids = {row.client_id for row in self.consumer_connections(consumer_group)}
            except TransportError:
                pass  # no connection: no owner to name
        for client_id in sorted(client_ids):
            try:
                holders.update(dict.fromkeys(self.running_info(consumer_group, client_id), client_id))
            except TransportError as error:
                log.debug("running info of %s: %s", client_id, error)
        rows: list[ProgressRow] = []
        for broker, address in self.brokers().items():
            ext = headers.get_consume_stats(consumer_group, topic or None)
            answer = self._call(address, "GET_CONSUME_STATS", request(RequestCode.GET_CONSUME_STATS, ext))
            if answer.code != ResponseCode.SUCCESS:
                if answer.code in (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, ResponseCode.TOPIC_NOT_EXIST):
                    continue
                raise _error(f"GET_CONSUME_STATS {consumer_group} at {broker}", address, answer)
            stats = bodies.parse_consume_stats(answer.body)
            for mq in sort_queues(stats.offset_table):
                wrapper = stats.offset_table[mq]
                rows.append(
                    ProgressRow(
                        mq,
                        wrapper.broker_offset,
                        wrapper.consumer_offset,
                        wrapper.broker_offset - wrapper.consumer_offset,
                        holders.get(mq, ""),
                        "",
                    )
                )
        if not rows:
            raise TransportError(f"consumer group {consumer_group} has no offsets at {self.address}", "NOT_FOUND")
        return sorted(rows, key=lambda row: row.mq.sort_key)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._links_lock:
            connections = [link.connection for link in self._links.values() if link.connection is not None]
        for connection in connections:
            connection.close()
        self._inbound.shutdown(wait=False, cancel_futures=True)


def _int_field(answer: RemotingCommand, field: str, name: str, address: str) -> int:
    """A numeric response-header field; a missing or malformed one is the server's fault, said in one line."""
    try:
        return headers.int_field(answer, field, f"the answer to {name} from {address}")
    except ProtocolError as error:
        raise TransportError(str(error), "INTERNAL") from None


def _message(mq: MessageQueue, stored: message.StoredMessage) -> Message:
    return Message(
        mq,
        stored.queue_offset,
        stored.msg_id,
        stored.body,
        stored.tags,
        stored.keys,
        stored.properties,
        commit_log_offset=stored.commit_log_offset,
        reconsume_times=stored.reconsume_times,
        born_timestamp_ms=stored.born_timestamp,
        store_timestamp_ms=stored.store_timestamp,
    )


def _pull_result(mq: MessageQueue, address: str, answer: RemotingCommand) -> PullResult:
    name = f"PULL_MESSAGE {mq}"
    if answer.code == ResponseCode.SUCCESS:
        next_offset = _int_field(answer, "nextBeginOffset", name, address)
        try:
            stored = message.decode_messages(answer.body)
        except ProtocolError as error:
            raise TransportError(f"{name} at {address}: {error}", "INTERNAL") from None
        return PullResult(PullStatus.FOUND, next_offset, tuple(_message(mq, item) for item in stored))
    statuses = {
        ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
        ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
        ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
    }
    status = statuses.get(ResponseCode(answer.code)) if answer.code in statuses.keys() else None
    if status is None:
        raise _error(name, address, answer)  # 24/25/26 (heartbeat not seen yet), 215 flow control: retried later
    return PullResult(status, _int_field(answer, "nextBeginOffset", name, address))
