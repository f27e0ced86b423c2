"""The smaller seed scenarios: each recipe's subscriptions, rules and tasks."""

import itertools

import pytest

from local_broker.rules import MessageProperties, compile_filter
from patterns.recipes import consolidation, editing, latency_optimization, splitting_and_routing
from replicators.tasks import deployment_from_dict


def subscriptions(topo, ns, topic="events"):
    return {s.name: s for s in topo.namespaces[ns].topic(topic).subscriptions}


def routes_of(topo):
    return [(t["source"]["connection"], t["source"].get("subscription"), t["target"]["connection"],
             t.get("options", {}).get("transform")) for t in topo.tasks if t["kind"] == "replicate"]


def test_latency_optimization_copies_the_topic_to_each_regional_hub():
    topo = latency_optimization("us", ["eu", "asia"])
    assert routes_of(topo) == [("US", "to-eu", "EU", None), ("US", "to-asia", "ASIA", None)]
    assert set(subscriptions(topo, "us")) == {"to-eu", "to-asia", "audit"}
    assert set(subscriptions(topo, "eu")) == {"consumer", "audit"}
    assert topo.namespaces["asia"].topic("events").properties["requires_duplicate_detection"] is True
    assert [r.filter for r in subscriptions(topo, "us")["to-eu"].rules] == [{"sql": "replication IS NULL"}]


def test_splitting_and_routing_gives_each_target_its_filtered_subscription():
    topo = splitting_and_routing("hub", {"eu": "region = 'eu'", "us": "region = 'us' OR priority > 5"})
    subs = subscriptions(topo, "hub")
    rules = [(r.name, r.filter, r.action) for r in subs["to-eu"].rules]
    assert rules == [("route", {"sql": "region = 'eu'"}, None)]
    # what no route takes stays accounted for in the source
    assert [r.name for r in subs["unrouted"].rules] == ["route"]
    assert subs["to-us"].rules[0].filter == {"sql": "region = 'us' OR priority > 5"}
    assert routes_of(topo) == [("HUB", "to-eu", "EU", None), ("HUB", "to-us", "US", None)]


def test_every_message_lands_in_the_routes_that_select_it_or_else_in_unrouted():
    """Over each routed property present, missing or null, evaluated by the broker's rules engine: a route
    UNKNOWN for a message (it compares a property the message lacks) does not select it, and then, if no
    other route does, `unrouted` must (a plain NOT of the routes would be UNKNOWN too, taking it nowhere)."""
    routes = {"eu": "region = 'eu'", "us": "region = 'us' OR priority > 5", "vip": "NOT customer LIKE 'c-%'"}
    subs = subscriptions(splitting_and_routing("hub", routes), "hub")
    filters = {name: compile_filter(subs[name].rules[0].filter["sql"])
               for name in ("to-eu", "to-us", "to-vip", "unrouted")}
    missing = object()
    for region, priority, customer in itertools.product(
            [missing, None, "eu", "us", "apac"], [missing, None, 2, 9], [missing, None, "c-1", "shop"]):
        present = {k: v for k, v in (("region", region), ("priority", priority), ("customer", customer))
                   if v is not missing}
        message = MessageProperties(present)
        landed = {name for name, f in filters.items() if f.matches(message)}
        expected = {f"to-{target}" for target, sql in routes.items() if compile_filter(sql).matches(message)}
        assert landed == (expected or {"unrouted"}), present


def test_consolidation_normalizes_every_source_into_one_target():
    topo = consolidation(["shop1", "shop2", "shop3"], "central", transform="mypkg.normalize:order_v2")
    assert routes_of(topo) == [(s.upper(), "to-central", "CENTRAL", "mypkg.normalize:order_v2")
                               for s in ("shop1", "shop2", "shop3")]
    assert set(subscriptions(topo, "central")) == {"consumer", "audit"}
    assert len([t for t in topo.tasks if t["kind"] == "audit"]) == 4
    # what the transform rejects has a place to go, with duplicate detection like any replication target
    quarantine = topo.namespaces["central"].queues[0]
    assert quarantine.name == "events-quarantine" and quarantine.properties["requires_duplicate_detection"]
    assert not consolidation(["a", "b"], "c").namespaces["c"].queues  # no transform, nothing to quarantine


def test_editing_is_one_transformed_copy():
    topo = editing("raw", "clean", "patterns.transforms:validate_json", topic="readings")
    assert routes_of(topo) == [("RAW", "to-clean", "CLEAN", "patterns.transforms:validate_json")]
    assert set(subscriptions(topo, "clean", "readings")) == {"consumer", "audit"}
    # the Functions app can load the task and its transform
    task = deployment_from_dict(topo.to_dict()).task("readings-raw-to-clean")
    assert task.load_transform() is not None


@pytest.mark.parametrize("call, message", [
    (lambda: splitting_and_routing("hub", {}), "at least 2"),
    (lambda: editing("a", "b", ""), "needs a transform"),
    (lambda: latency_optimization("us", ["us"]), "distinct"),
])
def test_bad_recipes_are_refused(call, message):
    with pytest.raises(ValueError, match=message):
        call()
