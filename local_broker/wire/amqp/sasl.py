"""The listening socket of a namespace and its SASL exchange (MSSBCBS, ANONYMOUS and PLAIN).

proton's built-in SASL server (without Cyrus) offers only ANONYMOUS and EXTERNAL, but Service Bus also
accepts PLAIN with a shared access policy name and key, which plain AMQP clients use. So the broker runs
the SASL layer itself, before proton sees the connection: it answers the SASL header with the mechanisms,
checks the `sasl-init`, sends the `sasl-outcome`, and only then hands the socket (and any bytes already
read past the SASL frames) to a proton server transport that expects the AMQP header.

A `SaslDoor` is the loop's channel for an accepted socket during the exchange; then a `TransportIO`
(loop.py) takes the socket over. On the AMQPS and WebSocket listeners both read and write through the
socket's layers (streams.py: TLS, WebSocket). A socket that has not opened its AMQP connection within the
handshake timeout is closed, whatever step it is at (TLS and the WebSocket upgrade included).
"""

from __future__ import annotations

import logging
import socket
import struct
from collections.abc import Callable

from proton import (
    UNDESCRIBED,
    Array,
    Connection,
    Data,
    Described,
    Endpoint,
    Handler,
    symbol,
    ubyte,
    ulong,
)

from local_broker.auth import Claim, NamespaceAuth
from local_broker.engine import BrokerError
from local_broker.faults import NamespaceFaults
from local_broker.wire.amqp import compat
from local_broker.wire.amqp.logs import log_event
from local_broker.wire.amqp.loop import READ, Loop, TransportIO
from local_broker.wire.amqp.reactor import Guarded
from local_broker.wire.amqp.streams import LayeredIO, Layers
from local_broker.wire.amqp.values import decode_value

log = logging.getLogger("local_broker.amqp")

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
SASL_MECHANISMS, SASL_INIT, SASL_OUTCOME = 0x40, 0x41, 0x44
OUTCOME_OK, OUTCOME_AUTH = 0, 1
MAX_SASL_FRAME = 65536
# No identity at SASL; rights come from CBS put-token. MSSBCBS is Service Bus's own name for that, which the
# uAMQP-C clients (the Python SDK's uamqp transport, older SDKs) ask for and fail without.
TOKEN_MECHANISMS = ("MSSBCBS", "ANONYMOUS")
HANDSHAKE_TIMEOUT_S = 20.0  # from accept to the client's AMQP open (SASL included)

# A new connection: the proton Connection (bound to a server transport), its SASL identity (None for the
# token mechanisms, whose rights come from CBS put-token), the peer and the SASL mechanism it chose.
OnConnection = Callable[[Connection, Claim | None, str, str], None]


def _sasl_frame(code: int, fields: list) -> bytes:
    data = Data()
    data.put_object(Described(ulong(code), fields))
    body = bytes(data.encode())
    return struct.pack(">IBBH", 8 + len(body), 2, 1, 0) + body


OFFERED = ("MSSBCBS", "PLAIN", "ANONYMOUS")  # Service Bus's order
MECHANISMS_FRAME = _sasl_frame(SASL_MECHANISMS, [Array(UNDESCRIBED, Data.SYMBOL, *map(symbol, OFFERED))])


