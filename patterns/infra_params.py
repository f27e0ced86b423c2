"""Render the parameters of `infra/main.bicep` from a topology file, so Bicep never holds a second copy.

The topology speaks the azure-servicebus SDK's language (snake_case keyword arguments, ISO 8601 durations);
ARM speaks camelCase. `ARM_PROPERTIES` is the one table between them. The renderer also decides what the
Function App's identity may do: for every task, Azure Service Bus Data Receiver on the source entity and
Data Sender on the target entity, each scoped to that entity (queue, topic, or topic subscription) rather
than to the namespace, unless a transform may reroute the copy (then Sender covers the target namespace).
A stream-to-queue task's source is a Kafka cluster of the topology's `kafka` section: it becomes an Event
Hubs namespace (`eventHubs`) whose Kafka endpoint the app reads with a connection string (`kafkaConnections`).
A property ARM cannot carry is an error here, not a silent drop at deploy time.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from topology import (
    GeoReplicationSpec,
    NamespaceSpec,
    QueueSpec,
    RuleSpec,
    Topology,
    TopologyError,
    creation_order,
)
from topology.durations import format_duration
from topology.problems import check_value
from topology.schema import FORWARDING, PROPERTIES

PARAMETERS_SCHEMA = "https://schema.management.azure.com/schemas/2019-04-01/deploymentParameters.json#"

DATA_RECEIVER = "Azure Service Bus Data Receiver"
DATA_SENDER = "Azure Service Bus Data Sender"

HOSTINGS = ("flex", "premium")
SKUS = ("Standard", "Premium")

# Bicep builds the namespace name as 'sb-<name>-<13-character token>'; Azure allows 50 characters.
MAX_NAMESPACE_NAME = 32
_NAMESPACE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]*$")
MAX_STANDARD_PARTITIONS = 32  # partitions of an event hub in a Standard namespace
# ARM rule filters and actions are SQL-92 expressions at compatibility level 20 (the only level there is).
SQL_COMPATIBILITY_LEVEL = 20


# Geo-Replication (Microsoft.ServiceBus/namespaces@2023-01-01-preview, properties.geoDataReplication):
# maxReplicationLagDurationInSeconds is 0 (synchronous) or 5 minutes to 1 day; one secondary region.
GEO_MAX_LAG = (dt.timedelta(minutes=5), dt.timedelta(days=1))
GEO_REGIONS = 2


class InfraError(TopologyError):
    """The topology cannot be deployed to Azure as declared; the message says where and why."""


@dataclass(frozen=True)
class ArmProperty:
    name: str  # the ARM (camelCase) property name


# SDK keyword argument -> ARM property (Microsoft.ServiceBus/namespaces/* @2024-01-01).
ARM_PROPERTIES: dict[str, ArmProperty] = {
    "auto_delete_on_idle": ArmProperty("autoDeleteOnIdle"),
    "dead_lettering_on_filter_evaluation_exceptions": ArmProperty(
        "deadLetteringOnFilterEvaluationExceptions"),
    "dead_lettering_on_message_expiration": ArmProperty("deadLetteringOnMessageExpiration"),
    "default_message_time_to_live": ArmProperty("defaultMessageTimeToLive"),
    "duplicate_detection_history_time_window": ArmProperty("duplicateDetectionHistoryTimeWindow"),
    "enable_batched_operations": ArmProperty("enableBatchedOperations"),
    "enable_express": ArmProperty("enableExpress"),
    "enable_partitioning": ArmProperty("enablePartitioning"),
    "forward_dead_lettered_messages_to": ArmProperty("forwardDeadLetteredMessagesTo"),
    "forward_to": ArmProperty("forwardTo"),
    "lock_duration": ArmProperty("lockDuration"),
    "max_delivery_count": ArmProperty("maxDeliveryCount"),
    "max_message_size_in_kilobytes": ArmProperty("maxMessageSizeInKilobytes"),
    "max_size_in_megabytes": ArmProperty("maxSizeInMegabytes"),
    "requires_duplicate_detection": ArmProperty("requiresDuplicateDetection"),
    "requires_session": ArmProperty("requiresSession"),
    "status": ArmProperty("status"),
    "support_ordering": ArmProperty("supportOrdering"),
}

# SDK properties with no ARM counterpart in the API version the templates use.
NOT_IN_ARM: dict[str, str] = {
    "user_metadata": "ARM Microsoft.ServiceBus@2024-01-01 has no userMetadata",
    "authorization_rules": "SAS rules are not deployed: the namespaces run with disableLocalAuth",
    "filtering_messages_before_publishing": "ARM has no such topic property",
    "size_in_bytes": "it is a runtime figure, not a setting",
}

# Which SDK properties each entity kind takes: the topology schema's, less those ARM has no counterpart for.
ENTITY_PROPERTIES: dict[str, frozenset[str]] = {
    kind: frozenset(table) - NOT_IN_ARM.keys() for kind, table in PROPERTIES.items()
}

# Correlation filter fields: SDK name -> ARM name.
CORRELATION_FIELDS: dict[str, str] = {
    "content_type": "contentType",
    "correlation_id": "correlationId",
    "label": "label",
    "message_id": "messageId",
    "reply_to": "replyTo",
    "reply_to_session_id": "replyToSessionId",
    "session_id": "sessionId",
    "to": "to",
}


@dataclass
class InfraOptions:
    """Deployment choices that are not in the topology file. `${...}` values are filled in by azd."""

    locations: dict[str, str]  # namespace -> Azure region (entries for other namespaces are ignored)
    topology_file: str  # the topology file's path inside the deployed app (SBFED_TOPOLOGY)
    hosting: str = "flex"
    sku: str = "Standard"
    name_prefix: str = "${AZURE_ENV_NAME}"
    app_location: str = "${AZURE_LOCATION}"
    operator_principal_id: str = "${AZURE_PRINCIPAL_ID}"


def arm_entity_properties(kind: str, props: dict[str, Any], where: str,
                          sku: str = "Standard") -> dict[str, Any]:
    """Map one entity's SDK properties to ARM ones, checking each value and what the SKU allows."""
    out: dict[str, Any] = {}
    for key, value in props.items():
        if key in NOT_IN_ARM:
            raise InfraError(f"{where}: property '{key}' cannot be deployed with Bicep: {NOT_IN_ARM[key]}")
        if key not in ENTITY_PROPERTIES[kind]:
            raise InfraError(f"{where}: '{key}' is not a {kind} property "
                             f"(known: {', '.join(sorted(ENTITY_PROPERTIES[kind]))})")
        prop = ARM_PROPERTIES[key]
        out[prop.name] = _checked_value(kind, key, value, f"{where}/{key}")
    _check_sku(out, where, sku)
    return out


