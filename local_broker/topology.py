"""What the broker hosts: namespaces and their entities, from a topology file or the emulator's Config.json.

Two input formats, one result (`NamespaceSpec` per namespace):
- the sbfed topology file (docs/topology.md, YAML or JSON): `namespaces` only (tasks, connections and
  audit are for the replicators); entity properties are SDK attribute names, durations ISO 8601;
- the official emulator's `Config.json` (`UserConfig.Namespaces[]`, PascalCase properties, empty strings
  for "unset"); its namespace gets the emulator's well-known key `SAS_KEY_VALUE`.
`apply_entities(namespace, spec)` turns a spec into engine create calls (updates when a durable store
already holds the entity).
"""

from __future__ import annotations

import base64
import dataclasses
import os
import re
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml

from local_broker.auth import ALL_RIGHTS, DEFAULT_POLICY_NAME, SharedAccessPolicy
from local_broker.engine import (
    CorrelationFilter,
    EntityAlreadyExistsError,
    EntityStatus,
    FalseFilter,
    QueueProperties,
    RuleProperties,
    SqlFilter,
    SqlRuleAction,
    SubscriptionProperties,
    TopicProperties,
    TrueFilter,
)
from local_broker.wire.admin.durations import parse_duration

EMULATOR_KEY = "SAS_KEY_VALUE"


class TopologyError(ValueError):
    """The file is not a valid topology; the message says where."""


@dataclass
class SubscriptionSpec:
    properties: SubscriptionProperties
    rules: list[RuleProperties] = field(default_factory=list)  # empty: the engine adds $Default


@dataclass
class TopicSpec:
    properties: TopicProperties
    subscriptions: list[SubscriptionSpec] = field(default_factory=list)


@dataclass
class NamespaceSpec:
    name: str
    policies: list[SharedAccessPolicy]
    amqp_port: int = 0
    admin_port: int = 0
    max_message_size_kb: int = 256
    queues: list[QueueProperties] = field(default_factory=list)
    topics: list[TopicSpec] = field(default_factory=list)


