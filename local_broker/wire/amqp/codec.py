"""AMQP 1.0 message sections: split what a client sent, and build what a receiver gets.

proton's `Message` re-encodes a message and loses details the SDK depends on (delivery-count 0, the
exact types of properties, described bodies), so the broker works on the encoded sections instead:
the header, message-annotations, properties and application-properties are decoded to Python values
(values.py; `symbol` and `timestamp` keep their AMQP type), and everything from the
body on (data / amqp-sequence / amqp-value sections and the footer) is kept as raw bytes and sent back
verbatim. Delivery-annotations are hop-by-hop and dropped.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from local_broker.wire.amqp import values
from local_broker.wire.amqp.values import decode_value, encode_value, read_value

HEADER, DELIVERY_ANNOTATIONS, MESSAGE_ANNOTATIONS, PROPERTIES, APPLICATION_PROPERTIES = range(0x70, 0x75)
DATA, AMQP_SEQUENCE, AMQP_VALUE, FOOTER = range(0x75, 0x79)
BODY_SECTIONS = frozenset({DATA, AMQP_SEQUENCE, AMQP_VALUE})

PROPERTY_FIELDS = (
    "message_id", "user_id", "to", "subject", "reply_to", "correlation_id", "content_type",
    "content_encoding", "absolute_expiry_time", "creation_time", "group_id", "group_sequence",
    "reply_to_group_id",
)

# Fixed-width AMQP constructors -> payload size (AMQP 1.0 part 1, 1.6).
_FIXED = {
    **dict.fromkeys((0x40, 0x41, 0x42, 0x43, 0x44, 0x45), 0),
    **dict.fromkeys((0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56), 1),
    **dict.fromkeys((0x60, 0x61), 2),
    **dict.fromkeys((0x70, 0x71, 0x72, 0x73, 0x74), 4),
    **dict.fromkeys((0x80, 0x81, 0x82, 0x83, 0x84), 8),
    **dict.fromkeys((0x94, 0x98), 16),
}
_SIZE1 = frozenset({0xA0, 0xA1, 0xA3, 0xC0, 0xC1, 0xE0})
_SIZE4 = frozenset({0xB0, 0xB1, 0xB3, 0xD0, 0xD1, 0xF0})
_U32 = struct.Struct(">I")


class MessageDecodeError(ValueError):
    """The bytes of a transfer are not a well-formed AMQP message."""


def _skip(buf: bytes, pos: int) -> int:
    """Position just after the encoded value that starts at `pos`."""
    try:
        code = buf[pos]
        if code == 0x00:  # described: descriptor, then the value
            return _skip(buf, _skip(buf, pos + 1))
        if code in _FIXED:
            end = pos + 1 + _FIXED[code]
        elif code in _SIZE1:
            end = pos + 2 + buf[pos + 1]
        elif code in _SIZE4:
            end = pos + 5 + struct.unpack_from(">I", buf, pos + 1)[0]
        else:
            raise MessageDecodeError(f"unknown AMQP type constructor 0x{code:02x} at offset {pos}")
    except (IndexError, struct.error) as exc:
        raise MessageDecodeError(f"truncated AMQP value at offset {pos}") from exc
    if end > len(buf):
        raise MessageDecodeError(f"truncated AMQP value at offset {pos}")
    return end


def _section_code(buf: bytes, pos: int) -> int:
    """The descriptor of the section at `pos` (only small/long ulong descriptors are valid sections)."""
    if buf[pos] != 0x00:
        raise MessageDecodeError(f"expected a described section at offset {pos}")
    if buf[pos + 1] == 0x53:
        code = buf[pos + 2]
    elif buf[pos + 1] == 0x80:
        code = struct.unpack_from(">Q", buf, pos + 2)[0]
    else:
        raise MessageDecodeError(f"unsupported section descriptor at offset {pos}")
    if not HEADER <= code <= FOOTER:
        raise MessageDecodeError(f"0x{code:x} is not a message section")
    return code


def split_sections(buf: bytes) -> list[tuple[int, int, int]]:
    """(section code, start, end) of every top-level section of an encoded message."""
    sections, pos = [], 0
    while pos < len(buf):
        code = _section_code(buf, pos)
        end = _skip(buf, pos)
        sections.append((code, pos, end))
        pos = end
    return sections


def _decode_value(section: bytes) -> Any:
    """The Python value of one encoded section's content (the descriptor is dropped)."""
    return decode_value(section[3:] if section[1] == 0x53 else section[10:])


