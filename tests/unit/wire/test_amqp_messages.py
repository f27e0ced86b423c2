"""A client's encoded message -> the engine's Message -> what a receiver gets: every section a client may send
survives (decoded where the broker reads it, verbatim where it does not), in the short and long descriptor
forms, with values the pure-Python codec reads itself and those it leaves to proton."""

from __future__ import annotations

import struct
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from proton import (
    UNDESCRIBED,
    Array,
    Data,
    Message,
    char,
    float32,
    int32,
    short,
    symbol,
    timestamp,
    ubyte,
    uint,
    ulong,
)

from local_broker.engine import Message as StoredMessage
from local_broker.engine import MessageState
from local_broker.wire.amqp import codec, messages
from local_broker.wire.amqp.values import encode_map_items

pytestmark = pytest.mark.usefixtures("value_codec")  # each test with the C codec and the pure-Python one

FOOTER = codec.described(codec.FOOTER, codec.encode_value({symbol("x-hash"): b"\x01\x02"}))


def _client_message(body, **extra) -> Message:
    properties = {"text": "v", "number": int32(7), "big": ulong(2**40), "when": timestamp(1700000000000),
                  "id": uuid.UUID(int=9), "bytes": b"\x00\xff", "flag": True, "ratio": 0.5}
    msg = Message(body=body, durable=True, ttl=30, priority=6, delivery_count=0, inferred=True, id="m-1",
                  user_id=b"user", address="q1", subject="label", reply_to="r", correlation_id="c-1",
                  content_type="application/json", group_id="s-1", reply_to_group_id="rs-1",
                  properties=properties, **extra)
    msg.instructions = {symbol("x-hop"): "dropped"}  # delivery annotations: hop-by-hop
    msg.annotations = {symbol("x-opt-partition-key"): "s-1", symbol("x-custom"): "kept",
                       symbol("x-opt-sequence-number"): 99}  # the broker's own: a client's copy is dropped
    return msg


def _received(raw: bytes) -> Message:
    """What a receiver's proton decodes from the broker's delivery of the engine message `raw` became."""
    m = messages.decode_transfer(raw)[0]
    m.sequence_number, m.enqueued_time, m.expires_at = 5, 1700000000.0, 1700000030.0
    out = Message()
    out.decode(messages.encode_message(m, with_lock=False))
    return out


@pytest.mark.parametrize("body", [b"binary", "a string", {"map": [1, 2]}, [1, "two", None]])
def test_every_section_round_trips(body) -> None:
    raw = bytes(_client_message(body).encode()) + FOOTER
    m = messages.decode_transfer(raw)[0]
    assert (m.message_id, m.to, m.subject, m.reply_to, m.correlation_id, m.content_type) == (
        "m-1", "q1", "label", "r", "c-1", "application/json")
    assert (m.session_id, m.reply_to_session_id, m.partition_key) == ("s-1", "rs-1", "s-1")
    assert m.time_to_live == 30
    assert m.annotations == {"x-custom": "kept"}
    assert m.application_properties == {
        "text": "v", "number": 7, "big": 2**40, "when": datetime.fromtimestamp(1700000000, UTC),
        "id": uuid.UUID(int=9), "bytes": b"\x00\xff", "flag": True, "ratio": 0.5}
    assert m.body.endswith(FOOTER) and codec.split_sections(m.body)[-1][0] == codec.FOOTER

    out = _received(raw)
    assert out.body == body and out.durable and out.ttl == 30 and out.id == "m-1" and out.group_id == "s-1"
    assert out.annotations[symbol("x-custom")] == "kept"
    assert out.annotations[symbol("x-opt-sequence-number")] == 5
    assert out.properties["number"] == 7 and out.properties["when"] == timestamp(1700000000000)
    assert out.instructions is None


def test_data_and_sequence_bodies_of_several_sections_are_kept_verbatim() -> None:
    for code, values in ((codec.DATA, [b"\xa0\x01a", b"\xb0" + struct.pack(">I", 300) + b"b" * 300]),
                         (codec.AMQP_SEQUENCE, [codec.encode_value([1, 2]), codec.encode_value(["x"])])):
        body = b"".join(codec.described(code, v) for v in values)
        raw = codec.encode_header(False, 4, None, False, 0) + body + FOOTER
        assert messages.decode_transfer(raw)[0].body == body + FOOTER


