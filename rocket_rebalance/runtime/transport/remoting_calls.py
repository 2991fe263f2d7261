"""The consumer's remoting calls, written once as operations (:mod:`.remoting_wire`) for both runtimes.

Each method is the Java client's request (``MQClientAPIImpl``): every required header field sent as a string, Java
enum names in bodies, and the retry topic ``%RETRY%<group>`` in every heartbeat of a clustering consumer, so Java
and Python members of one group keep one subscription table. The threaded :class:`~.remoting.RemotingTransport`
runs them with its pool's blocking driver, the asyncio :class:`~.remoting_async.AsyncRemotingTransport` awaits
them; only the threaded pull, which waits with no thread at all (a callback on the reader), sends
:meth:`RemotingCalls.pull_request` itself and reads the answer with :func:`pull_result`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence

from rocket_rebalance.model import MASTER_ID, AclCredentials, MessageModel, MessageQueue, TlsSettings, retry_topic
from rocket_rebalance.remoting import (
    ProtocolError,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    bodies,
    headers,
    message,
    request,
)
from rocket_rebalance.runtime.transport import (
    ConnectionRow,
    GroupRegistration,
    GroupSubscription,
    Message,
    PullResult,
    PullStatus,
    SubscriptionRefusedError,
    TransportError,
    reported_expression,
)
from rocket_rebalance.runtime.transport.pulled import pulled_messages
from rocket_rebalance.runtime.transport.remoting_wire import (
    Op,
    RemotingWire,
    int_field,
    parsed_body,
    wire_error,
)
from rocket_rebalance.runtime.transport.tls import tls_client
from rocket_rebalance.subscription import TAG, SubscriptionExpression

__all__ = ["PRODUCER_GROUP", "RemotingCalls", "RemotingEnds", "pull_result", "pull_timeout", "suggested_broker"]

PRODUCER_GROUP = "PID_rocket_rebalance"

_PULL_STATUSES = {
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


def pull_timeout(wait_ms: int) -> float:
    """How long a pull's socket waits: the broker holds it up to ``wait_ms``, and the answer may take 15 s more."""
    return wait_ms / 1000 + 15


def pull_result(mq: MessageQueue, address: str, answer: RemotingCommand, broker_id: int = MASTER_ID) -> PullResult:
    """A PULL_MESSAGE answer of broker ``broker_id`` of the set as a :class:`PullResult`, each inner batch split
    into its messages as Java's consumer splits it; codes that are no pull status (24/25/26: the heartbeat not seen
    yet; 215: flow control; a slave without ``slaveReadEnable`` refuses every pull as busy) are errors, retried
    later by the engine."""
    name = f"PULL_MESSAGE {mq}"
    if answer.code == ResponseCode.SUCCESS:
        next_offset = int_field(answer, "nextBeginOffset", name, address)
        try:
            messages = pulled_messages(mq, answer.body)
        except ProtocolError as error:
            raise TransportError(f"{name} at {address}: {error}", "INTERNAL") from None
        return PullResult(PullStatus.FOUND, next_offset, messages, broker_id)
    status = _PULL_STATUSES.get(ResponseCode(answer.code)) if answer.code in _PULL_STATUSES.keys() else None
    if status is None:
        raise wire_error(name, address, answer)
    return PullResult(status, int_field(answer, "nextBeginOffset", name, address), broker_id=broker_id)


def suggested_broker(answer: RemotingCommand, mq: MessageQueue, address: str) -> int:
    """A pull answer's ``suggestWhichBrokerId`` (every 5.3.3 broker sends it; without it, the master)."""
    if "suggestWhichBrokerId" not in answer.ext:
        return MASTER_ID
    return int_field(answer, "suggestWhichBrokerId", f"PULL_MESSAGE {mq}", address)


