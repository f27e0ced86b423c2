"""Queue messaging: send, receive modes, settlement, locks, delivery count, TTL, scheduling, dedup, peek."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from local_broker.engine import (
    ArgumentError,
    EntityDisabledError,
    EntityNotFoundError,
    EntityStatus,
    MessageLockLostError,
    MessageNotFoundError,
    MessageSizeExceededError,
    MessageState,
    Namespace,
    NamespaceConfig,
    NotAllowedError,
    QueueProperties,
    QuotaExceededError,
    ReceiveMode,
    SubscriptionProperties,
    TopicProperties,
)
from local_broker.engine.properties import TIMESPAN_MAX
from local_broker.store import SqliteStore

from .helpers import ids, msg


def test_peek_lock_then_complete_removes(ns: Namespace, queue: str, clock) -> None:
    ns.send(queue, [msg(message_id="a"), msg(message_id="b")])
    got = ns.receive(queue, 10)
    assert ids(got) == ["a", "b"]
    assert [m.sequence_number for m in got] == [1, 2]
    assert all(isinstance(m.lock_token, uuid.UUID) for m in got)
    assert got[0].locked_until == clock.now() + 30
    assert got[0].delivery_count == 0
    assert ns.receive(queue, 10) == []
    ns.complete(queue, [m.lock_token for m in got])
    assert ns.get_queue_runtime_properties(queue).active_message_count == 0
    assert ns.peek(queue, 0, 10) == []


def test_receive_and_delete(ns: Namespace, queue: str) -> None:
    ns.send(queue, msg(message_id="a"))
    got = ns.receive(queue, 5, ReceiveMode.RECEIVE_AND_DELETE)
    assert ids(got) == ["a"] and got[0].lock_token is None
    assert ns.get_queue_runtime_properties(queue).total_message_count == 0


def test_receive_respects_max_count_and_order(ns: Namespace, queue: str) -> None:
    ns.send(queue, [msg(message_id=str(i)) for i in range(5)])
    assert ids(ns.receive(queue, 2)) == ["0", "1"]
    assert ids(ns.receive(queue, 2)) == ["2", "3"]
    assert ids(ns.receive(queue, 2)) == ["4"]


def test_abandon_returns_to_front_with_higher_delivery_count(ns: Namespace, queue: str) -> None:
    ns.send(queue, [msg(message_id="a"), msg(message_id="b")])
    a, _b = ns.receive(queue, 2)
    ns.abandon(queue, [a.lock_token], {"why": "retry"})
    again = ns.receive(queue, 1)
    assert ids(again) == ["a"]
    assert again[0].delivery_count == 1
    assert again[0].application_properties["why"] == "retry"


def test_release_does_not_raise_delivery_count(ns: Namespace, queue: str) -> None:
    ns.send(queue, msg(message_id="a"))
    (a,) = ns.receive(queue, 1)
    ns.release(queue, [a.lock_token, uuid.uuid4()])  # unknown tokens are ignored
    (again,) = ns.receive(queue, 1)
    assert again.delivery_count == 0


def test_max_delivery_count_dead_letters(ns: Namespace, queue: str) -> None:
    ns.send(queue, msg(message_id="a"))
    for _ in range(3):
        (m,) = ns.receive(queue, 1)
        ns.abandon(queue, [m.lock_token])
    assert ns.receive(queue, 1) == []
    (dead,) = ns.receive(f"{queue}/$DeadLetterQueue", 1)
    assert dead.dead_letter_reason == "MaxDeliveryCountExceeded"
    assert (
        dead.dead_letter_error_description == "Message couldn't be consumed after maximum delivery attempts."
    )
    assert dead.sequence_number == 1
    assert dead.delivery_count == 3


def test_lock_expiry_redelivers_with_higher_count(ns: Namespace, queue: str, clock) -> None:
    ns.send(queue, msg(message_id="a"))
    (m,) = ns.receive(queue, 1)
    token = m.lock_token
    assert ns.next_deadline() == m.locked_until
    clock.advance(29)
    ns.tick()
    assert ns.receive(queue, 1) == []
    clock.advance(1)
    with pytest.raises(MessageLockLostError):
        ns.complete(queue, [token])
    ns.tick()
    (again,) = ns.receive(queue, 1)
    assert again.delivery_count == 1 and again.lock_token != token


def test_renew_lock_extends(ns: Namespace, queue: str, clock) -> None:
    ns.send(queue, msg(message_id="a"))
    (m,) = ns.receive(queue, 1)
    clock.advance(20)
    (until,) = ns.renew_lock(queue, [m.lock_token])
    assert until == clock.now() + 30
    clock.advance(20)
    ns.tick()
    ns.complete(queue, [m.lock_token])


def test_the_locked_message_is_found_by_its_token_until_the_lock_expires(ns: Namespace, queue: str,
                                                                         clock) -> None:
    ns.send(queue, [msg(message_id="a"), msg(message_id="b")])
    first, second = ns.receive(queue, 2)
    assert ns.locked_message(queue, second.lock_token).message_id == "b"
    token = first.lock_token
    assert ns.locked_message(queue, token) is first
    clock.advance(31)  # past the 30 s lock
    with pytest.raises(MessageLockLostError):
        ns.locked_message(queue, token)


def test_settling_unknown_lock_is_lock_lost(ns: Namespace, queue: str) -> None:
    ns.send(queue, msg(message_id="a"))
    (m,) = ns.receive(queue, 1)
    token = m.lock_token
    with pytest.raises(MessageLockLostError) as err:
        ns.complete(queue, [token, uuid.uuid4()])
    assert err.value.amqp_condition == "com.microsoft:message-lock-lost" and err.value.http_status == 410
    ns.complete(queue, [token])  # nothing was settled by the failed call
    with pytest.raises(MessageLockLostError):
        ns.complete(queue, [token])


def test_dead_letter_with_reason(ns: Namespace, queue: str) -> None:
    ns.send(queue, msg(message_id="a"))
    (m,) = ns.receive(queue, 1)
    ns.dead_letter(queue, [m.lock_token], "bad", "really bad", {"extra": 1})
    rt = ns.get_queue_runtime_properties(queue)
    assert (rt.active_message_count, rt.dead_letter_message_count) == (0, 1)
    (dead,) = ns.peek(f"{queue}/$deadletterqueue", 0, 5)
    assert dead.application_properties == {
        "DeadLetterReason": "bad",
        "DeadLetterErrorDescription": "really bad",
        "extra": 1,
    }
    (d,) = ns.receive(f"{queue}/$DeadLetterQueue", 1)
    with pytest.raises(NotAllowedError):
        ns.dead_letter(f"{queue}/$DeadLetterQueue", [d.lock_token], "again")
    ns.complete(f"{queue}/$DeadLetterQueue", [d.lock_token])
    assert ns.get_queue_runtime_properties(queue).dead_letter_message_count == 0


def test_defer_and_receive_deferred(ns: Namespace, queue: str) -> None:
    ns.send(queue, [msg(message_id="a"), msg(message_id="b")])
    a, b = ns.receive(queue, 2)
    ns.defer(queue, [a.lock_token])
    ns.complete(queue, [b.lock_token])
    assert ns.receive(queue, 5) == []
    (peeked,) = ns.peek(queue, 0, 5)
    assert peeked.state is MessageState.DEFERRED
    with pytest.raises(MessageNotFoundError):
        ns.receive_deferred(queue, [a.sequence_number, 99])
    (d,) = ns.receive_deferred(queue, [a.sequence_number])
    assert d.message_id == "a" and d.lock_token is not None
    with pytest.raises(MessageNotFoundError):  # locked now
        ns.receive_deferred(queue, [a.sequence_number])
    ns.abandon(queue, [d.lock_token])  # stays deferred
    assert ns.receive(queue, 5) == []
    (d,) = ns.receive_deferred(queue, [a.sequence_number], ReceiveMode.RECEIVE_AND_DELETE)
    assert ns.peek(queue, 0, 5) == []


def test_deferred_messages_do_not_expire(ns: Namespace, clock) -> None:
    ns.create_queue(QueueProperties("q", default_message_time_to_live=timedelta(seconds=10)))
    ns.send("q", msg(message_id="a"))
    (a,) = ns.receive("q", 1)
    ns.defer("q", [a.lock_token])
    clock.advance(60)
    ns.tick()
    assert [m.message_id for m in ns.receive_deferred("q", [a.sequence_number])] == ["a"]


def test_ttl_drops_or_dead_letters(ns: Namespace, clock) -> None:
    ns.create_queue(QueueProperties("drop", default_message_time_to_live=timedelta(seconds=60)))
    ns.create_queue(QueueProperties("keep", dead_lettering_on_message_expiration=True))
    ns.send("drop", [msg(message_id="short", time_to_live=5), msg(message_id="long", time_to_live=600)])
    ns.send("keep", msg(message_id="k", time_to_live=5))
    (m,) = ns.peek("drop", 0, 1)
    assert m.expires_at == clock.now() + 5
    clock.advance(5)
    ns.tick()
    assert ids(ns.peek("drop", 0, 5)) == ["long"]  # capped at the entity's 60 s
    assert ns.peek("drop", 0, 5)[0].expires_at == clock.now() - 5 + 60
    (dead,) = ns.peek("keep/$DeadLetterQueue", 0, 5)
    assert dead.dead_letter_reason == "TTLExpiredException"
    assert dead.dead_letter_error_description == "The message expired and was dead-lettered."
    clock.advance(60)
    ns.tick()
    assert ns.peek("drop", 0, 5) == []
    assert len(ns.peek("keep/$DeadLetterQueue", 0, 5)) == 1  # the DLQ does not expire


def test_messages_with_one_deadline_expire_together_and_settled_ones_leave_it(ns: Namespace, clock) -> None:
    """A batch (or the copies of a topic message) shares one expiry entry; settling part of it keeps the
    deadline for the rest, settling all of it clears the deadline."""
    ns.create_queue(QueueProperties("q", dead_lettering_on_message_expiration=True))
    ns.send("q", [msg(message_id=str(n), time_to_live=10) for n in range(3)])
    first_two = ns.receive("q", 2)
    ns.complete("q", [m.lock_token for m in first_two])
    assert ns.next_deadline() == clock.now() + 10
    (last,) = ns.receive("q", 1)
    ns.complete("q", [last.lock_token])
    assert ns.next_deadline() is None
    ns.send("q", [msg(message_id="a", time_to_live=10), msg(message_id="b", time_to_live=10)])
    ns.create_topic(TopicProperties("t", default_message_time_to_live=timedelta(seconds=10)))
    for name in ("s1", "s2", "s3"):
        ns.create_subscription("t", SubscriptionProperties(name, dead_lettering_on_message_expiration=True))
    ns.send("t", msg(message_id="c"))
    (c,) = ns.receive("t/Subscriptions/s2", 1)
    ns.complete("t/Subscriptions/s2", [c.lock_token])
    clock.advance(10)
    ns.tick()
    assert ids(ns.peek("q/$DeadLetterQueue", 0, 10)) == ["a", "b"]
    for name, dead in (("s1", ["c"]), ("s2", []), ("s3", ["c"])):
        assert ids(ns.peek(f"t/Subscriptions/{name}/$DeadLetterQueue", 0, 10)) == dead
    assert ns.next_deadline() is None


def test_an_expiry_no_clock_can_show_is_not_a_deadline(ns: Namespace, clock) -> None:
    """The default time to live (TimeSpan.MaxValue) puts a message's expiry past 9999-12-31: it is reported,
    but nothing waits for it (no heap entry per batch or topic message held until purged)."""
    ns.create_queue(QueueProperties("q"))
    ns.create_topic(TopicProperties("t"))
    ns.create_subscription("t", SubscriptionProperties("s"))
    ns.send("q", [msg(message_id="a"), msg(message_id="b")])
    ns.send("t", msg(message_id="c"))
    (a, _) = ns.peek("q", 0, 2)
    assert a.expires_at == clock.now() + TIMESPAN_MAX.total_seconds()
    assert a.expires_at > datetime.max.replace(tzinfo=UTC).timestamp()
    assert ns.next_deadline() is None
    ns.send("q", msg(message_id="d", time_to_live=10))
    assert ns.next_deadline() == clock.now() + 10


def test_a_message_due_now_expires_after_an_earlier_one_due_now_did(ns: Namespace, clock) -> None:
    ns.create_queue(QueueProperties("q"))
    ns.send("q", msg(message_id="a", time_to_live=0))
    ns.tick()
    ns.send("q", msg(message_id="b", time_to_live=0))  # the same deadline, whose entry already left
    assert ns.next_deadline() == clock.now()
    ns.tick()
    assert ns.get_queue_runtime_properties("q").active_message_count == 0


def test_expired_message_is_not_received_even_before_tick(ns: Namespace, clock) -> None:
    ns.create_queue(QueueProperties("q"))
    ns.send("q", [msg(message_id="a", time_to_live=1), msg(message_id="b")])
    clock.advance(2)
    assert ids(ns.receive("q", 5)) == ["b"]


def test_locked_message_expires_only_after_lock(ns: Namespace, clock) -> None:
    ns.create_queue(
        QueueProperties("q", lock_duration=timedelta(seconds=30), dead_lettering_on_message_expiration=True)
    )
    ns.send("q", msg(message_id="a", time_to_live=10))
    (m,) = ns.receive("q", 1)
    clock.advance(15)
    ns.tick()
    ns.renew_lock("q", [m.lock_token])  # still locked, not expired under lock
    ns.abandon("q", [m.lock_token])
    assert ns.get_queue_runtime_properties("q").dead_letter_message_count == 1


def test_scheduled_message_activates_with_new_sequence_number(ns: Namespace, queue: str, clock) -> None:
    (seq,) = ns.schedule(queue, [msg(message_id="later", scheduled_enqueue_time=clock.now() + 60)])
    ns.send(queue, msg(message_id="now"))
    rt = ns.get_queue_runtime_properties(queue)
    assert (rt.scheduled_message_count, rt.active_message_count) == (1, 1)
    scheduled = [m for m in ns.peek(queue, 0, 10) if m.state is MessageState.SCHEDULED]
    assert [m.sequence_number for m in scheduled] == [seq]
    (now,) = ns.receive(queue, 5)
    ns.complete(queue, [now.lock_token])
    assert ns.next_deadline() == clock.now() + 60
    clock.advance(60)
    ns.tick()
    (later,) = ns.receive(queue, 5)
    assert later.message_id == "later" and later.sequence_number > seq
    assert later.enqueued_time == clock.now()


def test_send_with_future_schedule_time_is_scheduled(ns: Namespace, queue: str, clock) -> None:
    ns.send(queue, msg(message_id="s", scheduled_enqueue_time=clock.now() + 10))
    ns.send(queue, msg(message_id="past", scheduled_enqueue_time=clock.now() - 10))
    assert ids(ns.receive(queue, 5)) == ["past"]
    clock.advance(10)
    ns.tick()
    assert ids(ns.receive(queue, 5)) == ["s"]


def test_cancel_scheduled(ns: Namespace, queue: str, clock) -> None:
    seqs = ns.schedule(
        queue, [msg(message_id=str(i), scheduled_enqueue_time=clock.now() + 5) for i in range(3)]
    )
    ns.cancel_scheduled(queue, [seqs[0], seqs[2], 12345])
    clock.advance(5)
    ns.tick()
    assert ids(ns.receive(queue, 5)) == ["1"]
    assert ns.get_queue_runtime_properties(queue).scheduled_message_count == 0


def test_duplicate_detection_within_window(ns: Namespace, clock) -> None:
    ns.create_queue(
        QueueProperties(
            "dd",
            requires_duplicate_detection=True,
            duplicate_detection_history_time_window=timedelta(seconds=60),
        )
    )
    ns.send("dd", [msg(message_id="a"), msg(message_id="a"), msg(message_id="b")])
    clock.advance(30)
    ns.send("dd", msg(message_id="a"))  # accepted and dropped
    assert ids(ns.receive("dd", 10, ReceiveMode.RECEIVE_AND_DELETE)) == ["a", "b"]
    clock.advance(31)
    ns.tick()
    ns.send("dd", msg(message_id="a"))
    assert ids(ns.receive("dd", 10, ReceiveMode.RECEIVE_AND_DELETE)) == ["a"]


def test_duplicate_detection_off_keeps_duplicates(ns: Namespace, queue: str) -> None:
    ns.send(queue, [msg(message_id="a"), msg(message_id="a")])
    assert ids(ns.receive(queue, 10)) == ["a", "a"]


def test_peek_from_sequence_number_without_locking(ns: Namespace, queue: str) -> None:
    ns.send(queue, [msg(message_id=str(i)) for i in range(5)])
    (locked,) = ns.receive(queue, 1)
    assert ids(ns.peek(queue, 0, 2)) == ["0", "1"]
    assert ids(ns.peek(queue, 3, 10)) == ["2", "3", "4"]
    peeked = ns.peek(queue, 0, 10)
    assert all(m.delivery_count == 0 for m in peeked)
    ns.complete(queue, [locked.lock_token])


def test_message_size_limit(ns: Namespace, queue: str) -> None:
    with pytest.raises(MessageSizeExceededError) as err:
        ns.send(queue, msg(b"x" * (256 * 1024)))
    assert err.value.http_status == 413
    ns.send(queue, msg(b"x" * (255 * 1024)))


def test_premium_namespace_allows_bigger_messages(clock) -> None:
    ns = Namespace(NamespaceConfig(premium=True, max_message_size_in_kilobytes=1024), clock=clock)
    ns.create_queue(QueueProperties("big", max_message_size_in_kilobytes=2048))
    ns.send("big", msg(b"x" * (1500 * 1024)))
    assert ns.get_queue("big").max_message_size_in_kilobytes == 2048


def test_batch_is_atomic(ns: Namespace, queue: str) -> None:
    with pytest.raises(MessageSizeExceededError):
        ns.send(queue, [msg(message_id="ok"), msg(b"x" * (300 * 1024))])
    assert ns.peek(queue, 0, 10) == []


def test_entity_quota(ns: Namespace) -> None:
    ns.create_queue(QueueProperties("small", max_size_in_megabytes=1))
    body = b"x" * (200 * 1024)
    for _ in range(5):
        ns.send("small", msg(body))
    with pytest.raises(QuotaExceededError) as err:
        ns.send("small", msg(body))
    assert err.value.amqp_condition == "amqp:resource-limit-exceeded"
    assert "Max entity size in bytes:1048576" in err.value.description
    ns.receive("small", 1, ReceiveMode.RECEIVE_AND_DELETE)
    ns.send("small", msg(body))


def test_namespace_quota_counts_every_entity(clock) -> None:
    ns = Namespace(NamespaceConfig(max_size_in_megabytes=1), clock=clock)
    ns.create_queue(QueueProperties("a"))
    ns.create_topic(TopicProperties("t"))
    ns.create_subscription("t", SubscriptionProperties("s"))
    body = b"x" * (200 * 1024)
    for _ in range(3):
        ns.send("a", msg(body))
    for _ in range(2):
        ns.send("t", msg(body))
    with pytest.raises(QuotaExceededError, match="Max namespace size in bytes:1048576"):
        ns.send("a", msg(body))
    ns.receive("t/subscriptions/s", 1, ReceiveMode.RECEIVE_AND_DELETE)  # freeing space anywhere helps
    ns.send("a", msg(body))


def test_namespace_quota_follows_deleted_entities_and_a_restart(clock, tmp_path) -> None:
    """The namespace's total is kept as sizes change (not summed per send): deleting a queue, a subscription
    or a topic gives their bytes back, and a restarted namespace counts what its store holds."""
    config = NamespaceConfig(max_size_in_megabytes=1)
    ns = Namespace.open(SqliteStore(tmp_path / "ns.db"), config, clock)
    ns.create_queue(QueueProperties("a"))
    ns.create_queue(QueueProperties("b"))
    ns.create_topic(TopicProperties("t"))
    ns.create_subscription("t", SubscriptionProperties("s1"))
    ns.create_subscription("t", SubscriptionProperties("s2"))
    body = b"x" * 256_000  # 256,064 bytes a message (its body, its id and 32)
    ns.send("a", [msg(body), msg(body)])
    ns.send("t", msg(body))  # a copy in each subscription
    with pytest.raises(QuotaExceededError, match="Max namespace size in bytes:1048576"):
        ns.send("b", msg(body))
    ns.delete_subscription("t", "s2")
    ns.send("b", msg(body))
    ns.delete_queue("a")
    ns.send("b", [msg(body), msg(body)])
    ns.commit()
    ns.close()
    ns = Namespace.open(SqliteStore(tmp_path / "ns.db"), config, clock)  # b 3 messages, t 1
    with pytest.raises(QuotaExceededError, match="Size of all entities in bytes:1024256,"):
        ns.send("b", msg(body))
    ns.delete_topic("t")
    ns.send("b", msg(body))
    ns.close()


def test_message_header_quota(ns: Namespace, queue: str) -> None:
    """All properties of a message together may not exceed 64 KB (Service Bus's header stream quota)."""
    over = {f"p{i:05d}": "v" * 10 for i in range(5_000)}
    with pytest.raises(MessageSizeExceededError, match=r"size quota for this stream \(65536\)"):
        ns.send(queue, msg(application_properties=over))
    under = {f"p{i:05d}": "v" * 10 for i in range(3_000)}
    ns.send(queue, msg(application_properties=under))
    assert len(ns.peek(queue, 0, 1)[0].application_properties) == 3_000


@pytest.mark.parametrize(
    ("status", "send_ok", "receive_ok"),
    [
        (EntityStatus.ACTIVE, True, True),
        (EntityStatus.DISABLED, False, False),
        (EntityStatus.SEND_DISABLED, False, True),
        (EntityStatus.RECEIVE_DISABLED, True, False),
    ],
)
def test_status_effects(ns: Namespace, status: EntityStatus, send_ok: bool, receive_ok: bool) -> None:
    ns.create_queue(QueueProperties("q"))
    ns.send("q", msg(message_id="before"))
    props = ns.get_queue("q")
    props.status = status
    ns.update_queue(props)
    if send_ok:
        ns.send("q", msg(message_id="after"))
    else:
        with pytest.raises(EntityDisabledError) as err:
            ns.send("q", msg(message_id="after"))
        assert err.value.amqp_condition == "com.microsoft:entity-disabled"
    if receive_ok:
        assert ns.receive("q", 5)[0].message_id == "before"
    else:
        with pytest.raises(EntityDisabledError):
            ns.receive("q", 5)
        with pytest.raises(EntityDisabledError):
            ns.check_receiver("q")
    assert ns.get_queue_runtime_properties("q").total_message_count >= 1  # messages are retained


def test_addressing_and_not_found(ns: Namespace, queue: str) -> None:
    assert ns.resolve("Q1") == "q1"
    assert ns.resolve("/q1/$deadletterqueue") == "q1/$DeadLetterQueue"
    assert ns.resolve("q1/$TRANSFER/$DeadLetterQueue") == "q1/$Transfer/$DeadLetterQueue"
    with pytest.raises(EntityNotFoundError) as err:
        ns.send("nope", msg())
    assert err.value.description == "The messaging entity 'nope' could not be found."
    assert err.value.amqp_condition == "amqp:not-found" and err.value.http_status == 404
    with pytest.raises(NotAllowedError):
        ns.send("q1/$DeadLetterQueue", msg())
    assert ns.check_sender("Q1") == "q1"
    assert ns.check_receiver("q1/$deadletterqueue") == "q1/$DeadLetterQueue"


def test_available_callback(ns: Namespace, queue: str, clock) -> None:
    seen: list[str] = []
    ns.on_available(seen.append)
    ns.send(queue, [msg(), msg()])
    assert seen == ["q1"]
    (m,) = ns.receive(queue, 1)
    seen.clear()
    ns.abandon(queue, [m.lock_token])
    assert seen == ["q1"]
    seen.clear()
    ns.schedule(queue, [msg(scheduled_enqueue_time=clock.now() + 5)])
    assert seen == []
    clock.advance(5)
    ns.tick()
    assert seen == ["q1"]


def test_session_id_and_partition_key_must_agree(ns: Namespace, queue: str) -> None:
    with pytest.raises(NotAllowedError):
        ns.send(queue, msg(session_id="a", partition_key="b"))
    ns.send(queue, msg(session_id="a", partition_key="a"))


def test_long_message_id_is_refused(ns: Namespace, queue: str) -> None:
    with pytest.raises(Exception) as err:
        ns.send(queue, msg(message_id="m" * 129))
    assert err.value.http_status == 400


def test_typed_application_properties_are_kept(ns: Namespace, queue: str) -> None:
    props = {"s": "v", "i": 5, "f": 1.5, "b": True, "n": None, "y": b"\x00", "u": uuid.uuid4()}
    ns.send(queue, msg(application_properties=dict(props), annotations={"x-custom": 1}))
    (m,) = ns.receive(queue, 1)
    assert m.application_properties == props and m.annotations == {"x-custom": 1}


def test_properties_the_store_cannot_keep_are_refused(ns: Namespace, queue: str) -> None:
    with pytest.raises(ArgumentError) as err:
        ns.send(queue, msg(application_properties={"obj": object()}))
    assert "obj" in err.value.description and err.value.http_status == 400
    with pytest.raises(ArgumentError):
        ns.send(queue, msg(annotations={1: "int key"}))
    ns.send(queue, msg(annotations={"x-list": [1, "a", b"b"], "x-map": {"k": 1.5}}))
    (m,) = ns.receive(queue, 1)
    assert m.annotations == {"x-list": [1, "a", b"b"], "x-map": {"k": 1.5}}


def test_peek_index_stays_bounded_and_ordered(ns: Namespace, queue: str) -> None:
    for i in range(30):
        ns.send(queue, [msg(message_id=f"{i}-{j}") for j in range(100)])
        ns.complete(queue, [m.lock_token for m in ns.receive(queue, 100)])
    index = ns._queues[queue].main.browse
    assert len(index.numbers) <= 1024 + 1 and ns.peek(queue, 0, 10) == []
    ns.send(queue, [msg(message_id=str(i)) for i in range(5)])
    (first, second) = ns.receive(queue, 2)
    ns.dead_letter(queue, [second.lock_token])
    ns.dead_letter(queue, [first.lock_token])  # arrives in the DLQ out of order
    assert [m.message_id for m in ns.peek(f"{queue}/$DeadLetterQueue", 0, 10)] == ["0", "1"]
    assert ids(ns.peek(queue, second.sequence_number, 10)) == ["2", "3", "4"]


def test_a_message_sent_without_an_id_gets_one_as_service_bus_assigns(ns: Namespace, queue: str) -> None:
    ns.send(queue, [msg(message_id=None), msg(message_id=None), msg(message_id="mine")])
    ns.schedule(queue, [msg(message_id=None)])
    assigned = [m.message_id for m in ns.peek(queue, 0, 10)]
    assert assigned[2] == "mine"
    generated = [assigned[i] for i in (0, 1, 3)]
    assert len(set(generated)) == 3
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in generated)  # a GUID without dashes


def test_an_id_given_to_a_message_sharing_its_content_is_its_own(ns: Namespace, queue: str) -> None:
    original = msg(message_id=None)
    ns.send(queue, [original.copy()])  # the copy's content is shared with the original's
    assert original.message_id is None
    (sent,) = ns.peek(queue, 0, 10)
    assert len(sent.message_id) == 32 and sent.content is not original.content
