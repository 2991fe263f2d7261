"""A group's settings row as the analysis uses it: its strategy (parsed once per worker) and message model."""

from __future__ import annotations

import json

from rocket_rebalance.model import MessageModel, MessageQueue
from rocket_rebalance.strategies import AllocateMessageQueueStrategy, create_strategy

__all__ = ["BROADCASTING", "CLUSTERING", "COMPARED_STRATEGIES", "MESSAGE_MODELS", "parse_strategy"]

CLUSTERING = MessageModel.CLUSTERING.value
BROADCASTING = MessageModel.BROADCASTING.value
MESSAGE_MODELS = (CLUSTERING, BROADCASTING)

COMPARED_STRATEGIES = ("AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH")
"""Strategies every clustering group is compared under (default options), beside its own current strategy."""

_strategy_cache: dict[tuple[str, str], AllocateMessageQueueStrategy] = {}


def parse_strategy(name: str | None, options: str | None) -> AllocateMessageQueueStrategy:
    """The configured strategy of a group; ``options`` is a JSON object of ``create_strategy`` options.

    ``message_queues`` (CONFIG) is a list of ``{"topic", "brokerName", "queueId"}`` objects. Strategies are cached
    per (name, options): a CONSISTENT_HASH strategy keeps its rings, which thousands of groups share.
    """
    key = (name or "", options or "")
    cached = _strategy_cache.get(key)
    if cached is not None:
        return cached
    if not name:
        raise ValueError("strategy is missing")
    try:
        parsed = json.loads(options) if options else {}
    except json.JSONDecodeError as error:
        raise ValueError(f"options are not JSON: {error}") from None
    if not isinstance(parsed, dict):
        raise ValueError("options must be a JSON object")
    if "message_queues" in parsed and parsed["message_queues"] is not None:
        parsed["message_queues"] = [MessageQueue.from_dict(item) for item in parsed["message_queues"]]
    if "consumer_idcs" in parsed and isinstance(parsed["consumer_idcs"], list):
        parsed["consumer_idcs"] = set(parsed["consumer_idcs"])
    strategy = create_strategy(name, **parsed)
    if len(_strategy_cache) > 4096:
        _strategy_cache.clear()
    _strategy_cache[key] = strategy
    return strategy
