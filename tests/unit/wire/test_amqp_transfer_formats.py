"""The message-format of incoming transfers, read from the frames a connection receives (proton drops it)."""

from __future__ import annotations

import struct

import pytest
from proton import ubyte, uint

from local_broker.wire.amqp.compat import TransferFormats
from local_broker.wire.amqp.values import encode_value

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
    formats = TransferFormats()
    for start in range(0, len(CONVERSATION), chunk):
        formats.feed(CONVERSATION[start:start + chunk])
    assert formats.formats == {("sender-a", b"\x00\x00\x00\x02"): BATCH, ("sender-b", b"tag-b"): BATCH}


def test_a_transfer_on_an_unknown_link_or_malformed_frame_is_left_to_proton() -> None:
    formats = TransferFormats()
    formats.feed(transfer(3, 9, b"t", BATCH, b"") + frame(0, TRANSFER, [b"not a handle"]))
    assert formats.formats == {}
