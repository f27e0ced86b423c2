"""The broker stays up whatever a client does: garbage, half handshakes, abrupt disconnects, a client that
stops reading. Also plain AMQP clients: SASL PLAIN with a policy name and key carries the policy's rights."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from proton import ConnectionException, Message
from proton.utils import BlockingConnection, LinkDetached

from local_broker.server import BrokerServer
from tests.round_trip import round_trip_on
from topology import parse

KEY = "cm9idXN0LWtleQ=="
TOPOLOGY = {"namespaces": {"robust": {
    "policies": {"RootManageSharedAccessKey": {"key": KEY, "rights": ["Manage", "Send", "Listen"]},
                 "sender": {"key": "c2VuZGVy", "rights": ["Send"]}},
    "queues": {"work": {"lock_duration": "PT5S"}, "flood": {}, "plain": {}, "alive": {}},
}}}


@pytest.fixture(scope="module")
def broker():
    with BrokerServer(parse(TOPOLOGY)) as server:
        yield server


@pytest.fixture(scope="module")
def client(broker):
    with ServiceBusClient.from_connection_string(broker.namespaces["robust"].connection_string,
                                                 retry_total=0) as sb:
        yield sb


def _url(broker) -> str:
    return f"amqp://127.0.0.1:{broker.namespaces['robust'].amqp_port}"


def test_garbage_and_half_handshakes_do_not_hurt(broker, client) -> None:
    port = broker.namespaces["robust"].amqp_port
    sockets = []
    for opening in (b"GET / HTTP/1.1\r\n\r\n", b"AMQP\x03\x01\x00\x00",  # SASL header, then silence
                    b"AMQP\x03\x01\x00\x00\x00\x00\x00\x10\x02\x01\x00\x00\x00\x53\x41\xc0",  # torn sasl-init
                    b"AMQP\x00\x01\x00\x00" + bytes(range(256)),  # no SASL, then garbage frames
                    b"\xff" * 4096):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(opening)
        sockets.append(sock)
    quick = socket.create_connection(("127.0.0.1", port))
    quick.close()  # connect and leave at once
    round_trip_on(client, "alive", "after garbage", wait=5)
    for sock in sockets:
        sock.close()


def test_sasl_plain_with_policy_name_and_key(broker) -> None:
    conn = BlockingConnection(_url(broker), user="RootManageSharedAccessKey", password=KEY)
    try:
        sender = conn.create_sender("plain")
        for i in range(3):
            sender.send(Message(body=f"p{i}", durable=True))
        receiver = conn.create_receiver("plain", credit=10)
        bodies = []
        for _ in range(3):
            msg = receiver.receive(timeout=5)
            bodies.append(msg.body if isinstance(msg.body, str) else bytes(msg.body).decode())
            assert msg.delivery_count == 0
            receiver.accept()
        assert bodies == ["p0", "p1", "p2"]
    finally:
        conn.close()


def test_sasl_plain_refusals(broker) -> None:
    with pytest.raises(ConnectionException):
        BlockingConnection(_url(broker), user="RootManageSharedAccessKey", password="d3Jvbmc=", timeout=5)
    conn = BlockingConnection(_url(broker), user="sender", password="c2VuZGVy")  # Send right only
    try:
        conn.create_sender("plain").send(Message(body="ok"))
        with pytest.raises(LinkDetached, match="unauthorized-access"):
            conn.create_receiver("plain", credit=1)
    finally:
        conn.close()
    anonymous = BlockingConnection(_url(broker), timeout=5)  # no CBS token, no PLAIN identity: no rights
    try:
        with pytest.raises(LinkDetached, match="unauthorized-access"):
            anonymous.create_sender("plain")
    finally:
        anonymous.close()


LOCK_AND_VANISH = textwrap.dedent("""
    import sys, time
    from proton.utils import BlockingConnection
    conn = BlockingConnection(sys.argv[1], user="RootManageSharedAccessKey", password=sys.argv[2])
    receiver = conn.create_receiver(sys.argv[3], credit=int(sys.argv[4]))
    if sys.argv[5] == "lock":
        for _ in range(3):
            receiver.receive(timeout=10)   # locked, never settled
    print("ready", flush=True)
    time.sleep(120)                        # and never reads again
""")


def _client_process(broker, queue: str, credit: int, mode: str) -> subprocess.Popen:
    args = [sys.executable, "-c", LOCK_AND_VANISH, _url(broker), KEY, queue, str(credit), mode]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def test_locks_of_a_killed_client_expire_and_nothing_is_lost(broker, client) -> None:
    with client.get_queue_sender("work") as sender:
        sender.send_messages([ServiceBusMessage(f"w{i}") for i in range(3)])
    proc = _client_process(broker, "work", 3, "lock")
    proc.send_signal(signal.SIGKILL)  # no detach, no close: the socket just dies
    proc.wait()
    # Prefetch 3: with prefetch 0 the SDK releases a transfer that arrives between two receive calls, and
    # now and then (2 runs in 14 under load, at ea10e63 too) it completes a message whose tag it no longer
    # has: its own "Delivery tag not found", then the broker's lock-lost on the management fallback. With a
    # prefetch it keeps what arrives (0 in 16).
    with client.get_queue_receiver("work", max_wait_time=10, prefetch_count=3) as receiver:
        got = []
        deadline = time.time() + 15
        while len(got) < 3 and time.time() < deadline:
            got.extend(receiver.receive_messages(max_message_count=3, max_wait_time=3))
        assert sorted(str(m) for m in got) == ["w0", "w1", "w2"]
        assert all(m.delivery_count == 1 for m in got)  # the lapsed locks counted as deliveries
        for m in got:
            receiver.complete_message(m)


def test_a_client_that_stops_reading_does_not_stall_others(broker, client) -> None:
    with client.get_queue_sender("flood") as sender:
        for _ in range(10):
            sender.send_messages([ServiceBusMessage(b"x" * 1024) for _ in range(100)])
    proc = _client_process(broker, "flood", 5000, "stall")
    try:
        round_trip_on(client, "alive", "while another client stalls", wait=5)
    finally:
        proc.kill()
        proc.wait()
