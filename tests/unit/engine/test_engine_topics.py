"""Topic fan-out: default, false, correlation and SQL filters; actions into copies; evaluation errors."""

from __future__ import annotations

from datetime import timedelta

import pytest

from local_broker.engine import (
    CorrelationFilter,
    EntityDisabledError,
    EntityStatus,
    FalseFilter,
    Namespace,
    NotAllowedError,
    QueueProperties,
    QuotaExceededError,
    ReceiveMode,
    RuleProperties,
    SqlFilter,
    SqlRuleAction,
    SubscriptionProperties,
    TopicProperties,
    filtering,
)

from .helpers import ids, msg

RAD = ReceiveMode.RECEIVE_AND_DELETE


@pytest.fixture
def topic(ns: Namespace) -> str:
    ns.create_topic(TopicProperties("t"))
    return "t"


def sub_path(name: str) -> str:
    return f"t/Subscriptions/{name}"


def test_default_rule_fans_out_to_every_subscription(ns: Namespace, topic: str) -> None:
    ns.create_subscription(topic, SubscriptionProperties("a"))
    ns.create_subscription(topic, SubscriptionProperties("b"))
    ns.send(topic, [msg(message_id="1"), msg(message_id="2")])
    for name in ("a", "b"):
        got = ns.receive(sub_path(name), 10)
        assert ids(got) == ["1", "2"]
        assert [m.sequence_number for m in got] == [1, 2]  # the topic's numbers
    rt = ns.get_topic_runtime_properties(topic)
    assert rt.active_message_count == 4
    with pytest.raises(NotAllowedError):
        ns.receive(topic, 1)


def test_copies_are_independent(ns: Namespace, topic: str) -> None:
    ns.create_subscription(topic, SubscriptionProperties("a"))
    ns.create_subscription(topic, SubscriptionProperties("b"))
    ns.send(topic, msg(message_id="1", application_properties={"k": 1}))
    (a,) = ns.receive(sub_path("a"), 1)
    ns.abandon(sub_path("a"), [a.lock_token], {"k": 2})
    (b,) = ns.receive(sub_path("b"), 1)
    assert b.application_properties == {"k": 1} and b.delivery_count == 0


def test_copies_share_properties_only_until_one_changes(ns: Namespace, topic: str) -> None:
    """Fan-out copies share the property dicts (copy-on-write): every change stays on its own copy."""
    for name in ("a", "b", "c"):
        ns.create_subscription(topic, SubscriptionProperties(name))
    ns.send(topic, msg(message_id="1", application_properties={"k": 1}, annotations={"x-note": "n"}))
    (a,) = ns.receive(sub_path("a"), 1)
    (b,) = ns.receive(sub_path("b"), 1)
    (c,) = ns.receive(sub_path("c"), 1)
    ns.dead_letter(sub_path("a"), [a.lock_token], "Why", "Because", {"k": "a"})
    ns.defer(sub_path("c"), [c.lock_token], {"k": "c", "extra": True})
    assert b.application_properties == {"k": 1}
    (dead,) = ns.receive(sub_path("a") + "/$DeadLetterQueue", 1)
    assert dead.application_properties == {
        "k": "a",
        "DeadLetterReason": "Why",
        "DeadLetterErrorDescription": "Because",
    }
    (deferred,) = ns.peek(sub_path("c"), 0, 1)
    assert deferred.application_properties == {"k": "c", "extra": True}
    ns.abandon(sub_path("b"), [b.lock_token], {"k": "b"})
    assert dead.application_properties["k"] == "a" and deferred.application_properties["k"] == "c"
    assert dead.annotations == deferred.annotations == {"x-note": "n"}


