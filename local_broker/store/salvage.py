"""`sbfed broker check` and `sbfed broker recover`: what is wrong with a namespace's store, and what of it can
still be read. Both only read the original (SQLite's read-only mode); recover writes a new store elsewhere.

A store is sound when SQLite's `integrity_check` passes and sbfed's own invariants hold: one schema version
row this broker reads (or migrates), the namespace's configuration, records that decode, every message row
holding its content or referencing a payload row that exists, no payload row that no message references, no
message-state row without its message, the lock log's folded epoch. Recover copies every row it can read,
table by table in rowid order (where a row cannot be read, it searches for the next one that can and reports
the rowids between as unreadable; a truncated file is read as far as it goes), then drops what the
invariants forbid (a message whose payload was lost, a payload no message references, a state without its
message, a record that does not decode) and prints what was saved, unreadable and dropped. The settled log
(`<namespace>.db.settled`) is copied beside the new store, so messages completed before the damage stay
completed; the lock log's records the database does not hold yet (`<namespace>.db.locks`) are written into
the new store's message states, so locks and delivery counts of the broker's last turns are kept too.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from local_broker.store.pages import leaf_rows
from local_broker.store.sqlite import SCHEMA_VERSION, SqliteStore, read_lock_log

MIGRATED = range(2, SCHEMA_VERSION)  # schema versions the broker migrates when it opens them
INTEGRITY_LINES = 5  # of SQLite's integrity_check reported per store
RECORD_TABLES = {"namespace": "config", "entities": "record", "messages": "record"}  # JSON columns
BATCH = 1000  # rows read at a time
MIN_ROWID, MAX_ROWID = -(1 << 63), (1 << 63) - 1


def read_only(path: Path) -> sqlite3.Connection:
    """`path` opened by SQLite in read-only mode: nothing can be written to it through this connection. On a
    read-only file system, where SQLite cannot make the write-ahead log's index beside it, as immutable (a
    write-ahead log left there by a killed broker is then not read)."""
    uri = path.resolve().as_uri()
    db = sqlite3.connect(f"{uri}?mode=ro", uri=True)
    try:
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError:
        db.close()
        return sqlite3.connect(f"{uri}?immutable=1", uri=True)
    except sqlite3.DatabaseError:
        pass  # damaged: the caller reads what it can
    return db


# --- check ------------------------------------------------------------------------------------------


@dataclass
class Finding:
    """What `check` found in one store: `problems` (none: sound) and what the store holds."""

    path: Path
    problems: list[str] = field(default_factory=list)
    summary: str = ""

    def lines(self) -> list[str]:
        if not self.problems:
            return [f"{self.path}: ok ({self.summary})"]
        return [f"{self.path}: {problem}" for problem in self.problems]


def check(path: Path) -> Finding:
    finding = Finding(path)
    try:
        db = read_only(path)
        try:
            _check_open(db, finding)
        finally:
            db.close()
    except sqlite3.Error as exc:
        finding.problems.append(f"SQLite cannot read it: {exc}")
    return finding


def _check_open(db: sqlite3.Connection, finding: Finding) -> None:
    problems = finding.problems
    integrity = [row[0] for row in db.execute(f"PRAGMA integrity_check({INTEGRITY_LINES})")]
    if integrity != ["ok"]:
        problems.extend(f"SQLite integrity_check: {' '.join(line.split())}" for line in integrity)
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "schema_version" not in tables:
        problems.append("not an sbfed namespace store (no schema_version table)")
        return
    versions = [row[0] for row in db.execute("SELECT version FROM schema_version")]
    if len(versions) != 1:
        problems.append(f"schema_version holds {len(versions)} rows, not 1")
        return
    version = versions[0]
    if version in MIGRATED:
        finding.summary = f"schema {version}, migrated to {SCHEMA_VERSION} when the broker opens it"
        return
    if version != SCHEMA_VERSION:
        problems.append(f"written with store schema {version}; this broker reads {SCHEMA_VERSION}")
        return
    if db.execute("SELECT count(*) FROM namespace").fetchone()[0] != 1:
        problems.append("the namespace's configuration row is missing")
    if db.execute("SELECT count(*) FROM folded").fetchone()[0] != 1:
        problems.append("the lock log's folded epoch row is missing")
    for table, column in RECORD_TABLES.items():
        bad = sum(1 for (text,) in db.execute(f"SELECT {column} FROM {table}") if not _decodes(text))
        if bad:
            problems.append(f"{bad} {table} record(s) do not decode")
    invariants = {
        "message row(s) reference a payload that is missing":
            "SELECT count(*) FROM messages m WHERE m.payload IS NOT NULL "
            "AND NOT EXISTS (SELECT 1 FROM payloads p WHERE p.id = m.payload)",
        "message row(s) hold neither their content nor a payload":
            "SELECT count(*) FROM messages WHERE payload IS NULL AND body IS NULL",
        "payload row(s) no message references":
            "SELECT count(*) FROM payloads p "
            "WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.payload = p.id)",
        "message state row(s) without their message":
            "SELECT count(*) FROM message_states s "
            "WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.uid = s.uid)",
    }
    for what, query in invariants.items():
        count = db.execute(query).fetchone()[0]
        if count:
            problems.append(f"{count} {what}")
    messages = db.execute("SELECT count(*) FROM messages").fetchone()[0]
    entities = db.execute("SELECT count(*) FROM entities").fetchone()[0]
    finding.summary = f"schema {version}, {entities} entities, {messages} messages"


def _decodes(text: Any) -> bool:
    try:
        json.loads(text)
    except (TypeError, ValueError):
        return False
    return True


# --- recover ----------------------------------------------------------------------------------------


@dataclass
class Salvage:
    """What recover copied (`saved`, rows by table), the row ranges it could not read (`unreadable`), and
    what it dropped because the store cannot hold it (`dropped`, rows by reason)."""

    saved: dict[str, int] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        saved = ", ".join(f"{count} {table}" for table, count in self.saved.items()) or "nothing"
        dropped = ", ".join(f"{count} {what}" for what, count in self.dropped.items()) or "nothing"
        return [f"saved: {saved}", f"unreadable: {', '.join(self.unreadable) or 'nothing'}",
                f"dropped: {dropped}", *self.notes]


def recover(source: Path, target: Path) -> Salvage:
    """Copy what can be read of the store `source` into a new store `target` (which must not exist)."""
    if target.exists():
        raise FileExistsError(f"{target} exists already: recover writes a new store only")
    salvage = Salvage()
    SqliteStore(target).close()  # an empty store of this broker's schema
    db = sqlite3.connect(target, isolation_level=None)
    try:
        db.execute("BEGIN")
        db.execute("DELETE FROM folded")  # the original's, if it can be read
        wanted = _copy_readable(source, db, salvage)
        if wanted:
            _copy_from_pages(source.read_bytes(), db, wanted, salvage)
        _apply_lock_log(Path(f"{source}.locks"), db, salvage)
        _drop_what_invariants_forbid(db, salvage)
        db.execute("COMMIT")
    finally:
        db.close()
    settled = Path(f"{source}.settled")
    if settled.exists():
        shutil.copyfile(settled, f"{target}.settled")
    return salvage


def _apply_lock_log(path: Path, db: sqlite3.Connection, salvage: Salvage) -> None:
    """The lock log's records of epochs after the one the original says it folded, as message states (the
    new store's log starts empty at the next epoch). Without the original's epoch, which records are newer
    than the database cannot be told: none is applied."""
    row = db.execute("SELECT locks FROM folded").fetchone()
    if row is None:
        db.execute("INSERT INTO folded VALUES (1, 0)")
        if path.exists() and path.stat().st_size:
            salvage.notes.append("the lock log's epoch was lost: the locks of the broker's last turns are "
                                 "not kept (their messages are available at once, with the delivery counts "
                                 "the database holds)")
        return
    locks, _ = read_lock_log(path, row[0])
    if locks:
        db.executemany("INSERT OR REPLACE INTO message_states VALUES (?, ?, ?, ?, ?)",
                       [(uid, *lock) for uid, lock in locks.items()])
        salvage.saved["lock log records"] = len(locks)


def _copy_readable(source: Path, db: sqlite3.Connection, salvage: Salvage) -> set[str]:
    """Copy the rows SQLite can read; the tables whose other rows are to be looked for on the file's pages."""
    tables = {name: columns for name, columns in _tables(db).items() if name != "schema_version"}
    try:
        original = read_only(source)
    except sqlite3.Error as exc:
        salvage.notes.append(f"SQLite cannot open it ({exc}): rows were looked for on its pages")
        return set(tables)
    try:
        # Read what the file holds even if it is shorter than its header says (a truncated file).
        original.execute("PRAGMA writable_schema = ON")
        try:
            found = _tables(original)
        except sqlite3.Error as exc:
            salvage.notes.append(f"SQLite cannot read its schema ({exc}): rows were looked for on its pages")
            return set(tables)
        version = _version(original)
        if version is not None and version != SCHEMA_VERSION:
            salvage.notes.append(f"nothing copied: the store has schema {version}, recover reads "
                                 f"{SCHEMA_VERSION} (start the broker on a copy of it to migrate it)")
            return set()
        for table, columns in tables.items():
            if table in found:
                _copy(original, db, table, [c for c in columns if c in found[table]], salvage)
    finally:
        original.close()
    return {table for table in tables if table not in found} | {
        entry.split(" ", 1)[0] for entry in salvage.unreadable}


