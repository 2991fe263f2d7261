"""Where consumed offsets are kept: on the brokers (clustering) or in a local file (broadcasting).

Both stores answer the core's two questions the same way: ``read(mq)`` gives the stored offset (``None`` when none
was ever stored) or raises :class:`OffsetStoreError`, and ``persist(offsets)`` writes a batch and returns the part
that is now stored at least that far. Neither ever moves an offset backwards on its own accord.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Protocol

from rocket_rebalance.inputs import InputFileError, read_input_text
from rocket_rebalance.model import MessageQueue
from rocket_rebalance.runtime.steps import Blocking, Steps, call, run
from rocket_rebalance.runtime.transport import Transport, TransportError

__all__ = [
    "BrokerOffsets",
    "LocalFileOffsetStore",
    "OffsetStore",
    "OffsetStoreError",
    "RemoteOffsetStore",
    "default_offset_path",
    "persist_steps",
    "read_steps",
]


log = logging.getLogger("rocket_rebalance.runtime")


class OffsetStoreError(OSError):
    """An offset could not be read or written; the queue is skipped (read) or the write retried (persist)."""


class OffsetStore(Protocol):
    def read(self, mq: MessageQueue) -> int | None: ...

    def persist(self, offsets: Mapping[MessageQueue, int]) -> dict[MessageQueue, int]: ...


class BrokerOffsets:
    """Offsets on the brokers, per consumer group (RocketMQ's ``RemoteBrokerOffsetStore``), as steps
    (:mod:`rocket_rebalance.runtime.steps`): the steps of a read and of a write, the same for the threaded and the
    asyncio runtime, which carry out the transport calls on their own wire (every consumer's default store in
    CLUSTERING). :class:`RemoteOffsetStore` runs them on a threaded transport for callers that want plain
    methods."""

    def __init__(self, consumer_group: str, client_id: str) -> None:
        self._group = consumer_group
        self._client_id = client_id

    def read_steps(self, mq: MessageQueue) -> Steps[int | None]:
        try:
            stored = yield from call(Transport.query_offsets, mq.broker_name, self._group, [mq])
        except TransportError as error:
            raise OffsetStoreError(str(error)) from None
        return stored.get(mq)

    def persist_steps(self, offsets: Mapping[MessageQueue, int]) -> Steps[dict[MessageQueue, int]]:
        """Write per broker; a broker that fails leaves its queues out of the answer (the core retries them)."""
        by_broker: dict[str, dict[MessageQueue, int]] = {}
        for mq, offset in offsets.items():
            by_broker.setdefault(mq.broker_name, {})[mq] = offset
        stored: dict[MessageQueue, int] = {}
        failures = []
        for broker, batch in by_broker.items():
            try:
                result = yield from call(Transport.update_offsets, broker, self._group, self._client_id, batch)
            except TransportError as error:
                failures.append(str(error))
                continue
            stored.update({mq: batch[mq] for mq, at in result.items() if mq in batch and at >= batch[mq]})
        if failures and not stored:
            raise OffsetStoreError("; ".join(failures))
        return stored


class RemoteOffsetStore:
    """The broker's offsets (:class:`BrokerOffsets`) with plain methods, over a threaded transport: an
    :class:`OffsetStore` like any other (the consumers themselves run :class:`BrokerOffsets` on their own wire)."""

    def __init__(self, transport: Transport, consumer_group: str, client_id: str) -> None:
        self._steps = BrokerOffsets(consumer_group, client_id)
        self._transport = transport

    def read(self, mq: MessageQueue) -> int | None:
        return run(self._steps.read_steps(mq), self._transport)

    def persist(self, offsets: Mapping[MessageQueue, int]) -> dict[MessageQueue, int]:
        return run(self._steps.persist_steps(offsets), self._transport)


def read_steps(store: OffsetStore | BrokerOffsets, mq: MessageQueue) -> Steps[int | None]:
    """A read of any store as steps: the broker's offsets on the consumer's own wire, any other store (a file,
    the application's own) by its methods, as blocking local work."""
    if isinstance(store, BrokerOffsets):
        return (yield from store.read_steps(mq))
    stored: int | None = yield Blocking(partial(store.read, mq))
    return stored


def persist_steps(
    store: OffsetStore | BrokerOffsets, offsets: Mapping[MessageQueue, int]
) -> Steps[dict[MessageQueue, int]]:
    """A write to any store as steps (see :func:`read_steps`)."""
    if isinstance(store, BrokerOffsets):
        return (yield from store.persist_steps(offsets))
    stored: dict[MessageQueue, int] = yield Blocking(partial(store.persist, offsets))
    return stored


def default_offset_path(client_id: str, consumer_group: str) -> Path:
    """``~/.rocket_rebalance/offsets/<client>/<group>/offsets.json`` (Java keeps ``~/.rocketmq_offsets`` alike)."""
    safe_client = client_id.replace("/", "_").replace(":", "_")
    return Path.home() / ".rocket_rebalance" / "offsets" / safe_client / consumer_group / "offsets.json"


JAVA_LONG_MAX = 2**63 - 1


def _parse_offsets(text: str) -> dict[MessageQueue, int]:
    """The offsets of an offsets file, validated entry by entry: one entry per queue, each offset an integer in
    0 .. 2**63-1 (Java's long). A ``ValueError`` names the first entry that is wrong and why."""
    document = json.loads(text)
    if not isinstance(document, dict) or not isinstance(document.get("offsets"), list):
        raise ValueError('not an object with an "offsets" list')
    offsets: dict[MessageQueue, int] = {}
    for index, item in enumerate(document["offsets"]):
        if not isinstance(item, dict):
            raise ValueError(f"entry {index} is not an object")
        mq = MessageQueue.from_dict(item)
        offset = item.get("offset")
        if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= JAVA_LONG_MAX:
            raise ValueError(f"entry {index} ({mq}): offset {offset!r} is not an integer from 0 to 2**63-1")
        if mq in offsets:
            raise ValueError(f"entry {index}: {mq} appears twice (offsets {offsets[mq]} and {offset})")
        offsets[mq] = offset
    return offsets


class LocalFileOffsetStore:
    """Offsets in a JSON file, for broadcasting consumers (each keeps its own progress).

    A write goes to a temporary file, is fsynced, and replaces the file by rename, after the previous file was
    kept as ``.bak``; a read falls back to ``.bak`` when the file is missing or damaged, so a crash at any point
    leaves a readable file. Offsets only move forward.

    A file that exists but cannot be used (and no usable ``.bak``) is an :class:`OffsetStoreError` naming the
    entry that is wrong: starting without offsets would jump to consume-from-where and skip or repeat messages, so
    that happens only when asked for with ``reset=True`` (Java's local store throws here too).
    """

    def __init__(self, path: Path, reset: bool = False) -> None:
        self.path = path
        self._backup = path.with_name(path.name + ".bak")
        self._lock = threading.Lock()
        self._offsets: dict[MessageQueue, int] = {} if reset else self._load()

    def _load(self) -> dict[MessageQueue, int]:
        problems: list[str] = []
        for candidate in (self.path, self._backup):
            try:
                offsets = _parse_offsets(read_input_text(candidate, "offsets file"))
            except FileNotFoundError:
                continue
            except InputFileError as error:  # /dev/zero, a FIFO, a huge file: named by mistake, not damaged
                raise OffsetStoreError(str(error)) from None
            except OSError as error:  # not a missing file but an unusable place: starting empty would lose offsets
                raise OffsetStoreError(f"cannot read {candidate}: {error}") from None
            except (ValueError, TypeError) as error:  # not from a crash (rename is atomic); from a person, say
                problems.append(f"{candidate}: {error}")
                continue
            except RecursionError:  # JSON nested past Python's stack: nothing this store ever wrote
                problems.append(f"{candidate}: JSON nested too deeply")
                continue
            if problems:
                log.warning("offsets file %s; using %s", problems[0], candidate)
            return offsets
        if problems:
            raise OffsetStoreError(
                f"unusable offsets file {'; and '.join(problems)}: refusing to start without offsets "
                f"(reset them on purpose to start from consume-from-where)"
            )
        return {}

    def read(self, mq: MessageQueue) -> int | None:
        with self._lock:
            return self._offsets.get(mq)

    def persist(self, offsets: Mapping[MessageQueue, int]) -> dict[MessageQueue, int]:
        with self._lock:
            merged = dict(self._offsets)
            for mq, offset in offsets.items():
                merged[mq] = max(offset, merged.get(mq, offset))
            try:
                self._write(merged)
            except OSError as error:
                raise OffsetStoreError(f"cannot write {self.path}: {error}") from None
            self._offsets = merged
            return dict(offsets)

    def _write(self, offsets: Mapping[MessageQueue, int]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        document = {"offsets": [mq.to_dict() | {"offset": offset} for mq, offset in sorted(offsets.items())]}
        temporary = self.path.with_name(self.path.name + ".tmp")
        with temporary.open("w", encoding="utf-8") as handle:
            json.dump(document, handle, ensure_ascii=False, indent=1)
            handle.flush()
            os.fsync(handle.fileno())
        if self.path.exists():
            os.replace(self.path, self._backup)
        os.replace(temporary, self.path)
        directory = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
