"""Topology files and the emulator's Config.json become engine entities, created in dependency order."""

from __future__ import annotations

from datetime import timedelta

import pytest
import yaml

from local_broker.engine import (
    CorrelationFilter,
    EntityStatus,
    FakeClock,
    NamespaceConfig,
    SqlFilter,
    SqlRuleAction,
    TrueFilter,
)
from local_broker.engine.namespace import Namespace
from local_broker.store import MemoryStore
from local_broker.topology import apply_entities, check_sql, declared_policies, engine_properties, engine_rule
from topology import TopologyError, add_check, load, parse

TOPOLOGY = """
namespaces:
  primary:
    local: {amqp_port: 0, admin_port: 0, max_message_size_kb: 1024}
    policies:
      RootManageSharedAccessKey: {key: "a2V5", rights: [Manage, Send, Listen]}
      sender-only: {key: "c2VuZA==", rights: [Send]}
    queues:
      orders:
        requires_duplicate_detection: true
        duplicate_detection_history_time_window: PT10M
        max_delivery_count: 7
        status: SendDisabled
    topics:
      events:
        subscriptions:
          consumer: {}
          to-secondary:
            lock_duration: PT1M
            rules:
              replicate:
                filter: {sql: "replication IS NULL"}
                action: {sql: "SET replication = 1"}
              by-label:
                filter: {correlation: {label: red, properties: {k: v}}}
  secondary:
    topics:
      events: {requires_duplicate_detection: true}
tasks: [{name: ignored}]
connections: {PRIMARY: primary}
"""

CONFIG = {"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": [
    {"Name": "q1", "Properties": {"LockDuration": "PT30S", "MaxDeliveryCount": 3, "ForwardTo": "",
                                  "RequiresSession": False, "DefaultMessageTimeToLive": "PT1H"}}],
    "Topics": [{"Name": "t1", "Properties": {"RequiresDuplicateDetection": False}, "Subscriptions": [
        {"Name": "s1", "Properties": {"MaxDeliveryCount": 3, "ForwardDeadLetteredMessagesTo": ""}, "Rules": [
            {"Name": "corr", "Properties": {"FilterType": "Correlation", "CorrelationFilter": {
                "ContentType": "", "CorrelationId": "id-1", "Label": "", "Properties": {"k": "v"}}}},
            {"Name": "sql", "Properties": {"FilterType": "Sql", "SqlFilter": {"SqlExpression": "n > 1"},
                                           "Action": {"SqlExpression": "SET n = 0"}}}]}]}]}],
    "Logging": {"Type": "File"}}}


def _engine(name: str = "primary") -> Namespace:
    return Namespace.open(MemoryStore(), config=NamespaceConfig(name=name), clock=FakeClock())


def test_topology_file_becomes_engine_properties(tmp_path) -> None:
    path = tmp_path / "topology.yaml"
    path.write_text(TOPOLOGY)
    primary, secondary = load(path).namespaces.values()
    assert primary.local["max_message_size_kb"] == 1024
    assert {p.name: sorted(p.rights) for p in declared_policies(primary)} == {
        "RootManageSharedAccessKey": ["Listen", "Manage", "Send"], "sender-only": ["Send"]}
    orders = engine_properties("queue", "orders", primary.queues[0].properties)
    assert orders.duplicate_detection_history_time_window == timedelta(minutes=10)
    assert (orders.max_delivery_count, orders.status) == (7, EntityStatus.SEND_DISABLED)
    consumer, to_secondary = primary.topics[0].subscriptions
    assert consumer.rules == []
    replicate, by_label = (engine_rule(r) for r in to_secondary.rules)
    assert replicate.filter == SqlFilter("replication IS NULL")
    assert replicate.action == SqlRuleAction("SET replication = 1")
    assert by_label.filter == CorrelationFilter(label="red", properties={"k": "v"})
    assert declared_policies(secondary) == []  # the server gives it the default policy


