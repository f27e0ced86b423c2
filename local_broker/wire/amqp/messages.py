"""Engine `Message` <-> AMQP bytes, in the Service Bus mapping (servicebus-wire.md 3.3, 4.4).

Inbound: the client's sections are decoded to plain Python values (the engine stores str, int, float,
bool, None, bytes, datetime, uuid, timedelta), `x-opt-*` sender annotations become message fields, and
the body sections stay raw. A batch (transfer message-format 0x80013700) is unpacked into one message per
Data section of its envelope.
Outbound: a header that always carries delivery-count, the client's annotations merged with the
broker's `x-opt-*`, the properties, the application-properties, then the body bytes verbatim.

Every field goes out in the AMQP type Service Bus sends and strict decoders (.NET's AmqpMessageConverter,
uAMQP-C, Java's proton-j) require; tests/compat/wire_types.py holds the table and where each
row comes from. Values a client chose the type of (application properties, its annotations, a message-id
that is a uuid, ulong or binary) go back in that type; the properties the engine does not read
(content-encoding, user-id, group-sequence, and creation-time and absolute-expiry-time of a message
without a time to live) ride along in `Message.amqp_properties`.
"""

from __future__ import annotations

import math
import struct
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from proton import byte, char, float32, int32, short, symbol, timestamp, ubyte, uint, ulong, ushort

from local_broker.engine import Message
from local_broker.wire.amqp import codec, values
from local_broker.wire.amqp.values import encode_as_is, encode_map_items

PARTITION_KEY = "x-opt-partition-key"
VIA_PARTITION_KEY = "x-opt-via-partition-key"
SCHEDULED_ENQUEUE_TIME = "x-opt-scheduled-enqueue-time"
LOCK_TOKEN = "x-opt-lock-token"
BATCH_FORMAT = 0x80013700  # the transfer message-format of a batch envelope (Microsoft's range)
# Annotations the broker writes itself; a client's copy of them (e.g. a forwarded message) is dropped.
BROKER_ANNOTATIONS = frozenset({
    "x-opt-sequence-number", "x-opt-enqueued-time", "x-opt-locked-until", "x-opt-enqueue-sequence-number",
    "x-opt-deadletter-source", "x-opt-message-state", "x-opt-partition-id", LOCK_TOKEN,
    PARTITION_KEY, VIA_PARTITION_KEY, SCHEDULED_ENQUEUE_TIME,
})


# proton's number types the engine keeps as they are (int and float subclasses): a client's int32
# property goes back as an int32, not as the long a plain int encodes to.
AMQP_NUMBERS = frozenset({byte, short, int32, ubyte, ushort, uint, ulong, float32})