def _copy_from_pages(data: bytes, db: sqlite3.Connection, tables: set[str], salvage: Salvage) -> None:
    """Rows of `tables` found on the file's leaf pages (told apart by their shape), added to the new store
    unless a row with the same key is there already."""
    shapes = {table: _shape(db, table) for table in tables}
    found: dict[str, list[list[Any]]] = {table: [] for table in tables}
    for rowid, values in leaf_rows(data):
        for table, shape in shapes.items():
            if len(values) == len(shape) and all(fits(v) for fits, v in zip(shape, values, strict=True)):
                found[table].append([rowid if v is None and shape[i] is _ROWID else v
                                     for i, v in enumerate(values)])
                break
    for table, rows in found.items():
        if not rows:
            continue
        columns = len(shapes[table])
        added = db.executemany(f"INSERT OR IGNORE INTO {table} VALUES ({', '.join('?' * columns)})", rows)
        if added.rowcount > 0:
            salvage.saved[table] = salvage.saved.get(table, 0) + added.rowcount
            salvage.notes.append(f"{added.rowcount} {table} rows were read from the file's pages")


def _rowid(value: Any) -> bool:
    return value is None  # an INTEGER PRIMARY KEY is the rowid: its record holds NULL


_ROWID = _rowid
_AFFINITY = {"TEXT": (str,), "INTEGER": (int,), "REAL": (float, int), "BLOB": (bytes,)}


