"""The topology file as data: namespaces, entities, rules and replication tasks (see docs/topology.md).

Patterns produce a `Topology`; `sbfed topology apply` pushes its entities to namespaces through the admin
client; `sbfed infra params` renders it for Bicep; the Functions app runs its tasks. Entity and rule
properties stay as the SDK's keyword arguments (ISO 8601 strings for durations), so one file serves the
local broker and Azure alike. Tasks are kept as declared; `replicators` gives them meaning.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

FILTER_KINDS = ("sql", "correlation", "true", "false")


class TopologyError(ValueError):
    """The topology file is malformed; the message says where."""


@dataclass
class RuleSpec:
    name: str
    filter: dict[str, Any] = field(default_factory=lambda: {"true": {}})
    action: dict[str, Any] | None = None  # {"sql": "SET ..."}

    def __post_init__(self) -> None:
        # YAML reads a bare `{true: {}}` key as a boolean; the file means the filter kind.
        self.filter = {({True: "true", False: "false"}.get(k, k) if isinstance(k, bool) else k): v
                       for k, v in self.filter.items()}
        kinds = [k for k in self.filter if k in FILTER_KINDS]
        if len(kinds) != 1:
            raise TopologyError(f"rule '{self.name}': filter needs exactly one of {', '.join(FILTER_KINDS)}")
        if self.action is not None and not isinstance(self.action.get("sql"), str):
            raise TopologyError(f"rule '{self.name}': action must be {{sql: '<statements>'}}")

    @property
    def filter_kind(self) -> str:
        return next(k for k in self.filter if k in FILTER_KINDS)


@dataclass
class SubscriptionSpec:
    name: str
    properties: dict[str, Any] = field(default_factory=dict)
    rules: list[RuleSpec] = field(default_factory=list)  # empty: the broker's $Default rule


@dataclass
class TopicSpec:
    name: str
    properties: dict[str, Any] = field(default_factory=dict)
    subscriptions: list[SubscriptionSpec] = field(default_factory=list)


@dataclass
class QueueSpec:
    name: str
    properties: dict[str, Any] = field(default_factory=dict)


@dataclass
class NamespaceSpec:
    name: str
    queues: list[QueueSpec] = field(default_factory=list)
    topics: list[TopicSpec] = field(default_factory=list)
    policies: dict[str, dict[str, Any]] = field(default_factory=dict)
    local: dict[str, Any] = field(default_factory=dict)

    def queue(self, name: str) -> QueueSpec | None:
        return next((q for q in self.queues if q.name.lower() == name.lower()), None)

    def topic(self, name: str) -> TopicSpec | None:
        return next((t for t in self.topics if t.name.lower() == name.lower()), None)


@dataclass
class Topology:
    namespaces: dict[str, NamespaceSpec] = field(default_factory=dict)
    connections: dict[str, str] = field(default_factory=dict)  # connection setting -> namespace
    tasks: list[dict[str, Any]] = field(default_factory=list)
    audit: dict[str, Any] = field(default_factory=dict)

    def namespace_of(self, connection: str) -> NamespaceSpec:
        """The namespace a connection setting points at."""
        name = self.connections.get(connection)
        if name is None or name not in self.namespaces:
            raise TopologyError(f"connection setting '{connection}' names no declared namespace")
        return self.namespaces[name]

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespaces": {n.name: _namespace_to_dict(n) for n in self.namespaces.values()},
            "connections": dict(self.connections),
            "tasks": [dict(t) for t in self.tasks],
            **({"audit": dict(self.audit)} if self.audit else {}),
        }


def _namespace_to_dict(ns: NamespaceSpec) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if ns.local:
        out["local"] = dict(ns.local)
    if ns.policies:
        out["policies"] = {k: dict(v) for k, v in ns.policies.items()}
    if ns.queues:
        out["queues"] = {q.name: dict(q.properties) for q in ns.queues}
    if ns.topics:
        out["topics"] = {t.name: _topic_to_dict(t) for t in ns.topics}
    return out


def _topic_to_dict(topic: TopicSpec) -> dict[str, Any]:
    out = dict(topic.properties)
    if topic.subscriptions:
        out["subscriptions"] = {s.name: _subscription_to_dict(s) for s in topic.subscriptions}
    return out


def _subscription_to_dict(sub: SubscriptionSpec) -> dict[str, Any]:
    out = dict(sub.properties)
    if sub.rules:
        out["rules"] = {
            r.name: {"filter": dict(r.filter), **({"action": dict(r.action)} if r.action else {})}
            for r in sub.rules
        }
    return out


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TopologyError(f"{where}: expected a mapping, got {type(value).__name__}")
    return value


def _parse_subscription(name: str, raw: Any, where: str) -> SubscriptionSpec:
    props = dict(_mapping(raw, where))
    rules = [
        RuleSpec(rname, _mapping(r, f"{where}/rules/{rname}").get("filter") or {"true": {}},
                 _mapping(r, f"{where}/rules/{rname}").get("action"))
        for rname, r in _mapping(props.pop("rules", None), f"{where}/rules").items()
    ]
    return SubscriptionSpec(name, props, rules)


def _parse_topic(name: str, raw: Any, where: str) -> TopicSpec:
    props = dict(_mapping(raw, where))
    subs = _mapping(props.pop("subscriptions", None), f"{where}/subscriptions")
    return TopicSpec(name, props, [_parse_subscription(s, v, f"{where}/{s}") for s, v in subs.items()])


def _parse_namespace(name: str, raw: Any) -> NamespaceSpec:
    where = f"namespaces/{name}"
    body = _mapping(raw, where)
    unknown = set(body) - {"queues", "topics", "policies", "local"}
    if unknown:
        raise TopologyError(f"{where}: unknown keys {sorted(unknown)}")
    return NamespaceSpec(
        name=name,
        queues=[QueueSpec(q, dict(_mapping(v, f"{where}/queues/{q}")))
                for q, v in _mapping(body.get("queues"), f"{where}/queues").items()],
        topics=[_parse_topic(t, v, f"{where}/topics/{t}")
                for t, v in _mapping(body.get("topics"), f"{where}/topics").items()],
        policies=dict(_mapping(body.get("policies"), f"{where}/policies")),
        local=dict(_mapping(body.get("local"), f"{where}/local")),
    )


def topology_from_dict(raw: dict[str, Any]) -> Topology:
    """Validate the shape of a topology document and build the model."""
    raw = _mapping(raw, "topology")
    unknown = set(raw) - {"namespaces", "connections", "tasks", "audit"}
    if unknown:
        raise TopologyError(f"topology: unknown top-level keys {sorted(unknown)}")
    tasks = raw.get("tasks") or []
    if not isinstance(tasks, list) or not all(isinstance(t, dict) and t.get("name") for t in tasks):
        raise TopologyError("tasks: expected a list of mappings, each with a name")
    topology = Topology(
        namespaces={
            n: _parse_namespace(n, v) for n, v in _mapping(raw.get("namespaces"), "namespaces").items()
        },
        connections={str(k): str(v) for k, v in _mapping(raw.get("connections"), "connections").items()},
        tasks=[dict(t) for t in tasks],
        audit=dict(_mapping(raw.get("audit"), "audit")),
    )
    for setting, ns in topology.connections.items():
        if ns not in topology.namespaces:
            raise TopologyError(f"connections/{setting}: namespace '{ns}' is not declared")
    return topology


def load_topology(path: str | Path) -> Topology:
    """Read a topology file (YAML, of which JSON is a subset)."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise TopologyError(f"{path}: not valid YAML/JSON: {err}") from err
    return topology_from_dict(raw or {})


def dump_topology(topology: Topology, path: str | Path) -> None:
    """Write a topology file; `.json` gets JSON, anything else YAML."""
    path = Path(path)
    data = topology.to_dict()
    if path.suffix == ".json":
        path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    else:
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
