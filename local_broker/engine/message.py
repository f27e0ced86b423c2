"""A Service Bus message as the engine keeps it.

Times are UTC epoch seconds (floats) and TimeToLive is seconds, so the hot path never builds
datetimes; `get_system_property` / `set_system_property` convert for the rule language.
`body`, `annotations` and `amqp_properties` belong to the AMQP adapter: stored and returned verbatim.
"""

from __future__ import annotations

import math
import uuid
from datetime import datetime, timedelta
from enum import IntEnum
from operator import attrgetter
from typing import Any

from local_broker.engine.clock import to_datetime, to_epoch


class MessageState(IntEnum):
    """`x-opt-message-state` values."""

    ACTIVE = 0
    DEFERRED = 1
    SCHEDULED = 2


class ReceiveMode(IntEnum):
    """Values of `receiver-settle-mode` in `$management` requests."""

    RECEIVE_AND_DELETE = 0
    PEEK_LOCK = 1


DEAD_LETTER_REASON = "DeadLetterReason"
DEAD_LETTER_ERROR_DESCRIPTION = "DeadLetterErrorDescription"

_STRING_FIELDS: dict[str, str] = {
    "MessageId": "message_id",
    "CorrelationId": "correlation_id",
    "Label": "subject",
    "To": "to",
    "ReplyTo": "reply_to",
    "ReplyToSessionId": "reply_to_session_id",
    "SessionId": "session_id",
    "ContentType": "content_type",
    "PartitionKey": "partition_key",
    "DeadLetterSource": "dead_letter_source",
}
_INT_FIELDS: dict[str, str] = {
    "SequenceNumber": "sequence_number",
    "EnqueuedSequenceNumber": "enqueued_sequence_number",
    "DeliveryCount": "delivery_count",
    "Size": "size",
}

# What a topic message's copies share: the sender's content and what the broker stamps once. A copy in
# a subscription is a small record of its own state (lock, delivery count, place) that points at it, made
# when the copy is first received or expires; until then the subscription holds the topic message itself
# (a lazy copy, see SubQueue).
CONTENT_FIELDS = (
    "amqp_properties",
    "annotations",
    "body",
    "content_type",
    "correlation_id",
    "dead_letter_source",
    "enqueued_sequence_number",
    "hop_count",
    "message_id",
    "partition_id",
    "partition_key",
    "reply_to",
    "reply_to_session_id",
    "scheduled_enqueue_time",
    "session_id",
    "subject",
    "time_to_live",
    "to",
    "via_partition_key",
)
# Each copy's own: its place and state, plus the hot fields the sub-queues read per message (pointers
# to the same objects in every copy) and the property dict (rule actions replace it per copy).
COPY_FIELDS = (
    "application_properties",
    "content",
    "delivery_count",
    "enqueued_time",
    "entity",
    "expires_at",
    "lock_token",
    "locked_until",
    "persisted",
    "sequence_number",
    "size",
    "state",
    "uid",
)
# System property name -> reader of the attribute holding it as is (filters read these per message).
_PLAIN_READERS: dict[str, Any] = {
    name: attrgetter(attr if attr not in CONTENT_FIELDS else f"content.{attr}")
    for name, attr in (_STRING_FIELDS | _INT_FIELDS).items()
}
_FRESH = {"uid": "0", "entity": "None", "persisted": "False"}  # a copy is not stored anywhere yet


class MessageContent:
    """The fields of `CONTENT_FIELDS`, shared by a message and its copies until one of them changes a
    field (a rule action, a transfer, dead-lettering): that one then gets a content of its own.

    A store may keep it once for all copies: `payload` is then its stored row's id (0: not stored) and
    `payload_properties` the property dict stored with it; a stored content is never changed either.
    """

    __slots__ = (*CONTENT_FIELDS, "__weakref__", "payload", "payload_properties", "shared")

    def clone(self) -> MessageContent:
        twin = MessageContent()
        for name in CONTENT_FIELDS:
            setattr(twin, name, getattr(self, name))
        twin.shared = False
        twin.payload = 0
        twin.payload_properties = None
        return twin


_new = object.__new__


