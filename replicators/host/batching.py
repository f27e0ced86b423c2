"""How a batch trigger collects the messages of one invocation, as the Functions Service Bus extension
does: once `minMessageBatchSize` messages (default 1) have arrived, the function gets every message that
has arrived, up to `maxMessageBatchSize`; it never waits to fill a batch beyond that minimum, and with a
minimum above 1 it waits at most `maxBatchWaitTime` for it, then takes what it has.

The SDK's `receive_messages(n)` keeps reading for 0.2 s after its first message unless `n` arrived, so
with prefetch the batch is taken in two calls: one that waits for the first message, then one with a
wait too short to read anything more that takes what the receiver already holds (its prefetch buffer).
Without prefetch nothing arrives unasked: one call asks the broker for a whole batch, and the SDK's
0.2 s gap wait applies (lag stays that high; prefetch is what buys low lag)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from azure.servicebus import ServiceBusReceivedMessage

# A wait the SDK accepts (> 0) but which has run out before it reads the socket: buffered messages only.
ALREADY_RECEIVED = 1e-9


class Receiver(Protocol):
    def receive_messages(
        self, max_message_count: int | None = ..., max_wait_time: float | None = ...
    ) -> list[ServiceBusReceivedMessage]: ...


def next_batch(
    receiver: Receiver,
    *,
    max_size: int,
    min_size: int,
    max_wait: float,
    idle_wait: float,
    prefetch: bool = True,
    clock: Callable[[], float] = time.monotonic,
) -> list[ServiceBusReceivedMessage]:
    """The next invocation's messages; empty when none arrived within `idle_wait` seconds."""
    batch = receiver.receive_messages(max_message_count=1 if prefetch else max_size, max_wait_time=idle_wait)
    if not batch:
        return batch
    minimum = min(min_size, max_size)
    if len(batch) < minimum:
        deadline = clock() + max_wait
        while len(batch) < minimum and (remaining := deadline - clock()) > 0:
            batch += receiver.receive_messages(
                max_message_count=minimum - len(batch), max_wait_time=remaining
            )
    if prefetch and len(batch) < max_size:
        batch += receiver.receive_messages(
            max_message_count=max_size - len(batch), max_wait_time=ALREADY_RECEIVED
        )
    return batch
