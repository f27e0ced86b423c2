"""Entity and rule management: defaults, limits, bad names and values, create-only properties, quotas."""

from __future__ import annotations

from datetime import timedelta

import pytest

from local_broker.engine import (
    TIMESPAN_MAX,
    ArgumentError,
    ArgumentOutOfRangeError,
    CorrelationFilter,
    EntityAlreadyExistsError,
    EntityNotFoundError,
    EntityStatus,
    FalseFilter,
    Namespace,
    NamespaceConfig,
    QueueProperties,
    QuotaExceededError,
    RuleProperties,
    SqlFilter,
    SqlRuleAction,
    SubscriptionProperties,
    TopicProperties,
    TrueFilter,
    element_name,
)


def test_queue_defaults(ns: Namespace, clock) -> None:
    q = ns.create_queue(QueueProperties("Orders"))
    assert q.lock_duration == timedelta(minutes=1)
    assert q.max_size_in_megabytes == 1024
    assert q.default_message_time_to_live == TIMESPAN_MAX
    assert q.duplicate_detection_history_time_window == timedelta(minutes=10)
    assert q.max_delivery_count == 10
    assert q.status is EntityStatus.ACTIVE
    assert q.auto_delete_on_idle == TIMESPAN_MAX
    assert q.max_message_size_in_kilobytes == 256
    assert q.enable_batched_operations and q.support_ordering
    assert q.created_at is not None and q.created_at.timestamp() == clock.now()
    assert ns.get_queue("orders").name == "Orders"  # case-insensitive, creation casing kept


def test_queue_crud(ns: Namespace, clock) -> None:
    ns.create_queue(QueueProperties("b"))
    ns.create_queue(QueueProperties("a", max_delivery_count=5))
    with pytest.raises(EntityAlreadyExistsError) as err:
        ns.create_queue(QueueProperties("A"))
    assert err.value.http_status == 409
    assert [q.name for q in ns.list_queues()] == ["a", "b"]
    assert [q.name for q in ns.list_queues(skip=1, top=5)] == ["b"]
    props = ns.get_queue("a")
    props.max_delivery_count = 7
    clock.advance(5)
    updated = ns.update_queue(props)
    assert updated.max_delivery_count == 7 and updated.updated_at > updated.created_at
    ns.delete_queue("a")
    with pytest.raises(EntityNotFoundError):
        ns.get_queue("a")
    with pytest.raises(EntityNotFoundError):
        ns.delete_queue("a")


def test_returned_properties_are_copies(ns: Namespace) -> None:
    props = ns.create_queue(QueueProperties("q"))
    props.max_delivery_count = 1
    assert ns.get_queue("q").max_delivery_count == 10


@pytest.mark.parametrize(
    ("attribute", "value"),
    [
        ("lock_duration", timedelta(minutes=6)),
        ("lock_duration", timedelta(seconds=1)),
        ("max_delivery_count", 0),
        ("duplicate_detection_history_time_window", timedelta(seconds=5)),
        ("duplicate_detection_history_time_window", timedelta(days=8)),
        ("auto_delete_on_idle", timedelta(minutes=1)),
        ("default_message_time_to_live", timedelta(0)),
        ("max_size_in_megabytes", 0),
        ("max_size_in_megabytes", 90000),
    ],
)
def test_out_of_range_values(ns: Namespace, attribute: str, value) -> None:
    with pytest.raises(ArgumentOutOfRangeError) as err:
        ns.create_queue(QueueProperties("q", **{attribute: value}))
    assert err.value.property_name == attribute
    assert element_name(attribute) in err.value.description
    assert err.value.amqp_condition == "com.microsoft:argument-out-of-range" and err.value.http_status == 400


@pytest.mark.parametrize(
    "name", ["", "bad name", "-lead", "a" * 261, "q/$deadletterqueue", "t/subscriptions/s"]
)
def test_bad_queue_names(ns: Namespace, name: str) -> None:
    with pytest.raises(ArgumentError):
        ns.create_queue(QueueProperties(name))


