"""Replication tasks as the topology file declares them (`tasks`, `connections`, `audit`; docs/topology.md).

The file is read and validated by the `topology` package; only those sections are given meaning here,
plus the few entity facts a task needs from `namespaces` (sessions, partitioning, max delivery count), so
the Functions app runs from the same file the broker and the patterns use without importing them.
"""

from __future__ import annotations

import datetime as dt
import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import topology
from replicators.copy import CopyOptions
from replicators.message import Replica
from topology.durations import parse_duration
from topology.problems import unknown_key

TASK_KINDS = ("replicate", "audit", "stream-to-queue")
OPTION_NAMES = ("ttl", "marker", "transform", "batch_size", "concurrency", "key_as")
KEY_AS = ("session_id", "partition_key", "none")  # what a Kafka record's key becomes on its message
DEAD_LETTER_SUFFIX = "/$deadletterqueue"
FUNCTION_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,126}$")
DEFAULT_MAX_DELIVERY_COUNT = 10

Transform = Callable[[Replica], Replica | None]


class TaskConfigError(ValueError):
    """The topology's tasks cannot run as written; the message says which task and field."""


@dataclass(frozen=True)
class EntityFacts:
    """What the broker enforces on an entity, as far as a replicator must know it."""

    requires_session: bool = False
    enable_partitioning: bool = False
    max_delivery_count: int = DEFAULT_MAX_DELIVERY_COUNT


@dataclass(frozen=True)
class StreamSource:
    """What a task reads of a Kafka topic: all its partitions (the consumer group shares them out) or one;
    the group's committed offsets are the task's checkpoints."""

    partition: int | None = None
    consumer_group: str = ""


@dataclass(frozen=True)
class Endpoint:
    """One end of a task: a connection setting plus a queue, or a topic (and, as a source, a subscription)."""

    connection: str
    namespace: str
    queue: str | None = None
    topic: str | None = None
    subscription: str | None = None
    dead_letter: bool = False
    facts: EntityFacts = EntityFacts()
    stream: StreamSource | None = None  # set when the source is a Kafka topic (`namespace` is its cluster)

    @property
    def entity(self) -> str:
        """The logical entity (queue or topic name), the same across regions."""
        return self.queue or self.topic or ""


@dataclass(frozen=True)
class TaskOptions:
    ttl: dt.timedelta | None = None
    marker: str | None = None
    transform: str | None = None
    batch_size: int = 100
    concurrency: int = 1
    key_as: str | None = None  # stream-to-queue: session_id, partition_key or none (default: by the target)

    @property
    def copy(self) -> CopyOptions:
        return CopyOptions(ttl=self.ttl, marker=self.marker)


@dataclass(frozen=True)
class ReplicationTask:
    name: str
    kind: str
    source: Endpoint
    target: Endpoint | None
    options: TaskOptions = TaskOptions()

    @property
    def record_key_as(self) -> str:
        """Where a stream-to-queue task puts a record's key: as the task says, else SessionId on a
        session-enabled target and PartitionKey on any other."""
        if self.options.key_as:
            return self.options.key_as
        return "session_id" if self.target and self.target.facts.requires_session else "partition_key"

    def load_transform(self) -> Transform | None:
        return load_callable(self.options.transform, where=f"task '{self.name}' options.transform")


@dataclass(frozen=True)
class Deployment:
    """The tasks of one topology file, with the connection setting -> namespace map and the audit sink."""

    tasks: tuple[ReplicationTask, ...]
    connections: Mapping[str, str] = field(default_factory=dict)
    audit_sink: str | None = None

    def task(self, name: str) -> ReplicationTask:
        for task in self.tasks:
            if task.name == name:
                return task
        raise KeyError(f"no task named '{name}' (tasks: {', '.join(t.name for t in self.tasks) or 'none'})")


def load_deployment(path: str | Path) -> Deployment:
    """The tasks of a topology file, which is read and validated as a whole (`topology.load`)."""
    declared = topology.load(path)
    return deployment_from_dict(declared.to_dict(), where=declared.source)


def deployment_from_dict(raw: Mapping[str, Any], *, where: str = "topology") -> Deployment:
    if not isinstance(raw, Mapping):
        raise TaskConfigError(f"{where}: expected a mapping at the top level")
    connections = dict(raw.get("connections") or {})
    namespaces = raw.get("namespaces") or {}
    clusters = set(raw.get("kafka") or {})
    tasks = [_task(item, i, connections, namespaces, clusters)
             for i, item in enumerate(raw.get("tasks") or [])]
    names = [t.name for t in tasks]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise TaskConfigError(
            f"{where}: task names (Functions names) must be unique: {', '.join(duplicates)}"
        )
    audit = raw.get("audit") or {}
    sink = audit.get("sink") if isinstance(audit, Mapping) else None
    if any(t.kind == "audit" for t in tasks) and not sink:
        raise TaskConfigError(f"{where}: audit tasks need `audit: {{sink: <directory or blob URL>}}`")
    return Deployment(tasks=tuple(tasks), connections=connections, audit_sink=sink)


def load_callable(path: str | None, *, where: str) -> Callable[..., Any] | None:
    """`package.module:function` (or `package.module.function`) -> the callable."""
    if not path:
        return None
    module_name, _, attr = path.partition(":") if ":" in path else path.rpartition(".")
    if not module_name or not attr:
        raise TaskConfigError(f"{where}: '{path}' is not a dotted path like mypkg.transforms:enrich")
    try:
        target = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise TaskConfigError(f"{where}: cannot load '{path}': {exc}") from exc
    if not callable(target):
        raise TaskConfigError(f"{where}: '{path}' is not callable")
    return target


