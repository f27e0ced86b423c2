"""Each pattern function's topology, checked exactly: entities, rules, tasks, connections."""


import pytest

from patterns.building import connection_setting
from patterns.federation import active_passive, all_active, spillover
from replicators.tasks import deployment_from_dict
from topology import parse

DEDUP = {"requires_duplicate_detection": True, "duplicate_detection_history_time_window": "PT10M"}
REPLICATION_RULE = {"replication": {"filter": {"sql": "replication IS NULL"},
                                    "action": {"sql": "SET replication = 1"}}}


def audit_task(ns, topic="events"):
    return {"name": f"audit-{topic}-{ns}", "kind": "audit",
            "source": {"connection": ns.upper(), "topic": topic, "subscription": "audit"}}


def test_all_active_over_two_namespaces():
    topo = all_active(["west", "east"]).to_dict()
    assert topo == {
        "namespaces": {
            ns: {"topics": {"events": {**DEDUP, "subscriptions": {
                "consumer": {}, f"to-{peer}": {"rules": REPLICATION_RULE}, "audit": {}}}}}
            for ns, peer in (("west", "east"), ("east", "west"))
        },
        "connections": {"WEST": "west", "EAST": "east"},
        "tasks": [
            {"name": "events-west-to-east", "kind": "replicate",
             "source": {"connection": "WEST", "topic": "events", "subscription": "to-east"},
             "target": {"connection": "EAST", "topic": "events"}, "options": {"marker": "replication"}},
            audit_task("west"),
            {"name": "events-east-to-west", "kind": "replicate",
             "source": {"connection": "EAST", "topic": "events", "subscription": "to-west"},
             "target": {"connection": "WEST", "topic": "events"}, "options": {"marker": "replication"}},
            audit_task("east"),
        ],
        "audit": {"sink": "./audit"},
    }


def test_all_active_has_one_replication_subscription_and_task_per_ordered_pair():
    names = ["a", "b", "c", "d"]
    topo = all_active(names, topic="orders")
    replicate = [t for t in topo.tasks if t["kind"] == "replicate"]
    pairs = {(t["source"]["connection"], t["target"]["connection"]) for t in replicate}
    assert len(replicate) == len(pairs) == 12
    assert pairs == {(a.upper(), b.upper()) for a in names for b in names if a != b}
    for ns in names:
        subs = {s.name: s for s in topo.namespaces[ns].topic("orders").subscriptions}
        assert set(subs) == {"consumer", "audit"} | {f"to-{p}" for p in names if p != ns}
        assert all(s.rules == [] for n, s in subs.items() if not n.startswith("to-"))


def test_active_passive_stamps_the_failover_window_on_the_copies():
    topo = active_passive("primary", "secondary", ttl="PT90S").to_dict()
    primary_subs = topo["namespaces"]["primary"]["topics"]["events"]["subscriptions"]
    assert primary_subs["to-secondary"] == {"rules": {"replication": {
        "filter": {"sql": "replication IS NULL"},
        "action": {"sql": "SET replication = 1; SET sys.TimeToLive = '00:01:30'"}}}}
    assert set(primary_subs) == {"consumer", "to-secondary", "audit"}
    assert topo["namespaces"]["secondary"] == {
        "topics": {"events": {**DEDUP, "subscriptions": {"consumer": {}, "audit": {}}}}}
    assert topo["tasks"] == [
        {"name": "events-primary-to-secondary", "kind": "replicate",
         "source": {"connection": "PRIMARY", "topic": "events", "subscription": "to-secondary"},
         "target": {"connection": "SECONDARY", "topic": "events"},
         "options": {"ttl": "PT1M30S", "marker": "replication"}},
        audit_task("primary"), audit_task("secondary"),
    ]


def test_spillover_pairs_dead_letter_queues_and_derives_the_ttl_from_the_deadline():
    topo = spillover(["a", "b"], "jobs", deadline="PT5M").to_dict()
    queue = {"default_message_time_to_live": "PT2M30S", "dead_lettering_on_message_expiration": True, **DEDUP}
    assert topo["namespaces"] == {ns: {"queues": {"jobs": queue, "jobs-aux": {}}} for ns in ("a", "b")}
    assert topo["tasks"] == [
        {"name": f"jobs-{src}-dlq-to-{dst}", "kind": "replicate",
         "source": {"connection": src.upper(), "queue": "jobs", "dead_letter": True},
         "target": {"connection": dst.upper(), "queue": "jobs"},
         "options": {"ttl": "PT2M30S", "transform": "patterns.transforms:spill_once"}}
        for src, dst in (("a", "b"), ("b", "a"))
    ]


def test_spillover_over_a_subscription_spills_into_the_peer_topic_and_taps_it():
    topo = spillover(["a", "b"], "jobs", deadline="PT1M", over="subscription").to_dict()
    consumer = {"default_message_time_to_live": "PT30S", "dead_lettering_on_message_expiration": True}
    assert topo["namespaces"] == {ns: {
        "queues": {"jobs-aux": {}},
        "topics": {"jobs": {**DEDUP, "subscriptions": {"consumer": consumer, "audit": {}}}},
    } for ns in ("a", "b")}
    assert topo["tasks"][:2] == [
        {"name": f"jobs-{src}-dlq-to-{dst}", "kind": "replicate",
         "source": {"connection": src.upper(), "topic": "jobs", "subscription": "consumer",
                    "dead_letter": True},
         "target": {"connection": dst.upper(), "topic": "jobs"},
         "options": {"ttl": "PT30S", "transform": "patterns.transforms:spill_once"}}
        for src, dst in (("a", "b"), ("b", "a"))
    ]
    assert topo["tasks"][2:] == [audit_task("a", "jobs"), audit_task("b", "jobs")]


def test_spillover_over_three_namespaces_is_a_ring():
    topo = spillover(["a", "b", "c"])
    assert [(t["source"]["connection"], t["target"]["connection"]) for t in topo.tasks] == [
        ("A", "B"), ("B", "C"), ("C", "A")]


@pytest.mark.parametrize("build", [
    lambda: all_active(["a", "b", "c"]),
    lambda: active_passive("p", "s"),
    lambda: spillover(["a", "b"]),
])
def test_patterns_round_trip_through_the_file_and_load_as_replication_tasks(build):
    topo = build()
    assert parse(topo.to_dict()) == topo
    deployment = deployment_from_dict(topo.to_dict())
    assert [t.name for t in deployment.tasks] == [t["name"] for t in topo.tasks]
    for task in topo.tasks:
        topo.namespace_of(task["source"]["connection"])  # every connection resolves


@pytest.mark.parametrize("call, message", [
    (lambda: all_active(["a"]), "at least 2"),
    (lambda: all_active(["a", "A"]), "distinct"),
    (lambda: active_passive("p", "p"), "distinct"),
    (lambda: spillover(["a", "b"], deadline="PT1S"), "at least 2 seconds"),
    (lambda: spillover(["a", "b"], deadline="5 minutes"), "ISO 8601"),
    (lambda: spillover(["a", "b"], over="topic"), "a queue or a subscription"),
])
def test_bad_parameters_are_refused(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_connection_settings_are_app_setting_names():
    assert connection_setting("west-eu.prod") == "WEST_EU_PROD"