def _content_property(name: str) -> property:
    """Reads through to the content (one C-level attrgetter); a write that changes the value copies the
    content first if it is shared or stored."""

    def write(self: Message, value: Any) -> None:
        if getattr(self.content, name) is not value:
            setattr(self.own_content(), name, value)

    return property(attrgetter(f"content.{name}"), write)


def _copier() -> Any:
    """`Message.copy`, generated: one assignment per field of the copy's record (a getattr/setattr loop
    costs five times as much, and topic fan-out copies a message once per matching subscription)."""
    lines = [f"    twin.{name} = self.{name}" for name in COPY_FIELDS if name not in _FRESH]
    lines += [f"    twin.{name} = {value}" for name, value in _FRESH.items()]
    source = (
        "def copy(self):\n    twin = _new(self.__class__)\n    self.content.shared = True\n"
        + "\n".join(lines)
        + "\n    return twin\n"
    )
    namespace: dict[str, Any] = {"_new": _new}
    exec(compile(source, "<Message.copy>", "exec"), namespace)
    copy = namespace["copy"]
    copy.__doc__ = """A new message with the same content and state, not yet stored.

    The content is shared until either side changes a content field (copy-on-write, see
    `MessageContent`); so is the property dict, which the engine replaces instead of changing it in
    place once a message is accepted (see `with_application_properties`).
    """
    return copy


