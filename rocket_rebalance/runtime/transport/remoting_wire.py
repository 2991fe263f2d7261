"""The remoting wire above the socket, written once for both runtimes: what each request is, what each answer
means, which address it goes to.

The threaded :class:`~.remoting.RemotingTransport` and the asyncio :class:`~.remoting_async.AsyncRemotingTransport`
differ only in how a request travels (a reader thread and callbacks, or a reader task and futures). Everything
above that is here: every call is an *operation*, a generator that yields the exchanges it needs and receives their
answers (a :class:`Exchange` gets a :class:`~rocket_rebalance.remoting.RemotingCommand` sent back, or a
:class:`~rocket_rebalance.runtime.transport.TransportError` thrown in), and returns the call's result. A *driver*
runs an operation: the threaded pool's waits for each answer, the asyncio transport's awaits it (see :func:`step`).
So building each request, parsing each answer, mapping error codes, signing, the name servers tried in turn, the
broker addresses learnt from routes and the cluster info, and the GO_AWAY rule exist once, in the manner of a
sans-I/O protocol library (h11): this module sends and reads nothing itself.

:class:`RemotingWire` holds what every operation shares: the name-server list and the one that answered last, the
brokers' addresses, the subscription version, the credentials. Its :meth:`~RemotingWire.outgoing` and
:meth:`~RemotingWire.answered` are applied by each driver to every request it sends and every answer it gets, and
:meth:`~RemotingWire.going_away` says when an answer asks for the request to go once more on a new connection.
The consumer's calls themselves are in :mod:`.remoting_calls`.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar, cast

from rocket_rebalance.model import MASTER_ID, AclCredentials, MessageQueue
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

__all__ = [
    "CLUSTER_INFO_EVERY",
    "Batch",
    "Done",
    "Exchange",
    "LearnCluster",
    "Op",
    "RemotingWire",
    "WireIO",
    "int_field",
    "parsed_body",
    "step",
    "stored_message",
    "subscribe_node",
    "wire_error",
]

log = logging.getLogger("rocket_rebalance.runtime.remoting")

T = TypeVar("T")

CLUSTER_INFO_EVERY = 5.0
"""Seconds between cluster-info look-ups made for a broker that no route gave an address for."""

_CODE_NAMES: dict[int, str] = {
    ResponseCode.TOPIC_NOT_EXIST: "NOT_FOUND",
    ResponseCode.QUERY_NOT_FOUND: "NOT_FOUND",
    ResponseCode.CONSUMER_NOT_ONLINE: "NOT_FOUND",
    ResponseCode.SYSTEM_BUSY: "UNAVAILABLE",
    ResponseCode.SERVICE_NOT_AVAILABLE: "UNAVAILABLE",
    ResponseCode.NO_PERMISSION: "PERMISSION_DENIED",
}


# ---------------------------------------------------------------------------------------------------------- I/O


@dataclass(frozen=True)
class Exchange:
    """One request to ``address`` (signed by the driver, last) and its answer, or its failure thrown in; ``name``
    names the call in errors, ``timeout`` is how long the answer may take."""

    address: str
    name: str
    command: RemotingCommand
    timeout: float


@dataclass(frozen=True)
class Batch:
    """Several requests sent on one connection at once; their answers or failures come back as one list, in
    order, so one slow answer costs the batch one round trip rather than one each."""

    address: str
    name: str
    commands: tuple[RemotingCommand, ...]
    timeout: float


@dataclass(frozen=True)
class LearnCluster:
    """Learn every broker's addresses from the cluster info: the driver runs :meth:`RemotingWire.learn_cluster`
    under a lock of its runtime's kind, so that one look-up is under way at a time, whoever asks."""


WireIO = Exchange | Batch | LearnCluster
"""The I/O an operation asks its driver for: the one thing the two runtimes' drivers carry out each their own way."""

Op = Generator[WireIO, object, T]
"""An operation: yields its I/O, is sent each one's result (or has its failure thrown in), returns a ``T``."""


@dataclass(frozen=True)
class Done(Generic[T]):
    """An operation that has returned ``value``."""

    value: T


