"""A main sub-queue's backlog stays in the SQLite store (local_broker/engine/paging.py): a small window in
memory, the rest counted and read in order when the window runs out, after a restart too."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from local_broker.engine import (
    FakeClock,
    Message,
    Namespace,
    QueueProperties,
    ReceiveMode,
    SubscriptionProperties,
    TopicProperties,
)
from local_broker.store import SqliteStore


@pytest.fixture(autouse=True)
def small_window(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in ("placement", "fanout", "paging"):
        monkeypatch.setattr(f"local_broker.engine.{module}.WINDOW", 3)
    monkeypatch.setattr("local_broker.engine.paging.PAGE", 2)


def opened(path: Path, clock: FakeClock) -> Namespace:
    return Namespace.open(SqliteStore(path), clock=clock)


def send(ns: Namespace, path: str, ids: range, **fields) -> None:
    ns.send(path, [Message(b"body-%d" % i, {"n": i}, message_id=f"m{i}", **fields) for i in ids])


def ids(messages: list[Message]) -> list[str]:
    return [m.message_id for m in messages]


def test_a_backlog_beyond_the_window_leaves_memory_once_written(tmp_path: Path) -> None:
    ns = opened(tmp_path / "ns.db", FakeClock())
    ns.create_queue(QueueProperties("q"))
    send(ns, "q", range(10))
    sq = ns._queues["q"].main
    assert len(sq.messages) == 3 and len(sq.tail.pending) == 7  # not written yet: still in memory
    ns.commit()
    assert len(sq.messages) == 3 and not sq.tail.pending and sq.tail.count == 7
    rp = ns.get_queue_runtime_properties("q")
    assert rp.active_message_count == 10 and rp.size_in_bytes == sq.size == sum(
        m.size for m in ns.peek("q", 0, 100)
    )
    assert ids(ns.peek("q", 0, 100)) == [f"m{i}" for i in range(10)]
    assert ids(ns.peek("q", 5, 2)) == ["m4", "m5"]  # sequence numbers start at 1
    send(ns, "q", range(10, 12))  # arrivals after a tail join it, in order
    got = ns.receive("q", 100)
    assert ids(got) == [f"m{i}" for i in range(12)]
    assert [m.body for m in got[3:5]] == [b"body-3", b"body-4"]
    ns.complete("q", [m.lock_token for m in got])
    ns.commit()
    assert ns.get_queue_runtime_properties("q").total_message_count == 0 == sq.size


def test_receiving_before_the_commit_takes_pending_messages_in_order(tmp_path: Path) -> None:
    ns = opened(tmp_path / "ns.db", FakeClock())
    ns.create_queue(QueueProperties("q"))
    send(ns, "q", range(5))
    ns.commit()
    send(ns, "q", range(5, 8))
    first = ns.receive("q", 6)
    assert ids(first) == [f"m{i}" for i in range(6)]
    ns.complete("q", [m.lock_token for m in first])
    ns.commit()  # m5 was written and settled: gone; m6, m7 stay
    ns.close()
    ns = opened(tmp_path / "ns.db", FakeClock())
    assert ids(ns.receive("q", 10, ReceiveMode.RECEIVE_AND_DELETE)) == ["m6", "m7"]


def test_a_restart_counts_the_backlog_and_loads_only_what_has_a_state(tmp_path: Path) -> None:
    clock = FakeClock()
    ns = opened(tmp_path / "ns.db", clock)
    ns.create_queue(QueueProperties("q", lock_duration=timedelta(minutes=1)))
    send(ns, "q", range(2))
    ns.commit()
    _, m1 = ns.receive("q", 2)
    ns.defer("q", [m1.lock_token])
    ns.schedule("q", Message(b"later", message_id="later", scheduled_enqueue_time=clock.now() + 30))
    send(ns, "q", range(2, 20))
    ns.commit()
    size = ns.get_queue_runtime_properties("q").size_in_bytes
    ns.close()

    ns = opened(tmp_path / "ns.db", clock)
    sq = ns._queues["q"].main
    assert sorted(m.message_id for m in sq.messages.values()) == ["later", "m0", "m1"]  # locked, deferred
    assert sq.tail.count == 18
    rp = ns.get_queue_runtime_properties("q")
    assert (rp.active_message_count, rp.scheduled_message_count, rp.size_in_bytes) == (20, 1, size)
    assert ids(ns.peek("q", 0, 5)) == ["m0", "m1", "later", "m2", "m3"]
    ns.complete("q", [ns.peek("q", 0, 1)[0].lock_token])  # the lock survived the restart
    assert ids(ns.receive_deferred("q", [2])) == ["m1"]
    clock.advance(30)
    ns.tick()
    assert ids(ns.receive("q", 100)) == [f"m{i}" for i in range(2, 20)] + ["later"]


def test_a_restored_message_settled_since_is_not_read_back_while_only_the_settled_log_holds_it(
    tmp_path: Path,
) -> None:
    """Its row is plain (its lock is a message_states row) and numbered after what the tail has read, so
    the store's page query finds it; the settled log, not yet folded, is what says it is gone."""
    clock = FakeClock()
    ns = opened(tmp_path / "ns.db", clock)
    ns.create_queue(QueueProperties("q", lock_duration=timedelta(minutes=1)))
    send(ns, "q", range(8))
    ns.commit()
    ns.receive("q", 1)
    ns.commit()
    ns.close()

    ns = opened(tmp_path / "ns.db", clock)
    (m0,) = ns._queues["q"].main.messages.values()  # restored locked; m1-m7 in the store
    ns.complete("q", [m0.lock_token])
    ns.commit()
    assert (tmp_path / "ns.db.settled").stat().st_size == 16  # logged, still in the database
    assert ids(ns.peek("q", 0, 100)) == [f"m{i}" for i in range(1, 8)]
    got = ns.receive("q", 100)
    assert ids(got) == [f"m{i}" for i in range(1, 8)]
    assert ns.get_queue_runtime_properties("q").active_message_count == 7


