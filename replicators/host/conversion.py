"""A received SDK message as the Functions worker hands it to a function: `func.ServiceBusMessage` with
every system property and the trigger metadata the Azure host supplies (`MessageId`, `SequenceNumber`,
`EnqueuedTimeUtc`, `ApplicationProperties`, ...)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from azure.functions.meta import Datum
from azure.functions.servicebus import ServiceBusMessage as FunctionMessage
from azure.servicebus import ServiceBusReceivedMessage

from replicators.message import AmqpBody, decode_application_properties


class HostedServiceBusMessage(FunctionMessage):
    """`func.ServiceBusMessage` plus the original AMQP body, which Azure's binding flattens to bytes; a
    replication task run by this host therefore keeps value and sequence bodies intact."""

    def __init__(self, *, amqp_body: AmqpBody, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.amqp_body = amqp_body


def to_function_message(message: ServiceBusReceivedMessage) -> HostedServiceBusMessage:
    properties = decode_application_properties(message.application_properties)
    body = AmqpBody.of(message.raw_amqp_message)
    fields: dict[str, Any] = {
        "message_id": message.message_id,
        "content_type": message.content_type,
        "correlation_id": message.correlation_id,
        "dead_letter_error_description": message.dead_letter_error_description,
        "dead_letter_reason": message.dead_letter_reason,
        "dead_letter_source": message.dead_letter_source,
        "delivery_count": message.delivery_count,
        "enqueued_sequence_number": message.enqueued_sequence_number,
        "enqueued_time_utc": message.enqueued_time_utc,
        "expires_at_utc": message.expires_at_utc,
        "locked_until": message.locked_until_utc,
        "lock_token": str(message.lock_token) if message.lock_token else None,
        "partition_key": message.partition_key,
        "reply_to": message.reply_to,
        "reply_to_session_id": message.reply_to_session_id,
        "scheduled_enqueue_time_utc": message.scheduled_enqueue_time_utc,
        "sequence_number": message.sequence_number,
        "session_id": message.session_id,
        "state": int(message.state.value) if message.state is not None else None,
        "subject": message.subject,
        "time_to_live": _exact_ttl(message),
        "to": message.to,
    }
    return HostedServiceBusMessage(
        amqp_body=body,
        body=body.as_bytes(),
        application_properties=properties,
        user_properties=properties,
        label=message.subject,
        transaction_partition_key=message.partition_key,
        trigger_metadata=_trigger_metadata(fields, properties),
        **fields,
    )


def _exact_ttl(message: ServiceBusReceivedMessage) -> dt.timedelta | None:
    header = message.raw_amqp_message.header
    return dt.timedelta(milliseconds=header.time_to_live) if header and header.time_to_live else None


def _trigger_metadata(fields: dict[str, Any], properties: dict[str, Any]) -> dict[str, Datum]:
    """The host's metadata keys are the .NET property names (`MessageId`, `EnqueuedTimeUtc`, ...)."""
    metadata: dict[str, Datum] = {}
    for name, value in fields.items():
        if value is None:
            continue
        key = "".join(part.capitalize() for part in name.split("_"))
        metadata[key] = _datum(value)
    metadata["ApplicationProperties"] = _datum(properties)
    metadata["UserProperties"] = _datum(properties)
    return metadata


def _datum(value: Any) -> Datum:
    if isinstance(value, bool):
        return Datum(json.dumps(value), "json")
    if isinstance(value, int):
        return Datum(value, "int")
    if isinstance(value, str):
        return Datum(value, "string")
    if isinstance(value, dt.datetime):
        return Datum(value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z"), "string")
    if isinstance(value, dt.timedelta):
        return Datum(str(value), "string")
    return Datum(json.dumps(value, default=str), "json")