def test_false_and_correlation_filters(ns: Namespace, topic: str) -> None:
    ns.create_subscription(topic, SubscriptionProperties("none"), RuleProperties("f", FalseFilter()))
    ns.create_subscription(
        topic,
        SubscriptionProperties("red"),
        RuleProperties("c", CorrelationFilter(label="order", properties={"color": "red"})),
    )
    ns.send(
        topic,
        [
            msg(message_id="1", subject="order", application_properties={"color": "red"}),
            msg(message_id="2", subject="order", application_properties={"color": "blue"}),
            msg(message_id="3", subject="other", application_properties={"color": "red"}),
        ],
    )
    assert ns.receive(sub_path("none"), 10) == []
    assert ids(ns.receive(sub_path("red"), 10)) == ["1"]


def test_sql_filter_and_parameters(ns: Namespace, topic: str) -> None:
    ns.create_subscription(
        topic, SubscriptionProperties("big"), RuleProperties("r", SqlFilter("quantity > @min", {"@min": 10}))
    )
    ns.send(topic, [msg(message_id=str(q), application_properties={"quantity": q}) for q in (5, 11, 20)])
    assert ids(ns.receive(sub_path("big"), 10)) == ["11", "20"]


def test_rules_without_actions_make_one_copy_and_each_action_its_own(ns: Namespace, topic: str) -> None:
    ns.create_subscription(topic, SubscriptionProperties("s"))  # $Default: TrueFilter
    ns.create_rule(topic, "s", RuleProperties("plain", SqlFilter("1=1")))
    ns.create_rule(topic, "s", RuleProperties("act1", SqlFilter("1=1"), SqlRuleAction("SET tag = 'one'")))
    ns.create_rule(
        topic, "s", RuleProperties("act2", SqlFilter("1=1"), SqlRuleAction("SET sys.Label = 'two'"))
    )
    ns.create_rule(topic, "s", RuleProperties("nomatch", FalseFilter(), SqlRuleAction("SET tag = 'x'")))
    ns.send(topic, msg(message_id="m", application_properties={"orig": True}))
    got = ns.receive(sub_path("s"), 10, RAD)
    assert len(got) == 3
    by_rule = {m.application_properties.get("RuleName"): m for m in got}
    assert set(by_rule) == {None, "act1", "act2"}
    assert by_rule[None].application_properties == {"orig": True}
    assert by_rule["act1"].application_properties["tag"] == "one"
    assert by_rule["act2"].subject == "two" and "tag" not in by_rule["act2"].application_properties


def test_action_setting_ttl_applies(ns: Namespace, topic: str, clock) -> None:
    ns.create_subscription(
        topic,
        SubscriptionProperties("s"),
        RuleProperties("r", SqlFilter("1=1"), SqlRuleAction("SET sys.TimeToLive = '0:0:5'")),
    )
    ns.send(topic, msg(message_id="m"))
    (m,) = ns.peek(sub_path("s"), 0, 1)
    assert m.expires_at == clock.now() + 5


def test_filter_evaluation_error_dead_letters(ns: Namespace, topic: str) -> None:
    ns.create_subscription(topic, SubscriptionProperties("s"), RuleProperties("r", SqlFilter("a / 0 = 1")))
    ns.create_subscription(
        topic,
        SubscriptionProperties("quiet", dead_lettering_on_filter_evaluation_exceptions=False),
        RuleProperties("r", SqlFilter("a / 0 = 1")),
    )
    ns.send(topic, msg(message_id="m", application_properties={"a": 1}))
    (dead,) = ns.receive(sub_path("s") + "/$DeadLetterQueue", 1)
    assert dead.dead_letter_reason == "DivideByZeroException"
    assert dead.dead_letter_error_description
    rt = ns.get_subscription_runtime_properties(topic, "quiet")
    assert rt.total_message_count == 0


def test_topic_ttl_caps_subscription_ttl(ns: Namespace, clock) -> None:
    ns.create_topic(TopicProperties("short", default_message_time_to_live=timedelta(seconds=30)))
    ns.create_subscription(
        "short", SubscriptionProperties("s", default_message_time_to_live=timedelta(hours=1))
    )
    ns.send("short", msg())
    (m,) = ns.peek("short/Subscriptions/s", 0, 1)
    assert m.expires_at == clock.now() + 30