def test_sections_in_the_long_descriptor_form_are_read() -> None:
    def long_form(code: int, value: bytes) -> bytes:
        return b"\x00\x80" + struct.pack(">Q", code) + value

    raw = (long_form(codec.PROPERTIES, codec.encode_value(["id-7"]))
           + long_form(codec.APPLICATION_PROPERTIES, codec.encode_value({"k": "v"}))
           + long_form(codec.DATA, b"\xa0\x02hi"))
    m = messages.decode_transfer(raw)[0]
    assert (m.message_id, m.application_properties) == ("id-7", {"k": "v"})
    assert m.body == long_form(codec.DATA, b"\xa0\x02hi")


def test_values_proton_decodes_for_the_codec_are_kept() -> None:
    """Arrays, chars and floats are not read by values.py itself: proton decodes them in place."""
    data = Data()
    data.put_object({"array": Array(UNDESCRIBED, Data.INT, 1, 2), "char": char("c"), "f": float32(1.5),
                     "n": 1})
    raw = (codec.described(codec.APPLICATION_PROPERTIES, bytes(data.encode()))
           + codec.described(codec.PROPERTIES, codec.encode_value(["after-fallback"]))
           + codec.described(codec.DATA, b"\xa0\x00"))
    m = messages.decode_transfer(raw)[0]
    assert m.message_id == "after-fallback"
    assert list(m.application_properties["array"].elements) == [1, 2]
    assert m.application_properties["char"] == "c" and m.application_properties["f"] == 1.5
    assert m.application_properties["n"] == 1


def test_a_batch_unpacks_into_messages_with_their_own_sections() -> None:
    inner = [bytes(Message(body=f"m{i}", id=f"id{i}", properties={"i": i}).encode()) for i in range(3)]
    envelope = b"".join(codec.described(codec.DATA, b"\xb0" + struct.pack(">I", len(m)) + m) for m in inner)
    batch = messages.decode_transfer(envelope, messages.BATCH_FORMAT)
    assert [(m.message_id, m.application_properties) for m in batch] == [
        (f"id{i}", {"i": i}) for i in range(3)]


EMPTY_BODY = codec.described(codec.DATA, b"\xa0\x00")


@pytest.mark.parametrize("raw", [
    codec.described(codec.DATA, b"\xa0\x01a") + codec.described(codec.PROPERTIES, b"\x45"),  # after the body
    codec.described(codec.PROPERTIES, b"\xc0\x05\x01\xa1\x09abc") + EMPTY_BODY,  # a string past its list
    codec.described(codec.APPLICATION_PROPERTIES, b"\xc1\x03\x02\xa1") + EMPTY_BODY,  # a truncated map
    codec.described(codec.DATA, b"\xb0\x00\x00\x01\x00abc"),  # a body longer than the transfer
    codec.described(codec.PROPERTIES, b"\xa1\x02\xff\xfe") + EMPTY_BODY,  # bad utf-8
])
def test_malformed_messages_are_decode_errors(raw: bytes) -> None:
    with pytest.raises(codec.MessageDecodeError):
        messages.decode_transfer(raw)


def _delivered(m, *, with_lock: bool = True) -> Message:
    """What a receiver's proton decodes from the broker's delivery of engine message `m` (proton keeps
    each value's AMQP type: symbol vs str, int32 vs long, short, uint, timestamp)."""
    out = Message()
    out.decode(messages.encode_message(m, with_lock=with_lock))
    return out


def _stamped(m, **broker_fields):
    m.sequence_number, m.enqueued_sequence_number, m.enqueued_time = 300, 7, 1700000000.0
    for name, value in broker_fields.items():
        setattr(m, name, value)
    return m


@pytest.mark.parametrize("sequence_number", [1, 127, 128, 2**40])
@pytest.mark.parametrize("with_lock", [False, True])
def test_the_fast_annotations_are_the_generic_encoders_bytes(sequence_number, with_lock) -> None:
    m = _stamped(messages.decode_transfer(bytes(Message(body=b"x").encode()))[0], locked_until=1700000060.5)
    m.sequence_number = m.enqueued_sequence_number = sequence_number
    locked_until = m.locked_until if with_lock else None
    fast = messages.delivery_head(None, m.delivery_count, m.sequence_number, m.enqueued_time,
                                  m.enqueued_sequence_number, locked_until)
    annotations = encode_map_items(messages._broker_annotations(m, with_lock))
    assert fast == codec.encode_header(True, 4, None, False, m.delivery_count) + b"\x00\x53\x72" + annotations
    assert {type(v) for v in codec.decode_value(annotations).values()} <= {int, timestamp}


