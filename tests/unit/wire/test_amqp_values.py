"""The pure-Python AMQP value codec agrees with proton's own encoder/decoder, and falls back for the rest."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from proton import (
    UNDESCRIBED,
    Array,
    Data,
    Described,
    byte,
    char,
    decimal64,
    float32,
    int32,
    short,
    symbol,
    timestamp,
    ubyte,
    uint,
    ulong,
    ushort,
)

from local_broker.wire.amqp.values import decode_value, encode_map_items, encode_value

pytestmark = pytest.mark.usefixtures("value_codec")  # each test with the C codec and the pure-Python one

SIMPLE = [
    None, True, False, 0, 7, -7, 300, -300, 2**40, -(2**40), 1.5, "", "text", "é" * 300, symbol("sym"),
    symbol("s" * 300), b"", b"\x00\xff" * 200, uuid.UUID(int=12345), timestamp(1700000000123), uint(5),
    ulong(2**50), int32(-9), [], [1, "a", None], {"k": "v", "n": 7}, {symbol("x-opt"): [1, {"a": b"b"}]},
]


def _copied(value):
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, dict):
        return {_copied(k): _copied(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copied(v) for v in value]
    return value


def _proton_decode(raw: bytes):
    data = Data()
    data.decode(raw)
    data.rewind()
    data.next()
    return _copied(data.get_object())  # before `data` (which owns the binaries) is gone


def _proton_encode(value) -> bytes:
    data = Data()
    data.put_object(value)
    return bytes(data.encode())


@pytest.mark.parametrize("value", SIMPLE)
def test_round_trip_and_proton_agrees(value) -> None:
    raw = encode_value(value)
    assert decode_value(raw) == value
    assert _proton_decode(raw) == value
    assert decode_value(_proton_encode(value)) == value


def test_types_that_matter_on_the_way_back_are_kept() -> None:
    assert type(decode_value(encode_value(symbol("s")))) is symbol
    assert type(decode_value(encode_value(timestamp(5)))) is timestamp
    assert type(decode_value(encode_value(7))) is int and encode_value(7)[0] == 0x55  # a long
    assert decode_value(encode_value(datetime(2024, 1, 1, tzinfo=UTC))) == timestamp(1704067200000)


@pytest.mark.parametrize("value", [
    ubyte(200), byte(-2), ushort(60000), short(-300), uint(0), uint(7), uint(2**31), int32(-9), int32(70000),
    ulong(0), ulong(9), ulong(2**63), float32(1.5),
])
def test_amqp_numbers_keep_their_type(value) -> None:
    """What a client sent as an int (0x71, or 0x54 as proton writes small ones) stays an int, and so on:
    .NET unboxes an application property or annotation as the type it was sent in."""
    raw = encode_value(value)
    assert type(decode_value(raw)) is type(value) and decode_value(raw) == value
    proton_raw = _proton_encode(value)
    assert type(decode_value(proton_raw)) is type(value) and decode_value(proton_raw) == value
    assert type(_proton_decode(raw)) is type(value)


@pytest.mark.parametrize("value", [char("c"), decimal64(Decimal(7)),
                                   Described(symbol("d"), "v"), Array(UNDESCRIBED, Data.INT, 1, 2)])
def test_other_types_fall_back_to_proton(value) -> None:
    raw = encode_value(value)
    assert raw == _proton_encode(value)
    assert decode_value(raw) == _proton_decode(raw)


def test_truncated_input_raises() -> None:
    with pytest.raises(IndexError):
        decode_value(encode_value("text")[:-1])


def test_a_map_from_its_items_is_the_dict_encoded() -> None:
    items = [symbol("x-opt-sequence-number"), 7, symbol("x-opt-enqueued-time"), timestamp(1_700_000_000_000),
             symbol("x-opt-partition-key"), "k" * 300]
    assert encode_map_items(items) == encode_value(dict(zip(items[::2], items[1::2], strict=True)))
    assert encode_map_items([]) == encode_value({})
