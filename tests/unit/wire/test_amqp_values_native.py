"""The C value codec (`_speedups`) against the pure-Python reference (values.py): byte for byte on encode,
value and type for type on decode, and on malformed input it declines, so the caller gets the reference's
error (IndexError, struct.error, ValueError, UnicodeDecodeError, RecursionError...; MessageDecodeError from
a message) and never a crash."""

from __future__ import annotations

import math
import os
import struct
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proton import byte, float32, int32, short, symbol, timestamp, ubyte, uint, ulong, ushort

from local_broker.wire.amqp import codec, values

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_text = st.text(max_size=300)
_scalars = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    _text, _text.map(symbol), st.binary(max_size=300),
    st.uuids(), st.integers(min_value=-(2**63), max_value=2**63 - 1).map(timestamp),
    st.integers(0, 255).map(ubyte), st.integers(-128, 127).map(byte),
    st.integers(0, 2**16 - 1).map(ushort), st.integers(-(2**15), 2**15 - 1).map(short),
    st.integers(0, 2**32 - 1).map(uint), st.integers(-(2**31), 2**31 - 1).map(int32),
    st.integers(0, 2**64 - 1).map(ulong),
    st.floats(width=32, allow_nan=True).map(float32),
)
_keys = st.one_of(_text, _text.map(symbol), st.integers(-1000, 1000), st.integers(0, 2**32 - 1).map(uint))
amqp_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(_keys, inner, max_size=6),
    max_leaves=30,
)


def _typed(value: Any) -> Any:
    """A value with every type spelled out (floats by their bits, so NaN equals NaN)."""
    if isinstance(value, float):
        return type(value), struct.pack(">d", value)
    if isinstance(value, list | tuple):
        return type(value), [_typed(v) for v in value]
    if isinstance(value, dict):
        return dict, [(_typed(k), _typed(v)) for k, v in value.items()]
    if isinstance(value, codec.Sections | codec.Header):
        return type(value), [_typed(getattr(value, name)) for name in value.__slots__]
    return type(value), value


def _outcome(call: Any) -> Any:
    """What a call gives: its value, typed, or the class of the error it raises."""
    try:
        return _typed(call())
    except Exception as exc:
        return type(exc)


@SETTINGS
@given(amqp_values)
def test_encoding_is_byte_for_byte_the_reference(native, value) -> None:
    encoded = native.encode_value(value)
    assert encoded is not NotImplemented
    assert encoded == _pure(values.encode_value, value)


@SETTINGS
@given(st.lists(st.tuples(_keys, amqp_values), max_size=8))
def test_map_items_encode_as_the_reference(native, pairs) -> None:
    items = [x for pair in pairs for x in pair]
    assert native.encode_map_items(items) == _pure(values.encode_map_items, items)


@SETTINGS
@given(amqp_values)
def test_decoding_is_value_and_type_for_type_the_reference(native, value) -> None:
    encoded = values.encode_value(value)
    found = native.read_value(encoded, 0)
    assert found is not NotImplemented
    assert _typed(found) == _typed(values._read_value(encoded, 0))


@SETTINGS
@given(amqp_values, st.data())
def test_damaged_encodings_decode_as_the_reference_or_are_declined(native, value, data) -> None:
    """Truncated, resized and overwritten bytes: what the C code decodes, the reference decodes the same;
    what it declines, the reference decides (and read_value gives that outcome)."""
    encoded = bytearray(values.encode_value(value))
    cut = data.draw(st.integers(0, len(encoded)))
    damaged = bytes(encoded[:cut])
    if encoded and data.draw(st.booleans()):
        at = data.draw(st.integers(0, len(encoded) - 1))
        encoded[at] = data.draw(st.integers(0, 255))
        damaged = bytes(encoded)
    _agrees(native, damaged)


@SETTINGS
@given(st.binary(max_size=64))
def test_random_bytes_decode_as_the_reference_or_are_declined(native, raw) -> None:
    _agrees(native, raw)


