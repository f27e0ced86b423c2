"""The three federation patterns of the seed as topology generators: parameters in, `Topology` out.

Each returns entities, rules and tasks for `sbfed topology apply` and the Functions app, plus an audit tap
per topic so reconciliation has a log of what every namespace saw (queues cannot be tapped without
competing with their consumers; there the failover clients' own records serve)."""

from __future__ import annotations

import datetime as dt

from patterns import transforms
from patterns.building import (
    CONSUMER_SUBSCRIPTION,
    MARK_REPLICATED,
    NOT_REPLICATED,
    REPLICATION_MARKER,
    TopologyBuilder,
    distinct,
    replication_target,
)
from topology import RuleSpec, Topology
from topology.durations import format_duration, format_timespan, parse_duration

REPLICATION_RULE = "replication"
SPILL_TRANSFORM = f"{transforms.__name__}:{transforms.spill_once.__name__}"


def all_active(namespaces: list[str], topic: str = "events", *, audit_sink: str | None = None) -> Topology:
    """A topic per namespace; per peer a replication subscription (`replication IS NULL`,
    `SET replication = 1`) and its task; one shared consumer subscription per topic. Every message reaches
    every namespace once: a copy carries the marker, so no peer's replication subscription takes it again."""
    names = distinct(namespaces, at_least=2)
    build = TopologyBuilder(audit_sink)
    rule = RuleSpec(REPLICATION_RULE, {"sql": NOT_REPLICATED}, {"sql": MARK_REPLICATED})
    for ns in names:
        build.topic(ns, topic, **replication_target())
        build.consumer(ns, topic)
        for peer in names:
            if peer != ns:
                build.forward_topic(ns, peer, topic, rule=rule, marker=REPLICATION_MARKER)
        build.audit_tap(ns, topic)
    return build.topology


def active_passive(
    primary: str, secondary: str, topic: str = "events", *, ttl: str = "PT2M", audit_sink: str | None = None
) -> Topology:
    """One-way replication primary -> secondary. The replication rule stamps the copies with the TTL of the
    failover window (`SET sys.TimeToLive = ...`), and the task caps it too, so the passive side only
    ever holds a recent window; both topics have consumer subscriptions for the failover consumer."""
    distinct([primary, secondary], at_least=2)
    window = parse_duration(ttl)
    build = TopologyBuilder(audit_sink)
    action = f"{MARK_REPLICATED}; SET sys.TimeToLive = '{format_timespan(window)}'"
    rule = RuleSpec(REPLICATION_RULE, {"sql": NOT_REPLICATED}, {"sql": action})
    for ns in (primary, secondary):
        build.topic(ns, topic, **replication_target())
        build.consumer(ns, topic)
    build.forward_topic(
        primary, secondary, topic, rule=rule, ttl=format_duration(window), marker=REPLICATION_MARKER
    )
    for ns in (primary, secondary):
        build.audit_tap(ns, topic)
    return build.topology


def spillover(
    namespaces: list[str], entity: str = "work", *, deadline: str = "PT5M", over: str = "queue",
    audit_sink: str | None = None,
) -> Topology:
    """Queues (or, with `over="subscription"`, a topic's `consumer` subscription) used in parallel, each one's
    dead-letter queue replicated into the next namespace's queue or topic (a ring; with two namespaces, each
    into the other). Messages live half the processing deadline in each, so the spillover still has the other
    half. A copy that already spilled once is rerouted by the task's transform to the auxiliary queue
    `<entity>-aux` (the composite dead-letter queue), never bounced. Topics get audit taps; queues cannot."""
    if over not in ("queue", "subscription"):
        raise ValueError(f"spillover runs over a queue or a subscription, not '{over}'")
    names = distinct(namespaces, at_least=2)
    half = _half(parse_duration(deadline))
    expiring = {"default_message_time_to_live": format_duration(half),
                "dead_lettering_on_message_expiration": True}
    if over == "queue":
        source, target = {"queue": entity}, {"queue": entity}
    else:
        source, target = {"topic": entity, "subscription": CONSUMER_SUBSCRIPTION}, {"topic": entity}
    build = TopologyBuilder(audit_sink)
    for ns in names:
        if over == "queue":
            build.queue(ns, entity, **expiring)
        else:
            build.subscription(ns, entity, CONSUMER_SUBSCRIPTION, **expiring)
        build.queue(ns, f"{entity}{transforms.AUX_SUFFIX}")
    for index, ns in enumerate(names):
        peer = names[(index + 1) % len(names)]
        build.replicate(ns, {**source, "dead_letter": True}, peer, target,
                        name=f"{entity}-{ns}-dlq-to-{peer}",
                        ttl=format_duration(half), transform=SPILL_TRANSFORM)
    if over == "subscription":
        for ns in names:
            build.audit_tap(ns, entity)
    return build.topology


def _half(deadline: dt.timedelta) -> dt.timedelta:
    if deadline < dt.timedelta(seconds=2):
        raise ValueError("the processing deadline must be at least 2 seconds, got "
                         f"{format_duration(deadline)}")
    return dt.timedelta(seconds=int(deadline.total_seconds() // 2))

