"""Tests as a user writes them: one fixture gives them a broker, markers declare the entities they need."""

import os

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, TransportType
from azure.servicebus.management import ServiceBusAdministrationClient

pytestmark = pytest.mark.sbfed_topology({"queues": {"orders": {"max_delivery_count": 3}}})


def test_send_and_receive(servicebus_connection_string):
    assert servicebus_connection_string.endswith(";UseDevelopmentEmulator=true;")
    with ServiceBusClient.from_connection_string(servicebus_connection_string) as client:
        client.get_queue_sender("orders").send_messages(ServiceBusMessage("order 1"))
        with client.get_queue_receiver("orders", max_wait_time=10) as receiver:
            [message] = receiver.receive_messages(max_wait_time=10)
            receiver.complete_message(message)
    assert str(message) == "order 1"


@pytest.mark.sbfed_topology({"topics": {"events": {"subscriptions": {"all": {}}}}})
def test_entities_from_every_marker_are_there(sbfed_broker):
    admin = ServiceBusAdministrationClient.from_connection_string(
        sbfed_broker.admin_connection_string, connection_verify=sbfed_broker.cert_path)
    assert admin.get_queue("orders").max_delivery_count == 3
    assert [s.name for s in admin.list_subscriptions("events")] == ["all"]
    if os.environ.get("EXPECT_CONFIG_JSON"):
        assert admin.get_queue("from-config").max_delivery_count == 5


@pytest.mark.parametrize("transport", [TransportType.Amqp, TransportType.AmqpOverWebsocket])
def test_a_client_with_no_emulator_mode_over_tls(sbfed_broker, transport):
    port = sbfed_broker.amqps_port if transport is TransportType.Amqp else sbfed_broker.websocket_port
    with ServiceBusClient.from_connection_string(
            sbfed_broker.amqps_connection_string, transport_type=transport,
            custom_endpoint_address=f"sb://localhost:{port}",
            connection_verify=sbfed_broker.cert_path) as client:
        client.get_queue_sender("orders").send_messages(ServiceBusMessage("order over tls"))
        with client.get_queue_receiver("orders", max_wait_time=10) as receiver:
            [message] = receiver.receive_messages(max_wait_time=10)
            receiver.complete_message(message)
    assert str(message) == "order over tls"
