"""Shared pieces of every pattern: how namespaces, entities, replication subscriptions, tasks and audit taps
are named and declared, so each pattern function only says what is particular to it."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

from topology import NamespaceSpec, QueueSpec, RuleSpec, SubscriptionSpec, TopicSpec, Topology

# Loop prevention by the broker (seed: all-active): the replication subscription takes only messages that
# were never replicated and marks its copy, which the replicator carries to the peer.
REPLICATION_MARKER = "replication"
NOT_REPLICATED = f"{REPLICATION_MARKER} IS NULL"
MARK_REPLICATED = f"SET {REPLICATION_MARKER} = 1"
CONSUMER_SUBSCRIPTION = "consumer"
AUDIT_SUBSCRIPTION = "audit"
DEFAULT_AUDIT_SINK = "./audit"
DEDUPLICATION_WINDOW = "PT10M"
Spec = TypeVar("Spec", QueueSpec, TopicSpec, SubscriptionSpec)


def connection_setting(namespace: str) -> str:
    """The app setting that holds a namespace's connection:
    `primary` -> `PRIMARY`, `west-eu` -> `WEST_EU`."""
    return re.sub(r"[^A-Za-z0-9]+", "_", namespace).strip("_").upper()


def replication_subscription(peer: str) -> str:
    return f"to-{peer}"


def replication_target(window: str = DEDUPLICATION_WINDOW) -> dict[str, Any]:
    """Replication targets detect duplicates: a replicator retries, and MessageId absorbs the repeats."""
    return {"requires_duplicate_detection": True, "duplicate_detection_history_time_window": window}


class TopologyBuilder:
    """Declares namespaces, entities and tasks; asking twice for the same entity merges, never duplicates."""

    def __init__(self, audit_sink: str | None = None) -> None:
        self.topology = Topology(audit={"sink": audit_sink or DEFAULT_AUDIT_SINK})

    def namespace(self, name: str) -> NamespaceSpec:
        if not connection_setting(name):
            raise ValueError(f"'{name}' is not a usable namespace name")
        ns = self.topology.namespaces.get(name)
        if ns is None:
            ns = self.topology.namespaces[name] = NamespaceSpec(name)
            self.topology.connections[connection_setting(name)] = name
        return ns

    def queue(self, namespace: str, name: str, **properties: Any) -> QueueSpec:
        queue = _declared(self.namespace(namespace).queues, name, QueueSpec)
        queue.properties.update(properties)
        return queue

    def topic(self, namespace: str, name: str, **properties: Any) -> TopicSpec:
        topic = _declared(self.namespace(namespace).topics, name, TopicSpec)
        topic.properties.update(properties)
        return topic

    def subscription(
        self, namespace: str, topic: str, name: str, rules: list[RuleSpec] | None = None, **properties: Any
    ) -> SubscriptionSpec:
        sub = _declared(self.topic(namespace, topic).subscriptions, name, SubscriptionSpec)
        sub.properties.update(properties)
        if rules is not None:
            sub.rules = list(rules)
        return sub

    def task(self, name: str, kind: str, source: dict[str, Any], target: dict[str, Any] | None = None,
             **options: Any) -> dict[str, Any]:
        if any(t["name"] == name for t in self.topology.tasks):
            raise ValueError(f"task '{name}' is declared twice")
        task: dict[str, Any] = {"name": name, "kind": kind, "source": source}
        if target is not None:
            task["target"] = target
        chosen = {k: v for k, v in options.items() if v is not None}
        if chosen:
            task["options"] = chosen
        self.topology.tasks.append(task)
        return task

    def replicate(
        self, source_ns: str, source: dict[str, Any], target_ns: str, target: dict[str, Any], *,
        name: str, **options: Any,
    ) -> dict[str, Any]:
        """A replication task; the target entity gets duplicate detection."""
        self.namespace(source_ns)
        if "queue" in target:
            self.queue(target_ns, target["queue"], **replication_target())
        else:
            self.topic(target_ns, target["topic"], **replication_target())
        return self.task(
            name, "replicate",
            {"connection": connection_setting(source_ns), **source},
            {"connection": connection_setting(target_ns), **target},
            **options,
        )

    def audit_tap(self, namespace: str, topic: str) -> dict[str, Any]:
        """An audit subscription (takes everything) and the audit task that logs what arrives in it."""
        self.subscription(namespace, topic, AUDIT_SUBSCRIPTION)
        return self.task(
            f"audit-{topic}-{namespace}", "audit",
            {"connection": connection_setting(namespace), "topic": topic, "subscription": AUDIT_SUBSCRIPTION},
        )

    def consumer(self, namespace: str, topic: str) -> SubscriptionSpec:
        return self.subscription(namespace, topic, CONSUMER_SUBSCRIPTION)

    def forward_topic(
        self, source_ns: str, target_ns: str, topic: str, *, rule: RuleSpec, target_topic: str | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        """Copy what a filtered subscription of `topic` in `source_ns` selects to a topic in `target_ns`."""
        target_topic = target_topic or topic
        sub = replication_subscription(target_ns)
        self.subscription(source_ns, topic, sub, rules=[rule])
        return self.replicate(
            source_ns, {"topic": topic, "subscription": sub}, target_ns, {"topic": target_topic},
            name=f"{topic}-{source_ns}-to-{target_ns}", **options,
        )


def _declared(specs: list[Spec], name: str, make: Callable[[str], Spec]) -> Spec:
    """The spec named `name` (case-insensitively, like Service Bus), added by `make` if missing."""
    spec = next((s for s in specs if s.name.lower() == name.lower()), None)
    if spec is None:
        spec = make(name)
        specs.append(spec)
    return spec


def distinct(namespaces: list[str], at_least: int) -> list[str]:
    """The namespaces of a pattern: distinct, at least `at_least` of them."""
    if len({n.lower() for n in namespaces}) != len(namespaces):
        raise ValueError(f"namespaces must be distinct, got {namespaces}")
    if len(namespaces) < at_least:
        raise ValueError(f"this pattern needs at least {at_least} namespaces, got {len(namespaces)}")
    return list(namespaces)
