"""The remoting transport: RocketMQ's own protocol to a real Apache RocketMQ cluster.

Chosen by a name-server list in RocketMQ's form (``host:port;host:port``). It behaves on the wire as the Java
client does (``MQClientAPIImpl``): requests multiplexed by opaque, every required header field sent as a string,
Java enum names in bodies, and the retry topic ``%RETRY%<group>`` in every heartbeat of a clustering consumer, so
Java and Python members of one group keep one subscription table.

:class:`RemotingTransport` is one object with four roles, each in a module of its own, over one connection pool:

* :mod:`.remoting_pool`: one TCP connection per name server or broker address, shared by every role (the broker
  keys a consumer by its connection, so heartbeats, pulls and the unregister all share it), the name servers tried
  in turn, brokers' addresses learnt from routes and cluster info, one reader thread for every connection and a
  small work pool (a fixed number of threads, however many brokers); ACL signing and TLS belong there;
* this module: the consumer's wire (heartbeat, unregister, consumer list, offsets, locks, pulls, send back);
* :mod:`.remoting_inbound`: the requests a broker sends us (notifications, running info, consume directly);
* :mod:`.remoting_admin`: the operator's reads (connections, topics, groups, running info, progress);
* :mod:`.remoting_producer`: sending messages and creating topics, for tests, demos and the lab.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from rocket_rebalance.model import AclCredentials, MessageModel, MessageQueue, TlsSettings, retry_topic
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
    GroupRegistration,
    GroupSubscription,
    Message,
    PullResult,
    PullStatus,
    SubscriptionRefusedError,
    TransportError,
    reported_expression,
)
from rocket_rebalance.runtime.transport.remoting_admin import RemotingAdminReads
from rocket_rebalance.runtime.transport.remoting_inbound import RemotingInbound
from rocket_rebalance.runtime.transport.remoting_pool import int_field, parsed_body, stored_message, wire_error
from rocket_rebalance.runtime.transport.remoting_producer import RemotingProducer
from rocket_rebalance.subscription import TAG, SubscriptionExpression

__all__ = ["RemotingTransport"]


class RemotingTransport(RemotingInbound, RemotingAdminReads, RemotingProducer):
    """A RocketMQ client's wire to the name servers ``namesrv_addrs`` and the brokers their routes name.

    The consumer's calls are written here; the pool, the answers to brokers' requests, the operator's reads and the
    producer come from its bases (see the module docstring), all on one connection per address."""

    def __init__(
        self,
        namesrv_addrs: Sequence[str],
        timeout: float = 5.0,
        credentials: AclCredentials | None = None,
        tls: TlsSettings | None = None,
    ) -> None:
        super().__init__(namesrv_addrs, timeout, credentials, tls)
        self.long_poll_ms = 15000
        self._expression_types: dict[tuple[str, str], str] = {}  # (group, topic) -> TAG | SQL92, for the pulls

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
            subscriptions=[self._subscription(group, topic) for topic in sorted(topics)],
        )
        for address in self._addresses(broker).values():
            self._ok(address, f"HEART_BEAT to {broker}", request(RequestCode.HEART_BEAT, body=body))

    def _subscription(self, group: GroupRegistration, topic: str) -> bodies.Subscription:
        """The topic's ``SubscriptionData`` as ``FilterAPI`` builds it; its type is remembered for the pulls, whose
        ``expressionType`` Java fills from the same subscription."""
        expression = group.expression(topic)
        self._expression_types[(group.consumer_group, topic)] = expression.expression_type
        return bodies.Subscription(topic, expression.sub_string, self._sub_version, expression.expression_type)

    def check_subscription(
        self, broker: str, consumer_group: str, client_id: str, topic: str, expression: SubscriptionExpression
    ) -> None:
        """CHECK_CLIENT_CONFIG, as Java's ``checkClientInBroker`` sends it before a consumer starts (for non-TAG
        expressions only: a broker accepts every TAG expression). The broker answers SYSTEM_ERROR when it does
        not filter by properties, SUBSCRIPTION_PARSE_FAILED when the expression does not compile."""
        if expression.expression_type == TAG:
            return
        address = self._master(broker)
        subscription = bodies.Subscription(topic, expression.sub_string, self._sub_version, expression.expression_type)
        command = request(
            RequestCode.CHECK_CLIENT_CONFIG, body=bodies.encode_check_client(client_id, consumer_group, subscription)
        )
        answer = self._call(address, f"CHECK_CLIENT_CONFIG at {broker}", command)
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

    def unregister(self, broker: str, client_id: str, consumer_group: str) -> None:
        ext = headers.unregister_client(client_id, consumer_group)
        for address in self._addresses(broker).values():
            self._ok(address, f"UNREGISTER_CLIENT at {broker}", request(RequestCode.UNREGISTER_CLIENT, ext))

    def consumer_list(self, broker: str, consumer_group: str) -> list[str]:
        name = f"GET_CONSUMER_LIST_BY_GROUP {consumer_group} at {broker}"
        answer = self._ok(
            self._master(broker),
            name,
            request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, headers.get_consumer_list(consumer_group)),
        )
        return parsed_body(bodies.parse_consumer_list, answer, name)

    def subscription_table(self, broker: str, consumer_group: str) -> dict[str, GroupSubscription]:
        """GET_CONSUMER_CONNECTION_LIST's ``subscriptionTable`` (what ``mqadmin consumerConnection`` prints)."""
        name = f"GET_CONSUMER_CONNECTION_LIST {consumer_group} at {broker}"
        ext = headers.get_consumer_connection_list(consumer_group)
        answer = self._call(self._master(broker), name, request(RequestCode.GET_CONSUMER_CONNECTION_LIST, ext))
        if answer.code == ResponseCode.CONSUMER_NOT_ONLINE:
            return {}
        if answer.code != ResponseCode.SUCCESS:
            raise wire_error(name, self._master(broker), answer)
        table = parsed_body(bodies.parse_consumer_connection, answer, name).subscriptions
        return {
            topic: GroupSubscription(
                reported_expression(sub.sub_string, sub.expression_type, name), sub.sub_version == self._sub_version
            )
            for topic, sub in table.items()
        }

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
                found[mq] = int_field(answer, "offset", "QUERY_CONSUMER_OFFSET", address)
            else:
                raise wire_error(f"QUERY_CONSUMER_OFFSET of {mq}", address, answer)
        return found

    def update_offsets(
        self, broker: str, consumer_group: str, client_id: str, offsets: Mapping[MessageQueue, int]
    ) -> dict[MessageQueue, int]:
        """Sent as requests, not oneway as Java does, so a lost write is known and retried by the core."""
        address = self._master(broker)
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
        for (mq, offset), answer in zip(items, self._each(address, "UPDATE_CONSUMER_OFFSET", commands), strict=True):
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
    ) -> set[MessageQueue]:
        body = bodies.encode_lock_body(consumer_group, client_id, queues)
        name = f"LOCK_BATCH_MQ at {broker}"
        answer = self._ok(self._master(broker), name, request(RequestCode.LOCK_BATCH_MQ, body=body))
        return parsed_body(bodies.parse_lock_result, answer, name)

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
            expression_type=self._expression_types.get((consumer_group, mq.topic), TAG),
        )

        def finished(answer: RemotingCommand | TransportError) -> None:
            if isinstance(answer, TransportError):
                done(answer)
                return
            try:
                done(_pull_result(mq, address, answer))
            except TransportError as error:
                done(error)

        self._request(
            connection, f"PULL_MESSAGE {mq}", request(RequestCode.PULL_MESSAGE, ext), wait_ms / 1000 + 15, finished
        )

    def max_offset(self, mq: MessageQueue) -> int:
        return self._queue_offset(mq, RequestCode.GET_MAX_OFFSET, headers.get_max_offset(mq))

    def min_offset(self, mq: MessageQueue) -> int:
        return self._queue_offset(mq, RequestCode.GET_MIN_OFFSET, headers.get_min_offset(mq))

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        ext = headers.search_offset_by_timestamp(mq, timestamp_ms)
        return self._queue_offset(mq, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, ext)

    def _queue_offset(self, mq: MessageQueue, code: RequestCode, ext: Mapping[str, str]) -> int:
        """An offset of ``mq`` that its broker's master answers in the ``offset`` header field."""
        address = self._master(mq.broker_name)
        answer = self._ok(address, f"{code.name} {mq}", request(code, ext))
        return int_field(answer, "offset", code.name, address)

    def send_back(self, consumer_group: str, message_: Message, max_reconsume_times: int) -> None:
        """CONSUMER_SEND_MSG_BACK: the broker stores the message again in ``%RETRY%<group>`` (delay level 0: the
        broker picks 3 + reconsume times) or, past ``max_reconsume_times``, in the dead-letter queue."""
        address = self._master(message_.mq.broker_name)
        ext = headers.consumer_send_msg_back(
            consumer_group,
            commit_log_offset=message_.commit_log_offset,
            delay_level=0,
            origin_msg_id=message_.msg_id,
            origin_topic=message_.topic,
            max_reconsume_times=max_reconsume_times,
        )
        self._ok(address, f"CONSUMER_SEND_MSG_BACK {message_.mq}", request(RequestCode.CONSUMER_SEND_MSG_BACK, ext))


def _pull_result(mq: MessageQueue, address: str, answer: RemotingCommand) -> PullResult:
    name = f"PULL_MESSAGE {mq}"
    if answer.code == ResponseCode.SUCCESS:
        next_offset = int_field(answer, "nextBeginOffset", name, address)
        try:
            stored = message.decode_messages(answer.body)
        except ProtocolError as error:
            raise TransportError(f"{name} at {address}: {error}", "INTERNAL") from None
        return PullResult(PullStatus.FOUND, next_offset, tuple(stored_message(mq, item) for item in stored))
    statuses = {
        ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
        ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
        ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
    }
    status = statuses.get(ResponseCode(answer.code)) if answer.code in statuses.keys() else None
    if status is None:
        raise wire_error(name, address, answer)  # 24/25/26 (heartbeat not seen yet), 215 flow control: retried later
    return PullResult(status, int_field(answer, "nextBeginOffset", name, address))
