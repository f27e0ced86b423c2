"""The topology file's schema, shared by every part of sbfed: parse YAML/JSON and the emulator's
Config.json, validate (every problem, one line each), plain dataclasses, ISO 8601 durations.

The ground floor: it imports nothing of the project, and the broker, the replicators, the patterns and
the Bicep rendering all read topologies through it, each translating the model into its own terms.
"""

from topology.files import add_check, dump, load, parse
from topology.geo import GeoReplicationSpec
from topology.model import (
    FILTER_KINDS,
    NamespaceSpec,
    QueueSpec,
    RuleSpec,
    SubscriptionSpec,
    TopicSpec,
    Topology,
    TopologyError,
)
from topology.order import Creation, creation_order

__all__ = [
    "FILTER_KINDS",
    "Creation",
    "GeoReplicationSpec",
    "NamespaceSpec",
    "QueueSpec",
    "RuleSpec",
    "SubscriptionSpec",
    "TopicSpec",
    "Topology",
    "TopologyError",
    "add_check",
    "creation_order",
    "dump",
    "load",
    "parse",
]
