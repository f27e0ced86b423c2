"""What a namespace's AMQP endpoint counts for the broker's /metrics: requests and their failures as Azure
Monitor classes them (UserErrors, ServerErrors, ThrottledRequests), and how long the broker took to answer a
send and a settlement (Azure's ServerSendLatency, and the same for settling).

A request is a link attach, a transfer (a send), a disposition with an outcome (a settlement), or a $cbs or
$management request. Counting is an integer add per request and, per turn, one histogram update for all
the sends and one for all the settlements it answered."""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

from local_broker.engine.errors import BrokerError, OperationTimeoutError, ServerBusyError, StoreWriteError

# Seconds from the loop reading the request to the answer leaving: 0.5 ms on an idle machine, up to
# seconds behind a latency fault or a slow disk.
LATENCY_BOUNDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Histogram:
    """Counts per bucket (`le` each bound, the last one +Inf), their total and sum, as Prometheus wants."""

    __slots__ = ("bounds", "buckets", "count", "sum")

    def __init__(self, bounds: tuple[float, ...] = LATENCY_BOUNDS) -> None:
        self.bounds = bounds
        self.buckets = [0] * (len(bounds) + 1)
        self.count = 0
        self.sum = 0.0

    def observe(self, seconds: float, times: int = 1) -> None:
        self.buckets[bisect_left(self.bounds, seconds)] += times
        self.count += times
        self.sum += seconds * times

    def copy(self) -> Histogram:
        copied = Histogram(self.bounds)
        copied.buckets, copied.count, copied.sum = list(self.buckets), self.count, self.sum
        return copied


ERROR_CLASSES = ("user_errors", "server_errors", "throttled")  # Requests' fields, Azure Monitor's classes


def failure_class(exc: BrokerError) -> str | None:
    """The class of a request answered with `exc`: a store that cannot write is the server's error, else as
    `error_class` classes its status and condition."""
    if isinstance(exc, StoreWriteError):
        return "server_errors"
    return error_class(exc.http_status, exc.amqp_condition)


def error_class(status: int, condition: str | None) -> str | None:
    """The class of an error answer: busy is throttled, any other 5xx a server error, the rest the
    client's; a receiver's wait for a session that ran out is no error (None)."""
    if condition == OperationTimeoutError.amqp_condition:
        return None
    if condition == ServerBusyError.amqp_condition:
        return "throttled"
    return "server_errors" if status >= 500 else "user_errors"


@dataclass
class Requests:
    incoming: int = 0
    user_errors: int = 0
    server_errors: int = 0
    throttled: int = 0
    send_latency: Histogram = field(default_factory=Histogram)
    settle_latency: Histogram = field(default_factory=Histogram)

    def failed(self, exc: BrokerError) -> None:
        """A request answered with `exc`, counted in its class (`failure_class`)."""
        self._count(failure_class(exc))

    def answered(self, status: int, condition: str | None) -> None:
        """A request answered with an error status, counted in its class (`error_class`)."""
        self._count(error_class(status, condition))

    def _count(self, kind: str | None) -> None:
        if kind is not None:
            setattr(self, kind, getattr(self, kind) + 1)

    @property
    def successful(self) -> int:
        return self.incoming - self.user_errors - self.server_errors - self.throttled
