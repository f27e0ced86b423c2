"""Engine-level transactions: all or nothing, partition-key rules, send-via hop count, limits."""

from __future__ import annotations

import uuid

import pytest

from local_broker.engine import (
    EntityStatus,
    MessageLockLostError,
    MessageSizeExceededError,
    Namespace,
    NotAllowedError,
    OperationTimeoutError,
    QueueProperties,
)

from .helpers import ids, msg


@pytest.fixture
def queues(ns: Namespace) -> None:
    ns.create_queue(QueueProperties("in"))
    ns.create_queue(QueueProperties("out"))


def test_receive_then_complete_and_send_commit_together(ns: Namespace, queues: None) -> None:
    ns.send("in", msg(message_id="order"))
    (m,) = ns.receive("in", 1)
    txn = ns.transaction()
    txn.complete("in", [m.lock_token])
    txn.send("out", msg(message_id="shipment"))
    assert ns.peek("out", 0, 5) == []  # nothing happens before the commit
    ns.commit_transaction(txn)
    assert ns.peek("in", 0, 5) == [] and ids(ns.peek("out", 0, 5)) == ["shipment"]


def test_a_lost_lock_fails_the_whole_transaction(ns: Namespace, queues: None) -> None:
    ns.send("in", msg(message_id="order"))
    (m,) = ns.receive("in", 1)
    txn = ns.transaction()
    txn.send("out", msg(message_id="shipment"))
    txn.complete("in", [m.lock_token, uuid.uuid4()])
    with pytest.raises(MessageLockLostError):
        ns.commit_transaction(txn)
    assert ns.peek("out", 0, 5) == []
    ns.complete("in", [m.lock_token])  # the message was not settled either


def test_a_bad_send_fails_the_whole_transaction(ns: Namespace, queues: None) -> None:
    ns.send("in", msg())
    (m,) = ns.receive("in", 1)
    txn = ns.transaction()
    txn.complete("in", [m.lock_token])
    txn.send("out", msg(b"x" * 300 * 1024))
    with pytest.raises(MessageSizeExceededError):
        ns.commit_transaction(txn)
    assert len(ns.peek("in", 0, 5)) == 1


def test_settle_twice_and_dead_letter_kinds(ns: Namespace, queues: None) -> None:
    ns.send("in", [msg(message_id="a"), msg(message_id="b"), msg(message_id="c")])
    a, b, c = ns.receive("in", 3)
    txn = ns.transaction()
    txn.complete("in", [a.lock_token])
    txn.abandon("in", [a.lock_token])
    with pytest.raises(NotAllowedError):
        ns.commit_transaction(txn)
    txn = ns.transaction()
    txn.dead_letter("in", [a.lock_token], "r", "d")
    txn.defer("in", [b.lock_token])
    txn.abandon("in", [c.lock_token], {"k": 1})
    ns.commit_transaction(txn)
    rt = ns.get_queue_runtime_properties("in")
    assert (rt.dead_letter_message_count, rt.active_message_count) == (1, 2)


def test_message_limit_and_timeout(ns: Namespace, queues: None, clock) -> None:
    txn = ns.transaction()
    txn.send("out", [msg() for _ in range(101)])
    with pytest.raises(NotAllowedError, match="Can't send more than 100 messages"):
        ns.commit_transaction(txn)
    txn = ns.transaction()
    txn.send("out", msg())
    clock.advance(121)
    with pytest.raises(OperationTimeoutError):
        ns.commit_transaction(txn)
    assert ns.peek("out", 0, 5) == []


def test_partitioned_destination_needs_one_key(ns: Namespace) -> None:
    ns.create_queue(QueueProperties("pq", enable_partitioning=True))
    txn = ns.transaction()
    txn.send("pq", msg())
    with pytest.raises(NotAllowedError, match="need a partition key"):
        ns.commit_transaction(txn)
    txn = ns.transaction()
    txn.send("pq", [msg(partition_key="a"), msg(partition_key="b")])
    with pytest.raises(NotAllowedError, match="share one partition key"):
        ns.commit_transaction(txn)
    txn = ns.transaction()
    txn.send("pq", [msg(session_id="s1"), msg(session_id="s2")])
    with pytest.raises(NotAllowedError, match="may not span sessions"):
        ns.commit_transaction(txn)
    txn = ns.transaction()
    txn.send("pq", [msg(partition_key="a"), msg(partition_key="a")])
    ns.commit_transaction(txn)
    assert len({m.partition_id for m in ns.peek("pq", 0, 10)}) == 1


def test_send_via_raises_hop_count_and_failures_land_on_the_via(ns: Namespace, queues: None) -> None:
    ns.create_queue(QueueProperties("via"))
    txn = ns.transaction()
    txn.send("out", msg(message_id="direct"), via="via")
    ns.commit_transaction(txn)
    (m,) = ns.peek("out", 0, 5)
    assert m.message_id == "direct" and m.hop_count == 1
    assert ns.get_queue_runtime_properties("via").total_message_count == 0  # never visible on the via
    props = ns.get_queue("out")
    props.status = EntityStatus.DISABLED
    ns.update_queue(props)
    txn = ns.transaction()
    txn.send("out", msg(message_id="blocked"), via="via")
    ns.commit_transaction(txn)
    assert ids(ns.peek("via/$Transfer/$DeadLetterQueue", 0, 5)) == ["blocked"]
