"""A group's settings row as the analysis uses it: its strategy (parsed once per worker) and message model."""

from __future__ import annotations

import json

from rocket_rebalance.model import MessageModel, MessageQueue, canonical_choice
from rocket_rebalance.strategies import AllocateMessageQueueStrategy, create_strategy

__all__ = [
    "BROADCASTING",
    "CLUSTERING",
    "COMPARED_STRATEGIES",
    "MESSAGE_MODELS",
    "compared_strategies",
    "parse_strategy",
]

CLUSTERING = MessageModel.CLUSTERING.value
BROADCASTING = MessageModel.BROADCASTING.value
MESSAGE_MODELS = (CLUSTERING, BROADCASTING)

COMPARED_STRATEGIES = ("AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH", "CONSISTENT_HASH_BOUNDED", "CROSS_TOPIC")
"""Strategies every clustering group is compared under (default options), beside its own current strategy.
CROSS_TOPIC (inner AVG) plans all the group's topics together; its rows are still per topic, cut from that plan."""


def compared_strategies(text: str) -> tuple[str, ...]:
    """The strategies of ``impact --compare``: names of :data:`COMPARED_STRATEGIES`, comma-separated, in the
    order given; ``none`` for no strategy comparison at all (not even the group's current strategy).

    The comparison is most of a group's analysis (benchmarks/RESULTS.md: about 60%), and an operator asking what a
    change does under the groups' own strategies does not need it replayed under five others."""
    if canonical_choice(text.strip(), ("none",)) == "none":
        return ()
    names = [canonical_choice(name.strip(), COMPARED_STRATEGIES) for name in text.split(",")]
    unknown = [name for name in names if name not in COMPARED_STRATEGIES]
    if unknown:
        raise ValueError(
            f"--compare {text!r}: {', '.join(map(repr, unknown))} is not a compared strategy "
            f"(give some of {','.join(COMPARED_STRATEGIES)}, comma-separated, or none)"
        )
    if len(set(names)) != len(names):
        raise ValueError(f"--compare {text!r} names a strategy twice")
    return tuple(names)


_strategy_cache: dict[tuple[str, str], AllocateMessageQueueStrategy] = {}


def parse_strategy(name: str | None, options: str | None) -> AllocateMessageQueueStrategy:
    """The configured strategy of a group; ``options`` is a JSON object of ``create_strategy`` options.

    ``message_queues`` (CONFIG) is a list of ``{"topic", "brokerName", "queueId"}`` objects, ``consumer_idcs``
    (MACHINE_ROOM) a list of rooms, and ``inner`` (MACHINE_ROOM_NEARBY, CROSS_TOPIC) a strategy name or, for an
    inner strategy with options of its own, ``{"strategy": NAME, "options": {...}}``. Strategies are cached per
    (name, options): a CONSISTENT_HASH strategy keeps its rings, which thousands of groups share.
    """
    key = (name or "", options or "")
    cached = _strategy_cache.get(key)
    if cached is not None:
        return cached
    if not name:
        raise ValueError("strategy is missing")
    try:
        parsed = json.loads(options) if options else {}
    except (json.JSONDecodeError, RecursionError) as error:  # RecursionError: nested too deep for the parser
        raise ValueError(f"options are not JSON: {error}") from None
    strategy = _create(name, parsed)
    if len(_strategy_cache) > 4096:
        _strategy_cache.clear()
    _strategy_cache[key] = strategy
    return strategy


MAX_INNER_DEPTH = 2
"""How deep inner strategies may nest in options (a wrapper in a wrapper); deeper is refused, not recursed into."""


def _create(name: str, options: object, depth: int = 0) -> AllocateMessageQueueStrategy:
    """``create_strategy`` with options in their JSON shapes (see :func:`parse_strategy`)."""
    if not isinstance(options, dict):
        raise ValueError("options must be a JSON object")
    options = dict(options)
    if options.get("message_queues") is not None:
        options["message_queues"] = [MessageQueue.from_dict(item) for item in options["message_queues"]]
    if isinstance(options.get("consumer_idcs"), list):
        options["consumer_idcs"] = set(options["consumer_idcs"])
    inner = options.get("inner")
    if isinstance(inner, dict):
        if depth >= MAX_INNER_DEPTH:
            raise ValueError(f"inner strategies nest at most {MAX_INNER_DEPTH} deep")
        if not isinstance(inner.get("strategy"), str) or set(inner) - {"strategy", "options"}:
            raise ValueError('inner must be a strategy name or {"strategy": NAME, "options": {...}}')
        options["inner"] = _create(inner["strategy"], inner.get("options") or {}, depth + 1)
    return create_strategy(name, **options)
