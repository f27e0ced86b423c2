"""The plan of `topology apply`, on SDK model objects built the way the admin client returns them."""

import datetime as dt
import inspect

from azure.servicebus.management import (
    CorrelationRuleFilter,
    EntityStatus,
    QueueProperties,
    RuleProperties,
    ServiceBusAdministrationClient,
    SqlRuleAction,
    SqlRuleFilter,
    SubscriptionProperties,
    TopicProperties,
    TrueRuleFilter,
)

from patterns.diff import Difference, NamespaceState, plan
from topology import parse
from topology.schema import PROPERTIES


def model(cls, name, **values):
    """An SDK properties object as the service would fill it: every keyword present, unset ones None."""
    keywords = [p for p in inspect.signature(cls.__init__).parameters.values() if p.kind is p.KEYWORD_ONLY]
    return cls(name, **({p.name: None for p in keywords} | values))


def rule(name, rule_filter, action=None):
    return RuleProperties(name, filter=rule_filter, action=action, created_at_utc=None)


def namespace(raw):
    return parse({"namespaces": {"ns": raw}}).namespaces["ns"]


DESIRED = namespace({
    "queues": {
        "orders": {"lock_duration": "PT30S", "max_delivery_count": 5, "user_metadata": "Orders of the shop",
                   "forward_dead_lettered_messages_to": "orders-aux"},
        "orders-aux": {},
    },
    "topics": {"events": {"requires_duplicate_detection": True,
                          "duplicate_detection_history_time_window": "PT10M",
                          "subscriptions": {
                              "consumer": {},
                              "to-b": {"rules": {"replication": {"filter": {"sql": "replication IS NULL"},
                                                                 "action": {"sql": "SET replication = 1"}}}},
                              "vip": {"rules": {"vip": {"filter": {"correlation": {
                                  "label": "vip", "properties": {"tier": 1}}}}}},
                          }}},
})


def service_state(**overrides):
    """What the service reports once DESIRED was applied: timedeltas, full forward URIs, its own casing."""
    state = NamespaceState(
        queues={
            "orders": model(QueueProperties, "orders", lock_duration=dt.timedelta(seconds=30),
                            max_delivery_count=5, user_metadata="Orders of the shop",
                            forward_dead_lettered_messages_to="sb://ns.servicebus.windows.net/Orders-Aux",
                            status=EntityStatus.ACTIVE, requires_session=False,
                            default_message_time_to_live=dt.timedelta(days=10675199, seconds=10085)),
            "orders-aux": model(QueueProperties, "orders-aux"),
        },
        topics={"Events": model(TopicProperties, "Events", requires_duplicate_detection=True,
                                duplicate_detection_history_time_window=dt.timedelta(minutes=10))},
        subscriptions={"Events": {n: model(SubscriptionProperties, n) for n in ("consumer", "to-b", "vip")}},
        rules={
            ("Events", "to-b"): {"replication": rule("replication", SqlRuleFilter("replication  IS NULL "),
                                                     SqlRuleAction("SET replication = 1"))},
            ("Events", "vip"): {"vip": rule("vip", CorrelationRuleFilter(label="vip",
                                                                         properties={"tier": 1}))},
        },
    )
    for key, value in overrides.items():
        setattr(state, key, value)
    return state


def ops(changes):
    return [(c.op, c.kind, c.name) for c in changes]


def test_a_forwarding_chain_declared_backwards_is_created_destinations_first():
    desired = namespace({"queues": {"a": {"forward_to": "b"}, "b": {"forward_to": "c"}, "c": {}}})
    assert [c.path for c in plan(desired, NamespaceState())] == [("c",), ("b",), ("a",)]


def test_an_applied_namespace_needs_no_changes():
    assert plan(DESIRED, service_state()) == []


def test_an_empty_namespace_gets_everything_in_a_workable_order():
    changes = plan(DESIRED, NamespaceState())
    assert ops(changes) == [
        ("create", "topic", "events"),
        ("create", "queue", "orders-aux"),  # the forward target first
        ("create", "queue", "orders"),
        ("create", "subscription", "events/consumer"),
        ("create", "subscription", "events/to-b"),
        ("create", "subscription", "events/vip"),
        ("create", "rule", "events/to-b/replication"),
        ("create", "rule", "events/vip/vip"),
        ("delete", "rule", "events/to-b/$Default"),  # the broker's default rule would pass everything
        ("delete", "rule", "events/vip/$Default"),
    ]
    orders = next(c for c in changes if c.name == "orders")
    assert orders.properties["lock_duration"] == dt.timedelta(seconds=30)


