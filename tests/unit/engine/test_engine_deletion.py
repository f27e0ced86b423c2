"""Batch deletion (delete_messages): oldest first, only unlocked active messages enqueued before the cut-off,
the per-request limit of the tier, sub-queues and sessions, lazy topic copies, and durable in the store."""

from __future__ import annotations

import pytest

from local_broker.engine import (
    ArgumentOutOfRangeError,
    FakeClock,
    Namespace,
    NamespaceConfig,
    NotAllowedError,
    QueueProperties,
    ReceiveMode,
    SubscriptionProperties,
    TopicProperties,
)
from local_broker.store import SqliteStore
from tests.unit.engine.helpers import ids, msg


def send(ns: Namespace, path: str, clock: FakeClock, *names: str, **kwargs) -> None:
    for name in names:
        ns.send(path, msg(name, message_id=name, **kwargs))
        clock.advance(1)


def remaining(ns: Namespace, path: str) -> list[str | None]:
    return ids(ns.peek(path, 1, 100))


def test_deletes_the_oldest_first_up_to_the_count(ns, clock, queue) -> None:
    send(ns, queue, clock, "a", "b", "c", "d")
    assert ns.delete_messages(queue, 3) == 3
    assert remaining(ns, queue) == ["d"]
    assert ns.delete_messages(queue, 3) == 1
    assert ns.delete_messages(queue, 3) == 0


def test_only_messages_enqueued_before_the_cut_off(ns, clock, queue) -> None:
    send(ns, queue, clock, "a", "b")
    cut_off = clock.now()
    send(ns, queue, clock, "c")
    assert ns.delete_messages(queue, 10, cut_off) == 2
    assert remaining(ns, queue) == ["c"]


def test_locked_deferred_and_scheduled_messages_stay(ns, clock, queue) -> None:
    send(ns, queue, clock, "locked", "deferred", "active")
    locked, deferred = ns.receive(queue, 2)
    ns.defer(queue, [deferred.lock_token])
    ns.schedule(queue, [msg("scheduled", message_id="scheduled",
                            scheduled_enqueue_time=clock.now() + 3600)])
    clock.advance(1)
    assert ns.delete_messages(queue, 10) == 1
    assert remaining(ns, queue) == ["locked", "deferred", "scheduled"]
    ns.complete(queue, [locked.lock_token])  # the lock still holds


def test_the_request_limit_is_the_tiers(clock) -> None:
    for premium, limit in ((False, 500), (True, 4000)):
        ns = Namespace(NamespaceConfig(premium=premium), clock=clock)
        ns.create_queue(QueueProperties("q"))
        assert ns.delete_messages("q", limit) == 0
        for wrong in (0, limit + 1):
            with pytest.raises(ArgumentOutOfRangeError):
                ns.delete_messages("q", wrong)


def test_dead_letter_sub_queue_and_one_session(ns, clock) -> None:
    ns.create_queue(QueueProperties("s", requires_session=True))
    send(ns, "s", clock, "a1", session_id="A")
    send(ns, "s", clock, "b1", "b2", session_id="B")
    assert ns.delete_messages("s", 10, session_id="B") == 2
    assert remaining(ns, "s") == ["a1"]
    ns.create_queue(QueueProperties("d"))
    send(ns, "d", clock, "x", "y")
    [x] = ns.receive("d", 1)
    ns.dead_letter("d", [x.lock_token], "r", "why")
    clock.advance(1)
    assert ns.delete_messages("d/$DeadLetterQueue", 10) == 1
    assert remaining(ns, "d/$DeadLetterQueue") == [] and remaining(ns, "d") == ["y"]


def test_a_subscriptions_lazy_copies_are_deleted_and_not_the_others(ns, clock) -> None:
    ns.create_topic(TopicProperties("t"))
    for name in ("s1", "s2"):
        ns.create_subscription("t", SubscriptionProperties(name))
    send(ns, "t", clock, "m1", "m2")
    assert ns.delete_messages("t/Subscriptions/s1", 1) == 1
    assert remaining(ns, "t/Subscriptions/s1") == ["m2"]
    assert remaining(ns, "t/Subscriptions/s2") == ["m1", "m2"]
    assert ids(ns.receive("t/Subscriptions/s1", 5, ReceiveMode.RECEIVE_AND_DELETE)) == ["m2"]


def test_partitioned_entities_are_refused(ns, clock) -> None:
    ns.create_queue(QueueProperties("p", enable_partitioning=True))
    with pytest.raises(NotAllowedError):
        ns.delete_messages("p", 1)


def test_deletions_are_durable(tmp_path, clock) -> None:
    ns = Namespace.open(SqliteStore(tmp_path / "ns.db"), clock=clock)
    ns.create_queue(QueueProperties("q"))
    send(ns, "q", clock, "a", "b", "c")
    ns.commit()
    assert ns.delete_messages("q", 2) == 2
    ns.close()
    again = Namespace.open(SqliteStore(tmp_path / "ns.db"), clock=clock)
    assert remaining(again, "q") == ["c"]
    again.close()


def test_the_backlog_in_the_store_is_deleted_too(tmp_path, clock, monkeypatch) -> None:
    """A queue whose backlog went beyond the window into the store (paging.py): deletion reads it in."""
    for module in ("placement", "fanout", "paging"):
        monkeypatch.setattr(f"local_broker.engine.{module}.WINDOW", 3)
    monkeypatch.setattr("local_broker.engine.paging.PAGE", 2)
    ns = Namespace.open(SqliteStore(tmp_path / "ns.db"), clock=clock)
    ns.create_queue(QueueProperties("q"))
    send(ns, "q", clock, *(f"m{i}" for i in range(10)))
    ns.commit()
    assert ns.delete_messages("q", 8) == 8
    ns.commit()
    assert remaining(ns, "q") == ["m8", "m9"]
    ns.close()
    again = Namespace.open(SqliteStore(tmp_path / "ns.db"), clock=clock)
    assert ids(again.receive("q", 5, ReceiveMode.RECEIVE_AND_DELETE)) == ["m8", "m9"]
    again.close()
