"""Names and property values Service Bus accepts, with the errors it gives for the rest."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from local_broker.engine.errors import ArgumentError, ArgumentOutOfRangeError
from local_broker.engine.properties import (
    TIMESPAN_MAX,
    EntityStatus,
    NamespaceConfig,
    QueueProperties,
    SubscriptionProperties,
    TopicProperties,
    element_name,
    is_infinite,
)
from local_broker.store.codec import encode_value

MAX_PATH_LENGTH = 260
MAX_SEGMENT_NAME_LENGTH = 50
MAX_USER_METADATA = 1024
MAX_SIZE_IN_MEGABYTES = 81920
MAX_ID_LENGTH = 128

_SEGMENT = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._\-]*[A-Za-z0-9_])?$")
_RULE = re.compile(r"^\$?[A-Za-z0-9._\-]+$")

QUEUE_STATUSES = frozenset(EntityStatus)
TOPIC_STATUSES = frozenset({EntityStatus.ACTIVE, EntityStatus.DISABLED, EntityStatus.SEND_DISABLED})
SUBSCRIPTION_STATUSES = frozenset({EntityStatus.ACTIVE, EntityStatus.DISABLED, EntityStatus.RECEIVE_DISABLED})

CREATE_ONLY = {
    "queue": ("requires_session", "requires_duplicate_detection", "enable_partitioning"),
    "topic": ("requires_duplicate_detection", "enable_partitioning"),
    "subscription": ("requires_session",),
}

_NAME_RULES = (
    "Entity segments can contain only letters, numbers, periods (.), hyphens (-), and underscores (_), "
    "and must start with a letter or number."
)


def _bad_name(kind: str, name: str, why: str) -> ArgumentError:
    return ArgumentError(f"The {kind} name '{name}' is invalid. {why}", "name")


def check_entity_name(kind: str, name: str) -> None:
    """Queue and topic names: segments separated by '/', at most 260 characters in all."""
    if not isinstance(name, str) or not name:
        raise _bad_name(kind, str(name), "The name cannot be empty.")
    if len(name) > MAX_PATH_LENGTH:
        raise _bad_name(kind, name, f"The name is longer than {MAX_PATH_LENGTH} characters.")
    segments = name.split("/")
    for segment in segments:
        if not _SEGMENT.match(segment):
            raise _bad_name(kind, name, _NAME_RULES)
        if segment.lower() in ("subscriptions", "rules", "$deadletterqueue", "$transfer"):
            raise _bad_name(kind, name, f"'{segment}' is a reserved path segment.")


def check_segment_name(kind: str, name: str) -> None:
    """Subscription and rule names: one segment, at most 50 characters."""
    if not isinstance(name, str) or not name:
        raise _bad_name(kind, str(name), "The name cannot be empty.")
    if len(name) > MAX_SEGMENT_NAME_LENGTH:
        raise _bad_name(kind, name, f"The name is longer than {MAX_SEGMENT_NAME_LENGTH} characters.")
    pattern = _RULE if kind == "rule" else _SEGMENT
    if not pattern.match(name):
        raise _bad_name(kind, name, _NAME_RULES)


def _out_of_range(attribute: str, value: Any, rule: str) -> ArgumentOutOfRangeError:
    element = element_name(attribute)
    return ArgumentOutOfRangeError(
        f"The value '{value}' supplied for {element} is out of range: {rule}. Parameter name: {element}",
        attribute,
    )


def _check_duration(props: Any, attribute: str, low: timedelta, high: timedelta = TIMESPAN_MAX) -> None:
    value = getattr(props, attribute)
    if not isinstance(value, timedelta):
        raise ArgumentError(f"{element_name(attribute)} must be a duration.", attribute)
    if is_infinite(value):
        if high < TIMESPAN_MAX - timedelta(seconds=1):
            raise _out_of_range(attribute, value, f"it must be between {low} and {high}")
        setattr(props, attribute, TIMESPAN_MAX)
        return
    if not low <= value <= high:
        raise _out_of_range(attribute, value, f"it must be between {low} and {high}")


def _check_int(props: Any, attribute: str, low: int, high: int) -> None:
    value = getattr(props, attribute)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ArgumentError(f"{element_name(attribute)} must be an integer.", attribute)
    if not low <= value <= high:
        raise _out_of_range(attribute, value, f"it must be between {low} and {high}")


def _check_status(props: Any, allowed: frozenset[EntityStatus]) -> None:
    try:
        props.status = EntityStatus(props.status)
    except ValueError:
        props.status = None
    if props.status not in allowed:
        values = ", ".join(sorted(s.value for s in allowed))
        raise ArgumentError(f"Status must be one of {values}. Parameter name: Status", "status")


def _check_metadata(props: Any) -> None:
    if props.user_metadata is not None and len(props.user_metadata) > MAX_USER_METADATA:
        raise _out_of_range("user_metadata", "...", f"at most {MAX_USER_METADATA} characters")
    check_storable(getattr(props, "authorization_rules", None), "authorization_rules")


def check_storable(value: Any, attribute: str) -> None:
    """Everything an entity or rule carries must survive the store (a commit must never fail on a value)."""
    try:
        encode_value(value)
    except TypeError as exc:
        problem = f"{element_name(attribute)} holds a value that cannot be kept: {exc}."
        raise ArgumentError(problem, attribute) from exc


def _check_forwarding_names(props: Any) -> None:
    for attribute in ("forward_to", "forward_dead_lettered_messages_to"):
        value = getattr(props, attribute)
        if value == "":
            setattr(props, attribute, None)
        elif value is not None:
            check_entity_name("entity", value)


def _check_message_size(props: Any, config: NamespaceConfig) -> None:
    if props.max_message_size_in_kilobytes is None:
        props.max_message_size_in_kilobytes = config.max_message_size_in_kilobytes
        return
    value = props.max_message_size_in_kilobytes
    if value == config.max_message_size_in_kilobytes:
        return
    if not config.premium:
        raise ArgumentError(
            "MaxMessageSizeInKilobytes can be set only on Premium namespaces. "
            "Parameter name: MaxMessageSizeInKilobytes",
            "max_message_size_in_kilobytes",
        )
    _check_int(props, "max_message_size_in_kilobytes", 1024, 102400)


_LOCK_LOW, _LOCK_HIGH = timedelta(seconds=5), timedelta(minutes=5)
_DEDUP_LOW, _DEDUP_HIGH = timedelta(seconds=20), timedelta(days=7)
_TTL_LOW = timedelta(seconds=1)
_IDLE_LOW = timedelta(minutes=5)


def check_queue(props: QueueProperties, config: NamespaceConfig) -> None:
    check_entity_name("queue", props.name)
    _check_duration(props, "lock_duration", _LOCK_LOW, _LOCK_HIGH)
    _check_int(props, "max_size_in_megabytes", 1, MAX_SIZE_IN_MEGABYTES)
    _check_duration(props, "default_message_time_to_live", _TTL_LOW)
    _check_duration(props, "duplicate_detection_history_time_window", _DEDUP_LOW, _DEDUP_HIGH)
    _check_int(props, "max_delivery_count", 1, 2**31 - 1)
    _check_duration(props, "auto_delete_on_idle", _IDLE_LOW)
    _check_status(props, QUEUE_STATUSES)
    _check_metadata(props)
    _check_forwarding_names(props)
    _check_message_size(props, config)


def check_topic(props: TopicProperties, config: NamespaceConfig) -> None:
    check_entity_name("topic", props.name)
    _check_int(props, "max_size_in_megabytes", 1, MAX_SIZE_IN_MEGABYTES)
    _check_duration(props, "default_message_time_to_live", _TTL_LOW)
    _check_duration(props, "duplicate_detection_history_time_window", _DEDUP_LOW, _DEDUP_HIGH)
    _check_duration(props, "auto_delete_on_idle", _IDLE_LOW)
    _check_status(props, TOPIC_STATUSES)
    _check_metadata(props)
    _check_message_size(props, config)


def check_subscription(props: SubscriptionProperties) -> None:
    check_segment_name("subscription", props.name)
    _check_duration(props, "lock_duration", _LOCK_LOW, _LOCK_HIGH)
    _check_duration(props, "default_message_time_to_live", _TTL_LOW)
    _check_int(props, "max_delivery_count", 1, 2**31 - 1)
    _check_duration(props, "auto_delete_on_idle", _IDLE_LOW)
    _check_status(props, SUBSCRIPTION_STATUSES)
    _check_metadata(props)
    _check_forwarding_names(props)


def check_create_only(kind: str, old: Any, new: Any) -> None:
    """Properties fixed at creation may be repeated on update but not changed."""
    for attribute in CREATE_ONLY[kind]:
        if bool(getattr(old, attribute)) != bool(getattr(new, attribute)):
            raise ArgumentError(
                f"The value for the {element_name(attribute)} property of an existing {kind.capitalize()} "
                f"cannot be changed. Parameter name: {element_name(attribute)}",
                attribute,
            )


def check_message_ids(m: Any) -> None:
    """MessageId, SessionId and PartitionKey are at most 128 characters; PartitionKey must equal SessionId."""
    for attribute, element in (
        ("message_id", "MessageId"),
        ("session_id", "SessionId"),
        ("partition_key", "PartitionKey"),
    ):
        value = getattr(m, attribute)
        if value is not None and len(value) > MAX_ID_LENGTH:
            raise ArgumentOutOfRangeError(
                f"The {element} exceeds the maximum allowed length of {MAX_ID_LENGTH} characters. "
                f"Parameter name: {element}",
                attribute,
            )
