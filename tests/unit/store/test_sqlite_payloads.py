"""The SQLite store keeps a topic message's content once (a payload row) and one small row per copy.

`fixtures/namespace-v2.db` was written by the schema-2 store (commit cc76669, one full row per copy) with
FakeClock(1_700_000_000): queue "q" (lock 5 min) got q0..q2 (body b"q-body-<i>", {"n": i}, annotation
x-opt-k = i), committed, then q0 received (locked) and q1 dead-lettered ("why", "because"); topic "t" with
subscriptions "all" (default rule), "red" (color = 'red', SET seen = TRUE) and "blue" (color = 'blue') got
"t-red" (subject "paint") and "t-blue" (TTL 3600 s), committed, then one receive from "all" (locks
t-red's copy) and "t-later" scheduled at +60 s (color blue); session queue "sq" got one message in
session "A" with state b"state". Then the namespace was closed.
"""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from local_broker.engine import (
    FakeClock,
    Message,
    Namespace,
    QueueProperties,
    ReceiveMode,
    RuleProperties,
    SqlFilter,
    SqlRuleAction,
    SubscriptionProperties,
    TopicProperties,
)
from local_broker.engine.message import CONTENT_FIELDS
from local_broker.store import ChangeSet, SqliteStore, sqlite

V2_FIXTURE = Path(__file__).parent / "fixtures" / "namespace-v2.db"
WRITTEN_AT = 1_700_000_000.0


