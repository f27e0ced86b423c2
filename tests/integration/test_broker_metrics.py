"""`GET /metrics` on a namespace's management port: what the SDK did, counted exactly, read as Prometheus
reads it; free from loopback, a Listen or Manage token from anywhere else."""

from __future__ import annotations

import http.client
import json
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import ServiceBusError

from local_broker.auth import generate_sas_token
from local_broker.server import BrokerServer
from topology import parse

TOPOLOGY = {"namespaces": {"metrics": {
    "policies": {"RootManageSharedAccessKey": {"key": "U0FTX0tFWV9WQUxVRQ==", "rights": ["Manage", "Send",
                                                                                         "Listen"]},
                 "sender": {"key": "c2VuZC1vbmx5LWtleQ==", "rights": ["Send"]},
                 "reader": {"key": "bGlzdGVuLW9ubHkta2V5", "rights": ["Listen"]}},
    "queues": {"orders": {"max_delivery_count": 10}},
    "topics": {"events": {"subscriptions": {"all": {}}}},
}}}


def _scrape(port: int) -> dict[tuple[str, str], float]:
    """(series name, entity) -> value, as Prometheus' own parser reads the page."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode()
    return {(sample.name, sample.labels.get("entity", "")): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples
            if sample.labels["namespace"] == "metrics" and "protocol" not in sample.labels}


def _scrape_rest(port: int) -> dict[tuple[str, str, str], float]:
    """The REST door's series: (series name, operation, status) -> value."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {(sample.name, sample.labels["operation"], sample.labels.get("status", "")): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples
            if sample.labels.get("protocol") == "rest" and "le" not in sample.labels}


def test_the_sdks_work_counted_exactly() -> None:
    with BrokerServer(parse(TOPOLOGY)) as server:
        ns = server.namespaces["metrics"]
        before = _scrape(ns.admin_port)
        assert before[("servicebus_incoming_messages_total", "orders")] == 0
        with ServiceBusClient.from_connection_string(ns.connection_string) as client:
            with client.get_queue_sender("orders") as sender:
                sender.send_messages([ServiceBusMessage(f"m-{i}") for i in range(7)])
            with client.get_topic_sender("events") as sender:
                sender.send_messages([ServiceBusMessage("e") for _ in range(3)])
            with client.get_queue_receiver("orders", max_wait_time=5, prefetch_count=0) as receiver:
                got = []
                while len(got) < 4:
                    got += receiver.receive_messages(max_message_count=4 - len(got), max_wait_time=5)
                for message in got[:2]:
                    receiver.complete_message(message)
                receiver.abandon_message(got[2])
                receiver.dead_letter_message(got[3], reason="Bad")
                assert _scrape(ns.admin_port)[("servicebus_active_connections", "")] >= 1  # the receiver's
        # a client that does not retry: the SDK retries this refusal for 15 s to the same end
        with ServiceBusClient.from_connection_string(ns.connection_string, retry_total=0) as client, \
                pytest.raises(ServiceBusError), client.get_queue_sender("nope") as sender:
            sender.send_messages(ServiceBusMessage("to no queue"))  # refused at the attach: a user error
        samples = _scrape(ns.admin_port)
        orders = {name: samples[(name, "orders")] for name, entity in samples if entity == "orders"}
        assert orders["servicebus_incoming_messages_total"] == 7
        assert orders["servicebus_outgoing_messages_total"] == 4
        assert orders["servicebus_complete_message_total"] == 2
        assert orders["servicebus_abandon_message_total"] == 1
        assert orders["servicebus_dead_lettered_message_total"] == 1
        assert orders["servicebus_active_messages"] == 4  # 7 - 2 completed - 1 dead-lettered
        assert orders["servicebus_deadlettered_messages"] == 1
        assert orders["servicebus_size_bytes"] > 0
        assert samples[("servicebus_incoming_messages_total", "events")] == 3
        namespace = {name.removeprefix("servicebus_"): value for (name, entity), value in samples.items()
                     if not entity}
        assert namespace["server_send_latency_seconds_count"] == 2  # two batches: a transfer each
        assert namespace["server_settle_latency_seconds_count"] == 4
        assert namespace["server_send_latency_seconds_bucket"] == 2  # the last bucket read: +Inf
        assert namespace["user_errors_total"] >= 1  # the attach to no queue
        assert namespace["server_errors_total"] == namespace["throttled_requests_total"] == 0
        requests = namespace["incoming_requests_total"]
        assert requests >= 2 + 4 + 1
        assert namespace["successful_requests_total"] == requests - namespace["user_errors_total"]
        assert samples[("servicebus_active_messages", "events/subscriptions/all")] == 3
        deadline = time.monotonic() + 10  # the client's close reaches the broker after the scrape above
        while _scrape(ns.admin_port)[("servicebus_active_connections", "")] and time.monotonic() < deadline:
            time.sleep(0.1)
        after = _scrape(ns.admin_port)
        assert after[("servicebus_active_connections", "")] == 0
        assert after[("servicebus_namespace_available", "")] == 1
        ns.faults.set({"namespace_down": "refuse"})  # as a drill's control call does
        assert _scrape(ns.admin_port)[("servicebus_namespace_available", "")] == 0
        opened, closed = (after[(f"servicebus_connections_{k}_total", "")] for k in ("opened", "closed"))
        assert opened == closed >= 3  # two senders and the receiver


