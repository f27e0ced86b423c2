"""AMQPS and AMQP over WebSockets with the real Python SDK, as a client with no emulator mode uses them: the
Azure-form connection string (no `UseDevelopmentEmulator`), TLS verified against the broker's certificate
(`connection_verify=`), both of the SDK's AMQP stacks (pyamqp and uamqp).

The SDK takes the port of an Azure-form endpoint from `custom_endpoint_address` (it dials 5671 whatever the
`Endpoint` says), so the broker's ephemeral ports are passed there.
"""

from __future__ import annotations

import socket
import ssl
import time
from datetime import UTC, datetime, timedelta

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue, TransportType
from azure.servicebus.exceptions import (
    ServiceBusAuthenticationError,
    ServiceBusConnectionError,
    ServiceBusError,
)

from local_broker.server import BrokerServer
from local_broker.tls import ensure_certificate
from tests.broker_process import ServeProcess
from tests.integration.tls_clients import TOPOLOGY, TRANSPORTS, still_serves, tls_client
from tests.round_trip import round_trip, round_trip_on
from topology import parse

BULK = 20
QUICK_FAILURE_S = 10  # well under the broker's 20 s handshake timeout: the client is told, not left waiting


@pytest.fixture(scope="module")
def broker():
    with BrokerServer(parse(TOPOLOGY)) as server:
        yield server


def test_the_connection_string_is_azures_form(broker) -> None:
    namespace = broker.namespaces["tls"]
    assert namespace.amqps_connection_string == (
        f"Endpoint=sb://localhost:{namespace.amqps_port}/;SharedAccessKeyName=RootManageSharedAccessKey;"
        f"SharedAccessKey={namespace.policy.key}")
    assert {"amqps_port", "websocket_port", "amqps_connection_string"} <= set(namespace.describe())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_send_receive_and_settle(broker, transport: str) -> None:
    with tls_client(broker, transport) as client:
        with client.get_queue_sender("settle") as sender:
            sender.send_messages([ServiceBusMessage(f"{transport}-{i}", message_id=str(i)) for i in range(3)])
        with client.get_queue_receiver("settle", max_wait_time=10) as receiver:
            got = _receive(receiver, 3)
            by_id = {m.message_id: m for m in got}
            assert sorted(by_id) == ["0", "1", "2"]
            receiver.complete_message(by_id["0"])
            receiver.dead_letter_message(by_id["1"], reason="bad", error_description="tested")
            receiver.abandon_message(by_id["2"])
            [again] = _receive(receiver, 1)
            assert (again.message_id, again.delivery_count) == ("2", 1)
            receiver.complete_message(again)
        with client.get_queue_receiver("settle", sub_queue=ServiceBusSubQueue.DEAD_LETTER,
                                       max_wait_time=10) as dead_letters:
            [dead] = _receive(dead_letters, 1)
            assert (dead.message_id, dead.dead_letter_reason) == ("1", "bad")
            dead_letters.complete_message(dead)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_large_messages_in_bulk(broker, transport: str) -> None:
    """Messages near the 256 KB limit, many at once both ways: frames larger than a TLS record or a WebSocket
    frame, writes the socket takes only in part, reads that leave decoded bytes above the socket."""
    bodies = [bytes([i]) * 200_000 for i in range(BULK)]
    with tls_client(broker, transport) as client:
        with client.get_queue_sender("bulk") as sender:
            for body in bodies:
                sender.send_messages(ServiceBusMessage(body))
        with client.get_queue_receiver("bulk", prefetch_count=BULK, max_wait_time=10) as receiver:
            got = _receive(receiver, BULK)
            assert [b"".join(m.body) for m in got] == bodies
            for message in got:
                receiver.complete_message(message)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_management_operations(broker, transport: str) -> None:
    """Peek, schedule and cancel, renew a lock: requests and replies on `$management`."""
    with tls_client(broker, transport) as client:
        with client.get_queue_sender("q") as sender:
            later = datetime.now(UTC) + timedelta(hours=1)
            [scheduled] = sender.schedule_messages(ServiceBusMessage("later"), later)
            sender.cancel_scheduled_messages(scheduled)
            sender.send_messages(ServiceBusMessage(f"peeked-{transport}"))
        with client.get_queue_receiver("q", max_wait_time=10) as receiver:
            assert [str(m) for m in receiver.peek_messages(max_message_count=10)] == [f"peeked-{transport}"]
            [message] = _receive(receiver, 1)
            before = message.locked_until_utc
            time.sleep(0.05)
            assert receiver.renew_message_lock(message) > before
            receiver.complete_message(message)
            assert receiver.peek_messages(max_message_count=10) == []


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_sessions(broker, transport: str) -> None:
    session = f"session-{transport}"
    with tls_client(broker, transport) as client:
        with client.get_queue_sender("sessions") as sender:
            sender.send_messages([ServiceBusMessage(f"{i}", session_id=session) for i in range(2)])
        with client.get_queue_receiver("sessions", session_id=session, max_wait_time=10) as receiver:
            receiver.session.set_state(b"halfway")
            assert receiver.session.get_state() == b"halfway"
            got = _receive(receiver, 2)
            assert [str(m) for m in got] == ["0", "1"]
            assert {m.session_id for m in got} == {session}
            for message in got:
                receiver.complete_message(message)


