"""What a rule sees of a message: user properties (case-insensitive names) and system properties."""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

# The "publicly settable" system properties a rule action may assign or remove, and those the broker owns.
_SETTABLE = (
    "MessageId",
    "CorrelationId",
    "Label",
    "To",
    "ReplyTo",
    "ReplyToSessionId",
    "SessionId",
    "ContentType",
    "TimeToLive",
    "ScheduledEnqueueTimeUtc",
    "PartitionKey",
)
_BROKER_OWNED = (
    "EnqueuedTimeUtc",
    "SequenceNumber",
    "EnqueuedSequenceNumber",
    "DeliveryCount",
    "Size",
    "LockedUntilUtc",
    "ExpiresAtUtc",
    "State",
    "DeadLetterSource",
)
SETTABLE_SYSTEM_PROPERTIES: frozenset[str] = frozenset(_SETTABLE)
# SQL name (lower case, as written after `sys.`) -> canonical system property name.
SYSTEM_PROPERTIES: dict[str, str] = {name.lower(): name for name in _SETTABLE + _BROKER_OWNED}
SYSTEM_PROPERTIES["subject"] = "Label"


@runtime_checkable
class RuleTarget(Protocol):
    """The message protocol filters read and actions mutate (the engine's message implements it).

    `application_properties` keeps the senders' key casing; rules look names up case-insensitively.
    System properties are addressed by the canonical names of SYSTEM_PROPERTIES; an unset one is None.
    """

    application_properties: MutableMapping[str, Any]

    def get_system_property(self, name: str) -> Any: ...

    def set_system_property(self, name: str, value: Any) -> None: ...


@dataclass
class MessageProperties:
    """A plain RuleTarget: the properties of one message and nothing else (for tests, tools and benches)."""

    application_properties: dict[str, Any] = field(default_factory=dict)
    system_properties: dict[str, Any] = field(default_factory=dict)

    def get_system_property(self, name: str) -> Any:
        return self.system_properties.get(name)

    def set_system_property(self, name: str, value: Any) -> None:
        if value is None:
            self.system_properties.pop(name, None)
        else:
            self.system_properties[name] = value


MISSING: Any = object()
"""Returned by `find_user_key` when no property has the name (a property may hold None)."""


def find_user_key(properties: MutableMapping[str, Any], name: str, lowered: str) -> Any:
    """The key of `properties` equal to `name` ignoring case (exact casing preferred), else MISSING.

    Names are compared character by character, as .NET's ordinal ignore-case does, so only
    keys of the same length can match; `lowered` is `name.lower()`, computed once by the caller.
    """
    if name in properties:
        return name
    length = len(name)
    try:
        for key in properties:
            if len(key) == length and key.lower() == lowered:
                return key
    except (TypeError, AttributeError):  # a key that is not a string: retry the careful way
        for key in properties:
            if isinstance(key, str) and len(key) == length and key.lower() == lowered:
                return key
    return MISSING