def test_from_elsewhere_a_listen_or_manage_token_is_needed() -> None:
    with BrokerServer(parse(TOPOLOGY)) as server:
        ns = server.namespaces["metrics"]
        admin = server._admins[0]
        audience = f"http://10.0.0.1:{ns.admin_port}/"

        def scrape(token: str | None) -> int:
            headers = {"Authorization": token} if token else {}
            return admin.respond("GET", "/metrics", headers, b"", "http", peer="10.0.0.9").status

        def token(policy: str, key: str) -> str:
            return generate_sas_token(audience, policy, key, int(time.time()) + 600)

        assert scrape(None) == 401
        assert scrape(token("sender", "c2VuZC1vbmx5LWtleQ==")) == 401  # Send only
        assert scrape(token("reader", "bGlzdGVuLW9ubHkta2V5")) == 200
        assert scrape(token("RootManageSharedAccessKey", "U0FTX0tFWV9WQUxVRQ==")) == 200
        assert scrape(token("reader", "d3Jvbmcta2V5")) == 401  # a wrong key
        page = admin.respond("GET", "/metrics", {}, b"", "http", peer="127.0.0.1")
        assert page.status == 200 and b"SharedAccessKey" not in page.body and b"U0FTX0tF" not in page.body


def test_rest_requests_are_counted_per_operation_beside_the_amqp_series() -> None:
    """Real HTTP requests on the REST door, from many threads at once: each is counted once, its failures
    by class and status, its latency in the AMQP families' histograms; the AMQP series stay as they were."""
    with BrokerServer(parse(TOPOLOGY)) as server:
        ns = server.namespaces["metrics"]
        key = TOPOLOGY["namespaces"]["metrics"]["policies"]["RootManageSharedAccessKey"]["key"]
        token = generate_sas_token(f"http://127.0.0.1:{ns.admin_port}/", "RootManageSharedAccessKey", key,
                                   int(time.time()) + 600)

        def rest(method: str, path: str, body: bytes = b"") -> tuple[int, dict]:
            connection = http.client.HTTPConnection("127.0.0.1", ns.admin_port, timeout=30)
            try:
                connection.request(method, path, body=body, headers={"Authorization": token})
                response = connection.getresponse()
                response.read()
                return response.status, dict(response.headers)
            finally:
                connection.close()

        with ThreadPoolExecutor(8) as pool:
            sent = list(pool.map(lambda i: rest("POST", "/orders/messages", f"m-{i}".encode())[0], range(40)))
        assert sent == [201] * 40
        assert rest("POST", "/nope/messages", b"x")[0] == 410  # no such queue: the client's error
        locks = []
        for _ in range(3):
            status, headers = rest("POST", "/orders/messages/head?timeout=5")
            assert status == 201
            props = json.loads(headers["BrokerProperties"])
            locks.append(f"/orders/messages/{props['MessageId']}/{props['LockToken']}")
        assert rest("POST", locks[0])[0] == 200  # renew
        assert rest("DELETE", locks[0])[0] == 200  # complete
        assert rest("DELETE", locks[0])[0] == 404  # completed already: the lock is gone
        assert rest("PUT", locks[1])[0] == 200  # unlock
        assert rest("DELETE", "/orders/messages/head?timeout=0")[0] == 200  # receive and delete
        # parked, then nothing within its timeout
        assert rest("DELETE", "/events/subscriptions/all/messages/head?timeout=1")[0] == 204
        ns.faults.set({"namespace_down": "refuse"})
        assert rest("PUT", locks[2])[0] == 503  # down: throttled
        ns.faults.set({"namespace_down": None})

        counted = _scrape_rest(ns.admin_port)
        incoming = {op: counted[("servicebus_incoming_requests_total", op, "")] for op in
                    ("send", "peek_lock", "receive_and_delete", "unlock", "complete", "renew")}
        assert incoming == {"send": 41, "peek_lock": 3, "receive_and_delete": 2, "unlock": 2, "complete": 2,
                            "renew": 1}
        errors = {key: value for key, value in counted.items()
                  if key[0] in ("servicebus_user_errors_total", "servicebus_server_errors_total",
                                "servicebus_throttled_requests_total")}
        assert errors == {("servicebus_user_errors_total", "send", "410"): 1,
                          ("servicebus_user_errors_total", "complete", "404"): 1,
                          ("servicebus_throttled_requests_total", "unlock", "503"): 1}
        assert counted[("servicebus_successful_requests_total", "send", "")] == 40
        assert counted[("servicebus_successful_requests_total", "unlock", "")] == 1
        assert counted[("servicebus_successful_requests_total", "receive_and_delete", "")] == 2
        assert counted[("servicebus_server_send_latency_seconds_count", "send", "")] == 41
        assert counted[("servicebus_server_settle_latency_seconds_count", "complete", "")] == 2
        assert counted[("servicebus_server_settle_latency_seconds_count", "renew", "")] == 1
        assert counted[("servicebus_server_send_latency_seconds_sum", "send", "")] > 0
        amqp = _scrape(ns.admin_port)  # nothing came through the AMQP door
        assert amqp[("servicebus_incoming_requests_total", "")] == 0
        assert amqp[("servicebus_server_send_latency_seconds_count", "")] == 0
        assert amqp[("servicebus_incoming_messages_total", "orders")] == 40
