"""The service-assigned metadata a replica carries: where and when its source saw it, hop by hop.

Names follow the official replication sample (`repl-enqueued-time`, `repl-sequence`); Microsoft's
federation docs spell the first `repl-enqueue-time`, so both spellings are read and the sample's is
written. Each hop appends its value with `;`, so the first entry is always the origin.
`repl-source` is sbfed's addition: `<namespace>/<entity>` of each hop, so audit records can tell where a
replica came from (`namespace` is the logical name from the topology's `connections`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

REPL_ENQUEUED_TIME = "repl-enqueued-time"
REPL_ENQUEUE_TIME_DOCS = "repl-enqueue-time"
REPL_SEQUENCE = "repl-sequence"
REPL_SOURCE = "repl-source"
HOP_SEPARATOR = ";"


def iso_utc(moment: dt.datetime) -> str:
    """ISO 8601 in UTC with millisecond precision and a `Z` suffix (`2026-11-22T12:00:00.123Z`)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    elif moment.utcoffset():
        moment = moment.astimezone(dt.UTC)
    return moment.isoformat(timespec="milliseconds")[:-6] + "Z"


def read_stamp(properties: Mapping[str, Any], name: str) -> str | None:
    """A stamp as carried; `repl-enqueued-time` falls back to the docs' `repl-enqueue-time`."""
    value = properties.get(name)
    if value is None and name == REPL_ENQUEUED_TIME:
        value = properties.get(REPL_ENQUEUE_TIME_DOCS)
    return None if value is None else str(value)


def append_hop(previous: str | None, value: str) -> str:
    return value if not previous else f"{previous}{HOP_SEPARATOR}{value}"


def stamped(
    properties: Mapping[str, Any],
    *,
    enqueued_time_utc: dt.datetime,
    sequence_number: int,
    namespace: str,
    entity: str,
) -> dict[str, Any]:
    """The properties with this hop appended to each stamp (the docs' spelling is folded into ours)."""
    result = {k: v for k, v in properties.items() if k != REPL_ENQUEUE_TIME_DOCS}
    for name, value in (
        (REPL_ENQUEUED_TIME, iso_utc(enqueued_time_utc)),
        (REPL_SEQUENCE, str(sequence_number)),
        (REPL_SOURCE, f"{namespace}/{entity}"),
    ):
        result[name] = append_hop(read_stamp(properties, name), value)
    return result


def origin_enqueued_time(properties: Mapping[str, Any]) -> dt.datetime | None:
    """When the first namespace on the path enqueued the message (for end-to-end lag)."""
    carried = read_stamp(properties, REPL_ENQUEUED_TIME)
    if not carried:
        return None
    first = carried.split(HOP_SEPARATOR, 1)[0].replace("Z", "+00:00")
    return dt.datetime.fromisoformat(first)
