"""A client's encoded message -> the engine's Message -> what a receiver gets: every section a client may send
survives (decoded where the broker reads it, verbatim where it does not), in the short and long descriptor
forms, with values the pure-Python codec reads itself and those it leaves to proton."""

from __future__ import annotations

import struct
import uuid
from datetime import UTC, datetime

import pytest
from proton import UNDESCRIBED, Array, Data, Message, char, float32, int32, symbol, timestamp, ulong

from local_broker.wire.amqp import codec, messages

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
