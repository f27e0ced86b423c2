"""The topology model reads the documented format and writes it back unchanged."""

import textwrap

import pytest

from topology import TopologyError, dump, load, parse

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
    topo = load(path)
    primary = topo.namespaces["primary"]
    assert primary.queue("ORDERS").properties["requires_duplicate_detection"] is True
    sub = primary.topic("events").subscriptions[1]
    assert sub.properties == {"lock_duration": "PT1M"}
    assert sub.rules[0].filter_kind == "sql" and sub.rules[0].action == {"sql": "SET replication = 1"}
    assert topo.namespace_of("SECONDARY").name == "secondary"


def test_bare_true_and_false_filter_keys_mean_the_filter_kinds():
    raw = {"namespaces": {"a": {"topics": {"t": {"subscriptions": {"s": {"rules": {
        "all": {"filter": {True: {}}}, "none": {"filter": {False: {}}}}}}}}}}}
    rules = parse(raw).namespaces["a"].topics[0].subscriptions[0].rules
    assert [r.filter_kind for r in rules] == ["true", "false"]


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_round_trips(tmp_path, suffix):
    src = tmp_path / "in.yaml"
    src.write_text(DOC)
    topo = load(src)
    out = tmp_path / f"out{suffix}"
    dump(topo, out)
    assert load(out) == topo


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"namespacez": {}}, "topology: namespacez: unknown key, did you mean namespaces?"),
        ({"namespaces": {"a": {"queuez": {}}}}, "topology: a: queuez: unknown key, did you mean queues?"),
        ({"namespaces": {"a": {"queues": []}}}, "topology: a: queues: list where a mapping is expected"),
        ({"namespaces": {"a": {}}, "connections": {"X": "nowhere"}},
         "topology: connections/X: namespace 'nowhere' is not declared, allowed: a"),
        ({"namespaces": {"primary": {}, "secondary": {}}, "connections": {"X": "secondry"}},
         "topology: connections/X: namespace 'secondry' is not declared, did you mean secondary?"),
        ({"namespaces": {"a": {"queues": {"orders": {}, "q": {"forward_to": "Order"}}}}},
         "topology: a/q: forward_to: 'Order' is not declared in namespace a, did you mean orders?"),
        ({"namespaces": {"a": {"queues": {"orders": {}}}}, "connections": {"A": "a"},
          "tasks": [{"name": "t", "source": {"connection": "A", "queue": "ordres"}}]},
         "topology: tasks/t/source: queue: 'ordres' is not declared in namespace a, did you mean orders?"),
        ({"namespaces": {"a": {"topics": {"events": {"subscriptions": {"to-b": {}}}}}},
          "connections": {"A": "a"},
          "tasks": [{"name": "t", "source": {"connection": "A", "topic": "events", "subscription": "to_b"}}]},
         "topology: tasks/t/source: subscription: 'to_b' is not declared in namespace a, did you mean to-b?"),
        ({"namespaces": {"a": {"topics": {"events": {}}}}, "connections": {"A": "a"},
          "tasks": [{"name": "u", "target": {"connection": "A", "topic": "evnts"}}]},
         "topology: tasks/u/target: topic: 'evnts' is not declared in namespace a, did you mean events?"),
        ({"namespaces": {"a": {}}, "connections": {"A": "a"},
          "tasks": [{"name": "u", "target": {"connection": "A", "queue": "x"}}]},
         "topology: tasks/u/target: queue: 'x' is not declared in namespace a, allowed: a queue the file "
         "declares there (none)"),
        ({"namespaces": {"a": {}}, "tasks": [{"kind": "replicate"}]},
         "topology: tasks: not a list of mappings each with a name"),
        ({"namespaces": {"a": {"topics": {"t": {"subscriptions": {"s": {"rules": {"r": {
            "filter": {"sql": "a=1", "true": {}}}}}}}}}}},
         "topology: a/t/s/r: filter: 2 filter kinds, allowed exactly one of sql, correlation, true, false"),
    ],
)
def test_malformed_documents_say_where(raw, message):
    with pytest.raises(TopologyError) as caught:
        parse(raw)
    assert message in caught.value.problems


def test_the_ground_floor_imports_nothing_of_the_project():
    """ARCHITECTURE.md: the topology package may import the standard library and PyYAML, nothing else."""
    import ast
    import sys
    from pathlib import Path

    package = Path(__file__).resolve().parents[3] / "topology"
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            for name in names:
                root = name.split(".")[0]
                assert root in sys.stdlib_module_names or root in ("yaml", "topology"), (path.name, name)
