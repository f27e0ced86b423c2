"""A Service Bus message <-> its HTTP form: body, `BrokerProperties` JSON header, one header per custom
property, and the JSON of a batch (`application/vnd.microsoft.servicebus.json`).

The mapping is Service Bus's REST one (Microsoft Learn, "Message headers and properties"):
* broker properties travel as one JSON object; times as RFC 1123 text (`Sun, 06 Nov 1994 08:49:37 GMT`),
  TimeToLive as seconds; unknown names are ignored, as Service Bus ignores them;
* every other header (not HTTP's own, not `x-ms-*`) is a custom (application) property: a value in
  double quotes is a string (a date when it reads as RFC 1123), `true`/`false` a boolean, digits a number,
  anything else unquoted a string; going out, strings and dates are quoted, numbers and booleans not;
* the body is the message's payload as bytes: a Data section on AMQP, so the SDKs read it as the bytes
  sent (a message sent over AMQP with an amqp-value body reads as its text or JSON).
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any
from urllib.parse import quote

from local_broker.engine import ArgumentError, Message
from local_broker.engine.message import MessageState
from local_broker.wire.amqp import codec
from local_broker.wire.amqp.values import encode_value

BATCH_CONTENT_TYPE = "application/vnd.microsoft.servicebus.json"
BROKER_PROPERTIES = "BrokerProperties"
MAX_TIME_TO_LIVE = 922337203685.4775  # TimeSpan.MaxValue in seconds: what "no time to live" reads as
# BrokerProperties name -> Message keyword, for the string properties a sender may set.
SENDER_STRINGS = {
    "MessageId": "message_id", "CorrelationId": "correlation_id", "SessionId": "session_id",
    "ReplyToSessionId": "reply_to_session_id", "Label": "subject", "To": "to", "ReplyTo": "reply_to",
    "PartitionKey": "partition_key", "ViaPartitionKey": "via_partition_key",
}
# Request headers of HTTP itself (and of the transport in between), never custom properties.
HTTP_HEADERS = frozenset({
    "accept", "accept-charset", "accept-encoding", "accept-language", "authorization", "brokerproperties",
    "cache-control", "connection", "content-encoding", "content-length", "content-type", "cookie", "date",
    "expect", "forwarded", "host", "keep-alive", "origin", "pragma", "proxy-authorization", "referer", "te",
    "trailer", "transfer-encoding", "upgrade", "user-agent", "via",
})
_INTEGER = re.compile(r"-?\d+")  # a long (AMQP's signed 64 bits); past that, a double
_DECIMAL = re.compile(r"-?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?")  # a double ("nan", "1_0" are text)
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
_STATES = {MessageState.ACTIVE: "Active", MessageState.DEFERRED: "Deferred",
           MessageState.SCHEDULED: "Scheduled"}


def http_date(epoch: float) -> str:
    return format_datetime(datetime.fromtimestamp(epoch, UTC), usegmt=True)


def _read_date(text: str, name: str) -> float:
    try:
        return parsedate_to_datetime(text).timestamp()
    except (TypeError, ValueError):
        raise ArgumentError(f"{name} '{text}' is not a date in RFC 1123 form "
                            "(e.g. 'Sun, 06 Nov 1994 08:49:37 GMT').", name) from None


def data_body(payload: bytes) -> bytes:
    """The engine's body for an HTTP payload: one Data section."""
    return codec.described(codec.DATA, encode_value(payload))


def payload_of(body: bytes) -> bytes:
    """The HTTP payload of a stored body: Data sections' bytes; an amqp-value as text (a string) or JSON."""
    data, values = codec.decode_body(body)
    if data is not None:
        return data
    value = values[0] if len(values) == 1 else values
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value, default=str).encode()


def message_from(payload: bytes, broker_properties: Mapping[str, Any], custom: Mapping[str, Any],
                 content_type: str | None) -> Message:
    """An engine message from what a sender wrote; a wrongly typed broker property is an ArgumentError."""
    fields: dict[str, Any] = {}
    for name, keyword in SENDER_STRINGS.items():
        value = broker_properties.get(name)
        if value is not None:
            if not isinstance(value, str | int) or isinstance(value, bool):
                raise ArgumentError(f"BrokerProperties.{name} must be a string.", name)
            fields[keyword] = str(value)
    ttl = broker_properties.get("TimeToLive")
    if ttl is not None:
        if isinstance(ttl, bool) or not isinstance(ttl, int | float) or ttl <= 0 or not math.isfinite(ttl):
            raise ArgumentError("BrokerProperties.TimeToLive must be a positive number of seconds.",
                                "TimeToLive")
        fields["time_to_live"] = None if ttl >= MAX_TIME_TO_LIVE else float(ttl)
    scheduled = broker_properties.get("ScheduledEnqueueTimeUtc")
    if scheduled is not None:
        fields["scheduled_enqueue_time"] = _read_date(str(scheduled), "ScheduledEnqueueTimeUtc")
    if content_type:
        fields["content_type"] = content_type
    return Message(data_body(payload), dict(custom) or None, **fields)


