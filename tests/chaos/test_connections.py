"""Drills: thousands of connections, a connection quota, and peers that break the handshake or vanish.

Each starts `sbfed broker serve` as a process and counts its open file descriptors in /proc: whatever
peers do, the broker closes their sockets and comes back to the count it started with.
"""

from __future__ import annotations

import struct
import threading
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import ServiceBusConnectionError
from proton import symbol

from local_broker.wire.amqp.sasl import AMQP_HEADER, SASL_HEADER, SASL_INIT, _sasl_frame
from tests.chaos.harness import BrokerProcess, open_sockets, raise_fd_limit, topology, wait_for
from tests.round_trip import round_trip

pytestmark = pytest.mark.slow

ANONYMOUS = SASL_HEADER + _sasl_frame(SASL_INIT, [symbol("ANONYMOUS"), b""])
UNDECODABLE_FRAME = struct.pack(">IBBH", 64, 2, 0, 0) + b"\xff" * 56  # well sized, not AMQP
TOPOLOGY = topology({"work": {}, "alive": {}})
WORKERS = 10  # senders, and as many receivers: 20 SDK clients
PER_WORKER = 100


@pytest.fixture(autouse=True)
def _fd_limit() -> None:
    raise_fd_limit()


def _send(connection_string: str, worker: int, sent: list[str]) -> None:
    with ServiceBusClient.from_connection_string(connection_string) as client, \
            client.get_queue_sender("work") as sender:
        for i in range(0, PER_WORKER, 10):
            batch = [f"{worker}-{j}" for j in range(i, i + 10)]
            sender.send_messages([ServiceBusMessage(body, message_id=body) for body in batch])
            sent.extend(batch)


def _receive(connection_string: str, expected: int, received: list[str], done: threading.Event) -> None:
    with ServiceBusClient.from_connection_string(connection_string) as client, \
            client.get_queue_receiver("work", max_wait_time=2, prefetch_count=20) as receiver:
        while not done.is_set() or len(received) < expected:
            batch = receiver.receive_messages(max_message_count=20, max_wait_time=2)
            if not batch and done.is_set():
                return
            for message in batch:
                receiver.complete_message(message)
                received.append(message.message_id)


def test_2000_idle_connections_and_20_working_clients(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path, TOPOLOGY, args=("--handshake-timeout", "600")) as broker:
        baseline = broker.fd_count()
        port = broker.amqp_port
        idle = open_sockets(port, 1000) + open_sockets(port, 1000, ANONYMOUS + AMQP_HEADER)
        wait_for(lambda: broker.fd_count() >= baseline + 2000, 30, "the broker did not accept 2,000 sockets")
        sent: list[str] = []
        received: list[str] = []
        done = threading.Event()
        senders = [threading.Thread(target=_send, args=(broker.connection_string, w, sent))
                   for w in range(WORKERS)]
        receivers = [threading.Thread(target=_receive, args=(broker.connection_string, WORKERS * PER_WORKER,
                                                             received, done)) for _ in range(WORKERS)]
        for thread in senders + receivers:
            thread.start()
        for thread in senders:
            thread.join(120)
        done.set()
        for thread in receivers:
            thread.join(120)
        assert len(sent) == WORKERS * PER_WORKER
        assert sorted(received) == sorted(sent), "a working client lost or duplicated messages"
        assert broker.fd_count() >= baseline + 2000, "idle connections were dropped before their timeout"
        for sock in idle:
            sock.close()
        wait_for(lambda: broker.fd_count() <= baseline, 30,
                 f"the broker kept sockets of closed peers: {broker.fd_count()} fds, baseline {baseline}")


def test_connection_quota_refuses_extra_connections_only(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path, TOPOLOGY, args=("--max-connections", "3")) as broker:
        clients = [ServiceBusClient.from_connection_string(broker.connection_string, retry_total=0)
                   for _ in range(4)]
        senders = [client.get_queue_sender("work") for client in clients]
        try:
            for sender in senders[:3]:
                sender.send_messages(ServiceBusMessage("within the quota"))
            # A connection-level error: the SDK reports every one as a connection error, with the condition.
            with pytest.raises(ServiceBusConnectionError,
                               match=r"ConnectionsQuotaExceeded.*amqp:resource-limit-exceeded"):
                senders[3].send_messages(ServiceBusMessage("one connection too many"))
            for sender in senders[:3]:  # the open connections are not harmed
                sender.send_messages(ServiceBusMessage("still served"))
        finally:
            for client in clients:
                client.close()
        round_trip(broker.connection_string, "alive", "a closed connection frees its place", wait=5)


def test_half_open_garbage_and_silent_connections_are_closed(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path, TOPOLOGY, args=("--handshake-timeout", "2")) as broker:
        round_trip(broker.connection_string, "alive", "before", wait=5)
        baseline = broker.fd_count()
        port = broker.amqp_port
        # Peers that send something broken and leave: the broker must notice the close in any state.
        for opening in (ANONYMOUS + AMQP_HEADER + UNDECODABLE_FRAME,  # half-open: a bad frame, then gone
                        b"GET / HTTP/1.1\r\n\r\n", b"\xff" * 4096, SASL_HEADER, ANONYMOUS + AMQP_HEADER):
            for sock in open_sockets(port, 200, opening):
                sock.close()
        # Peers that stay connected but never finish the handshake: closed by the handshake timeout.
        silent = (open_sockets(port, 200) + open_sockets(port, 200, SASL_HEADER)
                  + open_sockets(port, 200, ANONYMOUS + AMQP_HEADER))
        wait_for(lambda: broker.fd_count() <= baseline, 20,
                 f"broken or silent peers kept sockets open: {broker.fd_count()} fds, baseline {baseline}")
        for sock in silent:
            sock.settimeout(5)
            try:
                while sock.recv(65536):
                    pass
            except ConnectionResetError:
                pass
            except TimeoutError:
                pytest.fail("the broker left a silent connection open")
            sock.close()
        round_trip(broker.connection_string, "alive", "after", wait=5)