def test_disabled_subscription_gets_no_copies_receive_disabled_does(ns: Namespace, topic: str) -> None:
    ns.create_subscription(topic, SubscriptionProperties("off", status=EntityStatus.DISABLED))
    ns.create_subscription(topic, SubscriptionProperties("rd", status=EntityStatus.RECEIVE_DISABLED))
    ns.send(topic, msg())
    assert ns.get_subscription_runtime_properties(topic, "off").active_message_count == 0
    assert ns.get_subscription_runtime_properties(topic, "rd").active_message_count == 1
    with pytest.raises(EntityDisabledError):
        ns.receive(sub_path("rd"), 1)


def test_fan_out_follows_every_change_of_subscriptions_rules_and_topic(ns: Namespace, clock) -> None:
    """Each change after messages already went out is seen by the next send (the fan-out plan is rebuilt)."""
    ns.create_topic(TopicProperties("t"))
    ns.create_subscription("t", SubscriptionProperties("a"), RuleProperties("r", SqlFilter("x = 1")))
    sent = iter(range(1000))

    def fan_out(**properties) -> set[str]:
        """Send one message; the subscriptions (and dead-letter queues) it landed in."""
        number = str(next(sent))
        ns.send("t", msg(message_id=number, application_properties=properties))
        paths = [sub_path(s.name) for s in ns.list_subscriptions("t")]
        paths += [p + "/$DeadLetterQueue" for p in paths]
        return {p for p in paths if number in ids(ns.peek(p, 0, 1000))}

    assert fan_out(x=1) == {sub_path("a")}
    ns.create_subscription("t", SubscriptionProperties("b"))
    assert fan_out(x=1) == {sub_path("a"), sub_path("b")}
    ns.update_rule("t", "a", RuleProperties("r", SqlFilter("x = 2")))
    assert fan_out(x=1) == {sub_path("b")}
    ns.create_rule("t", "a", RuleProperties("tagged", SqlFilter("x = 1"), SqlRuleAction("SET tag = 1")))
    assert fan_out(x=1) == {sub_path("a"), sub_path("b")}
    ns.delete_rule("t", "a", "tagged")
    ns.create_rule("t", "a", RuleProperties("never", FalseFilter()))
    assert fan_out(x=2) == {sub_path("a"), sub_path("b")} and fan_out(x=1) == {sub_path("b")}
    ns.update_subscription("t", SubscriptionProperties("b", status=EntityStatus.DISABLED))
    assert fan_out(x=2) == {sub_path("a")}
    ns.update_subscription("t", SubscriptionProperties("b"))
    assert fan_out(x=2) == {sub_path("a"), sub_path("b")}
    assert fan_out(x="text") == {sub_path("a") + "/$DeadLetterQueue", sub_path("b")}  # 'text' = 2 fails
    ns.update_topic(TopicProperties("t", filtering_messages_before_publishing=True))
    assert fan_out(x="text") == {sub_path("b")}
    ns.update_subscription(
        "t", SubscriptionProperties("a", dead_lettering_on_filter_evaluation_exceptions=False)
    )
    ns.update_topic(TopicProperties("t", default_message_time_to_live=timedelta(seconds=30)))
    assert fan_out(x="text") == {sub_path("b")}
    assert ns.peek(sub_path("b"), 0, 1000)[-1].expires_at == clock.now() + 30
    ns.delete_subscription("t", "b")
    assert fan_out(x=2) == {sub_path("a")}
    ns.create_subscription("t", SubscriptionProperties("b"), RuleProperties("none", FalseFilter()))
    assert fan_out(x=2) == {sub_path("a")}


def test_send_disabled_topic_refuses_but_subscriptions_still_drain(ns: Namespace, topic: str) -> None:
    ns.create_subscription(topic, SubscriptionProperties("s"))
    ns.send(topic, msg(message_id="1"))
    props = ns.get_topic(topic)
    props.status = EntityStatus.SEND_DISABLED
    ns.update_topic(props)
    with pytest.raises(EntityDisabledError):
        ns.send(topic, msg())
    assert ids(ns.receive(sub_path("s"), 5)) == ["1"]


