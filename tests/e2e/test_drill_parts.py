"""The drill's own plumbing against a real broker: its control client (own SAS token, TLS verified against
the broker's certificate), the broker descriptions it reads and `sbfed topology apply` as it runs it; fast,
so not marked slow."""

from __future__ import annotations

import json

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import ServiceBusError

from patterns.drill_cli import main as drill_main
from patterns.drills.broker import BrokerError, BrokerNamespace, ControlClient, read_ready_file
from patterns.drills.processes import ProcessStartError
from patterns.drills.run import apply_pattern

TOPOLOGY = {"namespaces": {"primary": {"local": {"amqp_port": 0, "admin_port": 0}, "queues": {"orders": {}}}}}


@pytest.fixture
def namespace(start_broker):
    server = start_broker(TOPOLOGY)
    return BrokerNamespace.of(server.namespaces["primary"].describe())


def send_one(namespace):
    with ServiceBusClient.from_connection_string(namespace.connection_string, retry_total=0) as client, \
            client.get_queue_sender("orders") as sender:
        sender.send_messages(ServiceBusMessage(b"x"))


def test_the_control_client_takes_the_namespace_down_and_brings_it_back(namespace):
    control = namespace.control()
    assert namespace.admin_url.startswith("https://127.0.0.1:")
    send_one(namespace)
    assert control.set_down("drop")["namespace_down"] == "drop"
    with pytest.raises(ServiceBusError):
        send_one(namespace)
    assert control.faults()["namespace_down"] == "drop"
    assert control.set_down(None)["namespace_down"] is None
    send_one(namespace)  # reachable again


def test_the_control_client_reports_what_the_broker_refused(namespace):
    wrong_key = ControlClient(namespace.admin_url, "RootManageSharedAccessKey", "bm90IHRoZSBrZXk=",
                              namespace.cert_path)
    with pytest.raises(BrokerError, match="401"):
        wrong_key.set_down("drop")
    with pytest.raises(BrokerError, match="400"):
        namespace.control().call("PUT", "faults", {"namespace_down": "sideways"})


def routed(sql):
    """A topology file's text: primary's topic `events` with a subscription whose one rule is `sql`."""
    rule = {"route": {"filter": {"sql": sql}}}
    return json.dumps({"namespaces": {"primary": {"topics": {"events": {"subscriptions": {
        "unrouted": {"rules": rule}}}}}}})


def test_the_drill_applies_with_the_sbfed_command_and_says_where_a_refusal_is(namespace, tmp_path):
    (tmp_path / "topology.yaml").write_text(routed("region IS NULL"))
    apply_pattern(tmp_path / "topology.yaml", {"primary": namespace}, tmp_path / "apply.log")
    assert [r.name for r in namespace.admin_client().list_rules("events", "unrouted")] == ["route"]
    assert "+ rule events/unrouted/route" in (tmp_path / "apply.log").read_text()
    (tmp_path / "topology.yaml").write_text(routed("region = "))
    with pytest.raises(ProcessStartError, match=r"sbfed topology apply exited with 2; see .*apply\.log"):
        apply_pattern(tmp_path / "topology.yaml", {"primary": namespace}, tmp_path / "apply.log")
    assert "primary/events/unrouted/route: filter.sql" in (tmp_path / "apply.log").read_text()


def test_ready_files_and_print_json_lines_describe_the_same_namespaces(namespace, tmp_path):
    entry = {"namespace": namespace.name, "amqp_port": 1, "admin_port": 2,
             "connection_string": namespace.connection_string,
             "admin_connection_string": namespace.admin_connection_string, "cert_path": namespace.cert_path}
    (tmp_path / "ready.json").write_text(json.dumps([entry]))
    (tmp_path / "lines.json").write_text(json.dumps(entry) + "\n")
    assert read_ready_file(tmp_path / "ready.json") == read_ready_file(tmp_path / "lines.json") == {
        "primary": namespace}
    (tmp_path / "bad.json").write_text('[{"namespace": "primary"}]')
    with pytest.raises(BrokerError, match="lacks 'connection_string'"):
        read_ready_file(tmp_path / "bad.json")


@pytest.mark.parametrize("argv, message", [
    (["sideways"], "invalid choice"),
    (["all-active", "--namespaces", "a"], "two distinct names"),
    (["routing", "--namespaces", "a,b"], "three distinct names for routing (source,eu-target,us-target)"),
    (["latency", "--namespaces", "us,us"], "2 or more distinct names for latency"),
    (["all-active", "--messages", "0"], "--messages must be at least 1"),
    (["all-active", "--mode", "unplug"], "invalid choice"),
    (["active-passive", "--ttl", "10s"], "--ttl: '10s' is not an ISO 8601 duration"),
])
def test_bad_drill_arguments_are_refused_before_anything_starts(argv, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        drill_main([*argv, "--out", str(tmp_path / "out")] if argv[0] != "sideways" else argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
