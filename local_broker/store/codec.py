"""A small tagged JSON encoding that keeps Python value types through the store.

JSON keeps str, int, float, bool and None apart by itself; bytes, datetime, UUID, timedelta, enums,
dataclasses, lists, the AMQP number types of python-qpid-proton (a message's int32 or uint property,
which must go back to its receiver in its own type) and described values (.NET sends a TimeSpan, Uri or
DateTimeOffset property as one) are wrapped as {"$t": tag, "v": value}.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import uuid
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Any

from proton import Described, byte, float32, int32, short, symbol, ubyte, uint, ulong, ushort

_PLAIN = (str, int, float, bool, type(None))
_TYPES: dict[str, type] = {}
_NUMBERS: dict[str, type] = {
    cls.__name__: cls for cls in (byte, short, int32, ubyte, ushort, uint, ulong, float32)}


def register(*classes: type) -> None:
    """Make dataclasses and enums storable by their class name."""
    for cls in classes:
        _TYPES[cls.__name__] = cls


def encode_value(value: Any) -> Any:
    if type(value) in _PLAIN:
        if type(value) is float and not math.isfinite(value):
            return {"$t": "f", "v": repr(value)}
        return value
    if isinstance(value, Enum):
        return {"$t": "e", "c": type(value).__name__, "v": value.value}
    if isinstance(value, str):  # str subclasses (e.g. AMQP symbol) are kept as str
        return str(value)
    if _NUMBERS.get(type(value).__name__) is type(value):
        plain = float(value) if isinstance(value, float) else int(value)
        return {"$t": "n", "c": type(value).__name__, "v": plain}
    if isinstance(value, bool | int):
        return int(value) if not isinstance(value, bool) else bool(value)
    if isinstance(value, float):
        return encode_value(float(value))
    if isinstance(value, bytes | bytearray | memoryview):
        return {"$t": "b", "v": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return {"$t": "d", "v": value.isoformat()}
    if isinstance(value, timedelta):
        return {"$t": "t", "v": [value.days, value.seconds, value.microseconds]}
    if isinstance(value, uuid.UUID):
        return {"$t": "u", "v": str(value)}
    if isinstance(value, list | tuple):
        return {"$t": "l", "v": [encode_value(v) for v in value]}
    if isinstance(value, Described):
        symbolic = isinstance(value.descriptor, symbol)  # descriptors are symbols or ulongs
        return {"$t": "x", "s": symbolic, "v": [encode_value(value.descriptor), encode_value(value.value)]}
    if isinstance(value, dict):
        return {"$t": "m", "v": [[encode_value(k), encode_value(v)] for k, v in value.items()]}
    if dataclasses.is_dataclass(value):
        fields = {f.name: encode_value(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"$t": "c", "c": type(value).__name__, "v": fields}
    raise TypeError(f"cannot store a value of type {type(value).__name__}")


def decode_value(value: Any) -> Any:
    if type(value) is not dict:
        return value
    tag, v = value["$t"], value.get("v")
    if tag == "b":
        return base64.b64decode(v)
    if tag == "d":
        return datetime.fromisoformat(v)
    if tag == "t":
        return timedelta(days=v[0], seconds=v[1], microseconds=v[2])
    if tag == "u":
        return uuid.UUID(v)
    if tag == "f":
        return float(v)
    if tag == "l":
        return [decode_value(x) for x in v]
    if tag == "m":
        return {decode_value(k): decode_value(x) for k, x in v}
    if tag == "n":
        return _NUMBERS[value["c"]](v)
    if tag == "x":
        descriptor = decode_value(v[0])
        return Described(symbol(descriptor) if value["s"] else descriptor, decode_value(v[1]))
    if tag == "e":
        return _TYPES[value["c"]](v)
    if tag == "c":
        cls = _TYPES[value["c"]]
        return cls(**{k: decode_value(x) for k, x in v.items()})
    raise ValueError(f"unknown stored value tag {tag!r}")


_STORABLE = (str, int, float, bool, type(None), bytes, bytearray, memoryview, datetime, timedelta, uuid.UUID,
             Described)


def unstorable(props: dict[Any, Any]) -> str | None:
    """The first key whose name or value the store cannot keep (None when all can be kept).

    Keys must be strings; values simple types, or lists/dicts of them. Subclasses are kept as their
    base type (an AMQP symbol comes back as str, a ulong as int).
    """
    for k, v in props.items():
        if not isinstance(k, str):
            return repr(k)
        if type(v) in _PLAIN:
            continue
        if isinstance(v, list | tuple):
            if any(unstorable({"": x}) for x in v):
                return k
        elif isinstance(v, dict):
            if any(unstorable({"": x}) for x in v.values()) or any(unstorable({"": x}) for x in v):
                return k
        elif not isinstance(v, _STORABLE):
            return k
    return None


def encode_properties(props: dict[str, Any] | None) -> dict[str, Any] | None:
    """Application properties / annotations: plain values pass through, others are tagged."""
    if props is None:
        return None
    for v in props.values():
        if type(v) not in _PLAIN or (type(v) is float and not math.isfinite(v)):
            return {k: encode_value(x) for k, x in props.items()}
    return props


def decode_properties(props: dict[str, Any] | None) -> dict[str, Any] | None:
    if props is None:
        return None
    for v in props.values():
        if type(v) is dict:
            return {k: decode_value(x) for k, x in props.items()}
    return props


def _unencodable(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# json's C encoder made once (json.dumps and JSONEncoder.encode build one per call, ~1 us per row):
# compact separators, no check for cycles (stored values are trees built by the broker).
_encode = json.encoder.c_make_encoder(  # type: ignore[attr-defined]
    None, _unencodable, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True)


def dumps(value: Any) -> str:
    """Compact JSON of a stored record (what json.dumps(value, separators=(",", ":")) gives)."""
    return "".join(_encode(value, 0))


loads = json.loads
