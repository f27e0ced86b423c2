"""Session receivers through the real SDK: named and next-available sessions, state, lock renewal, listing,
and the refusals (session locked elsewhere, no session available within the wait)."""

from __future__ import annotations

import pytest
from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusMessage
from azure.servicebus.exceptions import OperationTimeoutError, SessionCannotBeLockedError

from local_broker.server import BrokerServer
from local_broker.wire.amqp import endpoint
from tests.integration.tls_clients import SDK_STACKS, SDK_STACKS_UAMQP_SLOW, sdk_client
from topology import parse

TOPOLOGY = {"namespaces": {"sessions": {
    "queues": {"orders": {"requires_session": True}, "lonely": {"requires_session": True}},
    "topics": {"events": {"subscriptions": {"by-session": {"requires_session": True}}}},
}}}


@pytest.fixture(scope="module")
def broker():
    with BrokerServer(parse(TOPOLOGY)) as server:
        yield server


@pytest.fixture(scope="module", params=SDK_STACKS)
def client(broker, request):
    with sdk_client(broker, request.param, "sessions", retry_total=0) as sb:
        yield sb


@pytest.fixture(scope="module", params=SDK_STACKS_UAMQP_SLOW)
def waiting_client(broker, request):
    """uAMQP-C sends no `com.microsoft:timeout` on a next-available attach: it waits out the broker's default
    (60 s, Service Bus's operation timeout; the test cuts it) where pyamqp asks for its max_wait_time."""
    with sdk_client(broker, request.param, "sessions", retry_total=0) as sb:
        yield sb


def _custom_endpoint_on_uamqp(client) -> bool:
    """The SDK's session listing on uAMQP drops a custom endpoint's port and entity ("Invalid Address
    address: amqps://localhost", before anything is sent), whatever the server: it lists on pyamqp only."""
    uamqp = client._amqp_transport.__name__ == "UamqpTransport"
    return uamqp and client._config.custom_endpoint_address is not None


def test_named_and_next_available_sessions_with_state_and_listing(client) -> None:
    with client.get_queue_sender("orders") as sender:
        sender.send_messages([ServiceBusMessage(f"{sid}{i}", session_id=sid)
                              for sid in "AB" for i in range(2)])
    if not _custom_endpoint_on_uamqp(client):
        assert sorted(client.list_queue_sessions("orders")) == ["A", "B"]
    with client.get_queue_receiver("orders", session_id="A", max_wait_time=5) as receiver:
        session = receiver.session
        assert session.session_id == "A"
        got = receiver.receive_messages(max_message_count=5, max_wait_time=2)
        assert [str(m) for m in got] == ["A0", "A1"]
        for m in got:
            receiver.complete_message(m)
        session.set_state(b"progress")
        assert session.get_state() == b"progress"
        before = session.locked_until_utc
        session.renew_lock()
        assert session.locked_until_utc >= before
        with pytest.raises(SessionCannotBeLockedError), \
                client.get_queue_receiver("orders", session_id="A", max_wait_time=2) as other:
            other.receive_messages(max_message_count=1, max_wait_time=1)
    with client.get_queue_receiver("orders", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=5) as receiver:
        assert receiver.session.session_id == "B"
        got = receiver.receive_messages(max_message_count=5, max_wait_time=2)
        assert [str(m) for m in got] == ["B0", "B1"]
        for m in got:
            receiver.complete_message(m)


def test_next_available_times_out_when_no_session_has_messages(waiting_client, monkeypatch) -> None:
    # The broker's default wait (Service Bus's 60 s) cut to 3 s: uAMQP's attach waits it out all the same.
    monkeypatch.setattr(endpoint, "DEFAULT_SESSION_WAIT_S", 3.0)
    with pytest.raises(OperationTimeoutError), waiting_client.get_queue_receiver(
            "lonely", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=1) as rcv:
        rcv.receive_messages(max_message_count=1, max_wait_time=1)


def test_subscription_sessions_and_peek_within_a_session(client) -> None:
    with client.get_topic_sender("events") as sender:
        sender.send_messages([ServiceBusMessage("x1", session_id="X"),
                              ServiceBusMessage("y1", session_id="Y")])
    with client.get_subscription_receiver("events", "by-session", session_id="Y",
                                          max_wait_time=5) as receiver:
        assert [str(m) for m in receiver.peek_messages(max_message_count=5)] == ["y1"]
        [msg] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        assert msg.session_id == "Y"
        receiver.complete_message(msg)