def step(op: Op[T], reply: object, error: TransportError | None) -> WireIO | Done[T]:
    """Resume ``op`` with the last I/O's ``reply`` (or throw its ``error`` in; the first step sends None): the
    next :data:`WireIO` it asks for, or :class:`Done`. Each driver is a loop around this, carrying out the I/O its
    own way."""
    try:
        return op.send(reply) if error is None else op.throw(error)
    except StopIteration as stop:
        return Done(stop.value)


# ---------------------------------------------------------------------------------------------------------- answers


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


class _Unfrozen:
    """:class:`Message`'s slots without its frozen ``__setattr__``: the same layout, so one of these, filled, becomes a
    ``Message`` by ``__class__`` assignment. Filling the slots so costs a sixth of the frozen constructor (which sets
    each field through ``object.__setattr__``), and was the difference between a pure-Python consumer as fast as
    before ``Message`` had slots and one 13 % slower (issue 42)."""

    __slots__ = Message.__slots__


def stored_message(mq: MessageQueue, stored: message.StoredMessage) -> Message:
    """A message as the broker stores it (a pull's body, a CONSUME_MESSAGE_DIRECTLY request) as a :class:`Message`:
    the one the constructor makes (``tests/runtime/test_stored_message.py``), as the compiled decoder makes it from a
    pull answer's bytes (:mod:`.pulled`)."""
    built: Any = object.__new__(_Unfrozen)
    built.mq = mq
    built.queue_offset = stored.queue_offset
    built.msg_id = stored.msg_id
    built.body = stored.body
    built.tags = stored.tags
    built.keys = stored.keys
    built.properties = stored.properties
    built.commit_log_offset = stored.commit_log_offset
    built.reconsume_times = stored.reconsume_times
    built.born_timestamp_ms = stored.born_timestamp
    built.store_timestamp_ms = stored.store_timestamp
    built.body_error = stored.body_error
    built.namespace = None
    built.__class__ = Message
    return cast(Message, built)


def subscribe_node(addrs: Mapping[int, str], broker_id: int) -> tuple[int, str] | None:
    """The broker of a set (its addresses by broker ID) that a read meant for ``broker_id`` goes to, as Java's
    ``MQClientInstance.findBrokerAddressInSubscribe(name, broker_id, false)`` chooses: that broker when the route
    names it; for a slave ID the next one up; else the set's lowest ID (the master, or while the master is down,
    the slave its route still names). None for a set with no address. Pulls, offset reads and offset writes go
    where this says, so with the master gone they reach the slave, as Java's do; always an address of ``addrs``."""
    if broker_id in addrs:
        return broker_id, addrs[broker_id]
    if broker_id != MASTER_ID and broker_id + 1 in addrs:
        return broker_id + 1, addrs[broker_id + 1]
    if not addrs:
        return None
    lowest = min(addrs)
    return lowest, addrs[lowest]


# ---------------------------------------------------------------------------------------------------------- the wire


