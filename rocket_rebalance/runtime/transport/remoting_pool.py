"""The remoting transport's connection pool: one TCP connection per address, shared by every role.

Every part of :class:`~rocket_rebalance.runtime.transport.remoting.RemotingTransport` (the consumer's wire, the
operator's reads, the producer, the answers to requests a broker sends us) talks through this one pool, because the
broker keys a consumer by its connection: heartbeats, pulls and the unregister must travel on the same one, and a
broker's requests to the consumer (notifications, running info) arrive on it too.

The pool knows which address to use: the name servers of the list are tried in turn, from the one that answered
last; brokers are named as in routes, and their addresses are learnt from every route and from the cluster info
(:meth:`RemotingPool.route`, :meth:`RemotingPool.brokers`, the two name-server reads every role relies on). A
broker no route gave an address for asks the cluster info at most once per :attr:`RemotingPool.CLUSTER_INFO_EVERY`
seconds, one look-up at a time, whoever asks: a heartbeat round over a thousand such brokers costs one look-up,
not a thousand. A connection that fails is reopened on the next call, with a backoff (0.2 s doubling to 5 s) so a
broker that is down is not hammered; a response ``GO_AWAY`` (a broker shutting down) retires the connection and
the request is sent once more on a new one.

Threads: one reader for every connection (:class:`~.connection.Reactor`) and a pool of
:data:`WORK_THREADS` for what the reader must not wait for (answering a broker's requests, opening a new
connection after GO_AWAY). That is all, however many brokers the routes name. :meth:`RemotingPool.close` ends
them: after it no request leaves, and every one in flight fails at once.

Credentials and TLS live here: every connection, to a name server or a broker, is opened by
:meth:`RemotingPool._open`, which does the TLS handshake with the pool's one context when TLS is on (:mod:`.tls`; a
bad TLS file fails the pool's construction), and every request we send leaves through :meth:`RemotingPool._request`,
which signs it with the ACL credentials as Java's ``AclClientRPCHook`` does (:mod:`rocket_rebalance.remoting.acl`).
A request the server refuses (``NO_PERMISSION``: ACL 2.0 says so for a signature it rejects and for a missing
permission alike) has the access key added to its remark, so every error built from it names the request, the
resource (in the broker's remark) and whose credentials were refused; the secret itself is held by the credentials
object alone.
"""

from __future__ import annotations

import logging
import queue
import random
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from rocket_rebalance.model import AclCredentials, MessageQueue, TlsSettings
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
from rocket_rebalance.remoting.acl import sign
from rocket_rebalance.route import TopicRoute
from rocket_rebalance.runtime.transport import Message, TransportError
from rocket_rebalance.runtime.transport.connection import Completion, Connection, Reactor
from rocket_rebalance.runtime.transport.tls import tls_client
from rocket_rebalance.runtime.workers import DaemonPool

__all__ = ["WORK_THREADS", "RemotingPool", "int_field", "parsed_body", "stored_message", "wire_error"]

log = logging.getLogger("rocket_rebalance.runtime.remoting")

_BACKOFF = (0.2, 5.0)
WORK_THREADS = 2  # answers to brokers' requests and re-sends after GO_AWAY in progress at once
_CODE_NAMES: dict[int, str] = {
    ResponseCode.TOPIC_NOT_EXIST: "NOT_FOUND",
    ResponseCode.QUERY_NOT_FOUND: "NOT_FOUND",
    ResponseCode.CONSUMER_NOT_ONLINE: "NOT_FOUND",
    ResponseCode.SYSTEM_BUSY: "UNAVAILABLE",
    ResponseCode.SERVICE_NOT_AVAILABLE: "UNAVAILABLE",
    ResponseCode.NO_PERMISSION: "PERMISSION_DENIED",
}


T = TypeVar("T")


def wire_error(name: str, address: str, answer: RemotingCommand) -> TransportError:
    """A non-success response as a TransportError naming the call, the address, the code and the remark."""
    try:
        code_name = ResponseCode(answer.code).name
    except ValueError:
        code_name = f"code {answer.code}"
    remark = (answer.remark or "").strip().splitlines()
    text = f"{name} at {address}: {code_name}" + (f" {remark[0]}" if remark else "")
    return TransportError(text, _CODE_NAMES.get(answer.code, code_name))


