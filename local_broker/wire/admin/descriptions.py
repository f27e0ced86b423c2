"""Queue, topic and subscription descriptions: XML elements <-> SDK attribute names with typed values.

A parsed request is a plain dict of the *settable* attributes present in the body, e.g.
`{"lock_duration": timedelta(seconds=30), "forward_to": "q2"}`; read-only elements (counts, times) are
ignored, as Service Bus ignores them on update. Rendering takes a mapping of properties and runtime
figures keyed the same way and writes the elements in the SDK's canonical order (servicebus-wire.md 11.7).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any
from urllib.parse import unquote, urlsplit
from xml.etree import ElementTree

from local_broker.engine.errors import ArgumentError
from local_broker.engine.properties import AvailabilityStatus, EntityStatus
from local_broker.wire.admin import rule_codec
from local_broker.wire.admin.atom import COUNTS_NS, SB_NS, XSI_NS, element
from local_broker.wire.admin.durations import (
    format_duration,
    format_timestamp,
    parse_duration,
    parse_timestamp,
)


def _boolean(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"'{raw}' is not true or false")
    return lowered == "true"


def _entity_name(raw: str) -> str | None:
    """`sb://host:port/q2` (what the SDK sends) or a bare `q2` -> `q2`; empty -> unset."""
    raw = raw.strip()
    if not raw:
        return None
    parts = urlsplit(raw)
    return unquote(parts.path).strip("/") if parts.scheme else raw


def _enum_text(value: Any) -> str:
    return value.value if isinstance(value, Enum) else str(value)


@dataclass(frozen=True)
class ValueType:
    parse: Callable[[str], Any]
    render: Callable[[Any], str]


DURATION = ValueType(parse_duration, format_duration)
BOOLEAN = ValueType(_boolean, lambda v: "true" if v else "false")
INTEGER = ValueType(lambda raw: int(raw.strip()), str)
TEXT = ValueType(str, str)
ENTITY = ValueType(_entity_name, str)
TIMESTAMP = ValueType(parse_timestamp, format_timestamp)
STATUS = ValueType(EntityStatus, _enum_text)
AVAILABILITY = ValueType(AvailabilityStatus, _enum_text)


@dataclass(frozen=True)
class Field:
    element: str
    attribute: str
    type: ValueType
    settable: bool = True


def _settable(element_name: str, attribute: str, value_type: ValueType) -> Field:
    return Field(element_name, attribute, value_type)


def _read_only(element_name: str, attribute: str, value_type: ValueType) -> Field:
    return Field(element_name, attribute, value_type, settable=False)


# Placeholders for the elements with their own codecs; never parsed as scalars.
COUNT_DETAILS = _read_only("CountDetails", "", TEXT)
AUTHORIZATION_RULES = _read_only("AuthorizationRules", "", TEXT)
DEFAULT_RULE = _read_only("DefaultRuleDescription", "default_rule", TEXT)

_LOCK = _settable("LockDuration", "lock_duration", DURATION)
_MAX_SIZE = _settable("MaxSizeInMegabytes", "max_size_in_megabytes", INTEGER)
_DEDUP = _settable("RequiresDuplicateDetection", "requires_duplicate_detection", BOOLEAN)
_SESSION = _settable("RequiresSession", "requires_session", BOOLEAN)
_TTL = _settable("DefaultMessageTimeToLive", "default_message_time_to_live", DURATION)
_DLQ_ON_EXPIRY = _settable("DeadLetteringOnMessageExpiration", "dead_lettering_on_message_expiration",
                           BOOLEAN)
_DEDUP_WINDOW = _settable("DuplicateDetectionHistoryTimeWindow", "duplicate_detection_history_time_window",
                          DURATION)
_MAX_DELIVERY = _settable("MaxDeliveryCount", "max_delivery_count", INTEGER)
_BATCHED = _settable("EnableBatchedOperations", "enable_batched_operations", BOOLEAN)
_SIZE = _read_only("SizeInBytes", "size_in_bytes", INTEGER)
_MESSAGE_COUNT = _read_only("MessageCount", "total_message_count", INTEGER)
_ANONYMOUS = _settable("IsAnonymousAccessible", "is_anonymous_accessible", BOOLEAN)
_STATUS = _settable("Status", "status", STATUS)
_FORWARD = _settable("ForwardTo", "forward_to", ENTITY)
_METADATA = _settable("UserMetadata", "user_metadata", TEXT)
_CREATED = _read_only("CreatedAt", "created_at", TIMESTAMP)
_UPDATED = _read_only("UpdatedAt", "updated_at", TIMESTAMP)
_ACCESSED = _read_only("AccessedAt", "accessed_at", TIMESTAMP)
_ORDERING = _settable("SupportOrdering", "support_ordering", BOOLEAN)
_AUTO_DELETE = _settable("AutoDeleteOnIdle", "auto_delete_on_idle", DURATION)
_PARTITIONING = _settable("EnablePartitioning", "enable_partitioning", BOOLEAN)
_AVAILABILITY = _read_only("EntityAvailabilityStatus", "availability_status", AVAILABILITY)
_FORWARD_DLQ = _settable("ForwardDeadLetteredMessagesTo", "forward_dead_lettered_messages_to", ENTITY)
_EXPRESS = _settable("EnableExpress", "enable_express", BOOLEAN)
_MAX_MESSAGE_SIZE = _settable("MaxMessageSizeInKilobytes", "max_message_size_in_kilobytes", INTEGER)

QUEUE_FIELDS = (
    _LOCK, _MAX_SIZE, _DEDUP, _SESSION, _TTL, _DLQ_ON_EXPIRY, _DEDUP_WINDOW, _MAX_DELIVERY, _BATCHED, _SIZE,
    _MESSAGE_COUNT, _ANONYMOUS, AUTHORIZATION_RULES, _STATUS, _FORWARD, _METADATA, _CREATED, _UPDATED,
    _ACCESSED, _ORDERING, COUNT_DETAILS, _AUTO_DELETE, _PARTITIONING, _AVAILABILITY, _FORWARD_DLQ, _EXPRESS,
    _MAX_MESSAGE_SIZE,
)
TOPIC_FIELDS = (
    _TTL, _MAX_SIZE, _DEDUP, _DEDUP_WINDOW, _BATCHED, _SIZE,
    _settable("FilteringMessagesBeforePublishing", "filtering_messages_before_publishing", BOOLEAN),
    _ANONYMOUS, AUTHORIZATION_RULES, _STATUS, _CREATED, _UPDATED, _ACCESSED, _ORDERING, COUNT_DETAILS,
    _read_only("SubscriptionCount", "subscription_count", INTEGER),
    _read_only("SqlFilterCount", "sql_filter_count", INTEGER),
    _read_only("CorrelationFilterCount", "correlation_filter_count", INTEGER),
    _AUTO_DELETE, _PARTITIONING, _AVAILABILITY,
    _settable("EnableSubscriptionPartitioning", "enable_subscription_partitioning", BOOLEAN),
    _EXPRESS, _METADATA, _MAX_MESSAGE_SIZE,
)
SUBSCRIPTION_FIELDS = (
    _LOCK, _SESSION, _TTL, _DLQ_ON_EXPIRY,
    _settable("DeadLetteringOnFilterEvaluationExceptions", "dead_lettering_on_filter_evaluation_exceptions",
              BOOLEAN),
    DEFAULT_RULE, _MESSAGE_COUNT, _MAX_DELIVERY, _BATCHED, _STATUS, _FORWARD, _CREATED, _UPDATED, _ACCESSED,
    COUNT_DETAILS, _METADATA, _FORWARD_DLQ, _AUTO_DELETE, _AVAILABILITY,
)
# CountDetails children, in the order responses were verified with (d2p1 = COUNTS_NS).
COUNT_FIELDS = (
    ("ActiveMessageCount", "active_message_count"),
    ("DeadLetterMessageCount", "dead_letter_message_count"),
    ("ScheduledMessageCount", "scheduled_message_count"),
    ("TransferMessageCount", "transfer_message_count"),
    ("TransferDeadLetterMessageCount", "transfer_dead_letter_message_count"),
)

SCHEMAS: dict[str, tuple[Field, ...]] = {
    "QueueDescription": QUEUE_FIELDS,
    "TopicDescription": TOPIC_FIELDS,
    "SubscriptionDescription": SUBSCRIPTION_FIELDS,
}


def settable_attributes(kind: str) -> tuple[str, ...]:
    """Every attribute a PUT of this description kind may set (an update replaces them all)."""
    return tuple(f.attribute for f in SCHEMAS[kind] if f.settable)


def parse_description(description: ElementTree.Element) -> tuple[str, dict[str, Any]]:
    """(kind, settable attributes present) of a queue, topic or subscription description."""
    kind = description.tag.removeprefix(f"{{{SB_NS}}}")
    fields = SCHEMAS.get(kind)
    if fields is None:
        raise ArgumentError(f"The entry holds '{kind}'; expected a queue, topic or subscription description.")
    by_element = {f.element: f for f in fields}
    values: dict[str, Any] = {}
    for child in description:
        name = child.tag.removeprefix(f"{{{SB_NS}}}")
        field = by_element.get(name)
        if field is DEFAULT_RULE:
            values["default_rule"] = rule_codec.parse_rule(child, default_name=None)
        elif field is AUTHORIZATION_RULES and len(child):
            raise ArgumentError("Entity-level authorization rules are not supported by the local broker; "
                                "authorize with the namespace's shared access policies.",
                                property_name="authorization_rules")
        elif field is not None and field.settable:
            values[field.attribute] = _parse_value(field, child.text or "")
    return kind, values


def _parse_value(field: Field, raw: str) -> Any:
    try:
        return field.type.parse(raw)
    except ValueError as exc:
        raise ArgumentError(
            f"The value '{raw}' of the property '{field.element}' is not valid: {exc}",
            property_name=field.attribute,
        ) from exc


def forwarding_as_uris(values: Mapping[str, Any], namespace_uri: str) -> dict[str, Any]:
    """Forwarding destinations as Service Bus returns them: `sb://<namespace>/<entity>`."""
    return {**values, **{f.attribute: f"{namespace_uri}/{values[f.attribute]}"
                         for f in (_FORWARD, _FORWARD_DLQ) if values.get(f.attribute)}}


def render_description(kind: str, values: Mapping[str, Any]) -> str:
    """The description element for a response; attributes missing from `values` (or None) are left out,
    but for timestamps."""
    parts = []
    for field in SCHEMAS[kind]:
        if field is COUNT_DETAILS:
            counts = "".join(element(f"d2p1:{tag}", values.get(attr, 0)) for tag, attr in COUNT_FIELDS)
            parts.append(f'<CountDetails xmlns:d2p1="{COUNTS_NS}">{counts}</CountDetails>')
        elif field is AUTHORIZATION_RULES:
            parts.append("<AuthorizationRules/>")
        elif field.type is TIMESTAMP:  # always present (clients require them); never = DateTime.MinValue
            parts.append(element(field.element, format_timestamp(values.get(field.attribute))))
        elif field is not DEFAULT_RULE and values.get(field.attribute) is not None:
            parts.append(element(field.element, field.type.render(values[field.attribute])))
    return f'<{kind} xmlns="{SB_NS}" xmlns:i="{XSI_NS}">{"".join(parts)}</{kind}>'