class RemotingWire:
    """What every operation shares, and the operations every role needs: name servers, routes, broker addresses.

    ``namesrv_addrs`` are tried in turn from the one that answered last (:meth:`namesrv_call`). Brokers are named
    as in routes; their addresses are learnt from every route and from the cluster info (:meth:`addresses`). The
    address book is read and written under a short lock, because the threaded transport's callers share it."""

    def __init__(self, namesrv_addrs: Sequence[str], timeout: float, credentials: AclCredentials | None) -> None:
        if not namesrv_addrs:
            raise ValueError("at least one name-server address is needed")
        self.namesrvs = list(namesrv_addrs)
        self._namesrv_index = random.randrange(len(self.namesrvs))  # Java spreads clients over the list too
        self.address = ";".join(self.namesrvs)
        self.timeout = timeout
        self._credentials = credentials
        self._broker_addrs: dict[str, dict[int, str]] = {}
        self._pull_from: dict[MessageQueue, int] = {}  # each queue's broker ID its broker last suggested
        self._addrs_lock = threading.Lock()
        self.sub_version = int(time.time() * 1000)  # the subscriptions' version in heartbeats, pulls, running info
        self.cluster_info_every = CLUSTER_INFO_EVERY  # seconds between look-ups for brokers no route named
        self._cluster_info_next = 0.0  # time.monotonic() before which an unknown broker asks no cluster info
        self._cluster_info_error: TransportError | None = None  # how the last such look-up failed, if it did

    # ------------------------------------------------------------------ what every request and answer goes through

    def outgoing(self, command: RemotingCommand) -> RemotingCommand:
        """``command`` as it is sent: signed with the ACL credentials as Java's ``AclClientRPCHook`` signs, over
        the fields it is sent with (so this is the last thing done to it)."""
        return command if self._credentials is None else sign(command, self._credentials)

    def answered(self, answer: RemotingCommand) -> RemotingCommand:
        """An answer as the callers see it: a NO_PERMISSION answer's remark gains whose credentials were refused
        (or that none were given), so the one line every caller makes of it tells the operator what to fix. ACL
        2.0 says NO_PERMISSION for a signature it rejects and for a missing permission alike; the secret itself
        is held by the credentials object alone."""
        if answer.code != ResponseCode.NO_PERMISSION:
            return answer
        lines = (answer.remark or "").strip().splitlines() or ["refused"]
        if self._credentials is None:
            whose = "no ACL credentials were given: pass access_key and secret_key"
        else:
            whose = f"access key {self._credentials.access_key}"
        return replace(answer, remark="\n".join([f"{lines[0]} ({whose})", *lines[1:]]))

    @staticmethod
    def going_away(address: str, name: str, answer: RemotingCommand) -> bool:
        """Whether ``answer`` is GO_AWAY (the server is shutting down): the driver retires the connection and
        sends the request once more on a new one, since every request, a call, a pull or an offset write, would
        otherwise fail again on the same doomed connection until it closes."""
        if answer.code != ResponseCode.GO_AWAY:
            return False
        log.info("%s answered GO_AWAY to %s: reconnecting", address, name)
        return True

    # ------------------------------------------------------------------ exchanges

    def call(
        self, address: str, name: str, command: RemotingCommand, timeout: float | None = None
    ) -> Op[RemotingCommand]:
        """One request and its answer (any code); a failure to get one is thrown in as a :class:`TransportError`."""
        answer = yield Exchange(address, name, command, timeout or self.timeout)
        assert isinstance(answer, RemotingCommand)
        return answer

    def ok(
        self, address: str, name: str, command: RemotingCommand, timeout: float | None = None
    ) -> Op[RemotingCommand]:
        """One request whose answer must be SUCCESS; any other code is :func:`wire_error`."""
        answer = yield from self.call(address, name, command, timeout)
        if answer.code != ResponseCode.SUCCESS:
            raise wire_error(name, address, answer)
        return answer

    def each(
        self, address: str, name: str, commands: Sequence[RemotingCommand]
    ) -> Op[list[RemotingCommand | TransportError]]:
        """Several requests on one connection at once, their answers (or failures) in order."""
        if not commands:
            return []
        answers = yield Batch(address, name, tuple(commands), self.timeout)
        assert isinstance(answers, list)
        return answers

    def namesrv_call(self, name: str, command: RemotingCommand) -> Op[tuple[str, RemotingCommand]]:
        """Ask the name servers in turn, from the one that answered last, until one answers: (its address, the
        answer). Only a server that cannot be reached or does not answer in time passes the call on."""
        last: TransportError | None = None
        for attempt in range(len(self.namesrvs)):
            index = (self._namesrv_index + attempt) % len(self.namesrvs)
            address = self.namesrvs[index]
            try:
                answer = yield from self.call(address, name, command)
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

    def route(self, topic: str) -> Op[TopicRoute]:
        address, answer = yield from self.namesrv_call(
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
        masterless = frozenset(
            name
            for name in data.route.brokers()
            if data.broker_addrs.get(name) and MASTER_ID not in data.broker_addrs[name]
        )
        return replace(data.route, masterless=masterless)

    def brokers(self) -> Op[dict[str, str]]:
        """Every broker's master address, from the name server's cluster info."""
        address, answer = yield from self.namesrv_call(
            "GET_BROKER_CLUSTER_INFO", request(RequestCode.GET_BROKER_CLUSTER_INFO)
        )
        if answer.code != ResponseCode.SUCCESS:
            raise wire_error("cluster info", address, answer)
        try:
            info = bodies.parse_cluster_info(answer.body)
        except ProtocolError as error:
            raise TransportError(f"cluster info from {address}: {error}", "INTERNAL") from None
        self._learn(info.broker_addrs)
        return {name: addrs[MASTER_ID] for name, addrs in sorted(info.broker_addrs.items()) if MASTER_ID in addrs}

    def addresses(self, broker: str) -> Op[dict[int, str]]:
        """The broker's addresses from the routes learnt so far, else from the name server's cluster info."""
        with self._addrs_lock:
            addrs = self._broker_addrs.get(broker)
        if not addrs:
            yield LearnCluster()
            with self._addrs_lock:
                addrs = self._broker_addrs.get(broker)
        if not addrs:
            raise TransportError(f"no broker named {broker} in the cluster at {self.address}", "NOT_FOUND")
        return dict(addrs)

    def master(self, broker: str) -> Op[str]:
        """The master's address: locks, sends, send-backs and the queues' min/max offsets need the master, as in
        Java (a set whose master is down grants no lock)."""
        addrs = yield from self.addresses(broker)
        if MASTER_ID not in addrs:
            raise TransportError(f"broker {broker} has no master in the route from {self.address}", "UNAVAILABLE")
        return addrs[MASTER_ID]

    def reader(self, broker: str, broker_id: int = MASTER_ID) -> Op[tuple[int, str]]:
        """The broker ID and address a read of ``broker``'s set meant for ``broker_id`` goes to
        (:func:`subscribe_node`): the master while the route names it, else a slave."""
        node = subscribe_node((yield from self.addresses(broker)), broker_id)
        if node is None:
            raise TransportError(f"broker {broker} has no address in the route from {self.address}", "UNAVAILABLE")
        return node

    def pull_node(self, mq: MessageQueue) -> Op[tuple[int, str]]:
        """Where ``mq`` is pulled from: the broker ID its broker suggested in the last pull answer (the master at
        first), as Java's ``PullAPIWrapper.recalculatePullFromWhichNode``, through :meth:`reader`."""
        with self._addrs_lock:
            suggested = self._pull_from.get(mq, MASTER_ID)
        return (yield from self.reader(mq.broker_name, suggested))

    def suggested(self, mq: MessageQueue, broker_id: int) -> None:
        """A pull answer's ``suggestWhichBrokerId``: where ``mq``'s next pull goes (Java's
        ``updatePullFromWhichNode``). A master with ``slaveReadEnable`` suggests a slave when the reads fall behind
        what its memory holds; a slave suggests the master while it is alive."""
        with self._addrs_lock:
            self._pull_from[mq] = broker_id

    def learn_cluster(self) -> Op[None]:
        """Learn every broker's addresses from the cluster info, unless it was asked less than
        :attr:`cluster_info_every` seconds ago (then its failure, if it failed, is this call's): a heartbeat round
        over a thousand unknown brokers costs one look-up, not a thousand. Run by the driver for
        :class:`LearnCluster`, under its lock, so a caller that comes while one is under way waits for it and uses
        what it learnt."""
        if time.monotonic() < self._cluster_info_next:
            failed = self._cluster_info_error
            if failed is not None:
                raise TransportError(str(failed), failed.code)
            return
        try:
            yield from self.brokers()
        except TransportError as error:
            self._cluster_info_error = error
            raise
        else:
            self._cluster_info_error = None
        finally:
            self._cluster_info_next = time.monotonic() + self.cluster_info_every

    def _learn(self, broker_addrs: Mapping[str, Mapping[int, str]]) -> None:
        with self._addrs_lock:
            for broker, addrs in broker_addrs.items():
                self._broker_addrs[broker] = dict(addrs)