def test_emulator_config_json_becomes_the_same_entities() -> None:
    [spec] = parse(CONFIG).namespaces.values()
    assert spec.name == "sbemulatorns"
    q1 = engine_properties("queue", "q1", spec.queues[0].properties)
    assert (q1.lock_duration, q1.max_delivery_count, q1.forward_to) == (timedelta(seconds=30), 3, None)
    corr, sql = (engine_rule(r) for r in spec.topics[0].subscriptions[0].rules)
    assert corr.filter == CorrelationFilter(correlation_id="id-1", properties={"k": "v"})
    assert (sql.filter, sql.action) == (SqlFilter("n > 1"), SqlRuleAction("SET n = 0"))


def test_entities_are_created_and_reapplying_updates_them() -> None:
    spec = parse(yaml.safe_load(TOPOLOGY)).namespaces["primary"]
    namespace = _engine()
    apply_entities(namespace, spec)
    assert namespace.get_queue("orders").max_delivery_count == 7
    assert [r.name for r in namespace.list_rules("events", "consumer")] == ["$Default"]
    assert namespace.list_rules("events", "consumer")[0].filter == TrueFilter()
    assert sorted(r.name for r in namespace.list_rules("events", "to-secondary")) == ["by-label", "replicate"]
    spec.queues[0].properties["max_delivery_count"] = 9
    apply_entities(namespace, spec)  # a durable store already has the entities: they are updated
    assert namespace.get_queue("orders").max_delivery_count == 9


def test_forwarding_destinations_are_created_first_wherever_the_file_declares_them() -> None:
    config = {"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": [
        {"Name": "fwd-0", "Properties": {"ForwardTo": "fwd-1"}},
        {"Name": "fwd-1", "Properties": {"ForwardDeadLetteredMessagesTo": "fwd-2"}},
        {"Name": "fwd-2", "Properties": {"ForwardTo": "late-topic"}}],
        "Topics": [{"Name": "early-topic", "Subscriptions": [
            {"Name": "s", "Properties": {"ForwardTo": "fwd-0"}}]}, {"Name": "late-topic"}]}]}}
    spec = parse(config).namespaces["sbemulatorns"]
    namespace = _engine("sbemulatorns")
    apply_entities(namespace, spec)
    assert namespace.get_queue("fwd-0").forward_to == "fwd-1"
    assert namespace.get_queue("fwd-1").forward_dead_lettered_messages_to == "fwd-2"
    assert namespace.get_subscription("early-topic", "s").forward_to == "fwd-0"


def test_what_the_engine_refuses_is_a_line_naming_the_entity() -> None:
    spec = parse({"namespaces": {"a": {"queues": {"big": {"max_message_size_in_kilobytes": 2048}}}}},
                 "t.yaml").namespaces["a"]
    with pytest.raises(TopologyError) as caught:
        apply_entities(_engine("a"), spec, "t.yaml")
    assert str(caught.value).startswith("t.yaml: a/big: MaxMessageSizeInKilobytes can be set only on Premium")


def test_sql_is_compiled_with_the_broker_rules_language() -> None:
    document = {"namespaces": {"a": {"topics": {"t": {"subscriptions": {"s": {"rules": {
        "good": {"filter": {"sql": "n > 1"}, "action": {"sql": "SET n = 0"}},
        "bad": {"filter": {"sql": "n >"}, "action": {"sql": "SET sys.SequenceNumber = 1"}}}}}}}}}}
    add_check(check_sql)  # as the broker and the `sbfed` dispatcher do
    with pytest.raises(TopologyError) as caught:
        parse(document, "t.yaml")
    assert [line.split(": ")[:3] for line in caught.value.problems] == [["t.yaml", "a/t/s/bad", "filter.sql"],
                                                                        ["t.yaml", "a/t/s/bad", "action.sql"]]


def test_bare_yaml_true_filter_key_means_the_true_filter(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text("namespaces:\n  a:\n    topics:\n      t:\n        subscriptions:\n          s:\n"
                    "            rules:\n              all: {filter: {true: {}}}\n")
    rule = load(str(path)).namespaces["a"].topics[0].subscriptions[0].rules[0]
    assert type(engine_rule(rule).filter).__name__ == "TrueFilter"
