"""The topology model reads the documented format and writes it back unchanged."""

import textwrap

import pytest

from patterns.topology import TopologyError, dump_topology, load_topology, topology_from_dict

DOC = textwrap.dedent(
    """
    namespaces:
      primary:
        local: {amqp_port: 0}
        queues:
          orders: {requires_duplicate_detection: true, duplicate_detection_history_time_window: PT10M}
        topics:
          events:
            subscriptions:
              consumer: {}
              to-secondary:
                lock_duration: PT1M
                rules:
                  replicate:
                    filter: {sql: "replication IS NULL"}
                    action: {sql: "SET replication = 1"}
      secondary:
        topics:
          events: {requires_duplicate_detection: true}
    connections: {PRIMARY: primary, SECONDARY: secondary}
    tasks:
      - name: events-primary-to-secondary
        kind: replicate
        source: {connection: PRIMARY, topic: events, subscription: to-secondary}
        target: {connection: SECONDARY, topic: events}
    """
)


def test_reads_the_documented_format(tmp_path):
    path = tmp_path / "topology.yaml"
    path.write_text(DOC)
    topo = load_topology(path)
    primary = topo.namespaces["primary"]
    assert primary.queue("ORDERS").properties["requires_duplicate_detection"] is True
    sub = primary.topic("events").subscriptions[1]
    assert sub.properties == {"lock_duration": "PT1M"}
    assert sub.rules[0].filter_kind == "sql" and sub.rules[0].action == {"sql": "SET replication = 1"}
    assert topo.namespace_of("SECONDARY").name == "secondary"


def test_bare_true_and_false_filter_keys_mean_the_filter_kinds():
    raw = {"namespaces": {"a": {"topics": {"t": {"subscriptions": {"s": {"rules": {
        "all": {"filter": {True: {}}}, "none": {"filter": {False: {}}}}}}}}}}}
    rules = topology_from_dict(raw).namespaces["a"].topics[0].subscriptions[0].rules
    assert [r.filter_kind for r in rules] == ["true", "false"]


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_round_trips(tmp_path, suffix):
    src = tmp_path / "in.yaml"
    src.write_text(DOC)
    topo = load_topology(src)
    out = tmp_path / f"out{suffix}"
    dump_topology(topo, out)
    assert load_topology(out) == topo


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"namespacez": {}}, "unknown top-level keys"),
        ({"namespaces": {"a": {"queuez": {}}}}, "namespaces/a: unknown keys"),
        ({"namespaces": {"a": {"queues": []}}}, "namespaces/a/queues: expected a mapping"),
        ({"connections": {"X": "nowhere"}}, "connections/X"),
        ({"tasks": [{"kind": "replicate"}]}, "each with a name"),
        ({"namespaces": {"a": {"topics": {"t": {"subscriptions": {"s": {"rules": {"r": {
            "filter": {"sql": "a=1", "true": {}}}}}}}}}}}, "exactly one of"),
    ],
)
def test_malformed_documents_say_where(raw, message):
    with pytest.raises(TopologyError, match=message):
        topology_from_dict(raw)
