"""Durations and timestamps as the Service Bus management API writes them.

Service Bus serialises .NET `TimeSpan`s with `XmlConvert` (`PT1M`, `P14D`, `PT0.5S`) and uses
`TimeSpan.MaxValue` (`P10675199DT2H48M5.4775807S`) for "never". Parsing is the topology package's (the one
duration parser, which reads anything within a second of MaxValue as it); writing MaxValue in its exact
.NET text is the wire's.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from local_broker.engine.properties import TIMESPAN_MAX
from topology import durations
from topology.durations import parse_duration

TIMESPAN_MAX_TEXT = "P10675199DT2H48M5.4775807S"
EPOCH_ZERO = datetime(1, 1, 1, tzinfo=UTC)  # DateTime.MinValue: "never accessed"

__all__ = ["TIMESPAN_MAX_TEXT", "format_duration", "format_timestamp", "parse_duration", "parse_timestamp"]


def format_duration(value: timedelta) -> str:
    """Write a duration the way Service Bus does (days, hours, minutes, fractional seconds)."""
    return TIMESPAN_MAX_TEXT if value >= TIMESPAN_MAX else durations.format_duration(value)


def format_timestamp(value: datetime | None) -> str:
    """UTC timestamp in the wire's `2024-01-01T00:00:00Z` form; None is DateTime.MinValue."""
    moment = EPOCH_ZERO if value is None else value
    if moment.tzinfo:
        moment = moment.astimezone(UTC)
    return moment.replace(tzinfo=None).isoformat() + "Z"


def parse_timestamp(text: str) -> datetime:
    """Read an ISO 8601 timestamp (`Z` or an offset); naive values are UTC."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise ValueError(f"'{text}' is not an ISO 8601 date and time.") from exc
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
