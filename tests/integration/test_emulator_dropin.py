"""`sbfed broker serve` as a drop-in for the official Service Bus emulator: its defaults, its connection
string unchanged with the real SDK, its Config.json in any order, ports and keys kept across restarts, and
one-line errors (a taken port exits 1, an invalid topology exits 2, never a traceback).

Only `test_the_documented_connection_string_works_unchanged` (and its JavaScript twin in tests/compat) binds
the default ports (the emulator's 5672, 5300; AMQPS's 5671, WebSockets' 5443), and only when they are free;
the others reach the same defaults through `--amqp-port`/`--admin-port`.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, TransportType
from azure.servicebus.management import ServiceBusAdministrationClient

from local_broker.auth import generate_sas_token
from tests.broker_process import ServeProcess, emulator_ports_free
from tests.round_trip import round_trip, round_trip_on

AZURE_FORM = "Endpoint=sb://localhost/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE"
EMULATOR_CONNECTION_STRING = ("Endpoint=sb://localhost;SharedAccessKeyName=RootManageSharedAccessKey;"
                              "SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;")
CONFIG_JSON = {"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": [
    {"Name": "fwd-0", "Properties": {"ForwardTo": "fwd-1", "LockDuration": "PT1M", "MaxDeliveryCount": 3}},
    {"Name": "fwd-1", "Properties": {"ForwardTo": "", "ForwardDeadLetteredMessagesTo": "",
                                     "DeadLetteringOnMessageExpiration": False}}],
    "Topics": []}], "Logging": {"Type": "File"}}}


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _plain_http(port: int, path: str, token: str | None) -> tuple[int, bytes]:
    request = urllib.request.Request(f"http://localhost:{port}{path}",
                                     headers={"Authorization": token} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read()


def test_no_arguments_is_the_emulator_durable_in_the_default_directory(tmp_path: Path) -> None:
    amqp, admin, amqps, websocket = _free_ports(4)
    broker = ServeProcess(tmp_path, "--amqp-port", str(amqp), "--admin-port", str(admin), "--amqps-port",
                          str(amqps), "--websocket-port", str(websocket))
    namespace = broker.wait_ready()
    try:
        assert (namespace["namespace"], namespace["amqp_port"], namespace["admin_port"]) == \
            ("sbemulatorns", amqp, admin)
        assert namespace["emulator_connection_string"] == EMULATOR_CONNECTION_STRING.replace(
            "sb://localhost;", f"sb://localhost:{amqp};")
        admin_client = ServiceBusAdministrationClient.from_connection_string(
            namespace["emulator_admin_connection_string"], connection_verify=namespace["cert_path"])
        admin_client.create_queue("orders")  # the admin client, emulator mode, HTTPS on the admin port
        round_trip(namespace["emulator_connection_string"], "orders", "before restart")
        with ServiceBusClient.from_connection_string(namespace["emulator_connection_string"]) as client, \
                client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("kept"))
        # The same port answers plain HTTP (as SDKs' emulator mode uses it), with the same SAS checks.
        token = generate_sas_token(f"http://localhost:{admin}/orders", "RootManageSharedAccessKey",
                                   "SAS_KEY_VALUE", int(time.time()) + 300)
        status, body = _plain_http(admin, "/orders?api-version=2021-05", token)
        assert status == 200 and b"<QueueDescription" in body
        assert _plain_http(admin, "/orders?api-version=2021-05", None)[0] == 401
        assert _plain_http(admin, "/health", None)[0] == 200
    finally:
        printed = broker.stop()
    data_dir = tmp_path / "data-home" / "sbfed" / "broker"
    assert f"data: {data_dir}" in printed and EMULATOR_CONNECTION_STRING.replace(
        "sb://localhost;", f"sb://localhost:{amqp};") in printed
    assert (data_dir / "sbemulatorns.db").exists()

    restarted = ServeProcess(tmp_path)  # no port options: the ones the data directory remembers
    again = restarted.wait_ready()
    try:
        assert (again["amqp_port"], again["admin_port"]) == (amqp, admin)
        assert (again["amqps_port"], again["websocket_port"]) == (amqps, websocket)
        assert again["emulator_connection_string"] == namespace["emulator_connection_string"]
        with ServiceBusClient.from_connection_string(again["emulator_connection_string"]) as client, \
                client.get_queue_receiver("orders", max_wait_time=10) as receiver:
            assert [str(m) for m in receiver.receive_messages(max_wait_time=10)] == ["kept"]
    finally:
        restarted.stop()


def test_a_topology_pins_ports_and_keys_and_they_survive_a_restart(tmp_path: Path) -> None:
    amqp, admin, amqps, websocket = _free_ports(4)
    topology = tmp_path / "topology.yaml"
    topology.write_text(f"namespaces:\n  primary:\n    local: {{amqp_port: {amqp}, admin_port: {admin}, "
                        f"amqps_port: {amqps}, websocket_port: {websocket}}}\n"
                        "    policies:\n      app: {key: c2VjcmV0LWtleQ==, rights: [Manage, Send, Listen]}\n"
                        "    queues:\n      orders: {}\n")
    data = tmp_path / "data"
    for _ in range(2):
        broker = ServeProcess(tmp_path, "--topology", str(topology), "--data", str(data))
        namespace = broker.wait_ready()
        try:
            assert [namespace[kind] for kind in ("amqp_port", "admin_port", "amqps_port", "websocket_port")] \
                == [amqp, admin, amqps, websocket]
            assert "SharedAccessKeyName=app;SharedAccessKey=c2VjcmV0LWtleQ==;" in \
                namespace["emulator_connection_string"]
            round_trip(namespace["emulator_connection_string"], "orders", "pinned")
        finally:
            broker.stop()


def test_the_emulator_config_json_loads_with_forward_references(tmp_path: Path) -> None:
    config = tmp_path / "Config.json"
    config.write_text(json.dumps(CONFIG_JSON))
    broker = ServeProcess(tmp_path, "--topology", str(config), "--in-memory", "--amqp-port", "0",
                    "--admin-port", "0")
    namespace = broker.wait_ready()
    try:
        assert "SharedAccessKey=SAS_KEY_VALUE;" in namespace["emulator_connection_string"]
        round_trip(namespace["emulator_connection_string"], "fwd-0", "forwarded", receive_from="fwd-1")
    finally:
        broker.stop()


@pytest.mark.parametrize(("kind", "what"), [
    ("amqp", "AMQP port"), ("admin", "admin port"), ("amqps", "AMQPS port"),
    ("websocket", "AMQP over WebSockets port")])
def test_a_taken_port_is_one_line_naming_it_and_the_option(tmp_path: Path, kind: str, what: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        ports = {"amqp": "0", "admin": "0", "amqps": "0", "websocket": "0", kind: str(port)}
        code, err = ServeProcess(tmp_path, "--in-memory", *(
            argument for name, value in ports.items() for argument in (f"--{name}-port", value))).exit()
    assert code == 1
    assert err.splitlines() == [f"sbfed broker serve: port {port} (the {what} of namespace sbemulatorns) "
                                f"is already in use; choose another with --{kind}-port"]


def test_every_taken_port_is_reported_at_once_and_nothing_is_written(tmp_path: Path) -> None:
    """Four taken ports are four lines of one run (not four runs), and the failed start leaves no data
    directory, certificate or store behind."""
    kinds = {"amqp": "AMQP port", "admin": "admin port", "amqps": "AMQPS port",
             "websocket": "AMQP over WebSockets port"}
    held = [socket.socket() for _ in kinds]
    try:
        for sock in held:
            sock.bind(("127.0.0.1", 0))
            sock.listen(1)
        ports = {kind: sock.getsockname()[1] for kind, sock in zip(kinds, held, strict=True)}
        data = tmp_path / "new" / "data"
        code, err = ServeProcess(tmp_path, "--data", str(data), *(
            argument for kind, port in ports.items() for argument in (f"--{kind}-port", str(port)))).exit()
    finally:
        for sock in held:
            sock.close()
    assert code == 1
    assert err.splitlines() == [f"sbfed broker serve: port {ports[kind]} (the {what} of namespace "
                                f"sbemulatorns) is already in use; choose another with --{kind}-port"
                                for kind, what in kinds.items()]
    assert not (tmp_path / "new").exists()


def test_two_brokers_from_files_that_fix_only_amqp_and_admin_ports_run_side_by_side(tmp_path: Path) -> None:
    """Such files used to both take Service Bus's 5671 and 5443; their TLS ports are now free ones."""
    brokers = []
    for index, (amqp, admin) in enumerate(zip(*[iter(_free_ports(4))] * 2, strict=True)):
        topology = tmp_path / f"topology-{index}.yaml"
        topology.write_text(f"namespaces:\n  ns{index}:\n    local: {{amqp_port: {amqp}, "
                            f"admin_port: {admin}}}\n    queues:\n      q: {{}}\n")
        brokers.append(ServeProcess(tmp_path, "--topology", str(topology), "--in-memory"))
    try:
        namespaces = [broker.wait_ready() for broker in brokers]  # started together, both ready
        tls_ports = {namespace[kind] for namespace in namespaces for kind in ("amqps_port", "websocket_port")}
        assert len(tls_ports) == 4 and not tls_ports & {5671, 5443}
        def serves(namespace: dict) -> None:
            round_trip(namespace["emulator_connection_string"], "q", namespace["namespace"])
            with ServiceBusClient.from_connection_string(
                    namespace["amqps_connection_string"], connection_verify=namespace["cert_path"],
                    custom_endpoint_address=f"sb://localhost:{namespace['amqps_port']}",
                    transport_type=TransportType.Amqp, retry_total=0) as client:
                round_trip_on(client, "q", f"{namespace['namespace']} over AMQPS")

        with ThreadPoolExecutor(len(namespaces)) as pool:  # both brokers serve at once
            list(pool.map(serves, namespaces))
    finally:
        for broker in brokers:
            broker.stop()


