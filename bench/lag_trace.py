"""Where replication lag goes: timestamps at each step of a message's trip through the local host, for
`bench/replicate.py --trace` only (the host's own code paths carry no instrumentation).

Steps, per message (wall clock, one machine, so the broker's EnqueuedTimeUtc compares with the host's):
  source enqueued -> arrived in the receiver's buffer (broker dispatch, loopback, the SDK reading frames)
  -> handed to the function (receive wait and batch fill) -> replicas sent (copy + send round trip)
  -> target enqueued; and after the function returned, the batch's settlement (one awaited round trip
  per message), during which the next messages wait in the buffer.
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from azure.servicebus._pyamqp.client import ReceiveClient

from replicators.host.runner import TriggerRunner
from replicators.host.stats import percentile
from replicators.replicate import Replicator


@dataclass
class Trace:
    arrived: dict[str, float] = field(default_factory=dict)
    dispatched: dict[str, float] = field(default_factory=dict)
    sent: dict[str, float] = field(default_factory=dict)
    settle_seconds: list[float] = field(default_factory=list)
    batch_sizes: list[int] = field(default_factory=list)

    def report(self, source_enqueued: dict[str, float], target_enqueued: dict[str, float]) -> list[str]:
        steps: dict[str, list[float]] = defaultdict(list)
        for message_id, source in source_enqueued.items():
            times = [
                source,
                self.arrived.get(message_id),
                self.dispatched.get(message_id),
                self.sent.get(message_id),
                target_enqueued.get(message_id),
            ]
            if None in times:
                continue
            names = ("source -> receiver buffer", "buffer -> function", "function -> sent", "total")
            deltas = [times[1] - times[0], times[2] - times[1], times[3] - times[2], times[4] - times[0]]
            for name, delta in zip(names, deltas, strict=True):
                steps[name].append(delta)
        lines = [_line(name, values) for name, values in steps.items()]
        if self.settle_seconds:
            lines.append(_line("settling a batch", self.settle_seconds))
        if self.batch_sizes:
            lines.append(
                f"  {'batch size':<26} p50 {percentile(self.batch_sizes, 0.5):5.0f}      "
                f"max {max(self.batch_sizes)}  ({len(self.batch_sizes)} batches)"
            )
        return lines


def _line(name: str, seconds: list[float]) -> str:
    p50, p99 = percentile(seconds, 0.5) * 1000, percentile(seconds, 0.99) * 1000
    return f"  {name:<26} p50 {p50:7.1f} ms  p99 {p99:7.1f} ms"


def _message_id(pyamqp_message: Any) -> str | None:
    properties = getattr(pyamqp_message, "properties", None)
    value = getattr(properties, "message_id", None)
    return value.decode() if isinstance(value, bytes) else value


@contextlib.contextmanager
def traced() -> Iterator[Trace]:
    """Wrap the SDK's buffer callback, the runner's batch processing and the replicator's send."""
    trace = Trace()
    on_received = ReceiveClient._message_received
    process = TriggerRunner._process
    settle = TriggerRunner._record
    replicate = Replicator.replicate

    def message_received(self: Any, frame: Any, message: Any) -> None:
        message_id = _message_id(message)
        if message_id is not None:
            trace.arrived.setdefault(message_id, time.time())
        on_received(self, frame, message)

    def process_batch(self: Any, receiver: Any, messages: Any) -> None:
        now = time.time()
        trace.batch_sizes.append(len(messages))
        for message in messages:
            trace.dispatched.setdefault(str(message.message_id), now)
        process(self, receiver, messages)

    def settle_batch(self: Any, results: Any, outcome: str) -> None:
        started = time.perf_counter()
        settle(self, results, outcome)  # the settlements run as their results are recorded
        trace.settle_seconds.append(time.perf_counter() - started)

    def replicate_batch(self: Any, messages: Any) -> Any:
        outcome = replicate(self, messages)
        now = time.time()
        for message in messages:
            trace.sent.setdefault(str(message.message_id), now)
        return outcome

    ReceiveClient._message_received = message_received
    TriggerRunner._process = process_batch
    TriggerRunner._record = settle_batch
    Replicator.replicate = replicate_batch
    try:
        yield trace
    finally:
        ReceiveClient._message_received = on_received
        TriggerRunner._process = process
        TriggerRunner._record = settle
        Replicator.replicate = replicate
