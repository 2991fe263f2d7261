"""The six allocation strategies of Apache RocketMQ, bit-exact with the Java classes, and this library's own two.

Use :func:`create_strategy` with the Java ``getName()`` value, then ``strategy.allocate(consumer_group,
current_cid, mq_all, cid_all)`` with the lists sorted the way the rebalance sorts them
(:func:`rocket_rebalance.model.prepare_rebalance_input`). Where Java throws ``IllegalArgumentException`` these
raise :class:`AllocationError` with Java's message.

CONSISTENT_HASH_BOUNDED (consistent hashing with a load cap) and CROSS_TOPIC (totals balanced over all the group's
topics) exist only here: a group that uses them must have no Java consumers (:func:`java_compatible`).
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
    MessageQueuesNotSetError,
    SizedPlacement,
    plan_group,
)
from rocket_rebalance.strategies.bounded_hash import AllocateMessageQueueConsistentHashBounded, load_cap
from rocket_rebalance.strategies.by_config import AllocateMessageQueueByConfig
from rocket_rebalance.strategies.consistent_hash import (
    AllocateMessageQueueConsistentHash,
    HashRing,
    build_ring,
)
from rocket_rebalance.strategies.cross_topic import AllocateMessageQueueAcrossTopics, cross_topic_sizes
from rocket_rebalance.strategies.machine_room import (
    AllocateMachineRoomNearby,
    AllocateMessageQueueByMachineRoom,
    MachineRoomResolver,
    PrefixMachineRoomResolver,
)
from rocket_rebalance.strategies.registry import (
    JAVA_STRATEGY_NAMES,
    STRATEGY_NAMES,
    UnknownStrategyError,
    create_strategy,
    java_compatible,
    spans_topics,
    strategy_name,
)

__all__ = [
    "JAVA_STRATEGY_NAMES",
    "STRATEGY_NAMES",
    "AllocateMachineRoomNearby",
    "AllocateMessageQueueAcrossTopics",
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueByConfig",
    "AllocateMessageQueueByMachineRoom",
    "AllocateMessageQueueConsistentHash",
    "AllocateMessageQueueConsistentHashBounded",
    "AllocateMessageQueueStrategy",
    "AllocationError",
    "CheckedStrategy",
    "ConsumerIdcsNotSetError",
    "MessageQueuesNotSetError",
    "HashRing",
    "MachineRoomResolver",
    "PrefixMachineRoomResolver",
    "SizedPlacement",
    "UnknownStrategyError",
    "build_ring",
    "create_strategy",
    "cross_topic_sizes",
    "java_compatible",
    "load_cap",
    "plan_group",
    "spans_topics",
    "strategy_name",
]
