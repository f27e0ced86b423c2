"""The reactor thread: the one thread that owns every engine `Namespace` of the process.

It runs the broker's own network loop (loop.py: epoll, proton's C engine driven directly). Each turn of
it (all events that the last socket poll produced) ends with `end_turn`, where the broker
1. feeds receiver links that have credit and messages (the endpoints' pending pumps),
2. commits every namespace once (group commit: one store transaction for the whole turn),
3. runs what waited for that commit: `accepted` dispositions of sends, settlement echoes,
   `$management` replies, results of calls handed over by other threads,
4. schedules the next `tick()` at the earliest `next_deadline()` of the namespaces.

Other threads (the HTTPS admin server, the control API) never touch an engine: they use
`EngineThread.call(fn)`, which runs `fn` on the reactor and returns its result after the commit.
"""

from __future__ import annotations

import functools
import gc
import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar

import cproton
import cproton_ffi
from proton import Connection, Delivery, Endpoint, Handler, Link, Session, Transport
from proton._delivery import Disposition
from proton._events import Collector, Event, EventType, wrappers

from local_broker.engine import BrokerError
from local_broker.wire.amqp import native
from local_broker.wire.amqp.compat import error
from local_broker.wire.amqp.logs import log_event
from local_broker.wire.amqp.loop import Loop, Turn

log = logging.getLogger("local_broker.amqp")
_LIB, _FFI = cproton_ffi.lib, cproton_ffi.ffi
# proton's C calls of dispatch_event, bound once: reading one from cffi's lib object costs ~225 instructions
pn_connection_attachments = _LIB.pn_connection_attachments
pn_event_connection = _LIB.pn_event_connection
pn_record_get_py = _LIB.pn_record_get_py
_RAW_EVENTS = frozenset((Event.DELIVERY.number, Event.LINK_FLOW.number))  # handed over as C events
_METHODS = {number: kind.method for number, kind in EventType.TYPES.items()}  # handler method by event type
T = TypeVar("T")


class TurnParticipant(Protocol):
    """Something that works in step with the reactor's turns (a namespace's AMQP endpoint)."""

    failure: BaseException | None  # why its last commit failed (None: it did not)

    def before_commit(self) -> None: ...
    def commit(self) -> None: ...
    def next_deadline(self) -> float | None: ...
    def tick(self) -> None: ...


class Guarded(Handler):
    """Routes every event to `inner`; an error in it closes the connection involved, never the reactor.

    One bad frame must not stop the broker. proton looks handlers' methods up by name (`on_delivery`,
    ...); each lookup here yields a guarded wrapper of the inner method, made once per name and kept.
    Every other handler counts as activity that may move deadlines (`Turn`); the hot paths' handlers take
    proton's C event and say themselves what they changed: `on_delivery` whether deadlines may have moved
    (`Turn.rearm`), `on_link_flow` whether it readied a receiver to feed (`Turn.activity`: the flow proton
    raises itself once the broker has used a receiver's credit up asks for no end-of-turn work).
    """

    def __init__(self, inner: Any, turn: Turn) -> None:
        super().__init__()
        self.inner = inner
        self.turn = turn
        self.handlers = ()  # proton asks every handler for children; none here (saves a failed lookup)

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("on_"):
            raise AttributeError(name)
        fn = getattr(self.inner, name, None)
        guarded = None if fn is None else self._guard(name, fn)
        self.__dict__[name] = guarded
        return guarded

    def _guard(self, name: str, fn: Callable[[Any], None]) -> Callable[[Any], None]:
        turn = self.turn
        activity = name != "on_link_flow"
        rearm = activity and name != "on_delivery"

        def guarded(event: Any) -> None:
            if activity:
                turn.activity = True
                if rearm:
                    turn.rearm = True
            try:
                fn(event)
            except Exception:
                log.exception("error handling %s", name)
                turn.activity = True  # the connection closes: its handlers' events, the end of the turn
                impl = getattr(event, "_impl", event)  # a LazyEvent, or proton's C event itself
                connection = Connection.wrap(_LIB.pn_event_connection(impl))
                if connection is not None and connection.state & Endpoint.LOCAL_ACTIVE:
                    connection.condition = error("amqp:internal-error", "The broker failed on a frame.")
                    connection.close()

        return guarded


class _Lazy:
    """An attribute computed on first read, then stored on the instance (no lock, unlike cached_property)."""

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn, self.name = fn, fn.__name__

    def __get__(self, obj: Any, owner: type) -> Any:
        value = obj.__dict__[self.name] = self.fn(obj)
        return value