def test_session_subscription_dead_letters_messages_without_session(ns: Namespace, topic: str) -> None:
    ns.create_subscription(topic, SubscriptionProperties("sess", requires_session=True))
    ns.send(topic, [msg(message_id="no-session"), msg(message_id="with", session_id="A")])
    (dead,) = ns.receive(sub_path("sess") + "/$DeadLetterQueue", 5)
    assert dead.message_id == "no-session" and dead.dead_letter_reason == "Session id is null."
    assert ns.list_sessions(sub_path("sess")) == ["A"]


def test_topic_scheduling_and_dedup(ns: Namespace, clock) -> None:
    ns.create_topic(TopicProperties("t", requires_duplicate_detection=True))
    ns.create_subscription("t", SubscriptionProperties("s"))
    (seq,) = ns.schedule("t", [msg(message_id="later", scheduled_enqueue_time=clock.now() + 10)])
    ns.send("t", msg(message_id="later"))  # duplicate of the scheduled one
    assert ns.get_topic_runtime_properties("t").scheduled_message_count == 1
    clock.advance(10)
    ns.tick()
    (m,) = ns.receive("t/Subscriptions/s", 5)
    assert m.message_id == "later" and m.sequence_number > seq


def test_topic_quota_counts_subscriptions(ns: Namespace) -> None:
    ns.create_topic(TopicProperties("t", max_size_in_megabytes=1))
    ns.create_subscription("t", SubscriptionProperties("a"))
    ns.create_subscription("t", SubscriptionProperties("b"))
    body = b"x" * (200 * 1024)
    ns.send("t", [msg(body), msg(body)])  # 4 copies of 200 KB
    with pytest.raises(QuotaExceededError):
        ns.send("t", [msg(body), msg(body)])
    ns.delete_subscription("t", "b")  # its 2 copies no longer count: 2 + 2 more fit again
    ns.create_subscription("t", SubscriptionProperties("b"))
    ns.send("t", [msg(body), msg(body)])
    size = ns.peek("t/Subscriptions/b", 0, 1)[0].size
    assert ns.get_topic_runtime_properties("t").size_in_bytes == 6 * size
    with pytest.raises(QuotaExceededError):
        ns.send("t", [msg(body)])


def test_forwarding_subscription_into_queue(ns: Namespace, topic: str) -> None:
    ns.create_queue(QueueProperties("q"))
    ns.create_subscription(topic, SubscriptionProperties("fwd", forward_to="q"))
    ns.send(topic, msg(message_id="m"))
    (m,) = ns.receive("q", 1)
    assert m.message_id == "m" and m.enqueued_sequence_number == 1
    with pytest.raises(NotAllowedError):
        ns.receive(sub_path("fwd"), 1)


def test_copies_share_one_content_until_one_of_them_changes(ns: Namespace, topic: str) -> None:
    """Lazy fan-out: the subscriptions' copies point at one stored content (body, sender fields); a rule
    action, a transfer or dead-lettering gives the copy it changes a content of its own."""
    ns.create_queue(QueueProperties("fwd"))
    ns.create_subscription(topic, SubscriptionProperties("plain"))
    ns.create_subscription(topic, SubscriptionProperties("other"))
    ns.create_subscription(
        topic,
        SubscriptionProperties("relabel"),
        RuleProperties("r", SqlFilter("1=1"), SqlRuleAction("SET sys.Label = 'changed'")),
    )
    ns.create_subscription(topic, SubscriptionProperties("forwarding", forward_to="fwd"))
    body = b"payload" * 100
    ns.send(topic, msg(body, message_id="m", subject="original"))
    (plain,) = ns.peek(sub_path("plain"), 0, 1)
    (other,) = ns.peek(sub_path("other"), 0, 1)
    (relabelled,) = ns.peek(sub_path("relabel"), 0, 1)
    (forwarded,) = ns.peek("fwd", 0, 1)
    assert plain.content is other.content and plain.body is body
    assert (plain.subject, other.subject, relabelled.subject) == ("original", "original", "changed")
    assert relabelled.content is not plain.content and relabelled.body is body
    assert forwarded.hop_count == 1 and plain.hop_count == 0
    ns.create_queue(QueueProperties("dead"))
    ns.update_subscription(topic, SubscriptionProperties("other", forward_dead_lettered_messages_to="dead"))
    (received,) = ns.receive(sub_path("other"), 1)
    ns.dead_letter(sub_path("other"), [received.lock_token], "why", "because")
    (dead,) = ns.peek("dead", 0, 1)
    assert (dead.dead_letter_source, dead.dead_letter_reason) == (sub_path("other"), "why")
    assert (plain.dead_letter_source, plain.dead_letter_reason, plain.subject) == (None, None, "original")


