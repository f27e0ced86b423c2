"""A received SDK message as the Functions worker hands it to a function: `func.ServiceBusMessage` with
every system property and the trigger metadata the Azure host supplies (`MessageId`, `SequenceNumber`,
`EnqueuedTimeUtc`, `ApplicationProperties`, ...)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from azure.functions.servicebus import ServiceBusMessage as FunctionMessage
from azure.servicebus import ServiceBusReceivedMessage

from replicators.message import AmqpBody, decode_application_properties, system_properties


class HostedServiceBusMessage(FunctionMessage):
    """`func.ServiceBusMessage` plus the original AMQP body, which Azure's binding flattens to bytes; a
    replication task run by this host therefore keeps value and sequence bodies intact. The trigger
    metadata is built when first read: most functions never look at it."""

    def __init__(self, *, amqp_body: AmqpBody, metadata_fields: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.amqp_body = amqp_body
        self._metadata_fields = metadata_fields
        self._metadata: dict[str, Any] | None = None

    @property
    def metadata(self) -> dict[str, Any]:
        if self._metadata is None:
            self._metadata = trigger_metadata(self._metadata_fields, self.application_properties)
        return self._metadata


def to_function_message(message: ServiceBusReceivedMessage) -> HostedServiceBusMessage:
    properties = decode_application_properties(message.application_properties)
    body = AmqpBody.of(message.raw_amqp_message)
    fields = system_properties(message)
    return HostedServiceBusMessage(
        amqp_body=body,
        body=body.as_bytes(),
        application_properties=properties,
        user_properties=properties,
        label=fields["subject"],
        transaction_partition_key=fields["partition_key"],
        metadata_fields=fields,
        **fields,
    )


def trigger_metadata(fields: dict[str, Any], properties: dict[str, Any]) -> dict[str, Any]:
    """The metadata as a function reads it from the Azure host: .NET property names (`MessageId`,
    `EnqueuedTimeUtc`, ...), times as ISO 8601 strings, properties as JSON values."""
    metadata = {
        "".join(part.capitalize() for part in name.split("_")): _json_value(value)
        for name, value in fields.items()
        if value is not None
    }
    metadata["ApplicationProperties"] = metadata["UserProperties"] = _json_value(properties)
    return metadata


def _json_value(value: Any) -> Any:
    if isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, dt.timedelta):
        return str(value)
    return json.loads(json.dumps(value, default=str))
