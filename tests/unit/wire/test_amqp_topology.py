"""Topology files and the emulator's Config.json become the same namespace specs and engine entities."""

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
from local_broker.topology import TopologyError, apply_entities, load, parse

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


def test_topology_file_becomes_namespace_specs(tmp_path) -> None:
    path = tmp_path / "topology.yaml"
    path.write_text(TOPOLOGY)
    primary, secondary = load(path)
    assert (primary.name, primary.max_message_size_kb) == ("primary", 1024)
    assert {p.name: sorted(p.rights) for p in primary.policies} == {
        "RootManageSharedAccessKey": ["Listen", "Manage", "Send"], "sender-only": ["Send"]}
    [orders] = primary.queues
    assert orders.duplicate_detection_history_time_window == timedelta(minutes=10)
    assert (orders.max_delivery_count, orders.status) == (7, EntityStatus.SEND_DISABLED)
    [events] = primary.topics
    consumer, to_secondary = events.subscriptions
    assert consumer.rules == []
    replicate, by_label = to_secondary.rules
    assert replicate.filter == SqlFilter("replication IS NULL")
    assert replicate.action == SqlRuleAction("SET replication = 1")
    assert by_label.filter == CorrelationFilter(label="red", properties={"k": "v"})
    assert secondary.topics[0].properties.requires_duplicate_detection is True
    assert [p.name for p in secondary.policies] == ["RootManageSharedAccessKey"]  # generated key


def test_emulator_config_json_becomes_the_same_specs() -> None:
    [spec] = parse(CONFIG)
    assert spec.name == "sbemulatorns"
    assert [(p.name, p.key) for p in spec.policies] == [("RootManageSharedAccessKey", "SAS_KEY_VALUE")]
    [q1] = spec.queues
    assert (q1.lock_duration, q1.max_delivery_count, q1.forward_to) == (timedelta(seconds=30), 3, None)
    corr, sql = spec.topics[0].subscriptions[0].rules
    assert corr.filter == CorrelationFilter(correlation_id="id-1", properties={"k": "v"})
    assert (sql.filter, sql.action) == (SqlFilter("n > 1"), SqlRuleAction("SET n = 0"))


@pytest.mark.parametrize(("document", "message"), [
    ({}, "'namespaces'"),
    ({"namespaces": {"a": {"queues": {"q": {"lock_durration": "PT1M"}}}}},
     "unknown property 'lock_durration'"),
    ({"namespaces": {"a": {"queues": {"q": {"lock_duration": "one minute"}}}}}, "lock_duration"),
    ({"namespaces": {"a": {"topics": {"t": {"subscriptions": {"s": {"rules": {"r": {
        "filter": {"sql": "a = 1", "true": {}}}}}}}}}}}, "exactly one of"),
    ({"namespaces": {"a": {"policies": {"p": {"rights": ["Send"]}}}}}, "policies"),
    ({"UserConfig": {"Namespaces": "nope"}}, "UserConfig.Namespaces"),
])
def test_bad_topologies_say_what_is_wrong(document, message) -> None:
    with pytest.raises(TopologyError, match=message):
        parse(document)


def test_entities_are_created_and_reapplying_updates_them() -> None:
    [spec, _] = parse(yaml.safe_load(TOPOLOGY))
    store = MemoryStore()
    namespace = Namespace.open(store, config=NamespaceConfig(name="primary"), clock=FakeClock())
    apply_entities(namespace, spec)
    assert namespace.get_queue("orders").max_delivery_count == 7
    assert [r.name for r in namespace.list_rules("events", "consumer")] == ["$Default"]
    assert namespace.list_rules("events", "consumer")[0].filter == TrueFilter()
    assert sorted(r.name for r in namespace.list_rules("events", "to-secondary")) == ["by-label", "replicate"]
    spec.queues[0].max_delivery_count = 9
    apply_entities(namespace, spec)  # a durable store already has the entities: they are updated
    assert namespace.get_queue("orders").max_delivery_count == 9


def test_bare_yaml_true_filter_key_means_the_true_filter(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text("namespaces:\n  a:\n    topics:\n      t:\n        subscriptions:\n          s:\n"
                    "            rules:\n              all: {filter: {true: {}}}\n")
    spec = load(str(path))[0]
    rule = spec.topics[0].subscriptions[0].rules[0]
    assert type(rule.filter).__name__ == "TrueFilter"