class SaslDoor:
    """One accepted socket until its SASL exchange is done; then its bytes belong to proton."""

    def __init__(self, sock: socket.socket, listener: SaslListener) -> None:
        self.sock = sock
        self.listener = listener
        host, port = sock.getpeername()[:2]
        self.peer = f"{host}:{port}"
        self.inbox = b""
        self.leftover = b""  # bytes read past the SASL exchange, handed to proton first
        self.claim: Claim | None = None
        self.mechanism = ""
        self.authenticated = False
        self.greeted = False
        self.io: TransportIO | None = None
        self.timeout = listener.loop.schedule(listener.handshake_timeout, self.on_timeout)
        listener.loop.watch(sock.fileno(), self, READ)

    # --- the exchange ---------------------------------------------------------------------------
    def on_io(self, events: int) -> None:
        try:
            data = self.sock.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._drop("closed during SASL")
            return
        self.inbox += data
        try:
            self._advance()
        except (ValueError, struct.error, IndexError) as exc:
            self._drop(f"bad SASL exchange: {exc}")
        except OSError as exc:  # the peer left before the answer, or its TLS/WebSocket layer failed
            self._drop(f"closed during SASL: {exc}")

    def on_timeout(self) -> None:
        """The handshake timeout: a socket that has not opened its AMQP connection by now is closed."""
        io = self.io
        if io is None:
            self._drop("SASL exchange timed out")
        elif not io.closed and io.connection.state & Endpoint.REMOTE_UNINIT:
            log_event(log, logging.INFO, "connection-dropped", peer=self.peer, reason="no AMQP open in time")
            io.transport.close_tail()
            io.transport.close_head()
            self.listener.loop.touched.add(io)

    def _advance(self) -> None:
        if not self.inbox.startswith(SASL_HEADER[: len(self.inbox)]) and not self.authenticated:
            if self.inbox.startswith(AMQP_HEADER[: len(self.inbox)]):  # no SASL layer at all: anonymous
                self.leftover, self.inbox = self.inbox, b""
                self.authenticated = True
                self._bind()
                return
            self._write(SASL_HEADER)
            raise ValueError("not an AMQP protocol header")
        if len(self.inbox) < len(SASL_HEADER):
            return
        if not self.greeted:
            self.greeted = True
            self._write(SASL_HEADER + MECHANISMS_FRAME)
        if len(self.inbox) < len(SASL_HEADER) + 4:
            return
        frame_size = struct.unpack_from(">I", self.inbox, 8)[0]
        if not 8 <= frame_size <= MAX_SASL_FRAME:
            raise ValueError(f"SASL frame size {frame_size}")
        if len(self.inbox) < 8 + frame_size:
            return
        frame = self.inbox[8: 8 + frame_size]
        self.leftover, self.inbox = self.inbox[8 + frame_size:], b""
        code, fields = _decode_frame(frame)
        if code != SASL_INIT:
            raise ValueError(f"expected sasl-init, got 0x{code:x}")
        self._authenticate(fields)

    def _authenticate(self, fields: list) -> None:
        self.mechanism = mechanism = str(fields[0]) if fields else ""
        response = bytes(fields[1]) if len(fields) > 1 and fields[1] is not None else b""
        if mechanism in TOKEN_MECHANISMS:
            self.claim = None
        elif mechanism == "PLAIN":
            try:
                _authzid, user, password = response.decode("utf-8").split("\0")
                self.claim = self.listener.auth.verify_plain(user, password)
            except (ValueError, UnicodeDecodeError, BrokerError) as exc:
                log_event(log, logging.WARNING, "sasl-refused", peer=self.peer, mechanism=mechanism,
                          reason=str(exc) or "malformed PLAIN response")
                self._write(_sasl_frame(SASL_OUTCOME, [ubyte(OUTCOME_AUTH)]))
                self._drop(None)
                return
        else:
            self._write(_sasl_frame(SASL_OUTCOME, [ubyte(OUTCOME_AUTH)]))
            raise ValueError(f"unsupported SASL mechanism {mechanism!r}")
        self._write(_sasl_frame(SASL_OUTCOME, [ubyte(OUTCOME_OK)]))
        self.authenticated = True
        self._bind()

    def _write(self, data: bytes) -> None:
        # SASL frames are a few dozen bytes on a fresh socket: a short write means the peer is broken.
        if self.sock.send(data) != len(data):
            raise ValueError("could not write the SASL frame")

    def _bind(self) -> None:
        """Hand the socket to a proton server transport, with the bytes read past the SASL exchange."""
        connection = Connection()
        connection.handler = self.listener.guarded
        connection.collect(self.listener.loop.collector)
        transport = compat.BrokerTransport()
        io_type = TransportIO if self.listener.layers is None else LayeredIO
        self.io = io_type(self.listener.loop, self.sock, connection, transport, self.leftover)
        self.io.handshake = self.timeout
        self.listener.on_connection(connection, self.claim, self.peer, self.mechanism)
        self.leftover = b""

    def _drop(self, reason: str | None) -> None:
        if reason:
            log_event(log, logging.INFO, "connection-dropped", peer=self.peer, reason=reason)
        self.close()

    def close(self) -> None:
        self.timeout.cancel()
        self.listener.loop.forget(self.sock.fileno())
        self.sock.close()


def _decode_frame(frame: bytes) -> tuple[int, list]:
    doff = frame[4]
    if frame[5] != 1:
        raise ValueError("not a SASL frame")
    value = decode_value(frame[doff * 4:])
    if not isinstance(value, Described):
        raise ValueError("SASL frame body is not a performative")
    return int(value.descriptor), list(value.value or [])


class SaslListener:
    """The listening socket of one namespace on the loop; every connection goes through a SaslDoor."""

    ACCEPTS_PER_POLL = 64

    def __init__(self, loop: Loop, host: str, port: int, auth: NamespaceAuth, handler: Handler,
                 on_connection: OnConnection, faults: NamespaceFaults | None = None,
                 handshake_timeout: float = HANDSHAKE_TIMEOUT_S, layers: Layers | None = None) -> None:
        """`layers`: TLS (and WebSocket) between each socket and SASL; None: plain AMQP."""
        self.layers = layers
        self.handshake_timeout = handshake_timeout
        self.faults = faults or NamespaceFaults()
        self.loop = loop
        self.auth = auth
        self.handler = handler
        self.guarded = Guarded(handler, loop.turn)  # every connection's handler
        self.on_connection = on_connection
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.listen(1024)
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]
        self._fd = self.sock.fileno()
        loop.watch(self._fd, self, READ)

    def on_io(self, events: int) -> None:
        for _ in range(self.ACCEPTS_PER_POLL):
            try:
                sock, _ = self.sock.accept()
            except BlockingIOError:
                return
            except OSError as exc:  # e.g. out of file descriptors: the pending connection waits
                log_event(log, logging.ERROR, "accept-failed", error=exc)
                return
            if self.faults.state.refuses_connections:  # fault injection: the namespace is down
                sock.close()
                continue
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                SaslDoor(sock if self.layers is None else self.layers.wrap(sock, self.loop), self)
            except OSError:  # the peer left already (getpeername fails)
                sock.close()

    @property
    def listening(self) -> bool:
        return self.sock.fileno() != -1

    def close(self) -> None:
        if self.sock.fileno() != -1:
            self.loop.forget(self._fd)
            self.sock.close()
