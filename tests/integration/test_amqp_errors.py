"""Every broker-side failure reaches the real SDK as the exception Service Bus would cause.

Clients use `retry_total=0` so refusals surface at once instead of after the SDK's back-off.
"""

from __future__ import annotations

import time

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import (
    MessageLockLostError,
    MessageSizeExceededError,
    MessagingEntityDisabledError,
    MessagingEntityNotFoundError,
    ServiceBusAuthenticationError,
    ServiceBusAuthorizationError,
    ServiceBusQuotaExceededError,
    ServiceBusServerBusyError,
    SessionLockLostError,
)

from local_broker.auth import generate_sas_token
from local_broker.server import BrokerServer
from topology import parse

ROOT_KEY = "cm9vdC1rZXktZm9yLXRlc3Rz"
TOPOLOGY = {"namespaces": {"errors": {
    "policies": {
        "RootManageSharedAccessKey": {"key": ROOT_KEY, "rights": ["Manage", "Send", "Listen"]},
        "send-only": {"key": "c2VuZA==", "rights": ["Send"]},
        "listen-only": {"key": "bGlzdGVu", "rights": ["Listen"]},
    },
    "queues": {
        "q": {}, "small": {"max_size_in_megabytes": 1}, "disabled": {"status": "SendDisabled"},
        "locks": {}, "sessions": {"requires_session": True}, "partitioned": {"enable_partitioning": True},
    },
}}}


@pytest.fixture(scope="module")
def broker():
    with BrokerServer(parse(TOPOLOGY)) as server:
        yield server


def _connection_string(broker, name: str = "RootManageSharedAccessKey", key: str = ROOT_KEY) -> str:
    port = broker.namespaces["errors"].amqp_port
    return (f"Endpoint=sb://127.0.0.1:{port};SharedAccessKeyName={name};SharedAccessKey={key};"
            "UseDevelopmentEmulator=true")


@pytest.fixture(scope="module")
def client(broker):
    with ServiceBusClient.from_connection_string(_connection_string(broker), retry_total=0) as sb:
        yield sb


def test_a_token_for_a_missing_entity_is_refused_as_by_service_bus(client) -> None:
    """CBS answers 404 for a token whose audience names no entity, as Service Bus does; the SDK's own live
    tests (test_sb_client_bad_entity) expect ServiceBusAuthenticationError (uAMQP: test_amqp_tls.py)."""
    with pytest.raises(ServiceBusAuthenticationError), client.get_queue_sender("nope") as sender:
        sender.send_messages(ServiceBusMessage("x"))
    with pytest.raises(ServiceBusAuthenticationError), client.get_queue_receiver("nope") as receiver:
        receiver.receive_messages(max_message_count=1, max_wait_time=1)
    with client.get_queue_sender("q") as sender:  # the namespace still serves the same client
        sender.send_messages(ServiceBusMessage("after"))


def test_a_missing_entity_is_refused_at_attach_under_a_namespace_token(broker) -> None:
    """With a token for the whole namespace (as the JavaScript and .NET SDKs may sign), the attach names the
    missing entity."""
    port = broker.namespaces["errors"].amqp_port
    token = generate_sas_token(f"sb://127.0.0.1:{port}/", "RootManageSharedAccessKey", ROOT_KEY,
                               int(time.time()) + 600)
    conn = f"Endpoint=sb://127.0.0.1:{port};SharedAccessSignature={token};UseDevelopmentEmulator=true"
    with ServiceBusClient.from_connection_string(conn, retry_total=0) as sb:
        with pytest.raises(MessagingEntityNotFoundError), sb.get_queue_sender("nope") as sender:
            sender.send_messages(ServiceBusMessage("x"))
        with sb.get_queue_sender("q") as sender:
            sender.send_messages(ServiceBusMessage("namespace token"))


def test_message_larger_than_the_entity_allows(client) -> None:
    with client.get_queue_sender("q") as sender:
        with pytest.raises(MessageSizeExceededError):
            sender.send_messages(ServiceBusMessage(b"x" * (300 * 1024)))
        sender.send_messages(ServiceBusMessage("still usable"))  # the link survives a rejected send