def load(path: str | os.PathLike[str]) -> list[NamespaceSpec]:
    """Read a topology file or an emulator Config.json."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        document = yaml.safe_load(text)  # YAML is a superset of JSON
    except yaml.YAMLError as exc:
        raise TopologyError(f"{path}: not valid YAML or JSON: {exc}") from exc
    return parse(document, source=str(path))


def parse(document: Any, source: str = "topology") -> list[NamespaceSpec]:
    if not isinstance(document, dict):
        raise TopologyError(f"{source}: expected a mapping at the top level")
    if "UserConfig" in document:
        return _parse_emulator_config(document["UserConfig"], source)
    namespaces = document.get("namespaces")
    if not isinstance(namespaces, dict) or not namespaces:
        raise TopologyError(f"{source}: 'namespaces' must map namespace names to their declarations")
    return [_parse_namespace(name, body or {}, f"{source}: namespaces.{name}")
            for name, body in namespaces.items()]


# --- sbfed topology --------------------------------------------------------------------------------------

def _parse_namespace(name: str, body: dict, where: str) -> NamespaceSpec:
    local = body.get("local") or {}
    spec = NamespaceSpec(
        name=str(name),
        policies=_policies(body.get("policies"), where),
        amqp_port=int(local.get("amqp_port", 0)),
        admin_port=int(local.get("admin_port", 0)),
        max_message_size_kb=int(local.get("max_message_size_kb", 256)),
    )
    for qname, props in (body.get("queues") or {}).items():
        spec.queues.append(_properties(QueueProperties, qname, props or {}, f"{where}.queues.{qname}"))
    for tname, tbody in (body.get("topics") or {}).items():
        tbody = dict(tbody or {})
        subscriptions = tbody.pop("subscriptions", None) or {}
        topic = TopicSpec(_properties(TopicProperties, tname, tbody, f"{where}.topics.{tname}"))
        for sname, sbody in subscriptions.items():
            sbody = dict(sbody or {})
            rules = sbody.pop("rules", None) or {}
            swhere = f"{where}.topics.{tname}.subscriptions.{sname}"
            sub = SubscriptionSpec(_properties(SubscriptionProperties, sname, sbody, swhere))
            sub.rules = [_rule(rname, rbody or {}, f"{swhere}.rules.{rname}")
                         for rname, rbody in rules.items()]
            topic.subscriptions.append(sub)
        spec.topics.append(topic)
    return spec


def _policies(declared: Any, where: str) -> list[SharedAccessPolicy]:
    if not declared:
        key = base64.b64encode(os.urandom(32)).decode()
        return [SharedAccessPolicy(DEFAULT_POLICY_NAME, key, ALL_RIGHTS)]
    try:
        return [SharedAccessPolicy(str(name), str(body["key"]), frozenset(body.get("rights", ALL_RIGHTS)))
                for name, body in declared.items()]
    except (KeyError, TypeError, ValueError) as exc:
        raise TopologyError(f"{where}.policies: each policy needs a key and rights: {exc}") from exc


def _properties(cls: type, name: str, values: dict, where: str) -> Any:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {"name": str(name)}
    for key, value in values.items():
        f = fields.get(key)
        if f is None or key in ("name", "topic_name", "created_at", "updated_at", "accessed_at"):
            raise TopologyError(f"{where}: unknown property '{key}' (use the SDK attribute names)")
        kwargs[key] = _convert(f, value, f"{where}.{key}")
    return cls(**kwargs)


def _convert(f: dataclasses.Field, value: Any, where: str) -> Any:
    kind = str(f.type)
    try:
        if "timedelta" in kind:
            return value if isinstance(value, timedelta) else parse_duration(str(value))
        if "EntityStatus" in kind:
            return EntityStatus(value)
    except ValueError as exc:
        raise TopologyError(f"{where}: {exc}") from exc
    if value == "" and "None" in kind:
        return None
    return value


def _rule(name: str, body: dict, where: str) -> RuleProperties:
    spec = body.get("filter") or {"true": {}}
    # YAML reads a bare `{true: {}}` key as a boolean; the file means the filter kind.
    spec = {({True: "true", False: "false"}[k] if isinstance(k, bool) else k): v for k, v in spec.items()}
    kinds = [k for k in ("sql", "correlation", "true", "false") if k in spec]
    if len(kinds) != 1:
        raise TopologyError(f"{where}: filter needs exactly one of sql, correlation, true, false")
    kind = kinds[0]
    if kind == "sql":
        sql = spec["sql"]
        rule_filter: Any = (SqlFilter(sql["expression"], sql.get("parameters")) if isinstance(sql, dict)
                            else SqlFilter(str(sql), spec.get("parameters")))
    elif kind == "correlation":
        allowed = {f.name for f in dataclasses.fields(CorrelationFilter)}
        unknown = set(spec["correlation"] or {}) - allowed
        if unknown:
            raise TopologyError(f"{where}: unknown correlation filter fields {sorted(unknown)}")
        rule_filter = CorrelationFilter(**(spec["correlation"] or {}))
    else:
        rule_filter = TrueFilter() if kind == "true" else FalseFilter()
    action = body.get("action")
    rule_action = None if not action else SqlRuleAction(str(action["sql"]), action.get("parameters"))
    return RuleProperties(name=str(name), filter=rule_filter, action=rule_action)


# --- emulator Config.json ---------------------------------------------------------------------------------

def _snake(pascal: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", pascal).lower()


def _emulator_properties(cls: type, name: str, props: dict | None, where: str) -> Any:
    values = {_snake(k): v for k, v in (props or {}).items() if v != ""}
    return _properties(cls, name, values, where)


def _parse_emulator_config(config: Any, source: str) -> list[NamespaceSpec]:
    if not isinstance(config, dict) or not isinstance(config.get("Namespaces"), list):
        raise TopologyError(f"{source}: UserConfig.Namespaces must be a list")
    specs = []
    for ns in config["Namespaces"]:
        name = str(ns.get("Name") or "sbemulatorns")
        where = f"{source}: Namespaces.{name}"
        spec = NamespaceSpec(name=name, policies=[SharedAccessPolicy(DEFAULT_POLICY_NAME, EMULATOR_KEY)])
        for q in ns.get("Queues") or []:
            spec.queues.append(_emulator_properties(QueueProperties, q["Name"], q.get("Properties"),
                                                    f"{where}.Queues.{q['Name']}"))
        for t in ns.get("Topics") or []:
            twhere = f"{where}.Topics.{t['Name']}"
            topic = TopicSpec(_emulator_properties(TopicProperties, t["Name"], t.get("Properties"), twhere))
            for s in t.get("Subscriptions") or []:
                swhere = f"{twhere}.Subscriptions.{s['Name']}"
                props = _emulator_properties(SubscriptionProperties, s["Name"], s.get("Properties"), swhere)
                sub = SubscriptionSpec(props)
                sub.rules = [_emulator_rule(r, f"{swhere}.Rules") for r in s.get("Rules") or []]
                topic.subscriptions.append(sub)
            spec.topics.append(topic)
        specs.append(spec)
    return specs


def _emulator_rule(rule: dict, where: str) -> RuleProperties:
    props = rule.get("Properties") or {}
    kind = props.get("FilterType", "Sql")
    if kind == "Correlation":
        raw = props.get("CorrelationFilter") or {}
        values = {_snake(k): v for k, v in raw.items() if v not in ("", None) and k != "Properties"}
        rule_filter: Any = CorrelationFilter(**values, properties=raw.get("Properties") or None)
    elif kind == "Sql":
        rule_filter = SqlFilter(str((props.get("SqlFilter") or {}).get("SqlExpression", "1=1")))
    else:
        raise TopologyError(f"{where}.{rule.get('Name')}: FilterType must be Correlation or Sql, "
                            f"not {kind!r}")
    action = (props.get("Action") or {}).get("SqlExpression")
    return RuleProperties(name=str(rule["Name"]), filter=rule_filter,
                          action=SqlRuleAction(action) if action else None)


# --- applying -------------------------------------------------------------------------------------------

def apply_entities(namespace: Any, spec: NamespaceSpec) -> None:
    """Create the spec's entities in an engine namespace (update those a durable store already has).

    Declared rules replace the broker's `$Default`: the first one is the subscription's default rule,
    as with the SDK's `create_subscription(default_rule=...)`.
    """
    for queue in spec.queues:
        _create_or_update(namespace.create_queue, namespace.update_queue, queue)
    for topic in spec.topics:
        _create_or_update(namespace.create_topic, namespace.update_topic, topic.properties)
        tname = topic.properties.name
        for sub in topic.subscriptions:
            sname = sub.properties.name
            first = sub.rules[0] if sub.rules else None
            try:
                namespace.create_subscription(tname, sub.properties, default_rule=first)
                declared = sub.rules[1:]
            except EntityAlreadyExistsError:
                namespace.update_subscription(tname, sub.properties)
                declared = sub.rules
            for rule in declared:
                try:
                    namespace.create_rule(tname, sname, rule)
                except EntityAlreadyExistsError:
                    namespace.update_rule(tname, sname, rule)


def _create_or_update(create: Any, update: Any, props: Any) -> None:
    try:
        create(props)
    except EntityAlreadyExistsError:
        update(props)
