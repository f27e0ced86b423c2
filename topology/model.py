"""The topology as plain data: namespaces, their entities and rules, and the replication tasks.

Entity and rule properties are the azure-servicebus SDK's keyword-argument names with the values as the file
writes them (durations stay ISO 8601 text), so each part translates them into its own terms: engine
properties in the broker, admin-client models in `sbfed topology apply`, ARM properties for Bicep. Tasks,
connections and audit are kept as declared; `replicators` gives them meaning.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from topology.geo import GeoReplicationSpec

FILTER_KINDS = ("sql", "correlation", "true", "false")


class TopologyError(ValueError):
    """The topology is not valid: one line per problem (`file: namespace/entity: property: ...`)."""

    def __init__(self, problems: list[str] | str) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


@dataclass
class RuleSpec:
    name: str
    filter: dict[str, Any] = field(default_factory=lambda: {"true": {}})
    action: dict[str, Any] | None = None  # {"sql": "SET ..."}

    def __post_init__(self) -> None:
        # YAML reads a bare `{true: {}}` key as a boolean; the file means the filter kind.
        self.filter = {({True: "true", False: "false"}.get(k, k) if isinstance(k, bool) else k): v
                       for k, v in self.filter.items()}

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
    policies: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> {key, rights}
    local: dict[str, Any] = field(default_factory=dict)  # the four *_port, max_message_size_kb
    geo_replication: GeoReplicationSpec | None = None  # Service Bus Geo-Replication (topology/geo.py)

    def queue(self, name: str) -> QueueSpec | None:
        return next((q for q in self.queues if q.name.lower() == name.lower()), None)

    def topic(self, name: str) -> TopicSpec | None:
        return next((t for t in self.topics if t.name.lower() == name.lower()), None)


@dataclass
class KafkaTopicSpec:
    name: str
    partitions: int = 1


@dataclass
class KafkaClusterSpec:
    """A Kafka cluster a stream-to-queue task reads (in Azure, an Event Hubs namespace; its hubs are the
    topics)."""

    name: str
    topics: list[KafkaTopicSpec] = field(default_factory=list)


@dataclass
class Topology:
    namespaces: dict[str, NamespaceSpec] = field(default_factory=dict)
    connections: dict[str, str] = field(default_factory=dict)  # connection setting -> namespace
    tasks: list[dict[str, Any]] = field(default_factory=list)
    audit: dict[str, Any] = field(default_factory=dict)
    kafka: dict[str, KafkaClusterSpec] = field(default_factory=dict)
    source: str = field(default="topology", compare=False)  # the file, for error lines
    emulator: bool = field(default=False, compare=False)  # read from an emulator Config.json

    def namespace_of(self, connection: str) -> NamespaceSpec:
        """The namespace a connection setting points at."""
        name = self.connections.get(connection)
        if name is None or name not in self.namespaces:
            raise TopologyError(f"{self.source}: connections/{connection}: names no declared namespace")
        return self.namespaces[name]

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespaces": {n.name: _namespace_to_dict(n) for n in self.namespaces.values()},
            "connections": dict(self.connections),
            "tasks": [dict(t) for t in self.tasks],
            **({"audit": dict(self.audit)} if self.audit else {}),
            **({"kafka": {c.name: {"topics": {t.name: {"partitions": t.partitions} for t in c.topics}}
                          for c in self.kafka.values()}} if self.kafka else {}),
        }


def _namespace_to_dict(ns: NamespaceSpec) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if ns.local:
        out["local"] = dict(ns.local)
    if ns.geo_replication is not None:
        out["geo_replication"] = ns.geo_replication.to_dict()
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