def test_the_tail_expires_as_it_is_read(tmp_path: Path) -> None:
    clock = FakeClock()
    ns = opened(tmp_path / "ns.db", clock)
    ns.create_queue(QueueProperties("q", dead_lettering_on_message_expiration=True))
    send(ns, "q", range(6), time_to_live=10.0)
    send(ns, "q", range(6, 8))
    ns.commit()
    clock.advance(11)
    assert ids(ns.receive("q", 10)) == ["m6", "m7"]
    assert ids(ns.peek("q/$DeadLetterQueue", 0, 10)) == [f"m{i}" for i in range(6)]


def test_a_subscription_reads_its_restored_copies_before_new_lazy_ones(tmp_path: Path) -> None:
    clock = FakeClock()
    ns = opened(tmp_path / "ns.db", clock)
    ns.create_topic(TopicProperties("t"))
    for name in "ab":
        ns.create_subscription("t", SubscriptionProperties(name))
    send(ns, "t", range(6))
    ns.commit()
    ns.close()
    ns = opened(tmp_path / "ns.db", clock)
    assert ns._topics["t"].subscriptions["a"].main.tail.count == 6
    send(ns, "t", range(6, 8))  # lazy copies: newer than the tail
    ns.commit()
    assert ids(ns.peek("t/Subscriptions/a", 0, 100)) == [f"m{i}" for i in range(8)]
    a = ns.receive("t/Subscriptions/a", 100)
    assert ids(a) == [f"m{i}" for i in range(8)]
    (b0,) = ns.peek("t/Subscriptions/b", 0, 1)
    assert b0.content is a[0].content  # copies read at different times share their stored content


def test_sessions_and_partitions_keep_their_messages_in_memory_across_a_restart(tmp_path: Path) -> None:
    clock = FakeClock()
    ns = opened(tmp_path / "ns.db", clock)
    ns.create_queue(QueueProperties("sq", requires_session=True))
    ns.create_queue(QueueProperties("pq", enable_partitioning=True))
    send(ns, "sq", range(6), session_id="s")
    send(ns, "pq", range(6), partition_key="k")
    ns.commit()
    ns.close()
    ns = opened(tmp_path / "ns.db", clock)
    assert ns._queues["sq"].main.tail is None and len(ns._queues["sq"].main.messages) == 6
    assert ns._queues["pq"].main.tail is None and len(ns._queues["pq"].main.messages) == 6
    lock = ns.accept_session("sq", None, "me")
    assert ids(ns.receive("sq", 10, session=lock)) == [f"m{i}" for i in range(6)]
    assert ids(ns.receive("pq", 10)) == [f"m{i}" for i in range(6)]


