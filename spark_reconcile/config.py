"""The job's settings: what one reconciliation run compares, and how strict it is. `cli` builds them from
the command line; a continuous run records them in its follow.json (`as_record`), from which `tables`
rebuilds its report (`from_record`) without a command line."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

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


def as_record(settings: Settings, follow: FollowSettings) -> dict[str, Any]:
    """A continuous run's settings as plain JSON values (durations in seconds, times ISO 8601 UTC)."""
    return {
        "logs": [{"tag": log.tag, "path": log.path, "format": log.format} for log in settings.logs],
        "mode": settings.mode, "out": settings.out, "source": settings.source,
        "expected_event": settings.expected_event,
        "window": [_iso(settings.window.start), _iso(settings.window.end)],
        "grace_s": settings.grace.total_seconds(), "skew_s": settings.skew.total_seconds(),
        "lookahead_s": settings.lookahead.total_seconds(),
        "replica_ttl_s": {tag: ttl.total_seconds() for tag, ttl in settings.replica_ttl.items()},
        "use_partition_key": settings.use_partition_key,
        "max_missing": {"count": settings.max_missing.count, "percent": settings.max_missing.percent},
        "now": _iso(settings.now), "list_limit": settings.list_limit,
        "follow": {"checkpoint": follow.checkpoint, "trigger_s": follow.trigger.total_seconds(),
                   "available_now": follow.available_now, "alert_missing": follow.alert_missing,
                   "status_window_s": follow.status_window.total_seconds(),
                   "max_files_per_trigger": follow.max_files_per_trigger},
    }


def from_record(record: dict[str, Any]) -> tuple[Settings, FollowSettings]:
    """The settings `as_record` wrote."""
    f = record["follow"]
    settings = Settings(
        logs=tuple(LogInput(**log) for log in record["logs"]), mode=record["mode"], out=record["out"],
        source=record["source"], expected_event=record["expected_event"],
        window=Window(*(None if t is None else parse_utc(t) for t in record["window"])),
        grace=timedelta(seconds=record["grace_s"]), skew=timedelta(seconds=record["skew_s"]),
        lookahead=timedelta(seconds=record["lookahead_s"]),
        replica_ttl={tag: timedelta(seconds=s) for tag, s in record["replica_ttl_s"].items()},
        use_partition_key=record["use_partition_key"], max_missing=MissingThreshold(**record["max_missing"]),
        now=None if record["now"] is None else parse_utc(record["now"]), list_limit=record["list_limit"],
        follow=True)
    following = FollowSettings(checkpoint=f["checkpoint"], trigger=timedelta(seconds=f["trigger_s"]),
                               available_now=f["available_now"], alert_missing=f["alert_missing"],
                               status_window=timedelta(seconds=f["status_window_s"]),
                               max_files_per_trigger=f["max_files_per_trigger"])
    return settings, following


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


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