@pytest.fixture(autouse=True)
def deletes_in_transactions(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests count the database's rows after each commit: settled messages are deleted by the
    commit's transaction here, not logged for a later one (test_sqlite_store.py tests the settled log)."""
    monkeypatch.setattr("local_broker.store.sqlite.FOLD_SETTLED", 0)


def counts(path: Path) -> tuple[int, int]:
    """(payload rows, message rows) in a store file."""
    db = sqlite3.connect(path)
    try:
        return (
            db.execute("SELECT count(*) FROM payloads").fetchone()[0],
            db.execute("SELECT count(*) FROM messages").fetchone()[0],
        )
    finally:
        db.close()


def own_contents(path: Path) -> int:
    """Message rows that hold their content themselves (no payload row)."""
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT count(*) FROM messages WHERE payload IS NULL").fetchone()[0]
    finally:
        db.close()


def fan_out_topic(path: Path, clock: FakeClock) -> Namespace:
    """Topic "t" with subscriptions a, b (every message) and c (every message, SET seen = TRUE)."""
    ns = Namespace.open(SqliteStore(path), clock=clock)
    ns.create_topic(TopicProperties("t"))
    ns.create_subscription("t", SubscriptionProperties("a"))
    ns.create_subscription("t", SubscriptionProperties("b"))
    action = RuleProperties("seen", SqlFilter("1 = 1"), SqlRuleAction("SET seen = TRUE"))
    ns.create_subscription("t", SubscriptionProperties("c"), action)
    return ns


def test_copies_of_a_topic_message_share_one_payload(tmp_path: Path) -> None:
    clock = FakeClock()
    path = tmp_path / "ns.db"
    ns = fan_out_topic(path, clock)
    ns.send("t", [Message(b"body-%d" % i, {"n": i}, message_id=f"m{i}") for i in range(2)])
    ns.commit()
    assert counts(path) == (2, 6)
    db = sqlite3.connect(path)
    own = db.execute(  # a row's record holds its own property dict, or null for its payload's
        "SELECT owner FROM messages WHERE json_extract(record, '$[7]') IS NOT NULL ORDER BY uid").fetchall()
    assert own == [("t/subscriptions/c",)] * 2  # the action's copies carry their own property dicts
    db.close()
    ns.close()

    ns2 = Namespace.open(SqliteStore(path), clock=clock)
    a, b, c = (ns2.peek(f"t/Subscriptions/{name}", 0, 10) for name in "abc")
    for copies in zip(a, b, c, strict=True):
        assert {m.body for m in copies} == {copies[0].body} and len({m.message_id for m in copies}) == 1
    assert [m.application_properties for m in a] == [{"n": 0}, {"n": 1}]
    assert [m.application_properties for m in c] == [
        {"n": 0, "RuleName": "seen", "seen": True},
        {"n": 1, "RuleName": "seen", "seen": True},
    ]
    assert a[0].content is b[0].content is c[0].content  # shared in memory again after the restart
    ns2.close()


def test_the_payload_goes_with_its_last_copy_settled_purged_or_expired(tmp_path: Path) -> None:
    clock = FakeClock()
    path = tmp_path / "ns.db"
    ns = fan_out_topic(path, clock)
    ns.send("t", Message(b"once", message_id="m", time_to_live=60.0))
    ns.commit()
    assert counts(path) == (1, 3)
    (got,) = ns.receive("t/Subscriptions/a", 1)
    ns.complete("t/Subscriptions/a", [got.lock_token])
    ns.commit()
    assert counts(path) == (1, 2)
    assert len(ns.receive("t/Subscriptions/b", 10, ReceiveMode.RECEIVE_AND_DELETE)) == 1  # a purge
    ns.commit()
    assert counts(path) == (1, 1)
    clock.advance(60)
    ns.tick()  # c's copy expires (no dead-lettering on expiry)
    ns.commit()
    assert counts(path) == (0, 0)
    ns.close()


def test_deleting_a_subscription_keeps_the_payload_for_the_others(tmp_path: Path) -> None:
    clock = FakeClock()
    path = tmp_path / "ns.db"
    ns = fan_out_topic(path, clock)
    ns.send("t", Message(b"kept", message_id="m"))
    ns.commit()
    ns.delete_subscription("t", "a")
    ns.commit()
    assert counts(path) == (1, 2)
    ns.close()
    ns2 = Namespace.open(SqliteStore(path), clock=clock)
    assert [m.body for m in ns2.peek("t/Subscriptions/b", 0, 10)] == [b"kept"]
    ns2.delete_topic("t")
    ns2.commit()
    assert counts(path) == (0, 0)
    ns2.close()


def test_a_copy_that_changes_its_content_keeps_it_in_its_own_row(tmp_path: Path) -> None:
    clock = FakeClock()
    path = tmp_path / "ns.db"
    ns = fan_out_topic(path, clock)
    relabel = RuleProperties("relabel", SqlFilter("1 = 1"), SqlRuleAction("SET sys.Label = 'moved'"))
    ns.create_subscription("t", SubscriptionProperties("d"), relabel)
    ns.create_queue(QueueProperties("q"))
    ns.update_subscription("t", SubscriptionProperties("b", forward_to="q"))
    ns.send("t", Message(b"body", message_id="m", subject="original"))
    ns.commit()
    # a and c share the sender's content; b's forwarded copy (hop count) and d's (label) have their own,
    # which no other message shares: kept in their rows
    assert counts(path) == (1, 4) and own_contents(path) == 2
    ns.close()
    ns2 = Namespace.open(SqliteStore(path), clock=clock)
    paths = ("t/Subscriptions/a", "t/Subscriptions/d", "q")
    assert [[m.subject for m in ns2.peek(p, 0, 10)] for p in paths] == [["original"], ["moved"], ["original"]]
    assert ns2.peek("q", 0, 1)[0].hop_count == 1
    ns2.close()


def test_an_activated_topic_message_is_stored_once_for_its_copies(tmp_path: Path) -> None:
    clock = FakeClock()
    path = tmp_path / "ns.db"
    ns = fan_out_topic(path, clock)
    ns.schedule("t", Message(b"later", message_id="m", scheduled_enqueue_time=clock.now() + 10))
    ns.commit()
    assert counts(path) == (0, 1) and own_contents(path) == 1  # waiting, in the topic alone
    clock.advance(10)
    ns.tick()
    ns.commit()
    # activation gave it a new sequence number (a new content, stored once for its three copies); the
    # scheduled row, which held the old one, is gone
    assert counts(path) == (1, 3)
    for name in "abc":
        (m,) = ns.receive(f"t/Subscriptions/{name}", 1, ReceiveMode.RECEIVE_AND_DELETE)
        assert m.body == b"later"
    ns.commit()
    assert counts(path) == (0, 0)
    ns.close()


def test_a_payload_whose_copies_all_went_is_stored_again_for_a_new_reference(tmp_path: Path) -> None:
    path = tmp_path / "ns.db"
    ns = fan_out_topic(path, FakeClock())
    ns.create_queue(QueueProperties("q"))
    ns.send("t", Message(b"body", {"k": "v"}, message_id="m"))
    ns.commit()
    for name in "bca":
        (m,) = ns.receive(f"t/Subscriptions/{name}", 1, ReceiveMode.RECEIVE_AND_DELETE)
    ns.commit()
    assert counts(path) == (0, 0) and m.content.payload
    twin = m.copy()  # a new row pointing at the content whose payload row is gone
    twin.uid = 99
    ns._store.write(ChangeSet(messages_put=[("q", 0, twin)]))
    ns.close()
    (restored,) = Namespace.open(SqliteStore(path), clock=FakeClock()).peek("q", 0, 1)
    assert (restored.body, restored.application_properties, restored.message_id) == (b"body", {"k": "v"}, "m")


def open_migrated(fixture: Path, path: Path, clock: FakeClock, old_table: str) -> Namespace:
    """A copy of an older store's fixture opened: it is now of the current schema, its old table gone."""
    shutil.copy(fixture, path)
    ns = Namespace.open(SqliteStore(path), clock=clock)
    db = sqlite3.connect(path)
    assert db.execute("SELECT version FROM schema_version").fetchall() == [(sqlite.SCHEMA_VERSION,)]
    assert not db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (old_table,)).fetchall()
    db.close()
    return ns


