"""A namespace in one SQLite file, WAL mode; each commit of the engine is one transaction.

A full disk must not wedge the namespace: next to the database the store keeps a reserve file
(`<file>.reserve`, RESERVE_BYTES of zeros). When the filesystem is nearly full (less free than the reserve)
or a commit fails for lack of space, the store gives the reserve back to the filesystem and says it has no
room: the engine then refuses sends (they add data) but receives, completes and deletes, which write little
and free space, still commit into the space the reserve left. Once the reserve can be written again,
there is room and sends are accepted again.
"""

from __future__ import annotations

import math
import os
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

from local_broker.engine.errors import StoreError, StoreFullError, StoreWriteError
from local_broker.engine.message import Message, MessageState
from local_broker.store.base import ChangeSet, StoredState
from local_broker.store.codec import decode_properties, dumps, encode_properties, loads

SCHEMA_VERSION = 2
RESERVE_BYTES = 8 * 1024 * 1024
ROOM_CHECK_SECONDS = 0.5  # how stale the free-space reading may be
_SQLITE_FULL = 13

_SCHEMA = """
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE namespace (id INTEGER PRIMARY KEY CHECK (id = 1), config TEXT NOT NULL);
CREATE TABLE entities (key TEXT PRIMARY KEY, kind TEXT NOT NULL, record TEXT NOT NULL);
CREATE TABLE counters (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE messages (
    uid INTEGER PRIMARY KEY,
    owner TEXT NOT NULL,
    sub INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    delivery_count INTEGER NOT NULL,
    state INTEGER NOT NULL,
    locked_until REAL,
    lock_token BLOB,
    data TEXT NOT NULL,
    body BLOB NOT NULL
);
CREATE INDEX messages_owner ON messages (owner, sub, seq);
-- Lock, delivery count and state changes of stored messages: small rows, so a receive does not rewrite
-- the (large) message row. A row here overrides the same columns of `messages`.
CREATE TABLE message_states (
    uid INTEGER PRIMARY KEY,
    delivery_count INTEGER NOT NULL,
    state INTEGER NOT NULL,
    locked_until REAL,
    lock_token BLOB
);
CREATE TABLE dedup (owner TEXT NOT NULL, message_id TEXT NOT NULL, at REAL NOT NULL,
                    PRIMARY KEY (owner, message_id));
CREATE TABLE session_states (owner TEXT NOT NULL, session_id TEXT NOT NULL, state BLOB NOT NULL,
                             PRIMARY KEY (owner, session_id));
"""


def _data(m: Message) -> str:
    expires = m.expires_at
    return dumps(
        [
            m.message_id,
            m.correlation_id,
            m.session_id,
            m.reply_to_session_id,
            m.partition_key,
            m.via_partition_key,
            m.subject,
            m.to,
            m.reply_to,
            m.content_type,
            m.time_to_live,
            m.scheduled_enqueue_time,
            m.enqueued_sequence_number,
            m.enqueued_time,
            None if math.isinf(expires) else expires,
            m.dead_letter_source,
            m.partition_id,
            m.hop_count,
            m.size,
            encode_properties(m.application_properties),
            encode_properties(m.annotations),
        ]
    )


def _message(row: tuple[Any, ...]) -> Message:
    uid, seq, delivery_count, state, locked_until, lock_token, data, body = row
    d = loads(data)
    m = Message(
        bytes(body),
        decode_properties(d[19]),
        annotations=decode_properties(d[20]),
        message_id=d[0],
        correlation_id=d[1],
        session_id=d[2],
        reply_to_session_id=d[3],
        partition_key=d[4],
        via_partition_key=d[5],
        subject=d[6],
        to=d[7],
        reply_to=d[8],
        content_type=d[9],
        time_to_live=d[10],
        scheduled_enqueue_time=d[11],
        sequence_number=seq,
        enqueued_sequence_number=d[12],
        enqueued_time=d[13],
        expires_at=math.inf if d[14] is None else d[14],
        delivery_count=delivery_count,
        locked_until=locked_until,
        lock_token=None if lock_token is None else uuid.UUID(bytes=lock_token),
        state=MessageState(state),
        dead_letter_source=d[15],
        partition_id=d[16],
        hop_count=d[17],
        size=d[18],
    )
    m.uid = uid
    m.persisted = True
    return m


