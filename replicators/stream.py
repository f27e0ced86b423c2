"""A Kafka record as the source message of a stream-to-queue copy, so the copy itself (stamps, transform,
sending, audit) is the same as for a Service Bus source.

- MessageId: `<topic>/<partition>/<offset>`, the record's place in the log, so a record read twice (a replay
  after a host died before committing its offsets) is the same message twice, and the target's duplicate
  detection keeps one. A topic name too long for the 128 characters of a MessageId is replaced by a hash.
- The record key becomes the SessionId (ordered per key through sessions) or the PartitionKey, as the task
  says (`key_as`; by default SessionId on a session-enabled target, else PartitionKey); a key longer than
  the 128 characters Service Bus allows is replaced by its hash, so equal keys still land together.
- Headers become application properties: text when the value is UTF-8, else its base64 text as the trigger
  carries it (the Python SDK sends a bytes property as UTF-8 text and refuses any other bytes); a header
  without a value is null, a repeated header keeps its last value.
- The value becomes the body; the record's timestamp is its enqueued time, its offset its sequence number,
  so `repl-enqueued-time`, `repl-sequence` and `repl-source` (`<cluster>/<topic>`) are stamped as for any
  copy.

The records come as `func.KafkaEvent`, as the Functions Kafka trigger hands them over (headers a list of
`{"Key": name, "Value": base64}`); the local host builds the same objects from its consumer.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import re
from collections.abc import Iterable, Mapping

import azure.functions as func

from replicators.message import AmqpBody, SourceMessage

MAX_ID_LENGTH = 128  # MessageId, SessionId and PartitionKey alike
_FRACTION = re.compile(r"(\.\d{6})\d+")


def record_message_id(topic: str, partition: int, offset: int) -> str:
    readable = f"{topic}/{partition}/{offset}"
    if len(readable) <= MAX_ID_LENGTH:
        return readable
    return f"{_digest(topic)[:32]}/{partition}/{offset}"


def key_property(key: str | None) -> str | None:
    """The record key as a SessionId or PartitionKey (its hash when it is too long for one)."""
    if key is None or len(key) <= MAX_ID_LENGTH:
        return key
    return _digest(key)


def header_properties(headers: Iterable[Mapping[str, str | None]] | None) -> dict[str, str | None]:
    properties: dict[str, str | None] = {}
    for header in headers or ():
        raw = header.get("Value")
        value = raw
        if raw is not None:
            try:
                value = base64.b64decode(raw).decode("utf-8")
            except UnicodeDecodeError:
                pass
        properties[str(header.get("Key"))] = value
    return properties


def record_time(timestamp: str | None) -> dt.datetime:
    """The record's timestamp (ISO 8601, as the trigger gives it; more than microseconds are cut)."""
    if not timestamp:
        raise ValueError("the Kafka record has no timestamp")
    moment = dt.datetime.fromisoformat(_FRACTION.sub(r"\1", timestamp.replace("Z", "+00:00")))
    return moment.replace(tzinfo=dt.UTC) if moment.tzinfo is None else moment.astimezone(dt.UTC)


def source_message(event: func.KafkaEvent, *, cluster: str, key_as: str) -> SourceMessage:
    """The record as a source message of `cluster`, its key placed as `key_as` says."""
    topic, partition, offset = event.topic or "", event.partition or 0, event.offset or 0
    key = key_property(event.key)
    return SourceMessage(
        body=AmqpBody.data(event.get_body() or b""),
        message_id=record_message_id(topic, partition, offset),
        session_id=key if key_as == "session_id" else None,
        partition_key=key if key_as == "partition_key" else None,
        application_properties=header_properties(event.headers),
        namespace=cluster,
        entity=topic,
        enqueued_time_utc=record_time(event.timestamp),
        sequence_number=offset,
    )


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