def test_deleting_an_entity_forgets_its_unwritten_and_pending_messages(tmp_path: Path) -> None:
    ns = opened(tmp_path / "ns.db", FakeClock())
    ns.create_queue(QueueProperties("q"))
    ns.commit()
    send(ns, "q", range(5))  # 3 in the window, 2 pending: none written yet
    ns.delete_queue("q")
    ns.commit()
    ns.create_queue(QueueProperties("q"))
    ns.commit()
    ns.close()
    ns = opened(tmp_path / "ns.db", FakeClock())
    assert ns.get_queue_runtime_properties("q").total_message_count == 0
    assert ns.peek("q", 0, 10) == []


def test_a_subscriptions_lazy_copies_beyond_the_window_leave_memory_once_written(tmp_path: Path) -> None:
    clock = FakeClock()
    ns = opened(tmp_path / "ns.db", clock)
    ns.create_topic(TopicProperties("t"))
    for name in "ab":
        ns.create_subscription("t", SubscriptionProperties(name))
    send(ns, "t", range(5))  # lazy copies: the topic messages themselves, until the commit wrote their rows
    a = ns._topics["t"].subscriptions["a"].main
    assert len(a.lazy) == 5 and a.tail.count == 0
    ns.commit()
    assert len(a.lazy) == 0 and a.tail.count == 5 and not a.messages
    send(ns, "t", range(5, 7))  # newer lazy copies stay lazy behind the tail
    assert ids(ns.peek("t/Subscriptions/a", 0, 100)) == [f"m{i}" for i in range(7)]
    assert ns.get_subscription_runtime_properties("t", "a").active_message_count == 7
    got = ns.receive("t/Subscriptions/a", 100)
    assert ids(got) == [f"m{i}" for i in range(7)]
    ns.complete("t/Subscriptions/a", [m.lock_token for m in got])
    ns.commit()
    b = ns.receive("t/Subscriptions/b", 100, ReceiveMode.RECEIVE_AND_DELETE)
    assert ids(b) == [f"m{i}" for i in range(7)]


def test_lazy_copies_given_records_while_the_store_holds_older_ones_queue_behind_them(tmp_path: Path) -> None:
    clock = FakeClock()
    ns = opened(tmp_path / "ns.db", clock)
    ns.create_topic(TopicProperties("t"))
    ns.create_subscription("t", SubscriptionProperties("a"))
    send(ns, "t", range(5))
    ns.commit()  # copies 0-4 in the store
    send(ns, "t", range(5, 7))
    ns.create_subscription("t", SubscriptionProperties("b"))  # a plan change: copies 5, 6 get records
    send(ns, "t", range(7, 8))
    assert ids(ns.receive("t/Subscriptions/a", 100)) == [f"m{i}" for i in range(8)]


def test_forwarded_and_scheduled_arrivals_join_the_destinations_tail_in_order(tmp_path: Path) -> None:
    clock = FakeClock()
    ns = opened(tmp_path / "ns.db", clock)
    ns.create_queue(QueueProperties("dst"))
    ns.create_queue(QueueProperties("src", forward_to="dst"))
    send(ns, "src", range(6))
    ns.schedule("dst", Message(b"later", message_id="later", scheduled_enqueue_time=clock.now() + 10))
    ns.commit()
    ns.close()
    ns = opened(tmp_path / "ns.db", clock)
    assert ns._queues["dst"].main.tail.count == 6
    clock.advance(10)
    ns.tick()  # activated behind the six in the store
    send(ns, "src", range(6, 8))
    ns.commit()
    got = ns.receive("dst", 100)
    assert ids(got) == [f"m{i}" for i in range(6)] + ["later", "m6", "m7"]
    assert [m.hop_count for m in got[:2]] == [1, 1]
