"""Strategies by their Java ``getName()`` value, with options checked by name."""

from __future__ import annotations

import inspect
from typing import Any

from rocket_rebalance.strategies.averagely import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
)
from rocket_rebalance.strategies.base import AllocateMessageQueueStrategy
from rocket_rebalance.strategies.bounded_hash import AllocateMessageQueueConsistentHashBounded
from rocket_rebalance.strategies.by_config import AllocateMessageQueueByConfig
from rocket_rebalance.strategies.consistent_hash import AllocateMessageQueueConsistentHash
from rocket_rebalance.strategies.cross_topic import AllocateMessageQueueAcrossTopics
from rocket_rebalance.strategies.machine_room import (
    AllocateMachineRoomNearby,
    AllocateMessageQueueByMachineRoom,
)

__all__ = [
    "JAVA_STRATEGY_NAMES",
    "STRATEGY_NAMES",
    "UnknownStrategyError",
    "create_strategy",
    "java_compatible",
    "spans_topics",
    "strategy_name",
]

_FACTORIES: dict[str, type[AllocateMessageQueueStrategy]] = {
    "AVG": AllocateMessageQueueAveragely,
    "AVG_BY_CIRCLE": AllocateMessageQueueAveragelyByCircle,
    "CONSISTENT_HASH": AllocateMessageQueueConsistentHash,
    "CONFIG": AllocateMessageQueueByConfig,
    "MACHINE_ROOM": AllocateMessageQueueByMachineRoom,
    "MACHINE_ROOM_NEARBY": AllocateMachineRoomNearby,
    # this library's own: no Java client has them, so a group running them must be all Python
    "CONSISTENT_HASH_BOUNDED": AllocateMessageQueueConsistentHashBounded,
    "CROSS_TOPIC": AllocateMessageQueueAcrossTopics,
}

STRATEGY_NAMES: tuple[str, ...] = tuple(_FACTORIES)
_NAMES_BY_CLASS = {factory.__name__: name for name, factory in _FACTORIES.items()}
JAVA_STRATEGY_NAMES: tuple[str, ...] = STRATEGY_NAMES[:6]
"""The six that Apache RocketMQ's Java client has, bit-exact (the golden vectors); the rest are Python only."""


class UnknownStrategyError(ValueError):
    """A strategy name that is not one of :data:`STRATEGY_NAMES`."""


def create_strategy(name: str, **options: Any) -> AllocateMessageQueueStrategy:
    """The strategy Java names ``name``, configured with ``options``.

    Options: CONSISTENT_HASH ``virtual_node_count`` (default 10), ``hash_function``; CONFIG ``message_queues``;
    MACHINE_ROOM ``consumer_idcs``; MACHINE_ROOM_NEARBY ``inner`` (a strategy object or name) and ``resolver``;
    CONSISTENT_HASH_BOUNDED ``eps`` (default 0.25), ``virtual_node_count`` (default 40), ``hash_function``;
    CROSS_TOPIC ``inner`` (AVG, the default, AVG_BY_CIRCLE or CONSISTENT_HASH_BOUNDED, an object or name).
    An unknown name or option raises ``ValueError`` listing what is valid.
    """
    factory = _FACTORIES.get(name)
    if factory is None:
        raise UnknownStrategyError(f"unknown strategy {name!r}; valid names: {', '.join(STRATEGY_NAMES)}")
    accepted = [p for p in inspect.signature(factory).parameters if p != "self"]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        valid = ", ".join(accepted) if accepted else "none"
        raise ValueError(f"strategy {name} has no option {', '.join(unknown)}; its options: {valid}")
    if name in ("MACHINE_ROOM_NEARBY", "CROSS_TOPIC") and isinstance(options.get("inner"), str):
        options["inner"] = create_strategy(options["inner"])
    return factory(**options)


def strategy_name(reported: str) -> str | None:
    """A consumer's ``allocateMessageQueueStrategy`` property as a strategy name of this registry.

    Java sends the strategy object's ``toString`` (``org.apache...AllocateMessageQueueAveragely@1b6d3586``), this
    library's consumers the dotted class name; the class names are the same in both, so the last dotted part before
    any ``@`` decides. An unknown class (a custom strategy) keeps its class name; no property gives None.
    CROSS_TOPIC's inner strategy is not reported: AVG, its default, is assumed."""
    cls = reported.split("@", 1)[0].strip().rsplit(".", 1)[-1]
    if not cls:
        return None
    return _NAMES_BY_CLASS.get(cls, cls)


def java_compatible(strategy: AllocateMessageQueueStrategy) -> bool:
    """Can Java consumers of the same group compute this strategy's shares? False for this library's own
    strategies (``java_compatible = False``) and for a wrapper around one; user strategies are assumed to be."""
    inner = getattr(strategy, "inner", None)
    own = bool(getattr(strategy, "java_compatible", True))
    return own and (inner is None or java_compatible(inner))


def spans_topics(strategy: AllocateMessageQueueStrategy) -> bool:
    """Does the strategy allocate all the group's topics in one call (CROSS_TOPIC) rather than one topic each?"""
    return bool(getattr(strategy, "spans_topics", False))
