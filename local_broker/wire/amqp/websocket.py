"""AMQP over WebSockets (RFC 6455) as Service Bus serves it: path `/$servicebus/websocket`, subprotocol
`AMQPWSB10` (the .NET, Java, JS and Python SDKs) or `amqp` (the AMQP WebSocket binding's registered name,
which the Go SDK's documented dialer asks for), the AMQP bytes in binary frames.

A `WebSocketStream` sits on another stream (TLS) and looks like it (see tls_stream.py): it answers the
HTTP upgrade, unmasks the client's frames into one byte stream (frame boundaries mean nothing to AMQP), sends
each write as one unmasked binary frame, answers pings and ends on a close frame.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import struct
from typing import Any

from local_broker.wire.amqp.layer import Layer
from local_broker.wire.amqp.logs import log_event

log = logging.getLogger("local_broker.amqp")

PATH = "/$servicebus/websocket"
SUBPROTOCOL = "AMQPWSB10"
SUBPROTOCOLS = (SUBPROTOCOL, "amqp")  # the answer names the first of the client's that is served
_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
UPGRADE_METHOD = b"GET "
MAX_REQUEST = 16 * 1024
SEND_CHUNK = 64 * 1024
LOWER_READ = 64 * 1024
CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
PROTOCOL_ERROR, UNSUPPORTED_DATA = 1002, 1003


class WebSocketError(ConnectionError):
    """The client broke the WebSocket protocol (or asked for another path or subprotocol)."""


def accept_key(key: str) -> str:
    """Sec-WebSocket-Accept for a client's Sec-WebSocket-Key."""
    return base64.b64encode(hashlib.sha1(key.encode("ascii") + _GUID).digest()).decode("ascii")


def request_path(target: str) -> str:
    """The path of a request target in origin form (`/path?query`) or absolute form (`https://host/path`:
    RFC 7230 section 5.3.2 has servers accept it; the Java SDK's proton-j WebSocket sends it)."""
    scheme, separator, rest = target.partition("://")
    if separator and "/" not in scheme:
        target = "/" + rest.partition("/")[2]
    return target.split("?")[0].rstrip("/")


def frame(opcode: int, payload: bytes | memoryview) -> bytes:
    """One final, unmasked frame (the server's kind)."""
    size = len(payload)
    if size < 126:
        head = struct.pack("!BB", 0x80 | opcode, size)
    elif size < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 126, size)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 127, size)
    return head + bytes(payload)


