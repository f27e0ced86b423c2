"""Entity descriptions as the azure-servicebus SDK names them: queues, topics, subscriptions, rules.

Field names are the SDK's attribute names so the admin adapter maps XML elements to fields by
converting `LockDuration` <-> `lock_duration` (see `element_name`). Durations are timedeltas;
`TIMESPAN_MAX` stands for .NET TimeSpan.MaxValue ("never").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

TIMESPAN_MAX = timedelta(days=10675199, hours=2, minutes=48, seconds=5, microseconds=477581)
"""TimeSpan.MaxValue (P10675199DT2H48M5.4775807S), rounded to timedelta's microsecond."""


def is_infinite(duration: timedelta) -> bool:
    """True for TimeSpan.MaxValue and values the wire rounded near it (e.g. ...5.477539S)."""
    return duration >= TIMESPAN_MAX - timedelta(seconds=1)


def element_name(attribute: str) -> str:
    """The admin XML element of an SDK attribute: `max_size_in_megabytes` -> `MaxSizeInMegabytes`."""
    return "".join(part.capitalize() for part in attribute.split("_"))


class EntityStatus(StrEnum):
    ACTIVE = "Active"
    DISABLED = "Disabled"
    SEND_DISABLED = "SendDisabled"
    RECEIVE_DISABLED = "ReceiveDisabled"


class AvailabilityStatus(StrEnum):
    AVAILABLE = "Available"
    LIMITED = "Limited"


@dataclass(slots=True)
class QueueProperties:
    name: str
    lock_duration: timedelta = timedelta(seconds=60)
    max_size_in_megabytes: int = 1024
    requires_duplicate_detection: bool = False
    requires_session: bool = False
    default_message_time_to_live: timedelta = TIMESPAN_MAX
    dead_lettering_on_message_expiration: bool = False
    duplicate_detection_history_time_window: timedelta = timedelta(minutes=10)
    max_delivery_count: int = 10
    enable_batched_operations: bool = True
    status: EntityStatus = EntityStatus.ACTIVE
    forward_to: str | None = None
    forward_dead_lettered_messages_to: str | None = None
    auto_delete_on_idle: timedelta = TIMESPAN_MAX
    enable_partitioning: bool = False
    user_metadata: str | None = None
    max_message_size_in_kilobytes: int | None = None  # None on create: the namespace default
    support_ordering: bool = True
    enable_express: bool = False
    is_anonymous_accessible: bool = False
    authorization_rules: list[Any] = field(default_factory=list)  # opaque to the engine; stored and echoed
    created_at: datetime | None = None  # set by the engine
    updated_at: datetime | None = None
    accessed_at: datetime | None = None


@dataclass(slots=True)
class TopicProperties:
    name: str
    default_message_time_to_live: timedelta = TIMESPAN_MAX
    max_size_in_megabytes: int = 1024
    requires_duplicate_detection: bool = False
    duplicate_detection_history_time_window: timedelta = timedelta(minutes=10)
    enable_batched_operations: bool = True
    filtering_messages_before_publishing: bool = False
    status: EntityStatus = EntityStatus.ACTIVE
    support_ordering: bool = True
    auto_delete_on_idle: timedelta = TIMESPAN_MAX
    enable_partitioning: bool = False
    enable_subscription_partitioning: bool = False
    enable_express: bool = False
    user_metadata: str | None = None
    max_message_size_in_kilobytes: int | None = None
    is_anonymous_accessible: bool = False
    authorization_rules: list[Any] = field(default_factory=list)
    created_at: datetime | None = None
    updated_at: datetime | None = None
    accessed_at: datetime | None = None


@dataclass(slots=True)
class SubscriptionProperties:
    name: str
    topic_name: str = ""  # filled by the engine from the create/update call
    lock_duration: timedelta = timedelta(seconds=60)
    requires_session: bool = False
    default_message_time_to_live: timedelta = TIMESPAN_MAX
    dead_lettering_on_message_expiration: bool = False
    dead_lettering_on_filter_evaluation_exceptions: bool = True
    max_delivery_count: int = 10
    enable_batched_operations: bool = True
    status: EntityStatus = EntityStatus.ACTIVE
    forward_to: str | None = None
    forward_dead_lettered_messages_to: str | None = None
    auto_delete_on_idle: timedelta = TIMESPAN_MAX
    user_metadata: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    accessed_at: datetime | None = None


# --- rules ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TrueFilter:
    sql_expression: str = "1=1"


@dataclass(frozen=True, slots=True)
class FalseFilter:
    sql_expression: str = "1=0"


@dataclass(frozen=True, slots=True)
class SqlFilter:
    sql_expression: str
    parameters: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class CorrelationFilter:
    correlation_id: str | None = None
    message_id: str | None = None
    to: str | None = None
    reply_to: str | None = None
    label: str | None = None
    session_id: str | None = None
    reply_to_session_id: str | None = None
    content_type: str | None = None
    properties: dict[str, Any] | None = None


RuleFilter = TrueFilter | FalseFilter | SqlFilter | CorrelationFilter


@dataclass(frozen=True, slots=True)
class SqlRuleAction:
    sql_expression: str
    parameters: dict[str, Any] | None = None


DEFAULT_RULE_NAME = "$Default"


@dataclass(slots=True)
class RuleProperties:
    name: str
    filter: RuleFilter = field(default_factory=TrueFilter)
    action: SqlRuleAction | None = None
    created_at: datetime | None = None  # set by the engine


# --- runtime -------------------------------------------------------------------------------------


@dataclass(slots=True)
class RuntimeProperties:
    """Counts and times of a queue, topic or subscription (topics: counts summed over subscriptions)."""

    name: str
    active_message_count: int = 0
    dead_letter_message_count: int = 0
    scheduled_message_count: int = 0
    transfer_message_count: int = 0
    transfer_dead_letter_message_count: int = 0
    size_in_bytes: int = 0
    subscription_count: int | None = None  # topics only
    sql_filter_count: int | None = None  # topics only
    correlation_filter_count: int | None = None  # topics only
    availability_status: AvailabilityStatus = AvailabilityStatus.AVAILABLE
    created_at: datetime | None = None
    updated_at: datetime | None = None
    accessed_at: datetime | None = None

    @property
    def total_message_count(self) -> int:
        """`MessageCount` on the admin wire: every message the entity holds, in all sub-queues."""
        return (
            self.active_message_count
            + self.dead_letter_message_count
            + self.scheduled_message_count
            + self.transfer_message_count
            + self.transfer_dead_letter_message_count
        )


@dataclass(slots=True)
class NamespaceProperties:
    """What `GET /$namespaceinfo` reports."""

    name: str
    created_at: datetime
    modified_at: datetime
    messaging_sku: str = "Standard"
    messaging_units: int = 1
    namespace_type: str = "Messaging"


@dataclass(slots=True)
class NamespaceConfig:
    """Per-namespace settings; defaults are the Standard tier's (servicebus-semantics.md section 17)."""

    name: str = "sbemulatorns"
    premium: bool = False  # Premium allows MaxMessageSizeInKilobytes 1024..102400 per entity
    max_message_size_in_kilobytes: int = 256
    max_size_in_megabytes: int = 409_600  # all entities' messages together (Standard: 400 GB)
    max_entities: int = 10_000
    max_subscriptions_per_topic: int = 2_000
    max_sql_filters_per_topic: int = 2_000
    max_correlation_filters_per_topic: int = 100_000
    max_partitioned_entities: int = 100
    partition_count: int = 16