def _task(
    raw: Any, index: int, connections: Mapping[str, str], namespaces: Mapping[str, Any], clusters: set[str]
) -> ReplicationTask:
    if not isinstance(raw, Mapping) or not raw.get("name"):
        raise TaskConfigError(f"tasks[{index}]: expected a mapping with a name")
    name = str(raw["name"])
    where = f"task '{name}'"
    if not FUNCTION_NAME.match(name):
        raise TaskConfigError(f"{where}: a Functions name is a letter, then letters, digits, - or _")
    kind = raw.get("kind", "replicate")
    if kind not in TASK_KINDS:
        raise TaskConfigError(f"{where}: kind must be one of {', '.join(TASK_KINDS)}, not '{kind}'")
    source_raw = raw.get("source")
    streamed = (isinstance(source_raw, Mapping)
                and connections.get(str(source_raw.get("connection"))) in clusters)
    if kind == "stream-to-queue" and not streamed:
        raise TaskConfigError(f"{where}: a stream-to-queue task reads a Kafka topic: its source's "
                              "connection names a cluster of `kafka`")
    if kind == "replicate" and streamed:
        raise TaskConfigError(f"{where}: a replicate task reads a queue or subscription; a Kafka topic is "
                              "read by kind: stream-to-queue")
    if streamed:
        source = _stream_endpoint(source_raw, f"{where} source", name, connections)
    else:
        source = _endpoint(raw.get("source"), f"{where} source", connections, namespaces, is_source=True)
    target = None
    if kind in ("replicate", "stream-to-queue"):
        target = _endpoint(raw.get("target"), f"{where} target", connections, namespaces, is_source=False)
    elif raw.get("target"):
        raise TaskConfigError(f"{where}: an audit task has no target (records go to `audit.sink`)")
    return ReplicationTask(name, kind, source, target, _options(raw.get("options") or {}, where))


def _endpoint(
    raw: Any, where: str, connections: Mapping[str, str], namespaces: Mapping[str, Any], *, is_source: bool
) -> Endpoint:
    if not isinstance(raw, Mapping) or not raw.get("connection"):
        raise TaskConfigError(f"{where}: expected a mapping with a `connection` setting name")
    queue, topic, subscription = raw.get("queue"), raw.get("topic"), raw.get("subscription")
    if bool(queue) == bool(topic):
        raise TaskConfigError(f"{where}: name exactly one of `queue` or `topic`")
    if is_source and topic and not subscription:
        raise TaskConfigError(f"{where}: a topic source needs a `subscription`")
    if not is_source and (subscription or raw.get("dead_letter")):
        raise TaskConfigError(f"{where}: a target is a queue or topic (no subscription, no dead_letter)")
    connection = str(raw["connection"])
    namespace = str(connections.get(connection, connection))
    facts = _facts(namespaces.get(namespace) or {}, queue, topic, subscription)
    return Endpoint(connection, namespace, queue, topic, subscription, bool(raw.get("dead_letter")), facts)


def _stream_endpoint(raw: Any, where: str, task: str, connections: Mapping[str, str]) -> Endpoint:
    """A Kafka topic as a task's source; its consumer group defaults to the task's name."""
    allowed = ("connection", "topic", "partition", "consumer_group")
    unknown = sorted(set(raw) - set(allowed), key=str)
    if unknown:
        raise TaskConfigError("; ".join(f"{where}.{k}: {unknown_key(k, allowed, 'key')}" for k in unknown))
    if not raw.get("topic"):
        raise TaskConfigError(f"{where}: a Kafka source names its `topic`")
    connection = str(raw["connection"])
    partition = raw.get("partition")
    return Endpoint(connection, str(connections[connection]), topic=str(raw["topic"]),
                    stream=StreamSource(None if partition is None else int(partition),
                                        str(raw.get("consumer_group") or task)))


def _facts(
    namespace: Mapping[str, Any], queue: str | None, topic: str | None, sub: str | None
) -> EntityFacts:
    if queue:
        entity = (namespace.get("queues") or {}).get(queue) or {}
        receiving = entity
    else:
        entity = (namespace.get("topics") or {}).get(topic) or {}
        receiving = ((entity.get("subscriptions") or {}).get(sub) or {}) if sub else {}
    return EntityFacts(
        requires_session=bool(receiving.get("requires_session", False)),
        enable_partitioning=bool(entity.get("enable_partitioning", False)),
        max_delivery_count=int(receiving.get("max_delivery_count", DEFAULT_MAX_DELIVERY_COUNT)),
    )


def _options(raw: Mapping[str, Any], where: str) -> TaskOptions:
    unknown = set(raw) - set(OPTION_NAMES)
    if unknown:
        raise TaskConfigError("; ".join(f"{where} options.{key}: {unknown_key(key, OPTION_NAMES, 'option')}"
                                        for key in sorted(unknown, key=str)))
    try:
        ttl = parse_duration(raw["ttl"]) if raw.get("ttl") else None
    except ValueError as exc:
        raise TaskConfigError(f"{where} options.ttl: {exc}") from exc
    options = TaskOptions(
        ttl=ttl,
        marker=raw.get("marker"),
        transform=raw.get("transform"),
        batch_size=int(raw.get("batch_size", TaskOptions.batch_size)),
        concurrency=int(raw.get("concurrency", TaskOptions.concurrency)),
        key_as=raw.get("key_as"),
    )
    if options.batch_size < 1 or options.concurrency < 1:
        raise TaskConfigError(f"{where}: batch_size and concurrency must be at least 1")
    if options.key_as is not None and options.key_as not in KEY_AS:
        raise TaskConfigError(f"{where} options.key_as: {options.key_as!r}, allowed: {', '.join(KEY_AS)}")
    return options
