"""TLS between a non-blocking socket and the bytes above it (SASL, then proton), for AMQPS.

`ssl.SSLContext.wrap_bio` with two memory buffers: the loop reads the socket only when epoll says so, so a
handshake never blocks the reactor. A `TlsStream` looks like the socket it wraps (`recv`, `send`,
`fileno`, `getpeername`, `close`) plus what a layered stream must tell the loop (streams.py): `unsent`
(ciphertext the socket has not taken yet) and `unread` (plaintext it may hold beyond the last `recv`).
"""

from __future__ import annotations

import logging
import socket
import ssl

from local_broker.wire.amqp.layer import Layer
from local_broker.wire.amqp.logs import log_event

log = logging.getLogger("local_broker.amqp")

SOCKET_READ = 64 * 1024
SEND_CHUNK = 64 * 1024  # plaintext taken per `send` (four TLS records at most)


class TlsError(ConnectionError):
    """The TLS layer failed (a handshake refused, a corrupt record): the connection is over."""


class TlsStream(Layer):
    """The server side of one TLS connection over `sock`; see the module docstring."""

    def __init__(self, sock: socket.socket, context: ssl.SSLContext) -> None:
        super().__init__(sock)
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self._backlog = b""  # ciphertext the socket has not taken yet

    @property
    def unsent(self) -> bool:
        return bool(self._backlog)

    # --- input -----------------------------------------------------------------------------------
    def recv(self, size: int) -> bytes:
        """Up to `size` bytes of plaintext; b"" once the peer has closed; BlockingIOError when none yet."""
        parts: list[bytes] = []
        wanted = size
        incoming = self._incoming
        while wanted > 0 and not self._ended:
            buffered = incoming.pending or incoming.eof or self._tls.pending()
            if not buffered and (parts or not self._fill()):  # the poll says when the socket has more
                break
            try:
                chunk = self._tls.read(wanted)
            except ssl.SSLWantReadError:
                self._send_out()
                if not self._fill():
                    break
                continue
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                chunk = b""
            except ssl.SSLError as exc:
                self._fail(exc)
            if not chunk:
                self._ended = True
                break
            parts.append(chunk)
            wanted -= len(chunk)
        self._send_out()
        return self._read_result(parts, wanted)

    def _fill(self) -> bool:
        """Move what the socket has into the TLS layer; False when it has nothing now."""
        try:
            data = self.below.recv(SOCKET_READ)
        except BlockingIOError:
            return False
        if data:
            self._incoming.write(data)
        else:
            self._incoming.write_eof()
        return True

    def _fail(self, exc: ssl.SSLError) -> None:
        try:
            self._send_out()  # the alert that tells the client why
        except OSError:
            pass
        reason = exc.reason or exc.__class__.__name__
        log_event(log, logging.INFO, "tls-failed", peer=self.peer(), reason=reason)
        raise TlsError(f"TLS failed: {reason}") from exc

    # --- output ----------------------------------------------------------------------------------
    def send(self, data: bytes | memoryview) -> int:
        """Encrypt up to SEND_CHUNK bytes of `data`; BlockingIOError while earlier ciphertext waits."""
        if self._backlog and self.drain():
            raise BlockingIOError
        try:
            taken = self._tls.write(memoryview(data)[:SEND_CHUNK])
        except ssl.SSLError as exc:
            self._fail(exc)
        self._send_out()
        return taken

    def _send_out(self) -> None:
        out = self._outgoing.read()
        if not out:
            return
        if self._backlog:
            self._backlog += out
            self.drain()
            return
        try:  # the common case: nothing waits, the ciphertext goes straight to the socket
            sent = self.below.send(out)
        except BlockingIOError:
            sent = 0
        if sent < len(out):
            self._backlog = out[sent:]

    def drain(self) -> bool:
        """Write the ciphertext the socket takes now; True while some is left."""
        if self._backlog:
            try:
                sent = self.below.send(self._backlog)
            except BlockingIOError:
                return True
            self._backlog = self._backlog[sent:]
        return bool(self._backlog)

    def close(self) -> None:
        """Say close_notify if the socket takes it now, then close the socket."""
        try:
            if not self._ended:
                self._tls.unwrap()
        except (ssl.SSLError, ValueError):
            pass
        try:
            self._send_out()
        except OSError:
            pass
        self.below.close()
