"""The SQLite store: a namespace reopened from its file is the namespace that was committed."""

from __future__ import annotations

import sqlite3
import struct
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from proton import Described, int32, symbol, uint

from local_broker.engine import (
    FakeClock,
    Message,
    MessageState,
    Namespace,
    NamespaceConfig,
    QueueProperties,
    ReceiveMode,
    RuleProperties,
    SqlFilter,
    SqlRuleAction,
    StoreError,
    StoreFullError,
    SubscriptionProperties,
    TopicProperties,
)
from local_broker.store import ChangeSet, SqliteStore


class RecordingStore(SqliteStore):
    """A real SQLite store that also keeps the change sets it wrote, to check coalescing."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.written: list[ChangeSet] = []

    def write(self, changes: ChangeSet) -> None:
        self.written.append(changes)
        super().write(changes)


def reopen(path: Path, clock: FakeClock) -> Namespace:
    return Namespace.open(SqliteStore(path), clock=clock)


def test_everything_survives_a_restart(tmp_path: Path) -> None:
    clock = FakeClock()
    path = tmp_path / "ns.db"
    ns = Namespace.open(SqliteStore(path), NamespaceConfig(name="primary"), clock)
    ns.create_queue(
        QueueProperties(
            "q",
            requires_duplicate_detection=True,
            lock_duration=timedelta(seconds=30),
            user_metadata="meta",
        )
    )
    ns.create_queue(QueueProperties("sq", requires_session=True))
    ns.create_topic(TopicProperties("t"))
    ns.create_subscription(
        "t",
        SubscriptionProperties("s"),
        RuleProperties("r", SqlFilter("n > @min", {"@min": 1}), SqlRuleAction("SET seen = TRUE")),
    )
    when = datetime(2024, 1, 1, tzinfo=UTC)
    props = {
        "s": "v",
        "i": 2**40,
        "f": 0.5,
        "b": False,
        "n": None,
        "y": b"\x01\x02",
        "d": when,
        "u": uuid.UUID(int=7),
        "t": timedelta(seconds=3),
    }
    ns.send(
        "q",
        [Message(b"body%d" % i, dict(props), message_id=f"m{i}", annotations={"x-a": i}) for i in range(5)],
    )
    locked, abandoned, deferred, dead = ns.receive("q", 4)
    ns.abandon("q", [abandoned.lock_token])
    ns.defer("q", [deferred.lock_token])
    ns.dead_letter("q", [dead.lock_token], "why", "because")
    (scheduled_seq,) = ns.schedule(
        "q", [Message(b"s", message_id="sched", scheduled_enqueue_time=clock.now() + 60)]
    )
    ns.send("t", [Message(b"x", {"n": 2}, message_id="topic-msg")])
    ns.send("sq", Message(b"z", session_id="A"))
    ns.set_session_state("sq", "A", b"state")
    ns.commit()
    before = {
        p: [
            (m.sequence_number, m.delivery_count, m.state, m.application_properties)
            for m in ns.peek(p, 0, 50)
        ]
        for p in ("q", "q/$DeadLetterQueue", "t/Subscriptions/s", "sq")
    }
    ns.close()

    clock.advance(5)
    ns2 = reopen(path, clock)
    assert ns2.config.name == "primary"
    assert ns2.get_queue("q").user_metadata == "meta" and ns2.get_queue("q").requires_duplicate_detection
    rule = ns2.get_rule("t", "s", "r")
    assert rule.filter == SqlFilter("n > @min", {"@min": 1}) and rule.action == SqlRuleAction(
        "SET seen = TRUE"
    )
    after = {
        p: [
            (m.sequence_number, m.delivery_count, m.state, m.application_properties)
            for m in ns2.peek(p, 0, 50)
        ]
        for p in before
    }
    assert after == before
    (first,) = ns2.peek("q", 1, 1)
    assert (
        first.application_properties == props and first.annotations == {"x-a": 0} and first.body == b"body0"
    )
    assert ns2.get_session_state("sq", "A") == b"state"
    rt = ns2.get_queue_runtime_properties("q")
    assert (rt.active_message_count, rt.dead_letter_message_count, rt.scheduled_message_count) == (4, 1, 1)
    # the lock taken before the restart is still valid and still expires on time
    ns2.complete("q", [locked.lock_token])
    # delivery count and deferral survived
    assert ns2.receive("q", 1)[0].delivery_count == 1
    assert ns2.receive_deferred("q", [deferred.sequence_number])[0].message_id == "m2"
    # dedup history and sequence counters survived
    ns2.send("q", Message(b"dup", message_id="m0"))
    ns2.send("q", Message(b"new", message_id="fresh"))
    fresh = [m for m in ns2.peek("q", 0, 50) if m.message_id in ("m0", "fresh") and m.body != b"body0"]
    assert [m.message_id for m in fresh] == ["fresh"] and fresh[0].sequence_number > scheduled_seq
    # the scheduled message still activates
    clock.advance(60)
    ns2.tick()
    assert "sched" in [m.message_id for m in ns2.receive("q", 50, ReceiveMode.RECEIVE_AND_DELETE)]
    ns2.close()


def test_uncommitted_changes_are_not_stored(tmp_path: Path) -> None:
    clock = FakeClock()
    ns = Namespace.open(SqliteStore(tmp_path / "ns.db"), clock=clock)
    ns.create_queue(QueueProperties("q"))
    ns.send("q", Message(b"committed"))
    ns.commit()
    ns.send("q", Message(b"lost"))
    ns2 = reopen(tmp_path / "ns.db", clock)
    assert [m.body for m in ns2.peek("q", 0, 10)] == [b"committed"]


def test_sent_and_settled_within_one_commit_never_touches_disk(tmp_path: Path) -> None:
    store = RecordingStore(tmp_path / "ns.db")
    ns = Namespace.open(store, clock=FakeClock())
    ns.create_queue(QueueProperties("q"))
    ns.commit()
    ns.send("q", [Message(b"a"), Message(b"b")])
    got = ns.receive("q", 2)
    ns.complete("q", [m.lock_token for m in got])
    ns.commit()
    last = store.written[-1]
    assert last.messages_put == [] and last.messages_deleted == [] and last.messages_state == []
    assert last.counters == {"q": 2}
    # once persisted, a lock is a state-only update and completion a delete
    ns.send("q", Message(b"c"))
    ns.commit()
    (c,) = ns.receive("q", 1)
    ns.commit()
    assert store.written[-1].messages_state == [c] and store.written[-1].messages_put == []
    ns.complete("q", [c.lock_token])
    ns.commit()
    assert store.written[-1].messages_deleted == [c.uid]


def _stored(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT count(*) FROM messages").fetchone()[0]
    finally:
        db.close()


def _settled_then_killed(tmp_path: Path, clock: FakeClock) -> tuple[Namespace, list[Message]]:
    """Three stored and locked messages, the first completed alone (as an SDK settles): the broker's state
    when it is killed at that moment (its store is left open)."""
    ns = Namespace.open(SqliteStore(tmp_path / "ns.db"), clock=clock)
    ns.create_queue(QueueProperties("q"))
    ns.send("q", [Message(b"a"), Message(b"b"), Message(b"c")])
    ns.commit()
    got = ns.receive("q", 3)
    ns.commit()
    ns.complete("q", [got[0].lock_token])
    ns.commit()
    return ns, got


def test_a_settlement_alone_is_logged_not_written_to_the_database(tmp_path: Path) -> None:
    clock = FakeClock()
    _settled_then_killed(tmp_path, clock)
    assert _stored(tmp_path / "ns.db") == 3
    assert (tmp_path / "ns.db.settled").stat().st_size == 16
    again = reopen(tmp_path / "ns.db", clock)  # the completion survives the kill: it is not delivered again
    clock.advance(timedelta(minutes=5))  # the locks of the killed broker run out
    again.tick()
    assert sorted(m.body for m in again.receive("q", 10)) == [b"b", b"c"]
    assert _stored(tmp_path / "ns.db") == 2 and (tmp_path / "ns.db.settled").stat().st_size == 0


def test_a_transaction_leaves_the_settled_log_to_its_fold(tmp_path: Path) -> None:
    """A send's transaction does not delete what the settled log holds (a receiver settling one at a time
    while others send would delete a few ids per transaction); closing the store does."""
    clock = FakeClock()
    ns, got = _settled_then_killed(tmp_path, clock)
    ns.complete("q", [got[1].lock_token])
    ns.commit()
    assert (tmp_path / "ns.db.settled").stat().st_size == 32
    ns.send("q", Message(b"d"))
    ns.commit()
    assert _stored(tmp_path / "ns.db") == 4 and (tmp_path / "ns.db.settled").stat().st_size == 32
    assert [m.body for m in ns.peek("q", 0, 10)] == [b"c", b"d"]
    ns.close()
    assert _stored(tmp_path / "ns.db") == 2 and (tmp_path / "ns.db.settled").stat().st_size == 0
    assert [m.body for m in reopen(tmp_path / "ns.db", clock).peek("q", 0, 10)] == [b"c", b"d"]


def test_a_full_settled_log_is_deleted_from_the_database_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("local_broker.store.sqlite.FOLD_SETTLED", 2)
    clock = FakeClock()
    ns, got = _settled_then_killed(tmp_path, clock)
    ns.complete("q", [got[1].lock_token])
    ns.commit()
    assert _stored(tmp_path / "ns.db") == 3  # two in the log: full
    ns.complete("q", [got[2].lock_token])
    ns.commit()
    assert _stored(tmp_path / "ns.db") == 0 and (tmp_path / "ns.db.settled").stat().st_size == 0
    assert reopen(tmp_path / "ns.db", clock).peek("q", 0, 10) == []


def test_settled_messages_with_others_between_them_delete_only_themselves(tmp_path: Path) -> None:
    """Settled ids go as ranges of consecutive ids: a gap is a message still stored."""
    clock = FakeClock()
    ns = Namespace.open(SqliteStore(tmp_path / "ns.db"), clock=clock)
    ns.create_queue(QueueProperties("q"))
    ns.send("q", [Message(bytes([ord("a") + i])) for i in range(7)])
    ns.commit()
    got = ns.receive("q", 7)
    ns.commit()
    for i in (0, 1, 3, 5):  # one at a time, as an SDK settles: into the settled log
        ns.complete("q", [got[i].lock_token])
        ns.commit()
    ns.close()  # the log folded in
    assert _stored(tmp_path / "ns.db") == 3 and (tmp_path / "ns.db.settled").stat().st_size == 0
    assert sorted(m.body for m in reopen(tmp_path / "ns.db", clock).peek("q", 0, 10)) == [b"c", b"e", b"g"]


def test_a_torn_or_stray_settled_record_deletes_nothing(tmp_path: Path) -> None:
    clock = FakeClock()
    _, got = _settled_then_killed(tmp_path, clock)
    with open(tmp_path / "ns.db.settled", "ab") as log:
        log.write(struct.pack("<qq", got[1].uid, got[1].uid))  # fails its check
        log.write(struct.pack("<q", got[2].uid))  # half a record
    clock.advance(timedelta(minutes=5))
    again = reopen(tmp_path / "ns.db", clock)
    again.tick()
    assert sorted(m.body for m in again.receive("q", 10)) == [b"b", b"c"]


def test_deleted_entity_leaves_nothing_behind(tmp_path: Path) -> None:
    clock = FakeClock()
    ns = Namespace.open(SqliteStore(tmp_path / "ns.db"), clock=clock)
    ns.create_queue(QueueProperties("q", requires_duplicate_detection=True))
    ns.send("q", Message(b"a", message_id="a"))
    ns.commit()
    ns.delete_queue("q")
    ns.create_queue(QueueProperties("q"))
    ns.commit()
    ns2 = reopen(tmp_path / "ns.db", clock)
    assert ns2.peek("q", 0, 10) == [] and not ns2.get_queue("q").requires_duplicate_detection
    db = sqlite3.connect(tmp_path / "ns.db")
    assert db.execute("SELECT count(*) FROM messages").fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM dedup").fetchone()[0] == 0


def test_unknown_schema_version_is_refused(tmp_path: Path) -> None:
    SqliteStore(tmp_path / "ns.db").close()
    db = sqlite3.connect(tmp_path / "ns.db")
    db.execute("UPDATE schema_version SET version = 99")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="schema version 99"):
        SqliteStore(tmp_path / "ns.db")


def test_foreign_database_is_refused(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "other.db")
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="not an sbfed namespace store"):
        SqliteStore(tmp_path / "other.db")


def test_wal_mode(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "ns.db")
    assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_restored_message_state_kinds(tmp_path: Path) -> None:
    clock = FakeClock()
    ns = Namespace.open(SqliteStore(tmp_path / "ns.db"), clock=clock)
    ns.create_queue(QueueProperties("q", lock_duration=timedelta(seconds=10)))
    ns.send("q", Message(b"a", message_id="a"))
    (a,) = ns.receive("q", 1)
    ns.commit()
    ns2 = reopen(tmp_path / "ns.db", clock)
    (peeked,) = ns2.peek("q", 0, 1)
    assert peeked.lock_token == a.lock_token and peeked.state is MessageState.ACTIVE
    clock.advance(10)
    ns2.tick()  # the restored lock expires like any other
    assert ns2.receive("q", 1)[0].delivery_count == 1


def test_messages_that_vanish_on_activation_or_forwarding_leave_no_row(tmp_path: Path) -> None:
    clock = FakeClock()
    ns = Namespace.open(SqliteStore(tmp_path / "ns.db"), clock=clock)
    ns.create_topic(TopicProperties("t"))  # no subscriptions: an activated message goes nowhere
    ns.schedule("t", [Message(b"s", scheduled_enqueue_time=clock.now() + 10)])
    ns.create_queue(QueueProperties("dd", requires_duplicate_detection=True))
    ns.create_queue(QueueProperties("work", forward_dead_lettered_messages_to="dd"))
    ns.send("dd", Message(b"first", message_id="same"))
    ns.send("work", Message(b"second", message_id="same"))
    (m,) = ns.receive("work", 1)
    ns.commit()
    ns.dead_letter("work", [m.lock_token])  # forwarded into dd, where it is a duplicate and dropped
    clock.advance(10)
    ns.tick()
    ns.commit()
    ns2 = reopen(tmp_path / "ns.db", clock)
    assert ns2.get_topic_runtime_properties("t").scheduled_message_count == 0
    assert [x.body for x in ns2.peek("dd", 0, 10)] == [b"first"]
    assert ns2.get_queue_runtime_properties("work").total_message_count == 0


def test_a_commit_the_disk_cannot_hold_rolls_the_namespace_back(tmp_path: Path) -> None:
    """SQLite's page limit fails a commit the way a full disk does ("database or disk is full")."""
    store = SqliteStore(tmp_path / "ns.db")
    ns = Namespace.open(store, clock=FakeClock())
    ns.create_queue(QueueProperties("q"))
    ns.send("q", [Message(b"kept-1"), Message(b"kept-2")])
    ns.commit()
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages}")
    ns.send("q", Message(b"x" * 200_000))
    ns.create_queue(QueueProperties("made-in-the-failed-turn"))
    with pytest.raises(StoreFullError, match="storage is full"):
        ns.commit()
    # Back at the last commit: the failed turn's message and queue are gone, in memory as on disk.
    assert [m.body for m in ns.peek("q", 0, 10)] == [b"kept-1", b"kept-2"]
    assert [q.name for q in ns.list_queues()] == ["q"]
    assert not store.reserve_path.exists()  # given back to the filesystem for settlements
    # Sends are refused at once now; receive + complete of a stored message still commits.
    with pytest.raises(StoreFullError):
        ns.send("q", Message(b"refused"))
    [first] = ns.receive("q", 1)
    ns.complete("q", [first.lock_token])
    ns.commit()
    assert [m.body for m in reopen(tmp_path / "ns.db", FakeClock()).peek("q", 0, 10)] == [b"kept-2"]


def test_amqp_types_of_a_message_survive_a_restart(tmp_path: Path) -> None:
    """What the AMQP adapter keeps in its own types (an int32 property, a described TimeSpan, the
    properties section's fields the engine does not read) comes back so after a restart."""
    clock = FakeClock()
    path = tmp_path / "ns.db"
    ns = Namespace.open(SqliteStore(path), NamespaceConfig(name="primary"), clock)
    ns.create_queue(QueueProperties("q"))
    timespan = Described(symbol("com.microsoft:timespan"), 10_000_000)
    kept = {"content_encoding": "gzip", "group_sequence": uint(3), "message_id": uuid.UUID(int=5)}
    ns.send("q", Message(b"x", {"i": int32(7), "t": timespan}, amqp_properties=kept,
                         message_id=str(uuid.UUID(int=5))))
    ns.commit()
    (restored,) = reopen(path, clock).peek("q", 1, 1)
    properties = restored.application_properties
    assert (type(properties["i"]), properties["t"]) == (int32, timespan)
    assert type(properties["t"].descriptor) is symbol
    assert restored.amqp_properties == kept and type(restored.amqp_properties["group_sequence"]) is uint