def test_path_like_queue_names(ns: Namespace) -> None:
    ns.create_queue(QueueProperties("app/orders.v2_x"))
    assert ns.resolve("APP/orders.v2_x") == "app/orders.v2_x"


def test_bad_status_and_topic_statuses(ns: Namespace) -> None:
    with pytest.raises(ArgumentError):
        ns.create_topic(TopicProperties("t", status=EntityStatus.RECEIVE_DISABLED))
    ns.create_topic(TopicProperties("t"))
    with pytest.raises(ArgumentError):
        ns.create_subscription("t", SubscriptionProperties("s", status=EntityStatus.SEND_DISABLED))


def test_near_max_timespan_is_infinite(ns: Namespace) -> None:
    rounded = timedelta(days=10675199, seconds=10085, microseconds=477539)
    q = ns.create_queue(
        QueueProperties("q", default_message_time_to_live=rounded, auto_delete_on_idle=rounded)
    )
    assert q.default_message_time_to_live == TIMESPAN_MAX and q.auto_delete_on_idle == TIMESPAN_MAX


@pytest.mark.parametrize(
    "attribute", ["requires_session", "requires_duplicate_detection", "enable_partitioning"]
)
def test_create_only_properties(ns: Namespace, attribute: str) -> None:
    ns.create_queue(QueueProperties("q"))
    props = ns.get_queue("q")
    ns.update_queue(props)  # repeating unchanged values is fine
    setattr(props, attribute, True)
    with pytest.raises(ArgumentError) as err:
        ns.update_queue(props)
    assert err.value.property_name == attribute


def test_message_size_setting_needs_premium(ns: Namespace, clock) -> None:
    with pytest.raises(ArgumentError):
        ns.create_queue(QueueProperties("q", max_message_size_in_kilobytes=1024))
    premium = Namespace(NamespaceConfig(premium=True), clock=clock)
    with pytest.raises(ArgumentOutOfRangeError):
        premium.create_queue(QueueProperties("q", max_message_size_in_kilobytes=200_000))


def test_forwarding_configuration(ns: Namespace) -> None:
    with pytest.raises(ArgumentError):
        ns.create_queue(QueueProperties("src", forward_to="missing"))
    ns.create_queue(QueueProperties("dest"))
    with pytest.raises(ArgumentError):
        ns.create_queue(QueueProperties("sess", requires_session=True, forward_to="dest"))
    src = ns.create_queue(QueueProperties("src", forward_to="dest", auto_delete_on_idle=timedelta(hours=1)))
    assert src.auto_delete_on_idle == TIMESPAN_MAX  # forced to the maximum on a forwarding source
    with pytest.raises(ArgumentError):
        ns.create_queue(QueueProperties("self", forward_to="self"))
    props = ns.get_queue("src")
    props.forward_to = ""
    assert ns.update_queue(props).forward_to is None


def test_topic_and_subscription_crud(ns: Namespace) -> None:
    t = ns.create_topic(TopicProperties("t1", default_message_time_to_live=timedelta(days=1)))
    assert t.filtering_messages_before_publishing is False and t.max_size_in_megabytes == 1024
    with pytest.raises(EntityAlreadyExistsError):
        ns.create_queue(QueueProperties("T1"))
    s = ns.create_subscription("t1", SubscriptionProperties("s1"))
    assert s.topic_name == "t1" and s.dead_lettering_on_filter_evaluation_exceptions is True
    with pytest.raises(EntityAlreadyExistsError):
        ns.create_subscription("T1", SubscriptionProperties("S1"))
    with pytest.raises(EntityNotFoundError):
        ns.create_subscription("nope", SubscriptionProperties("s1"))
    assert [r.name for r in ns.list_rules("t1", "s1")] == ["$Default"]
    assert isinstance(ns.get_rule("t1", "s1", "$default").filter, TrueFilter)
    ns.create_subscription("t1", SubscriptionProperties("s2"), RuleProperties("only", FalseFilter()))
    assert [r.name for r in ns.list_rules("t1", "s2")] == ["only"]
    assert [x.name for x in ns.list_subscriptions("t1")] == ["s1", "s2"]
    rt = ns.get_topic_runtime_properties("t1")
    assert rt.subscription_count == 2 and rt.sql_filter_count == 2
    assert ns.resolve("t1/subscriptions/S1") == "t1/Subscriptions/s1"
    ns.delete_subscription("t1", "s2")
    ns.delete_topic("t1")
    with pytest.raises(EntityNotFoundError):
        ns.resolve("t1/Subscriptions/s1")


