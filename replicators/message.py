"""The two sides of a copy: what a replicator read from the source, and the replica it will send.

A `SourceMessage` is built either from the SDK's `ServiceBusReceivedMessage` (local host, SDK-type
bindings) or from the Functions binding's `func.ServiceBusMessage` (Azure), so the copy logic is written
once. Both views keep the user-owned part of a message in `MessageContent`; broker-owned fields
(sequence number, enqueued time, locks, dead-letter facts) live only on the source side.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import azure.functions as func
from azure.servicebus import ServiceBusReceivedMessage
from azure.servicebus.amqp import AmqpAnnotatedMessage, AmqpMessageBodyType

# Application properties the broker adds when it dead-letters a message; a copy is a fresh message.
DEAD_LETTER_PROPERTIES = frozenset({"DeadLetterReason", "DeadLetterErrorDescription"})
PARTITION_KEY_ANNOTATION = "x-opt-partition-key"
AMQP_UINT_MAX = 2**32 - 1


@dataclass(frozen=True)
class AmqpBody:
    """A message body with its AMQP section type: `data` (list of byte sections), `sequence`, or `value`."""

    body_type: AmqpMessageBodyType
    value: Any

    @classmethod
    def data(cls, payload: bytes | Iterable[bytes]) -> AmqpBody:
        sections = [payload] if isinstance(payload, bytes | bytearray) else list(payload)
        return cls(AmqpMessageBodyType.DATA, [bytes(section) for section in sections])

    @classmethod
    def of(cls, raw: AmqpAnnotatedMessage) -> AmqpBody:
        """The body of a received message; data and sequence sections arrive as one-shot generators."""
        if raw.body_type == AmqpMessageBodyType.DATA:
            return cls.data(raw.body)
        if raw.body_type == AmqpMessageBodyType.SEQUENCE:
            return cls(raw.body_type, [list(section) for section in raw.body])
        return cls(raw.body_type, raw.body)

    def as_bytes(self) -> bytes:
        """The body as one byte string, as the Functions binding hands it to a function."""
        if self.body_type == AmqpMessageBodyType.DATA:
            return b"".join(self.value)
        if isinstance(self.value, bytes):
            return self.value
        return str(self.value).encode("utf-8")

    @property
    def size(self) -> int:
        return len(self.as_bytes())


def decode_application_properties(properties: Mapping[Any, Any] | None) -> dict[str, Any]:
    """Application properties with the types the sender used.

    The SDK's AMQP decoder returns property names and string values as bytes (AMQP string and binary
    decode alike); the sender set str, so names and UTF-8 values are decoded back to str. Values that are
    not valid UTF-8 were binary and stay bytes; numbers, booleans, None, UUIDs are kept as they are.
    """
    decoded: dict[str, Any] = {}
    for key, value in (properties or {}).items():
        name = key.decode("utf-8") if isinstance(key, bytes) else str(key)
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError:
                pass
        decoded[name] = value
    return decoded


@dataclass(kw_only=True)
class MessageContent:
    """The part of a message its sender owns; a replica carries it unchanged."""

    body: AmqpBody
    message_id: str | None = None
    session_id: str | None = None
    partition_key: str | None = None
    correlation_id: str | None = None
    subject: str | None = None
    to: str | None = None
    reply_to: str | None = None
    reply_to_session_id: str | None = None
    content_type: str | None = None
    time_to_live: dt.timedelta | None = None
    application_properties: dict[str, Any] = field(default_factory=dict)

    def content(self) -> dict[str, Any]:
        """The `MessageContent` fields of this object, for building a new view of the same content."""
        return {name: getattr(self, name) for name in _CONTENT_NAMES}


@dataclass(kw_only=True)
class SourceMessage(MessageContent):
    """A message as a replicator received it from one namespace/entity."""

    namespace: str
    entity: str
    enqueued_time_utc: dt.datetime
    sequence_number: int
    delivery_count: int | None = None
    lock_token: str | None = None

    @classmethod
    def from_received(
        cls, message: ServiceBusReceivedMessage, *, namespace: str, entity: str
    ) -> SourceMessage:
        """From the SDK's received message: full AMQP body type fidelity."""
        raw = message.raw_amqp_message
        return cls(
            body=AmqpBody.of(raw),
            message_id=message.message_id,
            session_id=message.session_id,
            partition_key=message.partition_key,
            correlation_id=message.correlation_id,
            subject=message.subject,
            to=message.to,
            reply_to=message.reply_to,
            reply_to_session_id=message.reply_to_session_id,
            content_type=message.content_type,
            time_to_live=_ttl_of(raw),
            application_properties=decode_application_properties(message.application_properties),
            namespace=namespace,
            entity=entity,
            enqueued_time_utc=_as_utc(message.enqueued_time_utc),
            sequence_number=message.sequence_number,
            delivery_count=message.delivery_count,
            lock_token=str(message.lock_token) if message.lock_token else None,
        )

    @classmethod
    def from_function(cls, message: func.ServiceBusMessage, *, namespace: str, entity: str) -> SourceMessage:
        """From the Functions binding's message. Azure's binding exposes the body as bytes only; the local
        host attaches the original AMQP body as `amqp_body`, so a copy made there keeps its section type."""
        body = getattr(message, "amqp_body", None) or AmqpBody.data(message.get_body())
        return cls(
            body=body,
            **{name: getattr(message, name) for name in CONTENT_FIELDS},
            application_properties=decode_application_properties(message.application_properties),
            namespace=namespace,
            entity=entity,
            enqueued_time_utc=_as_utc(message.enqueued_time_utc),
            sequence_number=message.sequence_number or 0,
            delivery_count=message.delivery_count,
            lock_token=message.lock_token,
        )


