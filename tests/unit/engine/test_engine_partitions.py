"""Partitioned entities: 16 sequence spaces, partition keys, quotas, a partition taken down."""

from __future__ import annotations

from pathlib import Path

import pytest

from local_broker.engine import (
    ArgumentError,
    AvailabilityStatus,
    FakeClock,
    Namespace,
    NamespaceConfig,
    QueueProperties,
    QuotaExceededError,
    ReceiveMode,
    ServerBusyError,
    SubscriptionProperties,
    TopicProperties,
)
from local_broker.store import SqliteStore

from .helpers import ids, msg

SHIFT = 48


@pytest.fixture
def pq(ns: Namespace) -> str:
    ns.create_queue(QueueProperties("pq", enable_partitioning=True))
    return "pq"


def test_keyless_sends_round_robin_with_partition_in_sequence_numbers(ns: Namespace, pq: str) -> None:
    ns.send(pq, [msg(message_id=str(i)) for i in range(32)])
    got = ns.receive(pq, 100, ReceiveMode.RECEIVE_AND_DELETE)
    assert sorted(ids(got), key=int) == [str(i) for i in range(32)]
    partitions = [m.partition_id for m in got]
    assert sorted(set(partitions)) == list(range(16))
    for m in got:
        assert m.sequence_number >> SHIFT == m.partition_id
        assert m.sequence_number & ((1 << SHIFT) - 1) in (1, 2)  # each partition counts on its own


def test_same_key_same_partition(ns: Namespace, pq: str) -> None:
    ns.send(pq, [msg(session_id=None, partition_key="k1") for _ in range(5)])
    ns.create_queue(QueueProperties("ps", enable_partitioning=True, requires_session=True))
    ns.send("ps", [msg(session_id="s1") for _ in range(5)])
    assert len({m.partition_id for m in ns.peek(pq, 0, 10)}) == 1
    lock = ns.accept_session("ps", "s1", "me")
    got = ns.receive("ps", 10, session=lock)
    assert len(got) == 5 and len({m.partition_id for m in got}) == 1
    assert [m.sequence_number & 0xFFFF for m in got] == [1, 2, 3, 4, 5]


def test_message_id_is_the_key_with_duplicate_detection(ns: Namespace) -> None:
    ns.create_queue(QueueProperties("pd", enable_partitioning=True, requires_duplicate_detection=True))
    ns.send("pd", [msg(message_id="same"), msg(message_id="same"), msg(message_id="other")])
    assert sorted(ids(ns.receive("pd", 10))) == ["other", "same"]


def test_max_size_is_sixteen_times(ns: Namespace) -> None:
    ns.create_queue(QueueProperties("small", enable_partitioning=True, max_size_in_megabytes=1))
    body = b"x" * (250 * 1024)
    for _ in range(65):  # 16,250 KB of the 16,384 KB (16 x 1 MB)
        ns.send("small", msg(body))
    with pytest.raises(QuotaExceededError):
        ns.send("small", msg(body))


def test_partition_down(ns: Namespace, pq: str) -> None:
    key = "k1"
    ns.send(pq, msg(partition_key=key))
    (first,) = ns.peek(pq, 0, 1)
    ns.set_partition_available(pq, first.partition_id, False)
    assert ns.get_queue_runtime_properties(pq).availability_status is AvailabilityStatus.LIMITED
    with pytest.raises(ServerBusyError) as err:
        ns.send(pq, msg(partition_key=key))
    assert err.value.amqp_condition == "com.microsoft:server-busy" and err.value.http_status == 503
    ns.send(pq, [msg(message_id=str(i)) for i in range(32)])  # keyless: all land elsewhere
    rest = [m for m in ns.receive(pq, 100) if m.partition_key is None]
    assert len(rest) == 32 and first.partition_id not in {m.partition_id for m in rest}
    ns.set_partition_available(pq, first.partition_id, True)
    assert ns.get_queue_runtime_properties(pq).availability_status is AvailabilityStatus.AVAILABLE
    ns.send(pq, msg(partition_key=key))
    with pytest.raises(ArgumentError):
        ns.set_partition_available(pq, 16, False)
    ns.create_queue(QueueProperties("plain"))
    with pytest.raises(ArgumentError):
        ns.set_partition_available("plain", 0, False)


