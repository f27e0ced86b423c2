"""AMQP 1.0 primitive values <-> Python, in pure Python for the per-message hot path.

proton's `Data` goes through cffi for every item and costs tens of microseconds per section; the
values Service Bus messages carry (null, booleans, integers, strings, symbols, binaries, uuids,
timestamps, lists and maps of those) are decoded and encoded here directly. Anything else (described
values, arrays, decimals, chars) falls back to proton `Data`, so every valid value still works.
Decoded values keep their AMQP type where it is not the one a plain Python value encodes to: `symbol`,
`timestamp`, and proton's number types (ubyte, byte, ushort, short, uint, int32, ulong, float32), so that
an int a .NET client put in an application property comes back an int, not a long; a long decodes to a
plain int, which encodes as a long.

The same work is done in C by `_speedups` (built from _speedups.c when a compiler is present at install)
when it imports and `SBFED_PURE_PYTHON` is not set; it declines whatever it does not handle (including
every malformed input), and the Python code below, the reference, then decides.
"""

from __future__ import annotations

import os
import struct
import uuid
from datetime import datetime
from typing import Any

from proton import (
    Array,
    Data,
    Described,
    byte,
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

_B = struct.Struct(">b")
_H = struct.Struct(">H")
_h = struct.Struct(">h")
_I = struct.Struct(">I")
_i = struct.Struct(">i")
_Q = struct.Struct(">Q")
_q = struct.Struct(">q")
_d = struct.Struct(">d")
_f = struct.Struct(">f")
# Fixed-width numbers -> (their layout, their AMQP type, or None for a plain Python value): smalllong,
# long, double plain; byte, smallint, ushort, short, uint, int, float typed.
_FIXED_WIDTH = {0x55: (_B, None), 0x81: (_q, None), 0x82: (_d, None),
                0x51: (_B, byte), 0x54: (_B, int32), 0x60: (_H, ushort), 0x61: (_h, short),
                0x70: (_I, uint), 0x71: (_i, int32), 0x72: (_f, float32)}
_ULONG_0, _UINT_0 = ulong(0), uint(0)


class _Fallback(Exception):
    """A value this module does not decode itself."""


def _read(buf: bytes, pos: int) -> tuple[Any, int]:
    code = buf[pos]
    pos += 1
    if code == 0x40:
        return None, pos
    if code == 0x41:
        return True, pos
    if code == 0x42:
        return False, pos
    if code == 0x43:
        return _UINT_0, pos
    if code == 0x44:  # ulongs stay ulongs: a ulong message-id (Java's requests) comes back as one
        return _ULONG_0, pos
    if code == 0x45:
        return [], pos
    if code == 0x50:
        return ubyte(buf[pos]), pos + 1
    if code == 0x52:
        return uint(buf[pos]), pos + 1
    if code == 0x53:
        return ulong(buf[pos]), pos + 1
    if code == 0x80:
        return ulong(_Q.unpack_from(buf, pos)[0]), pos + 8
    fixed = _FIXED_WIDTH.get(code)
    if fixed is not None:
        layout, kind = fixed
        value = layout.unpack_from(buf, pos)[0]
        return (value if kind is None else kind(value)), pos + layout.size
    if code == 0x56:
        return buf[pos] != 0, pos + 1
    if code == 0x83:
        return timestamp(_q.unpack_from(buf, pos)[0]), pos + 8
    if code == 0x98:
        return uuid.UUID(bytes=bytes(buf[pos:pos + 16])), pos + 16
    if code in (0xA0, 0xA1, 0xA3):
        size = buf[pos]
        pos += 1
    elif code in (0xB0, 0xB1, 0xB3):
        size = _I.unpack_from(buf, pos)[0]
        pos += 4
    elif code in (0xC0, 0xC1):
        return _compound(buf, code == 0xC1, buf[pos + 1], pos + 2, pos + 1 + buf[pos])
    elif code in (0xD0, 0xD1):
        size, count = _I.unpack_from(buf, pos)[0], _I.unpack_from(buf, pos + 4)[0]
        return _compound(buf, code == 0xD1, count, pos + 8, pos + 4 + size)
    else:
        raise _Fallback
    end = pos + size
    if end > len(buf):
        raise IndexError("truncated value")
    raw = bytes(buf[pos:end])
    if code in (0xA0, 0xB0):
        return raw, end
    text = raw.decode("utf-8")
    return (symbol(text) if code in (0xA3, 0xB3) else text), end


def _compound(buf: bytes, is_map: bool, count: int, pos: int, end: int) -> tuple[Any, int]:
    items = []
    for _ in range(count):
        item, pos = _read(buf, pos)
        items.append(item)
    if pos != end:
        raise IndexError("compound size mismatch")
    if is_map:
        return dict(zip(items[::2], items[1::2], strict=True)), end
    return items, end


def decode_value(buf: bytes) -> Any:
    """The value encoded at the start of `buf` (binaries as owned `bytes`)."""
    return read_value(buf, 0)[0]


def read_value(buf: bytes, pos: int) -> tuple[Any, int]:
    """The value encoded at `pos` of `buf`, and the position just after it."""
    if _native is not None:
        found = _native.read_value(buf, pos)
        if found is not NotImplemented:
            return found
    return _read_value(buf, pos)


def _read_value(buf: bytes, pos: int) -> tuple[Any, int]:
    try:
        return _read(buf, pos)
    except _Fallback:
        pass
    data = Data()
    used = data.decode(bytes(buf[pos:]))
    data.rewind()
    data.next()
    return _owned(data.get_object()), pos + used


def _owned(value: Any) -> Any:
    """proton returns binaries as memoryviews into the `Data` buffer, which dies with it: copy them out."""
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, dict):
        return type(value)((_owned(k), _owned(v)) for k, v in value.items())
    if isinstance(value, list):
        return [_owned(v) for v in value]
    if isinstance(value, Described):
        return Described(value.descriptor, _owned(value.value))
    if isinstance(value, Array):
        return Array(value.descriptor, value.type, *(_owned(v) for v in value.elements))
    return value


