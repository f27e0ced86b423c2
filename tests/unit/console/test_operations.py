"""The console's engine operations on an in-memory namespace with a fake clock: counts, peeked bodies,
resubmit (all, one, from a subscription to its topic) and purge."""

from __future__ import annotations

from local_broker.console import operations
from local_broker.engine import (
    CorrelationFilter,
    FakeClock,
    Message,
    Namespace,
    NamespaceConfig,
    QueueProperties,
    RuleProperties,
    SubscriptionProperties,
    TopicProperties,
)
from local_broker.store import MemoryStore
from local_broker.wire.amqp import codec
from local_broker.wire.amqp.values import encode_value


def _namespace() -> tuple[Namespace, FakeClock]:
    clock = FakeClock()
    ns = Namespace.open(MemoryStore(), config=NamespaceConfig(name="ns"), clock=clock)
    ns.create_queue(QueueProperties(name="orders", forward_dead_lettered_messages_to=None))
    ns.create_topic(TopicProperties(name="events"))
    ns.create_subscription("events", SubscriptionProperties(name="a"))
    ns.create_subscription("events", SubscriptionProperties(name="b"))
    west = CorrelationFilter(label="west", properties={"tier": 2})
    ns.create_rule("events", "b", RuleProperties("west", west))
    return ns, clock


def _text(body: str) -> Message:
    return Message(operations.data_body(body.encode()), {"k": 1}, message_id=body)


def _dead_letter(ns: Namespace, path: str, count: int) -> None:
    received = ns.receive(path, count)
    ns.dead_letter(path, [m.lock_token for m in received], reason="Bad", description="why")


def test_counts_split_active_deferred_scheduled_and_dead_letters() -> None:
    ns, clock = _namespace()
    ns.send("orders", [_text(f"m{i}") for i in range(4)])
    ns.send("orders", Message(operations.data_body(b"later"), scheduled_enqueue_time=clock.now() + 60))
    [deferred] = ns.receive("orders", 1)
    ns.defer("orders", [deferred.lock_token])
    _dead_letter(ns, "orders", 1)
    clock.advance(2)
    at, table = operations.entities(ns)
    rows = {row.path: row for row in table}
    orders = rows["orders"]
    assert at == clock.now()
    assert (orders.active, orders.deferred, orders.scheduled, orders.dead_letter) == (2, 1, 1, 1)
    assert orders.totals[:3] == (4, 0, 1)  # the scheduled one is not enqueued yet
    assert rows["events/subscriptions/a"].rules == ["$Default: TrueFilter (1=1)"]
    assert rows["events/subscriptions/b"].rules[1] == \
        "west: CorrelationFilter (label='west', properties={'tier': 2})"  # the fields it matches
    assert [r.kind for r in rows.values()] == ["queue", "topic", "subscription", "subscription"]


def test_peek_shows_data_bytes_and_amqp_values() -> None:
    ns, _ = _namespace()
    value_body = codec.described(codec.AMQP_VALUE, encode_value({"a": 1}))
    ns.send("orders", [_text('{"x": 1}'), Message(value_body)])
    data, value = operations.peek(ns, "orders", 0, 10)
    assert data.body == b'{"x": 1}' and data.body_value is None and data.application == {"k": 1}
    assert data.system["MessageId"] == '{"x": 1}' and data.system["ExpiresAtUtc"] == "never"
    assert value.body is None and value.body_value == "{'a': 1}"


def test_resubmit_all_sends_copies_without_the_dead_letter_reason() -> None:
    ns, _ = _namespace()
    ns.send("orders", [_text("a"), _text("b")])
    _dead_letter(ns, "orders", 2)
    assert operations.resubmit(ns, "orders/$DeadLetterQueue", None) == 2
    back = ns.peek("orders", 0, 10)
    assert [m.message_id for m in back] == ["a", "b"]
    assert all(m.application_properties == {"k": 1} and m.delivery_count == 0 for m in back)
    assert ns.peek("orders/$DeadLetterQueue", 0, 10) == []


def test_resubmit_one_leaves_the_others_as_they_were() -> None:
    ns, _ = _namespace()
    ns.send("orders", [_text("a"), _text("b"), _text("c")])
    _dead_letter(ns, "orders", 3)
    before = ns.peek("orders/$DeadLetterQueue", 0, 10)
    numbers = [m.sequence_number for m in before]
    counts = {m.message_id: m.delivery_count for m in before}
    assert operations.resubmit(ns, "orders/$DeadLetterQueue", {numbers[1]}) == 1
    assert [m.message_id for m in ns.peek("orders", 0, 10)] == ["b"]
    left = ns.peek("orders/$DeadLetterQueue", 0, 10)
    assert [m.message_id for m in left] == ["a", "c"] and all(m.lock_token is None for m in left)
    assert [m.delivery_count for m in left] == [counts["a"], counts["c"]]  # released, not abandoned


def test_a_subscription_dead_letter_goes_back_to_its_topic() -> None:
    ns, _ = _namespace()
    ns.send("events", _text("e"))
    _dead_letter(ns, "events/subscriptions/a", 1)
    assert operations.resubmit_target(ns, "events/subscriptions/a/$DeadLetterQueue") == "events"
    assert operations.resubmit(ns, "events/subscriptions/a/$DeadLetterQueue", None) == 1
    assert [m.message_id for m in ns.peek("events/subscriptions/a", 0, 10)] == ["e"]
    assert len(ns.peek("events/subscriptions/b", 0, 10)) == 2  # the topic fans out again


def test_purge_goes_through_the_sessions_of_a_session_queue() -> None:
    ns, _ = _namespace()
    ns.create_queue(QueueProperties(name="sessions", requires_session=True))
    ns.send("sessions", [Message(operations.data_body(b"m"), session_id=f"s{i % 3}") for i in range(9)])
    held = ns.accept_session("sessions", "s1", owner="another receiver")
    assert operations.purge(ns, "sessions") == 6
    assert {m.session_id for m in ns.peek("sessions", 0, 20)} == {"s1"}  # the held session is left alone
    ns.release_session("sessions", held.session_id, "another receiver")
    assert operations.purge(ns, "sessions") == 3 and ns.peek("sessions", 0, 20) == []


def test_purge_removes_what_is_available() -> None:
    ns, _ = _namespace()
    ns.send("orders", [_text(str(i)) for i in range(1200)])
    assert operations.purge(ns, "orders") == 1200
    assert operations.entities(ns)[1][0].active == 0
    assert operations.entities(ns)[1][0].totals[:3] == (1200, 1200, 0)
