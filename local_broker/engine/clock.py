"""Injectable time: the engine reads `clock.now()` (UTC epoch seconds) and never sleeps."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the Unix epoch, UTC."""
        ...


class SystemClock:
    """Wall-clock time for a running broker."""

    __slots__ = ()

    # time.time itself: a builtin binds no self, so `clock.now()` is one C call, not a Python frame around
    # one (the broker reads it on every send, receive and settlement)
    now = time.time


class FakeClock:
    """Time that moves only when a test says so."""

    __slots__ = ("_now",)

    def __init__(self, start: float | datetime = 1_700_000_000.0) -> None:
        self._now = start.timestamp() if isinstance(start, datetime) else float(start)

    def now(self) -> float:
        return self._now

    def advance(self, delta: float | timedelta) -> float:
        """Move forward by `delta` (seconds or timedelta); returns the new time."""
        self._now += delta.total_seconds() if isinstance(delta, timedelta) else float(delta)
        return self._now

    def set(self, when: float | datetime) -> None:
        self._now = when.timestamp() if isinstance(when, datetime) else float(when)


def to_datetime(epoch_seconds: float) -> datetime:
    """Aware UTC datetime of an epoch-seconds value."""
    return datetime.fromtimestamp(epoch_seconds, UTC)


def to_epoch(value: datetime) -> float:
    """Epoch seconds of a datetime; naive datetimes are taken as UTC."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


class _Seconds(dict[timedelta, float]):
    """Spans' `total_seconds()`, remembered: an entity's default time to live (TimeSpan.MaxValue unless set)
    is read once per message sent, and its big-integer arithmetic costs ~2,000 instructions. A dict's own
    lookup (`seconds = _Seconds().__getitem__`, a C call) costs a quarter of lru_cache's, which builds a key
    tuple per call. Spans are entity properties: few; the dict starts over past 1,024 of them."""

    __slots__ = ()

    def __missing__(self, span: timedelta) -> float:
        if len(self) >= 1024:
            self.clear()
        value = self[span] = span.total_seconds()
        return value


seconds = _Seconds().__getitem__