class LazyEvent(Event):
    """proton's Event, but its context and the delivery, link, session, connection and transport are wrapped
    when a handler first asks for them, not all for every event (most handlers read one or two).
    Handlers read them while the event is dispatched, when the C event is still the collector's head."""

    def __init__(self, impl: Any, number: int) -> None:
        self._impl = impl
        self._type = EventType.TYPES[number]

    @_Lazy
    def _clsname(self) -> str | None:
        return cproton.pn_event_class_name(self._impl) or None

    @_Lazy
    def _context(self) -> Any:
        clsname = self._clsname
        return _WRAPPERS[clsname](cproton.pn_event_context(self._impl)) if clsname else None

    @_Lazy
    def _delivery(self) -> Delivery | None:
        context = self._context
        if isinstance(context, Delivery):
            return context
        return _wrap_delivery(cproton.pn_event_delivery(self._impl))

    @_Lazy
    def _link(self) -> Link | None:
        if self._delivery:
            return self._delivery.link
        context = self._context
        return context if isinstance(context, Link) else Link.wrap(cproton.pn_event_link(self._impl))

    @_Lazy
    def _session(self) -> Session | None:
        if self._link:
            return self._link.session
        context = self._context
        return context if isinstance(context, Session) else Session.wrap(cproton.pn_event_session(self._impl))

    @_Lazy
    def _connection(self) -> Connection | None:
        if self._session:
            return self._session.connection
        context = self._context
        if isinstance(context, Connection):
            return context
        return Connection.wrap(cproton.pn_event_connection(self._impl))

    @_Lazy
    def _transport(self) -> Transport | None:
        context = self._context
        if isinstance(context, Transport):
            return context
        return Transport.wrap(cproton.pn_event_transport(self._impl))


def dispatch_event(impl: Any, number: int) -> None:
    """Hand one C event to its connection's handler, if that handler has a method for it.

    The broker sets handlers on connections only (sasl.py), so the link's and session's records are not
    searched; the handler is read from the connection's C record (no Python wrapper), and an event no
    handler method wants (most are transport and local-state events) costs no Python event object.
    The hot paths' events, a delivery and a link's flow (a receiver's credit: one per receive for the
    SDKs), are handed over as proton's C event (no Python event object at all)."""
    connection = pn_event_connection(impl)
    if connection == _FFI.NULL:
        return
    record = pn_record_get_py(pn_connection_attachments(connection))
    if record == _FFI.NULL:
        return
    handler = _FFI.from_handle(record).get("_handler")
    if handler is None:
        return
    method = getattr(handler, EventType.TYPES[number].method, None)
    if method is not None:
        method(impl if number in _RAW_EVENTS else LazyEvent(impl, number))


def native_drain(loop: Loop, handled: set[int]) -> Callable[[], None] | None:
    """The C module's twin of `loop._dispatch` with `dispatch_event` (None without it): the collector's
    events handed out with no cffi call per event."""
    bound = native.bound()
    if bound is None:
        return None
    collector = int(_FFI.cast("uintptr_t", loop.collector._impl))
    return functools.partial(bound.drain, collector, handled, _METHODS, LazyEvent, loop._by_transport,
                             loop.touched)


class BrokerDelivery(Delivery):
    """proton's Delivery, but its local and remote Disposition objects are made when first used (proton
    makes both for every delivery it wraps; the broker reads them only for modified and rejected outcomes).
    They are kept in the delivery's shared attributes, where proton's own wrappers look for them."""

    def _init(self) -> None:
        pass

    @property
    def local(self) -> Disposition:
        return self._disposition("local", cproton.pn_delivery_local, True)

    @property
    def remote(self) -> Disposition:
        return self._disposition("remote", cproton.pn_delivery_remote, False)

    def _disposition(self, name: str, get: Callable[[Any], Any], local: bool) -> Disposition:
        attrs = self.__dict__["_attrs"]
        disposition = attrs.get(name)
        if disposition is None:
            disposition = attrs[name] = Disposition(get(self._impl), local)
        return disposition


def _wrap_delivery(impl: Any) -> BrokerDelivery | None:
    impl = cproton.pn_cast_pn_delivery(impl)
    return None if cproton.isnull(impl) else BrokerDelivery(impl)


_WRAPPERS = {**wrappers, "pn_delivery": _wrap_delivery}


def _resolve(future: Future, result: Any, participant: TurnParticipant | None) -> None:
    failure = None if participant is None else participant.failure
    if failure is not None:
        future.set_exception(failure)
    else:
        future.set_result(result)