def test_rule_crud_and_bad_sql(ns: Namespace) -> None:
    ns.create_topic(TopicProperties("t"))
    ns.create_subscription("t", SubscriptionProperties("s"))
    rule = ns.create_rule(
        "t", "s", RuleProperties("r1", SqlFilter("color = @c", {"@c": "red"}), SqlRuleAction("SET a = 'b'"))
    )
    assert rule.created_at is not None
    with pytest.raises(EntityAlreadyExistsError):
        ns.create_rule("t", "s", RuleProperties("R1"))
    with pytest.raises(ArgumentError) as err:
        ns.create_rule("t", "s", RuleProperties("bad", SqlFilter("color = AND")))
    assert err.value.http_status == 400
    ns.update_rule("t", "s", RuleProperties("r1", CorrelationFilter(label="x")))
    assert isinstance(ns.get_rule("t", "s", "r1").filter, CorrelationFilter)
    ns.delete_rule("t", "s", "r1")
    with pytest.raises(EntityNotFoundError):
        ns.get_rule("t", "s", "r1")


def test_quotas(clock) -> None:
    ns = Namespace(
        NamespaceConfig(max_entities=2, max_subscriptions_per_topic=1, max_sql_filters_per_topic=2),
        clock=clock,
    )
    ns.create_queue(QueueProperties("a"))
    ns.create_topic(TopicProperties("t"))
    with pytest.raises(QuotaExceededError):
        ns.create_queue(QueueProperties("c"))
    ns.create_subscription("t", SubscriptionProperties("s"))
    with pytest.raises(QuotaExceededError):
        ns.create_subscription("t", SubscriptionProperties("s2"))
    ns.create_rule("t", "s", RuleProperties("sql", SqlFilter("a = 1")))
    with pytest.raises(QuotaExceededError):
        ns.create_rule("t", "s", RuleProperties("sql2", SqlFilter("a = 2")))
    ns.create_rule("t", "s", RuleProperties("corr", CorrelationFilter(label="x")))


def test_auto_delete_on_idle(ns: Namespace, clock) -> None:
    ns.create_queue(QueueProperties("idle", auto_delete_on_idle=timedelta(minutes=5)))
    ns.create_queue(QueueProperties("busy", auto_delete_on_idle=timedelta(minutes=5)))
    clock.advance(240)
    ns.peek("busy", 0, 1)  # a browse keeps it alive
    clock.advance(60)
    ns.tick()
    assert [q.name for q in ns.list_queues()] == ["busy"]
    assert ns.next_deadline() == clock.now() + 240
    clock.advance(240)
    ns.tick()
    assert ns.list_queues() == []


def test_namespace_properties(ns: Namespace) -> None:
    info = ns.namespace_properties()
    assert info.name == "sbemulatorns" and info.messaging_sku == "Standard"


def test_values_the_store_cannot_keep_are_refused(ns: Namespace) -> None:
    with pytest.raises(ArgumentError):
        ns.create_queue(QueueProperties("q", authorization_rules=[object()]))
    ns.create_topic(TopicProperties("t"))
    ns.create_subscription("t", SubscriptionProperties("s"))
    with pytest.raises(ArgumentError):
        ns.create_rule("t", "s", RuleProperties("r", CorrelationFilter(properties={"k": object()})))
