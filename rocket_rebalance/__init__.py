"""rocket-rebalance: which queues a consumer owns, computed exactly as Apache RocketMQ's Java client does.

Every consumer of a group sorts the same queues and client IDs and applies the same strategy, so all agree
without a coordinator. This top level holds the pure allocation layer and names the consumer API, loaded from the
runtime when first used, so ``import rocket_rebalance`` loads neither grpc nor pyspark (nor the runtime):

- ``PushConsumer`` (threads) and ``AsyncPushConsumer`` (asyncio): the group's queues are pulled for you and handed to a
  listener; ``ConsumeResult`` and ``Reconsume`` are a listener's answers, ``Message`` what it receives.
- ``PullConsumer`` and ``AsyncPullConsumer``: you poll the queues the group gives this member and commit offsets.
- ``RebalanceListener``: told of queues assigned and revoked.
- ``ConsumerNotReadyError``: what ``wait_for_assignment(timeout)`` raises when the queues did not come in time.

The library logs to the ``rocket_rebalance`` logger, which has a ``NullHandler``: configure logging to see it.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from rocket_rebalance.model import (
    ConsumeFromWhere,
    DuplicateClientIdWarning,
    MessageModel,
    MessageQueue,
    RebalanceInput,
    prepare_rebalance_input,
    sort_client_ids,
    sort_queues,
)
from rocket_rebalance.plan import plan
from rocket_rebalance.strategies import (
    STRATEGY_NAMES,
    AllocateMessageQueueStrategy,
    AllocationError,
    create_strategy,
)

if TYPE_CHECKING:  # for type checkers; at run time __getattr__ loads them on first use
    from rocket_rebalance.runtime.async_consumer import AsyncPullConsumer, AsyncPushConsumer
    from rocket_rebalance.runtime.consumer import PushConsumer
    from rocket_rebalance.runtime.listener import ConsumeResult, RebalanceListener, Reconsume
    from rocket_rebalance.runtime.pull_consumer import PullConsumer
    from rocket_rebalance.runtime.settings import ConsumerNotReadyError
    from rocket_rebalance.runtime.transport import Message

_LAZY = {
    "AsyncPullConsumer": "rocket_rebalance.runtime.async_consumer",
    "AsyncPushConsumer": "rocket_rebalance.runtime.async_consumer",
    "ConsumeResult": "rocket_rebalance.runtime.listener",
    "ConsumerNotReadyError": "rocket_rebalance.runtime.settings",
    "Message": "rocket_rebalance.runtime.transport",
    "PullConsumer": "rocket_rebalance.runtime.pull_consumer",
    "PushConsumer": "rocket_rebalance.runtime.consumer",
    "RebalanceListener": "rocket_rebalance.runtime.listener",
    "Reconsume": "rocket_rebalance.runtime.listener",
}


logging.getLogger(__name__).addHandler(logging.NullHandler())  # the application decides where our logs go


def __getattr__(name: str) -> Any:
    """The consumer API, imported when first asked for (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rocket_rebalance' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names with the lazily loaded ones, so ``dir()`` and ``help(rocket_rebalance)`` list the consumer
    classes before their first use (``help`` then loads them, as it must to document them)."""
    return sorted({*globals(), *_LAZY})


__all__ = [
    "STRATEGY_NAMES",
    "AllocateMessageQueueStrategy",
    "AllocationError",
    "AsyncPullConsumer",
    "AsyncPushConsumer",
    "ConsumeFromWhere",
    "ConsumeResult",
    "ConsumerNotReadyError",
    "DuplicateClientIdWarning",
    "Message",
    "MessageModel",
    "MessageQueue",
    "PullConsumer",
    "PushConsumer",
    "RebalanceInput",
    "RebalanceListener",
    "Reconsume",
    "create_strategy",
    "plan",
    "prepare_rebalance_input",
    "sort_client_ids",
    "sort_queues",
]

__version__ = "0.1.0"