def unmask(data: bytes, key: bytes, offset: int) -> bytes:
    """XOR `data` with the 4-byte `key`, starting at byte `offset` of the key."""
    size = len(data)
    turned = key[offset % 4:] + key[: offset % 4]
    pad = (turned * (size // 4 + 1))[:size]
    return (int.from_bytes(data, "big") ^ int.from_bytes(pad, "big")).to_bytes(size, "big")


class WebSocketStream(Layer):
    """The server side of one WebSocket over `below` (TLS); see the module docstring."""

    def __init__(self, below: Any) -> None:
        super().__init__(below)
        self._raw = b""  # bytes from below not yet parsed
        self._upgraded = False
        self._remaining = 0  # payload bytes left in the current data frame
        self._key = b""
        self._offset = 0  # of the next payload byte in the current frame (for the mask)
        self._backlog = b""  # frames the stream below has not taken yet

    @property
    def unsent(self) -> bool:
        return bool(self._backlog) or self.below.unsent

    # --- input -----------------------------------------------------------------------------------
    def recv(self, size: int) -> bytes:
        parts: list[bytes] = []
        wanted = size
        while wanted > 0 and not self._ended:
            if not self._upgraded:
                if self._upgrade():
                    continue
            elif self._remaining:
                chunk = self._raw[:min(self._remaining, wanted)]
                if chunk:
                    self._raw = self._raw[len(chunk):]
                    parts.append(unmask(chunk, self._key, self._offset))
                    self._remaining -= len(chunk)
                    self._offset += len(chunk)
                    wanted -= len(chunk)
                    continue
            elif self._next_frame():
                continue
            if parts and not self.below.unread:  # nothing waits below: the poll says when the socket has more
                break
            if not self._pull():
                break
        self.drain()
        return self._read_result(parts, wanted)

    def _pull(self) -> bool:
        """Append what the stream below has now; False when it has nothing (or has ended)."""
        try:
            data = self.below.recv(LOWER_READ)
        except BlockingIOError:
            return False
        if not data:
            self._ended = True
            return False
        self._raw += data
        return True

    def _next_frame(self) -> bool:
        """Parse the next frame header (and a whole control frame); False when more bytes are needed."""
        raw = self._raw
        if len(raw) < 2:
            return False
        first, second = raw[0], raw[1]
        opcode, size, at = first & 0x0F, second & 0x7F, 2
        if size == 126:
            if len(raw) < 4:
                return False
            size, at = struct.unpack_from("!H", raw, 2)[0], 4
        elif size == 127:
            if len(raw) < 10:
                return False
            size, at = struct.unpack_from("!Q", raw, 2)[0], 10
        if not second & 0x80:
            self._close(PROTOCOL_ERROR, "client frames must be masked")
        if len(raw) < at + 4:
            return False
        key = raw[at: at + 4]
        at += 4
        if opcode in (BINARY, CONTINUATION):
            self._raw, self._remaining, self._key, self._offset = raw[at:], size, key, 0
            return True
        if opcode & 0x8 and (size > 125 or not first & 0x80):
            self._close(PROTOCOL_ERROR, "a control frame must be final and at most 125 bytes")
        if opcode not in (CLOSE, PING, PONG):
            self._close(UNSUPPORTED_DATA, "AMQP over WebSockets takes binary frames only")
        if len(raw) < at + size:
            return False
        payload = unmask(raw[at: at + size], key, 0)
        self._raw = raw[at + size:]
        if opcode == PING:
            self._backlog += frame(PONG, payload)
        elif opcode == CLOSE:
            self._backlog += frame(CLOSE, payload[:2])
            self._ended = True
        return True

    def _close(self, code: int, reason: str) -> None:
        self._backlog += frame(CLOSE, struct.pack("!H", code) + reason.encode())
        self.drain()
        self._refuse(reason)

    def _refuse(self, reason: str) -> None:
        log_event(log, logging.INFO, "websocket-refused", peer=self.peer(), reason=reason)
        raise WebSocketError(reason)

    # --- the HTTP upgrade -----------------------------------------------------------------------------
    def _upgrade(self) -> bool:
        """Answer the upgrade request once it is complete; False while it is not."""
        end = self._raw.find(b"\r\n\r\n")
        if not UPGRADE_METHOD.startswith(self._raw[:len(UPGRADE_METHOD)]):  # e.g. an AMQPS client's header:
            # it waits for the broker's, so it is told at once rather than left to its own timeout
            self._answer("400 Bad Request", f"This port serves AMQP over WebSockets only (GET {PATH}); "
                                            "AMQP over TLS has its own port.")
        if end < 0:
            if len(self._raw) > MAX_REQUEST:
                self._answer("431 Request Header Fields Too Large", "The upgrade request is too large.")
            return False
        head, self._raw = self._raw[:end].decode("latin-1"), self._raw[end + 4:]
        request, *lines = head.split("\r\n")
        headers: dict[str, str] = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        method, _, rest = request.partition(" ")
        path = request_path(rest.rpartition(" ")[0])
        if method != "GET" or "websocket" not in headers.get("upgrade", "").lower():
            self._answer("400 Bad Request", "Only WebSocket upgrades are served here.")
        if path != PATH:
            self._answer("404 Not Found", f"AMQP over WebSockets is served at {PATH}, not {path or '/'}.")
        protocols = [p.strip() for p in headers.get("sec-websocket-protocol", "").split(",")]
        served = [p for p in protocols if p in SUBPROTOCOLS]
        if not served:
            self._answer("400 Bad Request",
                         f"The WebSocket subprotocol must be one of {', '.join(SUBPROTOCOLS)}.")
        key = headers.get("sec-websocket-key", "")
        try:
            valid_key = len(base64.b64decode(key, validate=True)) == 16
        except ValueError:
            valid_key = False
        if headers.get("sec-websocket-version") != "13" or not valid_key:
            self._answer("400 Bad Request", "WebSocket version 13 and a 16-byte key are needed.")
        self._backlog += (f"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                          f"Sec-WebSocket-Accept: {accept_key(key)}\r\n"
                          f"Sec-WebSocket-Protocol: {served[0]}\r\n\r\n").encode("ascii")
        self._upgraded = True
        return True

    def _answer(self, status: str, reason: str) -> None:
        body = reason.encode()
        self._backlog += (f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
                          f"Connection: close\r\n\r\n").encode("ascii") + body
        self.drain()
        self._refuse(reason)

    # --- output ----------------------------------------------------------------------------------
    def send(self, data: bytes | memoryview) -> int:
        if self.drain():
            raise BlockingIOError
        chunk = memoryview(data)[:SEND_CHUNK]
        self._backlog = frame(BINARY, chunk)
        self.drain()
        return len(chunk)

    def drain(self) -> bool:
        """Hand the stream below what it takes now; True while some output is left here or below."""
        while self._backlog:
            try:
                taken = self.below.send(self._backlog)
            except BlockingIOError:
                return True
            self._backlog = self._backlog[taken:]
        return self.below.drain()

    def close(self) -> None:
        self.below.close()