def _shape(db: sqlite3.Connection, table: str) -> list[Any]:
    """Per column of `table`, a test of whether a value read from a page fits it."""
    shape: list[Any] = []
    for _, _, declared, not_null, _, primary in db.execute(f"PRAGMA table_info({table})"):
        if primary and declared == "INTEGER":
            shape.append(_ROWID)
            continue
        kinds = _AFFINITY[declared]
        shape.append(lambda value, kinds=kinds, not_null=not_null:
                     isinstance(value, kinds) or (value is None and not not_null))
    return shape


def _tables(db: sqlite3.Connection) -> dict[str, list[str]]:
    names = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {name: [row[1] for row in db.execute(f"PRAGMA table_info({name})")] for name in names}


def _version(db: sqlite3.Connection) -> int | None:
    try:
        row = db.execute("SELECT version FROM schema_version").fetchone()
    except sqlite3.Error:
        return None
    return None if row is None else row[0]


def _copy(original: sqlite3.Connection, db: sqlite3.Connection, table: str, columns: list[str],
          salvage: Salvage) -> None:
    listed = ", ".join(columns)
    insert = f"INSERT OR IGNORE INTO {table} ({listed}) VALUES ({', '.join('?' * len(columns))})"
    saved = 0
    for rows, gap in _readable(original, table, listed):
        db.executemany(insert, rows)
        saved += len(rows)
        if gap is not None:
            low, high = gap
            first = "the first" if low == MIN_ROWID else str(low)
            salvage.unreadable.append(f"{table} rows {first} to {'the last' if high is None else high}")
    salvage.saved[table] = saved


