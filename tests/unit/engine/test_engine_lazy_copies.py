"""Lazy topic copies: a subscription's plain copy has no record of its own until it is received, expires or
is stored, and behaves in every way as a copy with one (locks, counts, sizes, TTL, order, restarts)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from local_broker.console.operations import purge
from local_broker.engine import (
    BrokerError,
    FakeClock,
    Namespace,
    ReceiveMode,
    RuleProperties,
    SqlFilter,
    SqlRuleAction,
    SubscriptionProperties,
    TopicProperties,
)
from local_broker.store import SqliteStore

from .helpers import ids, msg

RAD = ReceiveMode.RECEIVE_AND_DELETE


def sub_path(name: str) -> str:
    return f"t/Subscriptions/{name}"


@pytest.fixture
def topic(ns: Namespace) -> str:
    ns.create_topic(TopicProperties("t"))
    ns.create_subscription("t", SubscriptionProperties("a", max_delivery_count=2))
    ns.create_subscription("t", SubscriptionProperties("b"))
    return "t"


def lazy_count(ns: Namespace, name: str) -> int:
    return len(ns._topics["t"].subscriptions[name].main.lazy)


def test_plain_copies_are_lazy_until_received(ns: Namespace, topic: str) -> None:
    ns.send(topic, [msg(message_id=str(i)) for i in range(3)])
    assert lazy_count(ns, "a") == lazy_count(ns, "b") == 3
    got = ns.receive(sub_path("a"), 2)
    assert ids(got) == ["0", "1"] and [m.sequence_number for m in got] == [1, 2]
    assert lazy_count(ns, "a") == 1 and lazy_count(ns, "b") == 3
    assert len({m.uid for m in got}) == 2 and got[0].lock_token != got[1].lock_token


def test_each_copy_has_its_own_lock_delivery_count_and_state(ns: Namespace, topic: str) -> None:
    ns.send(topic, [msg(message_id="1"), msg(message_id="2")])
    (a1,) = ns.receive(sub_path("a"), 1)
    ns.abandon(sub_path("a"), [a1.lock_token])
    (again,) = ns.receive(sub_path("a"), 1)
    assert again.message_id == "1" and again.delivery_count == 1  # back at the front
    ns.abandon(sub_path("a"), [again.lock_token])  # max_delivery_count 2: dead-lettered
    assert ids(ns.peek(sub_path("a") + "/$DeadLetterQueue", 0, 10)) == ["1"]
    (b1,) = ns.receive(sub_path("b"), 1)
    assert b1.message_id == "1" and b1.delivery_count == 0
    ns.defer(sub_path("b"), [b1.lock_token])
    assert [(m.message_id, int(m.state)) for m in ns.peek(sub_path("b"), 0, 10)] == [("1", 1), ("2", 0)]
    (deferred,) = ns.receive_deferred(sub_path("b"), [1])
    assert deferred.message_id == "1"
    assert ids(ns.receive(sub_path("a"), 5)) == ["2"]


def test_peek_shows_copies_with_and_without_records_in_order(ns: Namespace, topic: str) -> None:
    ns.send(topic, [msg(message_id=str(i)) for i in range(6)])
    locked = ns.receive(sub_path("a"), 2)
    peeked = ns.peek(sub_path("a"), 0, 10)
    assert ids(peeked) == [str(i) for i in range(6)]
    assert [m.lock_token is not None for m in peeked] == [True, True, False, False, False, False]
    assert ids(ns.peek(sub_path("a"), 4, 1)) == ["3"] and ids(ns.peek(sub_path("a"), 2, 2)) == ["1", "2"]
    assert lazy_count(ns, "a") == 4  # peeking gives no records
    assert {m.uid for m in locked} <= {m.uid for m in peeked}  # a peeked copy has its record's number
    (third,) = ns.receive(sub_path("a"), 1)
    assert third.uid == peeked[2].uid


def test_counts_and_sizes_include_lazy_copies(ns: Namespace, topic: str) -> None:
    ns.send(topic, [msg(b"x" * 100, message_id="1"), msg(b"y" * 50, message_id="2")])
    size = sum(m.size for m in ns.peek(sub_path("a"), 0, 10))
    for name in ("a", "b"):
        rt = ns.get_subscription_runtime_properties(topic, name)
        assert (rt.active_message_count, rt.size_in_bytes) == (2, size)
    assert ns.get_topic_runtime_properties(topic).size_in_bytes == 2 * size
    ns.receive(sub_path("a"), 1, RAD)
    rt = ns.get_subscription_runtime_properties(topic, "a")
    assert rt.active_message_count == 1
    assert ns.get_topic_runtime_properties(topic).size_in_bytes < 2 * size
    ns.delete_subscription(topic, "b")
    rest = ns.get_subscription_runtime_properties(topic, "a").size_in_bytes
    assert ns.get_topic_runtime_properties(topic).size_in_bytes == rest


def test_lazy_copies_expire_with_their_own_ttl(ns: Namespace, clock: FakeClock) -> None:
    ns.create_topic(TopicProperties("t", default_message_time_to_live=timedelta(seconds=300)))
    ns.create_subscription(
        "t",
        SubscriptionProperties(
            "a", default_message_time_to_live=timedelta(seconds=60), dead_lettering_on_message_expiration=True
        ),
    )
    ns.create_subscription("t", SubscriptionProperties("b"))  # the topic's 300 s
    ns.send("t", [msg(message_id="own", time_to_live=30), msg(message_id="default")])
    expiries = {m.message_id: m.expires_at for m in ns.peek(sub_path("a"), 0, 10)}
    assert expiries == {"own": clock.now() + 30, "default": clock.now() + 60}
    assert ns.next_deadline() == clock.now() + 30
    clock.advance(31)
    ns.tick()
    assert ids(ns.peek(sub_path("a"), 0, 10)) == ["default"]
    dead = ns.peek(sub_path("a") + "/$DeadLetterQueue", 0, 10)
    assert ids(dead) == ["own"] and dead[0].dead_letter_reason == "TTLExpiredException"
    assert ids(ns.peek(sub_path("b"), 0, 10)) == ["default"]  # no dead-lettering on expiration there
    clock.advance(30)
    ns.tick()
    assert ids(ns.peek(sub_path("a") + "/$DeadLetterQueue", 0, 10)) == ["own", "default"]
    assert ids(ns.peek(sub_path("b"), 0, 10)) == ["default"]
    clock.advance(240)
    ns.tick()
    assert ns.peek(sub_path("b"), 0, 10) == [] and ns.next_deadline() is None
    assert ns.get_topic_runtime_properties("t").active_message_count == 0


def test_an_expired_lazy_copy_is_not_received(ns: Namespace, clock: FakeClock) -> None:
    ns.create_topic(TopicProperties("t"))
    ns.create_subscription("t", SubscriptionProperties("a"))
    ns.send("t", [msg(message_id="short", time_to_live=5), msg(message_id="long")])
    clock.advance(6)  # no tick: the receive finds it expired
    assert ids(ns.receive(sub_path("a"), 5)) == ["long"]


def test_copies_keep_the_ttl_they_were_placed_with(ns: Namespace, clock: FakeClock) -> None:
    ns.create_topic(TopicProperties("t"))
    minute, ten_seconds = timedelta(seconds=60), timedelta(seconds=10)
    ns.create_subscription("t", SubscriptionProperties("a", default_message_time_to_live=minute))
    ns.send("t", msg(message_id="before"))
    ns.update_subscription("t", SubscriptionProperties("a", default_message_time_to_live=ten_seconds))
    ns.send("t", msg(message_id="after"))
    expiries = {m.message_id: m.expires_at - clock.now() for m in ns.peek(sub_path("a"), 0, 10)}
    assert expiries == {"before": 60, "after": 10}
    clock.advance(11)
    ns.tick()
    assert ids(ns.receive(sub_path("a"), 5)) == ["before"]


def test_a_subscription_that_gets_an_action_keeps_its_order(ns: Namespace, topic: str) -> None:
    ns.send(topic, [msg(message_id="1"), msg(message_id="2")])
    ns.create_rule(topic, "a", RuleProperties("mark", SqlFilter("1 = 1"), SqlRuleAction("SET marked = 1")))
    ns.send(topic, msg(message_id="3"))
    assert lazy_count(ns, "a") == 0 and lazy_count(ns, "b") == 3
    got = ns.receive(sub_path("a"), 10)
    assert ids(got) == ["1", "2", "3", "3"]  # the default rule's copy and the action's
    assert [m.application_properties.get("marked") for m in got] == [None, None, None, 1]


def test_receive_and_delete_and_purge_of_lazy_copies(ns: Namespace, topic: str) -> None:
    ns.send(topic, [msg(message_id=str(i)) for i in range(5)])
    assert ids(ns.receive(sub_path("a"), 3, RAD)) == ["0", "1", "2"]
    assert ns.message_totals(sub_path("a"))[:3] == (5, 3, 0)
    assert purge(ns, sub_path("b")) == 5  # what the console's purge does
    assert ns.get_subscription_runtime_properties(topic, "b").size_in_bytes == 0
    assert ns.peek(sub_path("b"), 0, 10) == [] and ids(ns.peek(sub_path("a"), 0, 10)) == ["3", "4"]
    ns.delete_topic(topic)
    ns.create_topic(TopicProperties("t"))
    ns.create_subscription("t", SubscriptionProperties("a"))
    assert ns.get_topic_runtime_properties("t").size_in_bytes == 0 and ns.next_deadline() is None


def test_stored_copies_come_back_after_a_restart(tmp_path: Path) -> None:
    """Lazy copies are stored as rows of their own: committed ones are restored, a copy settled before
    the commit is not, and a copy given a record before the commit keeps its state."""
    clock = FakeClock()
    path = tmp_path / "ns.db"
    ns = Namespace.open(SqliteStore(path), clock=clock)
    ns.create_topic(TopicProperties("t"))
    ns.create_subscription("t", SubscriptionProperties("a"))
    ns.create_subscription("t", SubscriptionProperties("b", default_message_time_to_live=timedelta(hours=1)))
    ns.create_subscription("t", SubscriptionProperties("gone"))
    ns.commit()
    ns.send("t", [msg(message_id=str(i)) for i in range(4)])
    (settled,) = ns.receive("t/Subscriptions/a", 1)
    ns.complete("t/Subscriptions/a", [settled.lock_token])
    (locked,) = ns.receive("t/Subscriptions/b", 1)
    ns.delete_subscription("t", "gone")
    ns.commit()
    ns.send("t", msg(message_id="4"))
    ns.commit()
    (later,) = ns.receive("t/Subscriptions/a", 1)
    ns.commit()
    before = {p: ns.peek(p, 0, 10) for p in ("t/Subscriptions/a", "t/Subscriptions/b")}
    ns.close()
    again = Namespace.open(SqliteStore(path), clock=clock)
    for p, messages in before.items():
        restored = again.peek(p, 0, 10)
        fields = ("message_id", "sequence_number", "uid", "delivery_count", "lock_token", "expires_at")
        assert [[getattr(m, f) for f in fields] for m in restored] == [
            [getattr(m, f) for f in fields] for m in messages
        ]
    assert ids(before["t/Subscriptions/a"]) == ["1", "2", "3", "4"]
    assert before["t/Subscriptions/b"][0].lock_token == locked.lock_token
    assert before["t/Subscriptions/a"][0].lock_token == later.lock_token
    assert before["t/Subscriptions/b"][1].expires_at == clock.now() + 3600
    rt = again.get_topic_runtime_properties("t")
    assert rt.active_message_count == 9 and rt.subscription_count == 2
    assert rt.size_in_bytes == ns.get_topic_runtime_properties("t").size_in_bytes
    again.send("t", msg(message_id="5"))  # new copies' numbers do not collide with the restored ones
    again.commit()
    uids = [m.uid for p in before for m in again.peek(p, 0, 10)]
    assert len(uids) == len(set(uids)) == 11
    again.close()


# --- a lazy subscription behaves as one whose copies get records at once ------------------------------

OPERATIONS = st.one_of(
    st.tuples(st.just("send"), st.lists(st.sampled_from([None, 5, 40, 400]), min_size=1, max_size=4)),
    st.tuples(st.just("receive"), st.integers(1, 4), st.booleans()),
    st.tuples(
        st.just("settle"),
        st.integers(0, 50),
        st.sampled_from(["complete", "abandon", "defer", "dead_letter", "release"]),
    ),
    st.tuples(st.just("deferred"), st.integers(0, 50)),
    st.tuples(st.just("wait"), st.sampled_from([1, 6, 31, 100])),
    st.tuples(st.just("peek"), st.integers(0, 30), st.integers(1, 5)),
    st.tuples(st.just("update_ttl"), st.sampled_from([20, 60, 3600])),
)


def _observed(messages: list) -> list[tuple]:
    return [
        (m.message_id, m.sequence_number, m.delivery_count, int(m.state), m.expires_at, m.size,
         m.lock_token is not None, m.dead_letter_reason)
        for m in messages
    ]


class Twin:
    """A namespace whose subscription "s" gets lazy copies, or (`eager`) one whose rule's action makes
    every copy a record of its own at once (the action only adds a property, left out when comparing)."""

    def __init__(self, eager: bool) -> None:
        self.clock = FakeClock()
        self.ns = Namespace(clock=self.clock)
        self.ns.create_topic(TopicProperties("t", default_message_time_to_live=timedelta(seconds=500)))
        props = SubscriptionProperties(
            "s", max_delivery_count=3, lock_duration=timedelta(seconds=30),
            default_message_time_to_live=timedelta(seconds=60), dead_lettering_on_message_expiration=True,
        )
        action = SqlRuleAction("SET tagged = 1") if eager else None
        self.ns.create_subscription("t", props, RuleProperties("all", SqlFilter("1 = 1"), action))
        self.held: list = []
        self.sent = 0

    def run(self, operation: tuple) -> Any:
        ns, path = self.ns, sub_path("s")
        kind = operation[0]
        try:
            if kind == "send":
                ttls = operation[1]
                batch = [msg(message_id=f"m{self.sent + i}", time_to_live=ttl) for i, ttl in enumerate(ttls)]
                self.sent += len(batch)
                ns.send("t", batch)
            elif kind == "receive":
                got = ns.receive(path, operation[1], ReceiveMode.PEEK_LOCK if operation[2] else RAD)
                if operation[2]:
                    self.held += got
                return _observed(got)
            elif kind == "settle" and self.held:
                m = self.held.pop(operation[1] % len(self.held))
                getattr(ns, operation[2])(path, [m.lock_token])
            elif kind == "deferred":
                peeked = ns.peek(path, 0, 100)
                numbers = [m.sequence_number for m in peeked if m.state == 1 and not m.lock_token]
                if numbers:
                    got = ns.receive_deferred(path, [numbers[operation[1] % len(numbers)]])
                    self.held += got
                    return _observed(got)
            elif kind == "wait":
                self.clock.advance(operation[1])
                ns.tick()
            elif kind == "peek":
                return _observed(ns.peek(path, operation[1], operation[2]))
            elif kind == "update_ttl":
                props = ns.get_subscription("t", "s")
                props.default_message_time_to_live = timedelta(seconds=operation[1])
                ns.update_subscription("t", props)
        except BrokerError as error:
            return type(error).__name__
        return None

    def state(self) -> tuple:
        ns = self.ns
        rt = ns.get_subscription_runtime_properties("t", "s")
        return (
            _observed(ns.peek(sub_path("s"), 0, 1000)),
            _observed(ns.peek(sub_path("s") + "/$DeadLetterQueue", 0, 1000)),
            rt.active_message_count,
            rt.dead_letter_message_count,
            rt.size_in_bytes,
            ns.get_topic_runtime_properties("t").size_in_bytes,
        )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPERATIONS, max_size=40))
def test_lazy_copies_behave_as_copies_with_records(operations: list[tuple]) -> None:
    lazy, eager = Twin(eager=False), Twin(eager=True)
    for operation in operations:
        assert lazy.run(operation) == eager.run(operation), operation
        assert lazy.state() == eager.state(), operation
        assert not eager.ns._topics["t"].subscriptions["s"].main.lazy
