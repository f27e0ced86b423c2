"""What the layers of a connection's byte stream (tls_stream.py, websocket.py) share: the socket's surface
the SASL door and `TransportIO` use, and how a read ends."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Layer:
    """One layer over `below` (a socket or another layer). `unread`: the last read stopped at its size, so
    the layer may hold input that epoll cannot see; `on_unread` then asks the loop for another read."""

    def __init__(self, below: Any) -> None:
        self.below = below
        self.unread = False
        self.on_unread: Callable[[], None] | None = None
        self._ended = False  # the peer has closed

    def fileno(self) -> int:
        return self.below.fileno()

    def getpeername(self) -> tuple:
        return self.below.getpeername()

    def peer(self) -> str:
        """host:port of the peer, for logs."""
        try:
            return "{}:{}".format(*self.getpeername()[:2])
        except OSError:
            return "?"

    def _read_result(self, parts: list[bytes], wanted: int) -> bytes:
        """End a `recv`: what was read, b"" once the peer has closed, BlockingIOError when nothing yet."""
        self.unread = wanted == 0
        if parts:
            if self.unread and self.on_unread is not None:
                self.on_unread()
            return b"".join(parts)
        if self._ended:
            return b""
        raise BlockingIOError
