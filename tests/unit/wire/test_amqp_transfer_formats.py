"""The message-format of incoming transfers, read from the frames a connection receives (proton drops it)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from proton import ubyte, uint

from local_broker.wire.amqp import values
from local_broker.wire.amqp.compat import IncomingFrames, _list_fields
from local_broker.wire.amqp.values import encode_value

pytestmark = pytest.mark.usefixtures("value_codec")  # each test with the C codec and the pure-Python one

BATCH = 0x80013700
ATTACH, TRANSFER, FLOW = 0x12, 0x14, 0x13


def frame(channel: int, performative: int, fields: list, payload: bytes = b"") -> bytes:
    body = b"\x00\x53" + bytes([performative]) + encode_value(fields) + payload
    return struct.pack(">IBBH", 8 + len(body), 2, 0, channel) + body


def attach(channel: int, name: str, handle: int, sender: bool = True, long_bool: bool = False) -> bytes:
    """An attach with its settle modes (ubytes) after the role; pyamqp writes the role as 0x56 <byte>."""
    role = (b"\x56" + bytes([not sender])) if long_bool else encode_value(not sender)
    modes = encode_value(ubyte(0)) + encode_value(ubyte(1))
    items = encode_value(name) + encode_value(uint(handle)) + role + modes
    body = b"\x00\x53" + bytes([ATTACH]) + b"\xc0" + bytes([len(items) + 1, 5]) + items
    return struct.pack(">IBBH", 8 + len(body), 2, 0, channel) + body


def transfer(channel: int, handle: int, tag: bytes, message_format: int, payload: bytes) -> bytes:
    return frame(channel, TRANSFER, [uint(handle), uint(7), tag, uint(message_format)], payload)


CONVERSATION = b"".join([
    b"AMQP\x00\x01\x00\x00",
    struct.pack(">IBBH", 8, 2, 0, 0),  # an empty (heartbeat) frame
    attach(0, "sender-a", 1),
    attach(1, "sender-b", 1, long_bool=True),  # the same handle on another session
    attach(0, "receiver", 2, sender=False),
    transfer(0, 1, b"\x00\x00\x00\x01", 0, b"x" * 3000),  # an ordinary message
    transfer(0, 1, b"\x00\x00\x00\x02", BATCH, b"y" * 70000),  # a batch bigger than a read
    frame(0, FLOW, [uint(0), uint(100)]),
    transfer(1, 1, b"tag-b", BATCH, b"z" * 10),
])


@pytest.mark.parametrize("chunk", [len(CONVERSATION), 65536, 1000, 7, 1])
def test_batch_transfers_are_found_whatever_the_reads(chunk: int) -> None:
    formats = IncomingFrames()
    for start in range(0, len(CONVERSATION), chunk):
        formats.feed(CONVERSATION[start:start + chunk])
    assert formats.formats == {("sender-a", b"\x00\x00\x00\x02"): BATCH, ("sender-b", b"tag-b"): BATCH}


def test_a_transfer_on_an_unknown_link_or_malformed_frame_is_left_to_proton() -> None:
    formats = IncomingFrames()
    formats.feed(transfer(3, 9, b"t", BATCH, b"") + frame(0, TRANSFER, [b"not a handle"]))
    assert formats.formats == {}


BEGIN = 0x11


def transfer_ids(data: bytes) -> list[tuple[int, int | None]]:
    """(channel, delivery-id) of each transfer in `data`, as a second reader sees them."""
    seen, pos = [], 0
    while pos < len(data):
        if data[pos:pos + 4] == b"AMQP":
            pos += 8
            continue
        size, doff, _, channel = struct.unpack_from(">IBBH", data, pos)
        body = pos + doff * 4
        if size > 8 and data[body + 2] == TRANSFER:
            fields, _ = _list_fields(memoryview(data), body + 3, 2)
            seen.append((channel, fields[1] if len(fields) > 1 else None))
        pos += size
    return seen


def numbered(channel: int, handle: int, delivery_id: int | None, payload: bytes, more: bool = False) -> bytes:
    ident = None if delivery_id is None else uint(delivery_id)
    return frame(channel, TRANSFER, [uint(handle), ident, b"t", uint(0), False, more], payload)


RACED = b"".join([
    b"AMQP\x00\x01\x00\x00",
    frame(0, BEGIN, [None, uint(0), uint(100), uint(100)]),
    frame(1, BEGIN, [None, uint(254), uint(100), uint(100)]),
    attach(0, "mgmt", 1),
    attach(1, "mgmt-b", 0),
    numbered(0, 1, 0, b"a"),
    numbered(0, 1, 1, b"b"),
    numbered(0, 1, 1, b"c" * 2000),  # a second request with the same id (two threads, one counter)
    numbered(0, 1, 3, b"d"),  # the counter went on from there: in sequence again
    numbered(0, 1, 3, b"e", more=True),  # a lost increment: this one and what follows are one off
    numbered(0, 1, None, b"e2"),  # the rest of that delivery (no id): left alone
    numbered(0, 1, 4, b"f"),
    numbered(1, 0, 254, b"g"),
    numbered(1, 0, 255, b"h"),
    numbered(1, 0, 255, b"i"),  # to 256: no longer fits a smalluint, so the frame grows
    numbered(1, 0, 257, b"j"),
])


@pytest.mark.parametrize("chunk", [len(RACED), 1000, 7, 1])
def test_delivery_ids_out_of_sequence_are_put_back_in_sequence(chunk: int) -> None:
    frames = IncomingFrames()
    out = b"".join(frames.feed(RACED[start:start + chunk]) for start in range(0, len(RACED), chunk))
    assert transfer_ids(out) == [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (0, None), (0, 5),
                                 (1, 254), (1, 255), (1, 256), (1, 257)]
    assert frames.renumbered == 4
    again = IncomingFrames()
    assert again.feed(out) == out and again.renumbered == 0
    assert out.count(b"c" * 2000) == 1 and out.endswith(b"j")  # payloads pass whole


def test_a_new_session_on_a_channel_starts_its_own_sequence() -> None:
    frames = IncomingFrames()
    first = frames.feed(frame(0, BEGIN, [None, uint(0), uint(9), uint(9)]) + numbered(0, 1, 0, b"x"))
    second = frames.feed(frame(0, BEGIN, [None, uint(40), uint(9), uint(9)]) + numbered(0, 1, 40, b"y"))
    assert transfer_ids(first + second) == [(0, 0), (0, 40)] and frames.renumbered == 0


_FRAMES = st.one_of(
    st.builds(lambda channel, ident: frame(channel, BEGIN, [None, uint(ident), uint(9), uint(9)]),
              st.integers(0, 1), st.integers(0, 300)),
    st.builds(lambda channel, handle: attach(channel, f"s{channel}{handle}", handle), st.integers(0, 1),
              st.integers(0, 1)),
    st.builds(lambda channel, handle, ident, fmt, more, tag, size: frame(channel, TRANSFER, [
        uint(handle), None if ident is None else uint(ident), tag, uint(fmt), False, more], b"p" * size),
        st.integers(0, 1), st.integers(0, 1), st.none() | st.integers(0, 300) | st.just(2**32 - 1),
        st.sampled_from([0, 0, BATCH]), st.booleans(), st.binary(max_size=4), st.integers(0, 600)),
)


@settings(max_examples=150, deadline=None)
@given(frames=st.lists(_FRAMES, max_size=12), chunk=st.integers(1, 3000))
def test_the_native_scan_counts_transfers_as_the_reference(native, frames, chunk) -> None:
    """The C scan counts the delivery-ids of plain transfers itself: the same bytes for proton, and the
    same ids, renumberings and formats as the pure-Python reading, however the stream is cut."""
    data = b"AMQP\x00\x01\x00\x00" + b"".join(frames)
    seen = []
    for codec in (native, None):
        values._native = codec
        reader = IncomingFrames()
        out = b"".join(reader.feed(data[start:start + chunk]) for start in range(0, len(data), chunk))
        seen.append((out, reader._next_id, reader._partial, reader.formats, reader.renumbered))
    assert seen[0] == seen[1]