def _readable(db: sqlite3.Connection, table: str, listed: str,
              ) -> Iterator[tuple[list[tuple], tuple[int, int | None] | None]]:
    """The rows of `table` in rowid order, in batches, each with the rowid range (low, high; None: to the
    end) that could not be read just after it, if any. A failing batch is retried smaller; where even one
    row fails, the next readable rowid is searched for (doubling steps, then halving)."""
    select = f"SELECT rowid, {listed} FROM {table} WHERE rowid >= ? ORDER BY rowid LIMIT ?"
    cursor, limit = MIN_ROWID, BATCH
    while True:
        try:
            rows = db.execute(select, (cursor, limit)).fetchall()
        except sqlite3.Error:
            if limit > 1:
                limit //= 2
                continue
            resume = _next_readable(db, select, cursor)
            yield [], (cursor, None if resume is None else resume - 1)
            if resume is None:
                return
            cursor, limit = resume, 1
            continue
        if not rows:
            return
        yield [row[1:] for row in rows], None
        cursor, limit = rows[-1][0] + 1, min(BATCH, limit * 2)


def _next_readable(db: sqlite3.Connection, select: str, failing: int) -> int | None:
    """The smallest rowid above `failing` from which `select` reads again (None: none up to the end)."""

    def reads(rowid: int) -> bool:
        try:
            db.execute(select, (rowid, 1)).fetchall()
        except sqlite3.Error:
            return False
        return True

    step, readable = 1, None
    while readable is None:
        probe = failing + step
        if probe > MAX_ROWID:
            return MAX_ROWID if reads(MAX_ROWID) else None
        if reads(probe):
            readable = probe
        else:
            failing, step = probe, step * 2
    while readable - failing > 1:
        middle = (failing + readable) // 2
        if reads(middle):
            readable = middle
        else:
            failing = middle
    return readable


def _drop_what_invariants_forbid(db: sqlite3.Connection, salvage: Salvage) -> None:
    orphans = {
        "messages whose payload was lost":
            "DELETE FROM messages WHERE (payload IS NOT NULL AND payload NOT IN (SELECT id FROM payloads)) "
            "OR (payload IS NULL AND body IS NULL)",
        "payloads no message references": "DELETE FROM payloads WHERE id NOT IN "
                                          "(SELECT payload FROM messages WHERE payload IS NOT NULL)",
        "message states without their message":
            "DELETE FROM message_states WHERE uid NOT IN (SELECT uid FROM messages)",
    }
    for what, statement in orphans.items():
        count = db.execute(statement).rowcount
        if count:
            salvage.dropped[what] = count
    for table, column in RECORD_TABLES.items():
        undecodable = [rowid for rowid, text in db.execute(f"SELECT rowid, {column} FROM {table}")
                       if not _decodes(text)]
        db.executemany(f"DELETE FROM {table} WHERE rowid = ?", [(r,) for r in undecodable])
        if undecodable:
            salvage.dropped[f"{table} records that do not decode"] = len(undecodable)
    if db.execute("SELECT count(*) FROM namespace").fetchone()[0] == 0:
        salvage.notes.append("the namespace's configuration was lost: the broker gives it the topology's")
