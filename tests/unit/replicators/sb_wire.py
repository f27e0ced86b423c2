"""Received messages without a broker: what a sender puts on the wire, plus the annotations a broker adds,
encoded and decoded by the SDK's own AMQP codec (so types come back exactly as from a real receive)."""

from __future__ import annotations

import datetime as dt
import uuid

from azure.servicebus import ServiceBusMessage, ServiceBusReceivedMessage
from azure.servicebus._pyamqp._encode import encode_payload
from azure.servicebus._pyamqp.message import Header
from azure.servicebus._pyamqp.utils import amqp_long_value, amqp_timestamp_value
from azure.servicebus._transport._pyamqp_transport import PyamqpTransport
from azure.servicebus.amqp import AmqpAnnotatedMessage

ENQUEUED = dt.datetime(2026, 11, 22, 12, 0, 0, 123000, tzinfo=dt.UTC)


def received(
    message: ServiceBusMessage | AmqpAnnotatedMessage,
    *,
    sequence_number: int = 42,
    enqueued_time_utc: dt.datetime = ENQUEUED,
    delivery_count: int = 0,
    extra_annotations: dict | None = None,
) -> ServiceBusReceivedMessage:
    annotated = message.raw_amqp_message if isinstance(message, ServiceBusMessage) else message
    outgoing = PyamqpTransport.to_outgoing_amqp_message(annotated)
    annotations = dict(outgoing.message_annotations or {})
    annotations.update(
        {
            b"x-opt-enqueued-time": amqp_timestamp_value(int(enqueued_time_utc.timestamp() * 1000)),
            b"x-opt-sequence-number": amqp_long_value(sequence_number),
            b"x-opt-locked-until": amqp_timestamp_value(int(enqueued_time_utc.timestamp() * 1000) + 60_000),
            b"x-opt-lock-token": uuid.uuid4(),
            **(extra_annotations or {}),
        }
    )
    # a broker always sends the header with the delivery count (sections 4.4 of servicebus-wire.md)
    header = (outgoing.header or Header())._replace(delivery_count=delivery_count)
    wire = outgoing._replace(message_annotations=annotations, header=header)
    return ServiceBusReceivedMessage.from_bytes(bytes(encode_payload(bytearray(), wire)))


def roundtrip(replica_amqp: AmqpAnnotatedMessage, **broker) -> ServiceBusReceivedMessage:
    """What a receiver on the target gets for a replica the replicator sent."""
    return received(replica_amqp, **broker)