def described(code: int, encoded_value: bytes) -> bytes:
    """A section: the small-ulong descriptor (the only form the SDK decodes) and its encoded value."""
    return b"\x00\x53" + bytes((code,)) + encoded_value


@dataclass(slots=True)
class Header:
    durable: bool = False
    priority: int = 4
    ttl_ms: int | None = None
    first_acquirer: bool = False
    delivery_count: int = 0


@dataclass(slots=True)
class Sections:
    """One encoded message split up: decoded header/annotations/properties, raw body bytes."""

    header: Header = field(default_factory=Header)
    annotations: dict[Any, Any] = field(default_factory=dict)
    properties: dict[str, Any] = field(default_factory=dict)  # PROPERTY_FIELDS names, only those set
    application_properties: dict[Any, Any] = field(default_factory=dict)
    body: bytes = b""  # body sections + footer, verbatim


def decode_sections(buf: bytes) -> Sections:
    """Parse one encoded message (as a client transferred it) in one pass: each section's value is read
    where it lies (no slice per section), and a body that runs to the end is one slice. The C codec
    (values.py) makes that pass when it can; what it declines, and every error, is `_decode_sections`'."""
    buf = bytes(buf)
    native = values._native
    found = NotImplemented if native is None else native.decode_sections(buf)
    if found is NotImplemented:
        return _decode_sections(buf)
    header, annotations, properties, application_properties, body = found
    try:  # one object per section found, none for those absent
        return Sections(Header() if header is None else _header(header),
                        {} if annotations is None else dict(annotations),
                        {} if properties is None else _properties(properties),
                        {} if application_properties is None else dict(application_properties), body)
    except Exception:  # a section of the wrong type: the reference says which
        return _decode_sections(buf)


def _decode_sections(buf: bytes) -> Sections:
    out = Sections()
    body_parts: list[tuple[int, int]] = []
    pos, size = 0, len(buf)
    try:
        while pos < size:
            start = pos
            if buf[pos] == 0x00 and buf[pos + 1] == 0x53 and HEADER <= buf[pos + 2] <= FOOTER:
                code, pos = buf[pos + 2], pos + 3
            else:  # the long descriptor form, or an error
                code, pos = _section_code(buf, pos), pos + 10
            if code >= DATA:  # a body section or the footer: kept as it is
                constructor = buf[pos]
                if constructor == 0xB0:  # data sections, inline
                    pos += 5 + _U32.unpack_from(buf, pos + 1)[0]
                elif constructor == 0xA0:
                    pos += 2 + buf[pos + 1]
                else:
                    pos = _skip(buf, pos)
                if pos > size:
                    raise MessageDecodeError(f"truncated AMQP value at offset {start}")
                if body_parts and body_parts[-1][1] == start:
                    body_parts[-1] = (body_parts[-1][0], pos)
                else:
                    body_parts.append((start, pos))
                continue
            if code != DELIVERY_ANNOTATIONS and body_parts:
                raise MessageDecodeError("a header, annotation or property section follows the body")
            try:
                value, end = read_value(buf, pos)
                if code != DELIVERY_ANNOTATIONS:  # hop-by-hop; the SDK even puts them after the body
                    _apply_section(out, code, value)
            except Exception as exc:  # bad bytes: IndexError, struct.error, UnicodeDecodeError, proton's
                # own; a section of the wrong type (a header that is no list): TypeError, ValueError
                raise MessageDecodeError(f"cannot decode section 0x{code:x}: {exc}") from exc
            if end > size:
                raise MessageDecodeError(f"truncated AMQP value at offset {pos}")
            pos = end
    except IndexError as exc:
        raise MessageDecodeError(f"truncated AMQP message at offset {pos}") from exc
    if not body_parts:
        raise MessageDecodeError("the message has no body section")
    if len(body_parts) == 1:
        start, end = body_parts[0]
        out.body = buf if start == 0 and end == size else buf[start:end]
    else:
        out.body = b"".join(buf[start:end] for start, end in body_parts)
    return out


def _apply_section(out: Sections, code: int, value: Any) -> None:
    if code == HEADER:
        out.header = _header(value)
    elif code == MESSAGE_ANNOTATIONS:
        out.annotations = dict(value or {})
    elif code == PROPERTIES:
        out.properties = _properties(value)
    elif code == APPLICATION_PROPERTIES:
        out.application_properties = dict(value or {})


