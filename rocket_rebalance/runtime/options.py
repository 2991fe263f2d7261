"""The consumers' keyword options, typed and documented in one place.

Every consumer's constructor takes ``**options: Unpack[...]`` of the :class:`typing.TypedDict` here (PEP 692), so
``mypy --strict`` rejects a misspelled option or a wrong type, an IDE completes the names, and an option is
added once (here, with its comment) rather than in each of the four constructors' signatures. A push consumer
takes :class:`PushOptions`, a pull consumer :class:`ConsumerOptions`; at run time a name that is neither is a
``TypeError`` naming the consumer class (``check_option_names``). Where Java's consumer has the setting, its
name is in the comment; the defaults are Java's unless the comment says otherwise.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from rocket_rebalance.model import ConsumeFromWhere, MessageModel
from rocket_rebalance.strategies import AllocateMessageQueueStrategy
from rocket_rebalance.subscription import SubscriptionExpression

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from rocket_rebalance.runtime.health import ErrorHook
    from rocket_rebalance.runtime.listener import RebalanceListener
    from rocket_rebalance.runtime.offset_store import BrokerOffsets, OffsetStore
    from rocket_rebalance.runtime.settings import EngineSettings

__all__ = ["ConsumerOptions", "PushOptions", "check_option_names"]


class ConsumerOptions(TypedDict, total=False):
    """The options every consumer takes (see :class:`~rocket_rebalance.runtime.consumer.ConsumerBase`)."""

    #: The topics to consume: names (each subscribed with ``*``) or topic to a TAG expression or a
    #: :class:`~rocket_rebalance.subscription.SubscriptionExpression` (Java's ``subscribe(topic, expression)``).
    topics: Iterable[str] | Mapping[str, str | SubscriptionExpression]
    #: The allocation strategy (Java's ``allocateMessageQueueStrategy``; AVG by default): a strategy object, or a
    #: name as :func:`~rocket_rebalance.strategies.create_strategy` takes it (``"CONSISTENT_HASH"``); for a
    #: strategy's own options pass ``create_strategy(name, **its_options)``.
    strategy: AllocateMessageQueueStrategy | str
    #: Java's ``messageModel``: CLUSTERING (each message to one member) or BROADCASTING (to every member).
    message_model: MessageModel
    #: Java's ``consumeFromWhere``: where a queue without a stored offset starts (LAST by default: what is
    #: already in the topic is not consumed by a new group).
    consume_from_where: ConsumeFromWhere
    #: Java's ``consumeTimestamp`` (there ``yyyyMMddHHmmss``; here milliseconds since the epoch), for
    #: CONSUME_FROM_TIMESTAMP; by default half an hour ago, as Java's.
    consume_timestamp_ms: int
    #: Ours (on by default): concurrent consumers take the broker lock too, so a moved queue re-delivers nothing.
    fenced_handover: bool
    #: Java's ``clientId`` (``ip@instanceName``); by default ``ip@pid#nanotime``, unique per process.
    client_id: str
    #: The stub's access token (``grpc://`` name servers only).
    token: str | None
    #: Java's ``SessionCredentials`` (``AclClientRPCHook``): ACL's access key, secret key and security token.
    access_key: str | None
    secret_key: str | None
    security_token: str | None
    #: Java's ``useTLS``; a CA file, client certificate or key, or ``tls_verify=False`` turns it on by itself.
    tls: bool
    tls_ca_file: str | os.PathLike[str] | None
    tls_cert_file: str | os.PathLike[str] | None
    tls_key_file: str | os.PathLike[str] | None
    tls_verify: bool
    #: A BROADCASTING consumer's offset file (Java's ``rocketmq.client.localOffsetStoreDir``).
    offset_file: Path | None
    #: A BROADCASTING consumer starts from ``consume_from_where`` again, ignoring its offset file.
    reset_offsets: bool
    #: Java's ``offsetStore``: where offsets are kept (the brokers in CLUSTERING, a local file in BROADCASTING).
    offset_store: OffsetStore | BrokerOffsets | None
    #: The runtime's knobs that are not rebalance rules (pull batch size, consume threads ...: Java's names).
    settings: EngineSettings | None
    #: ``on_error(kind, error)``: told of failures as the log is (the first of a kind, then every 30 s per kind).
    on_error: ErrorHook | None
    #: Ours: True exports metrics through ``prometheus_client``'s default registry, a registry through that one.
    metrics: bool | CollectorRegistry
    #: Ours (Kafka's ``ConsumerRebalanceListener``): hears each queue assigned, revoked and lost.
    rebalance_listener: RebalanceListener | None
    #: Java's ``setNamespace`` (v1 namespaces): the group and topics are ``namespace%name`` on the wire.
    namespace: str | None
    #: Java's ``rocketmq.client.rebalance.waitInterval`` (20 s), or the ``ROCKET_REBALANCE_WAIT_INTERVAL``
    #: environment variable; the intervals below are in seconds.
    rebalance_interval: float
    #: Ours: two rounds at least this far apart (1 s).
    rebalance_min_interval: float
    #: Ours: a round that could not be applied is retried after this (1 s).
    unbalanced_retry_interval: float
    #: Ours: a refused lock of an allocated queue is asked again after this (0.5 s).
    lock_retry_interval: float
    #: Java's ``pollNameServerInterval`` (30 s).
    route_refresh_interval: float
    #: Java's ``heartbeatBrokerInterval`` (30 s).
    heartbeat_interval: float
    #: Java's ``persistConsumerOffsetInterval`` (5 s).
    persist_interval: float
    #: Java's ``rocketmq.client.rebalance.lockInterval`` (20 s): orderly consumers renew their locks.
    lock_all_interval: float
    #: Java's ``rocketmq.client.rebalance.lockMaxLiveTime`` (30 s).
    client_lock_lifetime: float
    #: The broker's ``rocketmq.broker.rebalance.lockMaxLiveTime`` (60 s); the client's must be shorter.
    broker_lock_lifetime: float
    #: Java's ``pullMaxIdleTime`` (120 s): a pushed queue not pulled this long is dropped.
    pull_expiry: float
    #: Ours: how long a fenced handover waits for in-flight messages (5 s).
    handover_drain_timeout: float
    #: Ours: a release that failed is tried again after this (0.5 s).
    release_retry_interval: float
    #: Java's ``mqClientApiTimeout`` for the rebalance's calls (10 s here).
    request_timeout: float
    #: Ours: failed offset writes before a fenced handover goes ahead anyway (3).
    handover_persist_attempts: int
    #: Ours (core rule L9, on by default): release the locks of a member the broker no longer lists.
    recover_dead_holders: bool
    #: Ours: how long a member must be missing before its locks are released (0.5 s).
    dead_holder_grace: float
    #: Ours: no lock at a broker until this long after its heartbeat succeeded again (2 s).
    rejoin_delay: float
    #: Ours: a release counts only if answered within this (1 s; shorter than ``rejoin_delay``).
    dead_holder_window: float
    #: Ours: how long a release waits for ``on_queues_revoked`` (15 s).
    revoke_timeout: float


class PushOptions(ConsumerOptions, total=False):
    """A push consumer's options: every consumer's, and the listener's order."""

    #: Java's ``MessageListenerOrderly``: one batch at a time per queue, holding its broker lock.
    consume_orderly: bool


def check_option_names(consumer: type, given: Iterable[str], valid: frozenset[str]) -> None:
    """Refuse an option not in ``valid``, naming ``consumer`` (the class the user built, not the settings it
    feeds) and the nearest valid name: what mypy says of a typed call, said at run time to an untyped one."""
    for name in given:
        if name not in valid:
            near = difflib.get_close_matches(name, sorted(valid), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise TypeError(f"{consumer.__name__}() got an unexpected keyword argument {name!r}{hint}")
