"""Memory given to a connection comes back: once clients have come and gone, the broker holds no object of
theirs, and no cycle of them waits for a garbage collection.

The broker runs in this process (so its objects can be counted) with the garbage collector switched off while
clients connect and leave: an object still alive then is held by a reference or a cycle, which in the real
process (`gc.freeze()` and high thresholds, cli.py) would stay for good. The per-connection state that lives
in proton's C records (`ConnectionState`, `LinkState`) counts too: it goes only when the C connection and its
links are freed. Every way in is churned: plain AMQP, AMQPS and WebSockets with the SDK, sessions, a raw
request whose reply link never comes, and sockets that leave during SASL, TLS or before AMQP `open`.
"""

from __future__ import annotations

import gc
import socket
import ssl
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceivedMessage
from proton import Message
from proton.utils import BlockingConnection

from local_broker.server import BrokerServer
from local_broker.wire.amqp.loop import MIN_COMPACTION
from local_broker.wire.amqp.sasl import AMQP_HEADER, SASL_HEADER
from tests.integration.tls_clients import TOPOLOGY, still_serves
from topology import parse

ROUNDS = 3
SETTLE_S = 10.0  # well below the 20 s handshake timeout, whose timer used to hold a closed connection
BROKER_MODULES = ("local_broker.wire", "local_broker.auth")


@pytest.fixture
def broker() -> Iterator[BrokerServer]:
    with BrokerServer(parse(TOPOLOGY)) as server:
        yield server


@pytest.fixture
def no_collection() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect()


PER_CONNECTION = {"ConnectionState", "LinkState", "UnroutedReply", "Claim", "SaslDoor", "TransportIO",
                  "LayeredIO", "BrokerTransport", "TransferFormats", "TlsStream", "WebSocketStream"}


def broker_objects(server: BrokerServer) -> Counter[str]:
    """Live objects of the broker's wire layer (and the claims it keeps per connection) by type, but timers
    (the loop's heap is looked at on its own), and the entries of the broker's per-connection tables."""
    counts: Counter[str] = Counter()
    for obj in gc.get_objects():
        kind = type(obj)
        if str(kind.__module__).startswith(BROKER_MODULES) and kind.__qualname__ != "Timer":
            counts[kind.__qualname__] += 1
    loop = server.thread.loop

    def tables() -> dict[str, int]:
        endpoint = server.namespaces["tls"].endpoint
        return {"endpoint.connections": len(endpoint.connections), "loop transports": len(loop._by_transport),
                "loop channels": len(loop._channels), "receivers": sum(map(len, endpoint.receivers.values())),
                "waiting": sum(map(len, endpoint.waiting.values()))}

    counts.update(server.thread.call(tables))
    return counts


def settled(server: BrokerServer, baseline: Counter[str]) -> Counter[str]:
    """What the broker holds beyond `baseline` once it has seen every client leave (empty: nothing), and
    the per-connection objects it holds at all."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        counts = broker_objects(server)
        left = (counts - baseline) + Counter({kind: counts[kind] for kind in PER_CONNECTION if counts[kind]})
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def sdk_clients(server: BrokerServer) -> None:
    namespace = server.namespaces["tls"]
    still_serves(server)  # a round trip over plain AMQP and each SDK transport, all at once
    with ServiceBusClient.from_connection_string(namespace.connection_string, retry_total=0) as client:
        with client.get_queue_sender("sessions") as sender:
            sender.send_messages(ServiceBusMessage("in a session", session_id="s1"))
        with client.get_queue_receiver("sessions", session_id="s1", max_wait_time=5) as receiver:
            receiver.session.set_state(b"state")
            got: list[ServiceBusReceivedMessage] = receiver.receive_messages(max_wait_time=5)
            assert [str(m) for m in got] == ["in a session"]
            receiver.complete_message(got[0])


def unanswered_request(server: BrokerServer) -> None:
    """A `$cbs` request whose reply link the client never attaches: the broker keeps the reply for it."""
    port = server.namespaces["tls"].amqp_port
    connection = BlockingConnection(f"amqp://127.0.0.1:{port}", timeout=10, allowed_mechs="ANONYMOUS")
    try:
        sender = connection.create_sender("$cbs")
        sender.send(Message(reply_to="never-attached", body="not a token",
                            properties={"operation": "put-token", "type": "servicebus.windows.net:sastoken",
                                        "name": "sb://localhost/q"}))
    finally:
        connection.close()


def broken_peers(server: BrokerServer) -> None:
    """Sockets that leave during SASL, after the TLS handshake, after the WebSocket upgrade request was
    begun, and after SASL but before AMQP `open`."""
    namespace = server.namespaces["tls"]
    with socket.create_connection(("127.0.0.1", namespace.amqp_port)) as sock:
        sock.sendall(SASL_HEADER)
    with socket.create_connection(("127.0.0.1", namespace.amqp_port)) as sock:
        sock.sendall(AMQP_HEADER)  # no SASL: proton has the connection, the client never opens it
        sock.recv(8)
    context = ssl.create_default_context(cafile=server.cert_path)
    upgrade_begun = b"GET / HTTP/1.1\r\n"
    for port, opening in ((namespace.amqps_port, SASL_HEADER), (namespace.websocket_port, upgrade_begun)):
        with socket.create_connection(("127.0.0.1", port)) as raw, \
                context.wrap_socket(raw, server_hostname="localhost") as sock:
            sock.sendall(opening)


@pytest.mark.parametrize("clients", [sdk_clients, unanswered_request, broken_peers])
def test_the_broker_keeps_nothing_of_a_connection_once_it_has_left(broker, no_collection, clients) -> None:
    baseline = broker_objects(broker)  # the listeners, the endpoint, the loop: what lives for good
    clients(broker)  # the first round also makes what is made once (codecs, caches)
    assert settled(broker, baseline) == Counter()
    for _ in range(ROUNDS):
        clients(broker)
    assert settled(broker, baseline) == Counter(), "objects of closed connections are still alive"
    timers = broker.thread.call(lambda: len(broker.thread.loop._timers))
    assert timers <= 2 * MIN_COMPACTION, "cancelled timers stay in the loop's heap"
