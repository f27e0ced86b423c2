"""The listening socket of a namespace and its SASL exchange (ANONYMOUS and PLAIN).

proton's built-in SASL server (without Cyrus) offers only ANONYMOUS and EXTERNAL, but Service Bus also
accepts PLAIN with a shared access policy name and key, which plain AMQP clients use. So the broker runs
the SASL layer itself, before proton sees the connection: it answers the SASL header with the mechanisms,
checks the `sasl-init`, sends the `sasl-outcome`, and only then hands the socket (and any bytes already
read past the SASL frames) to a proton server transport that expects the AMQP header.

A `SaslDoor` is the delegate of the connection's proton `Selectable` (the reactor reads and writes the
socket through it) and the handler of that selectable's events during the exchange.
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
    Url,
    symbol,
    ubyte,
    ulong,
)
from proton.handlers import IOHandler
from proton.reactor import Container

from local_broker.auth import Claim, NamespaceAuth
from local_broker.engine import BrokerError
from local_broker.faults import NamespaceFaults
from local_broker.wire.amqp import compat
from local_broker.wire.amqp.logs import log_event
from local_broker.wire.amqp.reactor import Guarded
from local_broker.wire.amqp.values import decode_value

log = logging.getLogger("local_broker.amqp")

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
SASL_MECHANISMS, SASL_INIT, SASL_OUTCOME = 0x40, 0x41, 0x44
OUTCOME_OK, OUTCOME_AUTH = 0, 1
MAX_SASL_FRAME = 65536
HANDSHAKE_TIMEOUT_S = 20.0  # from accept to the client's AMQP open (SASL included)

# A new connection: the proton Connection (bound to a server transport) and its SASL identity
# (None for ANONYMOUS, whose rights come from CBS put-token).
OnConnection = Callable[[Connection, Claim | None, str], None]


def _sasl_frame(code: int, fields: list) -> bytes:
    data = Data()
    data.put_object(Described(ulong(code), fields))
    body = bytes(data.encode())
    return struct.pack(">IBBH", 8 + len(body), 2, 1, 0) + body


MECHANISMS_FRAME = _sasl_frame(
    SASL_MECHANISMS, [Array(UNDESCRIBED, Data.SYMBOL, symbol("PLAIN"), symbol("ANONYMOUS"))])


class SaslDoor(Handler):
    """One accepted socket until its SASL exchange is done; then its bytes belong to proton."""

    def __init__(self, sock: socket.socket, listener: SaslListener) -> None:
        super().__init__()
        self.sock = sock
        self.listener = listener
        host, port = sock.getpeername()[:2]
        self.peer = f"{host}:{port}"
        self.inbox = b""
        self.leftover = b""  # bytes read past the SASL exchange, handed to proton first
        self.claim: Claim | None = None
        self.authenticated = False
        self.bound = False
        self.greeted = False
        self.selectable = None
        self.connection: Connection | None = None

    # --- the socket API the reactor's IOHandler uses -------------------------------------------
    def fileno(self) -> int:
        return self.sock.fileno()

    def recv(self, size: int) -> bytes:
        if self.leftover:
            chunk, self.leftover = self.leftover[:size], self.leftover[size:]
            return chunk
        return self.sock.recv(size)

    def send(self, data: bytes) -> int:
        return self.sock.send(data)

    def close(self) -> None:
        self.sock.close()

    # --- the exchange ---------------------------------------------------------------------------
    def on_selectable_readable(self, event) -> None:
        if self.bound:
            return
        if self.authenticated:  # the AMQP header has arrived: proton reads it in this same event
            self._bind()
            return
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

    def on_timer_task(self, event) -> None:
        """The handshake timeout: a socket that has not opened its AMQP connection by now is closed."""
        if not self.bound:
            self._drop("SASL exchange timed out")
            return
        connection = self.connection
        if connection is None or not connection.state & Endpoint.REMOTE_UNINIT:
            return
        transport = connection.transport
        if transport is not None:
            log_event(log, logging.INFO, "connection-dropped", peer=self.peer, reason="no AMQP open in time")
            transport.close_tail()
            transport.close_head()

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
        mechanism = str(fields[0]) if fields else ""
        response = bytes(fields[1]) if len(fields) > 1 and fields[1] is not None else b""
        if mechanism == "ANONYMOUS":
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
        if self.leftover:  # the client pipelined its AMQP header: proton reads it in this event
            self._bind()

    def _write(self, data: bytes) -> None:
        # SASL frames are a few dozen bytes on a fresh socket: a short write means the peer is broken.
        if self.sock.send(data) != len(data):
            raise ValueError("could not write the SASL frame")

    def _bind(self) -> None:
        """Hand the socket to a proton server transport (what proton's own Acceptor does)."""
        self.bound = True
        reactor: Container = self.listener.container
        connection = reactor.connection(Guarded(self.listener.handler))
        connection._acceptor = self.listener  # tells proton's IOHandler the socket exists already
        host, port = self.peer.rsplit(":", 1)
        connection.url = Url(host=host, port=int(port))
        transport = compat.BrokerTransport()
        transport.idle_timeout = 0
        transport.bind(connection)
        self.connection = connection
        self.selectable._transport = transport
        transport._selectable = self.selectable
        self.listener.on_connection(connection, self.claim, self.peer)
        IOHandler.update(transport, self.selectable, reactor.now)

    def _drop(self, reason: str | None) -> None:
        if reason:
            log_event(log, logging.INFO, "connection-dropped", peer=self.peer, reason=reason)
        self.bound = True
        self.selectable.terminate()
        self.selectable.update()


def _decode_frame(frame: bytes) -> tuple[int, list]:
    doff = frame[4]
    if frame[5] != 1:
        raise ValueError("not a SASL frame")
    value = decode_value(frame[doff * 4:])
    if not isinstance(value, Described):
        raise ValueError("SASL frame body is not a performative")
    return int(value.descriptor), list(value.value or [])


class SaslListener(Handler):
    """The listening socket of one namespace on the reactor; every connection goes through a SaslDoor."""

    def __init__(self, container: Container, host: str, port: int, auth: NamespaceAuth, handler: Handler,
                 on_connection: OnConnection, faults: NamespaceFaults | None = None,
                 handshake_timeout: float = HANDSHAKE_TIMEOUT_S) -> None:
        super().__init__()
        self.handshake_timeout = handshake_timeout
        self.faults = faults or NamespaceFaults()
        self.container = container
        self.auth = auth
        self.handler = handler
        self.on_connection = on_connection
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.listen(128)
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]
        self.selectable = container.selectable(handler=Guarded(self), delegate=self.sock)
        self.selectable.reading = True
        self.selectable._transport = None
        container.update(self.selectable)

    def on_selectable_readable(self, event) -> None:
        try:
            sock, _ = self.sock.accept()
        except BlockingIOError:
            return
        if self.faults.state.refuses_connections:  # fault injection: the namespace is down
            sock.close()
            return
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        door = SaslDoor(sock, self)
        door.selectable = self.container.selectable(handler=Guarded(door), delegate=door)
        door.selectable.reading = True
        door.selectable._transport = None
        self.container.update(door.selectable)
        self.container.schedule(self.handshake_timeout, Guarded(door))

    @property
    def listening(self) -> bool:
        return self.sock.fileno() != -1 and not self.selectable.is_terminal

    def close(self) -> None:
        if not self.selectable.is_terminal:
            self.selectable.terminate()
            self.selectable.update()
        self.sock.close()