def _agrees(native, raw: bytes) -> None:
    reference = _outcome(lambda: values._read_value(raw, 0))
    found = native.read_value(raw, 0)
    if found is not NotImplemented:
        assert _typed(found) == reference
    assert _outcome(lambda: values.read_value(raw, 0)) == reference


MALFORMED = {
    "empty": b"",
    "truncated string": b"\xa1\x05abc",
    "truncated long": b"\x81\x00\x01",
    "truncated uuid": b"\x98" + bytes(8),
    "truncated list": b"\xd0\x00\x00\x00\x0a\x00\x00\x00\x02\x55",
    "list size too small": b"\xc0\x01\x02\x55\x01\x55\x02",
    "list size too large": b"\xc0\x09\x01\x40",
    "odd map": b"\xc1\x03\x01\x40",
    "unhashable map key": b"\xc1\x05\x02\x45\x55\x01",
    "huge binary": b"\xb0\xff\xff\xff\xff" + bytes(10),
    "huge list count": b"\xd0\x00\x00\x00\x08\xff\xff\xff\xff\x40\x40\x40\x40",
    "huge list size": b"\xd0\xff\xff\xff\xff\x00\x00\x00\x01\x40",
    "bad utf-8": b"\xa1\x02\xc3\x28",
    "bad utf-8 symbol": b"\xa3\x01\xff",
    "unknown constructor": b"\x2f",
    "reserved constructor in a list": b"\xc0\x03\x02\x40\xee",
    "deep nesting": b"\xc0\x03\x01" * 3000 + b"\x40",
}


