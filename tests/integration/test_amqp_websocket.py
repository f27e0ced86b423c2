"""The WebSocket layer in the forms no SDK sends, driven with websocket-client (and a raw TLS socket where it
cannot misbehave): a wrong path or subprotocol gets an HTTP error, pings get pongs, fragmented frames make one
byte stream, a text frame or an unmasked one ends the connection with the close code RFC 6455 names; the
broker serves others throughout."""

from __future__ import annotations

import socket
import ssl
import struct
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import websocket

from local_broker.server import BrokerServer
from local_broker.wire.amqp.websocket import PATH, SUBPROTOCOL
from tests.integration.tls_clients import TOPOLOGY, still_serves
from topology import parse

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
UPGRADE = (f"GET {PATH} HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
           f"Sec-WebSocket-Protocol: {SUBPROTOCOL}\r\n\r\n").encode()
ACCEPT = b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo="  # RFC 6455's example answer to that key


@pytest.fixture(scope="module")
def broker():
    with BrokerServer(parse(TOPOLOGY)) as server:
        yield server


def _url(server: BrokerServer, path: str = PATH) -> str:
    return f"wss://localhost:{server.namespaces['tls'].websocket_port}{path}"


def _connect(server: BrokerServer, **options) -> websocket.WebSocket:
    return websocket.create_connection(_url(server), subprotocols=[SUBPROTOCOL], timeout=10,
                                       sslopt={"ca_certs": server.cert_path}, **options)


@pytest.mark.parametrize(("path", "protocols", "status"), [
    ("/", [SUBPROTOCOL], 404), ("/$servicebus/other", [SUBPROTOCOL], 404), (PATH, ["mqtt"], 400)])
def test_a_wrong_path_or_subprotocol_is_an_http_error(broker, path: str, protocols: list[str],
                                                      status: int) -> None:
    with pytest.raises(websocket.WebSocketBadStatusException) as refused:
        websocket.create_connection(_url(broker, path), subprotocols=protocols, timeout=10,
                                    sslopt={"ca_certs": broker.cert_path})
    assert refused.value.status_code == status


@pytest.mark.parametrize(("offered", "answered"), [
    (["amqp"], "amqp"), (["mqtt", "amqp", SUBPROTOCOL], "amqp"), ([SUBPROTOCOL, "amqp"], SUBPROTOCOL)])
def test_the_answer_names_the_first_subprotocol_offered_that_is_served(broker, offered: list[str],
                                                                       answered: str) -> None:
    """`amqp` too: the Go SDK's documented dialer (coder/websocket) asks for it and checks the answer."""
    ws = websocket.create_connection(_url(broker), subprotocols=offered, timeout=10,
                                     sslopt={"ca_certs": broker.cert_path})
    try:
        assert ws.headers["sec-websocket-protocol"] == answered
    finally:
        ws.close()


@contextmanager
def _upgraded(server: BrokerServer, upgrade: bytes = UPGRADE) -> Iterator[tuple[ssl.SSLSocket, bytes, bytes]]:
    """A raw TLS socket that sent `upgrade`: the socket, the head of the broker's answer, what came after."""
    context = ssl.create_default_context(cafile=server.cert_path)
    port = server.namespaces["tls"].websocket_port
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname="localhost") as tls:
        tls.sendall(upgrade)
        response = b""
        while b"\r\n\r\n" not in response:
            response += tls.recv(4096)
        head, _, rest = response.partition(b"\r\n\r\n")
        yield tls, head, rest


def _upgrade_answer(server: BrokerServer, upgrade: bytes) -> bytes:
    with _upgraded(server, upgrade) as (_, head, _):
        return head


@pytest.mark.parametrize("target", [f"https://localhost{PATH}", f"wss://localhost:5443{PATH}?x=1"])
def test_an_absolute_form_request_target_is_upgraded(broker, target: str) -> None:
    """As the Java SDK (proton-j's WebSocket) asks: `GET https://host/$servicebus/websocket HTTP/1.1`."""
    head = _upgrade_answer(broker, UPGRADE.replace(f"GET {PATH} ".encode(), f"GET {target} ".encode()))
    assert head.startswith(b"HTTP/1.1 101") and ACCEPT in head
    assert _upgrade_answer(broker, UPGRADE.replace(PATH.encode(), b"https://localhost/other")).startswith(
        b"HTTP/1.1 404")
    still_serves(broker)


def test_fragments_make_one_stream_and_pings_get_pongs(broker) -> None:
    ws = _connect(broker)
    try:
        assert ws.subprotocol.upper() == SUBPROTOCOL  # websocket-client lowercases it
        ws.ping(b"are you there")
        assert ws.recv_data(control_frame=True) == (websocket.ABNF.OPCODE_PONG, b"are you there")
        ws.send_frame(websocket.ABNF.create_frame(SASL_HEADER[:3], websocket.ABNF.OPCODE_BINARY, fin=0))
        ws.send_frame(websocket.ABNF.create_frame(SASL_HEADER[3:], websocket.ABNF.OPCODE_CONT, fin=1))
        opcode, answer = ws.recv_data()
        assert opcode == websocket.ABNF.OPCODE_BINARY
        assert answer.startswith(SASL_HEADER) and b"MSSBCBS" in answer  # the header, then sasl-mechanisms
    finally:
        ws.close()
    still_serves(broker)


def test_a_text_frame_is_refused_with_1003(broker) -> None:
    ws = _connect(broker)
    try:
        ws.send("AMQP in a text frame")
        opcode, payload = ws.recv_data(control_frame=True)
        assert (opcode, struct.unpack("!H", payload[:2])[0]) == (websocket.ABNF.OPCODE_CLOSE, 1003)
    finally:
        ws.shutdown()


def test_an_unmasked_client_frame_is_refused_with_1002(broker) -> None:
    with _upgraded(broker) as (tls, head, rest):
        assert head.startswith(b"HTTP/1.1 101") and ACCEPT in head and SUBPROTOCOL.encode() in head
        tls.sendall(bytes([0x82, len(SASL_HEADER)]) + SASL_HEADER)  # no mask bit
        while len(rest) < 4:
            rest += tls.recv(4096)
        assert rest[0] == 0x88 and struct.unpack("!H", rest[2:4])[0] == 1002
    still_serves(broker)
