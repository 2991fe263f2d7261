"""Reading the Java golden vectors: case files, the strategy a case describes, and its outcome in Java terms.

The repository ships a representative subset (tests/golden/allocate_subset.jsonl); the full recorded set lives in
../shared/golden/ beside a checkout, and ROCKET_REBALANCE_GOLDEN_DIR points at any other set of the same format.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rocket_rebalance.model import MessageQueue, queues_of
from rocket_rebalance.strategies import (
    AllocateMessageQueueStrategy,
    AllocationError,
    ConsumerIdcsNotSetError,
    MessageQueuesNotSetError,
    create_strategy,
)

REPO = Path(__file__).resolve().parents[2]
SUBSET = REPO / "tests" / "golden" / "allocate_subset.jsonl"


def golden_files() -> list[Path]:
    """Every golden case file this checkout can see: the shipped subset, shared/, and the env override."""
    files = [SUBSET]
    shared = REPO.parent / "shared" / "golden" / "allocate_cases.jsonl"
    if shared.exists():
        files.append(shared)
    extra = os.environ.get("ROCKET_REBALANCE_GOLDEN_DIR")
    if extra:
        files.extend(sorted(Path(extra).glob("*.jsonl")))
    return files


def read_cases(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                case = json.loads(line)
                if "strategy" in case and "expected" in case:
                    yield case


def _queues(items: list[dict[str, Any]] | None) -> list[MessageQueue] | None:
    return None if items is None else queues_of(items)


def strategy_for(strategy: str, params: dict[str, Any]) -> AllocateMessageQueueStrategy:
    """The strategy object a case's ``strategy`` and ``params`` describe (Java option names mapped)."""
    if strategy == "CONSISTENT_HASH":
        if "virtualNodeCnt" in params:
            return create_strategy(strategy, virtual_node_count=params["virtualNodeCnt"])
        return create_strategy(strategy)
    if strategy == "CONFIG":
        return create_strategy(strategy, message_queues=_queues(params.get("messageQueueList")))
    if strategy == "MACHINE_ROOM":
        idcs = params.get("consumeridcs")
        return create_strategy(strategy, consumer_idcs=None if idcs is None else set(idcs))
    if strategy == "MACHINE_ROOM_NEARBY":
        inner = dict(params["inner"])
        return create_strategy(strategy, inner=strategy_for(inner.pop("strategy"), inner))
    return create_strategy(strategy)


def run_case(case: dict[str, Any]) -> dict[str, Any]:
    """Run one case through our strategies and describe the outcome the way ``expected`` does."""
    try:
        strategy = strategy_for(case["strategy"], case["params"])
        result = strategy.allocate(case["group"], case["currentCID"], _queues(case["mqAll"]), case["cidAll"])
    except AllocationError as error:
        return {"error": "IllegalArgumentException", "message": str(error)}
    except ConsumerIdcsNotSetError:
        return {"error": "NullPointerException", "message": None}
    except MessageQueuesNotSetError:  # where Java returns null (its consumers then consume nothing), ours refuses
        return {"result": None, "strategyName": case["strategy"]}
    return {
        "result": None if result is None else [mq.to_dict() for mq in result],
        "strategyName": strategy.name,
    }
