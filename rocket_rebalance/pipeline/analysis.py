"""The per-group analysis: plain Python over the library's own plan, movement and balance.

Spark executors and the single-process reference both call :func:`analyze_group` on the same input shape (one dict
per consumer group, nested lists of routes, members and settings, and the group's offsets), so the pipeline equals
the library group by group by construction; Spark only moves the groups around. No pyspark here, and no I/O.

The work is split by job: :mod:`.scenario` derives the after side from a scenario, :mod:`.views` resolves views
given by digest, :mod:`.sides` analyses one side, :mod:`.observed` compares what consumers report holding with the
plan, and :mod:`.movement` compares the sides (movement, exposure, strategy comparison).

Input row (the ``group input``)::

    {"group": str,
     "before": side | None, "after": side | None,       # side: see below; "after" unused with a scenario
     "offsets": Offsets | None}                         # see movement.offsets_from_rows
    side = {"settings": [{"strategy", "message_model", "options"}] | None,   # more than one row is an error
            "topics": [str] | None,                                          # the group's subscriptions
            "routes": [{"topic", "broker", "read_queue_nums", "perm"}] | None, # routes of those topics
            "members": [{"client_id", "view": [str] | None, "view_digest",   # one entry per consumer process
                         "reported", "strategy", "language"}] | None,        # (the last three: observed data)
            "observed": [{"client_id", "topic", "broker", "queue_id"}] | None,  # None: no observed table
            "unread": [{"client_id", "reason"}] | None,                      # the collector's rejected.jsonl
            "brokers_down": [str] | None}                                    # set by a scenario

Output: rows added to :class:`~.rows.Tables` (each table's columns in schema order, ``group`` first; the row
types of :mod:`.rows` name them); :func:`~.rows.as_dicts` gives one group's rows as dicts.
"""

from __future__ import annotations

import gc
import warnings
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from rocket_rebalance.model import DuplicateClientIdWarning
from rocket_rebalance.pipeline.comparison import comparison
from rocket_rebalance.pipeline.movement import Moves, compare_sides, queue_set
from rocket_rebalance.pipeline.observed import check_observed
from rocket_rebalance.pipeline.rows import GroupRow, Tables
from rocket_rebalance.pipeline.scenario import Scenario, apply_scenario
from rocket_rebalance.pipeline.settings import COMPARED_STRATEGIES
from rocket_rebalance.pipeline.sides import analyze_side

__all__ = ["analyze_group", "gc_paused"]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a batch of groups is analysed, then back on.

    The analysis allocates millions of small tuples and lists that are freed by reference counting (it builds no
    cycles); with the collector on, each allocation burst also walks every live object the worker holds (the
    batch, the queue and ring caches), which measured as a third of the whole run (benchmarks/RESULTS.md).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def analyze_group(
    row: Mapping[str, Any],
    scenario: Scenario | None = None,
    compare: bool = False,
    out: Tables | None = None,
    compared: Sequence[str] = COMPARED_STRATEGIES,
) -> Tables:
    """Everything the pipeline reports about one consumer group; ``compare`` when an after side is given, and then
    the change replayed under each of the ``compared`` strategies (the comparison table; none when empty).

    The rows are added to ``out`` (a batch's tables; new tables when not given), which is returned. With a
    ``scenario``, the after side is the before side with the scenario applied (``row["after"]`` is ignored).
    Duplicate client IDs are reported as violations, so the library's warning is silenced here.
    """
    group = row["group"]
    out = Tables() if out is None else out
    rejected_from = len(out["rejected"])
    before_data = row.get("before")
    after_data = row.get("after")
    if scenario is not None:
        after_data = apply_scenario(group, before_data, scenario)
        compare = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DuplicateClientIdWarning)
        before = analyze_side(group, "before", before_data, out)
        observed = check_observed(before, before_data, out)
        after = analyze_side(group, "after", after_data, out, known=[before.members]) if compare else None
        rejected = out["rejected"]
        if scenario is not None and len(rejected) > rejected_from:
            # the after side was derived from the before side: do not reject a row twice
            rows = rejected.rows(rejected_from)
            seen = {r[1:] for r in rows if r[0] == "before"}
            rejected.replace_rows(rejected_from, [r for r in rows if r[0] == "before" or r[1:] not in seen])
        moved = minimum = exposed = paused = 0
        if after is not None and before.ok and after.ok:
            moves = Moves(row.get("offsets") or {})
            moved, minimum, exposed, paused = compare_sides(before, after, moves, out)
            comparison(group, before, after, moves, out, compared)
    rebalances = False
    if after is not None:
        topics = set(before.inputs) | set(after.inputs)
        rebalances = (
            moved > 0
            or Counter(before.members) != Counter(after.members)
            or any(queue_set(before, t) != queue_set(after, t) for t in topics)
        )
    if before.ok or (after is not None and after.ok):
        out["groups"].append(
            GroupRow(
                strategy_before=before.label,
                strategy_after=after.label if after else None,
                message_model=(after.model if after is not None and after.ok else None) or before.model,
                consumers_before=len(before.members),
                consumers_after=len(after.members) if after else None,
                queues_before=before.queues,
                queues_after=after.queues if after else None,
                violations_before=before.violations,
                violations_after=after.violations if after else None,
                observed_violations=observed,
                moved=moved,
                minimum=minimum,
                exposure=exposed,
                paused=paused,
                rebalances=rebalances,
            )
        )
    out.close_group(group)
    return out
