"""The sbfed topology file (docs/topology.md): `namespaces`, `connections`, `tasks`, `audit`; entity
properties by the SDK's names."""

from __future__ import annotations

from typing import Any

from topology import streams
from topology.geo import read_geo
from topology.model import (
    FILTER_KINDS,
    NamespaceSpec,
    QueueSpec,
    RuleSpec,
    SubscriptionSpec,
    TopicSpec,
    Topology,
)
from topology.problems import (
    Problems,
    check_entity_name,
    check_segment_name,
    checked_properties,
    did_you_mean,
    unknown_key,
)
from topology.schema import (
    CORRELATION_FIELDS,
    LOCAL,
    PROPERTIES,
    RIGHTS,
)

TOP_LEVEL = ("namespaces", "connections", "tasks", "audit", "kafka")
NAMESPACE_KEYS = ("queues", "topics", "policies", "local", "geo_replication")


def read(document: dict[str, Any], problems: Problems) -> Topology:
    for key in document:
        if key not in TOP_LEVEL:
            problems.add("", str(key), unknown_key(key, TOP_LEVEL, "key"))
    namespaces = _mapping(document.get("namespaces"), "", "namespaces", problems)
    if not namespaces:
        problems.add("", "namespaces", "missing, declare at least one namespace")
    topology = Topology(source=problems.source)
    for name, body in namespaces.items():
        topology.namespaces[str(name)] = _namespace(str(name), body, problems)
    topology.kafka = streams.read(document.get("kafka"), problems)
    for setting, namespace in _mapping(document.get("connections"), "", "connections", problems).items():
        if namespace not in topology.namespaces and namespace not in topology.kafka:
            declared = [*topology.namespaces, *topology.kafka]
            problems.add(f"connections/{setting}", "", f"namespace {namespace!r} is not declared, " +
                         did_you_mean(namespace, declared, f"allowed: {', '.join(declared)}"))
        topology.connections[str(setting)] = str(namespace)
    tasks = document.get("tasks") or []
    if not isinstance(tasks, list) or not all(isinstance(t, dict) and t.get("name") for t in tasks):
        problems.add("", "tasks", "not a list of mappings each with a name")
    else:
        topology.tasks = [dict(t) for t in tasks]
    topology.audit = dict(_mapping(document.get("audit"), "", "audit", problems))
    return topology


