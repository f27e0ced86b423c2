"""The AMQP message codec: sections split and rebuilt byte-exactly, batches unpacked, headers complete."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from proton import Data, Message, int32, symbol, timestamp, ulong

from local_broker.wire.amqp import codec, management

pytestmark = pytest.mark.usefixtures("value_codec")  # each test with the C codec and the pure-Python one

ALL_FIELDS = dict(id="m1", user_id=b"u", address="to", subject="subj", reply_to="rt",
                  correlation_id=uuid.UUID(int=7), content_type="text/plain", content_encoding="gzip",
                  expiry_time=1700000000.5, creation_time=1700000000.25, group_id="s1", group_sequence=3,
                  reply_to_group_id="rs")


def _message(**kwargs) -> bytes:
    return bytes(Message(**kwargs).encode())


def test_sections_are_decoded_and_the_body_kept_verbatim() -> None:
    msg = Message(body=b"payload", durable=True, ttl=5, delivery_count=2, priority=7,
                  properties={"k": "v", "n": int32(7)}, **ALL_FIELDS)
    msg.annotations = {symbol("x-opt-partition-key"): "p"}
    raw = bytes(msg.encode())
    sections = codec.decode_sections(raw)
    assert sections.header == codec.Header(durable=True, priority=7, ttl_ms=5000, first_acquirer=False,
                                           delivery_count=2)
    assert sections.annotations == {symbol("x-opt-partition-key"): "p"}
    assert sections.properties["message_id"] == "m1"
    assert sections.properties["correlation_id"] == uuid.UUID(int=7)
    assert sections.properties["group_id"] == "s1"
    assert sections.properties["reply_to_group_id"] == "rs"
    assert sections.application_properties == {"k": "v", "n": 7}
    assert raw.endswith(sections.body)
    assert sections.body.startswith(b"\x00\x53\x77")  # amqp-value section of the binary body


def test_delivery_annotations_after_the_body_are_dropped() -> None:
    body = codec.described(codec.DATA, b"\xa0\x02hi")
    delivery_annotations = codec.described(codec.DELIVERY_ANNOTATIONS, codec.encode_value({symbol("x"): 1}))
    sections = codec.decode_sections(body + delivery_annotations)
    assert sections.body == body


@pytest.mark.parametrize("raw", [
    b"",                                    # no body
    b"\x00\x53\x70\xc0\x05\x01",            # truncated header
    b"\x01\x02\x03",                        # not a section
    b"\x00\x53\x99\x40",                    # unknown section code
    _message(body="x")[:-1],                # truncated body
])
def test_malformed_messages_raise_a_decode_error(raw: bytes) -> None:
    with pytest.raises(codec.MessageDecodeError):
        codec.decode_sections(raw)


def test_header_always_carries_delivery_count_even_zero() -> None:
    decoded = Message()
    decoded.decode(codec.encode_header(True, 4, None, False, 0) + codec.described(codec.DATA, b"\xa0\x00"))
    data = Data()
    data.decode(codec.encode_header(False, 4, 60000, False, 0))
    data.rewind()
    data.next()
    fields = data.get_object().value
    assert len(fields) == 5 and fields[4] == 0 and fields[2] == 60000
    assert decoded.durable is True


@pytest.mark.parametrize("count", [0, 1, 255, 256, 70000])
def test_header_delivery_count_round_trips(count: int) -> None:
    header = codec.encode_header(False, 4, None, True, count)
    sections = codec.decode_sections(header + codec.described(codec.DATA, b"\xa0\x00"))
    assert sections.header.delivery_count == count


def _batch(messages: list[bytes], first_id: str | None = None) -> bytes:
    """An SDK-style envelope: properties with the first message id (optional), one Data section each."""
    head = codec.described(codec.PROPERTIES, codec.encode_value([first_id])) if first_id else b""
    data = [codec.described(codec.DATA, b"\xb0" + len(m).to_bytes(4, "big") + m) for m in messages]
    return head + b"".join(data)


def _envelope_header_and_properties() -> bytes:
    """What rhea (the JS SDK) puts on a batch envelope: a header and the first message's properties."""
    return (codec.encode_header(True, 4, None, False, 0)
            + codec.described(codec.APPLICATION_PROPERTIES, codec.encode_value({"i": 0})))


@pytest.mark.parametrize("envelope", ["bare", "first-id", "rhea"])
def test_a_batch_envelope_is_unpacked_into_its_messages(envelope: str) -> None:
    inner = [_message(body=f"m{i}", id=f"id{i}") for i in range(3)]
    payload = _batch(inner, "id0" if envelope == "first-id" else None)
    if envelope == "rhea":
        payload = _envelope_header_and_properties() + payload
    assert codec.batch_messages(payload) == inner


@pytest.mark.parametrize("payload", [
    _message(body="not a batch"),  # no Data section
    codec.described(codec.DATA, b"\xa0\x03abc"),  # a Data section that is not a message
    codec.described(codec.DATA, b"\xa0\x04\x00\x53\x70\xc0"),  # one that only starts like a section
])
def test_a_batch_of_anything_but_encoded_messages_is_a_decode_error(payload: bytes) -> None:
    with pytest.raises(codec.MessageDecodeError):
        codec.batch_messages(payload)


def test_request_messages_carry_properties_and_an_amqp_value() -> None:
    corr = uuid.uuid4()
    raw = codec.encode_amqp_value_message({"correlation_id": corr}, {"statusCode": 200},
                                          {"expiration": timestamp(1000)})
    msg = Message()
    msg.decode(raw)
    assert msg.correlation_id == corr
    assert msg.properties == {"statusCode": 200}
    assert codec.amqp_value(codec.decode_sections(raw).body) == {"expiration": timestamp(1000)}


def test_section_scanner_handles_every_constructor_width() -> None:
    values = [None, True, ulong(2**40), -5, 1.5, timestamp(5), uuid.uuid4(), b"x" * 300, "s" * 300,
              symbol("sym"), [1, 2], {"a": [1, {"b": 2}]}, datetime(2024, 1, 1, tzinfo=UTC).timestamp()]
    raw = codec.described(codec.AMQP_VALUE, codec.encode_value(values))
    assert codec.split_sections(raw) == [(codec.AMQP_VALUE, 0, len(raw))]


@pytest.mark.parametrize("message_id", [ulong(7), ulong(0), ulong(2**40), uuid.UUID(int=5), "id", b"id"])
def test_a_reply_correlates_with_the_request_message_id_in_its_own_type(message_id) -> None:
    """Clients match replies by value and type: Java numbers its requests with ulongs, others use uuids."""
    request = management.parse_request(bytes(Message(id=message_id, body="x").encode()))
    reply = management.encode_reply(request, management.Reply(200, "OK"), cbs=False)
    echoed = codec.decode_sections(reply).properties["correlation_id"]
    assert echoed == message_id and type(echoed) is type(message_id)


@pytest.mark.parametrize("cbs", [True, False])
def test_reply_status_codes_are_amqp_ints(cbs: bool) -> None:
    """.NET and Java cast the status code to a 32-bit integer: a long would not unbox."""
    request = management.parse_request(bytes(Message(id="r", body="x").encode()))
    reply = management.encode_reply(request, management.Reply(202, "Accepted"), cbs=cbs)
    start, end = next((a, b) for code, a, b in codec.split_sections(reply)
                      if code == codec.APPLICATION_PROPERTIES)
    data = Data()
    data.decode(reply[start:end])
    data.rewind()
    data.next()
    status = data.get_object().value["status-code" if cbs else "statusCode"]
    assert status == 202 and type(status) is int32
