"""Loaded by the doc-test's Python blocks (this folder first on PYTHONPATH): a connection to localhost on one
of the emulator's default ports (5672, 5300, 5671, 5443) goes to the port the test's broker took instead, so
the blocks run as written even when those ports are taken on the machine. SBFED_DOCTEST_PORTS holds the map
as `5672=41234,5300=41235,...`."""

import os
import socket

_PORTS = {int(default): int(actual) for default, actual in
          (pair.split("=") for pair in os.environ.get("SBFED_DOCTEST_PORTS", "").split(",") if pair)}
_LOCAL = {"localhost", "127.0.0.1", "::1"}
_getaddrinfo = socket.getaddrinfo


def _mapped_getaddrinfo(host, port, *args, **kwargs):
    if host in _LOCAL and port is not None and str(port).isdigit():
        port = _PORTS.get(int(port), port)
    return _getaddrinfo(host, port, *args, **kwargs)


socket.getaddrinfo = _mapped_getaddrinfo