@pytest.mark.parametrize("part", [filtering.SELECTOR_PART, 3])
def test_fan_out_decides_alike_before_and_after_its_selector_is_generated(
    ns: Namespace, topic: str, part: int, monkeypatch
) -> None:
    """A topic's plan is interpreted for its first messages, then generated (in one function, or in parts
    of `part` subscriptions): every kind of subscription gets the same copies from each (filter errors,
    actions, forwarding, sessions)."""
    monkeypatch.setattr(filtering, "SELECTOR_PART", part)
    ns.create_queue(QueueProperties("fwd"))
    subscriptions = [
        ("all", None),
        ("none", RuleProperties("none", FalseFilter())),
        ("corr", RuleProperties("corr", CorrelationFilter(label="l", properties={"n": 1}))),
        ("sql", RuleProperties("sql", SqlFilter("n = 1 AND sys.Label = 'l'"))),
        ("fails", RuleProperties("fails", SqlFilter("n + 'x' = 1"))),
        ("fails-kept", RuleProperties("fails", SqlFilter("n + 'x' = 1"))),
        ("action", RuleProperties("action", SqlFilter("n >= 1"), SqlRuleAction("SET m = n * 2"))),
        ("forward", RuleProperties("forward", SqlFilter("n = 1"))),
    ]
    for name, rule in subscriptions:
        props = SubscriptionProperties(
            name,
            dead_lettering_on_filter_evaluation_exceptions=name != "fails-kept",
            forward_to="fwd" if name == "forward" else None,
        )
        ns.create_subscription(topic, props, rule)
    ns.create_rule(topic, "action", RuleProperties("plain", SqlFilter("n = 2")))
    ns.create_subscription(topic, SubscriptionProperties("session", requires_session=True))

    def copies() -> dict[str, list[tuple[str | None, dict]]]:
        names = [name for name, _ in subscriptions if name != "forward"]
        paths = [sub_path(name) for name in names] + ["fwd"]  # (a session receiver would find nothing)
        paths += [sub_path(name) + "/$DeadLetterQueue" for name in [*names, "session"]]
        return {p: [(m.subject, m.application_properties) for m in ns.receive(p, 10, RAD)] for p in paths}

    rounds = []
    for _ in range(len(subscriptions) + 2):  # the last ones run the generated selector (or its parts)
        ns.send(topic, [msg(subject="l", application_properties={"n": n}) for n in (1, 2, None)])
        rounds.append(copies())
    assert all(r == rounds[0] for r in rounds[1:])
    assert ns._topics[topic].routes.__name__ == ("select" if part == 3 else "_select")  # built
    first = rounds[0]
    assert len(first[sub_path("all")]) == 3 and first[sub_path("none")] == []
    assert first[sub_path("corr")] == [("l", {"n": 1})] and first[sub_path("sql")] == [("l", {"n": 1})]
    assert len(first[sub_path("fails") + "/$DeadLetterQueue"]) == 2 and first[sub_path("fails-kept")] == []
    assert first[sub_path("action")] == [
        ("l", {"n": 1, "RuleName": "action", "m": 2}),
        ("l", {"n": 2}),
        ("l", {"n": 2, "RuleName": "action", "m": 4}),
    ]
    assert first["fwd"] == [("l", {"n": 1})] and len(first[sub_path("session") + "/$DeadLetterQueue"]) == 3
