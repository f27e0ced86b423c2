"""The broker's network loop (loop.py) on its own: no sockets but its wake-up pair."""

from __future__ import annotations

import gc
import time
import weakref

from proton import Collector

from local_broker.wire.amqp.loop import MIN_COMPACTION, Loop
from local_broker.wire.amqp.reactor import EngineThread


def test_a_timer_far_in_the_future_does_not_stop_the_loop() -> None:
    """epoll cannot wait 1e10 s (nor forever, as an infinite deadline asks): the poll waits at most
    MAX_WAIT and the timer stays due later."""
    loop = Loop(Collector(), lambda event, number: None)
    fired: list[str] = []
    loop.schedule(float("inf"), lambda: fired.append("never"))
    loop.schedule(1e10, lambda: fired.append("far"))
    woken: list[str] = []
    loop.on_wake = lambda: woken.append("woken")
    loop.wake()
    loop._poll()  # returns at once: the wake-up is readable
    assert woken == ["woken"] and fired == []
    assert len(loop._timers) == 2


def test_a_cancelled_timer_lets_go_of_its_action_at_once() -> None:
    """A closure over a closed connection's objects must not live until the timer was due."""
    loop = Loop(Collector(), lambda event, number: None)

    class Held:
        pass

    held = Held()
    reference = weakref.ref(held)
    timer = loop.schedule(3600.0, lambda held=held: None)
    del held
    assert reference() is not None
    timer.cancel()
    assert reference() is None


def test_cancelled_timers_leave_the_heap_once_they_are_half_of_it() -> None:
    loop = Loop(Collector(), lambda event, number: None)
    fired: list[int] = []
    kept = [loop.schedule(0.0, lambda i=i: fired.append(i)) for i in range(10)]
    for _ in range(5):
        timers = [loop.schedule(3600.0, lambda: None) for _ in range(100)]
        for timer in timers:
            timer.cancel()
    assert len(loop._timers) <= 10 + 2 * MIN_COMPACTION + 2
    loop._poll()  # the live ones still run, once, in order
    assert fired == list(range(10))
    assert all(timer.cancelled for timer in kept)
    kept[0].cancel()  # cancelling a timer that ran changes nothing
    assert loop._cancelled >= 0


def test_a_timer_cancelled_by_another_during_the_poll_does_not_run() -> None:
    loop = Loop(Collector(), lambda event, number: None)
    fired: list[str] = []
    later = loop.schedule(0.0, lambda: fired.append("later"))
    first = loop.schedule(-1.0, lambda: [later.cancel()] + [loop.schedule(3600, lambda: None).cancel()
                                                              for _ in range(2 * MIN_COMPACTION)])
    loop._poll()
    assert fired == [] and first.cancelled


def test_the_reactor_collects_cyclic_garbage_once_it_is_quiet() -> None:
    """With the broker's settings (no automatic collection reaches old garbage), a cycle that became
    garbage is collected once no turn has worked for the quiet time."""
    thread = EngineThread()
    thread.start()
    enabled = gc.isenabled()
    gc.disable()  # only the reactor's collection can find it
    try:
        class Cycle:
            pass

        cycle = Cycle()
        cycle.me = cycle  # type: ignore[attr-defined]
        reference = weakref.ref(cycle)
        thread.collect_garbage_when_quiet(quiet=0.05, every=0.1)
        del cycle
        deadline = time.monotonic() + 10
        while reference() is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert reference() is None
    finally:
        if enabled:
            gc.enable()
        thread.stop()
