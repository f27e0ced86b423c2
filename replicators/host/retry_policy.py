"""A function's retry policy (`@app.retry`), as the Functions host applies it: re-run a failed invocation
after a fixed or exponentially growing delay while the messages stay locked; after the last retry the
host abandons them (the broker's MaxDeliveryCount then decides about the dead-letter queue)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from topology.durations import parse_timespan

STRATEGIES = ("fixed_delay", "exponential_backoff")


@dataclass(frozen=True)
class FunctionRetryPolicy:
    strategy: str
    max_retry_count: int  # -1: unlimited
    delay_interval: dt.timedelta = dt.timedelta(0)
    minimum_interval: dt.timedelta = dt.timedelta(0)
    maximum_interval: dt.timedelta = dt.timedelta(0)

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any] | None) -> FunctionRetryPolicy | None:
        """From `Function.get_settings_dict("retry_policy")`; its values are strings."""
        if not settings:
            return None
        strategy = str(settings.get("strategy", "")).lower().replace("fixeddelay", "fixed_delay")
        strategy = strategy.replace("exponentialbackoff", "exponential_backoff")
        if strategy not in STRATEGIES:
            raise ValueError(
                f"retry strategy must be one of {', '.join(STRATEGIES)}, not '{settings.get('strategy')}'"
            )

        def span(key: str) -> dt.timedelta:
            value = settings.get(key)
            return parse_timespan(value) if value else dt.timedelta(0)

        return cls(
            strategy=strategy,
            max_retry_count=int(settings.get("max_retry_count", 0)),
            delay_interval=span("delay_interval"),
            minimum_interval=span("minimum_interval"),
            maximum_interval=span("maximum_interval"),
        )

    def allows(self, retry_number: int) -> bool:
        """Whether retry number `retry_number` (1-based) may run."""
        return self.max_retry_count < 0 or retry_number <= self.max_retry_count

    def delay(self, retry_number: int) -> dt.timedelta:
        if self.strategy == "fixed_delay":
            return self.delay_interval
        grown = self.minimum_interval * (2 ** (retry_number - 1))
        return min(grown, self.maximum_interval) if self.maximum_interval else grown