def _token(m: Message) -> bytes | None:
    return None if m.lock_token is None else m.lock_token.bytes


class SqliteStore:
    """`synchronous=FULL` (default) survives power loss; `NORMAL` survives a process kill, faster."""

    journaled = True

    def __init__(self, path: str | Path, synchronous: str = "FULL",
                 reserve_bytes: int = RESERVE_BYTES) -> None:
        self.path = str(path)
        self.reserve_path = Path(self.path + ".reserve")
        self.reserve_bytes = reserve_bytes
        self._room = True
        self._room_checked_at = 0.0
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={synchronous}")
        self._db.execute("PRAGMA foreign_keys=OFF")
        self._check_schema()
        if not self._claim_reserve():
            self._out_of_room()

    def _check_schema(self) -> None:
        has_table = self._db.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='schema_version'"
        ).fetchone()
        if not has_table:
            others = self._db.execute("SELECT count(*) FROM sqlite_master WHERE type='table'").fetchone()[0]
            if others:
                raise StoreError(f"{self.path} is not an sbfed namespace store (no schema_version table).")
            self._db.executescript("BEGIN;" + _SCHEMA + "COMMIT;")
            self._db.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION,))
            return
        row = self._db.execute("SELECT version FROM schema_version").fetchone()
        if row is None or row[0] != SCHEMA_VERSION:
            found = None if row is None else row[0]
            raise StoreError(
                f"{self.path} was written with store schema version {found}; this broker reads version "
                f"{SCHEMA_VERSION}. Use the broker version that wrote it, or start with a new data file."
            )

    def load(self) -> StoredState | None:
        db = self._db
        row = db.execute("SELECT config FROM namespace").fetchone()
        if row is None:
            return None
        entities = [
            (k, kind, loads(rec)) for k, kind, rec in db.execute("SELECT key, kind, record FROM entities")
        ]
        counters = dict(db.execute("SELECT key, value FROM counters"))
        messages = [
            (owner, sub, _message(rest))
            for owner, sub, *rest in db.execute(
                "SELECT m.owner, m.sub, m.uid, m.seq, coalesce(s.delivery_count, m.delivery_count), "
                "coalesce(s.state, m.state), "
                "CASE WHEN s.uid IS NULL THEN m.locked_until ELSE s.locked_until END, "
                "CASE WHEN s.uid IS NULL THEN m.lock_token ELSE s.lock_token END, m.data, m.body "
                "FROM messages m LEFT JOIN message_states s ON s.uid = m.uid "
                "ORDER BY m.owner, m.sub, m.seq, m.uid"
            )
        ]
        dedup = list(db.execute("SELECT owner, message_id, at FROM dedup ORDER BY at"))
        sessions = [
            (o, s, bytes(b)) for o, s, b in db.execute("SELECT owner, session_id, state FROM session_states")
        ]
        return StoredState(loads(row[0]), entities, counters, messages, dedup, sessions)

    def write(self, changes: ChangeSet) -> None:
        db = self._db
        db.execute("BEGIN")
        try:
            if changes.config is not None:
                db.execute("INSERT OR REPLACE INTO namespace VALUES (1, ?)", (dumps(changes.config),))
            for key in changes.entities_deleted:
                db.execute("DELETE FROM entities WHERE key = ?", (key,))
                db.execute(
                    "DELETE FROM message_states WHERE uid IN (SELECT uid FROM messages WHERE owner = ?)",
                    (key,),
                )
                db.execute("DELETE FROM messages WHERE owner = ?", (key,))
                db.execute("DELETE FROM counters WHERE key = ? OR key GLOB ?", (key, key + "#*"))
                db.execute("DELETE FROM dedup WHERE owner = ?", (key,))
                db.execute("DELETE FROM session_states WHERE owner = ?", (key,))
            if changes.entities_put:
                db.executemany(
                    "INSERT OR REPLACE INTO entities VALUES (?, ?, ?)",
                    [(k, kind, dumps(rec)) for k, (kind, rec) in changes.entities_put.items()],
                )
            if changes.counters:
                db.executemany("INSERT OR REPLACE INTO counters VALUES (?, ?)", changes.counters.items())
            if changes.messages_put:
                db.executemany(
                    "INSERT OR REPLACE INTO messages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (
                            m.uid,
                            owner,
                            sub,
                            m.sequence_number,
                            m.delivery_count,
                            m.state,
                            m.locked_until,
                            _token(m),
                            _data(m),
                            m.body,
                        )
                        for owner, sub, m in changes.messages_put
                    ],
                )
                rewritten = [(m.uid,) for _, _, m in changes.messages_put if m.persisted]
                if rewritten:  # a full row carries the current state: drop older overrides
                    db.executemany("DELETE FROM message_states WHERE uid = ?", rewritten)
            if changes.messages_state:
                db.executemany(
                    "INSERT OR REPLACE INTO message_states VALUES (?, ?, ?, ?, ?)",
                    [
                        (m.uid, m.delivery_count, m.state, m.locked_until, _token(m))
                        for m in changes.messages_state
                    ],
                )
            if changes.messages_deleted:
                gone = [(u,) for u in changes.messages_deleted]
                db.executemany("DELETE FROM messages WHERE uid = ?", gone)
                db.executemany("DELETE FROM message_states WHERE uid = ?", gone)
            if changes.dedup_put:
                db.executemany(
                    "INSERT OR REPLACE INTO dedup VALUES (?, ?, ?)",
                    [(o, i, at) for (o, i), at in changes.dedup_put.items()],
                )
            if changes.dedup_prune:
                db.executemany("DELETE FROM dedup WHERE owner = ? AND at <= ?", changes.dedup_prune.items())
            for (owner, sid), state in changes.session_states.items():
                if state is None:
                    db.execute("DELETE FROM session_states WHERE owner = ? AND session_id = ?", (owner, sid))
                else:
                    db.execute("INSERT OR REPLACE INTO session_states VALUES (?, ?, ?)", (owner, sid, state))
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            self._roll_back()
            raise self._failure(exc) from exc
        except BaseException:
            self._roll_back()
            raise

    def _roll_back(self) -> None:
        if self._db.in_transaction:  # SQLite rolls back by itself after some errors (e.g. a full disk)
            self._db.execute("ROLLBACK")

    def _failure(self, exc: sqlite3.Error) -> StoreFullError | StoreWriteError:
        if getattr(exc, "sqlite_errorcode", None) == _SQLITE_FULL or self._free_bytes() < self.reserve_bytes:
            self._out_of_room()
            return StoreFullError(f"The namespace's storage is full: {exc}. Messages can be received, "
                                  "completed and deleted; sends are refused until there is space again.")
        return StoreWriteError(f"The namespace's store could not write this operation: {exc}. Retry.")

    # --- room on disk -----------------------------------------------------------------------------

    def has_room(self) -> bool:
        """Whether sends may add data (see the module docstring); checked at most every 0.5 s."""
        now = time.monotonic()
        if now - self._room_checked_at < ROOM_CHECK_SECONDS:
            return self._room
        self._room_checked_at = now
        if self._room:
            if self._free_bytes() < self.reserve_bytes or not self._claim_reserve():
                self._out_of_room()
        elif self._free_bytes() >= 2 * self.reserve_bytes and self._claim_reserve():
            self._room = True  # the reserve is back, and as much again is free
        return self._room

    def _out_of_room(self) -> None:
        self._room = False
        self._room_checked_at = time.monotonic()
        self.reserve_path.unlink(missing_ok=True)

    def _claim_reserve(self) -> bool:
        """Write the reserve file (if missing); False when the filesystem has no space for it."""
        try:
            if self.reserve_path.exists() and self.reserve_path.stat().st_size >= self.reserve_bytes:
                return True
            with open(self.reserve_path, "wb") as handle:
                chunk = bytes(1024 * 1024)
                for _ in range(0, self.reserve_bytes, len(chunk)):
                    handle.write(chunk)
                handle.flush()
                os.fsync(handle.fileno())
            return True
        except OSError:
            self.reserve_path.unlink(missing_ok=True)
            return False

    def _free_bytes(self) -> int:
        stats = os.statvfs(Path(self.path).parent)
        return stats.f_bavail * stats.f_frsize

    def close(self) -> None:
        self._db.close()
