"""The topology's `kafka` section: the Kafka clusters a `stream-to-queue` task reads, each with its topics
and their partition counts. Locally a cluster is Apache Kafka's own broker; in Azure an Event Hubs
namespace, whose Kafka endpoint serves its event hubs as topics (infra/ renders it from this section)."""

from __future__ import annotations

import re
from typing import Any

from topology.model import KafkaClusterSpec, KafkaTopicSpec, Topology
from topology.problems import Problems, check_value, did_you_mean, unknown_key
from topology.schema import Property

# Event Hubs names (the stricter of the two: Kafka also allows a leading '.', '_' or '-'); at most 256.
TOPIC_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._\-]{0,254}[A-Za-z0-9])?$")
PARTITIONS = Property("int", 1, 1024)  # Event Hubs: 32 on Standard, 100 on Premium, 1024 on Dedicated
CLUSTER_KEYS = ("topics",)
TOPIC_KEYS = ("partitions",)


def read(raw: Any, problems: Problems) -> dict[str, KafkaClusterSpec]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        problems.add("", "kafka", f"{type(raw).__name__} where a mapping of cluster name to "
                     "{topics: ...} is expected")
        return {}
    clusters = {}
    for name, body in raw.items():
        where = f"kafka/{name}"
        body = body if isinstance(body, dict) else {}
        for key in body:
            if key not in CLUSTER_KEYS:
                problems.add(where, str(key), unknown_key(key, CLUSTER_KEYS, "key"))
        topics = body.get("topics")
        if not isinstance(topics, dict) or not topics:
            problems.add(where, "topics", "missing, declare each topic as <name>: {partitions: N}")
            topics = {}
        clusters[str(name)] = KafkaClusterSpec(str(name), [_topic(str(t), spec, f"{where}/{t}", problems)
                                                           for t, spec in topics.items()])
    return clusters


def _topic(name: str, raw: Any, where: str, problems: Problems) -> KafkaTopicSpec:
    if not TOPIC_NAME.match(name):
        problems.add(where, "name", f"'{name}' is not a topic name, allowed letters, digits, '.', '-' and "
                     "'_', starting and ending with a letter or digit (at most 256)")
    body = raw if isinstance(raw, dict) else {}
    for key in body:
        if key not in TOPIC_KEYS:
            problems.add(where, str(key), unknown_key(key, TOPIC_KEYS, "key"))
    partitions = body.get("partitions", 1)
    problem = check_value(PARTITIONS, partitions)
    if problem:
        problems.add(where, "partitions", problem)
        partitions = 1
    return KafkaTopicSpec(name, partitions)


def check_names(topology: Topology, problems: Problems) -> None:
    """A cluster and a namespace share the `connections` map, so their names must differ."""
    for name in topology.kafka:
        if name in topology.namespaces:
            problems.add(f"kafka/{name}", "", "also the name of a namespace, allowed: a name of its own "
                         "(connections map a setting to either)")


def check_source(topology: Topology, end: dict[str, Any], where: str, problems: Problems) -> bool:
    """A task source read from a Kafka cluster names one of its topics (and a partition it has); False when
    the source's connection is not a cluster's."""
    cluster = topology.kafka.get(topology.connections.get(str(end.get("connection")), ""))
    if cluster is None:
        return False
    topic = end.get("topic")
    declared = next((t for t in cluster.topics if t.name == topic), None)
    if declared is None:
        names = [t.name for t in cluster.topics]
        problems.add(where, "topic", f"{topic!r} is not a topic of Kafka cluster {cluster.name}, " +
                     did_you_mean(topic, names, f"allowed: {', '.join(names)}"))
        return True
    partition = end.get("partition")
    if partition is not None and (isinstance(partition, bool) or not isinstance(partition, int)
                                  or not 0 <= partition < declared.partitions):
        problems.add(where, "partition", f"{partition!r} is not a partition of {topic}, allowed 0 to "
                     f"{declared.partitions - 1}")
    return True