def test_an_invalid_topology_prints_every_problem_and_exits_2(tmp_path: Path) -> None:
    config = tmp_path / "Config.json"
    broken = json.loads(json.dumps(CONFIG_JSON))
    queues = broken["UserConfig"]["Namespaces"][0]["Queues"]
    queues[0]["Properties"]["LockDuration"] = "PT10H"
    queues[1]["Properties"]["ForwardTo"] = "fwd-0"
    queues[1]["Properties"]["MaxDeliveryCont"] = 3
    config.write_text(json.dumps(broken))
    code, err = ServeProcess(tmp_path, "--topology", str(config), "--in-memory").exit()
    assert code == 2
    assert err.splitlines() == [
        f"{config}: sbemulatorns/fwd-0: LockDuration: PT10H is out of range, allowed PT5S to PT5M",
        f"{config}: sbemulatorns/fwd-1: MaxDeliveryCont: unknown property, did you mean MaxDeliveryCount?",
        f"{config}: sbemulatorns/fwd-0: ForwardTo: fwd-0 -> fwd-1 -> fwd-0 is a forwarding cycle, allowed: "
        "chains that end at an entity that does not forward",
    ]


def test_the_documented_connection_string_works_unchanged(tmp_path: Path) -> None:
    """The emulator's own ports: run only when nothing else holds them (never in parallel with itself)."""
    if not emulator_ports_free():
        pytest.skip("5672, 5300, 5671 or 5443 is taken on this machine; the defaults are covered through "
                    "--amqp-port")
    broker = ServeProcess(tmp_path, "--in-memory")
    namespace = broker.wait_ready()
    try:
        assert (namespace["amqp_port"], namespace["admin_port"]) == (5672, 5300)
        assert namespace["emulator_connection_string"] == EMULATOR_CONNECTION_STRING
        ServiceBusAdministrationClient.from_connection_string(
            EMULATOR_CONNECTION_STRING.replace("localhost;", "localhost:5300;"),
            connection_verify=namespace["cert_path"]).create_queue("queue.1")
        round_trip(EMULATOR_CONNECTION_STRING, "queue.1", "unchanged")
        # As Service Bus: AMQPS on 5671, the Azure-form string as it is, both of the SDK's stacks.
        assert (namespace["amqps_port"], namespace["websocket_port"]) == (5671, 5443)
        assert namespace["amqps_connection_string"] == AZURE_FORM
        for uamqp in (False, True):
            with ServiceBusClient.from_connection_string(AZURE_FORM, connection_verify=namespace["cert_path"],
                                                         uamqp_transport=uamqp, retry_total=0) as client:
                round_trip_on(client, "queue.1", f"Azure's form, uamqp={uamqp}")
    finally:
        broker.stop()
