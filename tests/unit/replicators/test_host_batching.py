"""How the local host collects a batch for a batch function (replicators/host/batching.py): what has arrived
is handed over at once; only `minMessageBatchSize` makes it wait, for at most `maxBatchWaitTime`.

The receiver is a stand-in with the SDK's `receive_messages` semantics on a fake clock: buffered messages
first, then (unless the wait has already run out) reading until the count is met, the wait elapses, or
0.2 s after the first newly read message."""

from __future__ import annotations

from replicators.host.batching import ALREADY_RECEIVED, next_batch

FURTHER_PULL = 0.2  # the SDK keeps reading this long after its first new message


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class ScriptedReceiver:
    """Messages arrive at the given times; `calls` records (max_message_count, max_wait_time)."""

    def __init__(self, clock: Clock, arrivals: list[float]) -> None:
        self.clock = clock
        self.pending = sorted(arrivals)
        self.calls: list[tuple[int, float]] = []

    def _arrived(self, limit: int) -> list[float]:
        taken = [t for t in self.pending if t <= self.clock.now][:limit]
        del self.pending[: len(taken)]
        return taken

    def receive_messages(self, max_message_count: int, max_wait_time: float) -> list[float]:
        self.calls.append((max_message_count, max_wait_time))
        batch = self._arrived(max_message_count)
        if len(batch) >= max_message_count or max_wait_time <= ALREADY_RECEIVED:
            return batch
        deadline = self.clock.now + max_wait_time
        upcoming = [t for t in self.pending if t <= deadline]
        if not upcoming:
            self.clock.now = deadline
            return batch
        deadline = min(deadline, upcoming[0] + FURTHER_PULL)
        needed = max_message_count - len(batch)
        within = [t for t in self.pending if t <= deadline]
        self.clock.now = within[needed - 1] if len(within) >= needed else deadline
        return batch + self._arrived(needed)


def collect(receiver: ScriptedReceiver, clock: Clock, *, min_size: int = 1, max_wait: float = 30.0) -> list:
    return next_batch(
        receiver, max_size=100, min_size=min_size, max_wait=max_wait, idle_wait=1.0, clock=clock
    )


def test_one_arrived_message_is_handed_over_without_waiting_for_more():
    clock = Clock()
    receiver = ScriptedReceiver(clock, [0.0, 0.05, 0.1])
    assert collect(receiver, clock) == [0.0]
    assert clock.now == 0.0
    assert receiver.calls == [(1, 1.0), (99, ALREADY_RECEIVED)]


def test_everything_already_received_goes_in_one_batch_up_to_the_maximum():
    clock = Clock()
    receiver = ScriptedReceiver(clock, [0.0] * 150)
    assert len(collect(receiver, clock)) == 100
    assert len(collect(receiver, clock)) == 50
    assert clock.now == 0.0


def test_an_idle_receiver_returns_nothing_after_the_idle_wait():
    clock = Clock()
    receiver = ScriptedReceiver(clock, [5.0])
    assert collect(receiver, clock) == []
    assert clock.now == 1.0
    assert receiver.calls == [(1, 1.0)]


def test_the_first_message_is_handed_over_when_it_arrives():
    clock = Clock()
    receiver = ScriptedReceiver(clock, [0.4, 0.45])
    assert collect(receiver, clock) == [0.4]
    assert clock.now == 0.4


def test_a_minimum_batch_size_waits_for_that_many_then_takes_what_arrived_meanwhile():
    clock = Clock()
    receiver = ScriptedReceiver(clock, [0.0, 0.1, 0.1, 0.3, 0.3, 0.3, 2.0])
    assert collect(receiver, clock, min_size=5) == [0.0, 0.1, 0.1, 0.3, 0.3, 0.3]
    assert clock.now == 0.3


def test_a_minimum_batch_size_waits_at_most_max_batch_wait_time():
    clock = Clock()
    receiver = ScriptedReceiver(clock, [0.0, 1.0, 2.0, 3.0, 9.0])
    assert collect(receiver, clock, min_size=10, max_wait=4.0) == [0.0, 1.0, 2.0, 3.0]
    assert clock.now == 4.0


def test_without_prefetch_one_call_asks_for_a_whole_batch():
    clock = Clock()
    receiver = ScriptedReceiver(clock, [0.0, 0.05, 0.1, 0.5])
    batch = next_batch(
        receiver, max_size=100, min_size=1, max_wait=30.0, idle_wait=1.0, prefetch=False, clock=clock
    )
    assert batch == [0.0, 0.05, 0.1]
    assert receiver.calls == [(100, 1.0)]
