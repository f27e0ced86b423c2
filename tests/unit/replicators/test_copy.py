"""The copy of one message, checked through the SDK's own codec: source sent by the SDK, received with
broker annotations, copied, and the replica received again on the 'target'."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from azure.functions.servicebus import ServiceBusMessage as FunctionMessage
from azure.servicebus import ServiceBusMessage
from azure.servicebus.amqp import AmqpAnnotatedMessage, AmqpMessageBodyType
from sb_wire import ENQUEUED, received, roundtrip

from replicators.copy import CopyOptions, copy_message
from replicators.message import (
    CONTENT_FIELDS,
    AmqpBody,
    SourceMessage,
    decode_application_properties,
    system_properties,
)

FULL = dict(
    application_properties={"tenant": "contoso", "count": 7, "ratio": 0.5, "urgent": True, "none": None},
    session_id="session-1",
    message_id="order-17",
    partition_key="session-1",
    correlation_id="corr-9",
    subject="created",
    to="orders-eu",
    reply_to="replies",
    reply_to_session_id="reply-session",
    content_type="application/json",
    time_to_live=dt.timedelta(minutes=5),
)


def source_of(message, **broker) -> SourceMessage:
    return SourceMessage.from_received(received(message, **broker), namespace="primary", entity="orders")


def test_every_user_field_survives_the_round_trip():
    replica = copy_message(source_of(ServiceBusMessage(b'{"a":1}', **FULL)), target_entity="orders")
    target = roundtrip(replica.to_amqp(), sequence_number=9000)
    assert list(target.body) == [b'{"a":1}']
    for name in CONTENT_FIELDS:
        assert getattr(target, name) == FULL[name], name
    props = decode_application_properties(target.application_properties)
    for name, value in FULL["application_properties"].items():
        assert props[name] == value and type(props[name]) is type(value), name


def test_stamps_record_the_source_enqueue_time_sequence_and_entity():
    replica = copy_message(
        source_of(ServiceBusMessage(b"x", message_id="m"), sequence_number=314), target_entity="q"
    )
    props = replica.application_properties
    assert props["repl-enqueued-time"] == "2026-11-22T12:00:00.123Z"
    assert props["repl-sequence"] == "314"
    assert props["repl-source"] == "primary/orders"


def test_second_hop_appends_and_first_entry_stays_the_origin():
    first = copy_message(
        source_of(ServiceBusMessage(b"x", message_id="m"), sequence_number=1), target_entity="q"
    )
    later = ENQUEUED + dt.timedelta(seconds=2)
    hop2 = SourceMessage.from_received(
        roundtrip(first.to_amqp(), sequence_number=77, enqueued_time_utc=later),
        namespace="secondary",
        entity="q",
    )
    props = copy_message(hop2, target_entity="q").application_properties
    assert props["repl-enqueued-time"] == "2026-11-22T12:00:00.123Z;2026-11-22T12:00:02.123Z"
    assert props["repl-sequence"] == "1;77"
    assert props["repl-source"] == "primary/orders;secondary/q"


def test_docs_spelling_is_read_and_folded_into_the_samples_spelling():
    msg = ServiceBusMessage(
        b"x", message_id="m", application_properties={"repl-enqueue-time": "2026-01-01T00:00:00Z"}
    )
    props = copy_message(source_of(msg), target_entity="q").application_properties
    assert "repl-enqueue-time" not in props
    assert props["repl-enqueued-time"] == "2026-01-01T00:00:00Z;2026-11-22T12:00:00.123Z"


def test_broker_owned_and_dead_letter_fields_are_dropped():
    msg = ServiceBusMessage(
        b"x",
        message_id="m",
        application_properties={
            "DeadLetterReason": "MaxDeliveryCountExceeded",
            "DeadLetterErrorDescription": "d",
            "Diagnostic-Id": "00-abc-def-01",
            "keep": "yes",
        },
    )
    src = received(msg, delivery_count=9, extra_annotations={b"x-opt-deadletter-source": "orders"})
    replica = copy_message(
        SourceMessage.from_received(src, namespace="p", entity="orders"), target_entity="q"
    )
    amqp = replica.to_amqp()
    assert set(amqp.annotations or {}) == set()
    assert amqp.header is None  # no delivery count carried over (and no TTL on this one)
    assert set(replica.application_properties) == {
        "keep",
        "repl-enqueued-time",
        "repl-sequence",
        "repl-source",
    }
    target = roundtrip(amqp, sequence_number=5)
    assert target.sequence_number == 5 and target.dead_letter_source is None and target.delivery_count == 0


@pytest.mark.parametrize(
    ("body_kwargs", "expected_type"),
    [
        ({"value_body": {"k": 1, "list": [1, 2]}}, AmqpMessageBodyType.VALUE),
        ({"value_body": 12345}, AmqpMessageBodyType.VALUE),
        ({"sequence_body": [[1, 2], [3]]}, AmqpMessageBodyType.SEQUENCE),
        ({"data_body": [b"part1", b"part2"]}, AmqpMessageBodyType.DATA),
    ],
)
def test_body_keeps_its_amqp_section_type(body_kwargs, expected_type):
    msg = AmqpAnnotatedMessage(properties={"message_id": "m"}, **body_kwargs)
    replica = copy_message(source_of(msg), target_entity="q")
    target = roundtrip(replica.to_amqp())
    assert target.body_type == expected_type
    original = received(msg)
    assert (
        list(target.body) == list(original.body)
        if expected_type != AmqpMessageBodyType.VALUE
        else (target.body == original.body)
    )


def test_message_without_ttl_gets_none_and_task_ttl_caps_it():
    no_ttl = source_of(ServiceBusMessage(b"x", message_id="m"))
    assert copy_message(no_ttl, target_entity="q").time_to_live is None
    capped = copy_message(no_ttl, target_entity="q", options=CopyOptions(ttl=dt.timedelta(minutes=2)))
    assert roundtrip(capped.to_amqp()).time_to_live == dt.timedelta(minutes=2)
    shorter = source_of(ServiceBusMessage(b"x", message_id="m", time_to_live=dt.timedelta(seconds=30)))
    kept = copy_message(shorter, target_entity="q", options=CopyOptions(ttl=dt.timedelta(minutes=2)))
    assert kept.time_to_live == dt.timedelta(seconds=30)


def test_ttl_keeps_milliseconds():
    msg = AmqpAnnotatedMessage(data_body=b"x", properties={"message_id": "m"}, header={"time_to_live": 1500})
    replica = copy_message(source_of(msg), target_entity="q")
    assert roundtrip(replica.to_amqp()).raw_amqp_message.header.time_to_live == 1500


def test_marker_is_set_on_the_replica():
    replica = copy_message(
        source_of(ServiceBusMessage(b"x", message_id="m")),
        target_entity="q",
        options=CopyOptions(marker="replication"),
    )
    assert (
        decode_application_properties(roundtrip(replica.to_amqp()).application_properties)["replication"] == 1
    )


def test_absent_fields_stay_absent():
    replica = copy_message(source_of(ServiceBusMessage(b"x", message_id="m")), target_entity="q")
    target = roundtrip(replica.to_amqp())
    for name in CONTENT_FIELDS:
        if name != "message_id":
            assert getattr(target, name) is None, name


def test_message_id_is_copied_not_regenerated():
    mid = str(uuid.uuid4())
    replica = copy_message(source_of(ServiceBusMessage(b"x", message_id=mid)), target_entity="q")
    assert roundtrip(replica.to_amqp()).message_id == mid


def test_received_property_types_are_decoded_to_what_the_sender_used():
    assert decode_application_properties({b"k": b"v", b"n": 7, b"u": uuid.UUID(int=1), b"bin": b"\xff"}) == {
        "k": "v",
        "n": 7,
        "u": uuid.UUID(int=1),
        "bin": b"\xff",
    }


def test_function_binding_message_gives_the_same_copy():
    enqueued = dt.datetime(2026, 11, 22, 12, 0, 0, 123000)  # the binding's naive UTC datetime
    fmsg = FunctionMessage(
        body=b"payload",
        message_id="m",
        application_properties={"k": "v"},
        user_properties={"k": "v"},
        session_id="s",
        partition_key="s",
        enqueued_time_utc=enqueued,
        sequence_number=12,
        time_to_live=dt.timedelta(seconds=60),
        subject="sub",
    )
    src = SourceMessage.from_function(fmsg, namespace="primary", entity="orders")
    replica = copy_message(src, target_entity="orders")
    assert replica.body == AmqpBody.data(b"payload")
    assert replica.application_properties["repl-enqueued-time"] == "2026-11-22T12:00:00.123Z"
    assert (replica.session_id, replica.partition_key, replica.subject) == ("s", "s", "sub")
    assert replica.time_to_live == dt.timedelta(seconds=60)


def test_replica_without_enqueue_time_is_refused():
    fmsg = FunctionMessage(body=b"x", message_id="m", application_properties={}, user_properties={})
    with pytest.raises(ValueError, match="EnqueuedTimeUtc"):
        SourceMessage.from_function(fmsg, namespace="p", entity="q")


def test_one_pass_reader_agrees_with_every_sdk_property():
    msg = ServiceBusMessage(b"x", **FULL, scheduled_enqueue_time_utc=ENQUEUED - dt.timedelta(minutes=1))
    msg.application_properties.update({"DeadLetterReason": "r", "DeadLetterErrorDescription": "d"})
    message = received(
        msg,
        delivery_count=3,
        extra_annotations={b"x-opt-deadletter-source": "orders", b"x-opt-message-state": 2},
    )
    fields = system_properties(message)
    for name, value in fields.items():
        sdk_name = "locked_until_utc" if name == "locked_until" else name
        expected = getattr(message, sdk_name)
        if name == "state":
            expected = int(expected.value)
        if name == "lock_token":
            expected = str(expected) if expected else None
        assert value == expected, name
    assert fields["dead_letter_reason"] == "r" and fields["dead_letter_source"] == "orders"