def _sized(small: int, large: int, payload: bytes) -> bytes:
    if len(payload) < 256:
        return bytes((small, len(payload))) + payload
    return bytes((large,)) + _I.pack(len(payload)) + payload


def _write(value: Any, out: list[bytes]) -> None:
    kind = type(value)
    if value is None:
        out.append(b"\x40")
    elif kind is bool:
        out.append(b"\x41" if value else b"\x42")
    elif kind is int:
        if -128 <= value <= 127:
            out.append(b"\x55" + _B.pack(value))
        elif -(1 << 63) <= value < (1 << 63):
            out.append(b"\x81" + _q.pack(value))
        else:
            out.append(b"\x80" + _Q.pack(value))
    elif kind is str:
        out.append(_sized(0xA1, 0xB1, value.encode("utf-8")))
    elif kind is symbol:
        out.append(_sized(0xA3, 0xB3, value.encode("utf-8")))
    elif kind is bytes or kind is bytearray or kind is memoryview:
        out.append(_sized(0xA0, 0xB0, bytes(value)))
    elif kind is timestamp:
        out.append(b"\x83" + _q.pack(value))
    elif kind is datetime:
        out.append(b"\x83" + _q.pack(round(value.timestamp() * 1000)))
    elif kind is uuid.UUID:
        out.append(b"\x98" + value.bytes)
    elif kind is float:
        out.append(b"\x82" + _d.pack(value))
    elif kind is uint:
        out.append(b"\x70" + _I.pack(value))
    elif kind is ulong:
        out.append(b"\x80" + _Q.pack(value))
    elif kind is int32:
        out.append(b"\x71" + _i.pack(value))
    elif kind in _NUMBER_CODES:
        code, fixed = _NUMBER_CODES[kind]
        out.append(code + fixed.pack(value))
    elif kind is dict:
        _write_compound(0xD1, [x for pair in value.items() for x in pair], 2 * len(value), out)
    elif kind is list:
        _write_compound(0xD0, value, len(value), out)
    else:
        data = Data()
        data.put_object(value)
        out.append(bytes(data.encode()))


_NUMBER_CODES = {ubyte: (b"\x50", struct.Struct(">B")), byte: (b"\x51", _B), ushort: (b"\x60", _H),
                 short: (b"\x61", _h), float32: (b"\x72", _f)}


def _write_compound(code: int, items: Any, count: int, out: list[bytes]) -> None:
    parts: list[bytes] = []
    for item in items:
        _write(item, parts)
    body = b"".join(parts)
    out.append(bytes((code,)) + _I.pack(len(body) + 4) + _I.pack(count) + body)


def encode_map_items(items: list[Any]) -> bytes:
    """A map given as its flat key, value, key, value... list (the bytes `encode_value` makes of a dict)."""
    if _native is not None:
        encoded = _native.encode_map_items(items)
        if encoded is not NotImplemented:
            return encoded
    out: list[bytes] = []
    _write_compound(0xD1, items, len(items), out)
    return out[0]


def encode_as_is(value: Any) -> bytes | None:
    """`encode_value(value)` by the C codec alone, which encodes the plain and AMQP types and declines the
    rest (datetimes, timedeltas, chars...); None without it or when it declines."""
    if _native is None:
        return None
    encoded = _native.encode_value(value)
    return None if encoded is NotImplemented else encoded


def encode_value(value: Any) -> bytes:
    encoded = encode_as_is(value)
    if encoded is not None:
        return encoded
    out: list[bytes] = []
    _write(value, out)
    return b"".join(out)


def native_codec() -> Any:
    """The C module (`_speedups`), configured with the Python types it decodes into; None when it was not
    built (no C compiler at install)."""
    try:
        from local_broker.wire.amqp import _speedups
    except ImportError:
        return None
    _speedups.configure(ubyte, byte, ushort, short, uint, int32, ulong, float32, symbol, timestamp,
                        uuid.UUID, uuid.SafeUUID.unknown)
    return _speedups


# the C code unless SBFED_PURE_PYTHON asks for the reference (tests run both)
_native = None if os.environ.get("SBFED_PURE_PYTHON", "") not in ("", "0") else native_codec()
