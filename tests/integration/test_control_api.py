"""Fault injection through the control routes of the management port, and `sbfed broker fault`."""

from __future__ import annotations

import json

import pytest
import test_admin_api as admin_api
from azure.core.exceptions import HttpResponseError

from local_broker.engine import EntityDisabledError, Message, Namespace, QueueProperties
from local_broker.fault_cli import main as fault_cli

# The engine + HTTPS management port fixtures are the admin tests' own.
certificate = admin_api.certificate
endpoint = admin_api.endpoint
ROOT, SENDER = admin_api.ROOT, admin_api.SENDER

PARTITION_SEAM = pytest.mark.xfail(
    not hasattr(Namespace, "set_partition_available"), strict=True,
    reason="the engine's partition fault seam (set_partition_available, engine-api.md 9) is not there yet")


def control(endpoint, method, route, body=None, policy=ROOT):
    data = None if body is None else json.dumps(body).encode()
    status, payload = endpoint.raw(method, f"/$control/{route}", data, token=endpoint.token(policy))
    return status, json.loads(payload)


def test_fault_state_reads_back_and_notifies(endpoint):
    changes = []
    endpoint.faults.on_change(lambda old, new: changes.append((old.namespace_down, new.namespace_down)))
    assert control(endpoint, "GET", "faults") == (200, {
        "namespace": "primary", "namespace_down": None, "latency_ms": 0, "partitions_down": []})
    status, state = control(endpoint, "PUT", "faults", {"namespace_down": "drop", "latency_ms": 20})
    assert status == 200 and (state["namespace_down"], state["latency_ms"]) == ("drop", 20)
    assert endpoint.faults.state.drops_connections and endpoint.faults.state.latency_seconds == 0.02
    status, state = control(endpoint, "PUT", "faults", {"namespace_down": "refuse"})
    assert state["namespace_down"] == "refuse" and state["latency_ms"] == 20  # untouched keys stay
    control(endpoint, "PUT", "faults", {"namespace_down": None, "latency_ms": 0})
    assert changes == [(None, "drop"), ("drop", "refuse"), ("refuse", None)]


def test_a_down_namespace_refuses_management_but_not_control(endpoint):
    admin = endpoint.client()
    admin.create_queue("q1")
    control(endpoint, "PUT", "faults", {"namespace_down": "refuse"})
    with pytest.raises(HttpResponseError) as caught:
        admin.get_queue("q1")
    assert caught.value.status_code == 503 and "unavailable" in caught.value.message
    status, body = endpoint.raw("GET", "/health")
    assert status == 200 and json.loads(body)["namespace_down"] == "refuse"
    control(endpoint, "PUT", "faults", {"namespace_down": None})
    assert admin.get_queue("q1").name == "q1"


@pytest.mark.parametrize("body", [{"namespace_down": "sideways"}, {"latency_ms": -1}, {"latency_ms": "slow"},
                                  {"region": "west"}, ["not", "an", "object"]])
def test_bad_fault_settings_are_400(endpoint, body):
    status, answer = control(endpoint, "PUT", "faults", body)
    assert status == 400 and answer["error"]["code"] == 400 and answer["error"]["message"]
    assert endpoint.faults.state.namespace_down is None


def test_entity_status_through_the_engine(endpoint):
    admin = endpoint.client()
    admin.create_queue("orders")
    admin.create_topic("events")
    admin.create_subscription("events", "audit")
    assert control(endpoint, "PUT", "status/orders", {"status": "Disabled"}) == (
        200, {"entity": "orders", "status": "Disabled"})
    assert admin.get_queue("orders").status == "Disabled"
    with pytest.raises(EntityDisabledError):
        endpoint.engine(lambda ns: ns.send("orders", [Message(body=b"x")]))
    assert control(endpoint, "GET", "status/ORDERS")[1]["status"] == "Disabled"
    control(endpoint, "PUT", "status/orders", {"status": "Active"})
    endpoint.engine(lambda ns: ns.send("orders", [Message(body=b"x")]))

    status, _ = control(endpoint, "PUT", "status/events/subscriptions/audit", {"status": "ReceiveDisabled"})
    assert status == 200 and admin.get_subscription("events", "audit").status == "ReceiveDisabled"
    status, answer = control(endpoint, "PUT", "status/events", {"status": "SendDisabled"})
    assert answer["status"] == "SendDisabled" == admin.get_topic("events").status