REFUSED_TOKENS = {  # what makes CBS refuse a put-token: (key, queue, what the 4xx reply says)
    "wrong key": ("d3Jvbmcta2V5", "q", ("401", "InvalidSignature")),
    "missing entity": (None, "nope", ("404", "could not be found")),
}


@pytest.mark.parametrize("refusal", REFUSED_TOKENS)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_refused_token_is_refused_as_by_service_bus(broker, transport: str, refusal: str) -> None:
    """CBS answers 401 InvalidSignature for a wrong key, 404 for an audience naming no entity. Behind a
    `custom_endpoint_address` the pyamqp stack raises every failure to connect, these included, as
    ServiceBusConnectionError (the SDK's "parity with uamqp"), the 4xx as its cause; the uamqp stack raises
    ServiceBusAuthenticationError (with an unreadable description: uamqp 1.6 keeps a pointer into the reply
    it has freed, whoever the server)."""
    key, queue, said = REFUSED_TOKENS[refusal]
    uamqp = TRANSPORTS[transport][2]
    expected = ServiceBusAuthenticationError if uamqp else ServiceBusConnectionError
    with tls_client(broker, transport, key=key) as client:
        with pytest.raises(expected) as caught, client.get_queue_sender(queue) as sender:
            sender.send_messages(ServiceBusMessage("never"))
        if key is None:
            round_trip_on(client, "q", "the same client still works")
    if not uamqp:
        cause = caught.value.__cause__ or caught.value.__context__
        assert all(part in str(cause) for part in said), repr(cause)


def test_the_certificate_names_127_0_0_1_too(broker) -> None:
    with tls_client(broker, "pyamqp-amqps", host="127.0.0.1") as client:
        round_trip_on(client, "q", "by address")


def test_a_users_own_certificate_is_served(tmp_path) -> None:
    own = ensure_certificate(tmp_path / "own")
    with BrokerServer(parse(TOPOLOGY), tls=(str(own.cert_path), str(own.key_path))) as server:
        assert server.cert_path == str(own.cert_path)
        with tls_client(server, "pyamqp-amqps") as client:
            round_trip_on(client, "q", "under the user's certificate")


def test_a_certificate_that_cannot_be_served_stops_serve_with_one_line(tmp_path) -> None:
    missing = str(tmp_path / "missing.pem")
    code, err = ServeProcess(tmp_path, "--in-memory", "--amqp-port", "0", "--admin-port", "0",
                             "--tls-cert", missing, "--tls-key", missing).exit()
    assert code == 1
    assert err.strip().splitlines() == [
        f"sbfed broker serve: cannot serve TLS with certificate {missing} and key {missing}: "
        "[Errno 2] No such file or directory"]


