"""A namespace in one SQLite file, WAL mode; each commit of the engine is one transaction, except
commits that only lock, unlock or settle messages.

Those are the commits of a receiver fed one message per turn while it settles one at a time and waits for
the answer (the SDKs do, with prefetch): a SQLite transaction that writes one message's lock or deletes one
message rewrites several pages of the write-ahead log. Instead, the store appends to two logs next to the
database, one write each:
- the settled log (`<file>.settled`, 16 bytes per deleted message id): the ids are deleted from the
  database once the log holds FOLD_SETTLED of them (a range delete), when the store is opened, copied or
  closed; until then `page` skips them;
- the lock log (`<file>.locks`, 50 bytes per message: its delivery count, state, lock and lock token, as a
  `message_states` row holds them): every transaction writes what it holds into `message_states` first (a
  row the transaction writes is newer), as does opening the store; at most FOLD_LOCKS records are appended
  between two transactions. Its records carry an epoch: the transaction that writes them stores their
  epoch as folded, so records a killed broker left in the log after that commit are not applied again.
Opening (and loading) the store applies what the logs hold first. Records carry a check (a torn or stray
one applies nothing); a log a write was cut short in is not appended to until a transaction empties it.
The logs are written before the operation is answered, as the database would be: they survive a killed
broker, locks and delivery counts included. Like the database's commits of receives and settlements, they
are not synced to disk (losing one to power loss makes a message come back, or come back with the delivery
count it had, which at-least-once delivery allows).

A full disk must not wedge the namespace: next to the database the store keeps a reserve file
(`<file>.reserve`, RESERVE_BYTES of zeros). When the filesystem is nearly full (less free than the reserve)
or a commit fails for lack of space, the store gives the reserve back to the filesystem and says it has no
room: the engine then refuses sends (they add data) but receives, completes and deletes, which write little
and free space, still commit into the space the reserve left. Once the reserve can be written again,
there is room and sends are accepted again.
"""

from __future__ import annotations

import hashlib
import json
import json.scanner
import math
import os
import sqlite3
import struct
import time
import uuid
import weakref
import zlib
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Any

from local_broker.engine.errors import StoreError, StoreFullError, StoreReadError, StoreWriteError
from local_broker.engine.message import Message, MessageContent, MessageState
from local_broker.store.base import ChangeSet, StoredState
from local_broker.store.codec import decode_properties, dumps, encode_properties, loads

SCHEMA_VERSION = 7
RESERVE_BYTES = 8 * 1024 * 1024
ROOM_CHECK_SECONDS = 0.5  # how stale the free-space reading may be
FOLD_SETTLED = 4096  # settled message ids the log holds before they are deleted from the database
FOLD_LOCKS = 4096  # lock records the lock log holds before they are written to the database
_SETTLED = struct.Struct("<qq")  # a message id and its complement: a torn or stray record checks out as none
# A lock record: message id, epoch, delivery count, state, which of the next two it has (1: locked until,
# 2: lock token), locked until, lock token; then the CRC-32 of those bytes (a torn or stray record: none).
_LOCK = struct.Struct("<qqiBBd16s")
_CHECK = struct.Struct("<I")
_LOCK_SIZE = _LOCK.size + _CHECK.size
_NO_TOKEN = bytes(16)
_SQLITE_FULL = 13

