"""The remoting transport's operator reads: what ``mqadmin`` asks a RocketMQ cluster about consumer groups.

Connections, topics, groups, a consumer's running info and a group's progress, asked of the name server and of
every master as ``mqadmin`` asks them, on the pool's connections (:mod:`.remoting_pool`), over which the transport
builds this role. They are part of the transport (the :class:`~rocket_rebalance.runtime.transport.AdminTransport`
half) rather than of ``admin/`` because they speak the wire; ``admin/`` turns their rows into an operator's
answers.
"""

from __future__ import annotations

import logging

from rocket_rebalance.model import MessageQueue, sort_queues
from rocket_rebalance.remoting import ProtocolError, RequestCode, ResponseCode, bodies, headers, request
from rocket_rebalance.runtime.transport import (
    GROUP_NOT_ONLINE,
    ConnectionRow,
    ConsumerReport,
    ProgressRow,
    TopicConsumeStatus,
    TransportError,
    reported_expression,
)
from rocket_rebalance.runtime.transport.remoting_pool import RemotingPool
from rocket_rebalance.runtime.transport.remoting_wire import wire_error

__all__ = ["RemotingAdminReads"]

log = logging.getLogger("rocket_rebalance.runtime.remoting")


class RemotingAdminReads:
    """The operator's reads through ``pool``'s connections (every broker is a master of its
    :meth:`~.remoting_pool.RemotingPool.brokers`)."""

    def __init__(self, pool: RemotingPool) -> None:
        self._pool = pool
        self._wire = pool.wire

    def consumer_connections(self, consumer_group: str) -> list[ConnectionRow]:
        return self._pool.run(self._wire.consumer_connections(consumer_group))

    def topics(self) -> list[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER."""
        address, answer = self._pool.namesrv_call(
            "GET_ALL_TOPIC_LIST_FROM_NAMESERVER", request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        )
        if answer.code != ResponseCode.SUCCESS:
            raise wire_error("topic list", address, answer)
        try:
            return sorted(bodies.parse_topic_list(answer.body))
        except ProtocolError as error:
            raise TransportError(f"topic list from {address}: {error}", "INTERNAL") from None

    def consumer_groups(self) -> list[str]:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG at every master, merged. Every master must answer: a group known only
        to a broker that did not would be missing without a word, so one that fails fails the call."""
        groups: set[str] = set()
        for broker, address in self._pool.brokers().items():
            name = f"GET_ALL_SUBSCRIPTIONGROUP_CONFIG at {broker}"
            answer = self._pool.ok(address, name, request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
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
        for broker, address in self._pool.brokers().items():
            name = f"GET_CONSUMER_RUNNING_INFO {client_id} at {broker}"
            ext = headers.get_consumer_running_info(consumer_group, client_id)
            try:
                answer = self._pool.call(address, name, request(RequestCode.GET_CONSUMER_RUNNING_INFO, ext))
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
                subscriptions = {
                    sub.topic: reported_expression(
                        sub.sub_string, sub.expression_type, f"running info of {client_id}, topic {sub.topic}"
                    )
                    for sub in info.subscriptions
                }
                status = {
                    topic: TopicConsumeStatus(
                        row.pullRT,
                        row.pullTPS,
                        row.consumeRT,
                        row.consumeOKTPS,
                        row.consumeFailedTPS,
                        row.consumeFailedMsgs,
                    )
                    for topic, row in info.status_table.items()
                }
                return ConsumerReport(client_id, info.queues, info.properties, subscriptions, status)
            if answer.code == ResponseCode.CONSUME_MSG_TIMEOUT:
                raise TransportError(str(wire_error(name, address, answer)), "DEADLINE_EXCEEDED")
            if answer.code == ResponseCode.CONSUMER_NOT_ONLINE or (
                answer.code == ResponseCode.SYSTEM_ERROR and "not online" in (answer.remark or "")
            ):
                offline = TransportError(
                    f"consumer {client_id} of {consumer_group} is not online at {self._wire.address}", "NOT_FOUND"
                )
                continue
            raise wire_error(name, address, answer)
        cluster = self._wire.address
        raise unreachable or offline or TransportError(f"no broker in the cluster at {cluster}", "UNAVAILABLE")

    def running_info(self, consumer_group: str, client_id: str) -> frozenset[MessageQueue]:
        """The queues a consumer of the group says it holds (its :meth:`consumer_report`)."""
        return self.consumer_report(consumer_group, client_id).queues

    def query_assignment(self, broker: str, topic: str, consumer_group: str, client_id: str) -> set[MessageQueue]:
        """QUERY_ASSIGNMENT: the broker runs Java's AllocateMessageQueueAveragely for ``client_id`` over its own
        member list and route cache, an oracle for what a Java consumer of the group computes."""
        body = bodies.encode_query_assignment(topic, consumer_group, client_id, "AVG", "CLUSTERING")
        answer = self._pool.ok(
            self._pool.master(broker), f"QUERY_ASSIGNMENT {topic}", request(RequestCode.QUERY_ASSIGNMENT, body=body)
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
        for broker, address in self._pool.brokers().items():
            ext = headers.get_consume_stats(consumer_group, topic or None)
            answer = self._pool.call(address, "GET_CONSUME_STATS", request(RequestCode.GET_CONSUME_STATS, ext))
            if answer.code != ResponseCode.SUCCESS:
                if answer.code in (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, ResponseCode.TOPIC_NOT_EXIST):
                    continue
                raise wire_error(f"GET_CONSUME_STATS {consumer_group} at {broker}", address, answer)
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
            raise TransportError(
                f"{GROUP_NOT_ONLINE.format(group=consumer_group)} at {self._wire.address}", "NOT_FOUND"
            )
        return sorted(rows, key=lambda row: row.mq.sort_key)
