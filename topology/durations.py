"""Durations: ISO 8601 as topology files and the management API write them (`PT2M`, `P14D`, `PT0.5S`), and
the .NET TimeSpan text (`00:02:00`, `1.02:00:00.5`) that host.json and SQL rule actions use.

The only duration parser in sbfed. Years and months have XmlConvert's fixed lengths (365 and 30 days);
`TimeSpan.MaxValue` ("never") is the largest duration, and anything within a second of it reads as it,
because clients round-trip it through floats.
"""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal, InvalidOperation

TIMESPAN_MAX = timedelta(days=10675199, hours=2, minutes=48, seconds=5, microseconds=477581)
_MAX_TOLERANCE = timedelta(seconds=1)

_ISO = re.compile(
    r"(?P<sign>-)?P(?:(?P<years>\d+)Y)?(?:(?P<months>\d+)M)?(?:(?P<weeks>\d+)W)?(?:(?P<days>\d+)D)?"
    r"(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?"
)
_DAYS_PER = {"years": 365, "months": 30, "weeks": 7, "days": 1}
_SECONDS_PER = {"hours": 3600, "minutes": 60}
_TIMESPAN = re.compile(r"(?:(?P<days>\d+)\.)?(?P<hours>\d+):(?P<minutes>\d+):(?P<seconds>\d+(?:\.\d+)?)")


def parse_duration(value: str | timedelta) -> timedelta:
    """An ISO 8601 duration as a timedelta (a timedelta passes through); ValueError names the text."""
    if isinstance(value, timedelta):
        return value
    text = value.strip() if isinstance(value, str) else ""
    match = _ISO.fullmatch(text)
    parts = match and [name for name, part in match.groupdict().items() if part and name != "sign"]
    if not parts or ("T" in text and not {"hours", "minutes", "seconds"} & set(parts)):
        raise ValueError(f"'{value}' is not an ISO 8601 duration (for example PT30S, PT5M, P14D)")
    try:
        days = sum(int(match.group(unit) or 0) * per for unit, per in _DAYS_PER.items())
        seconds = sum(int(match.group(unit) or 0) * per for unit, per in _SECONDS_PER.items())
        micros = int((Decimal(match.group("seconds") or 0) * 1_000_000).to_integral_value())
        result = timedelta(days=days, seconds=seconds, microseconds=micros)
    except (OverflowError, InvalidOperation) as exc:
        raise ValueError(f"'{value}' is longer than the longest duration, {format_duration(TIMESPAN_MAX)}") \
            from exc
    if match.group("sign"):
        result = -result
    if abs(result - TIMESPAN_MAX) <= _MAX_TOLERANCE:
        return TIMESPAN_MAX
    if result > TIMESPAN_MAX:
        raise ValueError(f"'{value}' is longer than the longest duration, {format_duration(TIMESPAN_MAX)}")
    return result


def format_duration(value: timedelta) -> str:
    """The shortest ISO 8601 text of a duration: days, hours, minutes, fractional seconds (`P1DT2M0.5S`)."""
    sign = "-" if value < timedelta(0) else ""
    value = abs(value)
    hours, rest = divmod(value.seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    clock = f"{hours}H" if hours else ""
    clock += f"{minutes}M" if minutes else ""
    if seconds or value.microseconds:
        fraction = f".{value.microseconds:06d}".rstrip("0") if value.microseconds else ""
        clock += f"{seconds}{fraction}S"
    date = f"{value.days}D" if value.days else ""
    if not clock:
        return f"{sign}P{date}" if date else "PT0S"
    return f"{sign}P{date}T{clock}"


def parse_timespan(text: str) -> timedelta:
    """A .NET TimeSpan as host.json writes it: `[d.]hh:mm:ss[.fffffff]`."""
    match = _TIMESPAN.fullmatch(text.strip()) if isinstance(text, str) else None
    if not match:
        raise ValueError(f"'{text}' is not a TimeSpan (for example 00:05:00 or 1.00:00:00)")
    parts = {name: float(part) for name, part in match.groupdict().items() if part}
    return timedelta(**parts)


def format_timespan(span: timedelta) -> str:
    """A non-negative duration as .NET TimeSpan text, as SQL rule actions assign it (`'00:02:00'`)."""
    hours, rest = divmod(span.seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    text = f"{hours:02d}:{minutes:02d}:{seconds:02d}"
    if span.microseconds:
        text += f".{span.microseconds * 10:07d}"
    return f"{span.days}.{text}" if span.days else text