@dataclass(kw_only=True)
class Replica(MessageContent):
    """The copy a replication task sends. A transform may change any field, including `entity` (reroute)."""

    entity: str

    def to_amqp(self) -> AmqpAnnotatedMessage:
        """The message to hand to `ServiceBusSender`: every field set explicitly, nothing broker-owned."""
        body_kwargs = {f"{self.body.body_type.value}_body": self.body.value}
        ttl_ms = _header_ttl_ms(self.time_to_live)
        properties = {
            "message_id": self.message_id,
            "correlation_id": self.correlation_id,
            "subject": self.subject,
            "to": self.to,
            "reply_to": self.reply_to,
            "reply_to_group_id": self.reply_to_session_id,
            "group_id": self.session_id,
            "content_type": self.content_type,
        }
        return AmqpAnnotatedMessage(
            header={"time_to_live": ttl_ms} if ttl_ms is not None else None,
            properties={k: v for k, v in properties.items() if v is not None},
            application_properties=dict(self.application_properties) or None,
            annotations={PARTITION_KEY_ANNOTATION: self.partition_key} if self.partition_key else None,
            **body_kwargs,
        )


_CONTENT_NAMES = tuple(f.name for f in dataclasses.fields(MessageContent))
# the MessageContent fields that are plain message properties (named alike on SDK and Functions messages)
CONTENT_FIELDS = tuple(name for name in _CONTENT_NAMES if name not in ("body", "application_properties"))


def system_properties(message: ServiceBusReceivedMessage) -> dict[str, Any]:
    """Every property of a received message, read from its AMQP sections in one pass.

    Same values as the SDK's properties (`message_id`, `enqueued_time_utc`, ...), which re-check the
    sections on every access; at thousands of messages a second that difference shows."""
    raw = message.raw_amqp_message
    props = raw.properties
    annotations = raw.annotations or {}
    application = raw.application_properties or {}
    ttl = _ttl_of(raw)
    enqueued = _utc_from_ms(annotations.get(b"x-opt-enqueued-time"))

    def prop(name: str) -> Any:
        return _text(getattr(props, name, None)) if props is not None else None

    return {
        "message_id": prop("message_id"),
        "session_id": prop("group_id"),
        "partition_key": _text(annotations.get(PARTITION_KEY_ANNOTATION.encode())),
        "correlation_id": prop("correlation_id"),
        "subject": prop("subject"),
        "to": prop("to"),
        "reply_to": prop("reply_to"),
        "reply_to_session_id": prop("reply_to_group_id"),
        "content_type": prop("content_type"),
        "time_to_live": ttl,
        "enqueued_time_utc": enqueued,
        "sequence_number": annotations.get(b"x-opt-sequence-number"),
        "enqueued_sequence_number": annotations.get(b"x-opt-enqueue-sequence-number"),
        "scheduled_enqueue_time_utc": _utc_from_ms(annotations.get(b"x-opt-scheduled-enqueue-time")),
        "expires_at_utc": enqueued + ttl if enqueued and ttl else None,
        "state": int(annotations.get(b"x-opt-message-state") or 0),
        "dead_letter_source": _text(annotations.get(b"x-opt-deadletter-source")),
        "dead_letter_reason": _text(application.get(b"DeadLetterReason")),
        "dead_letter_error_description": _text(application.get(b"DeadLetterErrorDescription")),
        "delivery_count": message.delivery_count,
        "lock_token": str(message.lock_token) if message.lock_token else None,
        "locked_until": message.locked_until_utc,
    }


def _text(value: Any) -> Any:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return value
    return value


def _utc_from_ms(milliseconds: int | None) -> dt.datetime | None:
    return dt.datetime.fromtimestamp(milliseconds / 1000, dt.UTC) if milliseconds else None


def _ttl_of(raw: AmqpAnnotatedMessage) -> dt.timedelta | None:
    """The exact TimeToLive in milliseconds (the SDK's `time_to_live` property rounds to seconds)."""
    ttl_ms = raw.header.time_to_live if raw.header else None
    return dt.timedelta(milliseconds=ttl_ms) if ttl_ms else None


def _header_ttl_ms(ttl: dt.timedelta | None) -> int | None:
    """TimeToLive for the AMQP header (a uint of milliseconds); longer means "the entity's default"."""
    if ttl is None:
        return None
    ttl_ms = int(ttl.total_seconds() * 1000)
    if ttl_ms <= 0:
        raise ValueError(f"TimeToLive must be positive, got {ttl}")
    return ttl_ms if ttl_ms <= AMQP_UINT_MAX else None


def _as_utc(moment: dt.datetime | None) -> dt.datetime:
    if moment is None:
        raise ValueError("the message has no EnqueuedTimeUtc; it was not received from a broker")
    return moment.replace(tzinfo=dt.UTC) if moment.tzinfo is None else moment.astimezone(dt.UTC)
