"""What the REST messaging door counts for the broker's /metrics, in the AMQP endpoint's families
(wire/amqp/tally.py) told apart by `protocol="rest"`: requests per operation, their failures per Azure
Monitor class and HTTP status, and how long the broker took to answer a send and a settlement.

REST requests are answered on HTTP handler threads and, for a long poll, on the reactor; one lock keeps
their counts whole (an add and a bisect under it: nothing next to the request's engine call).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from local_broker.engine import BrokerError
from local_broker.wire.amqp.tally import Histogram, failure_class

OPERATIONS = ("send", "peek_lock", "receive_and_delete", "unlock", "complete", "renew")
# The latency family each timed operation falls in; a head request's time is mostly its long poll's wait
# (the client's timeout), not the broker's, and is not timed.
LATENCY_FAMILY = {"send": "send", "unlock": "settle", "complete": "settle", "renew": "settle"}


@dataclass
class RestCounts:
    """A consistent copy, for one scrape."""

    incoming: Counter[str] = field(default_factory=Counter)  # operation -> requests
    errors: Counter[tuple[str, str, int]] = field(default_factory=Counter)  # (operation, class, status)
    latency: dict[str, Histogram] = field(default_factory=dict)  # timed operation -> its histogram

    def successful(self, operation: str) -> int:
        return self.incoming[operation] - sum(n for (op, _, _), n in self.errors.items() if op == operation)


class RestRequests:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = RestCounts(latency={operation: Histogram() for operation in LATENCY_FAMILY})

    def answered(self, operation: str, status: int, failure: BrokerError | None, started: float) -> None:
        """A request answered with `status` (`failure`: the error it carries), `started` at that
        `time.perf_counter()`."""
        seconds = time.perf_counter() - started
        kind = failure_class(failure) if failure is not None else None
        with self._lock:
            self._counts.incoming[operation] += 1
            if kind is not None:
                self._counts.errors[(operation, kind, status)] += 1
            histogram = self._counts.latency.get(operation)
            if histogram is not None:
                histogram.observe(seconds)

    def snapshot(self) -> RestCounts:
        with self._lock:
            counts = self._counts
            return RestCounts(Counter(counts.incoming), Counter(counts.errors),
                              {op: h.copy() for op, h in counts.latency.items()})
