"""The lock log (`<file>.locks`): a turn that only locks, unlocks or settles messages appends records
instead of running a transaction; a killed broker's locks and delivery counts come back from it."""

from __future__ import annotations

import errno
import os
import sqlite3
import struct
from datetime import timedelta
from pathlib import Path

import pytest

from local_broker.engine import FakeClock, Message, Namespace, QueueProperties, StoreError
from local_broker.store import SqliteStore
from local_broker.store import sqlite as store_module
from local_broker.store.problems import opening
from local_broker.store.salvage import check, recover

LOCK_RECORD = 50  # bytes


def opened(path: Path, clock: FakeClock) -> Namespace:
    return Namespace.open(SqliteStore(path), clock=clock)


def queue_of(tmp_path: Path, clock: FakeClock, *bodies: bytes) -> Namespace:
    """A store with queue "q" holding `bodies`, written."""
    ns = opened(tmp_path / "ns.db", clock)
    ns.create_queue(QueueProperties("q"))
    ns.send("q", [Message(body) for body in bodies])
    ns.commit()
    return ns


def failing(*args: object) -> int:
    raise OSError(errno.ENOSPC, "No space left on device")


def states(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT count(*) FROM message_states").fetchone()[0]
    finally:
        db.close()


def log_size(tmp_path: Path) -> int:
    return (tmp_path / "ns.db.locks").stat().st_size


def locked_then_killed(tmp_path: Path, clock: FakeClock) -> Namespace:
    """a, b, c stored; a abandoned once and locked again, b and c locked, one receive per turn (as a
    prefetching SDK receiver is fed): the broker's state when it is killed (its store left open)."""
    ns = queue_of(tmp_path, clock, b"a", b"b", b"c")
    (a,) = ns.receive("q", 1)
    ns.commit()
    ns.abandon("q", [a.lock_token])
    ns.commit()
    for _ in range(3):
        ns.receive("q", 1)
        ns.commit()
    return ns


def test_a_receive_alone_is_logged_not_written_to_the_database(tmp_path: Path) -> None:
    clock = FakeClock()
    locked_then_killed(tmp_path, clock)
    assert states(tmp_path / "ns.db") == 0
    assert log_size(tmp_path) == 5 * LOCK_RECORD  # receive, abandon, three receives


def test_locked_messages_of_a_killed_broker_come_back_with_their_delivery_counts(tmp_path: Path) -> None:
    clock = FakeClock()
    killed = locked_then_killed(tmp_path, clock)
    held = {m.body: m for m in killed.peek("q", 0, 10)}
    again = opened(tmp_path / "ns.db", clock)
    restored = {m.body: m for m in again.peek("q", 0, 10)}
    for body, m in held.items():  # still locked, with the same token, until, and count
        assert (restored[body].lock_token, restored[body].locked_until, restored[body].delivery_count) == (
            m.lock_token, m.locked_until, m.delivery_count)
    assert again.receive("q", 10) == []  # locked
    clock.advance(timedelta(minutes=5))  # the killed broker's locks run out: each counts as a delivery
    again.tick()
    counts = {m.body: m.delivery_count for m in again.receive("q", 10)}
    assert counts == {b"a": 2, b"b": 1, b"c": 1}
    assert log_size(tmp_path) == 0 and states(tmp_path / "ns.db") == 3  # folded when it was opened


def test_a_restart_applies_both_logs(tmp_path: Path) -> None:
    clock = FakeClock()
    ns = queue_of(tmp_path, clock, b"a", b"b", b"c")
    got = []
    for _ in range(3):
        got += ns.receive("q", 1)
        ns.commit()
    ns.complete("q", [got[0].lock_token])  # the settled log
    ns.commit()
    ns.abandon("q", [got[1].lock_token])  # the lock log
    ns.commit()
    assert (tmp_path / "ns.db.settled").stat().st_size == 16 and log_size(tmp_path) == 4 * LOCK_RECORD
    again = opened(tmp_path / "ns.db", clock)
    assert [(m.body, m.delivery_count) for m in again.receive("q", 10)] == [(b"b", 1)]  # c: still locked
    clock.advance(timedelta(minutes=5))
    again.tick()
    assert [(m.body, m.delivery_count) for m in again.receive("q", 10)] == [(b"b", 2), (b"c", 1)]


def test_a_send_folds_the_lock_log_and_records_of_a_folded_epoch_are_ignored(tmp_path: Path) -> None:
    """The transaction that folds the log could commit and the broker die before the log is emptied: its
    records, older than the database, must not override what came after them."""
    clock = FakeClock()
    ns = queue_of(tmp_path, clock, b"a")
    (a,) = ns.receive("q", 1)
    ns.commit()
    ns.abandon("q", [a.lock_token])
    ns.commit()
    folded = (tmp_path / "ns.db.locks").read_bytes()
    ns.send("q", Message(b"b"))
    ns.commit()  # a transaction: the log's two records written into the database
    assert log_size(tmp_path) == 0 and states(tmp_path / "ns.db") == 1
    (a,) = ns.receive("q", 1)
    ns.commit()
    ns.defer("q", [a.lock_token])  # logged again, in the next epoch
    ns.commit()
    with open(tmp_path / "ns.db.locks", "r+b") as log:  # as if the fold's emptying had not happened
        current = log.read()
        log.seek(0)
        log.write(folded + current)
    again = opened(tmp_path / "ns.db", clock)
    (deferred,) = again.peek("q", 0, 1)
    assert deferred.body == b"a" and deferred.state.name == "DEFERRED" and deferred.delivery_count == 1


def test_a_torn_or_stray_lock_record_applies_nothing(tmp_path: Path) -> None:
    clock = FakeClock()
    ns = queue_of(tmp_path, clock, b"a", b"b")
    ns.receive("q", 1)
    ns.commit()
    record = (tmp_path / "ns.db.locks").read_bytes()
    stray = bytearray(record)
    stray[0] += 1  # another message's id: its check fails
    with open(tmp_path / "ns.db.locks", "ab") as log:
        log.write(bytes(stray))
        log.write(record[:20])  # half a record
    again = opened(tmp_path / "ns.db", clock)
    assert [m.body for m in again.receive("q", 10)] == [b"b"]  # a still locked, b not
    assert log_size(tmp_path) == 0


def test_a_full_disk_writes_the_locks_in_a_transaction_instead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    ns = queue_of(tmp_path, clock, b"a", b"b", b"c")
    write = os.write
    monkeypatch.setattr(store_module.os, "write", failing)
    ns.receive("q", 1)
    ns.commit()
    assert log_size(tmp_path) == 0 and states(tmp_path / "ns.db") == 1
    monkeypatch.setattr(store_module.os, "write", lambda fd, data: write(fd, data[:30]))  # a torn write
    ns.receive("q", 1)
    ns.commit()  # the transaction that writes the lock also empties the log of the torn record
    assert log_size(tmp_path) == 0 and states(tmp_path / "ns.db") == 2
    monkeypatch.setattr(store_module.os, "write", write)
    ns.receive("q", 1)
    ns.commit()
    assert log_size(tmp_path) == LOCK_RECORD  # logged again
    again = opened(tmp_path / "ns.db", clock)
    assert again.receive("q", 10) == []
    clock.advance(timedelta(minutes=5))
    again.tick()
    assert [(m.body, m.delivery_count) for m in again.receive("q", 10)] == [(b"a", 1), (b"b", 1), (b"c", 1)]


def test_a_log_that_cannot_be_emptied_is_not_appended_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    ns = queue_of(tmp_path, clock, b"a", b"b")
    write = os.write
    monkeypatch.setattr(store_module.os, "write", lambda fd, data: write(fd, data[:30]))
    ns.receive("q", 1)
    monkeypatch.setattr(store_module.os, "ftruncate", failing)
    ns.commit()
    monkeypatch.setattr(store_module.os, "write", write)
    ns.receive("q", 1)
    ns.commit()  # after the torn record, the next one would be misread: a transaction instead
    assert log_size(tmp_path) == 30 and states(tmp_path / "ns.db") == 2
    again = opened(tmp_path / "ns.db", clock)
    assert again.receive("q", 10) == []


def test_a_full_lock_log_is_written_to_the_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "FOLD_LOCKS", 2)
    ns = queue_of(tmp_path, FakeClock(), b"a", b"b", b"c")
    for _ in range(2):
        ns.receive("q", 1)
        ns.commit()
    assert log_size(tmp_path) == 2 * LOCK_RECORD and states(tmp_path / "ns.db") == 0
    ns.receive("q", 1)
    ns.commit()
    assert log_size(tmp_path) == 0 and states(tmp_path / "ns.db") == 3


