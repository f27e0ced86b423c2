"""Geo-replication through the broker with the real azure-servicebus SDK: one connection string (emulator
form and AMQPS) serves the current primary; clients keep working across planned and forced promotion."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, TransportType
from azure.servicebus.exceptions import ServiceBusServerBusyError

from local_broker import store_cli
from local_broker.fault_cli import call_control
from local_broker.geo_cli import main as geo_cli
from local_broker.server import BrokerServer


def _topology(mode: str, **extra) -> dict:
    geo = {"regions": ["west", "north"], "primary": "west", "mode": mode, **extra}
    return {"namespaces": {"orders": {"geo_replication": geo, "queues": {
        "q": {"requires_duplicate_detection": True}}}}}


def _control(server: BrokerServer, method: str, route: str, body: dict | None = None) -> dict:
    ns = server.namespaces["orders"]
    status, answer = call_control(f"https://localhost:{ns.admin_port}", ns.policy.name, ns.policy.key,
                                  server.cert_path, method, f"geo{route}", body)
    assert status == 200, answer
    return answer


def _send(sender, ids):
    sender.send_messages([ServiceBusMessage(i, message_id=i) for i in ids])


def _drain(client) -> list[str]:
    with client.get_queue_receiver("q", max_wait_time=2) as receiver:
        got = []
        while batch := receiver.receive_messages(max_message_count=50, max_wait_time=2):
            for m in batch:
                receiver.complete_message(m)
                got.append(str(m.message_id))
        return got


@pytest.mark.parametrize("form", ["connection_string", "amqps_connection_string"])
def test_planned_promotion_keeps_every_message_and_the_same_client(tmp_path, form):
    with BrokerServer(_topology("synchronous"), data_dir=str(tmp_path)) as server:
        ns = server.namespaces["orders"]
        conn = getattr(ns, form)
        verify = {} if form == "connection_string" else {  # the SDK dials 5671 unless told the port
            "connection_verify": server.cert_path, "custom_endpoint_address": f"sb://localhost:{ns.amqps_port}",
            "transport_type": TransportType.Amqp}
        with ServiceBusClient.from_connection_string(conn, **verify) as client, \
                client.get_queue_sender("q") as sender:
            _send(sender, [f"a{i}" for i in range(5)])
            report = _control(server, "POST", "/promote", {"region": "north", "mode": "planned"})
            assert (report["primary"], report["lost_operations"]) == ("north", 0)
            assert (tmp_path / "regions" / "north" / "orders.db").exists()
            _send(sender, [f"b{i}" for i in range(5)])  # the same sender: it reconnects by itself
            _send(sender, ["a0"])  # duplicate detection's history came along: dropped
            assert sorted(_drain(client)) == sorted([f"a{i}" for i in range(5)] + [f"b{i}" for i in range(5)])
        status = _control(server, "GET", "")
        assert [(r["region"], r["role"], r["state"]) for r in status["replicas"]] == [
            ("west", "Secondary", "Ready"), ("north", "Primary", "Ready")]


def test_sbfed_broker_geo(capsys):
    with BrokerServer(_topology("synchronous")) as server:
        ns = server.namespaces["orders"]
        where = ["--admin", f"https://localhost:{ns.admin_port}", "--key", ns.policy.key, "--cert",
                 server.cert_path]
        assert geo_cli([*where, "promote", "north", "--forced"]) == 0
        assert json.loads(capsys.readouterr().out)["primary"] == "north"
        assert geo_cli([*where, "region", "west", "--down", "--latency-ms", "5"]) == 0
        west = json.loads(capsys.readouterr().out)["replicas"][0]
        assert (west["state"], west["latency_ms"]) == ("Unavailable", 5)
        assert geo_cli([*where, "promote", "west"]) == 1
        assert "The region 'west' is unavailable" in capsys.readouterr().err


def test_forced_promotion_after_a_region_outage_loses_only_the_unshipped(tmp_path, capsys):
    topology = _topology("asynchronous", max_lag="PT1M")
    with BrokerServer(topology, data_dir=str(tmp_path)) as server:
        conn = server.namespaces["orders"].connection_string
        with ServiceBusClient.from_connection_string(conn) as client, client.get_queue_sender("q") as sender:
            _send(sender, ["shipped"])
            _control(server, "PUT", "/regions/north", {"latency_ms": 600_000})  # a far region: nothing ships
            _send(sender, ["late-1", "late-2"])
            _control(server, "PUT", "/regions/west", {"available": False})  # the primary's region goes down
            assert server.namespaces["orders"].faults.state.namespace_down == "drop"
            report = _control(server, "POST", "/promote", {"region": "north", "mode": "forced"})
            assert (report["lost_operations"], report["lost_message_ids"]) == (1, ["late-1", "late-2"])
            assert server.namespaces["orders"].faults.state.namespace_down is None
            _send(sender, ["after"])
            assert sorted(_drain(client)) == ["after", "shipped"]
    with BrokerServer(topology, data_dir=str(tmp_path)) as server:  # a restart keeps the promoted primary
        assert _control(server, "GET", "")["primary"] == "north"
    assert store_cli.main("check", ["--data", str(tmp_path)]) == 0  # each region's replica is checked
    checked = capsys.readouterr().out
    assert "regions/north/orders.db: ok" in checked and "regions/west/orders.db: ok" in checked


def test_a_namespace_without_geo_replication_says_so(tmp_path):
    with BrokerServer({"namespaces": {"plain": {}}}) as server:
        ns = server.namespaces["plain"]
        status, answer = call_control(f"https://localhost:{ns.admin_port}", ns.policy.name, ns.policy.key,
                                      server.cert_path, "GET", "geo", None)
        assert status == 404 and "not geo-replicated" in answer["error"]["message"]


def test_the_primary_throttles_with_server_busy_beyond_the_maximum_lag():
    with BrokerServer(_topology("asynchronous", max_lag="PT1S")) as server:
        _control(server, "PUT", "/regions/north", {"latency_ms": 600_000})  # nothing reaches it
        conn = server.namespaces["orders"].connection_string
        with ServiceBusClient.from_connection_string(conn, retry_total=0) as client, \
                client.get_queue_sender("q") as sender:
            _send(sender, ["first"])
            time.sleep(1.2)
            with pytest.raises(ServiceBusServerBusyError):
                _send(sender, ["throttled"])
            north = _control(server, "GET", "")["replicas"][1]
            assert north["lag_seconds"] > 1 and north["pending_operations"] >= 1
            _control(server, "PUT", "/regions/north", {"latency_ms": 0})  # it catches up: served again
            deadline = time.monotonic() + 10
            while _control(server, "GET", "")["replicas"][1]["pending_operations"]:
                assert time.monotonic() < deadline, "the secondary did not catch up"
                time.sleep(0.05)
            _send(sender, ["after"])


def _geo_metrics(server: BrokerServer) -> dict[tuple[str, str], dict[str, str] | float]:
    """(series, region) -> value (the info series: its labels), as Prometheus' parser reads /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    port = server.namespaces["orders"].admin_port
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {(sample.name, sample.labels.get("region", "")):
            sample.labels if sample.name == "servicebus_geo_replica_info" else sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples
            if sample.name.startswith("servicebus_geo_") and sample.labels["namespace"] == "orders"}


