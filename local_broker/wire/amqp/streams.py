"""Connections whose bytes pass layers above the socket: AMQPS (TLS) and AMQP over WebSockets (TLS, then
WebSocket frames).

A layer (tls_stream.py, websocket.py) looks like a socket to the SASL door and to `TransportIO`, but it
can hold bytes that epoll cannot see: ciphertext or frames the socket has not taken yet (`unsent`), and
plaintext decoded beyond what the last read asked for (`unread`). `LayeredIO` is the `TransportIO` that
tells the loop about both: it keeps watching for writability while output waits below, and asks for
another read while input waits above the socket.
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass
from typing import Any

import cproton_ffi

from local_broker.wire.amqp.loop import READ, WRITE, Loop, TransportIO
from local_broker.wire.amqp.tls_stream import TlsStream
from local_broker.wire.amqp.websocket import WebSocketStream

_LIB = cproton_ffi.lib


@dataclass(frozen=True)
class Layers:
    """What a listener puts between each accepted socket and AMQP: TLS, then WebSocket if `websocket`."""

    context: ssl.SSLContext
    websocket: bool = False

    def wrap(self, sock: socket.socket, loop: Loop) -> Any:
        stream: Any = TlsStream(sock, self.context)
        if self.websocket:
            stream = WebSocketStream(stream)
        fd = sock.fileno()
        stream.on_unread = lambda: loop.readable(fd)
        return stream


class LayeredIO(TransportIO):
    """A `TransportIO` over a layered stream (see the module docstring)."""

    __slots__ = ()
    PLAIN_SOCKET = False  # its output passes the layers (`_write`)

    def _write(self) -> None:
        try:
            self.sock.drain()
        except OSError:
            _LIB.pn_transport_close_head(self.impl)
            return
        super()._write()

    def flush(self) -> None:
        super().flush()
        if self.closed:
            return
        stream = self.sock
        capacity = _LIB.pn_transport_capacity(self.impl)  # below zero: input over, or an error
        if capacity < -1:
            return
        if stream.unsent:
            self.watch((READ if capacity > 0 else 0) | WRITE)
        if stream.unread and capacity > 0:
            self.loop.readable(stream.fileno())
