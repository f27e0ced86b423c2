"""The shared fixture gives a working namespace: the real SDK sends and receives, the admin client sees it."""

from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.management import ServiceBusAdministrationClient


def test_fixture_broker_serves_sdk_and_admin_client(start_broker):
    server = start_broker({"namespaces": {"primary": {"queues": {"orders": {}}}}})
    ns = server.namespaces["primary"]
    with ServiceBusClient.from_connection_string(ns.connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("hello", message_id="m1"))
        with client.get_queue_receiver("orders", max_wait_time=5) as receiver:
            received = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            assert [str(m) for m in received] == ["hello"]
            receiver.complete_message(received[0])
    admin = ServiceBusAdministrationClient.from_connection_string(
        ns.admin_connection_string, connection_verify=server.cert_path)
    with admin:
        runtime = admin.get_queue_runtime_properties("orders")
        assert runtime.active_message_count == 0