def test_metrics_show_each_replicas_role_state_and_a_secondarys_lag():
    with BrokerServer(_topology("asynchronous", max_lag="PT1M")) as server:
        conn = server.namespaces["orders"].connection_string
        caught_up = _geo_metrics(server)
        assert caught_up[("servicebus_geo_replica_info", "west")] == {
            "namespace": "orders", "region": "west", "role": "Primary", "state": "Ready"}
        assert caught_up[("servicebus_geo_replica_info", "north")]["role"] == "Secondary"
        assert caught_up[("servicebus_geo_replication_lag_seconds", "north")] == 0
        assert caught_up[("servicebus_geo_replication_pending_operations", "north")] == 0
        assert caught_up[("servicebus_geo_max_replication_lag_seconds", "")] == 60
        assert ("servicebus_geo_replication_lag_seconds", "west") not in caught_up  # the primary has no lag
        _control(server, "PUT", "/regions/north", {"latency_ms": 600_000})  # a far region: nothing ships
        with ServiceBusClient.from_connection_string(conn) as client, client.get_queue_sender("q") as sender:
            _send(sender, ["a", "b"])
            time.sleep(0.2)
            behind = _geo_metrics(server)
            assert behind[("servicebus_geo_replication_lag_seconds", "north")] >= 0.2
            assert behind[("servicebus_geo_replication_pending_operations", "north")] >= 1
            _control(server, "PUT", "/regions/north", {"available": False, "latency_ms": 0})
            assert _geo_metrics(server)[("servicebus_geo_replica_info", "north")]["state"] == "Unavailable"
            _control(server, "PUT", "/regions/north", {"available": True})
            deadline = time.monotonic() + 10
            while _geo_metrics(server)[("servicebus_geo_replication_pending_operations", "north")]:
                assert time.monotonic() < deadline, "the secondary did not catch up"
                time.sleep(0.05)
            _control(server, "POST", "/promote", {"region": "north", "mode": "planned"})
        promoted = _geo_metrics(server)
        assert {region: promoted[("servicebus_geo_replica_info", region)]["role"]
                for region in ("west", "north")} == {"west": "Secondary", "north": "Primary"}
        assert promoted[("servicebus_geo_replication_lag_seconds", "west")] == 0
        assert ("servicebus_geo_replication_lag_seconds", "north") not in promoted


def test_a_namespace_without_geo_replication_has_no_geo_series():
    with BrokerServer({"namespaces": {"orders": {}}}) as server:
        assert _geo_metrics(server) == {}
