"""The sans-I/O rebalance core: one consumer's rebalance as a pure state machine (see ``machine`` for its rules).

A runtime builds a :class:`RebalanceCore` from a :class:`RebalanceConfig` and the subscribed topics, feeds it
events with ``handle(event, now)`` and carries out the actions it returns. Nothing here does I/O, sleeps or reads
a clock, so the same core runs under threads, asyncio, or a test that plays the broker itself.
"""

from rocket_rebalance.core.actions import (
    Action,
    ClientIdShared,
    DropQueue,
    FetchConsumerList,
    FetchRoutes,
    HandoverWithoutOffset,
    LockQueues,
    PersistOffsets,
    QueryMaxOffset,
    QueuesChanged,
    ReadOffset,
    ReleaseDeadHolders,
    RevokeQueues,
    SearchOffset,
    SendHeartbeat,
    ShutdownComplete,
    StartQueue,
    StopQueue,
    UnlockQueues,
    WakeAt,
)
from rocket_rebalance.core.config import RebalanceConfig, default_consume_timestamp_ms
from rocket_rebalance.core.events import (
    BrokerConnectionLost,
    BrokerRegistered,
    ConsumerIdsChanged,
    ConsumerListFetched,
    DeadHoldersChecked,
    Event,
    LockResult,
    MessagesConsumed,
    MessagesDispatched,
    MessagesPulled,
    MessagesReturned,
    OffsetIllegal,
    OffsetLookupFailed,
    OffsetQueried,
    OffsetRead,
    OffsetsPersisted,
    OffsetsPersistFailed,
    PersistRequested,
    QueueSeeked,
    QueuesRevoked,
    QueuesUnlocked,
    RouteUpdated,
    ShutdownRequested,
    Started,
    SubscriptionChanged,
    Tick,
)
from rocket_rebalance.core.machine import QueueState, RebalanceCore
from rocket_rebalance.core.process_queue import ProcessQueue

# The model's, not the core's: kept only while runtime/consumer.py, being split (issue 36), imports them from here.
# Import them from rocket_rebalance.model; remove these lines, their __all__ entries and their exemption in
# tests/test_layering.py (KEPT_FOR_BEING_SPLIT) when consumer.py does.
from rocket_rebalance.model import ConsumeFromWhere, MessageModel

__all__ = [
    "Action",
    "BrokerConnectionLost",
    "BrokerRegistered",
    "ClientIdShared",
    "ConsumeFromWhere",  # kept for runtime/consumer.py, being split (issue 36): see above
    "ConsumerIdsChanged",
    "ConsumerListFetched",
    "DeadHoldersChecked",
    "DropQueue",
    "Event",
    "FetchConsumerList",
    "FetchRoutes",
    "HandoverWithoutOffset",
    "LockQueues",
    "LockResult",
    "MessageModel",  # kept for runtime/consumer.py, being split (issue 36): see above
    "MessagesConsumed",
    "MessagesReturned",
    "MessagesDispatched",
    "MessagesPulled",
    "OffsetIllegal",
    "OffsetLookupFailed",
    "OffsetQueried",
    "OffsetRead",
    "OffsetsPersistFailed",
    "OffsetsPersisted",
    "PersistOffsets",
    "PersistRequested",
    "QueueSeeked",
    "ProcessQueue",
    "QueryMaxOffset",
    "QueueState",
    "QueuesChanged",
    "QueuesRevoked",
    "QueuesUnlocked",
    "ReadOffset",
    "RebalanceConfig",
    "ReleaseDeadHolders",
    "RevokeQueues",
    "RebalanceCore",
    "RouteUpdated",
    "SearchOffset",
    "SendHeartbeat",
    "ShutdownComplete",
    "ShutdownRequested",
    "StartQueue",
    "Started",
    "StopQueue",
    "SubscriptionChanged",
    "Tick",
    "UnlockQueues",
    "WakeAt",
    "default_consume_timestamp_ms",
]
