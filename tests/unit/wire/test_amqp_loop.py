"""The broker's network loop (loop.py) on its own: no sockets but its wake-up pair."""

from __future__ import annotations

from proton import Collector

from local_broker.wire.amqp.loop import Loop


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
