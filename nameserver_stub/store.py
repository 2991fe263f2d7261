"""Durable state in SQLite (WAL): topic configs, consumer offsets, and the message log.

Everything a broker would keep on disk lives here and survives a restart; everything a broker keeps in memory
(the consumer registry, queue locks, connections) does not, as in RocketMQ. Each call is one transaction, so a
reply is only sent once its write is committed, and a SIGTERM (or SIGKILL) loses nothing that was acknowledged.
WAL with ``synchronous=NORMAL`` is durable against a process crash; only an OS crash may lose the last commits.

One connection guarded by a lock: the stub's writes are small and the GIL serialises the work anyway, so a
connection pool would add failure modes without adding speed. An exclusive ``flock`` on the data directory
keeps a second stub from writing the same files.

A data directory the stub cannot use (a file, not writable, a damaged database) is a :class:`ConfigError` at
open, before anything is served. A full disk (or the ``max_bytes`` cap) is :class:`DiskFull` on the write that
hit it: SQLite has already rolled that transaction back, so the write is refused whole and every earlier
commit stays.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import logging
import sqlite3
import threading
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from nameserver_stub.config import ConfigError, TopicQueues
from nameserver_stub.errors import ResourceExhausted

log = logging.getLogger("nameserver_stub")

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


def _tables(db: sqlite3.Connection) -> dict[str, str]:
    """Each table's definition as SQLite stored it."""
    return dict(db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall())


@functools.cache
def _expected_tables() -> dict[str, str]:
    """The definitions :data:`_SCHEMA` creates, to compare an opened file's with."""
    fresh = sqlite3.connect(":memory:")
    try:
        fresh.executescript(_SCHEMA)
        return _tables(fresh)
    finally:
        fresh.close()


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


class DiskFull(ResourceExhausted):
    """A write found no room: the disk under the data directory is full, or the database reached its cap."""


def _reason(error: OSError | ValueError) -> str:
    """An OS error without Python's ``[Errno N]`` prefix: "Permission denied: /data/LOCK"."""
    if isinstance(error, OSError) and error.strerror:
        return f"{error.strerror}: {error.filename}" if error.filename else error.strerror
    return str(error)


