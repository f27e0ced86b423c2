"""The local host's lock watch (replicators/host/lock_watch.py): an action runs on the watcher's thread once
due, in order of due time; a cancelled one never runs; closing drops what is pending. Ordering, not timing,
is asserted: an action due later runs only after every earlier one that was not cancelled."""

from __future__ import annotations

import threading

from replicators.host.lock_watch import LockWatch

WAIT = 30.0  # generous: the test waits for an event, it does not time anything


def test_due_actions_run_on_the_watchers_thread_in_due_order():
    watch = LockWatch("t")
    ran: list[tuple[str, str]] = []
    done = threading.Event()
    try:
        watch.watch(0.3, lambda: (ran.append(("late", threading.current_thread().name)), done.set()))
        watch.watch(0.0, lambda: ran.append(("now", threading.current_thread().name)))
        assert done.wait(WAIT)
        assert ran == [("now", "t-locks"), ("late", "t-locks")]
    finally:
        watch.close()


def test_a_cancelled_action_never_runs():
    watch = LockWatch("t")
    ran: list[str] = []
    done = threading.Event()
    try:
        cancelled = watch.watch(0.1, lambda: ran.append("cancelled"))
        watch.cancel(cancelled)
        watch.watch(0.3, lambda: (ran.append("kept"), done.set()))
        assert done.wait(WAIT)
        assert ran == ["kept"]
    finally:
        watch.close()


def test_an_action_that_raises_does_not_stop_the_watch():
    watch = LockWatch("t")
    done = threading.Event()

    def fail() -> None:
        raise RuntimeError("renewal failed")

    try:
        watch.watch(0.0, fail)
        watch.watch(0.1, done.set)
        assert done.wait(WAIT)
    finally:
        watch.close()


def test_closing_drops_pending_actions_and_stops_the_thread():
    watch = LockWatch("t")
    ran: list[str] = []
    watch.watch(3600, lambda: ran.append("pending"))
    watch.close()
    assert ran == []
    assert not any(t.name == "t-locks" and t.is_alive() for t in threading.enumerate())
