"""ISO 8601 durations (`PT2M`, `P1DT0.5S`) as the topology file writes them, and the `hh:mm:ss` TimeSpans
that host.json and Functions retry policies use."""

from __future__ import annotations

import datetime as dt
import re

_ISO = re.compile(
    r"^P(?:(?P<days>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<hours>\d+(?:\.\d+)?)H)?(?:(?P<minutes>\d+(?:\.\d+)?)M)?(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$"
)
_TIMESPAN = re.compile(r"^(?:(?P<days>\d+)\.)?(?P<hours>\d+):(?P<minutes>\d+):(?P<seconds>\d+(?:\.\d+)?)$")


def parse_iso_duration(text: str) -> dt.timedelta:
    match = _ISO.match(text.strip()) if isinstance(text, str) else None
    if not match or text.strip() in ("P", "PT") or text.strip().endswith("T"):
        raise ValueError(f"'{text}' is not an ISO 8601 duration (for example PT2M, PT30S, P1D)")
    return _timedelta(match)


def parse_timespan(text: str) -> dt.timedelta:
    """A .NET TimeSpan as host.json writes it: `[d.]hh:mm:ss[.fff]`."""
    match = _TIMESPAN.match(text.strip()) if isinstance(text, str) else None
    if not match:
        raise ValueError(f"'{text}' is not a TimeSpan (for example 00:05:00 or 1.00:00:00)")
    return _timedelta(match)


def _timedelta(match: re.Match[str]) -> dt.timedelta:
    parts = {name: float(value) for name, value in match.groupdict().items() if value}
    return dt.timedelta(**parts)
