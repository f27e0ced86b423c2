"""`sbfed topology apply` against the local broker over HTTPS, with the real ServiceBusAdministrationClient:
applying twice changes nothing, a changed property or rule is reported and applied, extras are kept unless
asked, immutable properties stop the run before anything changes."""

from __future__ import annotations

import datetime as dt
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.management import ServiceBusAdministrationClient

from patterns.apply import apply_topology
from patterns.cli import main
from patterns.federation import active_passive, all_active, spillover
from topology import dump, parse

NAMESPACES = {"namespaces": {n: {"local": {"amqp_port": 0, "admin_port": 0}}
                             for n in ("primary", "secondary")}}


@pytest.fixture(scope="module")
def broker(start_module_broker):
    return start_module_broker(NAMESPACES)


@pytest.fixture
def admin(broker):
    return {
        name: ServiceBusAdministrationClient.from_connection_string(
            ns.admin_connection_string, connection_verify=broker.cert_path)
        for name, ns in broker.namespaces.items()
    }


def apply(broker, topology, tmp_path, capsys, *extra):
    path = tmp_path / "topology.yaml"
    dump(topology, path)
    argv = ["apply", "--topology", str(path), "--verify", broker.cert_path, *extra]
    for name in topology.namespaces:
        argv += ["--namespace", f"{name}={broker.namespaces[name].admin_connection_string}"]
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def subscription(topology, name):
    return next(s for s in topology.namespaces["primary"].topic("events").subscriptions if s.name == name)


def clean(admin):
    for client in admin.values():
        for topic in list(client.list_topics()):
            client.delete_topic(topic.name)
        for queue in list(client.list_queues()):
            client.delete_queue(queue.name)


@pytest.fixture(autouse=True)
def empty_namespaces(admin):
    clean(admin)
    yield
    clean(admin)


def test_applying_twice_changes_nothing_the_second_time(broker, admin, tmp_path, capsys):
    topology = active_passive("primary", "secondary", ttl="PT2M")
    code, out = apply(broker, topology, tmp_path, capsys)
    assert code == 0, out
    assert "+ topic events" in out and "- rule events/to-secondary/$Default" in out
    rules = {r.name: r for r in admin["primary"].list_rules("events", "to-secondary")}
    assert set(rules) == {"replication"}
    action = rules["replication"].action.sql_expression
    assert action == "SET replication = 1; SET sys.TimeToLive = '00:02:00'"
    topic = admin["secondary"].get_topic("events")
    assert topic.requires_duplicate_detection is True
    assert topic.duplicate_detection_history_time_window == dt.timedelta(minutes=10)

    code, out = apply(broker, topology, tmp_path, capsys)
    assert code == 0
    assert out.splitlines() == [
        "namespace primary: up to date", "namespace secondary: up to date", "no changes"]


def test_a_changed_property_and_a_changed_rule_are_reported_and_applied(broker, admin, tmp_path, capsys):
    topology = active_passive("primary", "secondary")
    apply(broker, topology, tmp_path, capsys)
    consumer = subscription(topology, "consumer")
    consumer.properties.update(max_delivery_count=3, lock_duration="PT45S")
    replication = subscription(topology, "to-secondary").rules[0]
    replication.filter = {"sql": "replication IS NULL AND priority > 1"}

    code, out = apply(broker, topology, tmp_path, capsys)
    assert code == 0, out
    assert "~ subscription events/consumer: max_delivery_count: 10 -> 3; lock_duration: PT1M -> PT45S" in out
    assert "~ rule events/to-secondary/replication: filter: sql replication IS NULL -> " \
           "sql replication IS NULL AND priority > 1" in out
    sub = admin["primary"].get_subscription("events", "consumer")
    assert (sub.max_delivery_count, sub.lock_duration) == (3, dt.timedelta(seconds=45))
    rule = admin["primary"].get_rule("events", "to-secondary", "replication")
    assert rule.filter.sql_expression == "replication IS NULL AND priority > 1"
    assert apply(broker, topology, tmp_path, capsys)[1].endswith("no changes\n")


def test_extras_are_kept_unless_asked_and_dry_run_changes_nothing(broker, admin, tmp_path, capsys):
    topology = spillover(["primary", "secondary"], deadline="PT4M")
    apply(broker, topology, tmp_path, capsys)
    admin["primary"].create_queue("legacy")
    code, out = apply(broker, topology, tmp_path, capsys)
    assert code == 0 and "? queue legacy: not in the topology; kept" in out
    assert "legacy" in {q.name for q in admin["primary"].list_queues()}

    code, out = apply(broker, topology, tmp_path, capsys, "--delete-extra", "--dry-run")
    assert "- queue legacy" in out and "dry run: nothing was changed" in out
    assert "legacy" in {q.name for q in admin["primary"].list_queues()}
    apply(broker, topology, tmp_path, capsys, "--delete-extra")
    assert "legacy" not in {q.name for q in admin["primary"].list_queues()}
    assert admin["secondary"].get_queue("work").default_message_time_to_live == dt.timedelta(minutes=2)


def test_an_immutable_difference_stops_the_run_before_anything_changes(broker, admin, tmp_path, capsys):
    topology = active_passive("primary", "secondary")
    apply(broker, topology, tmp_path, capsys)
    consumer = subscription(topology, "consumer")
    consumer.properties.update(requires_session=True, max_delivery_count=4)
    code, out = apply(broker, topology, tmp_path, capsys)
    assert code == 1
    assert "! subscription events/consumer: requires_session: False -> True cannot change" in out
    assert admin["primary"].get_subscription("events", "consumer").max_delivery_count == 10