_SCHEMA = """
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE namespace (id INTEGER PRIMARY KEY CHECK (id = 1), config TEXT NOT NULL);
CREATE TABLE entities (key TEXT PRIMARY KEY, kind TEXT NOT NULL, record TEXT NOT NULL);
CREATE TABLE counters (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE dedup (owner TEXT NOT NULL, message_id TEXT NOT NULL, at REAL NOT NULL,
                    PRIMARY KEY (owner, message_id));
CREATE TABLE session_states (owner TEXT NOT NULL, session_id TEXT NOT NULL, state BLOB NOT NULL,
                             PRIMARY KEY (owner, session_id));
-- Lock, delivery count and state changes of stored messages: small rows, so a receive does not rewrite
-- the message row. A row here overrides the same columns of `messages`.
CREATE TABLE message_states (
    uid INTEGER PRIMARY KEY,
    delivery_count INTEGER NOT NULL,
    state INTEGER NOT NULL,
    locked_until REAL,
    lock_token BLOB
);
"""
# The lock log's records of epochs up to `locks` are in the database (see SqliteStore).
_FOLDED_TABLE = "CREATE TABLE folded (id INTEGER PRIMARY KEY CHECK (id = 1), locks INTEGER NOT NULL)"
# The message tables of this schema version, one statement each (a migration runs them in its transaction).
_PAYLOADS_TABLE = "CREATE TABLE payloads (id INTEGER PRIMARY KEY, data TEXT NOT NULL, body BLOB NOT NULL)"
_MESSAGE_TABLES = (
    # One row per message in a sub-queue. `record` (JSON) holds its own state: [delivery count, state,
    # locked until, lock token (hex), enqueued time, expires at (null: never), size, application properties
    # (null: its content's), content]; its times are integer microseconds since schema 7 (floats before,
    # still read: writing a float's shortest repr cost more than the rest of the record). The content is in
    # the row itself (`content` as a payload's `data`, `body`) when no other message shares it (a queue's
    # messages: one row per send); else `payload` references the content stored once for all the copies of
    # a topic message (`content` null).
    # Few columns: each one bound costs the hot path more than its part of one JSON text. `size` (the
    # record's) and `plain` (1: the record says active and unlocked, so a paged sub-queue may leave the
    # message on disk) are read by the index alone: a restart counts and sizes a backlog without reading
    # its rows, and a sub-queue reads the next ones in order (see load and page).
    """CREATE TABLE messages (
        uid INTEGER PRIMARY KEY,
        owner TEXT NOT NULL,
        sub INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        record TEXT NOT NULL,
        payload INTEGER,
        body BLOB,
        size INTEGER NOT NULL DEFAULT 0,
        plain INTEGER NOT NULL DEFAULT 0
    )""",
    "CREATE INDEX messages_owner ON messages (owner, sub, plain, seq, size)",
    # A payload's references are counted through this index: the payload goes with its last message row,
    # however that row goes (settled, expired, purged, its entity deleted) or when it takes another payload.
    # Rows holding their own content are not in it, and their deletes skip the count.
    "CREATE INDEX messages_payload ON messages (payload) WHERE payload IS NOT NULL",
    """CREATE TRIGGER payload_released AFTER DELETE ON messages
       WHEN OLD.payload IS NOT NULL AND NOT EXISTS (SELECT 1 FROM messages WHERE payload = OLD.payload)
       BEGIN DELETE FROM payloads WHERE id = OLD.payload; END""",
    """CREATE TRIGGER payload_replaced AFTER UPDATE OF payload ON messages
       WHEN OLD.payload IS NOT NULL AND OLD.payload IS NOT NEW.payload
            AND NOT EXISTS (SELECT 1 FROM messages WHERE payload = OLD.payload)
       BEGIN DELETE FROM payloads WHERE id = OLD.payload; END""",
)
# New rows name the columns they bind: a row holding its content leaves `payload` to its default (NULL), a
# copy `body`. sqlite3 binds an exact int, float, str or bytearray directly and adapts anything else (a None,
# a bytes, a bool: ~3,000 instructions each), so the body goes as a bytearray and `plain` as an int.
_INSERT_OWN = (
    "INSERT INTO messages (uid, owner, sub, seq, record, body, size, plain) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_COPY = _INSERT_OWN.replace("body", "payload")
_PUT_MESSAGE = (
    "INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (uid) DO UPDATE SET "
    + ", ".join(f"{name} = excluded.{name}"
                for name in ("owner", "sub", "seq", "record", "payload", "body", "size", "plain"))
)
# What migrations insert (schema-4 columns); `_index_columns` then fills size and plain from the records.
_INSERT_OLD_ROW = (
    "INSERT INTO messages (uid, owner, sub, seq, record, payload, body) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
# Columns a loaded message is built from (see _loaded).
_ROW = (
    "m.uid, m.seq, m.record, m.payload, m.body, s.uid, s.delivery_count, s.state, s.locked_until, "
    "s.lock_token"
)
_FROM = "FROM messages m LEFT JOIN message_states s ON s.uid = m.uid"


# A content's fields (body, annotations and properties apart) in the order rows before schema 7 hold them
# and _set_data sets them.
_DATA_NAMES = (
    "message_id", "correlation_id", "session_id", "reply_to_session_id", "partition_key", "via_partition_key",
    "subject", "to", "reply_to", "content_type", "time_to_live", "scheduled_enqueue_time",
    "enqueued_sequence_number", "dead_letter_source", "partition_id", "hop_count",
)


def _generated(name: str, source: str) -> Any:
    """The function `name` defined by `source`: a setter generated as one statement over the attributes (a
    setattr loop costs several times as much, once per message read back)."""
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<{name}>", "exec"), namespace)
    return namespace[name]


# `set_data(c, d)`: the fields of `_DATA_NAMES` from the list `d`.
_set_data = _generated(
    "set_data", f"def set_data(c, d):\n    {', '.join(f'c.{name}' for name in _DATA_NAMES)}, = d\n")


# A content as stored (a payload's `data`, a row's record[8]), since schema 7: the fields every message has
# (_ALWAYS: its message id, stamped by the broker, its enqueued sequence number and hop count, and its
# application properties), then, only if the content has any of them, a list of all the others (_OTHERS, then
# annotations and AMQP properties). A send's content is mostly absent fields, and the JSON encoder's cost
# is per value, a null's as much as a string's. Rows written before hold all the fields in _DATA_NAMES'
# order, then annotations, application properties and AMQP properties (18 fields before those).
_ALWAYS = ("message_id", "enqueued_sequence_number", "hop_count")
_OTHERS = tuple(name for name in _DATA_NAMES if name not in _ALWAYS)
_ALWAYS_FIELDS = attrgetter(*_ALWAYS)
_OTHER_FIELDS = attrgetter(*_OTHERS, "annotations", "amqp_properties")
_NO_OTHERS = (None,) * (len(_OTHERS) + 2)
# `set_always(c, d)`: a content stored with only _ALWAYS's fields (most sends), `d` as stored: those set, the
# others None; returns its stored application properties.
_set_always = _generated("set_always", (
    f"def set_always(c, d):\n    {', '.join(f'c.{name}' for name in _ALWAYS)}, properties = d\n"
    f"    {' = '.join(f'c.{name}' for name in (*_OTHERS, 'annotations', 'amqp_properties'))} = None\n"
    "    return properties\n"))
# A stored content's fields from [*_ALWAYS, properties, *_OTHERS, annotations, AMQP properties] to the
# older rows' order.
_OLD_ORDER = itemgetter(*[(*_ALWAYS, "properties", *_OTHERS, "annotations", "amqp_properties").index(name)
                          for name in (*_DATA_NAMES, "annotations", "properties", "amqp_properties")])


def _content(c: MessageContent, properties: dict[str, Any]) -> str:
    """A stored content's JSON (see above): its fields but the body, with `properties` as its application
    properties. Written by hand around the C encoder's parts: most sends have only _ALWAYS's fields, and
    the generic encoder's walk of the list cost ~3 times as much as the text itself."""
    mid, seq, hop = _ALWAYS_FIELDS(c)
    others = _OTHER_FIELDS(c)
    text = f"[{'null' if mid is None else _string(mid)},{seq},{hop},{_properties(properties)}"
    if others == _NO_OTHERS:
        return text + "]"
    *fields, annotations, amqp_properties = others
    return f"{text},{dumps([*fields, encode_properties(annotations), encode_properties(amqp_properties)])}]"


def _properties(properties: dict[str, Any] | None) -> str:
    """A property dict's JSON, as stored."""
    if not properties:
        return "null" if properties is None else "{}"
    return dumps(encode_properties(properties))


def _fields(d: list[Any]) -> Any:
    """A stored content's fields in the older rows' order (see above), absent ones None."""
    if len(d) == 4:
        return _OLD_ORDER([*d, *_NO_OTHERS])
    if len(d) == 5:
        return _OLD_ORDER([*d[:4], *d[4]])
    return d if len(d) == 19 else [*d, None]  # written before schema 7 (18: before AMQP properties)


def _record(delivery_count: int, state: int, locked_until: float | None, lock_token: bytes | None,
            enqueued_time: float, expires_at: float | None, size: int, properties: Any,
            content: str | None) -> str:
    """A message row's `record` (see the table): its times in integer microseconds; `properties` a JSON
    value, `content` a JSON text (see _content). Formatted directly: what json's encoder gives for the list,
    at a third of its cost."""
    token = "null" if lock_token is None else f'"{lock_token.hex()}"'
    locked = "null" if locked_until is None else round(locked_until * 1e6)
    expires = "null" if expires_at is None else round(expires_at * 1e6)
    stored = "null" if properties is None else dumps(properties)
    return (f"[{delivery_count},{int(state)},{locked},{token},{round(enqueued_time * 1e6)},{expires},{size},"
            f"{stored},{'null' if content is None else content}]")  # int(state): a MessageState


def _seconds(time: int | float | None) -> float | None:
    """A record's time: integer microseconds (schema 7), or seconds as a float (rows written before)."""
    return time / 1e6 if type(time) is int else time


# A stored record's JSON read by the C scanner itself (json.loads costs twice as much around it); the
# store wrote it, so it is one complete value.
_scan = json.scanner.c_make_scanner(json.JSONDecoder())  # type: ignore[attr-defined]
_STATES = tuple(MessageState)
_string = json.encoder.encode_basestring_ascii  # type: ignore[attr-defined]
_new = object.__new__


def _record_of(text: str) -> Any:
    return _scan(text, 0)[0]


def _token(m: Message) -> bytes | None:
    return None if m.lock_token is None else m.lock_token.bytes


def _lock_of(m: Message) -> tuple[int, int, float | None, bytes | None]:
    """A message's message_states columns after its id: delivery count, state, locked until, lock token."""
    return m.delivery_count, int(m.state), m.locked_until, _token(m)


def _stored_content(payload: int, d: list[Any], body: bytes) -> MessageContent:
    """A stored content (a payload's `data` decoded, or a row's own), made without Message's constructor:
    a backlog's messages are read back one by one."""
    c = _new(MessageContent)
    c.shared = False
    c.payload = payload
    c.body = body
    if len(d) == 4:  # only the fields every message has: no list in the older rows' order to build
        properties = decode_properties(_set_always(c, d))
    else:
        f = _fields(d)
        properties = decode_properties(f[17])
        c.annotations = decode_properties(f[16])
        c.amqp_properties = decode_properties(f[18])
        _set_data(c, f[:16])
    c.payload_properties = {} if properties is None else properties
    return c


def _template(payload: int, d: list[Any], body: bytes) -> Message:
    """A message holding a content (a payload's `data` decoded), for the copies that reference it."""
    m = Message()
    c = m.content = _stored_content(payload, d, body)
    m.application_properties = c.payload_properties
    return m


def _own(uid: int, seq: int, record: list[Any], state: list[Any] | None, body: bytes) -> Message:
    """A row holding its own content, made into its message at once (no template to copy)."""
    m = _new(Message)
    m.content = _stored_content(0, record[8], body)
    m.entity = None
    return _stamped(m, uid, seq, record, state)


def _message(template: Message, uid: int, seq: int, record: list[Any],
             state: list[Any] | None) -> Message:
    """One stored copy: its own state (`record`, with `state` from message_states over its first four
    fields) over the content it shares with the payload's other copies."""
    return _stamped(template.copy(), uid, seq, record, state)


def _stamped(m: Message, uid: int, seq: int, record: list[Any], state: list[Any] | None) -> Message:
    """`m` with the state of a stored row (see _message)."""
    delivery_count, message_state, locked_until, token, enqueued_time, expires, size, properties, _ = record
    if state is not None:
        delivery_count, message_state, locked_until, lock_token = state
    else:
        locked_until = _seconds(locked_until)
        lock_token = None if token is None else bytes.fromhex(token)
    m.uid = uid
    m.sequence_number = seq
    m.delivery_count = delivery_count
    m.state = _STATES[message_state]
    m.locked_until = locked_until
    m.lock_token = None if lock_token is None else uuid.UUID(bytes=lock_token)
    m.enqueued_time = _seconds(enqueued_time)
    m.expires_at = math.inf if expires is None else _seconds(expires)
    m.size = size
    m.application_properties = (
        m.content.payload_properties if properties is None else decode_properties(properties)
    )
    m.persisted = True
    return m


def _migrate_from_2(db: sqlite3.Connection) -> None:
    """Schema 2 kept a full row (content and body) per message; since schema 3 each distinct content is
    kept once (the copies of one topic message share it) with a reference per message. In one transaction."""
    db.execute("BEGIN")
    db.execute("ALTER TABLE messages RENAME TO messages_v2")
    db.execute("DROP INDEX messages_owner")
    for statement in (_PAYLOADS_TABLE, *_MESSAGE_TABLES):
        db.execute(statement)
    payloads: dict[tuple[str, bytes], int] = {}
    rows = db.execute(
        "SELECT uid, owner, sub, seq, delivery_count, state, locked_until, lock_token, data, body "
        "FROM messages_v2 ORDER BY uid"
    )
    for uid, owner, sub, seq, delivery_count, state, locked_until, lock_token, data, body in rows:
        d = loads(data)  # schema 2's order: see _content for what moved where
        content = dumps([*d[0:13], d[15], d[16], d[17], d[20], d[19]])
        key = (content, hashlib.sha256(body).digest())
        payload = payloads.get(key)
        if payload is None:
            payload = payloads[key] = uid
            db.execute("INSERT INTO payloads VALUES (?, ?, ?)", (payload, content, body))
        record = _record(delivery_count, state, locked_until, lock_token, d[13], d[14], d[18], None, None)
        db.execute(_INSERT_OLD_ROW, (uid, owner, sub, seq, record, payload, None))
    db.execute("DROP TABLE messages_v2")
    _index_columns(db)
    db.execute("UPDATE schema_version SET version = 5")
    db.execute("COMMIT")


def _migrate_from_3(db: sqlite3.Connection) -> None:
    """Schema 3 referenced a payload row from every message row and kept a message's state in columns;
    schema 4 keeps a content no other message shares in the message's own row (rows written from now on:
    the existing ones keep their payloads) and its state in one JSON record. In one transaction."""
    db.execute("BEGIN")
    for old in ("TRIGGER payload_released", "TRIGGER payload_replaced", "INDEX messages_owner",
                "INDEX messages_payload"):
        db.execute(f"DROP {old}")
    db.execute("ALTER TABLE messages RENAME TO messages_v3")
    for statement in _MESSAGE_TABLES:
        db.execute(statement)
    rows = db.execute(
        "SELECT uid, owner, sub, seq, delivery_count, state, locked_until, lock_token, enqueued_time, "
        "expires_at, size, properties, payload FROM messages_v3"
    )
    for uid, owner, sub, seq, *state, properties, payload in rows:
        record = _record(*state, None if properties is None else loads(properties), None)
        db.execute(_INSERT_OLD_ROW, (uid, owner, sub, seq, record, payload, None))
    db.execute("DROP TABLE messages_v3")
    _index_columns(db)
    db.execute("UPDATE schema_version SET version = 5")
    db.execute("COMMIT")


def _index_columns(db: sqlite3.Connection) -> None:
    """Fill `size` and `plain` from each row's record (migrations, inside their transaction)."""
    db.execute(
        "UPDATE messages SET size = json_extract(record, '$[6]'), "
        "plain = (json_extract(record, '$[1]') = 0 AND json_extract(record, '$[3]') IS NULL)"
    )


def _migrate_from_4(db: sqlite3.Connection) -> None:
    """Schema 5 adds a message row's size and whether it is plain (active, unlocked) as columns in the
    owner index, so a restart need not read the rows of a backlog. In one transaction."""
    db.execute("BEGIN")
    db.execute("DROP INDEX messages_owner")
    db.execute("ALTER TABLE messages ADD COLUMN size INTEGER NOT NULL DEFAULT 0")
    db.execute("ALTER TABLE messages ADD COLUMN plain INTEGER NOT NULL DEFAULT 0")
    _index_columns(db)
    db.execute(_MESSAGE_TABLES[1])
    db.execute("UPDATE schema_version SET version = 5")
    db.execute("COMMIT")


def _migrate_from_5(db: sqlite3.Connection) -> None:
    """Schema 6 keeps the lock log's folded epoch (see SqliteStore): a broker that does not read the lock
    log must not open a store that may have one. In one transaction."""
    db.execute("BEGIN")
    db.execute(_FOLDED_TABLE)
    db.execute("INSERT INTO folded VALUES (1, 0)")
    db.execute("UPDATE schema_version SET version = 6")
    db.execute("COMMIT")


def _migrate_from_6(db: sqlite3.Connection) -> None:
    """Schema 7 writes a record's times as integer microseconds; the rows written before keep their float
    seconds (read as such: see _seconds), so only the version moves, and a broker that reads floats alone
    refuses the file instead of misreading its new rows."""
    db.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION,))