def test_a_schema_2_store_is_migrated(tmp_path: Path) -> None:
    path, clock = tmp_path / "ns.db", FakeClock(WRITTEN_AT + 10)
    ns = open_migrated(V2_FIXTURE, path, clock, "messages_v2")
    # 9 messages; t-blue's copies in "all" and "blue" had the same row and now share one payload
    # (t-red's copy in "red" was changed by its rule's action)
    assert counts(path) == (8, 9)
    assert ns.config.name == "legacy"

    locked, q2 = ns.peek("q", 0, 10)
    assert [(m.message_id, m.body, m.application_properties, m.annotations) for m in (locked, q2)] == [
        ("q0", b"q-body-0", {"n": 0}, {"x-opt-k": 0}),
        ("q2", b"q-body-2", {"n": 2}, {"x-opt-k": 2}),
    ]
    assert locked.locked_until == WRITTEN_AT + 300 and locked.lock_token is not None
    (dead,) = ns.peek("q/$DeadLetterQueue", 0, 10)
    assert (dead.message_id, dead.dead_letter_reason) == ("q1", "why")
    assert dead.dead_letter_error_description == "because"
    red_all, blue_all = ns.peek("t/Subscriptions/all", 0, 10)
    (red,) = ns.peek("t/Subscriptions/red", 0, 10)
    (blue,) = ns.peek("t/Subscriptions/blue", 0, 10)
    assert (red_all.subject, red_all.locked_until, red.subject) == ("paint", WRITTEN_AT + 60, "paint")
    assert red.application_properties == {"color": "red", "RuleName": "red", "seen": True}
    assert blue_all.content is blue.content and blue.expires_at == blue.enqueued_time + 3600
    assert ns.get_topic_runtime_properties("t").scheduled_message_count == 1
    assert ns.get_session_state("sq", "A") == b"state"
    assert [m.body for m in ns.peek("sq", 0, 10)] == [b"s-body"]

    ns.complete("q", [locked.lock_token])  # the lock taken under schema 2 still holds
    clock.advance(50)
    ns.tick()  # t-later activates into "all" and "blue"
    ns.commit()
    assert counts(path) == (7, 9)
    assert [m.message_id for m in ns.peek("t/Subscriptions/blue", 0, 10)] == ["t-blue", "t-later"]
    ns.close()

    ns2 = Namespace.open(SqliteStore(path), clock=clock)  # and it reopens as a current store
    assert [m.message_id for m in ns2.peek("t/Subscriptions/all", 0, 10)] == ["t-red", "t-blue", "t-later"]
    assert [m.message_id for m in ns2.peek("q", 0, 10)] == ["q2"]
    ns2.close()


