"""The copy of one message: what is kept, what is dropped, what is stamped. A pure function.

Kept: the body (any AMQP section type), MessageId, SessionId, PartitionKey, CorrelationId, Subject, To,
ReplyTo, ReplyToSessionId, ContentType, TimeToLive and the application properties.
Dropped: everything the source broker owns (sequence number, enqueued time, locks, delivery count, state,
dead-letter source) and the dead-letter and tracing application properties: the replica's trace properties
are its copy span's (`telemetry.copy_span`, a child of the source's trace). Stamped: the `repl-*` hop list
(see `stamps`), the task's marker, its TTL.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from replicators.message import DEAD_LETTER_PROPERTIES, Replica, SourceMessage
from replicators.stamps import stamped

TRACING_PROPERTIES = frozenset({"Diagnostic-Id", "traceparent"})
MARKER_VALUE = 1  # the value the all-active rule action `SET replication = 1` gives


@dataclass(frozen=True)
class CopyOptions:
    """Per-task stamping: `ttl` caps the replica's TimeToLive (active-passive keeps a short window on the
    passive side); `marker` names an application property set on every replica (loop prevention)."""

    ttl: dt.timedelta | None = None
    marker: str | None = None


def copy_message(
    source: SourceMessage, *, target_entity: str, options: CopyOptions = CopyOptions()
) -> Replica:
    properties = {
        name: value
        for name, value in source.application_properties.items()
        if name not in DEAD_LETTER_PROPERTIES and name not in TRACING_PROPERTIES
    }
    properties = stamped(
        properties,
        enqueued_time_utc=source.enqueued_time_utc,
        sequence_number=source.sequence_number,
        namespace=source.namespace,
        entity=source.entity,
    )
    if options.marker:
        properties[options.marker] = MARKER_VALUE
    content = source.content() | {"application_properties": properties}
    if options.ttl is not None:
        content["time_to_live"] = min(options.ttl, source.time_to_live or options.ttl)
    return Replica(entity=target_entity, **content)
