"""The topology -> Bicep parameters renderer: the SDK -> ARM mapping table, rules, role assignments,
ordering, the errors Azure would otherwise give at deploy time, and each federation pattern's sample."""

from __future__ import annotations

import inspect
import re

import pytest
from azure.servicebus.management import ServiceBusAdministrationClient

import topology
from patterns.infra_params import (
    ARM_PROPERTIES,
    DATA_RECEIVER,
    DATA_SENDER,
    ENTITY_PROPERTIES,
    NOT_IN_ARM,
    InfraError,
    InfraOptions,
    arm_entity_properties,
    arm_rule,
    render_parameters,
)
from topology import RuleSpec, Topology, TopologyError

from .bicep import INFRA, PATTERNS, namespace, parse, rendered, values

# ---------------------------------------------------------------- the mapping table


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(part.capitalize() for part in rest)


def test_arm_names_are_the_camel_case_of_the_sdk_names() -> None:
    assert {sdk: p.name for sdk, p in ARM_PROPERTIES.items()} == {sdk: _camel(sdk) for sdk in ARM_PROPERTIES}
    for sdk, arm in [("lock_duration", "lockDuration"), ("max_delivery_count", "maxDeliveryCount"),
                     ("requires_duplicate_detection", "requiresDuplicateDetection"),
                     ("duplicate_detection_history_time_window", "duplicateDetectionHistoryTimeWindow"),
                     ("requires_session", "requiresSession"),
                     ("default_message_time_to_live", "defaultMessageTimeToLive"),
                     ("dead_lettering_on_message_expiration", "deadLetteringOnMessageExpiration"),
                     ("forward_to", "forwardTo"), ("enable_partitioning", "enablePartitioning")]:
        assert ARM_PROPERTIES[sdk].name == arm


@pytest.mark.parametrize("kind,method", [("queue", "create_queue"), ("topic", "create_topic"),
                                         ("subscription", "create_subscription")])
def test_every_sdk_create_argument_is_mapped_or_refused(kind: str, method: str) -> None:
    """Against the installed azure-servicebus: no SDK property the topology may use is unaccounted for."""
    params = set(inspect.signature(getattr(ServiceBusAdministrationClient, method)).parameters)
    sdk = params - {"self", "kwargs", "queue_name", "topic_name", "subscription_name"}
    assert sdk <= ENTITY_PROPERTIES[kind] | set(NOT_IN_ARM)
    assert ENTITY_PROPERTIES[kind] - {"status"} <= sdk, "only SDK names belong in the table"
    assert ENTITY_PROPERTIES[kind] <= set(ARM_PROPERTIES)


def test_properties_map_with_their_values() -> None:
    props = {"lock_duration": "PT30S", "max_delivery_count": 5, "requires_session": True,
             "forward_dead_lettered_messages_to": "aux", "status": "SendDisabled",
             "default_message_time_to_live": "P1DT2H", "auto_delete_on_idle": "PT10M"}
    assert arm_entity_properties("queue", props, "q") == {
        "lockDuration": "PT30S", "maxDeliveryCount": 5, "requiresSession": True,
        "forwardDeadLetteredMessagesTo": "aux", "status": "SendDisabled",
        "defaultMessageTimeToLive": "P1DT2H", "autoDeleteOnIdle": "PT10M"}


@pytest.mark.parametrize("key,value,message", [
    ("lock_duration", "00:01:00", "ISO 8601 duration"),
    ("lock_duration", "P", "ISO 8601 duration"),
    ("lock_duration", "PT", "ISO 8601 duration"),
    ("lock_duration", 60, "ISO 8601 duration"),
    ("requires_session", "yes", "true or false"),
    ("max_delivery_count", True, "not a whole number"),
    ("max_delivery_count", 0, "out of range, allowed 1 to"),
    ("status", "Paused", "Active, Disabled"),
    ("forward_to", "sb://ns/q", "not an entity name"),
    ("forward_to", "other/q", "a path, ARM forwards to the name of an entity"),
    ("support_ordering", True, "not a queue property"),
    ("user_metadata", "x", "has no userMetadata"),
    ("authorization_rules", [], "disableLocalAuth"),
])
def test_bad_properties_are_refused(key: str, value: object, message: str) -> None:
    with pytest.raises(InfraError, match=message) as err:
        arm_entity_properties("queue", {key: value}, "namespaces/primary/queues/orders")
    assert "namespaces/primary/queues/orders" in str(err.value)