# Each takes a store of its version to the next one it names (schemas 2-4 straight to 5).
_MIGRATIONS = {
    2: _migrate_from_2, 3: _migrate_from_3, 4: _migrate_from_4, 5: _migrate_from_5, 6: _migrate_from_6,
}


class SqliteStore:
    """`synchronous=FULL` (default) survives power loss; `NORMAL` survives a process kill, faster."""

    journaled = True
    pages = True

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
        # Debian's SQLite is built with SECURE_DELETE: every deleted row is overwritten with zeros and every
        # page it frees is written out zeroed, which made deleting settled messages (a fold of the settled
        # log) a third dearer. FAST still zeroes what lies in the pages a delete writes anyway.
        self._db.execute("PRAGMA secure_delete=FAST")
        self._check_schema()
        # Payload ids are never reused while the store is open (a content in memory keeps its id).
        top = self._db.execute("SELECT max(id) FROM payloads").fetchone()[0]
        self._next_payload: int = (top or 0) + 1
        # Stored contents in memory by payload id: copies read at different times share theirs again.
        self._contents: weakref.WeakValueDictionary[int, MessageContent] = weakref.WeakValueDictionary()
        if not self._claim_reserve():
            self._out_of_room()
        self.settled_path = Path(self.path + ".settled")
        self._settled = _read_settled(self.settled_path)  # ids in the log, not yet deleted from the database
        self._settled_fd = os.open(self.settled_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._settled_torn = False  # a write of it was cut short: no more records until it is emptied
        self.locks_path = Path(self.path + ".locks")
        row = self._db.execute("SELECT locks FROM folded").fetchone()
        if row is None:  # written with the table: a damaged file (`opening` says so in one line)
            raise ValueError("the lock log's folded epoch (table `folded`) has no row")
        folded = row[0]
        self._epoch = folded + 1  # the epoch of the records written until the next fold
        locks, self._lock_records = read_lock_log(self.locks_path, folded)
        # The locks the log holds that the database does not (of messages not settled since), by message id.
        self._locks = {uid: lock for uid, lock in locks.items() if uid not in self._settled}
        self._locks_fd = os.open(self.locks_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._locks_torn = self._lock_records > 0  # its last record may be torn: appended to once emptied

    def _check_schema(self) -> None:
        has_table = self._db.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='schema_version'"
        ).fetchone()
        if not has_table:
            others = self._db.execute("SELECT count(*) FROM sqlite_master WHERE type='table'").fetchone()[0]
            if others:
                raise StoreError(f"{self.path} is not an sbfed namespace store (no schema_version table).")
            tables = ";\n".join((_PAYLOADS_TABLE, *_MESSAGE_TABLES, _FOLDED_TABLE))
            self._db.executescript("BEGIN;" + _SCHEMA + tables + ";INSERT INTO folded VALUES (1, 0);COMMIT;")
            self._db.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION,))
            return
        row = self._db.execute("SELECT version FROM schema_version").fetchone()
        while row is not None and row[0] in _MIGRATIONS:
            try:
                _MIGRATIONS[row[0]](self._db)
            except BaseException:
                self._roll_back()
                raise
            row = self._db.execute("SELECT version FROM schema_version").fetchone()
        if row is None or row[0] != SCHEMA_VERSION:
            found = None if row is None else row[0]
            raise StoreError(
                f"{self.path} was written with store schema version {found}; this broker reads version "
                f"{SCHEMA_VERSION}. Use the broker version that wrote it, or start with a new data file."
            )

    def load(self) -> StoredState | None:
        """The namespace's state, without the plain messages of main sub-queues (the bulk of a backlog):
        those are counted and sized per owner (`StoredState.tails`, from the index alone) and read with
        `page` when the engine wants them. Every other message (dead-lettered, scheduled, deferred,
        locked, or changed since it was written) is loaded."""
        self.fold()  # the database alone holds the state: the logs are folded in
        db = self._db
        row = db.execute("SELECT config FROM namespace").fetchone()
        if row is None:
            return None
        entities = [
            (k, kind, loads(rec)) for k, kind, rec in db.execute("SELECT key, kind, record FROM entities")
        ]
        counters = dict(db.execute("SELECT key, value FROM counters"))
        templates: dict[int, Message] = {}
        messages = []
        tails = {}
        for owner, _, _ in entities:
            rows = [
                *db.execute(f"SELECT m.sub, {_ROW} {_FROM} WHERE m.owner = ? AND m.sub > 0", (owner,)),
                *db.execute(f"SELECT m.sub, {_ROW} {_FROM} WHERE m.owner = ? AND m.sub = 0 AND m.plain = 0",
                            (owner,)),
                *db.execute(f"SELECT m.sub, {_ROW} FROM message_states s CROSS JOIN messages m "
                            "ON m.uid = s.uid WHERE m.owner = ? AND m.sub = 0 AND m.plain = 1", (owner,)),
            ]
            rows.sort(key=lambda r: (r[0], r[2], r[1]))  # sub-queue, sequence number, uid
            messages += [(owner, r[0], self._loaded(r[1:], templates)) for r in rows]
            # The plain rows, counted in the index alone, less those a state row overrides (loaded above;
            # CROSS JOIN: from the few state rows, not through every plain row of the index).
            count, size = db.execute(
                "SELECT count(*), total(size) FROM messages WHERE owner = ? AND sub = 0 AND plain = 1",
                (owner,),
            ).fetchone()
            changed, changed_size = db.execute(
                "SELECT count(*), total(m.size) FROM message_states s CROSS JOIN messages m ON m.uid = s.uid "
                "WHERE m.owner = ? AND m.sub = 0 AND m.plain = 1", (owner,)
            ).fetchone()
            if count > changed:
                tails[owner] = (count - changed, int(size - changed_size))
        dedup = list(db.execute("SELECT owner, message_id, at FROM dedup ORDER BY at"))
        sessions = [
            (o, s, bytes(b)) for o, s, b in db.execute("SELECT owner, session_id, state FROM session_states")
        ]
        top_uid = db.execute("SELECT max(uid) FROM messages").fetchone()[0] or 0
        return StoredState(loads(row[0]), entities, counters, messages, dedup, sessions, tails, top_uid)

    def page(
        self, owner: str, sub: int, after: int, limit: int | None, before: float = math.inf
    ) -> list[Message]:
        """The plain messages `load` left on disk of one sub-queue, numbered after `after` and before
        `before`, in order: at most `limit` (None: all), less those settled since (still in the settled
        log). A row with a state of its own (message_states) is in the engine's memory since `load` (the
        engine skips what it holds), so the index alone says which rows to read."""
        settled = self._settled
        rows: list[Any] = []
        want = -1 if limit is None else limit
        try:
            while True:
                got = self._db.execute(
                    "SELECT uid, seq, record, payload, body FROM messages WHERE owner = ? AND sub = ? "
                    "AND plain = 1 AND seq > ? AND seq < ? ORDER BY seq LIMIT ?",
                    (owner, sub, after, before, want),
                ).fetchall()
                rows += [r for r in got if r[0] not in settled] if settled else got
                if limit is None or len(got) < want or len(rows) >= limit:
                    break
                after, want = got[-1][1], limit - len(rows)
        except sqlite3.DatabaseError as exc:  # damage load did not read: this read fails, not the broker
            raise StoreReadError(f"The namespace's store {self.path} cannot be read here ({exc}); "
                                 "`sbfed broker check` says what is wrong.") from exc
        templates: dict[int, Message] = {}
        made = self._made
        return [
            _own(uid, seq, _scan(text, 0)[0], None, body) if payload is None  # most rows: no template
            else made(uid, seq, text, payload, body, None, templates)
            for uid, seq, text, payload, body in rows
        ]

    def _loaded(self, row: Any, templates: dict[int, Message]) -> Message:
        """A message from its row (`_ROW`)."""
        uid, seq, text, payload, body, changed, *state = row
        return self._made(uid, seq, text, payload, body, None if changed is None else state, templates)

    def _made(self, uid: int, seq: int, text: str, payload: int | None, body: bytes | None,
              own_state: list[Any] | None, templates: dict[int, Message]) -> Message:
        """A message from a row's columns (`own_state`: its message_states row's, if any); copies of one
        topic message share the content of `templates`."""
        record = _record_of(text)
        if payload is None:  # the row holds its own content: the message is made around it once
            return _own(uid, seq, record, own_state, body)  # type: ignore[arg-type]
        template = templates.get(payload)
        if template is None:
            data, payload_body = self._db.execute(
                "SELECT data, body FROM payloads WHERE id = ?", (payload,)
            ).fetchone()
            template = templates[payload] = _template(payload, loads(data), payload_body)
            content = self._contents.get(payload)
            if content is None:
                self._contents[payload] = template.content
            else:
                template.content = content
                template.application_properties = content.payload_properties
        return _message(template, uid, seq, record, own_state)

    def write(self, changes: ChangeSet) -> None:
        if ((changes.messages_deleted or changes.messages_state) and changes.only_locks_and_deletes()
                and self._logged(changes.messages_state, changes.messages_deleted)):
            return
        self._transaction(changes, len(self._settled) >= FOLD_SETTLED or self._settled_torn)

    def fold(self) -> None:
        """Write what the logs hold into the database, in one transaction, and empty them."""
        if self._settled or self._settled_torn or self._lock_records or self._locks_torn:
            self._transaction(ChangeSet(), True)

    def _transaction(self, changes: ChangeSet, fold_settled: bool) -> None:
        """`changes` in one transaction, over the lock log's records (every transaction folds them: a row
        it writes is newer than they are), and with `fold_settled` the settled log's ids deleted."""
        deleted = changes.messages_deleted
        fold_locks = bool(self._lock_records or self._locks_torn)
        db = self._db
        db.execute("BEGIN")
        try:
            locks = self._locks if fold_locks else {}
            if changes.messages_state:  # none of a message whose row this change set writes
                locks = {**locks, **{m.uid: _lock_of(m) for m in changes.messages_state}}
            if locks:  # before the rows: a row written replaces its message's older state
                db.executemany("INSERT OR REPLACE INTO message_states VALUES (?, ?, ?, ?, ?)",
                               [(uid, *lock) for uid, lock in locks.items()])
            if fold_locks:
                db.execute("UPDATE folded SET locks = ?", (self._epoch,))
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
                stored = self._put_messages(changes.messages_put)
            if deleted or (fold_settled and self._settled):
                gone = _runs(self._settled.union(deleted) if fold_settled else set(deleted))
                db.executemany("DELETE FROM messages WHERE uid BETWEEN ? AND ?", gone)
                db.executemany("DELETE FROM message_states WHERE uid BETWEEN ? AND ?", gone)
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
        if changes.messages_put:
            for content, (payload, properties) in stored.items():
                content.payload = payload
                content.payload_properties = properties
        if fold_locks:  # in the database now, and the log's records are of an epoch folded: it starts over
            self._locks = {}
            self._lock_records = 0
            self._epoch += 1
            self._locks_torn = not _emptied(self._locks_fd)
        if fold_settled:  # deleted from the database now: the log starts over
            self._settled = set()
            # what it still holds if it cannot be emptied is deleted again at the next open, which is harmless
            self._settled_torn = not _emptied(self._settled_fd)

    def _put_messages(self, puts: list[tuple[str, int, Message]]) -> dict[MessageContent, tuple[int, Any]]:
        """Message rows: a content no other message shares (`shared` is set by `Message.copy`) in the row
        itself, any other in a payload row stored once for all its copies; the contents newly stored as
        payloads, with their payload id and property dict. A message not stored before is a plain insert
        (most rows: new messages); a stored one replaces its row."""
        db = self._db
        stored: dict[MessageContent, tuple[int, Any]] = {}
        kept: dict[int, tuple[MessageContent, Any]] = {}  # payloads stored by an earlier commit
        own_rows, copy_rows, rewritten = [], [], []
        inf = math.inf
        for owner, sub, m in puts:
            c = m.content
            own = m.application_properties
            expires = m.expires_at
            token = m.lock_token
            payload = c.payload
            if not payload and not c.shared:
                own_properties, content, body = None, _content(c, own), c.body  # in the row
            else:
                if payload:
                    properties = c.payload_properties
                    kept[payload] = (c, properties)
                else:
                    new = stored.get(c)
                    if new is None:
                        new = stored[c] = (self._next_payload, own)
                        self._next_payload += 1
                    payload, properties = new
                own_properties = None if own is properties else encode_properties(own)
                content = body = None
            record = _record(m.delivery_count, m.state, m.locked_until,
                             None if token is None else token.bytes, m.enqueued_time,
                             None if expires == inf else expires, m.size, own_properties, content)
            uid, seq, size = m.uid, m.sequence_number, m.size
            plain = 1 if m.state == 0 and token is None else 0
            if m.persisted:
                rewritten.append((uid, owner, sub, seq, record, payload or None, body, size, plain))
            elif body is not None:
                own_rows.append((uid, owner, sub, seq, record, bytearray(body), size, plain))
            else:
                copy_rows.append((uid, owner, sub, seq, record, payload, size, plain))
        if stored:
            rows = [(payload, _content(c, props), bytearray(c.body))
                    for c, (payload, props) in stored.items()]
            db.executemany("INSERT INTO payloads VALUES (?, ?, ?)", rows)
        if own_rows:
            db.executemany(_INSERT_OWN, own_rows)
        if copy_rows:
            db.executemany(_INSERT_COPY, copy_rows)
        if rewritten:  # a full row carries the current state: drop older overrides
            db.executemany(_PUT_MESSAGE, rewritten)
            db.executemany("DELETE FROM message_states WHERE uid = ?", [(row[0],) for row in rewritten])
        for payload, (c, properties) in kept.items():  # its other copies may all have gone: store it again
            if db.execute("SELECT 1 FROM payloads WHERE id = ?", (payload,)).fetchone() is None:
                row = (payload, _content(c, properties), c.body)
                db.execute("INSERT INTO payloads VALUES (?, ?, ?)", row)
        return stored

    def _logged(self, states: list[Message], deleted: list[int]) -> bool:
        """Append the new locks of `states` to the lock log and the ids of `deleted` to the settled log (one
        write each); False if either could not be written or is full (the transaction then writes them)."""
        if states:
            if self._locks_torn or self._lock_records >= FOLD_LOCKS:
                return False
            locks, data = _lock_records(states, self._epoch)
            if not _appended(self._locks_fd, data):
                self._locks_torn = True  # a nearly full disk took part of it: unused until emptied
                return False
            self._lock_records += len(locks)
            self._locks.update(locks)
        if deleted:
            if self._settled_torn or len(self._settled) >= FOLD_SETTLED:
                return False
            record = _SETTLED.pack
            if len(deleted) == 1:  # an SDK's settlement: one per turn
                data = record(deleted[0], ~deleted[0])
            else:
                data = b"".join([record(u, ~u) for u in deleted])
            if not _appended(self._settled_fd, data):
                self._settled_torn = True
                return False
            self._settled.update(deleted)
            pop = self._locks.pop
            for uid in deleted:  # settled: their locks mean nothing any more
                pop(uid, None)
        return True

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

    def copy_to(self, path: Path) -> None:
        """Replace the store at `path` (closed) by a copy of this one as of now: the logs folded in,
        the copy's own logs removed (a geo-replicated namespace seeds a secondary so)."""
        self.fold()
        for stale in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}.settled"),
                      Path(f"{path}.locks")):
            stale.unlink(missing_ok=True)
        copy = sqlite3.connect(path)
        try:
            self._db.backup(copy)
        finally:
            copy.close()

    def close(self) -> None:
        self.fold()
        os.close(self._settled_fd)
        os.close(self._locks_fd)
        self._db.close()


