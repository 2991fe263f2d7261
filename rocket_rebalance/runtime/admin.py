"""One-shot reads from a name server and its brokers for operator commands (``allocate-mq -n``, ``simulate -n``).

Each call opens a channel, asks, and closes it. gRPC failures become :class:`ServerError` with one line that
names the address and what went wrong, because the commands print exactly that line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

import grpc

from rocket_rebalance._proto.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    broker_pb2,
    broker_pb2_grpc,
    namesrv_pb2,
    namesrv_pb2_grpc,
)
from rocket_rebalance.model import MessageQueue
from rocket_rebalance.route import TopicRoute
from rocket_rebalance.runtime.transport import route_from_wire

__all__ = [
    "ConnectionRow",
    "ProgressRow",
    "ServerError",
    "consumer_connection",
    "consumer_progress",
    "fetch_members",
    "fetch_route",
]

DEFAULT_TIMEOUT = 5.0
T = TypeVar("T")


class ServerError(OSError):
    """The server could not be reached or refused the request; the message says which and why."""


@contextmanager
def _channel(address: str) -> Iterator[grpc.Channel]:
    channel = grpc.insecure_channel(address)
    try:
        yield channel
    finally:
        channel.close()


def _ask(address: str, what: str, call: Callable[[], T]) -> T:
    try:
        return call()
    except grpc.RpcError as error:
        code = error.code() if isinstance(error, grpc.Call) else None
        details = error.details() if isinstance(error, grpc.Call) else str(error)
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            raise ServerError(f"cannot reach the name server at {address} ({details})") from None
        if code == grpc.StatusCode.NOT_FOUND:
            raise ServerError(f"{what}: not found at {address} ({details})") from None
        name = code.name if code is not None else "error"
        raise ServerError(f"{what} at {address} failed: {name} {details}") from None


def fetch_route(address: str, topic: str, timeout: float = DEFAULT_TIMEOUT) -> TopicRoute:
    """The topic's route as the name server at ``address`` gives it (GetRouteInfoByTopic)."""
    with _channel(address) as channel:
        stub = namesrv_pb2_grpc.NameServerStub(channel)
        request = namesrv_pb2.GetRouteInfoByTopicRequest(topic=topic)
        route = _ask(address, f"topic {topic}", lambda: stub.GetRouteInfoByTopic(request, timeout=timeout))
    return route_from_wire(topic, route)


def fetch_members(address: str, topic: str, consumer_group: str, timeout: float = DEFAULT_TIMEOUT) -> list[str]:
    """The group's client IDs as the first broker of the topic's route knows them (GetConsumerListByGroup).

    The Java client asks one broker of the topic too; brokers can disagree for a moment after a change.
    """
    route = fetch_route(address, topic, timeout)
    if not route.queue_datas:
        raise ServerError(f"topic {topic} has no broker up at {address}")
    broker = route.queue_datas[0].broker_name
    with _channel(address) as channel:
        stub = broker_pb2_grpc.BrokerStub(channel)
        request = broker_pb2.GetConsumerListByGroupRequest(broker_name=broker, consumer_group=consumer_group)
        answer = _ask(
            address,
            f"group {consumer_group} at {broker}",
            lambda: stub.GetConsumerListByGroup(request, timeout=timeout),
        )
    return list(answer.consumer_id_list)


@dataclass(frozen=True)
class ProgressRow:
    """One queue of ``consumerProgress``: how far the group is behind, and who consumed it last."""

    mq: MessageQueue
    broker_offset: int
    consumer_offset: int
    diff: int
    last_owner: str
    lock_owner: str


def consumer_progress(
    address: str, consumer_group: str, topic: str = "", timeout: float = DEFAULT_TIMEOUT
) -> list[ProgressRow]:
    """Per queue: broker offset, consumer offset, diff and last owner (mqadmin ``consumerProgress``)."""
    with _channel(address) as channel:
        stub = admin_pb2_grpc.AdminStub(channel)
        request = admin_pb2.ConsumerProgressRequest(consumer_group=consumer_group, topic=topic)
        answer = _ask(address, f"group {consumer_group}", lambda: stub.ConsumerProgress(request, timeout=timeout))
    return [
        ProgressRow(
            MessageQueue(q.queue.topic, q.queue.broker_name, q.queue.queue_id),
            q.broker_offset,
            q.consumer_offset,
            q.diff,
            q.last_owner,
            q.lock_owner,
        )
        for q in answer.queues
    ]


@dataclass(frozen=True)
class ConnectionRow:
    """One member of the group at one broker (mqadmin ``consumerConnection``)."""

    client_id: str
    broker_name: str
    connected: bool
    last_heartbeat_ms_ago: int
    topics: tuple[str, ...]


def consumer_connection(address: str, consumer_group: str, timeout: float = DEFAULT_TIMEOUT) -> list[ConnectionRow]:
    """The group's members at every broker that is up, with their subscriptions."""
    with _channel(address) as channel:
        stub = admin_pb2_grpc.AdminStub(channel)
        request = admin_pb2.ConsumerConnectionRequest(consumer_group=consumer_group)
        answer = _ask(address, f"group {consumer_group}", lambda: stub.ConsumerConnection(request, timeout=timeout))
    return [
        ConnectionRow(
            c.client_id, c.broker_name, c.connected, c.last_heartbeat_ms_ago, tuple(s.topic for s in c.subscriptions)
        )
        for c in answer.connections
    ]