def parsed_body(parse: Callable[[bytes], T], answer: RemotingCommand, name: str) -> T:
    """A SUCCESS answer's body as ``parse`` reads it; a body the codec refuses is the server's fault, a
    :class:`TransportError` naming the call like any other failure (never a codec error escaping to a caller that
    only expects transport errors, where it would vanish)."""
    try:
        return parse(answer.body)
    except ProtocolError as error:
        raise TransportError(f"{name}: {error}", "INTERNAL") from None


def int_field(answer: RemotingCommand, field: str, name: str, address: str) -> int:
    """A numeric response-header field; a missing or malformed one is the server's fault, said in one line."""
    try:
        return headers.int_field(answer, field, f"the answer to {name} from {address}")
    except ProtocolError as error:
        raise TransportError(str(error), "INTERNAL") from None


def stored_message(mq: MessageQueue, stored: message.StoredMessage) -> Message:
    """A message as the broker stores it (a pull's body, a CONSUME_MESSAGE_DIRECTLY request) as a :class:`Message`.

    Built by filling the instance's fields at once rather than through the frozen dataclass's ``__init__``, which
    sets them one by one through ``object.__setattr__`` and cost a draining consumer a fifth of its decoding time;
    the result is the same message (``tests/runtime/test_remoting_transport.py`` holds it to that)."""
    fields = {
        "mq": mq,
        "queue_offset": stored.queue_offset,
        "msg_id": stored.msg_id,
        "body": stored.body,
        "tags": stored.tags,
        "keys": stored.keys,
        "properties": stored.properties,
        "commit_log_offset": stored.commit_log_offset,
        "reconsume_times": stored.reconsume_times,
        "born_timestamp_ms": stored.born_timestamp,
        "store_timestamp_ms": stored.store_timestamp,
        "body_error": stored.body_error,
    }
    built = object.__new__(Message)
    object.__setattr__(built, "__dict__", fields)
    return built


@dataclass
class _Link:
    """What the pool knows of one address: its live connection and, after failures, when to try again."""

    lock: threading.Lock
    connection: Connection | None = None
    retry_at: float = 0.0
    backoff: float = _BACKOFF[0]
    last_error: TransportError | None = None


