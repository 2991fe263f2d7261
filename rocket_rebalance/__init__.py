"""rocket-rebalance: which queues a consumer owns, computed exactly as Apache RocketMQ's Java client does.

Every consumer of a group sorts the same queues and client IDs and applies the same strategy, so all agree
without a coordinator. This top level holds the pure allocation layer; the rebalance engine, its runtime and the
Spark pipeline live in sub-packages imported on demand (``import rocket_rebalance`` loads neither grpc nor pyspark).
"""

from rocket_rebalance.model import (
    DuplicateClientIdWarning,
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

__all__ = [
    "STRATEGY_NAMES",
    "AllocateMessageQueueStrategy",
    "AllocationError",
    "DuplicateClientIdWarning",
    "MessageQueue",
    "RebalanceInput",
    "create_strategy",
    "plan",
    "prepare_rebalance_input",
    "sort_client_ids",
    "sort_queues",
]

__version__ = "0.1.0"
