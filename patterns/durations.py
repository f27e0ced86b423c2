"""Durations as the topology file writes them (ISO 8601, `PT2M`) and as a SQL rule action assigns them
(.NET TimeSpan, `'00:02:00'`). The admin client hands back `timedelta`s, so the diff compares in that form."""

from __future__ import annotations

import datetime as dt

from replicators.durations import parse_iso_duration


def parse_duration(value: str | dt.timedelta) -> dt.timedelta:
    """An ISO 8601 duration (`PT2M`, `P1DT12H`, `PT0.5S`) as a timedelta; a timedelta passes through."""
    return value if isinstance(value, dt.timedelta) else parse_iso_duration(value)


def iso_duration(span: dt.timedelta) -> str:
    """A timedelta as the shortest ISO 8601 duration with whole units (`PT2M30S`, `P1D`)."""
    if span < dt.timedelta(0):
        raise ValueError(f"a duration must not be negative, got {span}")
    days, rest = span.days, span - dt.timedelta(days=span.days)
    hours, rest_s = divmod(rest.total_seconds(), 3600)
    minutes, seconds = divmod(rest_s, 60)
    date = f"{days}D" if days else ""
    units = ((hours, "H"), (minutes, "M"), (round(seconds, 6), "S"))
    clock = "".join(f"{amount:g}{unit}" for amount, unit in units if amount)
    if not date and not clock:
        return "PT0S"
    return f"P{date}" + (f"T{clock}" if clock else "")


def timespan_literal(span: dt.timedelta) -> str:
    """A .NET TimeSpan string for a SQL rule action, e.g. `SET sys.TimeToLive = '00:02:00'`."""
    if span <= dt.timedelta(0):
        raise ValueError(f"a TimeToLive must be positive, got {span}")
    hours, rest = divmod(span.seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    text = f"{hours:02d}:{minutes:02d}:{seconds:02d}"
    if span.microseconds:
        text += f".{span.microseconds * 10:07d}"
    return f"{span.days}.{text}" if span.days else text
