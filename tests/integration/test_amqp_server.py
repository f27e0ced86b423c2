"""`sbfed broker serve` as a process: several namespaces from one topology (or an emulator Config.json), each
with its AMQP and HTTPS ports, durable across a restart, fault injection, clean exit on SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from azure.core.exceptions import ServiceRequestError
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import ServiceBusConnectionError
from azure.servicebus.management import ServiceBusAdministrationClient

from local_broker.server import BrokerServer
from tests.round_trip import round_trip
from topology import parse

ROOT = Path(__file__).resolve().parents[2]
TOPOLOGY = """
namespaces:
  primary:
    queues:
      orders: {max_delivery_count: 3}
  secondary:
    topics:
      events:
        subscriptions:
          all: {}
"""
QUEUE_PROPERTIES = {"DeadLetteringOnMessageExpiration": False, "DefaultMessageTimeToLive": "PT1H",
                    "DuplicateDetectionHistoryTimeWindow": "PT20S", "ForwardTo": "", "LockDuration": "PT1M",
                    "MaxDeliveryCount": 3, "RequiresSession": False}
CONFIG_JSON = {"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": [
    {"Name": "queue.1", "Properties": QUEUE_PROPERTIES}], "Topics": []}], "Logging": {"Type": "File"}}}


def _serve(topology: Path, *extra: str) -> tuple[subprocess.Popen, list[dict]]:
    ready = topology.parent / "ready.json"
    ready.unlink(missing_ok=True)
    command = [sys.executable, "-m", "sbfed.cli", "broker", "serve", "--topology", str(topology),
               "--ready-file", str(ready), "--amqp-port", "0", "--admin-port", "0", *extra]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    while not ready.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline
        time.sleep(0.1)
    return proc, json.loads(ready.read_text())


def _stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return err


def test_serve_hosts_namespaces_keeps_data_and_exits_cleanly(tmp_path: Path) -> None:
    topology = tmp_path / "topology.yaml"
    topology.write_text(TOPOLOGY)
    data = tmp_path / "data"
    proc, namespaces = _serve(topology, "--data", str(data))
    by_name = {n["namespace"]: n for n in namespaces}
    assert set(by_name) == {"primary", "secondary"}
    kinds = ("amqp_port", "admin_port", "amqps_port", "websocket_port")
    assert len({n[kind] for n in namespaces for kind in kinds}) == 8  # any free ones, the TLS ports too
    primary = by_name["primary"]
    assert primary["amqps_connection_string"] == primary["admin_connection_string"].replace(
        f"sb://127.0.0.1:{primary['admin_port']}", f"sb://localhost:{primary['amqps_port']}/")
    round_trip(primary["connection_string"], "orders", "first", wait=5)
    with ServiceBusClient.from_connection_string(primary["connection_string"]) as client, \
            client.get_queue_sender("orders") as sender:
        sender.send_messages(ServiceBusMessage("kept across restart"))
    admin = ServiceBusAdministrationClient.from_connection_string(primary["admin_connection_string"],
                                                                  connection_verify=primary["cert_path"])
    assert admin.get_queue("orders").max_delivery_count == 3
    with urllib.request.urlopen(f"http://127.0.0.1:{primary['admin_port']}/health", timeout=5) as health:
        assert json.load(health)["status"] == "ok"
    logs = _stop(proc)
    assert "connection-open" in logs and "connection-close" in logs
    assert "sasl=ANONYMOUS" in logs  # the mechanism the Python SDK chose, as logged

    proc, namespaces = _serve(topology, "--data", str(data))
    primary = {n["namespace"]: n for n in namespaces}["primary"]
    try:
        with ServiceBusClient.from_connection_string(primary["connection_string"]) as client, \
                client.get_queue_receiver("orders", max_wait_time=5) as receiver:
            got = receiver.receive_messages(max_message_count=5, max_wait_time=5)
            assert [str(m) for m in got] == ["kept across restart"]
            receiver.complete_message(got[0])
    finally:
        _stop(proc)


def test_serve_accepts_the_emulator_config_json(tmp_path: Path) -> None:
    config = tmp_path / "Config.json"
    config.write_text(json.dumps(CONFIG_JSON))
    proc, namespaces = _serve(config, "--in-memory")
    try:
        [namespace] = namespaces
        assert namespace["namespace"] == "sbemulatorns"
        assert "SharedAccessKey=SAS_KEY_VALUE;" in namespace["connection_string"]
        round_trip(namespace["connection_string"], "queue.1", "from Config.json", wait=5)
    finally:
        _stop(proc)


def test_namespace_down_refuses_and_drops_connections() -> None:
    server = BrokerServer(parse({"namespaces": {"drill": {"queues": {"q": {}}}}}))
    server.start()
    try:
        hosted = server.namespaces["drill"]
        round_trip(hosted.connection_string, "q", "before", wait=5)
        with ServiceBusClient.from_connection_string(hosted.connection_string, retry_total=0) as client, \
                client.get_queue_sender("q") as sender:
            hosted.faults.set({"namespace_down": "drop"})
            with pytest.raises(ServiceBusConnectionError):
                sender.send_messages(ServiceBusMessage("during"))
        with pytest.raises((ServiceBusConnectionError, ServiceRequestError)):
            round_trip(hosted.connection_string, "q", "refused", wait=5)
        hosted.faults.set({"namespace_down": None})
        round_trip(hosted.connection_string, "q", "after", wait=5)
    finally:
        server.stop()


def test_namespace_down_drop_ends_the_receivers_of_a_client_that_has_not_read_the_close() -> None:
    """A client busy elsewhere reads the broker's close late: until then its dropped receiver must get
    nothing (the messages would stay locked to a link that can never take them), so what is sent once the
    namespace is back goes to a receiver that is attached."""
    server = BrokerServer(parse({"namespaces": {"drill": {"queues": {"q": {}}}}}))
    server.start()
    try:
        hosted = server.namespaces["drill"]
        with ServiceBusClient.from_connection_string(hosted.connection_string, retry_total=0) as busy:
            stale = busy.get_queue_receiver("q", prefetch_count=10)
            # attached with credit, then never read again; the SDK's link-open deadline is the receive's wait,
            # and opening reads one frame per 50 ms poll (~0.5 s for a new connection's nine frames)
            assert stale.receive_messages(max_message_count=1, max_wait_time=3) == []
            hosted.faults.set({"namespace_down": "drop"})
            hosted.faults.set({"namespace_down": None})
            round_trip(hosted.connection_string, "q", "after", wait=5)
    finally:
        server.stop()
