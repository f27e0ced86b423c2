"""Throughput and lag figures of a trigger, on a fake clock."""

from __future__ import annotations

import datetime as dt

from replicators.host.stats import TriggerStats, percentile

T0 = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.UTC)


class FakeClock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> dt.datetime:
        return self.now


def test_rate_and_lag_per_window_counters_since_start():
    clock = FakeClock()
    stats = TriggerStats("f", clock=clock)
    stats.settled([T0 - dt.timedelta(seconds=1)] * 70, outcome="completed")
    clock.now = T0 + dt.timedelta(seconds=2)
    stats.settled([clock.now - dt.timedelta(seconds=3)] * 30, outcome="completed")
    stats.settled([T0], outcome="abandoned")
    stats.invocation_failed()
    first = stats.snapshot()
    assert first.rate == 50.0 and first.completed == 100
    assert (first.lag_p50, first.lag_p99) == (1.0, 3.0)
    assert (first.abandoned, first.dead_lettered, first.failed_invocations) == (1, 0, 1)
    clock.now += dt.timedelta(seconds=5)
    second = stats.snapshot()
    assert second.rate == 0.0 and second.completed == 100 and second.lag_p99 == 0.0
    assert "completed 100" in second.line()


def test_percentile():
    assert percentile([], 0.5) == 0.0
    assert percentile([3, 1, 2], 0.5) == 2
    assert percentile(list(range(101)), 0.99) == 99
