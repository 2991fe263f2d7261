"""Durable state in SQLite (WAL): topic configs, consumer offsets, and the message log.

Everything a broker would keep on disk lives here and survives a restart; everything a broker keeps in memory
(the consumer registry, queue locks, connections) does not, as in RocketMQ. Each call is one transaction, so a
reply is only sent once its write is committed, and a SIGTERM (or SIGKILL) loses nothing that was acknowledged.
WAL with ``synchronous=NORMAL`` is durable against a process crash; only an OS crash may lose the last commits.

One connection guarded by a lock: the stub's writes are small and the GIL serialises the work anyway, so a
connection pool would add failure modes without adding speed. An exclusive ``flock`` on the data directory
keeps a second stub from writing the same files.
"""

from __future__ import annotations

import fcntl
import json
import sqlite3
import threading
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from nameserver_stub.config import ConfigError, TopicQueues

SCHEMA_VERSION = 1
DB_NAME = "stub.sqlite3"
LOCK_NAME = "LOCK"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS topic_config (
    broker TEXT NOT NULL, topic TEXT NOT NULL,
    read_queue_nums INTEGER NOT NULL, write_queue_nums INTEGER NOT NULL, perm INTEGER NOT NULL,
    PRIMARY KEY (broker, topic)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS consumer_offset (
    broker TEXT NOT NULL, grp TEXT NOT NULL, topic TEXT NOT NULL, queue_id INTEGER NOT NULL,
    queue_offset INTEGER NOT NULL, last_client_id TEXT NOT NULL, updated_ms INTEGER NOT NULL,
    PRIMARY KEY (broker, grp, topic, queue_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS message (
    broker TEXT NOT NULL, topic TEXT NOT NULL, queue_id INTEGER NOT NULL, queue_offset INTEGER NOT NULL,
    msg_id TEXT NOT NULL, tags TEXT NOT NULL, keys TEXT NOT NULL, properties TEXT NOT NULL,
    born_ms INTEGER NOT NULL, store_ms INTEGER NOT NULL, body BLOB NOT NULL,
    PRIMARY KEY (broker, topic, queue_id, queue_offset)
) WITHOUT ROWID;
"""


@dataclass(frozen=True)
class NewMessage:
    """A message as a producer sends it."""

    body: bytes
    tags: str = ""
    keys: str = ""
    properties: tuple[tuple[str, str], ...] = ()
    born_ms: int = 0


@dataclass(frozen=True)
class StoredMessage:
    """A message in the log, with its place (queue offset) and store time."""

    topic: str
    broker_name: str
    queue_id: int
    queue_offset: int
    msg_id: str
    body: bytes
    tags: str
    keys: str
    properties: tuple[tuple[str, str], ...]
    born_ms: int
    store_ms: int


@dataclass(frozen=True)
class OffsetRecord:
    """A committed consumer offset and who committed it last."""

    offset: int
    last_client_id: str
    updated_ms: int


QueueKey = tuple[str, int]  # (topic, queue_id) within one broker


class Store:
    """The SQLite files under one data directory; thread-safe."""

    def __init__(self, data_dir: Path) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self._lock_file: IO[str] | None = open(data_dir / LOCK_NAME, "a+", encoding="utf-8")  # noqa: SIM115
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_file.close()
            raise ConfigError(f"data directory {data_dir} is in use by another stub") from None
        self._lock = threading.Lock()
        self._db = sqlite3.connect(data_dir / DB_NAME, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, SCHEMA_VERSION):
            self.close()
            raise ConfigError(f"data directory {data_dir} has schema version {version}, expected {SCHEMA_VERSION}")
        self._db.executescript(_SCHEMA)
        self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        self._max_offsets: dict[tuple[str, str, int], int] = {}

    def close(self) -> None:
        """Checkpoint the WAL into the database file and release the data directory."""
        with self._lock:
            if self._lock_file is None:
                return
            try:
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                self._db.close()
                fcntl.flock(self._lock_file, fcntl.LOCK_UN)
                self._lock_file.close()
                self._lock_file = None

    # -- topics ---------------------------------------------------------------------------------------------

    def load_topics(self) -> dict[str, dict[str, TopicQueues]]:
        """Every stored topic config: topic -> broker -> queues."""
        with self._lock:
            rows = self._db.execute(
                "SELECT topic, broker, read_queue_nums, write_queue_nums, perm FROM topic_config"
            ).fetchall()
        topics: dict[str, dict[str, TopicQueues]] = {}
        for topic, broker, read, write, perm in rows:
            topics.setdefault(topic, {})[broker] = TopicQueues(broker, read, write, perm)
        return topics

    def save_topic(self, topic: str, queues: TopicQueues) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO topic_config VALUES (?, ?, ?, ?, ?)",
                (queues.broker_name, topic, queues.read_queue_nums, queues.write_queue_nums, queues.perm),
            )

    # -- consumer offsets -----------------------------------------------------------------------------------

    def query_offsets(self, broker: str, group: str, queues: Sequence[QueueKey]) -> list[OffsetRecord | None]:
        """The committed offset of each queue, ``None`` where the group never committed one."""
        with self._lock:
            return [self._offset(broker, group, topic, queue_id) for topic, queue_id in queues]

    def group_offsets(self, broker: str, group: str) -> dict[QueueKey, OffsetRecord]:
        """Every committed offset of a group at a broker."""
        with self._lock:
            rows = self._db.execute(
                "SELECT topic, queue_id, queue_offset, last_client_id, updated_ms FROM consumer_offset "
                "WHERE broker = ? AND grp = ?",
                (broker, group),
            ).fetchall()
        return {(topic, queue_id): OffsetRecord(offset, client, ms) for topic, queue_id, offset, client, ms in rows}

    def all_offsets(self) -> dict[tuple[str, str, str, int], int]:
        """Every committed offset, keyed by (broker, group, topic, queue_id); for checks and tests."""
        with self._lock:
            rows = self._db.execute("SELECT broker, grp, topic, queue_id, queue_offset FROM consumer_offset")
            return {(b, g, t, q): offset for b, g, t, q, offset in rows}

    def commit_offsets(
        self,
        broker: str,
        group: str,
        client_id: str,
        offsets: Sequence[tuple[QueueKey, int]],
        now_ms: int,
        *,
        allow_backwards: bool = False,
    ) -> list[tuple[int, bool]]:
        """Store offsets in one transaction; returns (stored offset, updated) per item.

        Without ``allow_backwards`` (only an admin reset passes it) an offset not above the stored one is left
        alone: a slow consumer's late commit must not undo a newer one.
        """
        results: list[tuple[int, bool]] = []
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for (topic, queue_id), offset in offsets:
                    current = self._offset(broker, group, topic, queue_id)
                    if current is not None and (
                        offset == current.offset or (offset < current.offset and not allow_backwards)
                    ):
                        results.append((current.offset, False))
                        continue
                    self._db.execute(
                        "INSERT OR REPLACE INTO consumer_offset VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (broker, group, topic, queue_id, offset, client_id, now_ms),
                    )
                    results.append((offset, True))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return results

    def _offset(self, broker: str, group: str, topic: str, queue_id: int) -> OffsetRecord | None:
        row = self._db.execute(
            "SELECT queue_offset, last_client_id, updated_ms FROM consumer_offset "
            "WHERE broker = ? AND grp = ? AND topic = ? AND queue_id = ?",
            (broker, group, topic, queue_id),
        ).fetchone()
        return None if row is None else OffsetRecord(*row)

    # -- message log ----------------------------------------------------------------------------------------

    def append(
        self, broker: str, topic: str, queue_id: int, messages: Iterable[NewMessage], store_ms: int
    ) -> list[tuple[int, str]]:
        """Append messages to one queue in one transaction; returns (queue offset, msg id) per message."""
        written: list[tuple[int, str]] = []
        with self._lock:
            next_offset = self._max_offset(broker, topic, queue_id)
            rows = []
            for message in messages:
                msg_id = uuid.uuid4().hex.upper()
                rows.append(
                    (
                        broker,
                        topic,
                        queue_id,
                        next_offset,
                        msg_id,
                        message.tags,
                        message.keys,
                        json.dumps(dict(message.properties), sort_keys=True),
                        message.born_ms,
                        store_ms,
                        message.body,
                    )
                )
                written.append((next_offset, msg_id))
                next_offset += 1
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany("INSERT INTO message VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._max_offsets[(broker, topic, queue_id)] = next_offset
        return written

    def read(
        self, broker: str, topic: str, queue_id: int, offset: int, max_count: int, max_bytes: int
    ) -> list[StoredMessage]:
        """Up to ``max_count`` messages from ``offset`` on, stopping once ``max_bytes`` of bodies are reached."""
        with self._lock:
            rows = self._db.execute(
                "SELECT queue_offset, msg_id, tags, keys, properties, born_ms, store_ms, body FROM message "
                "WHERE broker = ? AND topic = ? AND queue_id = ? AND queue_offset >= ? "
                "ORDER BY queue_offset LIMIT ?",
                (broker, topic, queue_id, offset, max_count),
            ).fetchall()
        messages: list[StoredMessage] = []
        total = 0
        for queue_offset, msg_id, tags, keys, properties, born_ms, store_ms, body in rows:
            if messages and total + len(body) > max_bytes:
                break
            total += len(body)
            messages.append(
                StoredMessage(
                    topic,
                    broker,
                    queue_id,
                    queue_offset,
                    msg_id,
                    body,
                    tags,
                    keys,
                    tuple(sorted(json.loads(properties).items())),
                    born_ms,
                    store_ms,
                )
            )
        return messages

    def max_offset(self, broker: str, topic: str, queue_id: int) -> int:
        """The offset the next message of the queue gets (its message count, as nothing is deleted)."""
        with self._lock:
            return self._max_offset(broker, topic, queue_id)

    def _max_offset(self, broker: str, topic: str, queue_id: int) -> int:
        key = (broker, topic, queue_id)
        cached = self._max_offsets.get(key)
        if cached is None:
            row = self._db.execute(
                "SELECT MAX(queue_offset) FROM message WHERE broker = ? AND topic = ? AND queue_id = ?", key
            ).fetchone()
            cached = 0 if row[0] is None else row[0] + 1
            self._max_offsets[key] = cached
        return cached

    def min_offset(self, broker: str, topic: str, queue_id: int) -> int:
        """The smallest offset still stored; the stub never deletes messages, so always 0."""
        return 0

    def search_offset(self, broker: str, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first offset stored at or after ``timestamp_ms``; the max offset when every message is older."""
        with self._lock:
            row = self._db.execute(
                "SELECT MIN(queue_offset) FROM message "
                "WHERE broker = ? AND topic = ? AND queue_id = ? AND store_ms >= ?",
                (broker, topic, queue_id, timestamp_ms),
            ).fetchone()
            return self._max_offset(broker, topic, queue_id) if row[0] is None else int(row[0])