def test_sku_limits() -> None:
    with pytest.raises(InfraError, match="Premium partitions the whole namespace"):
        arm_entity_properties("topic", {"enable_partitioning": True}, "t", sku="Premium")
    with pytest.raises(InfraError, match="enable_express is not supported on Premium"):
        arm_entity_properties("queue", {"enable_express": True}, "q", sku="Premium")
    with pytest.raises(InfraError, match="needs a Premium namespace"):
        arm_entity_properties("queue", {"max_message_size_in_kilobytes": 1024}, "q")
    assert arm_entity_properties("queue", {"max_message_size_in_kilobytes": 1024}, "q", sku="Premium") == {
        "maxMessageSizeInKilobytes": 1024}
    assert arm_entity_properties("queue", {"enable_partitioning": True}, "q") == {"enablePartitioning": True}


# ---------------------------------------------------------------- rules


def test_sql_rule_with_action() -> None:
    rule = RuleSpec("replicate", {"sql": "replication IS NULL"}, {"sql": "SET replication = 1"})
    assert arm_rule(rule, "r") == {
        "filterType": "SqlFilter",
        "sqlFilter": {"sqlExpression": "replication IS NULL", "compatibilityLevel": 20},
        "action": {"sqlExpression": "SET replication = 1", "compatibilityLevel": 20}}


def test_true_false_and_correlation_filters() -> None:
    assert arm_rule(RuleSpec("all", {"true": {}}), "r")["sqlFilter"]["sqlExpression"] == "1=1"
    assert arm_rule(RuleSpec("none", {"false": {}}), "r")["sqlFilter"]["sqlExpression"] == "1=0"
    correlation = {"correlation": {"correlation_id": "c1", "label": "order", "reply_to_session_id": "s",
                                   "content_type": "application/json", "properties": {"region": "eu"}}}
    assert arm_rule(RuleSpec("corr", correlation), "r") == {
        "filterType": "CorrelationFilter",
        "correlationFilter": {"correlationId": "c1", "label": "order", "replyToSessionId": "s",
                              "contentType": "application/json", "properties": {"region": "eu"}}}


@pytest.mark.parametrize("rule,message", [
    (RuleSpec("p", {"sql": "a = @x", "parameters": {"@x": 1}}), "SQL filters take no parameters"),
    (RuleSpec("p", {"sql": "1=1"}, {"sql": "SET a = @x", "parameters": {"@x": 1}}),
     "actions take no parameters"),
    (RuleSpec("p", {"sql": "  "}), "SQL filter is empty"),
    (RuleSpec("p", {"correlation": {}}), "at least one field"),
    (RuleSpec("p", {"correlation": {"subject": "x"}}), "unknown correlation filter field 'subject'"),
    (RuleSpec("p", {"correlation": {"properties": {"priority": 5}}}), "carry string values only"),
    (RuleSpec("p", {"correlation": {"label": 5}}), "must be a string"),
])
def test_rules_arm_cannot_carry_are_refused(rule: RuleSpec, message: str) -> None:
    with pytest.raises(InfraError, match=message):
        arm_rule(rule, "namespaces/primary/topics/events/s/rules/p")


def _topology(namespaces: dict, tasks: list | None = None, connections: dict | None = None):
    return topology.parse({"namespaces": namespaces, "tasks": tasks or [],
                               "connections": connections or {n.upper(): n for n in namespaces}})


def _render(topology, **options) -> dict:
    locations = options.pop("locations", {n: "westeurope" for n in topology.namespaces})
    options = InfraOptions(locations=locations, topology_file="t.yaml", **options)
    document = render_parameters(topology, options)
    return {name: p["value"] for name, p in document["parameters"].items()}


def test_default_rule_is_neutralised_only_when_rules_are_given() -> None:
    topology = _topology({"primary": {"topics": {"events": {"subscriptions": {
        "plain": {},
        "filtered": {"rules": {"mine": {"filter": {"sql": "a = 1"}}}},
        "own-default": {"rules": {"$Default": {"filter": {"sql": "b = 2"}}}},
    }}}}})
    subs = {s["name"]: s["rules"] for s in _render(topology)["namespaces"][0]["topics"][0]["subscriptions"]}
    assert subs["plain"] == []
    assert [(r["name"], r["properties"]["sqlFilter"]["sqlExpression"]) for r in subs["filtered"]] == [
        ("$Default", "1=0"), ("mine", "a = 1")]
    assert [(r["name"], r["properties"]["sqlFilter"]["sqlExpression"]) for r in subs["own-default"]] == [
        ("$Default", "b = 2")]


# ---------------------------------------------------------------- auto-forwarding order


