"""What one reconciliation run compares, and how strict it is (parsed from the command line by `cli`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

MODES = ("replica", "mirror", "exactly-once")
FORMATS = ("auto", "json", "parquet")

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


@dataclass(frozen=True)
class LogInput:
    """One audit log: a tag (role or region name, e.g. `primary`) and the path Spark reads it from."""

    tag: str
    path: str
    format: str = "auto"


@dataclass(frozen=True)
class Window:
    """Messages are judged by their origin EnqueuedTimeUtc in [start, end); either bound may be open."""

    start: datetime | None = None
    end: datetime | None = None

    def read_range(self, lookahead: timedelta) -> tuple[datetime | None, datetime | None]:
        """Records to read: the window widened by the lookahead on both sides (late copies, boundary)."""
        return (None if self.start is None else self.start - lookahead,
                None if self.end is None else self.end + lookahead)


@dataclass(frozen=True)
class MissingThreshold:
    """How many missing messages a run tolerates before it fails: a count, or a percentage of expected."""

    count: int | None = 0
    percent: float | None = None

    def exceeded(self, missing: int, expected: int) -> bool:
        if self.percent is not None:
            return expected > 0 and 100.0 * missing / expected > self.percent
        return missing > (self.count or 0)

    def describe(self) -> str:
        return f"{self.percent}%" if self.percent is not None else str(self.count)


@dataclass(frozen=True)
class Settings:
    logs: tuple[LogInput, ...]
    mode: str
    out: str
    source: str | None = None
    expected_event: str = "enqueued"
    window: Window = field(default_factory=Window)
    grace: timedelta = timedelta(minutes=5)
    skew: timedelta = timedelta(seconds=5)
    lookahead: timedelta = timedelta(minutes=30)
    replica_ttl: dict[str, timedelta] = field(default_factory=dict)
    use_partition_key: bool = True
    max_missing: MissingThreshold = field(default_factory=MissingThreshold)
    now: datetime | None = None
    list_limit: int = 100
    follow: bool = False  # a continuous run (follow.py): the grouping also keeps each log's latest record

    def tags(self) -> list[str]:
        return [log.tag for log in self.logs]


@dataclass(frozen=True)
class FollowSettings:
    """A continuous run (`--follow`): where its state lives, how often it looks for files, when it alerts."""

    checkpoint: str
    trigger: timedelta = timedelta(minutes=1)
    available_now: bool = False
    alert_missing: int | None = None
    status_window: timedelta = timedelta(hours=1)
    max_files_per_trigger: int | None = None


def parse_duration(text: str) -> timedelta:
    """`300`, `300s`, `5m`, `1.5h`, `250ms`, `1d` (plain numbers are seconds)."""
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"invalid duration {text!r}: use a number with an optional unit ms, s, m, h or d")
    return timedelta(seconds=float(match.group(1)) * _UNIT_SECONDS[match.group(2) or "s"])


def parse_utc(text: str) -> datetime:
    """ISO 8601 time; an offset-less time is UTC (never the machine's zone). Returned tz-aware in UTC."""
    try:
        value = datetime.fromisoformat(text.strip().replace("z", "Z"))
    except ValueError:
        raise ValueError(f"invalid time {text!r}: use ISO 8601, e.g. 2026-11-22T12:00:00Z") from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def parse_threshold(text: str) -> MissingThreshold:
    """`0`, `25` (messages) or `0.1%` (of the expected messages)."""
    raw = text.strip()
    try:
        if raw.endswith("%"):
            return MissingThreshold(count=None, percent=float(raw[:-1]))
        count = int(raw)
    except ValueError:
        raise ValueError(f"invalid threshold {text!r}: use a count (5) or a percentage (0.1%)") from None
    if count < 0:
        raise ValueError(f"invalid threshold {text!r}: must not be negative")
    return MissingThreshold(count=count)


def parse_tagged(text: str, what: str) -> tuple[str, str]:
    """`tag=value` as used by --log and --replica-ttl."""
    tag, sep, value = text.partition("=")
    if not sep or not tag.strip() or not value.strip():
        raise ValueError(f"invalid {what} {text!r}: use TAG=VALUE, e.g. primary=/data/audit/primary")
    return tag.strip(), value.strip()


def to_micros(value: datetime) -> int:
    """Exact epoch microseconds of a tz-aware time (no float rounding)."""
    return (value - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


def iso_micros(micros: int | None) -> str | None:
    """Epoch microseconds as ISO 8601 UTC with a Z (how every time leaves the job)."""
    if micros is None:
        return None
    value = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=int(micros))
    return value.isoformat(timespec="microseconds").replace("+00:00", "Z")