def test_broker_annotations_go_out_in_service_bus_types() -> None:
    """x-opt-message-state is an int and x-opt-partition-id a short (.NET unboxes them as such)."""
    m = _stamped(messages.decode_transfer(bytes(Message(body=b"x").encode()))[0],
                 state=MessageState.DEFERRED, partition_id=3, dead_letter_source="q1", partition_key="pk",
                 scheduled_enqueue_time=1700000100.0)
    ann = _delivered(m, with_lock=False).annotations
    assert type(ann[symbol("x-opt-message-state")]) is int32 and ann[symbol("x-opt-message-state")] == 1
    assert type(ann[symbol("x-opt-partition-id")]) is short and ann[symbol("x-opt-partition-id")] == 3
    assert type(ann[symbol("x-opt-sequence-number")]) is int  # a long
    assert type(ann[symbol("x-opt-enqueue-sequence-number")]) is int
    assert type(ann[symbol("x-opt-enqueued-time")]) is timestamp
    assert type(ann[symbol("x-opt-scheduled-enqueue-time")]) is timestamp
    assert type(ann[symbol("x-opt-deadletter-source")]) is str
    assert type(ann[symbol("x-opt-partition-key")]) is str


def test_content_type_and_encoding_are_symbols_whatever_the_client_sent() -> None:
    """AMQP 1.0 3.2.4 makes both symbols; uAMQP-C and .NET refuse a message where they are strings."""
    for content_type in (symbol("application/json"), "application/json"):
        raw = codec.described(codec.PROPERTIES, codec.encode_value(
            [None, None, None, None, None, None, content_type, symbol("gzip")])) + EMPTY_BODY
        out = _delivered(_stamped(messages.decode_transfer(raw)[0]))
        assert (type(out.content_type), out.content_type) == (symbol, "application/json")
        assert (type(out.content_encoding), out.content_encoding) == (symbol, "gzip")


def test_the_clients_types_are_kept() -> None:
    """Ids in their own AMQP type, user-id, group-sequence, times of a message without TTL, and typed
    application properties come back as the client sent them."""
    raw = codec.described(codec.PROPERTIES, codec.encode_value([
        uuid.UUID(int=5), b"user", None, None, None, ulong(42), None, None, timestamp(1700000900000),
        timestamp(1700000000000), "s", uint(3), "rs"]))
    raw += codec.described(codec.APPLICATION_PROPERTIES, codec.encode_value({
        "i": int32(7), "u": uint(8), "h": short(-2), "b": ubyte(1), "f": float32(0.5), "l": 9,
        "big": ulong(2**63), "sym": symbol("text")}))
    m = messages.decode_transfer(raw + EMPTY_BODY)[0]
    assert (m.message_id, m.correlation_id) == (str(uuid.UUID(int=5)), "42")  # the engine's view
    out = _delivered(_stamped(m))
    sent = codec.decode_sections(messages.encode_message(m, with_lock=True)).properties
    assert sent["message_id"] == uuid.UUID(int=5)
    assert (type(sent["correlation_id"]), sent["correlation_id"]) == (ulong, 42)
    assert (out.user_id, out.group_sequence, out.group_id, out.reply_to_group_id) == (b"user", 3, "s", "rs")
    assert (out.creation_time, out.expiry_time) == (1700000000.0, 1700000900.0)
    assert {k: type(v) for k, v in out.properties.items()} == {
        "i": int32, "u": uint, "h": short, "b": ubyte, "f": float32, "l": int, "big": ulong, "sym": str}
    m.message_id = "changed by a rule action"
    assert _delivered(_stamped(m)).id == "changed by a rule action"


def test_application_properties_go_out_converted_as_the_engine_stores_them() -> None:
    """Datetimes as timestamps, timedeltas as ticks, chars as strings, in maps too; plain values as they are
    (the C codec's shortcut and to_amqp give the same bytes)."""
    when = datetime(2024, 5, 1, 12, 0, 0, 250000, tzinfo=UTC)
    stored = {"at": when, "span": timedelta(seconds=1.5), "c": char("c"), "n": int32(7), "s": "x",
              "nested": {"at": when}}
    m = _stamped(StoredMessage(EMPTY_BODY, stored))
    app = codec.decode_sections(messages.encode_message(m, with_lock=False)).application_properties
    assert app == {"at": timestamp(1714564800250), "span": 15_000_000, "c": "c", "n": 7, "s": "x",
                   "nested": {"at": timestamp(1714564800250)}}
    assert [type(app[k]) for k in ("at", "span", "c", "n")] == [timestamp, int, str, int32]