@pytest.mark.parametrize("raw", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_values_give_the_reference_error(native, raw) -> None:
    reference = _outcome(lambda: values._read_value(raw, 0))
    assert isinstance(reference, type) and issubclass(reference, Exception)
    assert native.read_value(raw, 0) is NotImplemented
    assert _outcome(lambda: values.read_value(raw, 0)) is reference


@pytest.mark.parametrize("raw", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_sections_are_a_message_decode_error(value_codec, raw) -> None:
    message = codec.described(codec.APPLICATION_PROPERTIES, raw) + codec.described(codec.DATA, b"\xa0\x00")
    with pytest.raises(codec.MessageDecodeError):
        codec.decode_sections(message)


DECLINED = [
    datetime(2024, 1, 1, tzinfo=UTC), memoryview(b"m"), 2**64, -(2**63) - 1,
    uint(2**32), ushort(70000), short(40000), byte(200), int32(2**31), ubyte(256),
    "\ud800", [1, "\udfff"], {"k": datetime(2024, 1, 1, tzinfo=UTC)}, float32(1e300), object(),
]


@pytest.mark.parametrize("value", DECLINED, ids=repr)
def test_values_the_c_code_does_not_encode_get_the_reference_outcome(native, value) -> None:
    assert native.encode_value(value) is NotImplemented
    assert _outcome(lambda: values.encode_value(value)) == _outcome(lambda: _pure(values.encode_value, value))


def test_deep_nesting_encodes_as_the_reference(value_codec) -> None:
    deep: list[Any] = []
    for _ in range(5000):
        deep = [deep]
    assert _outcome(lambda: values.encode_value(deep)) is RecursionError


def test_a_nan_float32_round_trips(native) -> None:
    decoded, _ = native.read_value(native.encode_value(float32(math.nan)), 0)
    assert type(decoded) is float32 and math.isnan(decoded)


def test_uuid_comes_back_a_full_uuid(native) -> None:
    value = uuid.uuid4()
    decoded, end = native.read_value(b"\x98" + value.bytes + b"tail", 0)
    assert decoded == value and decoded.version == 4 and decoded.is_safe is uuid.SafeUUID.unknown
    assert hash(decoded) == hash(value) and str(decoded) == str(value) and end == 17


def _pure(function: Any, *args: Any) -> Any:
    """`function` run on the pure-Python path."""
    saved, values._native = values._native, None
    try:
        return function(*args)
    finally:
        values._native = saved


_SECTION_CODES = st.sampled_from([codec.HEADER, codec.DELIVERY_ANNOTATIONS, codec.MESSAGE_ANNOTATIONS,
                                  codec.PROPERTIES, codec.APPLICATION_PROPERTIES, codec.DATA,
                                  codec.AMQP_SEQUENCE, codec.AMQP_VALUE, codec.FOOTER])
_SECTION_VALUES = st.one_of(
    amqp_values, st.binary(max_size=40).map(lambda raw: values.encode_value(raw)),
    st.lists(st.sampled_from([True, None, 5, uint(60000), ubyte(7), "id", symbol("text/plain")]), max_size=7),
)


@SETTINGS
@given(st.lists(st.tuples(_SECTION_CODES, _SECTION_VALUES), max_size=6), st.data())
def test_messages_split_as_the_reference(native, sections, data) -> None:
    """Messages of any sections in any order, some damaged: the C pass gives the reference's Sections, or
    declines and the reference decides (as it does when a section C read is of the wrong type)."""
    raw = bytearray(b"".join(codec.described(code, value if isinstance(value, bytes) else
                                             values.encode_value(value)) for code, value in sections))
    if raw and data.draw(st.booleans()):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    if raw and data.draw(st.booleans()):
        del raw[data.draw(st.integers(0, len(raw) - 1)):]
    raw = bytes(raw)
    reference = _outcome(lambda: _pure(codec.decode_sections, raw))
    assert _outcome(lambda: codec.decode_sections(raw)) == reference
    found = native.decode_sections(raw)
    if found is not NotImplemented and not isinstance(reference, type):
        assert found[4] == _pure(codec.decode_sections, raw).body


def test_an_sdk_message_is_split_in_c(native) -> None:
    key = symbol("x-opt-partition-key")
    raw = (codec.encode_header(True, 4, 5000, False, 0)
           + codec.described(codec.MESSAGE_ANNOTATIONS, values.encode_value({key: "p"}))
           + codec.described(codec.PROPERTIES, values.encode_value(["id-1", None, None, "subject"]))
           + codec.described(codec.APPLICATION_PROPERTIES, values.encode_value({"k": int32(3)}))
           + codec.described(codec.DATA, values.encode_value(b"body"))
           + codec.described(codec.DELIVERY_ANNOTATIONS, values.encode_value({symbol("x-opt-d"): 1})))
    assert _typed(native.decode_sections(raw)) == _typed((
        [True, ubyte(4), uint(5000), False, uint(0)], {key: "p"}, ["id-1", None, None, "subject"],
        {"k": int32(3)}, codec.described(codec.DATA, values.encode_value(b"body"))))
    assert _typed(codec.decode_sections(raw)) == _typed(_pure(codec.decode_sections, raw))


def test_a_section_given_twice_is_applied_twice(value_codec) -> None:
    """The reference applies each copy in turn, so a bad first header fails even when a second one follows."""
    raw = (codec.described(codec.HEADER, values.encode_value([None, ""]))
           + codec.described(codec.HEADER, values.encode_value(b""))
           + codec.described(codec.DATA, b"\xa0\x00"))
    with pytest.raises(codec.MessageDecodeError):
        codec.decode_sections(raw)


def test_the_c_codec_is_used_unless_pure_python_is_asked_for(native) -> None:
    if os.environ.get("SBFED_PURE_PYTHON", "") in ("", "0"):
        assert values._native is native
    check = "from local_broker.wire.amqp import values; print(values._native is None)"
    for setting, pure in (("1", "True"), ("0", "False"), ("", "False")):
        said = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True,
                              env={**os.environ, "SBFED_PURE_PYTHON": setting}).stdout.strip()
        assert said == pure, setting