def test_status_errors(endpoint):
    endpoint.client().create_queue("orders")
    status, answer = control(endpoint, "PUT", "status/orders", {"status": "Sleeping"})
    assert status == 400 and "Sleeping" in answer["error"]["message"]
    assert control(endpoint, "GET", "status/missing")[0] == 404
    assert control(endpoint, "PUT", "nothing/here", {})[0] == 404


def test_control_needs_a_manage_token(endpoint):
    assert endpoint.raw("GET", "/$control/faults")[0] == 401
    status, answer = control(endpoint, "PUT", "faults", {"namespace_down": "drop"}, policy=SENDER)
    assert status == 401 and "Manage" in answer["error"]["message"]
    assert endpoint.faults.state.namespace_down is None


@PARTITION_SEAM
def test_partition_down_and_up(endpoint):
    endpoint.engine(lambda ns: ns.create_queue(QueueProperties(name="partitioned", enable_partitioning=True)))
    status, state = control(endpoint, "PUT", "partitions/partitioned/3", {"available": False})
    assert status == 200 and state["partitions_down"] == [{"entity": "partitioned", "partition_id": 3}]
    assert endpoint.client().get_queue("partitioned").availability_status == "Limited"
    status, state = control(endpoint, "PUT", "partitions/partitioned/3", {"available": True})
    assert status == 200 and state["partitions_down"] == []
    assert endpoint.client().get_queue("partitioned").availability_status == "Available"


def test_partition_route_checks_its_input(endpoint):
    assert control(endpoint, "PUT", "partitions/q/x", {"available": False})[0] == 400
    assert control(endpoint, "PUT", "partitions/q/1", {"available": "no"})[0] == 400


# --- the CLI ------------------------------------------------------------------------------------------

def cli(endpoint, *action, cert=True, key=ROOT.key):
    argv = ["--admin", f"https://{endpoint.address}", "--key-name", ROOT.name, "--key", key]
    return fault_cli([*argv, *(["--cert", endpoint.cert_path] if cert else []), *action])


def test_cli_drives_every_fault(endpoint, capsys):
    endpoint.client().create_queue("orders")
    assert cli(endpoint, "down", "--mode", "refuse") == 0
    assert json.loads(capsys.readouterr().out)["namespace_down"] == "refuse"
    assert cli(endpoint, "down") == 0 and endpoint.faults.state.namespace_down == "drop"
    assert cli(endpoint, "latency", "150") == 0 and endpoint.faults.state.latency_ms == 150
    assert cli(endpoint, "up") == 0 and endpoint.faults.state.namespace_down is None
    assert cli(endpoint, "latency", "0") == 0
    capsys.readouterr()
    assert cli(endpoint, "status", "orders", "SendDisabled") == 0
    assert json.loads(capsys.readouterr().out) == {"entity": "orders", "status": "SendDisabled"}
    assert cli(endpoint, "status", "orders") == 0
    assert json.loads(capsys.readouterr().out)["status"] == "SendDisabled"
    assert cli(endpoint, "show") == 0
    assert json.loads(capsys.readouterr().out) == {"namespace": "primary", "namespace_down": None,
                                                   "latency_ms": 0, "partitions_down": []}


def test_cli_reports_errors(endpoint, capsys):
    assert cli(endpoint, "status", "missing") == 1
    assert "404" in capsys.readouterr().err
    assert cli(endpoint, "show", key="wrong") == 1
    assert "401" in capsys.readouterr().err
    assert cli(endpoint, "show", cert=False) == 1
    assert "--cert" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli(endpoint, "latency", "soon")
