"""Strategies by their Java ``getName()`` value, with options checked by name."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from rocket_rebalance.strategies.averagely import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
)
from rocket_rebalance.strategies.base import AllocateMessageQueueStrategy
from rocket_rebalance.strategies.by_config import AllocateMessageQueueByConfig
from rocket_rebalance.strategies.consistent_hash import AllocateMessageQueueConsistentHash
from rocket_rebalance.strategies.machine_room import (
    AllocateMachineRoomNearby,
    AllocateMessageQueueByMachineRoom,
)

__all__ = ["STRATEGY_NAMES", "UnknownStrategyError", "create_strategy"]

_FACTORIES: dict[str, Callable[..., AllocateMessageQueueStrategy]] = {
    "AVG": AllocateMessageQueueAveragely,
    "AVG_BY_CIRCLE": AllocateMessageQueueAveragelyByCircle,
    "CONSISTENT_HASH": AllocateMessageQueueConsistentHash,
    "CONFIG": AllocateMessageQueueByConfig,
    "MACHINE_ROOM": AllocateMessageQueueByMachineRoom,
    "MACHINE_ROOM_NEARBY": AllocateMachineRoomNearby,
}

STRATEGY_NAMES: tuple[str, ...] = tuple(_FACTORIES)


class UnknownStrategyError(ValueError):
    """A strategy name that is not one of :data:`STRATEGY_NAMES`."""


def create_strategy(name: str, **options: Any) -> AllocateMessageQueueStrategy:
    """The strategy Java names ``name``, configured with ``options``.

    Options: CONSISTENT_HASH ``virtual_node_count`` (default 10), ``hash_function``; CONFIG ``message_queues``;
    MACHINE_ROOM ``consumer_idcs``; MACHINE_ROOM_NEARBY ``inner`` (a strategy object or name) and ``resolver``.
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
    if name == "MACHINE_ROOM_NEARBY" and isinstance(options.get("inner"), str):
        options["inner"] = create_strategy(options["inner"])
    return factory(**options)