def test_a_client_that_trusts_another_ca_is_told_at_once(broker, tmp_path) -> None:
    other = ensure_certificate(tmp_path)  # a certificate the broker does not serve
    started = time.monotonic()
    with tls_client(broker, "pyamqp-amqps", verify=str(other.cert_path)) as client, \
            pytest.raises(ServiceBusConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
        round_trip_on(client, "q", "never")
    assert time.monotonic() - started < QUICK_FAILURE_S
    still_serves(broker)


@pytest.mark.parametrize(("port_kind", "expected"), [
    ("amqps_port", ServiceBusConnectionError), ("admin_port", ServiceBusError)])
def test_plain_amqp_on_another_port_is_told_at_once(broker, port_kind: str, expected: type) -> None:
    """On the TLS port the handshake fails; on the management port an HTTP 400 answers its AMQP header."""
    namespace = broker.namespaces["tls"]
    emulator_form = namespace.connection_string.replace(
        f":{namespace.amqp_port}", f":{getattr(namespace, port_kind)}")
    started = time.monotonic()
    with pytest.raises(expected):
        round_trip(emulator_form, "q", "never")
    assert time.monotonic() - started < QUICK_FAILURE_S
    still_serves(broker)


def test_tls_on_the_plain_port_is_told_at_once(broker) -> None:
    started = time.monotonic()
    namespace = broker.namespaces["tls"]
    client = ServiceBusClient.from_connection_string(
        namespace.amqps_connection_string, custom_endpoint_address=f"sb://localhost:{namespace.amqp_port}",
        transport_type=TransportType.Amqp, connection_verify=broker.cert_path, retry_total=0)
    with client, pytest.raises(ServiceBusConnectionError):
        round_trip_on(client, "q", "never")
    assert time.monotonic() - started < QUICK_FAILURE_S
    still_serves(broker)


@pytest.mark.parametrize("port_kind", ["websocket_port", "admin_port"])
def test_amqps_on_another_tls_port_is_told_at_once(broker, port_kind: str) -> None:
    """An AMQPS client on the WebSocket port, or on the management port (HTTPS), sends its AMQP header and
    waits for the broker's: it gets an HTTP 400 at once (pyamqp: "Received invalid frame type")."""
    namespace = broker.namespaces["tls"]
    address = f"sb://localhost:{getattr(namespace, port_kind)}"
    client = ServiceBusClient.from_connection_string(
        namespace.amqps_connection_string, custom_endpoint_address=address, transport_type=TransportType.Amqp,
        connection_verify=broker.cert_path, retry_total=0)
    started = time.monotonic()
    with client, pytest.raises(ServiceBusError):
        round_trip_on(client, "q", "never")
    assert time.monotonic() - started < QUICK_FAILURE_S
    still_serves(broker)


def test_a_tls_client_that_never_speaks_does_not_hold_up_others(broker) -> None:
    """A handshake half done (TCP open, no ClientHello; then a ClientHello and silence) blocks nobody."""
    namespace = broker.namespaces["tls"]
    context = ssl.create_default_context(cafile=broker.cert_path)
    with socket.create_connection(("127.0.0.1", namespace.amqps_port)) as idle, \
            socket.create_connection(("127.0.0.1", namespace.websocket_port)) as hello:
        hello.setblocking(False)
        tls = context.wrap_socket(hello, server_hostname="localhost", do_handshake_on_connect=False)
        try:
            tls.do_handshake()  # the ClientHello goes out; the answer is left unread
        except ssl.SSLWantReadError:
            pass
        still_serves(broker)
        assert idle.fileno() != -1


def _receive(receiver, count: int) -> list:
    got: list = []
    deadline = time.monotonic() + 10
    while len(got) < count and time.monotonic() < deadline:
        got += receiver.receive_messages(max_message_count=count - len(got), max_wait_time=5)
    return got
