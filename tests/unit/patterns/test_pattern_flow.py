"""What the generated topologies do with messages: subscriptions filter and act with the broker's own rule
language, tasks copy with the replicators' own copy (as the Functions app would load them from the file).
All-active must deliver every message to every namespace exactly once; active-passive one way with the
failover TTL; spillover at most one spill, then the auxiliary queue. Loop prevention's filter
(`replication IS NULL`) takes a message that lacks the marker or holds it null, never one that carries it."""

import datetime as dt
from collections import Counter

import pytest

from local_broker.rules import MessageProperties, compile_action, compile_filter
from patterns.federation import active_passive, all_active, spillover
from patterns.recipes import consolidation, latency_optimization
from replicators.copy import copy_message
from replicators.message import AmqpBody, SourceMessage
from replicators.tasks import deployment_from_dict

T0 = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.UTC)
MAX_HOPS = 10


class Flow:
    def __init__(self, topology):
        self.topology = topology
        self.tasks = deployment_from_dict(topology.to_dict()).tasks
        self.arrivals: Counter = Counter()  # (namespace, entity) -> messages that arrived
        self.ttls: list[dt.timedelta | None] = []  # TimeToLive of each arrival, in order
        self.resting: list[tuple[str, str, dict]] = []  # (namespace, queue, properties) for queues

    def publish(self, namespace, entity, properties, ttl=None, hops=0):
        assert hops <= MAX_HOPS, "the message loops between namespaces"
        self.arrivals[(namespace, entity)] += 1
        self.ttls.append(ttl)
        spec = self.topology.namespaces[namespace]
        if spec.queue(entity) is not None:
            self.resting.append((namespace, entity, dict(properties)))
            return
        for sub in spec.topic(entity).subscriptions:
            for copy_properties, copy_ttl in self._selected(sub, properties, ttl):
                self.resting.append((namespace, f"{entity}/{sub.name}", copy_properties))
                self._replicate(namespace, entity, sub.name, False, copy_properties, copy_ttl, hops)

    def dead_letter(self, namespace, entity, properties, subscription=None, hops=0):
        """The consumers failed: the message goes to the dead-letter queue, whose task takes it."""
        self._replicate(namespace, entity, subscription, True, properties, None, hops)

    def _selected(self, sub, properties, ttl):
        if not sub.rules:
            return [(dict(properties), ttl)]
        copies = []
        for rule in sub.rules:
            target = MessageProperties(dict(properties), {"TimeToLive": ttl} if ttl else {})
            if compile_filter(rule.filter["sql"]).matches(target):
                if rule.action:
                    compile_action(rule.action["sql"]).apply(target)
                copies.append((target.application_properties, target.system_properties.get("TimeToLive")))
        return copies

    def _replicate(self, namespace, entity, subscription, dead_letter, properties, ttl, hops):
        for task in self.tasks:
            source = task.source
            reads = (source.namespace, source.entity, source.subscription, source.dead_letter)
            if task.kind != "replicate" or reads != (namespace, entity, subscription, dead_letter):
                continue
            message = SourceMessage(body=AmqpBody.data(b"{}"), message_id="m", time_to_live=ttl,
                                    application_properties=properties, namespace=namespace, entity=entity,
                                    enqueued_time_utc=T0, sequence_number=hops + 1)
            replica = copy_message(message, target_entity=task.target.entity, options=task.options.copy)
            transform = task.load_transform()
            replica = transform(replica) if transform else replica
            self.publish(task.target.namespace, replica.entity, replica.application_properties,
                         replica.time_to_live, hops + 1)


@pytest.mark.parametrize("names", [["a", "b"], ["a", "b", "c"], ["w", "x", "y", "z"]])
def test_all_active_delivers_every_message_everywhere_exactly_once(names):
    for origin in names:
        flow = Flow(all_active(names))
        flow.publish(origin, "events", {"order": 1})
        assert flow.arrivals == Counter({(ns, "events"): 1 for ns in names})


def test_active_passive_replicates_one_way_with_the_failover_ttl():
    topology = active_passive("primary", "secondary", ttl="PT2M")
    flow = Flow(topology)
    flow.publish("primary", "events", {"order": 1})
    assert flow.arrivals == Counter({("primary", "events"): 1, ("secondary", "events"): 1})
    assert flow.ttls == [None, dt.timedelta(minutes=2)]  # the replica carries the failover window
    published_on_secondary = Flow(topology)
    published_on_secondary.publish("secondary", "events", {"order": 2})
    assert published_on_secondary.arrivals == Counter({("secondary", "events"): 1})


@pytest.mark.parametrize("over, consumer", [("queue", "jobs"), ("subscription", "jobs/consumer")])
def test_spillover_spills_once_then_parks_in_the_auxiliary_queue(over, consumer):
    subscription = None if over == "queue" else "consumer"
    flow = Flow(spillover(["a", "b"], "jobs", over=over))
    flow.dead_letter("a", "jobs", {"order": 1}, subscription)  # a's consumers could not handle it in time
    [(namespace, where, properties)] = [r for r in flow.resting if not r[1].endswith("/audit")]
    assert (namespace, where, properties["spilled"]) == ("b", consumer, 1)
    flow.resting.clear()
    flow.dead_letter("b", "jobs", properties, subscription)  # b could not either
    assert [(ns, q) for ns, q, _ in flow.resting] == [("a", "jobs-aux")]


FEDERATED = {  # a topology, where a message is published, and every namespace whose topic must enqueue it
    "all-active": (all_active(["a", "b", "c"]), "b", {"a", "b", "c"}),
    "active-passive": (active_passive("a", "b"), "a", {"a", "b"}),
    "latency": (latency_optimization("a", ["b", "c"]), "a", {"a", "b", "c"}),
    "consolidation": (consolidation(["a", "b"], "c"), "b", {"b", "c"}),
}


@pytest.mark.parametrize("pattern", FEDERATED)
@pytest.mark.parametrize("properties", [{}, {"replication": None}, {"order": 1, "REPLICATION": None}])
def test_a_message_without_the_replication_marker_is_replicated_once(pattern, properties):
    """`replication IS NULL` is TRUE for a missing or null marker (never UNKNOWN, which copies nothing)."""
    topology, origin, everywhere = FEDERATED[pattern]
    flow = Flow(topology)
    flow.publish(origin, "events", properties)
    assert flow.arrivals == Counter({(ns, "events"): 1 for ns in everywhere})


@pytest.mark.parametrize("pattern", FEDERATED)
@pytest.mark.parametrize("marker", [1, 0, "yes", False])
def test_a_message_that_carries_the_replication_marker_is_not_replicated_again(pattern, marker):
    """Whatever its value, a marker names a copy; its casing does not matter (property names do not)."""
    topology, origin, _ = FEDERATED[pattern]
    for name in ("replication", "Replication"):
        flow = Flow(topology)
        flow.publish(origin, "events", {name: marker})
        assert flow.arrivals == Counter({(origin, "events"): 1})