def _checked_value(kind: str, key: str, value: Any, where: str) -> Any:
    """The value as the topology schema allows it; ARM adds that a forwarding destination is a plain name."""
    problem = check_value(PROPERTIES[kind][key], value)
    if problem:
        raise InfraError(f"{where}: {problem}")
    if key in FORWARDING and "/" in value:
        raise InfraError(f"{where}: '{value}' is a path, ARM forwards to the name of an entity in the same "
                         "namespace")
    return value


def _check_sku(arm: dict[str, Any], where: str, sku: str) -> None:
    """The per-entity settings Service Bus refuses for the namespace's tier."""
    if sku == "Premium":
        if arm.get("enablePartitioning"):
            raise InfraError(f"{where}: enable_partitioning is not supported on Premium namespaces "
                             "(Premium partitions the whole namespace)")
        if arm.get("enableExpress"):
            raise InfraError(f"{where}: enable_express is not supported on Premium namespaces")
    elif "maxMessageSizeInKilobytes" in arm:
        raise InfraError(f"{where}: max_message_size_in_kilobytes needs a Premium namespace "
                         "(use --sku Premium)")


def arm_rule(rule: RuleSpec, where: str) -> dict[str, Any]:
    """A topology rule as ARM rule properties: filterType, sqlFilter | correlationFilter, action."""
    kind = rule.filter_kind
    if kind == "correlation":
        props: dict[str, Any] = {"filterType": "CorrelationFilter",
                                 "correlationFilter": _correlation_filter(rule.filter["correlation"], where)}
    else:
        if kind == "sql":
            expression = rule.filter["sql"]
            if not isinstance(expression, str) or not expression.strip():
                raise InfraError(f"{where}: the SQL filter is empty")
            if rule.filter.get("parameters"):
                raise InfraError(f"{where}: ARM SQL filters take no parameters; write the values into the "
                                 "expression")
        else:
            expression = "1=1" if kind == "true" else "1=0"
        props = {"filterType": "SqlFilter",
                 "sqlFilter": {"sqlExpression": expression, "compatibilityLevel": SQL_COMPATIBILITY_LEVEL}}
    if rule.action is not None:
        if rule.action.get("parameters"):
            raise InfraError(f"{where}: ARM rule actions take no parameters; write the values into the "
                             "action")
        props["action"] = {"sqlExpression": rule.action["sql"], "compatibilityLevel": SQL_COMPATIBILITY_LEVEL}
    return props