def test_a_migration_that_fails_leaves_the_schema_2_file_as_it_was(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "ns.db"
    shutil.copy(V2_FIXTURE, path)
    real_dumps, calls = sqlite.dumps, []

    def failing_dumps(value):  # the migration dies part-way, as a killed process would
        calls.append(value)
        if len(calls) == 4:
            raise RuntimeError("killed")
        return real_dumps(value)

    monkeypatch.setattr(sqlite, "dumps", failing_dumps)
    with pytest.raises(RuntimeError, match="killed"):
        SqliteStore(path)
    monkeypatch.setattr(sqlite, "dumps", real_dumps)
    db = sqlite3.connect(path)
    assert db.execute("SELECT version FROM schema_version").fetchall() == [(2,)]
    assert db.execute("SELECT count(*) FROM messages").fetchone()[0] == 9
    assert not db.execute("SELECT 1 FROM sqlite_master WHERE name IN ('payloads', 'messages_v2')").fetchall()
    db.close()
    ns = Namespace.open(SqliteStore(path), clock=FakeClock(WRITTEN_AT + 10))
    assert [m.message_id for m in ns.peek("t/Subscriptions/all", 0, 10)] == ["t-red", "t-blue"]
    assert counts(path) == (8, 9)
    ns.close()


# `fixtures/namespace-v3.db` was written by the schema-3 store (commit 65c3acc) with FakeClock(1_700_000_000):
# queue "q" (lock 1 min) got q0, q1 (body b"q-body-<i>", {"n": i}, annotation x-opt-k = i); topic "t" with
# subscriptions "a" and "b" got "t0" (subject "paint", {"color": "red"}); committed; then q0 received
# (locked).
V3_FIXTURE = Path(__file__).parent / "fixtures" / "namespace-v3.db"


def test_a_schema_3_store_is_migrated_and_new_messages_hold_their_content(tmp_path: Path) -> None:
    path, clock = tmp_path / "ns.db", FakeClock(WRITTEN_AT + 10)
    ns = open_migrated(V3_FIXTURE, path, clock, "messages_v3")
    assert counts(path) == (3, 4) and own_contents(path) == 0  # the rows keep their payloads
    locked, q1 = ns.peek("q", 0, 10)
    assert [(m.message_id, m.body, m.application_properties, m.annotations) for m in (locked, q1)] == [
        ("q0", b"q-body-0", {"n": 0}, {"x-opt-k": 0}),
        ("q1", b"q-body-1", {"n": 1}, {"x-opt-k": 1}),
    ]
    assert locked.locked_until == WRITTEN_AT + 60 and locked.lock_token is not None
    (a,), (b,) = ns.peek("t/Subscriptions/a", 0, 10), ns.peek("t/Subscriptions/b", 0, 10)
    assert a.content is b.content and (a.subject, a.application_properties) == ("paint", {"color": "red"})

    ns.complete("q", [locked.lock_token])  # the lock taken under schema 3 still holds; its payload goes
    ns.send("q", Message(b"new", {"n": 2}, message_id="q2"))
    ns.commit()
    assert counts(path) == (2, 4) and own_contents(path) == 1
    ns.close()
    ns2 = Namespace.open(SqliteStore(path), clock=clock)
    assert [(m.message_id, m.body) for m in ns2.peek("q", 0, 10)] == [("q1", b"q-body-1"), ("q2", b"new")]
    ns2.close()


def test_a_message_holding_its_content_survives_restarts_and_changes(tmp_path: Path) -> None:
    clock = FakeClock()
    path = tmp_path / "ns.db"
    ns = Namespace.open(SqliteStore(path), clock=clock)
    ns.create_queue(QueueProperties("q"))
    ns.send("q", Message(b"body", {"k": "v"}, message_id="m", annotations={"x-opt-a": 1}, time_to_live=600.0))
    ns.commit()
    assert counts(path) == (0, 1) and own_contents(path) == 1
    ns.close()
    ns = Namespace.open(SqliteStore(path), clock=clock)
    (m,) = ns.receive("q", 1)
    assert (m.body, m.application_properties, m.annotations, m.time_to_live) == (
        b"body", {"k": "v"}, {"x-opt-a": 1}, 600.0)
    ns.dead_letter("q", [m.lock_token], "why", "because")  # a change of its properties, row rewritten
    ns.commit()
    assert counts(path) == (0, 1) and own_contents(path) == 1
    ns.close()
    ns = Namespace.open(SqliteStore(path), clock=clock)
    (dead,) = ns.peek("q/$DeadLetterQueue", 0, 1)
    assert (dead.body, dead.dead_letter_reason, dead.application_properties["k"]) == (b"body", "why", "v")
    (dead,) = ns.receive("q/$DeadLetterQueue", 1, ReceiveMode.RECEIVE_AND_DELETE)
    ns.commit()
    assert counts(path) == (0, 0)
    ns.close()


# `fixtures/namespace-v4.db` was written by the schema-4 store (commit 216c60d) with FakeClock(1_700_000_000):
# queue "q" (lock 1 min) got q0..q3 (body b"q-body-<i>", {"n": i}, annotation x-opt-k = i) and "q-later"
# scheduled at +60 s; topic "t" with subscriptions "a" and "b" got "t0" (subject "paint", {"color": "red"});
# committed; then q0 and q1 received, q1 deferred, committed.
V4_FIXTURE = Path(__file__).parent / "fixtures" / "namespace-v4.db"


def test_a_schema_4_store_is_migrated_with_its_locks_deferrals_and_schedules(tmp_path: Path) -> None:
    path, clock = tmp_path / "ns.db", FakeClock(WRITTEN_AT + 10)
    ns = open_migrated(V4_FIXTURE, path, clock, "messages_v4")
    db = sqlite3.connect(path)  # schema 5: each row's size and whether it is plain (active, unlocked)
    rows = db.execute(
        "SELECT owner, seq, plain, size = json_extract(record, '$[6]') FROM messages ORDER BY uid"
    )
    assert rows.fetchall() == [
        ("q", 1, 1, 1), ("q", 2, 1, 1), ("q", 3, 1, 1), ("q", 4, 1, 1), ("q", 5, 0, 1),
        ("t/subscriptions/a", 1, 1, 1), ("t/subscriptions/b", 1, 1, 1),
    ]  # q0 and q1 were locked and deferred in message_states: their rows stay plain, the state overrides
    db.close()
    assert [(m.message_id, m.body, m.state) for m in ns.peek("q", 0, 10)] == [
        ("q0", b"q-body-0", 0), ("q1", b"q-body-1", 1), ("q2", b"q-body-2", 0), ("q3", b"q-body-3", 0),
        ("q-later", b"later", 2),
    ]
    rp = ns.get_queue_runtime_properties("q")
    assert (rp.active_message_count, rp.scheduled_message_count, ns.deferred_message_count("q")) == (4, 1, 1)
    locked = ns.peek("q", 0, 1)[0]
    assert locked.locked_until == WRITTEN_AT + 60
    q2, q3 = ns.receive("q", 10)
    assert (q2.message_id, q3.message_id) == ("q2", "q3")
    ns.complete("q", [locked.lock_token, q2.lock_token, q3.lock_token])  # q0: locked under schema 4
    (deferred,) = ns.receive_deferred("q", [2], ReceiveMode.RECEIVE_AND_DELETE)
    assert deferred.message_id == "q1"
    (a,), (b,) = ns.peek("t/Subscriptions/a", 0, 10), ns.peek("t/Subscriptions/b", 0, 10)
    assert a.content is b.content and (a.subject, a.application_properties) == ("paint", {"color": "red"})
    clock.advance(60)
    ns.tick()
    assert [m.message_id for m in ns.receive("q", 10)] == ["q-later"]
    ns.close()


# `fixtures/namespace-v6.db` was written by the schema-6 store (commit ea10e63), FakeClock(1_700_000_000.3):
# queue "q" (lock 60.5 s) got q0..q3 (body b"q-body-<i>", {"n": i}, time to live 90.7 + i s) and "q-later"
# scheduled at +60.25 s; topic "t" with subscriptions "a" and "b" got "t0" (subject "paint", {"color":
# "red"}); committed; 1.1 s later q0, q1 and q2 received, q1 deferred, q2 dead-lettered; committed, closed.
# Its records hold their times as float seconds (schema 7: integer microseconds).
V6_FIXTURE = Path(__file__).parent / "fixtures" / "namespace-v6.db"
V6_WRITTEN_AT = 1_700_000_000.3


def record_times(path: Path, message_id: str) -> list[Any]:
    """A message row's record times as stored: locked until, enqueued time, expires at."""
    db = sqlite3.connect(path)
    try:
        (text,) = db.execute(  # its content's first field: schema 7 puts which fields it has before it
            "SELECT record FROM messages "
            "WHERE ? IN (json_extract(record, '$[8][0]'), json_extract(record, '$[8][1]'))",
            (message_id,),
        ).fetchone()
    finally:
        db.close()
    record = json.loads(text)
    return [record[2], record[4], record[5]]


def test_a_schema_6_store_is_migrated_with_every_message_and_its_times(tmp_path: Path) -> None:
    path, clock = tmp_path / "ns.db", FakeClock(V6_WRITTEN_AT + 10)
    ns = open_migrated(V6_FIXTURE, path, clock, "messages_v6")
    assert record_times(path, "q0") == [None, 1700000000.3, 1700000091.0]  # the old rows are not rewritten
    peeked = ns.peek("q", 0, 10)
    assert [(m.message_id, m.body, m.state, m.application_properties) for m in peeked] == [
        ("q0", b"q-body-0", 0, {"n": 0}), ("q1", b"q-body-1", 1, {"n": 1}), ("q3", b"q-body-3", 0, {"n": 3}),
        ("q-later", b"later", 2, {}),
    ]
    assert [m.enqueued_time for m in peeked] == [V6_WRITTEN_AT] * 4
    assert [m.expires_at for m in peeked] == [1700000091.0, 1700000092.0, 1700000094.0, math.inf]
    locked = peeked[0]
    assert locked.locked_until == 1700000061.8999999 and locked.lock_token is not None
    assert locked.delivery_count == 0
    (dead,) = ns.peek("q/$DeadLetterQueue", 0, 10)
    assert (dead.message_id, dead.dead_letter_reason, dead.time_to_live) == ("q2", "why", 92.7)
    (a,), (b,) = ns.peek("t/Subscriptions/a", 0, 10), ns.peek("t/Subscriptions/b", 0, 10)
    assert a.content is b.content and (a.subject, a.application_properties) == ("paint", {"color": "red"})

    ns.send("q", Message(b"new", {"n": 4}, message_id="q4", time_to_live=30.25))
    ns.complete("q", [locked.lock_token])  # the lock taken under schema 6 still holds
    ns.commit()
    sent_at = clock.now()
    locked_at, enqueued, expires = record_times(path, "q4")
    assert locked_at is None and (enqueued, expires) == (round(sent_at * 1e6), round((sent_at + 30.25) * 1e6))
    ns.close()
    ns = Namespace.open(SqliteStore(path), clock=clock)
    q1, q3, later, q4 = ns.peek("q", 0, 10)
    assert (q1.message_id, q3.message_id, later.message_id, q4.message_id) == ("q1", "q3", "q-later", "q4")
    assert q3.expires_at == 1700000094.0 and abs(q4.enqueued_time - sent_at) < 1e-6
    assert abs(q4.expires_at - (sent_at + 30.25)) < 1e-6
    (deferred,) = ns.receive_deferred("q", [q1.sequence_number], ReceiveMode.RECEIVE_AND_DELETE)
    assert deferred.message_id == "q1"
    clock.advance(60)
    ns.tick()
    assert [m.message_id for m in ns.receive("q", 10)] == ["q3", "q-later"]  # q4 expired (30.25 s)
    ns.close()


def test_a_message_expires_when_it_did_before_a_restart(tmp_path: Path) -> None:
    clock = FakeClock(V6_WRITTEN_AT)
    path = tmp_path / "ns.db"
    ns = Namespace.open(SqliteStore(path), clock=clock)
    ns.create_queue(QueueProperties("q", dead_lettering_on_message_expiration=True))
    ns.send("q", Message(b"body", message_id="m", time_to_live=0.75))
    ns.commit()
    ns.close()
    ns = Namespace.open(SqliteStore(path), clock=clock)
    (m,) = ns.peek("q", 0, 10)
    assert abs(m.expires_at - (V6_WRITTEN_AT + 0.75)) < 1e-6
    clock.advance(0.751)
    assert ns.receive("q", 10) == []
    (dead,) = ns.peek("q/$DeadLetterQueue", 0, 1)
    assert abs(dead.enqueued_time - V6_WRITTEN_AT) < 1e-6 and dead.dead_letter_reason == "TTLExpiredException"
    ns.close()



# Sender fields a stored content may or may not have (the broker's own: see CONTENT_FIELDS).
SENDER_FIELDS = {
    "correlation_id": "c", "reply_to_session_id": "r", "partition_key": "p", "via_partition_key": "v",
    "subject": "s", "to": "t", "reply_to": "rt", "content_type": "text/plain", "time_to_live": 90.5,
    "annotations": {"x-a": 1}, "amqp_properties": {"content_encoding": "gzip"},
}


def contents(ns: Namespace, entity: str) -> dict[int, tuple[Any, ...]]:
    """Each message's content fields (all of CONTENT_FIELDS) by its "i" property."""
    return {m.application_properties["i"]: tuple(getattr(m, name) for name in CONTENT_FIELDS)
            for m in ns.peek(entity, 0, 100)}


def test_a_content_stores_the_fields_it_has_and_gets_each_back(tmp_path: Path) -> None:
    """Schema 7 writes a content's other fields (all but its message id, enqueued sequence number, hop count
    and application properties) only when it has one of them, in a queue's own row as in a topic's payload
    row; whichever of them a message has, each comes back after a restart, the absent ones None."""
    names = list(SENDER_FIELDS)
    subsets = [[], names, *([n] for n in names), names[::2], names[1::2]]  # none, all, one, every other
    clock = FakeClock(WRITTEN_AT)
    path = tmp_path / "ns.db"
    ns = Namespace.open(SqliteStore(path), clock=clock)
    ns.create_queue(QueueProperties("q"))
    ns.create_topic(TopicProperties("t"))
    for name in ("a", "b"):
        ns.create_subscription("t", SubscriptionProperties(name))
    for i, subset in enumerate(subsets):
        fields = {n: SENDER_FIELDS[n] for n in subset}
        ns.send("q", Message(b"q%d" % i, {"i": i}, **fields))
        ns.send("t", Message(b"t%d" % i, {"i": i}, **fields))
    ns.commit()
    entities = ("q", "t/Subscriptions/a", "t/Subscriptions/b")
    before = {entity: contents(ns, entity) for entity in entities}
    ns.close()

    db = sqlite3.connect(path)
    stored = [json.loads(r)[8] for (r,) in db.execute("SELECT record FROM messages WHERE body IS NOT NULL")]
    stored += [json.loads(d) for (d,) in db.execute("SELECT data FROM payloads")]
    db.close()
    # the contents of the messages sent without other fields ("i" 0): four values, no null
    assert sorted(len(c) for c in stored) == [4, 4] + [5] * (2 * len(subsets) - 2)
    assert all(c[2:] == [0, {"i": 0}] and None not in c for c in stored if len(c) == 4)

    ns = Namespace.open(SqliteStore(path), clock=clock)
    assert {entity: contents(ns, entity) for entity in entities} == before
    assert [before["q"][i][CONTENT_FIELDS.index("subject")] for i in (0, 1)] == [None, "s"]
    ns.close()