class RemotingCalls(RemotingWire):
    """The consumer's calls (and a producer's send) as operations; see the module docstring."""

    def __init__(self, namesrv_addrs: Sequence[str], timeout: float, credentials: AclCredentials | None) -> None:
        super().__init__(namesrv_addrs, timeout, credentials)
        self._expression_types: dict[tuple[str, str], str] = {}  # (group, topic) -> TAG | SQL92, for the pulls
        self._next_queue: dict[str, int] = {}  # broker -> the next queue a send without a queue ID goes to

    def heartbeat(self, broker: str, client_id: str, group: GroupRegistration) -> Op[None]:
        topics = set(group.topics)
        if group.message_model is MessageModel.CLUSTERING:
            topics.add(retry_topic(group.consumer_group))  # as Java's copySubscription: one table for the group
        body = bodies.encode_heartbeat(
            client_id,
            group.consumer_group,
            consume_type="CONSUME_PASSIVELY" if group.push else "CONSUME_ACTIVELY",
            message_model=group.message_model.value,
            consume_from_where=group.consume_from_where.value,
            subscriptions=[self._subscription(group, topic) for topic in sorted(topics)],
        )
        for address in (yield from self.addresses(broker)).values():
            yield from self.ok(address, f"HEART_BEAT to {broker}", request(RequestCode.HEART_BEAT, body=body))

    def _subscription(self, group: GroupRegistration, topic: str) -> bodies.Subscription:
        """The topic's ``SubscriptionData`` as ``FilterAPI`` builds it; its type is remembered for the pulls, whose
        ``expressionType`` Java fills from the same subscription."""
        expression = group.expression(topic)
        self._expression_types[(group.consumer_group, topic)] = expression.expression_type
        return bodies.Subscription(topic, expression.sub_string, self.sub_version, expression.expression_type)

    def check_subscription(
        self, broker: str, consumer_group: str, client_id: str, topic: str, expression: SubscriptionExpression
    ) -> Op[None]:
        """CHECK_CLIENT_CONFIG, as Java's ``checkClientInBroker`` sends it before a consumer starts (for non-TAG
        expressions only: a broker accepts every TAG expression). The broker answers SYSTEM_ERROR when it does
        not filter by properties, SUBSCRIPTION_PARSE_FAILED when the expression does not compile."""
        if expression.expression_type == TAG:
            return
        address = yield from self.master(broker)
        subscription = bodies.Subscription(topic, expression.sub_string, self.sub_version, expression.expression_type)
        command = request(
            RequestCode.CHECK_CLIENT_CONFIG, body=bodies.encode_check_client(client_id, consumer_group, subscription)
        )
        answer = yield from self.call(address, f"CHECK_CLIENT_CONFIG at {broker}", command)
        remark = (answer.remark or "").strip().splitlines()
        if answer.code == ResponseCode.SYSTEM_ERROR:
            raise SubscriptionRefusedError(
                f"broker {broker} at {address} does not filter by {expression.expression_type}: "
                "set enablePropertyFilter=true in its broker config",
                "FAILED_PRECONDITION",
            )
        if answer.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED:
            raise SubscriptionRefusedError(
                f"{expression.expression_type} expression {expression.expression!r} of topic {topic} does not "
                f"compile at broker {broker}" + (f": {remark[0]}" if remark else ""),
                "INVALID_ARGUMENT",
            )
        if answer.code != ResponseCode.SUCCESS:
            raise wire_error(f"CHECK_CLIENT_CONFIG at {broker}", address, answer)

    def unregister(self, broker: str, client_id: str, consumer_group: str) -> Op[None]:
        ext = headers.unregister_client(client_id, consumer_group)
        for address in (yield from self.addresses(broker)).values():
            yield from self.ok(address, f"UNREGISTER_CLIENT at {broker}", request(RequestCode.UNREGISTER_CLIENT, ext))

    def consumer_list(self, broker: str, consumer_group: str) -> Op[list[str]]:
        name = f"GET_CONSUMER_LIST_BY_GROUP {consumer_group} at {broker}"
        _, address = yield from self.reader(broker)  # Java's selectBrokerAddr: the master, else a slave
        answer = yield from self.ok(
            address,
            name,
            request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, headers.get_consumer_list(consumer_group)),
        )
        return parsed_body(bodies.parse_consumer_list, answer, name)

    def subscription_table(self, broker: str, consumer_group: str) -> Op[dict[str, GroupSubscription]]:
        """GET_CONSUMER_CONNECTION_LIST's ``subscriptionTable`` (what ``mqadmin consumerConnection`` prints)."""
        name = f"GET_CONSUMER_CONNECTION_LIST {consumer_group} at {broker}"
        ext = headers.get_consumer_connection_list(consumer_group)
        address = yield from self.master(broker)
        answer = yield from self.call(address, name, request(RequestCode.GET_CONSUMER_CONNECTION_LIST, ext))
        if answer.code == ResponseCode.CONSUMER_NOT_ONLINE:
            return {}
        if answer.code != ResponseCode.SUCCESS:
            raise wire_error(name, address, answer)
        table = parsed_body(bodies.parse_consumer_connection, answer, name).subscriptions
        return {
            topic: GroupSubscription(
                reported_expression(sub.sub_string, sub.expression_type, name), sub.sub_version == self.sub_version
            )
            for topic, sub in table.items()
        }

    def query_offsets(
        self, broker: str, consumer_group: str, queues: Sequence[MessageQueue]
    ) -> Op[dict[MessageQueue, int | None]]:
        """Asked of the master, else (it is down) of a slave, as Java's ``RemoteBrokerOffsetStore`` asks once it
        has refreshed the route; the slave has the master's offsets as last synced (every 10 s) and the writes
        sent to it since."""
        _, address = yield from self.reader(broker)
        commands = [
            request(RequestCode.QUERY_CONSUMER_OFFSET, headers.query_consumer_offset(consumer_group, mq))
            for mq in queues
        ]
        found: dict[MessageQueue, int | None] = {}
        for mq, answer in zip(queues, (yield from self.each(address, "QUERY_CONSUMER_OFFSET", commands)), strict=True):
            if isinstance(answer, TransportError):
                raise answer
            if answer.code == ResponseCode.QUERY_NOT_FOUND:
                found[mq] = None
            elif answer.code == ResponseCode.SUCCESS:
                found[mq] = int_field(answer, "offset", "QUERY_CONSUMER_OFFSET", address)
            else:
                raise wire_error(f"QUERY_CONSUMER_OFFSET of {mq}", address, answer)
        return found

    def update_offsets(
        self, broker: str, consumer_group: str, client_id: str, offsets: Mapping[MessageQueue, int]
    ) -> Op[dict[MessageQueue, int]]:
        """Sent as requests, not oneway as Java does, so a lost write is known and retried by the core.

        One queue of each topic goes first, alone, and the rest after its answer: a RocketMQ 5.3.3 broker makes the
        offset table of a topic and group on its first write without a lock (``ConsumerOffsetManager.commitOffset``
        gets, finds none, puts a new map), so two first writes processed at once keep only one queue's offset, each
        answered SUCCESS. Java's every-5-s ``persistAll`` repairs such a loss at the next write; a consumer's last
        write at its shutdown is not repaired by anyone, and the next owner then re-delivers the whole queue (seen
        on a real broker: one queue of eight stored nothing after 2 of 12 short drains). After the first answer the
        table exists and the broker's own map takes concurrent writes.

        Written to the master, else (it is down) to a slave, as Java writes them
        (``findBrokerAddressInSubscribe(name, MASTER_ID, false)``): a 5.3.3 slave stores them, and the consumer
        writes every offset it holds to the master again once it is back (the core's periodic write, rule O1)."""
        _, address = yield from self.reader(broker)
        items: list[tuple[MessageQueue, int]] = []
        commands: list[RemotingCommand] = []
        failures: list[str] = []
        for mq, offset in offsets.items():
            try:  # one value Java cannot take fails its own queue's write, not the whole batch
                ext = headers.update_consumer_offset(consumer_group, mq, offset)
            except (ValueError, TypeError) as error:
                failures.append(f"UPDATE_CONSUMER_OFFSET of {mq}: {error}")
                continue
            items.append((mq, offset))
            commands.append(request(RequestCode.UPDATE_CONSUMER_OFFSET, ext))
        stored: dict[MessageQueue, int] = {}
        first_of: dict[str, int] = {}
        for index, (mq, _) in enumerate(items):
            first_of.setdefault(mq.topic, index)
        firsts = sorted(first_of.values())
        rest = [index for index in range(len(items)) if index not in first_of.values()]
        answers: dict[int, RemotingCommand | TransportError] = {}
        for batch in (firsts, rest):
            sent = yield from self.each(address, "UPDATE_CONSUMER_OFFSET", [commands[index] for index in batch])
            answers.update(zip(batch, sent, strict=True))
        for index, (mq, offset) in enumerate(items):
            answer = answers[index]
            if isinstance(answer, TransportError):
                failures.append(str(answer))
            elif answer.code == ResponseCode.SUCCESS:
                stored[mq] = offset
            else:
                failures.append(str(wire_error(f"UPDATE_CONSUMER_OFFSET of {mq}", address, answer)))
        if failures and not stored:
            raise TransportError(failures[0], "UNAVAILABLE")
        return stored

    def lock(
        self, broker: str, consumer_group: str, client_id: str, queues: Sequence[MessageQueue]
    ) -> Op[set[MessageQueue]]:
        body = bodies.encode_lock_body(consumer_group, client_id, queues)
        name = f"LOCK_BATCH_MQ at {broker}"
        answer = yield from self.ok(
            (yield from self.master(broker)), name, request(RequestCode.LOCK_BATCH_MQ, body=body)
        )
        return parsed_body(bodies.parse_lock_result, answer, name)

    def unlock(self, broker: str, consumer_group: str, client_id: str, queues: Sequence[MessageQueue]) -> Op[None]:
        body = bodies.encode_lock_body(consumer_group, client_id, queues)
        command = request(RequestCode.UNLOCK_BATCH_MQ, body=body)
        yield from self.ok((yield from self.master(broker)), f"UNLOCK_BATCH_MQ at {broker}", command)

    def pull_request(
        self, mq: MessageQueue, consumer_group: str, offset: int, max_messages: int, wait_ms: int
    ) -> RemotingCommand:
        """A long-poll pull as Java's push consumer sends it (suspend flag, the group's heartbeat subscription's
        expression type); the broker holds it up to ``wait_ms`` (see :func:`pull_timeout`)."""
        ext = headers.pull_message(
            consumer_group,
            mq,
            queue_offset=offset,
            max_msg_nums=max_messages,
            sys_flag=headers.pull_sys_flag(commit_offset=False, suspend=wait_ms > 0, subscription=False),
            commit_offset=0,
            suspend_timeout_ms=wait_ms,
            sub_version=self.sub_version,
            expression_type=self._expression_types.get((consumer_group, mq.topic), TAG),
        )
        return request(RequestCode.PULL_MESSAGE, ext)

    def pull(
        self, mq: MessageQueue, consumer_group: str, offset: int, max_messages: int, wait_ms: int
    ) -> Op[PullResult]:
        broker_id, address = yield from self.pull_node(mq)
        command = self.pull_request(mq, consumer_group, offset, max_messages, wait_ms)
        answer = yield from self.call(address, f"PULL_MESSAGE {mq}", command, pull_timeout(wait_ms))
        return self.pulled(mq, broker_id, address, answer)

    def pulled(self, mq: MessageQueue, broker_id: int, address: str, answer: RemotingCommand) -> PullResult:
        """A pull's answer from ``broker_id`` at ``address`` read (:func:`pull_result`), and its suggestion of
        where the next pull goes kept, as Java keeps it, only from an answer that is a pull status."""
        result = pull_result(mq, address, answer, broker_id)
        self.suggested(mq, suggested_broker(answer, mq, address))
        return result

    def max_offset(self, mq: MessageQueue) -> Op[int]:
        return (yield from self._queue_offset(mq, RequestCode.GET_MAX_OFFSET, headers.get_max_offset(mq)))

    def min_offset(self, mq: MessageQueue) -> Op[int]:
        return (yield from self._queue_offset(mq, RequestCode.GET_MIN_OFFSET, headers.get_min_offset(mq)))

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> Op[int]:
        ext = headers.search_offset_by_timestamp(mq, timestamp_ms)
        return (yield from self._queue_offset(mq, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, ext))

    def consumer_connections(self, consumer_group: str) -> Op[list[ConnectionRow]]:
        """The group's connections at every master (``mqadmin consumerConnection``; a consumer reads it to learn
        its members' languages); ``NOT_FOUND`` when no broker has the group online."""
        rows: list[ConnectionRow] = []
        masters = yield from self.brokers()
        for broker, address in masters.items():
            ext = headers.get_consumer_connection_list(consumer_group)
            command = request(RequestCode.GET_CONSUMER_CONNECTION_LIST, ext)
            answer = yield from self.call(address, "GET_CONSUMER_CONNECTION_LIST", command)
            if answer.code == ResponseCode.CONSUMER_NOT_ONLINE:
                continue
            if answer.code != ResponseCode.SUCCESS:
                raise wire_error(f"GET_CONSUMER_CONNECTION_LIST {consumer_group} at {broker}", address, answer)
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

    def _queue_offset(self, mq: MessageQueue, code: RequestCode, ext: Mapping[str, str]) -> Op[int]:
        """An offset of ``mq`` that its broker's master answers in the ``offset`` header field."""
        address = yield from self.master(mq.broker_name)
        answer = yield from self.ok(address, f"{code.name} {mq}", request(code, ext))
        return int_field(answer, "offset", code.name, address)

    def send_back(self, consumer_group: str, message: Message, max_reconsume_times: int, delay_level: int) -> Op[None]:
        """CONSUMER_SEND_MSG_BACK: the broker stores the message again in ``%RETRY%<group>`` (delay level 0: the
        broker picks 3 + reconsume times) or, past ``max_reconsume_times`` or at delay level -1, in the dead-letter
        queue."""
        address = yield from self.master(message.mq.broker_name)
        ext = headers.consumer_send_msg_back(
            consumer_group,
            commit_log_offset=message.commit_log_offset,
            delay_level=delay_level,
            origin_msg_id=message.msg_id,
            origin_topic=message.topic,
            max_reconsume_times=max_reconsume_times,
        )
        command = request(RequestCode.CONSUMER_SEND_MSG_BACK, ext)
        yield from self.ok(address, f"CONSUMER_SEND_MSG_BACK {message.mq}", command)

    def send(
        self,
        topic: str,
        broker: str,
        bodies: Sequence[bytes],
        queue_id: int | None = None,
        tags: str = "",
        keys: str = "",
        properties: Mapping[str, str] | None = None,
    ) -> Op[tuple[int, list[int]]]:
        """SEND_MESSAGE_V2 per body, one after another as Java's producer sends: the broker stores concurrent
        requests in any order, and a queue's messages must keep the order they were given in. ``tags``, ``keys``
        and ``properties`` travel as Java's ``Message`` carries them (the broker derives the tag's hash code, by
        which tag subscriptions are filtered, from ``TAGS``). Without ``queue_id``, the broker's queues are taken
        in turn."""
        given = message.message_properties(tags, keys, properties)
        if queue_id is None:
            queue_id = self._next_queue.get(broker, 0)
            self._next_queue[broker] = queue_id + 1
            queue_id %= max(1, (yield from self._write_queue_nums(topic, broker)))
        address = yield from self.master(broker)
        mq = MessageQueue(topic, broker, queue_id)
        offsets: list[int] = []
        for body in bodies:
            encoded = message.encode_properties({**given, "UNIQ_KEY": uuid.uuid4().hex.upper(), "WAIT": "true"})
            ext = headers.send_message_v2(PRODUCER_GROUP, mq, encoded, born_timestamp_ms=int(time.time() * 1000))
            command = request(RequestCode.SEND_MESSAGE_V2, ext, body)
            answer = yield from self.ok(address, f"SEND_MESSAGE_V2 to {mq}", command)
            offsets.append(int_field(answer, "queueOffset", "SEND_MESSAGE_V2", address))
        return queue_id, offsets

    def _write_queue_nums(self, topic: str, broker: str) -> Op[int]:
        for data in (yield from self.route(topic)).queue_datas:
            if data.broker_name == broker:
                return data.write_queue_nums
        raise TransportError(f"topic {topic} has no queue on broker {broker}", "NOT_FOUND")


