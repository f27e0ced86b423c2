"""What a topology may declare: each entity kind's properties (the SDK's names) with the values Service Bus
accepts, the correlation filter fields, the SAS rights, and the `local` settings of the broker."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from topology.durations import TIMESPAN_MAX


@dataclass(frozen=True)
class Property:
    kind: str  # duration | bool | int | entity | text | choice (a status)
    low: Any = None
    high: Any = None
    choices: tuple[str, ...] = ()


def _duration(low: timedelta, high: timedelta = TIMESPAN_MAX) -> Property:
    return Property("duration", low, high)


BOOL = Property("bool")
ENTITY = Property("entity")  # the name of a queue or topic of the same namespace
TEXT = Property("text", None, 1024)
LOCK_DURATION = _duration(timedelta(seconds=5), timedelta(minutes=5))
TIME_TO_LIVE = _duration(timedelta(seconds=1))
DUPLICATE_WINDOW = _duration(timedelta(seconds=20), timedelta(days=7))
IDLE = _duration(timedelta(minutes=5))
DELIVERY_COUNT = Property("int", 1, 2**31 - 1)
SIZE_MB = Property("int", 1, 81920)
MESSAGE_SIZE_KB = Property("int", 1024, 102400)  # Premium namespaces only
QUEUE_STATUS = Property("choice", choices=("Active", "Disabled", "SendDisabled", "ReceiveDisabled"))
TOPIC_STATUS = Property("choice", choices=("Active", "Disabled", "SendDisabled"))
SUBSCRIPTION_STATUS = Property("choice", choices=("Active", "Disabled", "ReceiveDisabled"))

QUEUE: dict[str, Property] = {
    "auto_delete_on_idle": IDLE,
    "dead_lettering_on_message_expiration": BOOL,
    "default_message_time_to_live": TIME_TO_LIVE,
    "duplicate_detection_history_time_window": DUPLICATE_WINDOW,
    "enable_batched_operations": BOOL,
    "enable_express": BOOL,
    "enable_partitioning": BOOL,
    "forward_dead_lettered_messages_to": ENTITY,
    "forward_to": ENTITY,
    "lock_duration": LOCK_DURATION,
    "max_delivery_count": DELIVERY_COUNT,
    "max_message_size_in_kilobytes": MESSAGE_SIZE_KB,
    "max_size_in_megabytes": SIZE_MB,
    "requires_duplicate_detection": BOOL,
    "requires_session": BOOL,
    "status": QUEUE_STATUS,
    "user_metadata": TEXT,
}
TOPIC: dict[str, Property] = {
    "auto_delete_on_idle": IDLE,
    "default_message_time_to_live": TIME_TO_LIVE,
    "duplicate_detection_history_time_window": DUPLICATE_WINDOW,
    "enable_batched_operations": BOOL,
    "enable_express": BOOL,
    "enable_partitioning": BOOL,
    "filtering_messages_before_publishing": BOOL,
    "max_message_size_in_kilobytes": MESSAGE_SIZE_KB,
    "max_size_in_megabytes": SIZE_MB,
    "requires_duplicate_detection": BOOL,
    "status": TOPIC_STATUS,
    "support_ordering": BOOL,
    "user_metadata": TEXT,
}
SUBSCRIPTION: dict[str, Property] = {
    "auto_delete_on_idle": IDLE,
    "dead_lettering_on_filter_evaluation_exceptions": BOOL,
    "dead_lettering_on_message_expiration": BOOL,
    "default_message_time_to_live": TIME_TO_LIVE,
    "enable_batched_operations": BOOL,
    "forward_dead_lettered_messages_to": ENTITY,
    "forward_to": ENTITY,
    "lock_duration": LOCK_DURATION,
    "max_delivery_count": DELIVERY_COUNT,
    "requires_session": BOOL,
    "status": SUBSCRIPTION_STATUS,
    "user_metadata": TEXT,
}
PROPERTIES = {"queue": QUEUE, "topic": TOPIC, "subscription": SUBSCRIPTION}
FORWARDING = ("forward_to", "forward_dead_lettered_messages_to")

CORRELATION_FIELDS = ("correlation_id", "message_id", "to", "reply_to", "label", "session_id",
                      "reply_to_session_id", "content_type")
RIGHTS = ("Manage", "Send", "Listen")
LOCAL: dict[str, Property] = {
    "amqp_port": Property("int", 0, 65535),
    "admin_port": Property("int", 0, 65535),
    "amqps_port": Property("int", 0, 65535),
    "websocket_port": Property("int", 0, 65535),
    "max_message_size_kb": Property("int", 256, 102400),
}

# Service Bus entity names: '/'-separated segments of letters, digits, '.', '-', '_' (260 at most);
# subscriptions and rules are one segment of at most 50.
ENTITY_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._\-]*[A-Za-z0-9_])?(?:/[A-Za-z0-9](?:[A-Za-z0-9._\-]*"
                         r"[A-Za-z0-9_])?)*$")
RULE_NAME = re.compile(r"^\$?[A-Za-z0-9._\-]+$")
MAX_ENTITY_NAME, MAX_SEGMENT_NAME = 260, 50
NAME_RULE = "letters, digits, '.', '-' and '_', starting with a letter or digit"
