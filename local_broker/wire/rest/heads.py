"""Long polls on `.../messages/head`: requests parked on the reactor until a message or their timeout.

Why parked here, and not in a thread each: the reactor already learns when an entity gains messages
(`Namespace.on_available`, the same signal that feeds AMQP receiver links), so a request with nothing to
take waits as a `Waiter` in a per-entity queue that costs no thread at all. At the end of a reactor turn
(`before_commit`, a `TurnParticipant` like the AMQP endpoint) the waiters of entities that gained
messages take one each, in arrival order; their answers go out after the turn's commit, as AMQP
deliveries do, so both doors share one lock table, one delivery count and one dead-letter path. A timer
on the loop answers a waiter that got nothing with 204. The HTTP side hands its socket over meanwhile
(admin/server.py: a parked connection holds no handler thread), so 1,000 long polls cost 1,000 small
objects, not 1,000 threads.
"""

from __future__ import annotations

import threading
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from local_broker.engine import BrokerError, Message, ReceiveMode

Outcome = Message | BrokerError | None  # a message, why none could be taken, or nothing within the timeout


class Parked:
    """The hand-over of a parked request's answer: the reactor `settle`s it, the HTTP side says
    `when_settled` how to deliver it; whichever comes second delivers (they race)."""

    def __init__(self, connection_open: Callable[[], bool]) -> None:
        """`connection_open()`: whether the client still waits (asked on the reactor; must not block)."""
        self._lock = threading.Lock()
        self._answer: Any = None
        self._deliver: Callable[[Any], None] | None = None
        self.connection_open = connection_open

    def settle(self, answer: Any) -> None:
        with self._lock:
            self._answer, deliver = answer, self._deliver
        if deliver is not None:
            deliver(answer)

    def when_settled(self, deliver: Callable[[Any], None]) -> None:
        with self._lock:
            self._deliver, answer = deliver, self._answer
        if answer is not None:
            deliver(answer)


@dataclass(eq=False)
class Waiter:
    path: str  # canonical, as `on_available` names it
    mode: ReceiveMode
    finish: Callable[[Outcome], None]  # runs on the reactor once the outcome is committed
    parked: Parked
    done: bool = field(default=False)
    timer: Any = None  # the loop's Timer of its timeout, cancelled once it is answered

    def answered(self) -> None:
        self.done = True
        if self.timer is not None:
            self.timer.cancel()  # a loop under many polls would hold every answered one's timer else


class HeadRequests:
    """The parked head requests of one namespace; every method runs on the reactor thread."""

    failure: BrokerError | None = None  # TurnParticipant: this one commits nothing itself

    def __init__(self, namespace: Any, engine_thread: Any, endpoint: Any) -> None:
        """`endpoint`: the namespace's AMQP endpoint, the participant that commits the namespace."""
        self.ns = namespace
        self.thread = engine_thread
        self.endpoint = endpoint
        self.waiting: dict[str, deque[Waiter]] = defaultdict(deque)
        self.ready_paths: set[str] = set()
        namespace.on_available(self._on_available)
        engine_thread.participants.append(self)

    @property
    def parked(self) -> int:
        return sum(len(q) for q in self.waiting.values())

    def take(self, path: str, mode: ReceiveMode, timeout: float, finish: Callable[[Outcome], None],
             parked: Parked) -> Message | None:
        """The head message now, else None; with a timeout, `finish` gets the outcome later instead
        (then this returns None and the request is parked)."""
        got = self.ns.receive(path, 1, mode)
        if got:
            return got[0]
        if timeout > 0:
            waiter = Waiter(self.ns.resolve(path), mode, finish, parked)
            self.waiting[waiter.path].append(waiter)
            waiter.timer = self.thread.loop.schedule(timeout, lambda: self._expire(waiter))
        return None

    def _on_available(self, path: str) -> None:
        if self.waiting:  # nothing to note while no request waits (AMQP's hot path calls this per send)
            self.ready_paths.add(path)

    def _expire(self, waiter: Waiter) -> None:
        if waiter.done:
            return
        waiter.done = True
        queue = self.waiting.get(waiter.path)
        if queue is not None:
            queue.remove(waiter)
            if not queue:
                del self.waiting[waiter.path]
        waiter.finish(None)

    def answer_all(self, error: BrokerError) -> None:
        """Every parked request gets `error` now (the namespace went down)."""
        waiting, self.waiting = self.waiting, defaultdict(deque)
        for queue in waiting.values():
            for waiter in queue:
                waiter.answered()
                waiter.finish(error)

    # --- turn participation (wire/amqp/reactor.py) ----------------------------------------------------
    def before_commit(self) -> None:
        if not self.ready_paths:
            return
        paths, self.ready_paths = self.ready_paths, set()
        for path in paths:
            queue = self.waiting.get(path)
            while queue:
                waiter = queue[0]
                if not waiter.parked.connection_open():  # its client left: no message is taken for it
                    queue.popleft()
                    waiter.answered()
                    waiter.finish(None)  # the answer finds the connection closed and closes it too
                    continue
                try:
                    got = self.ns.receive(path, 1, waiter.mode)
                except BrokerError as exc:
                    got = exc
                if not got:
                    break
                queue.popleft()
                waiter.answered()
                self.thread.turn.rearm = True  # a new lock to watch
                outcome = got if isinstance(got, BrokerError) else got[0]
                self.thread.after_commit.append(lambda w=waiter, o=outcome: w.finish(self._committed(o)))
            if queue is not None and not queue:
                del self.waiting[path]

    def _committed(self, outcome: Outcome) -> Outcome:
        """The outcome, unless the turn's commit failed (the engine is back before the take)."""
        return self.endpoint.failure or outcome

    def commit(self) -> None:
        pass

    def next_deadline(self) -> float | None:
        return None

    def tick(self) -> None:
        pass