class Message:
    """One message. Construct with keyword arguments; the broker fills the broker-owned fields.

    The arguments after the first two are not keyword-only on purpose: CPython looks a missing
    keyword-only argument's default up in a dict, one lookup each (~25 per message, 3,000 instructions),
    where positional defaults are read from a tuple.

    Sender fields: body, application_properties, annotations, amqp_properties (the adapter's: fields of
    the AMQP properties section the engine does not read, in their AMQP types), message_id, correlation_id,
    session_id, reply_to_session_id, partition_key, via_partition_key, subject, to, reply_to,
    content_type, time_to_live (seconds or None), scheduled_enqueue_time (epoch seconds or None).
    Broker fields: sequence_number, enqueued_sequence_number, enqueued_time, expires_at,
    delivery_count, locked_until, lock_token, state, dead_letter_source, partition_id,
    hop_count, size. Engine-private: uid, entity (the sub-queue holding it), persisted, content.
    """

    __slots__ = COPY_FIELDS

    def __init__(
        self,
        body: bytes = b"",
        application_properties: dict[str, Any] | None = None,
        annotations: dict[str, Any] | None = None,
        amqp_properties: dict[str, Any] | None = None,
        message_id: str | None = None,
        correlation_id: str | None = None,
        session_id: str | None = None,
        reply_to_session_id: str | None = None,
        partition_key: str | None = None,
        via_partition_key: str | None = None,
        subject: str | None = None,
        to: str | None = None,
        reply_to: str | None = None,
        content_type: str | None = None,
        time_to_live: float | None = None,
        scheduled_enqueue_time: float | None = None,
        sequence_number: int = 0,
        enqueued_sequence_number: int = 0,
        enqueued_time: float = 0.0,
        expires_at: float = math.inf,
        delivery_count: int = 0,
        locked_until: float | None = None,
        lock_token: uuid.UUID | None = None,
        state: MessageState = MessageState.ACTIVE,
        dead_letter_source: str | None = None,
        partition_id: int | None = None,
        hop_count: int = 0,
        size: int = 0,
    ) -> None:
        c = self.content = MessageContent()  # written directly: no copy-on-write check needed
        c.shared = False
        c.payload = 0
        c.payload_properties = None
        c.body = body
        self.application_properties = {} if application_properties is None else application_properties
        c.annotations = annotations
        c.amqp_properties = amqp_properties
        c.message_id = message_id
        c.correlation_id = correlation_id
        c.session_id = session_id
        c.reply_to_session_id = reply_to_session_id
        c.partition_key = partition_key
        c.via_partition_key = via_partition_key
        c.subject = subject
        c.to = to
        c.reply_to = reply_to
        c.content_type = content_type
        c.time_to_live = time_to_live
        c.scheduled_enqueue_time = scheduled_enqueue_time
        self.sequence_number = sequence_number
        c.enqueued_sequence_number = enqueued_sequence_number
        self.enqueued_time = enqueued_time
        self.expires_at = expires_at
        self.delivery_count = delivery_count
        self.locked_until = locked_until
        self.lock_token = lock_token
        self.state = state
        c.dead_letter_source = dead_letter_source
        c.partition_id = partition_id
        c.hop_count = hop_count
        self.size = size
        self.uid = 0
        self.entity: Any = None
        self.persisted = False

    def __repr__(self) -> str:
        return (
            f"Message(sequence_number={self.sequence_number}, message_id={self.message_id!r}, "
            f"session_id={self.session_id!r}, state={self.state.name}, delivery_count={self.delivery_count})"
        )

    # --- derived views ---------------------------------------------------------------------------

    @property
    def dead_letter_reason(self) -> str | None:
        return self.application_properties.get(DEAD_LETTER_REASON)

    @property
    def dead_letter_error_description(self) -> str | None:
        return self.application_properties.get(DEAD_LETTER_ERROR_DESCRIPTION)

    @property
    def enqueued_time_utc(self) -> datetime:
        return to_datetime(self.enqueued_time)

    @property
    def expires_at_utc(self) -> datetime | None:
        return None if math.isinf(self.expires_at) else to_datetime(self.expires_at)

    @property
    def locked_until_utc(self) -> datetime | None:
        return None if self.locked_until is None else to_datetime(self.locked_until)

    @property
    def scheduled_enqueue_time_utc(self) -> datetime | None:
        t = self.scheduled_enqueue_time
        return None if t is None else to_datetime(t)

    copy = _copier()

    def own_content(self) -> MessageContent:
        """The content a change of a content field goes into: this message's own, cloned first if it is
        shared or stored (what the fields' setters do; the send path writes through it directly)."""
        content = self.content
        if content.shared or content.payload:
            content = self.content = content.clone()
        return content

    def copy_as(self, uid: int, ttl: float) -> Message:
        """The record of a lazy copy of this topic message (see SubQueue): numbered `uid`, expiring
        `ttl` seconds (or the message's own shorter time to live) after the message was enqueued."""
        twin = self.copy()
        twin.uid = uid
        twin.expires_at = self.expiry(ttl)
        return twin

    def expiry(self, ttl: float) -> float:
        """When a copy of it expires in an entity whose default time to live is `ttl` seconds."""
        own = self.content.time_to_live
        if own is not None and own < ttl:
            ttl = own
        return self.enqueued_time + ttl if ttl < 1e15 else math.inf

    def with_application_properties(self, changes: dict[str, Any]) -> None:
        """Replace the application properties by a new dict with `changes` applied (copy-on-write)."""
        self.application_properties = {**self.application_properties, **changes}

    # --- the rule language's view (local_broker.rules RuleTarget protocol) -------------------------

    def get_system_property(self, name: str) -> Any:
        read = _PLAIN_READERS.get(name)
        if read is not None:
            return read(self)
        if name == "TimeToLive":
            return None if self.time_to_live is None else timedelta(seconds=self.time_to_live)
        if name == "ScheduledEnqueueTimeUtc":
            return self.scheduled_enqueue_time_utc
        if name == "EnqueuedTimeUtc":
            return self.enqueued_time_utc if self.enqueued_time else None
        if name == "LockedUntilUtc":
            return self.locked_until_utc
        if name == "ExpiresAtUtc":
            return self.expires_at_utc
        if name == "State":
            return int(self.state)
        raise KeyError(name)

    def set_system_property(self, name: str, value: Any) -> None:
        attr = _STRING_FIELDS.get(name)
        if attr is not None:
            setattr(self, attr, None if value is None else str(value))
        elif name == "TimeToLive":
            self.time_to_live = value.total_seconds() if isinstance(value, timedelta) else value
        elif name == "ScheduledEnqueueTimeUtc":
            self.scheduled_enqueue_time = to_epoch(value) if isinstance(value, datetime) else value
        else:
            raise KeyError(name)


for _name in CONTENT_FIELDS:
    setattr(Message, _name, _content_property(_name))