def _runs(uids: set[int]) -> list[tuple[int, int]]:
    """`uids` as runs of consecutive ids (first, last): a settled backlog's ids mostly follow each other,
    and one range delete costs SQLite's work per row without Python's binding per row."""
    ordered = sorted(uids)
    if ordered[-1] - ordered[0] == len(ordered) - 1:
        return [(ordered[0], ordered[-1])]
    runs = []
    first = last = ordered[0]
    for uid in ordered[1:]:
        if uid != last + 1:
            runs.append((first, last))
            first = uid
        last = uid
    runs.append((first, last))
    return runs


def _read_settled(path: Path) -> set[int]:
    """The message ids a settled log holds (none if there is no log); records that do not check out (a
    write torn by power loss) are skipped."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return set()
    end = len(data) - len(data) % _SETTLED.size
    return {uid for uid, check in _SETTLED.iter_unpack(data[:end]) if check == ~uid}


def _appended(fd: int, data: bytes) -> bool:
    """Whether `data` was appended whole to a log (False: no space, or only part of it)."""
    try:
        return os.write(fd, data) == len(data)
    except OSError:
        return False


def _emptied(fd: int) -> bool:
    """Whether a log could be emptied."""
    try:
        os.ftruncate(fd, 0)
    except OSError:
        return False
    return True


def _lock_records(states: list[Message], epoch: int) -> tuple[dict[int, tuple[Any, ...]], bytes]:
    """The lock log's records of `states` (the latest per message id) and their bytes, built in one
    pass: a receiver fed one message per turn appends one each time."""
    locks: dict[int, tuple[Any, ...]] = {}
    parts = []
    pack, check, crc32 = _LOCK.pack, _CHECK.pack, zlib.crc32
    for m in states:
        token = m.lock_token
        if token is not None:
            token = token.bytes
        locked_until = m.locked_until
        lock = locks[m.uid] = (m.delivery_count, int(m.state), locked_until, token)
        has = (locked_until is not None) | (token is not None) << 1
        body = pack(m.uid, epoch, lock[0], lock[1], has, locked_until or 0.0, token or _NO_TOKEN)
        parts += (body, check(crc32(body)))
    return locks, b"".join(parts)


def read_lock_log(path: Path, folded: int) -> tuple[dict[int, tuple[Any, ...]], int]:
    """The locks a lock log holds that the database does not (records of an epoch after `folded`; the
    latest per message id), and how many records it holds in all. Records that do not check out (a write
    torn by power loss) are skipped."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}, 0
    locks: dict[int, tuple[Any, ...]] = {}
    size = _LOCK.size
    for at in range(0, len(data) - _LOCK_SIZE + 1, _LOCK_SIZE):
        body = data[at:at + size]
        if _CHECK.unpack_from(data, at + size)[0] != zlib.crc32(body):
            continue
        uid, epoch, delivery_count, state, has, locked_until, token = _LOCK.unpack(body)
        if epoch > folded:
            locks[uid] = (delivery_count, state, locked_until if has & 1 else None,
                          token if has & 2 else None)
    return locks, len(data) // _LOCK_SIZE + (len(data) % _LOCK_SIZE > 0)