def to_python(value: Any) -> Any:
    """An AMQP value as the engine stores it (symbols as str, timestamps as datetimes, binaries as bytes;
    numbers keep their AMQP type)."""
    if isinstance(value, bool) or value is None or type(value) in AMQP_NUMBERS:
        return value
    if isinstance(value, timestamp):
        return datetime.fromtimestamp(int(value) / 1000, UTC)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):  # symbol and char included
        return str(value)
    if isinstance(value, memoryview | bytearray):
        return bytes(value)
    if isinstance(value, dict):
        return {to_python(k): to_python(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_python(v) for v in value]
    return value


def to_amqp(value: Any) -> Any:
    """A stored value as proton should encode it."""
    if isinstance(value, datetime):
        return timestamp(round(value.timestamp() * 1000))
    if isinstance(value, timedelta):  # Service Bus TimeSpan travels as ticks of 100 ns
        return int(value / timedelta(microseconds=1)) * 10
    if isinstance(value, char):
        return str(value)
    if isinstance(value, dict):
        return {to_amqp(k): to_amqp(v) for k, v in value.items()}
    return value


def _text(value: Any) -> str | None:
    if value is None:
        return None
    value = to_python(value)
    return str(int(value)) if isinstance(value, int) else str(value)  # a ulong id is its digits


def _epoch(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.timestamp()
    return int(value) / 1000


def decode_transfer(payload: bytes, message_format: int = 0) -> list[Message]:
    """The messages of one transfer: those of the envelope for the batch message-format, else one."""
    if message_format == BATCH_FORMAT:
        return [decode_message(raw) for raw in codec.batch_messages(payload)]
    return [decode_message(payload)]


# properties section field -> the Message keyword it sets
_PROPERTY_KEYWORDS = {
    "message_id": "message_id", "correlation_id": "correlation_id", "group_id": "session_id",
    "reply_to_group_id": "reply_to_session_id", "subject": "subject", "to": "to", "reply_to": "reply_to",
    "content_type": "content_type",
}
# properties section fields kept for the wire only (Message.amqp_properties), besides typed ids
_KEPT_PROPERTIES = frozenset({"content_encoding", "user_id", "group_sequence", "creation_time",
                              "absolute_expiry_time"})
_TYPED_IDS = frozenset({"message_id", "correlation_id"})  # message-id-ulong / -uuid / -binary / -string
_AS_IS = frozenset({str, int, float, bool, type(None), *AMQP_NUMBERS})  # application property values kept


def decode_message(raw: bytes) -> Message:
    """A client's encoded message as the engine keeps it; only the fields it sets are passed on."""
    sections = codec.decode_sections(raw)
    fields: dict[str, Any] = {}
    kept: dict[str, Any] = {}
    for name, value in sections.properties.items():
        keyword = _PROPERTY_KEYWORDS.get(name)
        if keyword is not None:
            if type(value) is str or (type(value) is symbol and name == "content_type"):
                fields[keyword] = value  # a content-type stays the symbol it is on the wire
                continue
            fields[keyword] = _text(value)
            if name in _TYPED_IDS and not isinstance(value, str):
                kept[name] = to_python(value)
        elif name in _KEPT_PROPERTIES:
            kept[name] = to_python(value)
    if kept:
        fields["amqp_properties"] = kept
    ann = sections.annotations
    if ann:
        annotations = {}
        for key, value in ann.items():
            name = str(key)
            if name not in BROKER_ANNOTATIONS:
                annotations[name] = to_python(value)
        if annotations:
            fields["annotations"] = annotations
        for name, keyword in ((PARTITION_KEY, "partition_key"), (VIA_PARTITION_KEY, "via_partition_key")):
            value = ann.get(name)
            if value is not None:
                fields[keyword] = _text(value)
        scheduled = ann.get(SCHEDULED_ENQUEUE_TIME)
        if scheduled is not None:
            fields["scheduled_enqueue_time"] = _epoch(scheduled)
    ttl_ms = sections.header.ttl_ms
    if ttl_ms is not None:
        fields["time_to_live"] = ttl_ms / 1000
    app = sections.application_properties
    if app:
        app = {k if type(k) is str else str(k): v if type(v) in _AS_IS else to_python(v)
               for k, v in app.items()}
    return Message(sections.body, app or None, **fields)


def _ms(epoch_seconds: float) -> timestamp:
    return timestamp(round(epoch_seconds * 1000))


SEQUENCE_NUMBER = symbol("x-opt-sequence-number")
ENQUEUED_TIME = symbol("x-opt-enqueued-time")
ENQUEUE_SEQUENCE_NUMBER = symbol("x-opt-enqueue-sequence-number")
LOCKED_UNTIL = symbol("x-opt-locked-until")
MESSAGE_STATE = symbol("x-opt-message-state")
DEADLETTER_SOURCE = symbol("x-opt-deadletter-source")
PARTITION_ID = symbol("x-opt-partition-id")
_PARTITION_KEY, _VIA_PARTITION_KEY = symbol(PARTITION_KEY), symbol(VIA_PARTITION_KEY)
_SCHEDULED_ENQUEUE_TIME = symbol(SCHEDULED_ENQUEUE_TIME)


def _broker_annotations(msg: Message, with_lock: bool) -> list[Any]:
    """The `x-opt-*` annotations a received or peeked message carries, as the flat key, value, key, value...
    list a map is encoded from."""
    items: list[Any] = [SEQUENCE_NUMBER, msg.sequence_number, ENQUEUED_TIME, _ms(msg.enqueued_time),
                        ENQUEUE_SEQUENCE_NUMBER, msg.enqueued_sequence_number]
    if with_lock and msg.locked_until is not None:
        items += (LOCKED_UNTIL, _ms(msg.locked_until))
    if msg.state:  # an int, as Service Bus sends it (.NET unboxes it as its int enum)
        items += (MESSAGE_STATE, int32(msg.state))
    if msg.partition_key is not None:
        items += (_PARTITION_KEY, msg.partition_key)
    if msg.via_partition_key is not None:
        items += (_VIA_PARTITION_KEY, msg.via_partition_key)
    if msg.scheduled_enqueue_time is not None:
        items += (_SCHEDULED_ENQUEUE_TIME, _ms(msg.scheduled_enqueue_time))
    if msg.dead_letter_source is not None:
        items += (DEADLETTER_SOURCE, msg.dead_letter_source)
    if msg.partition_id is not None:  # a short, as Service Bus sends it (.NET's PartitionId is a short)
        items += (PARTITION_ID, short(msg.partition_id))
    return items


def _typed_id(kept: dict[str, Any], name: str, text: str | None) -> Any:
    """A message-id or correlation-id in the AMQP type the client sent it in, unless it changed since."""
    typed = kept.get(name)
    return typed if typed is not None and _text(typed) == text else text


def _property_list(msg: Message) -> list[Any]:
    """The properties section's fields (codec.PROPERTY_FIELDS order), trailing nulls dropped."""
    content_type = msg.content_type
    if content_type is not None and type(content_type) is not symbol:  # a symbol (AMQP 1.0 3.2.4)
        content_type = symbol(content_type)
    if msg.time_to_live is not None and not math.isinf(msg.expires_at):
        expiry, creation = _ms(msg.expires_at), _ms(msg.enqueued_time)
    else:
        expiry = creation = None
    kept = msg.amqp_properties
    if kept:
        fields = _with_kept(msg, kept, content_type, expiry, creation)
    else:
        fields = [msg.message_id, None, msg.to, msg.subject, msg.reply_to, msg.correlation_id, content_type,
                  None, expiry, creation, msg.session_id, None, msg.reply_to_session_id]
    while fields and fields[-1] is None:
        fields.pop()
    return fields


def _with_kept(msg: Message, kept: dict[str, Any], content_type: symbol | None, expiry: Any,
               creation: Any) -> list[Any]:
    """The properties section's fields of a message whose client set fields the engine does not read."""
    encoding, group_sequence = kept.get("content_encoding"), kept.get("group_sequence")
    if expiry is None:  # no time to live: the client's own times, if it set them
        expiry, creation = to_amqp(kept.get("absolute_expiry_time")), to_amqp(kept.get("creation_time"))
    return [
        _typed_id(kept, "message_id", msg.message_id), kept.get("user_id"), msg.to, msg.subject, msg.reply_to,
        _typed_id(kept, "correlation_id", msg.correlation_id), content_type,
        None if encoding is None else symbol(encoding), expiry, creation, msg.session_id,
        None if group_sequence is None else uint(group_sequence),  # a sequence-no (uint)
        msg.reply_to_session_id]


def _key(name: symbol) -> bytes:
    return b"\xa3" + bytes((len(name),)) + name.encode("ascii")


_SEQUENCE_KEY, _ENQUEUED_TIME_KEY = _key(SEQUENCE_NUMBER), _key(ENQUEUED_TIME)
_ENQUEUE_SEQUENCE_KEY, _LOCKED_UNTIL_KEY = _key(ENQUEUE_SEQUENCE_NUMBER), _key(LOCKED_UNTIL)
_CODED, _MAP_HEAD = struct.Struct(">Bq"), struct.Struct(">BII")  # a type code and 8 bytes; a map's head


def _long(value: int) -> bytes:
    """An int as `encode_value` writes it when it fits a long (smalllong from -128 to 127)."""
    return b"\x55" + bytes((value & 0xFF,)) if -128 <= value <= 127 else _CODED.pack(0x81, value)


def _plain(msg: Message) -> bool:
    """The message carries only the annotations every delivery has (sequence numbers, enqueued and
    locked-until times): its head is `delivery_head`'s."""
    return not (msg.annotations or msg.state or msg.partition_key is not None
                or msg.via_partition_key is not None or msg.scheduled_enqueue_time is not None
                or msg.dead_letter_source is not None or msg.partition_id is not None)


def _delivery_head(ttl_ms: int | None, delivery_count: int, sequence_number: int, enqueued_time: float,
                   enqueue_sequence_number: int, locked_until: float | None) -> bytes:
    """The header and message-annotations sections of a `_plain` message: the header `codec.encode_header`
    writes and `encode_map_items(_broker_annotations(...))`, written straight (the reference of the C
    `delivery_head`; `locked_until` None: no lock annotation)."""
    body = b"".join((
        _SEQUENCE_KEY, _long(sequence_number),
        _ENQUEUED_TIME_KEY, _CODED.pack(0x83, round(enqueued_time * 1000)),
        _ENQUEUE_SEQUENCE_KEY, _long(enqueue_sequence_number),
    ))
    count = 6
    if locked_until is not None:
        body += _LOCKED_UNTIL_KEY + _CODED.pack(0x83, round(locked_until * 1000))
        count = 8
    return b"".join((codec.encode_header(True, 4, ttl_ms, False, delivery_count),
                     b"\x00\x53" + bytes((codec.MESSAGE_ANNOTATIONS,)),
                     _MAP_HEAD.pack(0xD1, len(body) + 4, count), body))


def delivery_head(ttl_ms: int | None, delivery_count: int, sequence_number: int, enqueued_time: float,
                  enqueue_sequence_number: int, locked_until: float | None) -> bytes:
    native = values._native
    if native is not None:
        head = native.delivery_head(ttl_ms, delivery_count, sequence_number, enqueued_time,
                                    enqueue_sequence_number, locked_until)
        if head is not NotImplemented:
            return head
    return _delivery_head(ttl_ms, delivery_count, sequence_number, enqueued_time, enqueue_sequence_number,
                          locked_until)


def encode_message(msg: Message, *, with_lock: bool, lock_token_annotation: bool = False) -> bytes:
    """The bytes of a message delivered to a receiver (or returned by peek / receive-deferred).

    `lock_token_annotation`: the lock token as the delivery annotation `x-opt-lock-token` too, as Service Bus
    writes it into a message that receive-by-sequence-number returns (the Go SDK reads it from there)."""
    ttl = None if msg.time_to_live is None else int(msg.time_to_live * 1000)
    if _plain(msg) and not lock_token_annotation:  # the common delivery: its head in one call
        locked_until = msg.locked_until if with_lock else None
        parts = [delivery_head(ttl, msg.delivery_count, msg.sequence_number, msg.enqueued_time,
                               msg.enqueued_sequence_number, locked_until)]
    else:
        items = _broker_annotations(msg, with_lock)
        if msg.annotations:  # the client's annotations, merged with the broker's
            annotations = dict(zip(items[::2], items[1::2], strict=True))
            annotations.update((symbol(k), to_amqp(v)) for k, v in msg.annotations.items())
            encoded_annotations = codec.encode_value(annotations)
        else:
            encoded_annotations = encode_map_items(items)
        parts = [codec.encode_header(True, 4, ttl, False, msg.delivery_count)]
        if lock_token_annotation and msg.lock_token is not None:
            parts.append(codec.described(codec.DELIVERY_ANNOTATIONS,
                                         codec.encode_value({symbol(LOCK_TOKEN): msg.lock_token})))
        parts.append(b"\x00\x53" + bytes((codec.MESSAGE_ANNOTATIONS,)) + encoded_annotations)
    parts.append(codec.described(codec.PROPERTIES, codec.encode_value(_property_list(msg))))
    app = msg.application_properties
    if app:
        # what the C codec encodes as it is, to_amqp leaves as it is: no copy converted first
        encoded = encode_as_is(app)
        if encoded is None:
            encoded = codec.encode_value(to_amqp(app))
        parts.append(codec.described(codec.APPLICATION_PROPERTIES, encoded))
    parts.append(msg.body)
    return b"".join(parts)


def lock_token_of(tag: bytes) -> uuid.UUID:
    """A delivery tag of a peek-lock transfer is the lock token in .NET GUID byte order (one C call per
    settlement where the codec is built)."""
    native = values._native
    token = NotImplemented if native is None else native.lock_token(tag)
    return uuid.UUID(bytes_le=tag) if token is NotImplemented else token