class Store:
    """The SQLite files under one data directory; thread-safe."""

    def __init__(self, data_dir: Path, *, max_bytes: int | None = None) -> None:
        """Open (creating if needed) the data directory; ``max_bytes`` caps the database file's size."""
        self._data_dir = data_dir
        self._max_bytes = max_bytes
        self._lock = threading.Lock()
        self._lock_file: IO[str] | None = self._open_lock_file(data_dir)
        try:
            self._db = self._open_database(data_dir / DB_NAME)
        except BaseException:
            self._release_lock_file()
            raise
        self._max_offsets: dict[tuple[str, str, int], int] = {}

    @staticmethod
    def _open_lock_file(data_dir: Path) -> IO[str]:
        if "\0" in str(data_dir):  # in our words: Python's own differ from one version to the next
            raise ConfigError(f"data directory {data_dir} cannot be used: it contains a NUL byte")
        if data_dir.exists() and not data_dir.is_dir():
            raise ConfigError(f"data directory {data_dir} is not a directory")
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
            lock_file = open(data_dir / LOCK_NAME, "a+", encoding="utf-8")  # noqa: SIM115 - held until close()
        except (OSError, ValueError) as error:  # ValueError: a name the file system's encoding cannot write
            raise ConfigError(f"data directory {data_dir} cannot be used: {_reason(error)}") from None
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock_file.close()
            raise ConfigError(f"data directory {data_dir} is in use by another stub") from None
        return lock_file

    def _open_database(self, path: Path) -> sqlite3.Connection:
        """Connect, check the file is a sound stub database, and create the schema; ConfigError if unusable."""
        db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            # quick_check reads every page once: damage is found here, not by a client's call an hour later
            problems = [row[0] for row in db.execute("PRAGMA quick_check").fetchall()]
            if problems != ["ok"]:
                raise ConfigError(f"data directory {path.parent}: {path.name} is damaged ({problems[0]})")
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, SCHEMA_VERSION):
                raise ConfigError(
                    f"data directory {path.parent} has schema version {version}, expected {SCHEMA_VERSION}"
                )
            db.executescript(_SCHEMA)
            if _tables(db) != _expected_tables():  # a damaged table definition passes quick_check
                raise ConfigError(f"data directory {path.parent}: {path.name} has damaged table definitions")
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            if self._max_bytes is not None:
                page_size = db.execute("PRAGMA page_size").fetchone()[0]
                db.execute(f"PRAGMA max_page_count={max(1, self._max_bytes // page_size)}")
        except (sqlite3.Error, UnicodeDecodeError) as error:  # the latter: a damaged name in quick_check's report
            db.close()
            raise ConfigError(
                f"data directory {path.parent}: {path.name} is not a usable SQLite database ({error})"
            ) from None
        except BaseException:
            db.close()
            raise
        return db

    def _release_lock_file(self) -> None:
        if self._lock_file is not None:
            fcntl.flock(self._lock_file, fcntl.LOCK_UN)
            self._lock_file.close()
            self._lock_file = None

    def close(self) -> None:
        """Checkpoint the WAL into the database file and release the data directory.

        A checkpoint that fails (a full disk) is only logged: the WAL still holds every commit and the next
        open replays it, so stopping must not fail over it.
        """
        with self._lock:
            if self._lock_file is None:
                return
            try:
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as error:
                log.warning("could not checkpoint the WAL of %s (%s); the next start replays it", self._data_dir, error)
            finally:
                self._db.close()
                self._release_lock_file()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """One write transaction (call with the lock held); a full disk becomes :class:`DiskFull`.

        On SQLITE_FULL SQLite rolls the transaction back by itself, so ROLLBACK is only sent while one is still
        open: an unconditional one would fail ("no transaction is active") and hide the real error.
        """
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
        except sqlite3.Error as error:
            if error.sqlite_errorcode != sqlite3.SQLITE_FULL:
                raise
            log.warning("refused a write: disk full under data directory %s (%s)", self._data_dir, error)
            cap = f", or the database reached its cap of {self._max_bytes} bytes" if self._max_bytes else ""
            raise DiskFull(
                f"disk full: no room to write to the stub's data directory {self._data_dir} (the disk is full{cap}); "
                "nothing of this request was stored"
            ) from None

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
        with self._lock, self._transaction():
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

    def offset_groups(self) -> set[tuple[str, str]]:
        """(broker, group) of every group with a committed offset."""
        with self._lock:
            return set(self._db.execute("SELECT DISTINCT broker, grp FROM consumer_offset").fetchall())

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
        with self._lock, self._transaction():
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
            with self._transaction():
                self._db.executemany("INSERT INTO message VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
            self._max_offsets[(broker, topic, queue_id)] = next_offset
        return written

    def read(
        self, broker: str, topic: str, queue_id: int, offset: int, max_count: int, max_bytes: int
    ) -> list[StoredMessage]:
        """Up to ``max_count`` messages from ``offset`` on, stopping once ``max_bytes`` of bodies are reached.

        Rows are read one at a time so that only the bodies returned are ever in memory (``max_count`` bodies of
        4 MiB each would be gigabytes).
        """
        messages: list[StoredMessage] = []
        total = 0
        with self._lock:
            rows = self._db.execute(
                "SELECT queue_offset, msg_id, tags, keys, properties, born_ms, store_ms, body FROM message "
                "WHERE broker = ? AND topic = ? AND queue_id = ? AND queue_offset >= ? "
                "ORDER BY queue_offset LIMIT ?",
                (broker, topic, queue_id, offset, max_count),
            )
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
            rows.close()
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