def test_a_changed_property_is_updated_and_reported():
    state = service_state()
    state.queues["orders"].max_delivery_count = 10
    state.queues["orders"].lock_duration = dt.timedelta(minutes=1)
    [change] = plan(DESIRED, state)
    assert (change.op, change.name) == ("update", "orders")
    assert change.properties == {"lock_duration": dt.timedelta(seconds=30), "max_delivery_count": 5}
    assert change.differences == (
        Difference("lock_duration", dt.timedelta(minutes=1), dt.timedelta(seconds=30)),
        Difference("max_delivery_count", 10, 5),
    )


def test_a_property_service_bus_cannot_change_is_a_conflict():
    desired = namespace({"queues": {"orders": {"requires_session": True, "max_delivery_count": 3}}})
    [change] = [c for c in plan(desired, service_state()) if c.op != "extra"]
    assert (change.op, change.kind) == ("conflict", "queue")
    assert change.differences == (Difference("requires_session", False, True),)


def test_rule_changes_and_the_default_rule():
    state = service_state()
    state.rules[("Events", "to-b")] = {
        "$Default": rule("$Default", TrueRuleFilter()),
        "replication": rule("replication", SqlRuleFilter("replication IS NULL")),  # action missing
        "legacy": rule("legacy", SqlRuleFilter("a = 1")),
    }
    changes = plan(DESIRED, state)
    assert ops(changes) == [
        ("update", "rule", "events/to-b/replication"),
        ("extra", "rule", "events/to-b/legacy"),
        ("delete", "rule", "events/to-b/$Default"),
    ]
    assert changes[0].differences == (Difference("action", None, "SET replication = 1"),)
    assert ("delete", "rule", "events/to-b/legacy") in ops(plan(DESIRED, state, delete_extra=True))


def test_a_correlation_filter_differs_by_property_value():
    state = service_state()
    state.rules[("Events", "vip")]["vip"].filter.properties = {"tier": 2}
    [change] = plan(DESIRED, state)
    assert (change.op, change.name, change.differences[0].name) == ("update", "events/vip/vip", "filter")


def test_true_and_false_filters_equal_the_sql_the_service_stores():
    desired = namespace({"topics": {"events": {"subscriptions": {"all": {"rules": {
        "yes": {"filter": {"true": {}}}, "no": {"filter": {"false": {}}}}}}}}})
    state = NamespaceState(
        topics={"events": model(TopicProperties, "events")},
        subscriptions={"events": {"all": model(SubscriptionProperties, "all")}},
        rules={("events", "all"): {"yes": rule("yes", SqlRuleFilter("1=1")),
                                   "no": rule("no", SqlRuleFilter("1 = 0"))}},
    )
    assert plan(desired, state) == []


def test_entities_not_in_the_topology_are_kept_unless_asked():
    state = service_state()
    state.queues["legacy"] = model(QueueProperties, "legacy")
    state.subscriptions["Events"]["old"] = model(SubscriptionProperties, "old")
    assert ops(plan(DESIRED, state)) == [
        ("extra", "queue", "legacy"), ("extra", "subscription", "events/old")]
    assert ops(plan(DESIRED, state, delete_extra=True)) == [
        ("delete", "subscription", "events/old"), ("delete", "queue", "legacy")]


def test_a_subscription_without_rules_keeps_whatever_rules_it_has():
    state = service_state()
    state.rules[("Events", "consumer")] = {"custom": rule("custom", SqlRuleFilter("x = 1"))}
    assert plan(DESIRED, state) == []


def test_declared_properties_are_those_the_sdk_creates_entities_with():
    """The topology schema (which the file is validated against) and the admin client agree."""
    for kind in ("queue", "topic", "subscription"):
        parameters = inspect.signature(getattr(ServiceBusAdministrationClient, f"create_{kind}")).parameters
        sdk = {p.name for p in parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY}
        assert set(PROPERTIES[kind]) - {"status"} == sdk - {"authorization_rules", "size_in_bytes"}