def _correlation_filter(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise InfraError(f"{where}: a correlation filter is a mapping of fields")
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "properties":
            out["properties"] = _correlation_properties(value, where)
        elif key in CORRELATION_FIELDS:
            if not isinstance(value, str):
                raise InfraError(f"{where}: correlation field '{key}' must be a string")
            out[CORRELATION_FIELDS[key]] = value
        else:
            raise InfraError(f"{where}: unknown correlation filter field '{key}' "
                             f"(known: {', '.join(sorted([*CORRELATION_FIELDS, 'properties']))})")
    if not any(out.values()):
        raise InfraError(f"{where}: a correlation filter needs at least one field")
    return out


def _correlation_properties(raw: Any, where: str) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise InfraError(f"{where}: correlation filter properties are a mapping of name to value")
    for name, value in raw.items():
        if not isinstance(value, str):
            # Service Bus compares application properties by type; ARM carries strings only, so an int
            # would silently become a filter that never matches.
            raise InfraError(f"{where}: correlation property '{name}' is {type(value).__name__}; ARM "
                             "templates carry string values only")
    return dict(raw)


def _rules(rules: list[RuleSpec], where: str) -> list[dict[str, Any]]:
    """ARM creates `$Default` (true filter) with every subscription and cannot delete it, so a subscription
    with rules of its own gets `$Default` replaced by a filter that never matches."""
    out = [{"name": r.name, "properties": arm_rule(r, f"{where}/rules/{r.name}")} for r in rules]
    if rules and not any(r.name == "$Default" for r in rules):
        never = RuleSpec("$Default", {"false": {}})
        out.insert(0, {"name": never.name, "properties": arm_rule(never, where)})
    return out


def _ordered_queues(ns: NamespaceSpec) -> list[QueueSpec]:
    """Queues in deployment order: an autoforward target before the queue that forwards to it (Bicep
    deploys the queues one at a time in this order; the topology was checked for cycles when read)."""
    return [step.spec for step in creation_order(ns) if step.kind == "queue"]  # type: ignore[misc]


def arm_geo_replication(geo: GeoReplicationSpec, where: str, sku: str) -> dict[str, Any]:
    """A topology's `geo_replication` as ARM `geoDataReplication`: the primary's and the secondary's regions
    with their roles, and the maximum lag Azure accepts (0: synchronous)."""
    where = f"{where}/geo_replication"
    if sku != "Premium":
        raise InfraError(f"{where}: Geo-Replication needs a Premium namespace (use --sku Premium)")
    if len(geo.regions) > GEO_REGIONS:
        raise InfraError(f"{where}: regions: Azure replicates to one secondary region, not "
                         f"{len(geo.regions) - 1}")
    lag = 0
    if geo.mode == "asynchronous":
        least, most = GEO_MAX_LAG
        if not least <= geo.max_lag <= most:
            raise InfraError(f"{where}: max_lag: Azure accepts {format_duration(least)} to "
                             f"{format_duration(most)} for asynchronous replication, not "
                             f"{format_duration(geo.max_lag)} (shorter lags are for the local broker's "
                             "drills)")
        lag = int(geo.max_lag.total_seconds())
    roles = {region: "Primary" if region == geo.primary else "Secondary" for region in geo.regions}
    return {"locations": [{"locationName": region, "roleType": role} for region, role in roles.items()],
            "maxReplicationLagDurationInSeconds": lag}


def _location(ns: NamespaceSpec, locations: dict[str, str]) -> str:
    """The namespace's Azure region: the location map's; a geo-replicated namespace's, its primary region."""
    where = f"namespaces/{ns.name}"
    given = locations.get(ns.name)
    if ns.geo_replication is not None:
        primary = ns.geo_replication.primary
        if given and given != primary:
            raise InfraError(f"{where}: the location map says {given}, geo_replication's primary is "
                             f"{primary}; a geo-replicated namespace lives in its primary region")
        return primary
    if not given:
        raise InfraError(f"{where}: no Azure region; add {ns.name}=<region> to the location map")
    return given


def _namespace(ns: NamespaceSpec, location: str, sku: str, roles: list[dict[str, str]]) -> dict[str, Any]:
    where = f"namespaces/{ns.name}"
    geo = ns.geo_replication
    return {
        "name": ns.name,
        "location": location,
        "sku": sku,
        # null for a namespace in one region (the template passes it on: ARM leaves the property unset)
        "geoDataReplication": None if geo is None else arm_geo_replication(geo, where, sku),
        "queues": [{"name": q.name, "properties": arm_entity_properties("queue", q.properties,
                                                                        f"{where}/queues/{q.name}", sku)}
                   for q in _ordered_queues(ns)],
        "topics": [{
            "name": t.name,
            "properties": arm_entity_properties("topic", t.properties, f"{where}/topics/{t.name}", sku),
            "subscriptions": [{
                "name": s.name,
                "properties": arm_entity_properties("subscription", s.properties,
                                                    f"{where}/topics/{t.name}/{s.name}", sku),
                "rules": _rules(s.rules, f"{where}/topics/{t.name}/{s.name}"),
            } for s in t.subscriptions],
        } for t in ns.topics],
        "roleAssignments": roles,
    }


def _task_endpoint(topology: Topology, task: dict[str, Any], side: str) -> tuple[str, str, dict[str, str]]:
    """(connection setting, namespace, role scope) of a task's source or target, whose entity must be
    declared."""
    where = f"tasks/{task['name']}/{side}"
    end = task.get(side)
    if not isinstance(end, dict) or not isinstance(end.get("connection"), str):
        raise InfraError(f"{where}: expected {{connection: <setting>, queue | topic ...}}")
    ns = topology.namespace_of(end["connection"])
    queue, topic, subscription = end.get("queue"), end.get("topic"), end.get("subscription")
    if (queue is None) == (topic is None):
        raise InfraError(f"{where}: name exactly one of queue or topic")
    if side == "source" and topic is not None and subscription is None:
        raise InfraError(f"{where}: a task reads a topic through a subscription; add subscription: <name>")
    if side == "target" and subscription is not None:
        raise InfraError(f"{where}: a task sends to a queue or a topic, not to a subscription")
    if queue is not None:
        declared = ns.queue(queue)
        if declared is None:
            raise InfraError(f"{where}: queue '{queue}' is not declared in namespace '{ns.name}'")
        return end["connection"], ns.name, {"entityType": "queue", "queue": declared.name}
    declared_topic = ns.topic(topic)
    if declared_topic is None:
        raise InfraError(f"{where}: topic '{topic}' is not declared in namespace '{ns.name}'")
    if subscription is None:
        return end["connection"], ns.name, {"entityType": "topic", "topic": declared_topic.name}
    declared_sub = next((s for s in declared_topic.subscriptions
                         if s.name.lower() == subscription.lower()), None)
    if declared_sub is None:
        raise InfraError(f"{where}: subscription '{topic}/{subscription}' is not declared in namespace "
                         f"'{ns.name}'")
    return end["connection"], ns.name, {"entityType": "subscription", "topic": declared_topic.name,
                                        "subscription": declared_sub.name}


def task_access(topology: Topology) -> tuple[dict[str, list[dict[str, str]]], list[str]]:
    """Role assignments per namespace and the connection settings the tasks name.

    Data Receiver on each source entity, Data Sender on each target entity. A task with a transform may
    reroute a copy to any entity of its target namespace (spillover sends to `<queue>-aux`), so its Sender
    role covers that namespace; entity-scoped roles a namespace-scoped one covers are left out."""
    roles: dict[str, list[dict[str, str]]] = {name: [] for name in topology.namespaces}
    settings: list[str] = []
    for task in topology.tasks:
        kind = task.get("kind", "replicate")
        if kind not in ("replicate", "audit", "stream-to-queue"):
            raise InfraError(f"tasks/{task['name']}: kind must be replicate, audit or stream-to-queue, got "
                             f"{kind!r}")
        streamed = kafka_setting(topology, task) is not None
        sides = [] if streamed else [("source", DATA_RECEIVER)]
        if kind != "audit" or task.get("target") is not None:
            sides.append(("target", DATA_SENDER))
        for side, role in sides:
            setting, namespace, scope = _task_endpoint(topology, task, side)
            if side == "target" and (task.get("options") or {}).get("transform"):
                scope = {"entityType": "namespace"}
            assignment = {"role": role, **scope}
            if assignment not in roles[namespace]:
                roles[namespace].append(assignment)
            if setting not in settings:
                settings.append(setting)
    return {ns: _without_covered(assignments) for ns, assignments in roles.items()}, sorted(settings)


def kafka_setting(topology: Topology, task: dict[str, Any]) -> str | None:
    """The connection setting of a task's source when it names a Kafka cluster (else None)."""
    source = task.get("source")
    setting = source.get("connection") if isinstance(source, dict) else None
    return setting if topology.connections.get(str(setting)) in topology.kafka else None


def _event_hubs(topology: Topology, locations: dict[str, str]) -> list[dict[str, Any]]:
    """Each Kafka cluster as an Event Hubs namespace with its topics as hubs."""
    clusters = []
    for name, cluster in topology.kafka.items():
        if not _NAMESPACE_NAME.match(name) or len(name) > MAX_NAMESPACE_NAME:
            raise InfraError(f"kafka/{name}: an Azure-deployable name has at most {MAX_NAMESPACE_NAME} "
                             "letters, digits and hyphens and starts with a letter")
        if not locations.get(name):
            raise InfraError(f"kafka/{name}: no Azure region; add {name}=<region> to the location map")
        hubs = [{"name": t.name, "partitions": t.partitions} for t in cluster.topics]
        for hub in hubs:
            if hub["partitions"] > MAX_STANDARD_PARTITIONS:
                raise InfraError(f"kafka/{name}/{hub['name']}: {hub['partitions']} partitions, a Standard "
                                 f"Event Hubs namespace allows at most {MAX_STANDARD_PARTITIONS}")
        clusters.append({"name": name, "location": locations[name], "hubs": hubs})
    return clusters


def _without_covered(assignments: list[dict[str, str]]) -> list[dict[str, str]]:
    wide = {a["role"] for a in assignments if a["entityType"] == "namespace"}
    return [a for a in assignments if a["entityType"] == "namespace" or a["role"] not in wide]


def render_parameters(topology: Topology, options: InfraOptions) -> dict[str, Any]:
    """The ARM deployment parameters document for infra/main.bicep."""
    if options.hosting not in HOSTINGS:
        raise InfraError(f"hosting must be one of {', '.join(HOSTINGS)}, got {options.hosting!r}")
    if options.sku not in SKUS:
        raise InfraError(f"sku must be one of {', '.join(SKUS)} (topics need Standard or above), "
                         f"got {options.sku!r}")
    if not topology.namespaces:
        raise InfraError("the topology declares no namespaces")
    for name in topology.namespaces:
        if not _NAMESPACE_NAME.match(name) or len(name) > MAX_NAMESPACE_NAME:
            raise InfraError(f"namespaces/{name}: an Azure-deployable name has at most {MAX_NAMESPACE_NAME} "
                             "letters, digits and hyphens and starts with a letter")
    locations = {name: _location(ns, options.locations) for name, ns in topology.namespaces.items()}
    roles, settings = task_access(topology)
    kafka = sorted({s for task in topology.tasks if (s := kafka_setting(topology, task)) is not None})
    values: dict[str, Any] = {
        "namePrefix": options.name_prefix,
        "location": options.app_location,
        "hosting": options.hosting,
        "topologyFile": options.topology_file,
        "namespaces": [_namespace(ns, locations[name], options.sku, roles[name])
                       for name, ns in topology.namespaces.items()],
        "connections": [{"setting": s, "namespace": topology.connections[s]} for s in settings],
        "operatorPrincipalId": options.operator_principal_id,
    }
    if topology.kafka:  # parameters a topology without Kafka leaves at their defaults
        values["eventHubs"] = _event_hubs(topology, options.locations)
        values["kafkaConnections"] = [{"setting": s, "cluster": topology.connections[s]} for s in kafka]
    return {"$schema": PARAMETERS_SCHEMA, "contentVersion": "1.0.0.0",
            "parameters": {name: {"value": value} for name, value in values.items()}}


def write_parameters(document: dict[str, Any], path: str | Path) -> None:
    path = Path(path)
    if path.suffix != ".json":
        raise InfraError(f"{path}: only ARM parameter files (.json) are rendered")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