def _mapping(value: Any, where: str, name: str, problems: Problems) -> dict[Any, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.add(where, name, f"{type(value).__name__} where a mapping is expected")
        return {}
    return value


def _namespace(name: str, raw: Any, problems: Problems) -> NamespaceSpec:
    body = _mapping(raw, name, "", problems)
    for key in body:
        if key not in NAMESPACE_KEYS:
            problems.add(name, str(key), unknown_key(key, NAMESPACE_KEYS, "key"))
    spec = NamespaceSpec(name=name)
    for queue, props in _mapping(body.get("queues"), name, "queues", problems).items():
        where = f"{name}/{queue}"
        check_entity_name(str(queue), where, "name", problems)
        spec.queues.append(QueueSpec(str(queue), _properties("queue", props, where, problems)))
    for topic, raw_topic in _mapping(body.get("topics"), name, "topics", problems).items():
        where = f"{name}/{topic}"
        check_entity_name(str(topic), where, "name", problems)
        props = dict(_mapping(raw_topic, where, "", problems))
        subscriptions = _mapping(props.pop("subscriptions", None), where, "subscriptions", problems)
        spec.topics.append(TopicSpec(str(topic), _properties("topic", props, where, problems), [
            _subscription(str(sub), body, f"{where}/{sub}", problems) for sub, body in subscriptions.items()
        ]))
    spec.policies = _policies(_mapping(body.get("policies"), name, "policies", problems), name, problems)
    local = _mapping(body.get("local"), name, "local", problems)
    spec.local = checked_properties(LOCAL, local, f"{name}/local", problems)
    spec.geo_replication = read_geo(body.get("geo_replication"), name, problems)
    return spec



def _properties(kind: str, raw: Any, where: str, problems: Problems) -> dict[str, Any]:
    return checked_properties(PROPERTIES[kind], _mapping(raw, where, "", problems), where, problems)


def _subscription(name: str, raw: Any, where: str, problems: Problems) -> SubscriptionSpec:
    check_segment_name("subscription", name, where, "name", problems)
    props = dict(_mapping(raw, where, "", problems))
    rules = _mapping(props.pop("rules", None), where, "rules", problems)
    return SubscriptionSpec(name, _properties("subscription", props, where, problems), [
        _rule(str(rule), body, f"{where}/{rule}", problems) for rule, body in rules.items()
    ])


def _rule(name: str, raw: Any, where: str, problems: Problems) -> RuleSpec:
    check_segment_name("rule", name, where, "name", problems)
    body = _mapping(raw, where, "", problems)
    for key in body:
        if key not in ("filter", "action"):
            problems.add(where, str(key), unknown_key(key, ("filter", "action"), "key"))
    rule = RuleSpec(name, dict(_mapping(body.get("filter"), where, "filter", problems)) or {"true": {}})
    kinds = [k for k in rule.filter if k in FILTER_KINDS]
    for key in rule.filter:
        if key not in (*FILTER_KINDS, "parameters"):
            problems.add(where, f"filter.{key}", unknown_key(key, FILTER_KINDS, "filter kind"))
    if len(kinds) != 1:
        problems.add(where, "filter", f"{len(kinds)} filter kinds, allowed exactly one of "
                     f"{', '.join(FILTER_KINDS)}")
        return rule
    if kinds == ["sql"] and (not isinstance(rule.filter["sql"], str) or not rule.filter["sql"].strip()):
        problems.add(where, "filter.sql", f"{rule.filter['sql']!r} is not a SQL expression")
    if kinds == ["correlation"]:
        _correlation(rule.filter["correlation"], where, problems)
    if "parameters" in rule.filter and not isinstance(rule.filter["parameters"], dict):
        problems.add(where, "filter.parameters", "not a mapping of @name to value")
    action = body.get("action")
    if action is not None:
        sql = action.get("sql") if isinstance(action, dict) else None
        if not isinstance(sql, str) or not sql.strip():
            problems.add(where, "action", f"{action!r} is not {{sql: 'SET ...'}}")
        else:
            rule.action = dict(action)
    return rule


def _correlation(raw: Any, where: str, problems: Problems) -> None:
    if not isinstance(raw, dict) or not raw:
        problems.add(where, "filter.correlation", "empty, allowed one or more of "
                     f"{', '.join([*CORRELATION_FIELDS, 'properties'])}")
        return
    for key, value in raw.items():
        if key == "properties":
            if not isinstance(value, dict):
                problems.add(where, "filter.correlation.properties", "not a mapping of name to value")
        elif key not in CORRELATION_FIELDS:
            problems.add(where, f"filter.correlation.{key}",
                         unknown_key(key, [*CORRELATION_FIELDS, "properties"], "field"))
        elif not isinstance(value, str):
            problems.add(where, f"filter.correlation.{key}", f"{value!r} is not text")


def _policies(raw: dict[Any, Any], namespace: str, problems: Problems) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, body in raw.items():
        where = f"{namespace}/policies/{name}"
        if not isinstance(body, dict) or not isinstance(body.get("key"), str) or not body["key"]:
            problems.add(where, "key", "missing, a policy needs {key: <text>, rights: [Manage, Send, "
                         "Listen]}")
            continue
        rights = body.get("rights", list(RIGHTS))
        if not isinstance(rights, list) or not set(rights) <= set(RIGHTS) or not rights:
            problems.add(where, "rights", f"{rights!r} is not a list of rights, allowed: {', '.join(RIGHTS)}")
        elif "Manage" in rights and not {"Send", "Listen"} <= set(rights):
            problems.add(where, "rights", f"{rights!r} has Manage without Send and Listen, allowed: Manage "
                         "with both")
        for key in body:
            if key not in ("key", "rights"):
                problems.add(where, str(key), unknown_key(key, ("key", "rights"), "key"))
        out[str(name)] = dict(body)
    return out
