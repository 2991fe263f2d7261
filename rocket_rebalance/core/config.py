"""The core's settings: message model, consume-from-where, and every interval, in one dataclass.

Defaults are the Java client's (see DESIGN.md, "Behaviour we keep"). Times are seconds as floats on whatever
monotonic clock the runtime feeds in as ``now``; the one wall-clock value, the consume-from timestamp, is fixed
when the consumer is built (as Java fixes ``consumeTimestamp`` in the constructor), so the core never reads a clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from rocket_rebalance.model import ConsumeFromWhere, MessageModel, check_duration
from rocket_rebalance.strategies import AllocateMessageQueueStrategy, create_strategy

__all__ = [
    "DEFAULT_CONSUME_TIMESTAMP_LOOKBACK_MS",
    "RebalanceConfig",
    "default_consume_timestamp_ms",
]

DEFAULT_CONSUME_TIMESTAMP_LOOKBACK_MS = 30 * 60 * 1000


def default_consume_timestamp_ms(wall_clock_ms: int) -> int:
    """Java's default consume-from timestamp: half an hour before the consumer was built.

    The runtime calls this with its wall clock when it builds the config; the core itself reads no clock.
    """
    return wall_clock_ms - DEFAULT_CONSUME_TIMESTAMP_LOOKBACK_MS


def _default_strategy() -> AllocateMessageQueueStrategy:
    return create_strategy("AVG")


@dataclass(frozen=True)
class RebalanceConfig:
    """Everything one consumer's core needs to know; immutable so a running core never sees it change.

    ``fenced_handover`` (ours, on by default) makes concurrent consumers take the broker lock too, so a queue
    moves only after its old owner drained it, persisted its offset and unlocked it; off gives Java's behaviour
    (concurrent consumers never lock; the old owner persists the smallest in-flight offset and goes, so the new
    owner may re-deliver what was in flight). ``consume_timestamp_ms`` is required for CONSUME_FROM_TIMESTAMP;
    build it with :func:`default_consume_timestamp_ms` for Java's default. ``broker_lock_lifetime`` is the
    broker's setting, recorded here so the client lock lifetime can be checked to be shorter (that gap is what
    keeps an owner that lost touch from consuming after the broker let someone else lock the queue).
    ``handover_persist_attempts`` (ours) bounds a fenced handover whose offset cannot be saved: after that many
    failed writes the queue is handed over anyway and the next owner re-delivers from the last saved offset, since
    the lock held meanwhile keeps the queue from every consumer (Java writes once and never waits).
    ``recover_dead_holders`` (ours, on by default; rule L9) lets a new owner release the locks of a member the
    broker no longer lists, once it has been missing from the member lists for ``dead_holder_grace``, so a killed
    consumer's queues are consumed again within seconds instead of the broker's lock lifetime; its other half,
    ``rejoin_delay``, keeps this consumer from locking at a broker it lost touch with until that long after its
    next heartbeat there succeeded, so a peer's release decided while we were missing lands first; for that, a
    release counts only when the member list and every unlock of it were answered within ``dead_holder_window`` of
    asking, which must be shorter than ``rejoin_delay``. Off: a killed holder's queues wait for the broker's lock
    lifetime, as Java's orderly consumers do.
    ``confirm_revoke`` (ours; set by a consumer given a rebalance listener; rule L10) inserts a step into every
    release: once none of the queue's messages is handed out any more, ``RevokeQueues`` asks the runtime to call the
    application's ``on_queues_revoked``, and the final offset is persisted and the lock released only after it
    returned, or after ``revoke_timeout``, so a listener that hangs cannot keep a queue from the group for good.
    """

    consumer_group: str
    client_id: str
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_orderly: bool = False
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    consume_timestamp_ms: int | None = None
    strategy: AllocateMessageQueueStrategy = field(default_factory=_default_strategy)
    fenced_handover: bool = True
    push_consumer: bool = True
    rebalance_interval: float = 20.0
    rebalance_min_interval: float = 1.0
    unbalanced_retry_interval: float = 1.0
    lock_retry_interval: float = 0.5
    route_refresh_interval: float = 30.0
    heartbeat_interval: float = 30.0
    persist_interval: float = 5.0
    lock_all_interval: float = 20.0
    client_lock_lifetime: float = 30.0
    broker_lock_lifetime: float = 60.0
    pull_expiry: float = 120.0
    handover_drain_timeout: float = 5.0
    release_retry_interval: float = 0.5
    request_timeout: float = 10.0
    handover_persist_attempts: int = 3
    recover_dead_holders: bool = True
    dead_holder_grace: float = 0.5
    rejoin_delay: float = 2.0
    dead_holder_window: float = 1.0
    confirm_revoke: bool = False
    revoke_timeout: float = 15.0

    def __post_init__(self) -> None:
        if not self.consumer_group:
            raise ValueError("consumer_group is empty")
        if not self.client_id:
            raise ValueError("client_id is empty")
        for f in fields(self):
            if f.name.endswith(("_interval", "_lifetime", "_expiry", "_timeout", "_grace", "_delay", "_window")):
                check_duration(f.name, getattr(self, f.name))
        attempts = self.handover_persist_attempts
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise ValueError(f"handover_persist_attempts must be a whole number of at least 1, not {attempts!r}")
        if self.client_lock_lifetime >= self.broker_lock_lifetime:
            raise ValueError(
                "client_lock_lifetime must be shorter than broker_lock_lifetime, else an owner that lost touch "
                "could still consume after the broker handed its lock to another consumer"
            )
        if self.dead_holder_window >= self.rejoin_delay:
            raise ValueError(
                "dead_holder_window must be shorter than rejoin_delay, else a release of a member's locks decided "
                "before it came back could land after it locked its queues again (core rule L9)"
            )
        if self.consume_from_where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP and self.consume_timestamp_ms is None:
            raise ValueError(
                "CONSUME_FROM_TIMESTAMP needs consume_timestamp_ms; "
                "use default_consume_timestamp_ms(wall_clock_ms) for Java's default (30 minutes back)"
            )

    @property
    def uses_locks(self) -> bool:
        """Whether queues are locked on the broker: orderly, or fenced handover, and only in clustering."""
        return self.message_model is MessageModel.CLUSTERING and (self.consume_orderly or self.fenced_handover)

    @property
    def drains_on_release(self) -> bool:
        """Whether a released queue waits (bounded) for messages in consumption before its offset is persisted."""
        return self.uses_locks
