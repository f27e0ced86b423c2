"""The seed's other federation scenarios as small recipes on the same machinery as the three patterns:
filtered subscriptions select, replication tasks copy across namespaces, transforms edit on the way."""

from __future__ import annotations

from patterns.building import (
    MARK_REPLICATED,
    NOT_REPLICATED,
    TopologyBuilder,
    distinct,
    replication_target,
)
from patterns.sql_truth import none_true
from patterns.transforms import QUARANTINE_SUFFIX
from topology import RuleSpec, Topology

ROUTE_RULE = "route"
UNROUTED_SUBSCRIPTION = "unrouted"
SELECT_ALL = RuleSpec("replicate", {"sql": NOT_REPLICATED}, {"sql": MARK_REPLICATED})


def latency_optimization(origin: str, hubs: list[str], topic: str = "events", *,
                         audit_sink: str | None = None) -> Topology:
    """Consumers read near themselves: the origin's topic is copied to a regional hub topic in each hub
    namespace, where the consumers' subscription lives."""
    distinct([origin, *hubs], at_least=2)
    build = TopologyBuilder(audit_sink)
    build.topic(origin, topic)
    for hub in hubs:
        build.forward_topic(origin, hub, topic, rule=SELECT_ALL)
        build.consumer(hub, topic)
    for ns in (origin, *hubs):
        build.audit_tap(ns, topic)
    return build.topology


def splitting_and_routing(source: str, routes: dict[str, str], topic: str = "events", *,
                          audit_sink: str | None = None) -> Topology:
    """One source, several targets: each target namespace gets what its SQL filter selects from the source
    topic (a filtered subscription per target, and its task); a message may match several routes or none.
    What no route selects stays in the source's subscription `unrouted`, so it is accounted for rather than
    gone: its filter is TRUE where no route's is, a route that is UNKNOWN (it compares a property the message
    lacks or holds as null) counting as not selecting (`sql_truth.none_true`)."""
    distinct([source, *routes], at_least=2)
    if not routes:
        raise ValueError("splitting and routing needs at least one route (target namespace -> SQL filter)")
    build = TopologyBuilder(audit_sink)
    build.topic(source, topic)
    for target, sql in routes.items():
        build.forward_topic(source, target, topic, rule=RuleSpec(ROUTE_RULE, {"sql": sql}))
        build.consumer(target, topic)
    build.subscription(source, topic, UNROUTED_SUBSCRIPTION,
                       rules=[RuleSpec(ROUTE_RULE, {"sql": none_true(routes.values())})])
    for ns in (source, *routes):
        build.audit_tap(ns, topic)
    return build.topology


def consolidation(sources: list[str], target: str, topic: str = "events", *, transform: str | None = None,
                  audit_sink: str | None = None) -> Topology:
    """Several sources into one target; the transform (if any) normalizes each source's messages to the
    target's shape on the way, and may reroute what it rejects to the target's queue `<topic>-quarantine`
    (`transforms.quarantine`). Duplicate detection on the target absorbs repeats from any source, so the
    sources' MessageIds must be distinct (or made so by the transform)."""
    distinct([*sources, target], at_least=2)
    build = TopologyBuilder(audit_sink)
    for source in sources:
        build.topic(source, topic)
        build.forward_topic(source, target, topic, rule=SELECT_ALL, transform=transform)
    build.consumer(target, topic)
    if transform:
        build.queue(target, f"{topic}{QUARANTINE_SUFFIX}", **replication_target())
    for ns in (*sources, target):
        build.audit_tap(ns, topic)
    return build.topology


def editing(source: str, target: str, transform: str, topic: str = "events", *,
            audit_sink: str | None = None) -> Topology:
    """Validation, reduction, enrichment: one copy whose transform quarantines (reroutes to the target's
    `<topic>-quarantine` queue with a reason), drops (returns None), trims or adds to each message on its way
    from the source topic to the target topic."""
    if not transform:
        raise ValueError("an editing recipe needs a transform (module:function)")
    return consolidation([source], target, topic, transform=transform, audit_sink=audit_sink)