def test_the_record_layout_is_fixed() -> None:
    """The log's format is part of the store's schema: a change needs a new SCHEMA_VERSION."""
    assert store_module._LOCK.size + store_module._CHECK.size == LOCK_RECORD
    assert store_module._LOCK.format == "<qqiBBd16s" and store_module.SCHEMA_VERSION == 7
    assert struct.calcsize(store_module._CHECK.format) == 4


def test_recover_keeps_the_locks_only_the_log_holds(tmp_path: Path) -> None:
    clock = FakeClock()
    killed = locked_then_killed(tmp_path, clock)
    held = {m.body: (m.lock_token, m.delivery_count) for m in killed.peek("q", 0, 10)}
    recover(tmp_path / "ns.db", tmp_path / "recovered.db")
    again = opened(tmp_path / "recovered.db", clock)
    assert {m.body: (m.lock_token, m.delivery_count) for m in again.peek("q", 0, 10)} == held
    assert check(tmp_path / "recovered.db").problems == []


def test_a_store_that_lost_its_folded_epoch_is_reported_as_damaged(tmp_path: Path) -> None:
    queue_of(tmp_path, FakeClock(), b"a").close()
    db = sqlite3.connect(tmp_path / "ns.db")
    db.execute("DELETE FROM folded")
    db.commit()
    db.close()
    assert check(tmp_path / "ns.db").problems == ["the lock log's folded epoch row is missing"]
    with pytest.raises(StoreError, match="is damaged"), opening(tmp_path / "ns.db", "ns"):
        SqliteStore(tmp_path / "ns.db")
    recover(tmp_path / "ns.db", tmp_path / "recovered.db")  # a new epoch: the store opens again
    assert [m.body for m in opened(tmp_path / "recovered.db", FakeClock()).peek("q", 0, 10)] == [b"a"]