def test_peek_returns_one_partition(ns: Namespace, pq: str) -> None:
    ns.send(pq, [msg(message_id=str(i)) for i in range(32)])
    first = ns.peek(pq, 0, 10)
    assert len(first) == 2 and {m.partition_id for m in first} == {0}
    following = ns.peek(pq, first[-1].sequence_number + 1, 10)
    assert {m.partition_id for m in following} == {1}


def test_partitioned_topic_and_forwarding_keep_the_key(ns: Namespace) -> None:
    ns.create_topic(TopicProperties("pt", enable_partitioning=True))
    ns.create_queue(QueueProperties("pdest", enable_partitioning=True))
    ns.create_subscription("pt", SubscriptionProperties("s"))
    ns.create_subscription("pt", SubscriptionProperties("f", forward_to="pdest"))
    ns.send("pt", msg(message_id="m", partition_key="key-7"))
    (copy,) = ns.peek("pt/Subscriptions/s", 0, 5)
    (forwarded,) = ns.peek("pdest", 0, 5)
    assert copy.partition_id == forwarded.partition_id is not None
    assert copy.sequence_number >> SHIFT == copy.partition_id
    assert (
        ns.get_subscription_runtime_properties("pt", "s").availability_status is AvailabilityStatus.AVAILABLE
    )
    ns.set_partition_available("pt", 3, False)
    assert ns.get_subscription_runtime_properties("pt", "s").availability_status is AvailabilityStatus.LIMITED


def test_partitioned_entity_quota(clock) -> None:
    ns = Namespace(NamespaceConfig(max_partitioned_entities=1), clock=clock)
    ns.create_queue(QueueProperties("a", enable_partitioning=True))
    with pytest.raises(QuotaExceededError):
        ns.create_topic(TopicProperties("b", enable_partitioning=True))
    ns.create_topic(TopicProperties("b"))


def test_partition_counters_survive_restart(tmp_path: Path) -> None:
    clock = FakeClock()
    ns = Namespace.open(SqliteStore(tmp_path / "ns.db"), clock=clock)
    ns.create_queue(QueueProperties("pq", enable_partitioning=True))
    ns.send("pq", [msg(partition_key="k") for _ in range(3)])
    ns.receive("pq", 3, ReceiveMode.RECEIVE_AND_DELETE)
    ns.close()
    ns2 = Namespace.open(SqliteStore(tmp_path / "ns.db"), clock=clock)
    ns2.send("pq", msg(partition_key="k"))
    (m,) = ns2.peek("pq", 0, 5)
    assert m.sequence_number & ((1 << SHIFT) - 1) == 4


def test_dedup_key_includes_the_partition_key(ns: Namespace) -> None:
    ns.create_queue(QueueProperties("pd", enable_partitioning=True, requires_duplicate_detection=True))
    ns.send("pd", [msg(message_id="m", partition_key="a"), msg(message_id="m", partition_key="b")])
    ns.send("pd", msg(message_id="m", partition_key="a"))  # duplicate of the first
    assert sorted(m.partition_key for m in ns.receive("pd", 10)) == ["a", "b"]


def test_forward_into_a_down_partition_waits_on_the_transfer_dead_letter_queue(ns: Namespace) -> None:
    ns.create_queue(QueueProperties("pdest", enable_partitioning=True))
    ns.create_queue(QueueProperties("src", forward_to="pdest"))
    ns.send("pdest", msg(partition_key="k"))
    (probe,) = ns.receive("pdest", 1, ReceiveMode.RECEIVE_AND_DELETE)
    ns.set_partition_available("pdest", probe.partition_id, False)
    ns.send("src", [msg(message_id="keyed", partition_key="k"), msg(message_id="keyless")])
    assert ids(ns.peek("src/$Transfer/$DeadLetterQueue", 0, 5)) == ["keyed"]
    assert ids(ns.receive("pdest", 5)) == ["keyless"]
    (stuck,) = ns.peek("src/$Transfer/$DeadLetterQueue", 0, 5)
    assert stuck.dead_letter_reason == "ServerBusy"