def _header(value: Any) -> Header:
    fields = value or ()
    count = len(fields)
    return Header(
        durable=bool(fields[0]) if count > 0 else False,
        priority=4 if count < 2 or fields[1] is None else int(fields[1]),
        ttl_ms=None if count < 3 or fields[2] is None else int(fields[2]),
        first_acquirer=bool(fields[3]) if count > 3 else False,
        delivery_count=int(fields[4] or 0) if count > 4 else 0,
    )


def _properties(value: Any) -> dict[str, Any]:
    """The properties section's fields that are set, by PROPERTY_FIELDS name."""
    return {name: v for name, v in zip(PROPERTY_FIELDS, value or (), strict=False) if v is not None}


def batch_messages(buf: bytes) -> list[bytes]:
    """The messages inside a batch envelope (a transfer with message-format 0x80013700): one per Data
    section, each checked to be a complete encoded message. The envelope's other sections (header,
    properties, application-properties: rhea and the JS SDK write them) describe the envelope, not the
    messages."""
    buf = bytes(buf)
    inner = [_data_payload(buf, start, end) for code, start, end in split_sections(buf) if code == DATA]
    if not inner:
        raise MessageDecodeError("a batch (message-format 0x80013700) without Data sections")
    for position, payload in enumerate(inner):
        _check_message(payload, position)
    return inner


def _data_payload(buf: bytes, start: int, end: int) -> bytes:
    pos = start + 3
    size = buf[pos + 1] if buf[pos] == 0xA0 else struct.unpack_from(">I", buf, pos + 1)[0]
    header = 2 if buf[pos] == 0xA0 else 5
    return buf[pos + header: pos + header + size]


def decode_body(body: bytes) -> tuple[bytes | None, list[Any]]:
    """What a stored body holds, for people to read: (the data sections' bytes joined, []) or, for an
    amqp-value or amqp-sequence body, (None, their decoded values)."""
    data, values = [], []
    for code, start, end in split_sections(body):
        if code == DATA:
            data.append(_data_payload(body, start, end))
        elif code in (AMQP_VALUE, AMQP_SEQUENCE):
            values.append(_decode_value(body[start:end]))
    return (None, values) if values else (b"".join(data), [])


def _check_message(payload: bytes, position: int) -> None:
    incomplete = MessageDecodeError(f"batch message {position} is not a complete AMQP message")
    if len(payload) < 4 or payload[0] != 0x00 or payload[1] != 0x53 or not HEADER <= payload[2] <= FOOTER:
        raise incomplete
    try:
        sections = split_sections(payload)
    except MessageDecodeError:
        raise incomplete from None
    if not any(code in BODY_SECTIONS for code, _, _ in sections):
        raise incomplete


def _uint(value: int) -> bytes:
    if value == 0:
        return b"\x43"
    if value < 256:
        return b"\x52" + bytes((value,))
    return b"\x70" + struct.pack(">I", value)


def encode_header(durable: bool, priority: int, ttl_ms: int | None, first_acquirer: bool,
                  delivery_count: int) -> bytes:
    """The header section with every field present (delivery-count included, even 0: the SDK needs it)."""
    fields = (
        (b"\x41" if durable else b"\x42")
        + b"\x50" + bytes((max(0, min(255, priority)),))
        + (b"\x40" if ttl_ms is None else b"\x70" + struct.pack(">I", min(ttl_ms, 0xFFFFFFFF)))
        + (b"\x41" if first_acquirer else b"\x42")
        + _uint(delivery_count)
    )
    return described(HEADER, b"\xc0" + bytes((len(fields) + 1, 5)) + fields)


def property_list(properties: dict[str, Any]) -> list[Any]:
    """The properties section's list from PROPERTY_FIELDS names (trailing nulls dropped)."""
    values = [properties.get(name) for name in PROPERTY_FIELDS]
    while values and values[-1] is None:
        values.pop()
    return values


def encode_amqp_value_message(properties: dict[str, Any], application_properties: dict[str, Any],
                              value: Any) -> bytes:
    """A request/response message ($cbs, $management): properties, application-properties, amqp-value."""
    return (described(PROPERTIES, encode_value(property_list(properties)))
            + described(APPLICATION_PROPERTIES, encode_value(application_properties))
            + described(AMQP_VALUE, encode_value(value)))


def amqp_value(body: bytes) -> Any:
    """The value of a message body that is one amqp-value section (request bodies of $cbs/$management)."""
    for code, start, end in split_sections(body):
        if code == AMQP_VALUE:
            return _decode_value(body[start:end])
    raise MessageDecodeError("the request body is not an amqp-value section")