def test_forwarding_and_durations_compare_as_the_service_answers(broker, admin, tmp_path, capsys):
    topology = parse({"namespaces": {"primary": {"queues": {
        "orders": {"forward_dead_lettered_messages_to": "orders-aux", "lock_duration": "PT30S",
                   "auto_delete_on_idle": "P7D", "max_delivery_count": 4},
        "orders-aux": {},
    }}}})
    code, out = apply(broker, topology, tmp_path, capsys)
    assert code == 0, out
    assert out.index("+ queue orders-aux") < out.index("+ queue orders (")  # the forward target first
    assert apply(broker, topology, tmp_path, capsys)[1].endswith("no changes\n")
    topology.namespaces["primary"].queue("orders").properties["lock_duration"] = "PT1M"
    code, out = apply(broker, topology, tmp_path, capsys)
    assert "~ queue orders: lock_duration: PT30S -> PT1M" in out
    assert admin["primary"].get_queue("orders").lock_duration == dt.timedelta(minutes=1)


@pytest.mark.slow
def test_an_applied_all_active_topology_delivers_every_message_everywhere_once(start_broker, tmp_path):
    """The pattern end to end: the topology applied to three namespaces, the Functions app's tasks run by the
    local host (`sbfed functions run`), messages published in every namespace."""
    names = ("a", "b", "c")
    server = start_broker({"namespaces": {n: {"local": {"amqp_port": 0, "admin_port": 0}} for n in names}})
    clients = {n: ServiceBusAdministrationClient.from_connection_string(
        server.namespaces[n].admin_connection_string, connection_verify=server.cert_path) for n in names}
    topology = all_active(list(names), audit_sink=str(tmp_path / "audit"))
    apply_topology(topology, clients, report=lambda line: None)
    path = tmp_path / "all-active.yaml"
    dump(topology, path)
    strings = {n.upper(): server.namespaces[n].connection_string for n in names}
    host = subprocess.Popen([sys.executable, "-m", "sbfed", "functions", "run", "--topology", str(path)],
                            env={**os.environ, **strings}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        for n in names:
            with ServiceBusClient.from_connection_string(strings[n.upper()]) as client, \
                    client.get_topic_sender("events") as sender:
                sender.send_messages([ServiceBusMessage(b"x", message_id=f"{n}-{i}") for i in range(10)])
        with ThreadPoolExecutor(len(names)) as pool:  # each namespace's consumer at once
            consumed = pool.map(lambda n: receive_all(strings[n.upper()], expected=30), names)
            received = dict(zip(names, consumed, strict=True))
    finally:
        host.terminate()
        host.wait(30)
    everything = sorted(f"{n}-{i}" for n in names for i in range(10))
    assert {n: sorted(ids) for n, ids in received.items()} == {n: everything for n in names}
    for n in names:  # nothing is left to replicate: no copy is on its way back
        for peer in names:
            if peer != n:
                runtime = clients[n].get_subscription_runtime_properties("events", f"to-{peer}")
                assert runtime.active_message_count == 0


def receive_all(connection_string, *, expected, timeout=60.0):
    """Receive from the consumer subscription until `expected` arrived and nothing more comes for 1 s."""
    ids = []
    deadline = time.monotonic() + timeout
    with ServiceBusClient.from_connection_string(connection_string) as client, \
            client.get_subscription_receiver("events", "consumer") as receiver:
        while time.monotonic() < deadline:
            batch = receiver.receive_messages(max_message_count=50, max_wait_time=1)
            for message in batch:
                ids.append(message.message_id)
                receiver.complete_message(message)
            if not batch and len(ids) >= expected:
                break
    return ids


def _apply_to_primary(broker, tmp_path, capsys, connection_string, *extra):
    path = tmp_path / "topology.yaml"
    path.write_text("namespaces:\n  primary:\n    queues:\n      orders: {}\n")
    code = main(["apply", "--topology", str(path), "--namespace", f"primary={connection_string}", *extra])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_a_wrong_key_is_one_line_naming_the_namespace(broker, tmp_path, capsys):
    ns = broker.namespaces["primary"]
    wrong = ns.admin_connection_string.replace("SharedAccessKey=", "SharedAccessKey=wrong")
    code, output = _apply_to_primary(broker, tmp_path, capsys, wrong, "--verify", broker.cert_path)
    assert code == 1
    assert output.strip().splitlines() == [
        f"sbfed topology apply: namespace 'primary' (127.0.0.1:{ns.admin_port}): reading its entities: 401 "
        "Unauthorized: InvalidSignature: the token has an invalid signature; check the connection string's "
        "SharedAccessKeyName and SharedAccessKey"]


def test_an_untrusted_certificate_hints_at_verify(broker, tmp_path, capsys):
    ns = broker.namespaces["secondary"]
    code, output = _apply_to_primary(broker, tmp_path, capsys, ns.admin_connection_string)
    [line] = output.strip().splitlines()
    assert code == 1
    assert line.startswith(f"sbfed topology apply: namespace 'primary' (127.0.0.1:{ns.admin_port}): "
                           "reading its entities: the server's certificate is not trusted (certificate "
                           "verify failed: self-signed certificate): pass the CA or server certificate with "
                           "--verify CERT")
    assert "sbfed broker trust" in line


def test_an_unreachable_namespace_is_named(broker, tmp_path, capsys):
    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        unused_tcp_port = probe.getsockname()[1]
    ns = broker.namespaces["primary"]
    gone = ns.admin_connection_string.replace(f":{ns.admin_port}", f":{unused_tcp_port}")
    code, output = _apply_to_primary(broker, tmp_path, capsys, gone, "--verify", broker.cert_path)
    [line] = output.strip().splitlines()
    assert code == 1
    assert line.startswith(f"sbfed topology apply: namespace 'primary' (127.0.0.1:{unused_tcp_port}): "
                           "reading its entities: could not be reached: ")
    assert "Connection refused" in line