class EngineThread:
    """Runs the network loop in a thread; the group-commit turn end; the cross-thread executor."""

    def __init__(self) -> None:
        self.handled: set[int] = set()  # the event types some connection handler has a method for
        self.loop = Loop(Collector(), dispatch_event, self.handled.__contains__)
        self.loop.drain = native_drain(self.loop, self.handled)
        self.turn = self.loop.turn
        self.loop.on_turn_end = self.end_turn
        self.loop.on_wake = self._run_calls
        self.participants: list[TurnParticipant] = []
        self.after_commit: list[Callable[[], None]] = []
        self.timer_at: float | None = None
        self.external_changes = False  # this turn ran calls from other threads (admin, control)
        self._calls: queue.SimpleQueue[tuple[Callable[[], Any], Future, TurnParticipant | None]] = \
            queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._closing: list[Callable[[], None]] = []
        self.active_at = time.monotonic()  # when a turn last did some work

    def hand_out(self, handler_class: type) -> None:
        """Connections will have handlers of `handler_class`: hand out the events it has methods for (the
        loop hands out no other)."""
        self.handled.update(number for number, kind in EventType.TYPES.items()
                            if hasattr(handler_class, kind.method))

    # --- lifecycle --------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sbfed-reactor", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.loop.run()
        except Exception:
            log.exception("reactor stopped by an unexpected error")
            raise

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def on_closing(self, fn: Callable[[], None]) -> None:
        """Register work for shutdown (close listeners and connections, close stores); runs on the reactor."""
        self._closing.append(fn)

    def stop(self, timeout: float = 10.0) -> None:
        """Close everything on the reactor (stores commit as they close), then end the thread."""
        if self._thread is None:  # never started (a failed start): this thread still owns everything
            closing, self._closing = self._closing, []
            for fn in closing:
                fn()
            return
        if not self._thread.is_alive():
            return

        def shutdown() -> None:
            for fn in self._closing:
                try:
                    fn()
                except Exception:
                    log.exception("error during shutdown")
            done, self.after_commit = self.after_commit, []
            for fn in done:
                fn()
            self.loop.stop()

        self._calls.put((shutdown, Future(), None))
        self.loop.wake()
        self._thread.join(timeout)
        if self._thread.is_alive():
            log_event(log, logging.ERROR, "shutdown-timeout", seconds=timeout)

    # --- executor -------------------------------------------------------------------------------
    def call(self, fn: Callable[[], T], timeout: float | None = 30.0,
             participant: TurnParticipant | None = None) -> T:
        """Run `fn` on the reactor; return its result (or raise its error) once its changes are durable.
        With `participant` (the namespace `fn` changes), a failed commit of it is raised instead."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("EngineThread.call from the reactor thread would deadlock; call fn directly")
        future: Future = Future()
        self._calls.put((fn, future, participant))
        self.loop.wake()
        return future.result(timeout)

    def _run_calls(self) -> None:
        while True:
            try:
                fn, future, participant = self._calls.get_nowait()
            except queue.Empty:
                return
            self.turn.activity = self.turn.rearm = True
            self.external_changes = True
            try:
                result = fn()
            except BaseException as exc:  # handed back to the calling thread
                self.after_commit.append(lambda f=future, e=exc: f.set_exception(e))
            else:
                self.after_commit.append(lambda f=future, r=result, p=participant: _resolve(f, r, p))

    # --- the turn ---------------------------------------------------------------------------------
    def end_turn(self) -> bool:
        """The work at the end of a turn (module docstring); False when the turn had nothing to do."""
        turn = self.turn
        if not turn.activity:
            return False
        turn.activity = False
        self.active_at = time.monotonic()
        for participant in self.participants:
            participant.before_commit()
        for participant in self.participants:
            try:
                participant.commit()
            except BrokerError as exc:
                log_event(log, logging.ERROR, "commit-failed", error=exc.description)
        self.external_changes = False
        done, self.after_commit = self.after_commit, []
        for fn in done:
            fn()
        if turn.rearm:
            turn.rearm = False
            self._schedule_tick()
        return True

    def collect_garbage_when_quiet(self, quiet: float = 2.0, every: float = 300.0) -> None:
        """A full garbage collection once no turn has worked for `quiet` seconds, at most every `every`
        seconds and at most 0.1 % of the time (a collection pauses the loop about 7 ms per thousand messages
        held in memory). The broker's collector settings (cli.py: `gc.freeze()`, high thresholds) leave
        cyclic garbage that outlived the young generations uncollected otherwise (a deleted entity: its
        sub-queues point back at it)."""
        state = {"at": time.monotonic(), "spacing": every}

        def look() -> None:
            now = time.monotonic()
            if now - self.active_at >= quiet and now - state["at"] >= state["spacing"]:
                started = time.perf_counter()
                found = gc.collect()
                pause = time.perf_counter() - started
                state["at"], state["spacing"] = time.monotonic(), max(every, 1000 * pause)
                log_event(log, logging.DEBUG, "garbage-collected", objects=found, ms=round(pause * 1000, 1))
            self.loop.schedule(quiet, look)

        self.call(lambda: self.loop.schedule(quiet, look))

    def later(self, delay: float, action: Callable[[], None]) -> None:
        """Run `action` on the reactor after `delay` seconds (the loop logs an error in it)."""

        def run() -> None:
            self.turn.activity = self.turn.rearm = True
            action()

        self.loop.schedule(delay, run)

    def _run_ticks(self) -> None:
        self.timer_at = None
        for participant in self.participants:
            participant.tick()

    def _schedule_tick(self) -> None:
        when = None
        for participant in self.participants:
            deadline = participant.next_deadline()
            if deadline is not None and (when is None or deadline < when):
                when = deadline
        if when is None:
            return
        if self.timer_at is not None and self.timer_at <= when:
            return
        self.timer_at = when
        self.later(max(0.0, when - time.time()), self._run_ticks)