def test_queues_are_ordered_so_forward_targets_exist_first() -> None:
    topology = _topology({"primary": {"queues": {
        "a": {"forward_to": "b"}, "b": {"forward_dead_lettered_messages_to": "c"}, "c": {}, "d": {},
        "e": {"forward_to": "events"}}, "topics": {"events": {}}}})
    assert [q["name"] for q in _render(topology)["namespaces"][0]["queues"]] == ["c", "b", "a", "d", "e"]


@pytest.mark.parametrize("queues,topics,message", [
    ({"a": {"forward_to": "nowhere"}}, {}, "primary/a: forward_to: 'nowhere' is not declared"),
    ({}, {"t": {"subscriptions": {"s": {"forward_to": "nowhere"}}}}, "primary/t/s: forward_to: 'nowhere'"),
    ({"a": {"forward_to": "b"}, "b": {"forward_to": "a"}}, {}, "a -> b -> a is a forwarding cycle"),
    ({"a": {"forward_to": "a"}}, {}, "a -> a is a forwarding cycle"),
])
def test_forwarding_errors_are_refused_when_the_topology_is_read(queues: dict, topics: dict,
                                                                  message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        _topology({"primary": {"queues": queues, "topics": topics}})


# ---------------------------------------------------------------- tasks and roles


TWO_REGIONS = {"primary": {"queues": {"orders": {}}, "topics": {"events": {"subscriptions": {"out": {}}}}},
               "secondary": {"queues": {"orders": {}}, "topics": {"events": {}}}}


def test_roles_are_deduplicated_and_settings_are_only_those_tasks_name() -> None:
    tasks = [
        {"name": "t1", "source": {"connection": "PRIMARY", "topic": "events", "subscription": "out"},
         "target": {"connection": "SECONDARY", "topic": "events"}},
        {"name": "t2", "kind": "replicate", "source": {"connection": "PRIMARY", "topic": "Events",
                                                       "subscription": "OUT"},
         "target": {"connection": "SECONDARY", "topic": "events"}},
    ]
    connections = {"PRIMARY": "primary", "SECONDARY": "secondary", "UNUSED": "primary"}
    topology = _topology(TWO_REGIONS, tasks, connections)
    rendered_values = _render(topology)
    roles = {ns["name"]: ns["roleAssignments"] for ns in rendered_values["namespaces"]}
    assert roles == {
        "primary": [{"role": DATA_RECEIVER, "entityType": "subscription", "topic": "events",
                     "subscription": "out"}],
        "secondary": [{"role": DATA_SENDER, "entityType": "topic", "topic": "events"}],
    }
    assert rendered_values["connections"] == [{"setting": "PRIMARY", "namespace": "primary"},
                                              {"setting": "SECONDARY", "namespace": "secondary"}]


def test_a_transform_may_reroute_so_its_sender_role_covers_the_target_namespace() -> None:
    tasks = [
        {"name": "plain", "source": {"connection": "PRIMARY", "queue": "orders"},
         "target": {"connection": "SECONDARY", "queue": "orders"}},
        {"name": "rerouting", "source": {"connection": "PRIMARY", "topic": "events", "subscription": "out"},
         "target": {"connection": "SECONDARY", "topic": "events"},
         "options": {"transform": "patterns.transforms:spill_once"}},
    ]
    roles = {ns["name"]: ns["roleAssignments"] for ns in _render(_topology(TWO_REGIONS, tasks))["namespaces"]}
    assert roles["secondary"] == [{"role": DATA_SENDER, "entityType": "namespace"}]
    assert [a["entityType"] for a in roles["primary"]] == ["queue", "subscription"]


def test_audit_task_needs_only_the_receiver_role() -> None:
    tasks = [{"name": "audit", "kind": "audit", "source": {"connection": "SECONDARY", "queue": "orders"}}]
    roles = {ns["name"]: ns["roleAssignments"] for ns in _render(_topology(TWO_REGIONS, tasks))["namespaces"]}
    assert roles == {"primary": [], "secondary": [{"role": DATA_RECEIVER, "entityType": "queue",
                                                   "queue": "orders"}]}


@pytest.mark.parametrize("task,message", [
    ({"source": {"connection": "PRIMARY", "queue": "missing"}, "target": {"connection": "SECONDARY",
                                                                         "queue": "orders"}},
     "tasks/t/source: queue: 'missing' is not declared in namespace primary, allowed: a queue the file "
     "declares there"),
    ({"source": {"connection": "PRIMARY", "topic": "events"}, "target": {"connection": "SECONDARY",
                                                                        "queue": "orders"}},
     "add subscription"),
    ({"source": {"connection": "PRIMARY", "topic": "events", "subscription": "nope"},
      "target": {"connection": "SECONDARY", "queue": "orders"}},
     "tasks/t/source: subscription: 'nope' is not declared in namespace primary, "),
    ({"source": {"connection": "PRIMARY", "queue": "orders"},
      "target": {"connection": "SECONDARY", "topic": "events", "subscription": "x"}},
     "not to a subscription"),
    ({"source": {"connection": "PRIMARY", "queue": "orders", "topic": "events"},
      "target": {"connection": "SECONDARY", "queue": "orders"}},
     "exactly one of queue or topic"),
    ({"source": {"connection": "PRIMARY", "queue": "orders"}}, r"target: expected \{connection"),
    ({"kind": "mirror", "source": {"connection": "PRIMARY", "queue": "orders"}},
     "kind must be replicate, audit or stream-to-queue"),
    ({"source": {"connection": "ELSEWHERE", "queue": "orders"}}, "names no declared namespace"),
])
def test_task_errors(task: dict, message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        _render(_topology(TWO_REGIONS, [{"name": "t", **task}]))


def test_deployment_option_errors() -> None:
    topology = _topology(TWO_REGIONS)
    with pytest.raises(InfraError, match="add secondary=<region> to the location map"):
        _render(topology, locations={"primary": "westeurope"})
    with pytest.raises(InfraError, match="hosting must be one of flex, premium"):
        _render(topology, hosting="consumption")
    with pytest.raises(InfraError, match="topics need Standard"):
        _render(topology, sku="Basic")
    with pytest.raises(InfraError, match="at most 32"):
        _render(_topology({"x" * 33: {}}))
    with pytest.raises(InfraError, match="starts with a letter"):
        _render(_topology({"1st": {}}))
    with pytest.raises(InfraError, match="declares no namespaces"):
        _render(Topology())


# ---------------------------------------------------------------- the template's parameters


def test_rendered_parameters_match_the_template() -> None:
    declared = parse(INFRA / "main.bicep")["parameters"]
    required = {name for name, p in declared.items() if p["default"] is None}
    types = {"array": list, "object": dict, "string": str, "int": int, "bool": bool}
    for pattern in PATTERNS:
        for hosting in ("flex", "premium"):
            document = rendered(pattern, hosting)
            assert document["$schema"].endswith("deploymentParameters.json#")
            assert document["contentVersion"] == "1.0.0.0"
            params = document["parameters"]
            assert set(params) <= set(declared), f"unknown parameters {set(params) - set(declared)}"
            assert required <= set(params), f"missing required parameters {required - set(params)}"
            for name, p in params.items():
                assert set(p) == {"value"}
                assert isinstance(p["value"], types[declared[name]["type"]]), name
                allowed = [d["argument"] for d in declared[name]["decorators"] if d["type"] == "allowed"]
                assert not allowed or p["value"] in allowed[0], f"{name}={p['value']!r} not in {allowed[0]}"


def test_one_location_map_serves_several_topologies() -> None:
    locations = {"primary": "westeurope", "secondary": "northeurope", "tertiary": "eastus"}
    assert [ns["location"] for ns in _render(_topology(TWO_REGIONS), locations=locations)["namespaces"]] == [
        "westeurope", "northeurope"]


def test_azd_fills_in_the_environment() -> None:
    v = values("all-active")
    assert (v["namePrefix"], v["location"], v["operatorPrincipalId"]) == (
        "${AZURE_ENV_NAME}", "${AZURE_LOCATION}", "${AZURE_PRINCIPAL_ID}")
    assert v["topologyFile"] == "tests/unit/infra/fixtures/all-active.yaml"
    assert [(ns["name"], ns["location"], ns["sku"]) for ns in v["namespaces"]] == [
        ("primary", "westeurope", "Standard"), ("secondary", "northeurope", "Standard")]


# ---------------------------------------------------------------- the three patterns


def _subscriptions(pattern: str, ns: str, topic: str = "events") -> dict[str, dict]:
    [t] = [t for t in namespace(pattern, ns)["topics"] if t["name"] == topic]
    return {s["name"]: s for s in t["subscriptions"]}


def _rule_text(rule: dict) -> tuple[str, str, str | None]:
    props = rule["properties"]
    return rule["name"], props["sqlFilter"]["sqlExpression"], props.get("action", {}).get("sqlExpression")


@pytest.mark.parametrize("ns,peer", [("primary", "secondary"), ("secondary", "primary")])
def test_all_active(ns: str, peer: str) -> None:
    subs = _subscriptions("all-active", ns)
    assert set(subs) == {"consumer", "audit", f"to-{peer}"}
    assert subs["consumer"]["rules"] == [] and subs["audit"]["rules"] == []
    assert [_rule_text(r) for r in subs[f"to-{peer}"]["rules"]] == [
        ("$Default", "1=0", None), ("replicate", "replication IS NULL", "SET replication = 1")]
    [topic] = namespace("all-active", ns)["topics"]
    assert topic["properties"]["requiresDuplicateDetection"] is True
    assert topic["properties"]["duplicateDetectionHistoryTimeWindow"] == "PT10M"
    receive = {"role": DATA_RECEIVER, "entityType": "subscription", "topic": "events"}
    assert _unordered(namespace("all-active", ns)["roleAssignments"]) == _unordered([
        {**receive, "subscription": f"to-{peer}"},
        {**receive, "subscription": "audit"},
        {"role": DATA_SENDER, "entityType": "topic", "topic": "events"},
    ])


def _unordered(assignments: list[dict]) -> list:
    return sorted(sorted(a.items()) for a in assignments)


def test_active_passive() -> None:
    primary = _subscriptions("active-passive", "primary")
    assert [_rule_text(r) for r in primary["to-secondary"]["rules"]] == [
        ("$Default", "1=0", None), ("replicate", "1=1", "SET sys.TimeToLive = '0:2:0'")]
    assert "to-primary" not in _subscriptions("active-passive", "secondary")
    roles = {ns: namespace("active-passive", ns)["roleAssignments"] for ns in ("primary", "secondary")}
    assert [a for a in roles["primary"] if a["role"] == DATA_SENDER] == []
    assert {a.get("subscription") for a in roles["primary"]} == {"to-secondary", "audit"}
    assert roles["secondary"] == [
        {"role": DATA_SENDER, "entityType": "topic", "topic": "events"},
        {"role": DATA_RECEIVER, "entityType": "subscription", "topic": "events", "subscription": "audit"}]


def test_spillover() -> None:
    primary, secondary = namespace("spillover", "primary"), namespace("spillover", "secondary")
    [orders] = primary["queues"]
    assert orders["properties"]["deadLetteringOnMessageExpiration"] is True
    assert orders["properties"]["defaultMessageTimeToLive"] == "PT5M"
    assert [q["name"] for q in secondary["queues"]] == ["orders-aux", "orders"]
    assert secondary["queues"][1]["properties"]["forwardDeadLetteredMessagesTo"] == "orders-aux"
    # Receiving from orders/$deadletterqueue is covered by a role on the queue itself.
    assert primary["roleAssignments"] == [{"role": DATA_RECEIVER, "entityType": "queue", "queue": "orders"}]
    assert secondary["roleAssignments"] == [{"role": DATA_SENDER, "entityType": "queue", "queue": "orders"}]


# ---------------------------------------------------------------- no secrets


SECRET_MARKERS = re.compile(
    r"SharedAccessKey|AccountKey|listKeys\(|DefaultEndpointsProtocol|Endpoint=sb://|InstrumentationKey=",
    re.IGNORECASE)


def test_secret_scan_catches_planted_secrets() -> None:
    for planted in ("Endpoint=sb://x.servicebus.windows.net/;SharedAccessKeyName=a;SharedAccessKey=b",
                    "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=b",
                    "st.listKeys().keys[0].value",
                    "InstrumentationKey=00000000-0000-0000-0000-000000000000"):
        assert SECRET_MARKERS.search(planted)


def test_no_keys_or_connection_strings_in_templates_or_rendered_parameters() -> None:
    texts = {str(p): p.read_text() for p in sorted(INFRA.rglob("*")) if p.suffix in (".bicep", ".json")}
    texts["azure.yaml"] = (INFRA.parent / "azure.yaml").read_text()
    for pattern in PATTERNS:
        for hosting in ("flex", "premium"):
            texts[f"{pattern}/{hosting}"] = str(rendered(pattern, hosting))
    # The one exception: the Functions Kafka trigger signs in to Event Hubs with a connection string, which
    # goes from the Listen rule straight into the app's Key Vault (test_infra_stream.py checks where).
    eventhubs = str(INFRA / "modules" / "eventhubs-namespace.bicep")
    texts[eventhubs] = texts[eventhubs].replace("listKeys(listenRule.id, listenRule.apiVersion)", "", 1)
    found = {name: SECRET_MARKERS.findall(text) for name, text in texts.items()}
    assert not {name: hits for name, hits in found.items() if hits}
