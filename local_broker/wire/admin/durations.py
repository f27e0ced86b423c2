"""ISO 8601 durations and timestamps as the Service Bus management API writes them.

Service Bus serialises .NET `TimeSpan`s with `XmlConvert` (`PT1M`, `P14D`, `PT0.5S`) and uses
`TimeSpan.MaxValue` (`P10675199DT2H48M5.4775807S`) for "never". Clients round-trip that value through
floats (the Python SDK re-sends it as `P10675199DT2H48M5.477539S`), so anything within a second of it
reads back as the same `TIMESPAN_MAX`.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation

from local_broker.engine.properties import TIMESPAN_MAX

TIMESPAN_MAX_TEXT = "P10675199DT2H48M5.4775807S"
_MAX_TOLERANCE = timedelta(seconds=1)

_DURATION = re.compile(
    r"(?P<sign>-)?P(?:(?P<years>\d+)Y)?(?:(?P<months>\d+)M)?(?:(?P<weeks>\d+)W)?(?:(?P<days>\d+)D)?"
    r"(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?"
)
_DAYS_PER = {"years": 365, "months": 30, "weeks": 7, "days": 1}  # XmlConvert's fixed-length years and months
_SECONDS_PER = {"hours": 3600, "minutes": 60}

EPOCH_ZERO = datetime(1, 1, 1, tzinfo=UTC)  # DateTime.MinValue: "never accessed"


def parse_duration(text: str) -> timedelta:
    """Read an ISO 8601 duration; raise ValueError with the offending text when it is not one."""
    value = text.strip()
    match = _DURATION.fullmatch(value)
    parts = match and [name for name, part in match.groupdict().items() if part and name != "sign"]
    clock_parts = parts and {"hours", "minutes", "seconds"} & set(parts)
    if not parts or ("T" in value and not clock_parts):
        raise ValueError(f"'{text}' is not an ISO 8601 duration such as PT1M or P14D.")
    try:
        days = sum(int(match.group(unit) or 0) * per for unit, per in _DAYS_PER.items())
        seconds = sum(int(match.group(unit) or 0) * per for unit, per in _SECONDS_PER.items())
        fraction = Decimal(match.group("seconds") or 0)
        micros = int((fraction * 1_000_000).to_integral_value())
        result = timedelta(days=days, seconds=seconds, microseconds=micros)
    except (OverflowError, InvalidOperation) as exc:
        raise ValueError(f"The duration '{text}' is larger than TimeSpan.MaxValue.") from exc
    if match.group("sign"):
        result = -result
    if abs(result - TIMESPAN_MAX) <= _MAX_TOLERANCE:
        return TIMESPAN_MAX
    if result > TIMESPAN_MAX:
        raise ValueError(f"The duration '{text}' is larger than TimeSpan.MaxValue.")
    return result


def format_duration(value: timedelta) -> str:
    """Write a duration the way Service Bus does (days, hours, minutes, fractional seconds)."""
    if value >= TIMESPAN_MAX:
        return TIMESPAN_MAX_TEXT
    sign = "-" if value < timedelta(0) else ""
    value = abs(value)
    hours, rest = divmod(value.seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    text = f"{sign}P{value.days}D" if value.days else f"{sign}P"
    clock = ""
    if hours:
        clock += f"{hours}H"
    if minutes:
        clock += f"{minutes}M"
    if seconds or value.microseconds:
        fraction = f".{value.microseconds:06d}".rstrip("0") if value.microseconds else ""
        clock += f"{seconds}{fraction}S"
    if clock:
        text += "T" + clock
    elif not value.days:
        text += "T0S"
    return text


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
