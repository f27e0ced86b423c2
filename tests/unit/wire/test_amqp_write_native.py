"""A connection's output written by the C `write_out` and by the pure-Python `_write` (loop.TransportIO's
flush, `SBFED_PURE_PYTHON`): the same bytes on the wire and the same state after, when the socket takes it
all, when its buffer is full and when the peer is gone."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from proton import Connection
from proton._events import Collector

from local_broker.wire.amqp import compat, values
from local_broker.wire.amqp.loop import READ, WRITE, Loop, TransportIO
from local_broker.wire.amqp.native import bind

HEADER = b"AMQP\x00\x01\x00\x00"


@pytest.fixture(params=["c", "python"])
def written(request: pytest.FixtureRequest) -> Iterator[tuple[Loop, str]]:
    loop = Loop(Collector(), lambda event, number: None)
    if request.param == "c":  # the loop's own choice where the codec is C, bound here where it is not
        written_by = bind(request.getfixturevalue("native")).write_out
        assert loop.write_out is (written_by if values._native is not None else None)
    loop.write_out = written_by if request.param == "c" else None
    yield loop, request.param


def _opened(loop: Loop) -> tuple[TransportIO, socket.socket, Connection]:
    """A server transport that read a client's header and has its header and an open frame to write."""
    ours, peer = socket.socketpair()
    ours.setblocking(False)
    connection = Connection()
    io = TransportIO(loop, ours, connection, compat.BrokerTransport(), HEADER)
    connection.open()
    return io, peer, connection


def _read_all(peer: socket.socket) -> bytes:
    peer.setblocking(False)
    got = b""
    while True:
        try:
            chunk = peer.recv(65536)
        except BlockingIOError:
            return got
        if not chunk:
            return got
        got += chunk


def test_output_goes_out_whole(written) -> None:
    loop, _ = written
    io, peer, _ = _opened(loop)
    io.flush()
    sent = _read_all(peer)
    assert sent.startswith(HEADER) and len(sent) > len(HEADER) + 8  # the header, then the open frame
    assert io.mask == READ  # nothing left to write
    assert compat.LIB.pn_transport_pending(io.impl) == 0
    io.close()


def test_a_full_socket_keeps_the_output_for_the_poll(written) -> None:
    loop, _ = written
    io, peer, _ = _opened(loop)
    filler = 0
    while True:  # fill the socket's buffer: the peer reads nothing yet
        try:
            filler += io.sock.send(bytes(65536))
        except BlockingIOError:
            break
    waiting = compat.LIB.pn_transport_pending(io.impl)
    io.flush()
    assert io.mask == READ | WRITE and compat.LIB.pn_transport_pending(io.impl) == waiting
    got = b""
    while len(got) < filler:
        got += peer.recv(filler - len(got))
    io.flush()  # room again: the output goes
    assert _read_all(peer).startswith(HEADER) and io.mask == READ
    io.close()


def test_a_peer_gone_closes_the_transports_head(written) -> None:
    loop, _ = written
    io, peer, _ = _opened(loop)
    peer.close()
    io.flush()
    assert compat.LIB.pn_transport_pending(io.impl) < 0  # its head is closed: nothing more is written
    io.close()


def test_write_out_refuses_what_is_not_a_transport_and_a_socket(native) -> None:
    native = bind(native)
    buffer = bytearray(16)
    with pytest.raises(TypeError):
        native.write_out(0, 0, buffer)
    with pytest.raises(ValueError):
        native.write_out(0, 0, buffer, 16)  # a null transport
    with pytest.raises(ValueError):
        native.write_out(1, -1, buffer, 16)
    with pytest.raises(BufferError):  # checked before the transport is used
        native.write_out(1, 0, b"read-only", 16)
