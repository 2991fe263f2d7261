"""One-shot reads from a cluster for operator commands (``allocate-mq -n``, ``simulate -n``, ``consumer-progress``,
``consumer-connection``), over whichever wire the address names (see :func:`~.transport.parse_address`).

Each call opens a transport, asks, and closes it. Failures become :class:`ServerError` with one line that names
the address and what went wrong, because the commands print exactly that line. A topic or group name that breaks
RocketMQ's rules is a ``ValueError`` (the model's name check) before anything is asked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from rocket_rebalance.model import AclCredentials, TlsSettings, check_group_name, check_topic_name
from rocket_rebalance.route import TopicRoute
from rocket_rebalance.runtime.transport import AdminTransport, ConnectionRow, ProgressRow, TransportError
from rocket_rebalance.runtime.transport.wire import open_transport

__all__ = [
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
def _transport(
    address: str, token: str | None, timeout: float, credentials: AclCredentials | None, tls: TlsSettings | None
) -> Iterator[AdminTransport]:
    transport = open_transport(address, token=token, timeout=timeout, credentials=credentials, tls=tls)
    try:
        yield transport
    finally:
        transport.close()


def _ask(address: str, what: str, call: Callable[[], T]) -> T:
    try:
        return call()
    except TransportError as error:
        if error.code == "FAILED_PRECONDITION":  # a server of the other kind: its own line says what it is
            raise ServerError(str(error)) from None
        if error.code in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
            raise ServerError(f"cannot reach the name server at {address} ({error})") from None
        if error.code == "NOT_FOUND":
            raise ServerError(f"{what}: not found at {address} ({error})") from None
        raise ServerError(f"{what} at {address} failed: {error}") from None


def fetch_route(
    address: str,
    topic: str,
    timeout: float = DEFAULT_TIMEOUT,
    token: str | None = None,
    credentials: AclCredentials | None = None,
    tls: TlsSettings | None = None,
) -> TopicRoute:
    """The topic's route as the name server at ``address`` gives it."""
    check_topic_name(topic)
    with _transport(address, token, timeout, credentials, tls) as transport:
        return _ask(address, f"topic {topic}", lambda: transport.route(topic))


def fetch_members(
    address: str,
    topic: str,
    consumer_group: str,
    timeout: float = DEFAULT_TIMEOUT,
    token: str | None = None,
    credentials: AclCredentials | None = None,
    tls: TlsSettings | None = None,
) -> list[str]:
    """The group's client IDs (GET_CONSUMER_LIST_BY_GROUP) as the broker consumers of this library ask knows them:
    the one :meth:`~rocket_rebalance.route.TopicRoute.member_list_broker` names, the route's first. Java asks a
    random broker of the topic, and brokers can disagree for a moment after a change.
    """
    check_topic_name(topic)
    check_group_name(consumer_group)
    with _transport(address, token, timeout, credentials, tls) as transport:
        route = _ask(address, f"topic {topic}", lambda: transport.route(topic))
        broker = route.member_list_broker()
        if broker is None:
            raise ServerError(f"topic {topic} has no broker up at {address}")
        return _ask(
            address, f"group {consumer_group} at {broker}", lambda: transport.consumer_list(broker, consumer_group)
        )


def consumer_progress(
    address: str,
    consumer_group: str,
    topic: str = "",
    timeout: float = DEFAULT_TIMEOUT,
    token: str | None = None,
    credentials: AclCredentials | None = None,
    tls: TlsSettings | None = None,
) -> list[ProgressRow]:
    """Per queue: broker offset, consumer offset, diff and owner (mqadmin ``consumerProgress``); of one ``topic``,
    or of every topic when it is empty."""
    check_group_name(consumer_group)
    if topic:
        check_topic_name(topic)
    with _transport(address, token, timeout, credentials, tls) as transport:
        return _ask(address, f"group {consumer_group}", lambda: transport.consumer_progress(consumer_group, topic))


def consumer_connection(
    address: str,
    consumer_group: str,
    timeout: float = DEFAULT_TIMEOUT,
    token: str | None = None,
    credentials: AclCredentials | None = None,
    tls: TlsSettings | None = None,
) -> list[ConnectionRow]:
    """The group's connections at every broker that is up, with their subscriptions."""
    check_group_name(consumer_group)
    with _transport(address, token, timeout, credentials, tls) as transport:
        return _ask(address, f"group {consumer_group}", lambda: transport.consumer_connections(consumer_group))