def test_entity_size_quota(client) -> None:
    with client.get_queue_sender("small") as sender, pytest.raises(ServiceBusQuotaExceededError):
        for _ in range(8):  # 8 x 200 KB > 1 MB
            sender.send_messages(ServiceBusMessage(b"x" * (200 * 1024)))


def test_send_to_a_send_disabled_entity(client) -> None:
    with pytest.raises(MessagingEntityDisabledError), client.get_queue_sender("disabled") as sender:
        sender.send_messages(ServiceBusMessage("x"))


def test_settling_with_a_lost_lock(broker, client) -> None:
    with client.get_queue_sender("locks") as sender:
        sender.send_messages(ServiceBusMessage("contested"))
    with client.get_queue_receiver("locks", max_wait_time=5) as receiver:
        [msg] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        # someone else settles it first (e.g. through $management by lock token)
        broker.call("errors", lambda ns: ns.complete("locks", [msg.lock_token]))
        with pytest.raises(MessageLockLostError):
            receiver.complete_message(msg)


def test_settling_after_the_session_lock_is_gone(broker, client) -> None:
    endpoint = broker.namespaces["errors"].endpoint

    def release_behind_the_receivers_back() -> None:  # as if its session lock had expired
        state = next(link.sb for link in endpoint.receivers["sessions"])
        endpoint.ns.release_session("sessions", "S", state)

    with client.get_queue_sender("sessions") as sender:
        sender.send_messages(ServiceBusMessage("s", session_id="S"))
    with client.get_queue_receiver("sessions", session_id="S", max_wait_time=5) as receiver:
        [msg] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        broker.thread.call(release_behind_the_receivers_back)
        with pytest.raises(SessionLockLostError):
            receiver.complete_message(msg)


def test_wrong_key_fails_authentication(broker) -> None:
    with ServiceBusClient.from_connection_string(_connection_string(broker, key="d3Jvbmc="),
                                                 retry_total=0) as sb, \
            pytest.raises(ServiceBusAuthenticationError), sb.get_queue_sender("q") as sender:
        sender.send_messages(ServiceBusMessage("x"))


def test_expired_token_fails_authentication(broker) -> None:
    port = broker.namespaces["errors"].amqp_port
    token = generate_sas_token(f"sb://127.0.0.1:{port}/q", "RootManageSharedAccessKey", ROOT_KEY,
                               int(time.time()) - 60)
    conn = f"Endpoint=sb://127.0.0.1:{port};SharedAccessSignature={token};UseDevelopmentEmulator=true"
    with ServiceBusClient.from_connection_string(conn, retry_total=0) as sb, \
            pytest.raises(ServiceBusAuthenticationError), sb.get_queue_sender("q") as sender:
        sender.send_messages(ServiceBusMessage("x"))


def test_rights_of_send_only_and_listen_only_policies(broker) -> None:
    with ServiceBusClient.from_connection_string(_connection_string(broker, "send-only", "c2VuZA=="),
                                                 retry_total=0) as sb:
        with sb.get_queue_sender("q") as sender:
            sender.send_messages(ServiceBusMessage("allowed"))
        with pytest.raises(ServiceBusAuthorizationError), sb.get_queue_receiver("q") as receiver:
            receiver.receive_messages(max_message_count=1, max_wait_time=1)
    with ServiceBusClient.from_connection_string(_connection_string(broker, "listen-only", "bGlzdGVu"),
                                                 retry_total=0) as sb:
        with pytest.raises(ServiceBusAuthorizationError), sb.get_queue_sender("q") as sender:
            sender.send_messages(ServiceBusMessage("refused"))
        with sb.get_queue_receiver("q", max_wait_time=5) as receiver:
            got = receiver.receive_messages(max_message_count=5, max_wait_time=2)
            assert "allowed" in [str(m) for m in got]
            for m in got:
                receiver.complete_message(m)


def test_keyed_send_to_a_partition_that_is_down(broker, client) -> None:
    partitions = range(broker.call("errors", lambda ns: ns.config.partition_count))

    def set_partitions(available: bool) -> None:
        broker.call("errors", lambda ns: [ns.set_partition_available("partitioned", p, available)
                                          for p in partitions])

    set_partitions(False)
    try:
        with client.get_queue_sender("partitioned") as sender, pytest.raises(ServiceBusServerBusyError):
            sender.send_messages(ServiceBusMessage("x", partition_key="k"))
    finally:
        set_partitions(True)