class RemotingEnds:
    """What both remoting transports, threaded and asyncio, are made of, from the one constructor they share: the
    wire's calls over the name servers ``namesrv_addrs`` (``timeout`` each, signed with ``credentials``) and the
    TLS context ``tls`` asks for, built first so that a bad TLS file fails before anything starts."""

    def __init__(
        self,
        namesrv_addrs: Sequence[str],
        timeout: float = 5.0,
        credentials: AclCredentials | None = None,
        tls: TlsSettings | None = None,
    ) -> None:
        self._wire = RemotingCalls(namesrv_addrs, timeout, credentials)
        self._tls = None if tls is None else tls_client(tls)
        self.address = self._wire.address
        self.long_poll_ms = 15000  # RocketMQ's brokerSuspendMaxTimeMillis, which Java's push consumer asks for
        self._timeout = timeout

    @property
    def CLUSTER_INFO_EVERY(self) -> float:
        """Seconds between cluster-info look-ups made for a broker that no route gave an address for: the wire's
        :attr:`~.remoting_wire.RemotingWire.cluster_info_every`, which keeps when the last look-up was."""
        return self._wire.cluster_info_every

    @CLUSTER_INFO_EVERY.setter
    def CLUSTER_INFO_EVERY(self, seconds: float) -> None:
        self._wire.cluster_info_every = seconds
