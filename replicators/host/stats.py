"""Throughput and lag of each trigger while the host runs. Lag is the age of a message when its batch
was settled (now - EnqueuedTimeUtc at the source), the figure that says whether a replica keeps up."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from replicators.telemetry import replication_metrics


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


@dataclass
class Snapshot:
    function: str
    completed: int
    abandoned: int
    dead_lettered: int
    failed_invocations: int
    settle_failures: int
    rate: float
    lag_p50: float
    lag_p99: float

    def line(self) -> str:
        return (
            f"{self.function}: {self.rate:8.1f} msg/s  completed {self.completed}  "
            f"lag p50 {self.lag_p50:.3f}s p99 {self.lag_p99:.3f}s  "
            f"abandoned {self.abandoned}  dead-lettered {self.dead_lettered}  "
            f"failed invocations {self.failed_invocations}  settle failures {self.settle_failures}"
        )


@dataclass
class TriggerStats:
    function: str
    clock: Callable[[], dt.datetime] = field(default=lambda: dt.datetime.now(dt.UTC))
    completed: int = 0
    abandoned: int = 0
    dead_lettered: int = 0
    failed_invocations: int = 0
    settle_failures: int = 0
    _window_count: int = 0
    _window_lags: list[float] = field(default_factory=list)
    _window_start: dt.datetime | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def settled(self, enqueued_times: Iterable[dt.datetime], *, outcome: str) -> None:
        now = self.clock()
        lags = [(now - enqueued).total_seconds() for enqueued in enqueued_times]
        with self._lock:
            if self._window_start is None:
                self._window_start = now
            if outcome == "completed":
                self.completed += len(lags)
                self._window_count += len(lags)
                self._window_lags.extend(lags)
            elif outcome == "abandoned":
                self.abandoned += len(lags)
            else:
                self.dead_lettered += len(lags)

    def invocation_failed(self) -> None:
        with self._lock:
            self.failed_invocations += 1

    def settle_failed(self) -> None:
        """A settlement the broker refused (lock lost): the message comes back and is processed again."""
        with self._lock:
            self.settle_failures += 1
        replication_metrics().settle_failures.add(1, {"task": self.function})

    def snapshot(self) -> Snapshot:
        """Figures since the previous snapshot (rate, lag) and since start (counters)."""
        now = self.clock()
        with self._lock:
            elapsed = (now - self._window_start).total_seconds() if self._window_start else 0.0
            rate = self._window_count / elapsed if elapsed > 0 else 0.0
            lags, self._window_lags = self._window_lags, []
            self._window_count = 0
            self._window_start = now if self._window_start else None
            return Snapshot(
                self.function,
                self.completed,
                self.abandoned,
                self.dead_lettered,
                self.failed_invocations,
                self.settle_failures,
                rate,
                percentile(lags, 0.5),
                percentile(lags, 0.99),
            )