class RemotingPool(ABC):
    """Connections to the name servers ``namesrv_addrs`` and the brokers their routes name, one per address.

    The requests a server sends on a connection go to :meth:`_on_request`, and the end of a connection is told to
    :meth:`_connection_ended`: what answers them (``remoting_inbound``) implements both."""

    CLUSTER_INFO_EVERY = 5.0
    """Seconds between cluster-info look-ups made for a broker that no route gave an address for."""

    def __init__(
        self,
        namesrv_addrs: Sequence[str],
        timeout: float = 5.0,
        credentials: AclCredentials | None = None,
        tls: TlsSettings | None = None,
    ) -> None:
        if not namesrv_addrs:
            raise ValueError("at least one name-server address is needed")
        self._tls = None if tls is None else tls_client(tls)  # first: a bad file fails before anything starts
        self._namesrvs = list(namesrv_addrs)
        self._namesrv_index = random.randrange(len(self._namesrvs))  # Java spreads clients over the list too
        self.address = ";".join(self._namesrvs)
        self._timeout = timeout
        self._credentials = credentials
        self._links: dict[str, _Link] = {}
        self._links_lock = threading.Lock()
        self._broker_addrs: dict[str, dict[int, str]] = {}
        self._addrs_lock = threading.Lock()
        self._sub_version = int(time.time() * 1000)  # the subscriptions' version in heartbeats, pulls, running info
        self._closed = False
        self._reactor = Reactor()
        self._work = DaemonPool(WORK_THREADS, "rr-remoting-work", self._work_failed)
        self._cluster_info_lock = threading.Lock()
        self._cluster_info_next = 0.0  # time.monotonic() before which an unknown broker asks no cluster info
        self._cluster_info_error: TransportError | None = None  # how the last such look-up failed, if it did

    @abstractmethod
    def _on_request(self, connection: Connection, command: RemotingCommand) -> None:
        """A request the server sent on ``connection``; runs on the connection's reader, so it must not block."""

    @abstractmethod
    def _connection_ended(self, address: str, error: TransportError) -> None:
        """The connection to ``address`` ended with ``error`` (after the pool has forgotten it)."""

    # ------------------------------------------------------------------ connections

    def _link(self, address: str) -> _Link:
        with self._links_lock:
            link = self._links.get(address)
            if link is None:
                link = self._links[address] = _Link(threading.Lock())
            return link

    def _open(self, address: str) -> Connection:
        """A new connection to ``address``, over TLS when the pool has it."""
        peer = "the name server" if address in self._namesrvs else "the broker"
        return Connection.open(address, self._timeout, self._reactor, self._on_request, self._on_close, self._tls, peer)

    @staticmethod
    def _work_failed(error: Exception) -> None:
        log.error("remoting work failed unexpectedly", exc_info=error)

    def _connection(self, address: str) -> Connection:
        if self._closed:
            raise TransportError(f"transport to {address} is closed", "UNAVAILABLE")
        link = self._link(address)
        with link.lock:  # one opening at a time per address
            current = link.connection
            if current is not None and current.alive:
                return current
            now = time.monotonic()
            if now < link.retry_at and link.last_error is not None:
                raise TransportError(f"{link.last_error} (next try in {link.retry_at - now:.1f} s)", "UNAVAILABLE")
            try:
                connection = self._open(address)
            except TransportError as error:
                link.last_error = error
                link.retry_at = now + link.backoff
                link.backoff = min(_BACKOFF[1], link.backoff * 2)
                raise
            with self._links_lock:  # close() either sees this connection and closes it, or is seen here
                accepted = not self._closed
                if accepted:
                    link.connection = connection
            if accepted:
                link.backoff = _BACKOFF[0]
                link.last_error = None
                return connection
        connection.close()
        raise TransportError(f"transport to {address} is closed", "UNAVAILABLE")

    def _on_close(self, connection: Connection, error: TransportError) -> None:
        """Forget a connection that ended. Runs on the reader: it takes only the short lock, never the link's,
        which a thread opening a new connection to the same address holds for as long as connecting takes."""
        with self._links_lock:
            link = self._links.get(connection.address)
            if link is not None and link.connection is connection:
                link.connection = None
                if error.code in ("FAILED_PRECONDITION",):  # a server of another kind: do not retry at once
                    link.last_error, link.retry_at = error, time.monotonic() + _BACKOFF[1]
        self._connection_ended(connection.address, error)

    # ------------------------------------------------------------------ requests

    def _call(self, address: str, name: str, command: RemotingCommand, timeout: float | None = None) -> RemotingCommand:
        """One request and its response (:meth:`_request`, waited for); raises :class:`TransportError` on failure."""
        answers: queue.SimpleQueue[RemotingCommand | TransportError] = queue.SimpleQueue()
        self._request(self._connection(address), name, command, timeout or self._timeout, answers.put)
        answer = answers.get()  # the connection's reader enforces the deadline, so this always returns
        if isinstance(answer, TransportError):
            raise answer
        return answer

    def _request(
        self, connection: Connection, name: str, command: RemotingCommand, timeout: float, done: Completion
    ) -> None:
        """One request whose answer (or failure) goes to ``done`` on the connection's reader: no thread waits. A
        GO_AWAY answer (the broker is shutting down) retires the connection and the request goes once more on a
        new one: every request, a call, a pull or an offset write, would otherwise fail again on the same doomed
        connection until it closes. With credentials, the request is signed here, last, over the fields it is sent
        with; a refusal's remark gains the access key (see the module docstring)."""
        if self._credentials is not None:
            command = sign(command, self._credentials)

        def again() -> None:
            try:
                self._connection(connection.address).request(name, command, timeout, done)
            except TransportError as error:
                done(error)

        def first(answer: RemotingCommand | TransportError) -> None:
            if isinstance(answer, RemotingCommand) and answer.code == ResponseCode.NO_PERMISSION:
                answer = self._refused(answer)
            if isinstance(answer, TransportError) or answer.code != ResponseCode.GO_AWAY:
                done(answer)
                return
            log.info("%s answered GO_AWAY to %s: reconnecting", connection.address, name)
            connection.close()
            if not self._work.submit(again):  # opening a connection waits: not on the reader, which reads for all
                done(TransportError(f"{name} at {connection.address}: transport closed", "UNAVAILABLE"))

        connection.request(name, command, timeout, first)

    def _refused(self, answer: RemotingCommand) -> RemotingCommand:
        """A NO_PERMISSION answer whose remark's first line says whose credentials were refused (or that none were
        given), so the one line every caller makes of it tells the operator what to fix."""
        lines = (answer.remark or "").strip().splitlines() or ["refused"]
        if self._credentials is None:
            whose = "no ACL credentials were given: pass access_key and secret_key"
        else:
            whose = f"access key {self._credentials.access_key}"
        return replace(answer, remark="\n".join([f"{lines[0]} ({whose})", *lines[1:]]))

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
            self._request(connection, name, command, timeout or self._timeout, done_at(index))
        finished.wait()
        return [result for result in results if result is not None]

    def _ok(self, address: str, name: str, command: RemotingCommand, timeout: float | None = None) -> RemotingCommand:
        answer = self._call(address, name, command, timeout)
        if answer.code != ResponseCode.SUCCESS:
            raise wire_error(name, address, answer)
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

    # ------------------------------------------------------------------ where the brokers are

    def route(self, topic: str) -> TopicRoute:
        address, answer = self._namesrv_call(
            "GET_ROUTEINFO_BY_TOPIC",
            request(RequestCode.GET_ROUTEINFO_BY_TOPIC, headers.get_route_info(topic)),
        )
        if answer.code != ResponseCode.SUCCESS:
            raise wire_error(f"route of {topic}", address, answer)
        try:
            data = bodies.parse_route(topic, answer.body)
        except ProtocolError as error:
            raise TransportError(f"route of {topic} from {address}: {error}", "INTERNAL") from None
        self._learn(data.broker_addrs)
        return data.route

    def brokers(self) -> dict[str, str]:
        """Every broker's master address, from the name server's cluster info."""
        address, answer = self._namesrv_call("GET_BROKER_CLUSTER_INFO", request(RequestCode.GET_BROKER_CLUSTER_INFO))
        if answer.code != ResponseCode.SUCCESS:
            raise wire_error("cluster info", address, answer)
        try:
            info = bodies.parse_cluster_info(answer.body)
        except ProtocolError as error:
            raise TransportError(f"cluster info from {address}: {error}", "INTERNAL") from None
        self._learn(info.broker_addrs)
        return {name: addrs[0] for name, addrs in sorted(info.broker_addrs.items()) if 0 in addrs}

    def _addresses(self, broker: str) -> dict[int, str]:
        """The broker's addresses from the routes learnt so far, else from the name server's cluster info."""
        with self._addrs_lock:
            addrs = self._broker_addrs.get(broker)
        if not addrs:
            self._learn_cluster()
            with self._addrs_lock:
                addrs = self._broker_addrs.get(broker)
        if not addrs:
            raise TransportError(f"no broker named {broker} in the cluster at {self.address}", "NOT_FOUND")
        return dict(addrs)

    def _learn_cluster(self) -> None:
        """Learn every broker's addresses from the cluster info, unless it was asked less than
        :attr:`CLUSTER_INFO_EVERY` seconds ago (then its failure, if it failed, is this call's). One look-up at a
        time: a caller that comes while one is under way waits for it and uses what it learnt."""
        with self._cluster_info_lock:
            if time.monotonic() < self._cluster_info_next:
                failed = self._cluster_info_error
                if failed is not None:
                    raise TransportError(str(failed), failed.code)
                return
            try:
                self.brokers()
            except TransportError as error:
                self._cluster_info_error = error
                raise
            else:
                self._cluster_info_error = None
            finally:
                self._cluster_info_next = time.monotonic() + self.CLUSTER_INFO_EVERY

    def _master(self, broker: str) -> str:
        addrs = self._addresses(broker)
        if 0 not in addrs:
            raise TransportError(f"broker {broker} has no master in the route from {self.address}", "UNAVAILABLE")
        return addrs[0]

    def _learn(self, broker_addrs: Mapping[str, Mapping[int, str]]) -> None:
        with self._addrs_lock:
            for broker, addrs in broker_addrs.items():
                self._broker_addrs[broker] = dict(addrs)

    def close(self, timeout: float | None = None) -> bool:
        """Close every connection (what waits on one fails at once, and nothing is sent after this), then wait
        up to ``timeout`` (None: the call timeout) for the reader and the work pool to end; True when they did."""
        deadline = time.monotonic() + (self._timeout if timeout is None else timeout)
        with self._links_lock:
            self._closed = True
            connections = [link.connection for link in self._links.values() if link.connection is not None]
        for connection in connections:
            connection.close()
        self._work.shutdown()
        ended = self._reactor.close(max(0.0, deadline - time.monotonic()))
        return self._work.join(deadline) and ended
