"""The six allocation strategies of Apache RocketMQ, bit-exact with the Java classes.

Use :func:`create_strategy` with the Java ``getName()`` value, then ``strategy.allocate(consumer_group,
current_cid, mq_all, cid_all)`` with the lists sorted the way the rebalance sorts them
(:func:`rocket_rebalance.model.prepare_rebalance_input`). Where Java throws ``IllegalArgumentException`` these
raise :class:`AllocationError` with Java's message.
"""

from rocket_rebalance.strategies.averagely import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
)
from rocket_rebalance.strategies.base import (
    AllocateMessageQueueStrategy,
    AllocationError,
    CheckedStrategy,
    ConsumerIdcsNotSetError,
    plan_group,
)
from rocket_rebalance.strategies.by_config import AllocateMessageQueueByConfig
from rocket_rebalance.strategies.consistent_hash import (
    AllocateMessageQueueConsistentHash,
    HashRing,
    build_ring,
)
from rocket_rebalance.strategies.machine_room import (
    AllocateMachineRoomNearby,
    AllocateMessageQueueByMachineRoom,
    MachineRoomResolver,
    PrefixMachineRoomResolver,
)
from rocket_rebalance.strategies.registry import STRATEGY_NAMES, UnknownStrategyError, create_strategy

__all__ = [
    "STRATEGY_NAMES",
    "AllocateMachineRoomNearby",
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueByConfig",
    "AllocateMessageQueueByMachineRoom",
    "AllocateMessageQueueConsistentHash",
    "AllocateMessageQueueStrategy",
    "AllocationError",
    "CheckedStrategy",
    "ConsumerIdcsNotSetError",
    "HashRing",
    "MachineRoomResolver",
    "PrefixMachineRoomResolver",
    "UnknownStrategyError",
    "build_ring",
    "create_strategy",
    "plan_group",
]