def broker_properties_of(header: str | None) -> dict[str, Any]:
    if not header:
        return {}
    try:
        value = json.loads(header)
    except ValueError:
        raise ArgumentError(f"The BrokerProperties header is not JSON: {header[:200]}") from None
    if not isinstance(value, dict):
        raise ArgumentError("The BrokerProperties header must be a JSON object.")
    return value


def custom_properties(headers: Mapping[str, str]) -> dict[str, Any]:
    """The custom properties among a request's headers (names as the client spelled them)."""
    return {name: read_custom(value) for name, value in headers.items()
            if name.lower() not in HTTP_HEADERS and not name.lower().startswith(("x-ms-", "x-forwarded-"))}


def read_custom(text: str) -> Any:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        try:
            inner = json.loads(text)
        except ValueError:
            inner = text[1:-1]
        try:
            return parsedate_to_datetime(inner) if inner[-4:] == " GMT" else inner
        except (TypeError, ValueError):
            return inner
    if text in ("true", "false"):
        return text == "true"
    if _INTEGER.fullmatch(text) and _LONG_MIN <= int(text) <= _LONG_MAX:
        return int(text)
    if _DECIMAL.fullmatch(text):
        return float(text)
    return text


def write_custom(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value) if isinstance(value, float) else str(int(value))
    if isinstance(value, datetime):
        return f'"{format_datetime(value.astimezone(UTC), usegmt=True)}"'
    if isinstance(value, bytes):
        value = value.hex()
    return json.dumps(str(value) if isinstance(value, uuid.UUID) or not isinstance(value, str) else value)


def _header_name(name: Any) -> bool:
    """Whether a property name can be an HTTP header name (a token: no spaces, separators or controls)."""
    return isinstance(name, str) and bool(name) and all(
        33 <= ord(c) < 127 and c not in '"(),/:;<=>?@[\\]{}' for c in name)


def response_headers(m: Message, lock_path: str | None) -> dict[str, str]:
    """The headers of a received message: BrokerProperties, the custom properties, Location (peek-lock)."""
    props: dict[str, Any] = {
        "DeliveryCount": m.delivery_count + 1,  # this delivery included, as Service Bus reports it
        "EnqueuedSequenceNumber": m.enqueued_sequence_number,
        "EnqueuedTimeUtc": http_date(m.enqueued_time),
        "SequenceNumber": m.sequence_number,
        "State": _STATES.get(m.state, "Active"),
        "TimeToLive": (m.time_to_live if m.time_to_live is not None
                       else MAX_TIME_TO_LIVE if math.isinf(m.expires_at) else m.expires_at - m.enqueued_time),
    }
    for name, keyword in SENDER_STRINGS.items():
        value = getattr(m, keyword)
        if value is not None:
            props[name] = value
    if m.scheduled_enqueue_time is not None:
        props["ScheduledEnqueueTimeUtc"] = http_date(m.scheduled_enqueue_time)
    if m.dead_letter_source is not None:
        props["DeadLetterSource"] = m.dead_letter_source
    if m.lock_token is not None and lock_path is not None:
        props["LockToken"] = str(m.lock_token)
        props["LockedUntilUtc"] = http_date(m.locked_until or 0)
    headers = {BROKER_PROPERTIES: json.dumps(props)}
    for name, value in (m.application_properties or {}).items():
        if _header_name(name) and name.lower() not in HTTP_HEADERS:
            headers[name] = write_custom(value)
    if m.lock_token is not None and lock_path is not None:
        # one path segment, whatever the MessageId holds ('/' included)
        segment = quote(str(m.message_id or m.sequence_number), safe="")
        headers["Location"] = f"{lock_path}/{segment}/{m.lock_token}"
    return headers


def batch_from(payload: bytes) -> list[Message]:
    """The messages of a Send Message Batch body: a JSON array of {Body, BrokerProperties, UserProperties}."""
    try:
        items = json.loads(payload)
    except ValueError:
        raise ArgumentError("The batch body is not JSON.") from None
    if not isinstance(items, list) or not items:
        raise ArgumentError("The batch body must be a non-empty JSON array of messages.")
    out = []
    for position, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("Body", ""), str):
            raise ArgumentError(f"Batch message {position} must be an object whose Body is a string.")
        broker = {} if item.get("BrokerProperties") is None else item["BrokerProperties"]
        user = {} if item.get("UserProperties") is None else item["UserProperties"]
        if not isinstance(broker, dict) or not isinstance(user, dict):
            raise ArgumentError(f"Batch message {position}: BrokerProperties and UserProperties must be "
                                "objects.")
        if any(isinstance(v, dict | list) or (isinstance(v, int) and not _LONG_MIN <= v <= _LONG_MAX)
               for v in user.values()):
            raise ArgumentError(f"Batch message {position}: a UserProperties value must be a string, number "
                                "(a whole one within 64 bits), boolean or null.")
        out.append(message_from(item.get("Body", "").encode(), broker, user, None))
    return out
