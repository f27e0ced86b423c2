"""The broker's own network loop: epoll, proton's C protocol engine driven directly, timers, wake-ups.

proton's Python `Container` polls with `select()` (it dies at fd 1024) and spends Python dispatch on every
socket readiness, selector update and timer. Here one thread (the reactor, reactor.py) runs:

1. poll the sockets with epoll until one is ready, a timer is due or another thread wakes the loop; a
   socket is watched only while its transport can take input or has output waiting;
2. read the ready sockets into their transports (up to MAX_READ each: a busy sender cannot fill a turn on
   its own), run the due timers and the woken work;
3. hand every event in proton's collector to its handler;
4. end the turn (`on_turn_end`: the group commit and the replies that waited for it), hand out the events
   that made;
5. write each touched transport's output at once (no extra poll for writability), close the sockets of
   transports that are done: closed, or whose input ended with nothing left to write (a peer that vanished
   in any state never leaves a socket in CLOSE-WAIT).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import select
import socket
import time
from collections.abc import Callable
from typing import Any, Protocol

import cproton_ffi
from proton import Connection, Event, Transport

from local_broker.wire.amqp import native

log = logging.getLogger("local_broker.amqp")

READ = select.EPOLLIN | select.EPOLLRDHUP
WRITE = select.EPOLLOUT
MAX_READ = 64 * 1024
MAX_WRITE = 256 * 1024  # bytes handed to a socket per write (the rest waits for the poll)
MIN_COMPACTION = 64  # cancelled timers the heap may hold before it is rebuilt without them
MAX_WAIT = 3600.0  # seconds: the longest single poll (epoll's timeout overflows near 1e9 s)
_LIB, _FFI = cproton_ffi.lib, cproton_ffi.ffi
# proton's C calls, bound once: reading one from cffi's lib object costs ~225 instructions a time
pn_collector_peek = _LIB.pn_collector_peek
pn_collector_pop = _LIB.pn_collector_pop
pn_event_transport = _LIB.pn_event_transport
pn_event_type = _LIB.pn_event_type
pn_transport_capacity = _LIB.pn_transport_capacity
pn_transport_close_head = _LIB.pn_transport_close_head
pn_transport_close_tail = _LIB.pn_transport_close_tail
pn_transport_closed = _LIB.pn_transport_closed
pn_transport_get_remote_idle_timeout = _LIB.pn_transport_get_remote_idle_timeout
pn_transport_peek = _LIB.pn_transport_peek
pn_transport_pending = _LIB.pn_transport_pending
pn_transport_pop = _LIB.pn_transport_pop
pn_transport_push = _LIB.pn_transport_push
pn_transport_tick = _LIB.pn_transport_tick
_NULL = _FFI.NULL
_TRANSPORT_CLOSED = Event.TRANSPORT_CLOSED.number
_DELIVERY = Event.DELIVERY.number


class Channel(Protocol):
    """Something the loop watches a socket for."""

    def on_io(self, events: int) -> None: ...
    def close(self) -> None: ...


class Timer:
    """An action due at some time. Cancelling it lets go of the action at once (a closure over a closed
    connection's objects must not keep them for the rest of the delay) and tells the loop, which drops
    cancelled timers from its heap once they are half of it."""

    __slots__ = ("action", "cancelled", "loop")

    def __init__(self, loop: Loop, action: Callable[[], None]) -> None:
        self.loop = loop
        self.action: Callable[[], None] | None = action
        self.cancelled = False

    def cancel(self) -> None:
        if not self.cancelled:
            self.cancelled = True
            self.action = None
            self.loop.timer_cancelled()


class Turn:
    """What the handlers did since the last end-of-turn work, per reactor: a turn with only socket
    bookkeeping skips that work, and one that only completed messages (which removes deadlines, never
    adds one) does not ask the namespaces for their next deadline."""

    __slots__ = ("activity", "rearm", "started")

    def __init__(self) -> None:
        self.activity = False  # some handler ran
        self.rearm = False  # a deadline may have come nearer: the next tick is recomputed
        self.started = 0.0  # perf_counter() when the loop last woke with work: the answers' latency


class Loop:
    """See the module docstring. Everything but `wake` runs on the loop's thread."""

    def __init__(self, collector: Any, dispatch: Callable[[Any, int], None],
                 handled: Callable[[int], bool] = lambda number: True) -> None:
        """`dispatch(C event, its type number)` hands an event to its handler; only events whose type
        `handled` admits are handed over (most of a settling client's are transport bookkeeping)."""
        self.collector = collector  # every connection's events, read in bulk each turn
        self.dispatch = dispatch
        self.handled = handled
        self.turn = Turn()
        self.on_turn_end: Callable[[], bool] = lambda: False  # True: the turn end made more work
        self.on_wake: Callable[[], None] = lambda: None
        self._epoll = select.epoll()
        self._channels: dict[int, Channel] = {}
        self._masks: dict[int, int] = {}
        self._timers: list[tuple[float, int, Timer]] = []
        self._cancelled = 0  # cancelled timers still in the heap
        self._ticket = itertools.count()
        self._by_transport: dict[Any, TransportIO] = {}
        self.touched: set[TransportIO] = set()
        self._unseen_input: set[int] = set()  # fds `readable` has reported for the next poll
        self._woken, self._wake_out = socket.socketpair()
        self._woken.setblocking(False)
        self._wake_out.setblocking(False)
        self.watch(self._woken.fileno(), _Waker(self), READ)
        self._running = False
        self.out = _FFI.new("char[]", MAX_WRITE)  # what a transport writes is copied here, then sent
        self.out_buffer = _FFI.buffer(self.out)  # the same memory, for the C write
        bound = native.bound()  # its write_out runs proton's calls with the GIL held; None: pure Python
        self.write_out: Callable[[int, int, Any, int], tuple[int, int]] | None = \
            None if bound is None else bound.write_out
        self.drain: Callable[[], None] | None = None  # `_dispatch` in C (EngineThread sets it when built)

    # --- sockets ---------------------------------------------------------------------------------------
    def watch(self, fd: int, channel: Channel, mask: int) -> None:
        """Watch `fd` for `mask` (0: not at all, but keep the channel) and report to `channel`."""
        self._channels[fd] = channel
        old = self._masks.get(fd, 0)
        if mask == old:
            return
        if not mask:
            self._epoll.unregister(fd)
        elif not old:
            self._epoll.register(fd, mask)
        else:
            self._epoll.modify(fd, mask)
        self._masks[fd] = mask

    def forget(self, fd: int) -> None:
        """Stop watching `fd` (call before closing the socket)."""
        self._channels.pop(fd, None)
        if self._masks.pop(fd, 0):
            try:
                self._epoll.unregister(fd)
            except OSError:
                pass

    def adopt(self, io: TransportIO) -> None:
        self._by_transport[io.transport._impl] = io
        self.touched.add(io)

    def readable(self, fd: int) -> None:
        """Report `fd` readable at the next poll, whatever its socket holds: a layer above the socket (TLS,
        WebSocket: streams.py) has input that epoll cannot see."""
        if fd in self._unseen_input:
            return
        self._unseen_input.add(fd)

        def report() -> None:
            self._unseen_input.discard(fd)
            channel = self._channels.get(fd)
            if channel is not None:
                channel.on_io(select.EPOLLIN)

        self.schedule(0.0, report)

    def release(self, io: TransportIO) -> None:
        self._by_transport.pop(io.transport._impl, None)
        self.touched.discard(io)

    # --- time and other threads ---------------------------------------------------------------------
    def schedule(self, delay: float, action: Callable[[], None]) -> Timer:
        timer = Timer(self, action)
        heapq.heappush(self._timers, (time.monotonic() + delay, next(self._ticket), timer))
        return timer

    def timer_cancelled(self) -> None:
        """A timer was cancelled: once cancelled ones are half the heap, rebuild it without them (the heap
        stays proportional to the live timers, however many connections came and went)."""
        self._cancelled += 1
        if self._cancelled > MIN_COMPACTION and 2 * self._cancelled > len(self._timers):
            self._timers[:] = [entry for entry in self._timers if not entry[2].cancelled]  # in place: the
            heapq.heapify(self._timers)  # poll may be popping from it
            self._cancelled = 0

    def wake(self) -> None:
        """From any thread: run `on_wake` on the loop soon."""
        try:
            self._wake_out.send(b"\0")
        except OSError:  # a wake-up is pending already (the buffer is full), or the loop has ended
            pass

    def stop(self) -> None:
        self._running = False

    # --- the loop ------------------------------------------------------------------------------------
    def run(self) -> None:
        self._running = True
        while self._running:
            self._poll()
            self._settle_turn()
        self._settle_turn()  # the last answers (close frames) go out before the sockets close
        for channel in list(self._channels.values()):
            channel.close()
        self._epoll.close()

    def _poll(self) -> None:
        timeout = -1.0
        if self._timers:  # a far (or infinite) deadline is waited for in steps epoll can count
            timeout = min(max(0.0, self._timers[0][0] - time.monotonic()), MAX_WAIT)
        ready = self._epoll.poll(timeout)
        self.turn.started = time.perf_counter()
        for fd, events in ready:
            channel = self._channels.get(fd)
            if channel is None:
                continue
            try:
                channel.on_io(events)
            except Exception:  # one broken peer must not stop the loop: its socket closes, nothing else
                log.exception("error on a socket; closing it")
                channel.close()
        now = time.monotonic()
        timers = self._timers
        while timers and timers[0][0] <= now:
            timer = heapq.heappop(timers)[2]
            action = timer.action
            if action is None:
                self._cancelled -= 1
                continue
            timer.action = None
            timer.cancelled = True  # run: a later cancel() has nothing to drop
            try:
                action()
            except Exception:
                log.exception("error in a timer")

    def _settle_turn(self) -> None:
        """Steps 3 to 5 of the module docstring, repeated while they make new events."""
        for _ in range(100):
            self._dispatch()
            if self.on_turn_end():
                self._dispatch()
            touched = tuple(self.touched)  # the set stays the one the C drain was given
            self.touched.clear()
            for io in touched:
                io.flush()
            if pn_collector_peek(self.collector._impl) == _NULL:
                return

    def _dispatch(self) -> None:
        """Hand out the collector's events. A delivery event comes from input, whose transport the read
        has touched already; every other event marks its transport for the end-of-turn flush."""
        if self.drain is not None:
            self.drain()
            return
        impl = self.collector._impl
        by_transport = self._by_transport
        touched = self.touched
        dispatch = self.dispatch
        handled = self.handled
        peek, pop = pn_collector_peek, pn_collector_pop
        event = peek(impl)
        while event != _NULL:
            number = pn_event_type(event)
            if handled(number):
                dispatch(event, number)
            if number != _DELIVERY:
                transport = pn_event_transport(event)
                if transport != _NULL:
                    io = by_transport.get(transport)
                    if io is not None:
                        touched.add(io)
                        if number == _TRANSPORT_CLOSED:
                            io.close()
            pop(impl)
            event = peek(impl)


class _Waker:
    def __init__(self, loop: Loop) -> None:
        self.loop = loop

    def on_io(self, events: int) -> None:
        try:
            while self.loop._woken.recv(4096):
                pass
        except BlockingIOError:
            pass
        self.loop.on_wake()

    def close(self) -> None:
        self.loop.forget(self.loop._woken.fileno())
        self.loop._woken.close()
        self.loop._wake_out.close()


class TransportIO:
    """One AMQP connection's socket and its proton server transport (a `compat.BrokerTransport`), driven
    through proton's C calls: a turn's read, write and flush make no Python wrapper calls."""

    __slots__ = ("address", "closed", "connection", "fd", "formats", "handshake", "impl", "loop", "mask",
                 "sock", "tick_at", "transport")
    PLAIN_SOCKET = True  # its output goes straight to `fd` (the C write may send it)

    def __init__(self, loop: Loop, sock: socket.socket, connection: Connection, transport: Transport,
                 preread: bytes) -> None:
        """`transport`: a new server transport for `connection`; `preread`: bytes already read for it."""
        self.loop = loop
        self.sock = sock
        self.fd = sock.fileno()
        self.connection = connection
        self.transport = transport
        self.impl = transport._impl
        self.address = int(_FFI.cast("uintptr_t", self.impl))
        self.formats = transport.transfer_formats
        transport.idle_timeout = 0
        self.transport.bind(connection)
        self.closed = False
        self.tick_at: Timer | None = None
        self.handshake: Timer | None = None  # the handshake timeout (sasl.py), cancelled with the connection
        loop.adopt(self)
        self.mask = READ
        loop.watch(self.fd, self, READ)
        if preread:
            self.transport.push(preread)

    def on_io(self, events: int) -> None:
        if events & WRITE:
            self._write()
        if events & ~WRITE:  # input, hang-up or error: reading tells which
            self._read()
        self.loop.touched.add(self)  # flushed at the end of the turn

    def _read(self) -> None:
        impl, recv = self.impl, self.sock.recv
        total = 0
        while total < MAX_READ:
            capacity = pn_transport_capacity(impl)
            if capacity <= 0:
                return
            try:
                chunk = recv(capacity)
            except BlockingIOError:
                return
            except OSError:
                pn_transport_close_tail(impl)
                return
            size = len(chunk)
            if not size:
                pn_transport_close_tail(impl)
                return
            frames = self.formats.feed(chunk)
            while frames:  # proton takes no more than its capacity: a frame start held back from the last
                # read, or a renumbered frame grown by a few bytes, may not fit at once
                pushed = pn_transport_push(impl, frames, len(frames))
                if pushed <= 0:  # its tail is closed: proton has recorded why
                    return
                frames = frames[pushed:]
            total += size
            if size < capacity:
                return

    def _write(self) -> None:
        impl = self.impl
        pending = pn_transport_pending(impl)
        if pending > 0:
            out = self.loop.out
            size = pn_transport_peek(impl, out, min(pending, MAX_WRITE))
            try:
                sent = self.sock.send(_FFI.buffer(out, size))
            except BlockingIOError:
                return  # the socket's buffer is full: the poll says when it takes more
            except OSError:
                pn_transport_close_head(impl)
                return
            pn_transport_pop(impl, sent)

    def flush(self) -> None:
        """At the end of a turn: write what the transport has, close it if it is done, then watch the socket
        for what this connection waits for."""
        if self.closed:
            return
        impl = self.impl
        # Idle-timeout heartbeats the peer asked for (proton says when the next is due, in ms); first: a
        # heartbeat due now leaves with this write. The broker sets no idle timeout of its own, so a peer
        # that asked for none has nothing to tick (and no clock to read).
        if pn_transport_get_remote_idle_timeout(impl):
            deadline = pn_transport_tick(impl, int(time.time() * 1000))
            if deadline and self.tick_at is None:
                self._schedule_tick(deadline / 1000)
        write_out = self.loop.write_out if self.PLAIN_SOCKET else None
        if write_out is not None:  # the same, in C
            capacity, pending = write_out(self.address, self.fd, self.loop.out_buffer, MAX_WRITE)
        else:
            self._write()
            capacity = pn_transport_capacity(impl)  # below zero is end of stream or an error
            pending = pn_transport_pending(impl)
        if capacity < 0 and pending <= 0:
            if pending == 0:  # input over, nothing to say: the peer is gone (see the module docstring)
                pn_transport_close_head(impl)
            if pn_transport_closed(impl):  # its TRANSPORT_CLOSED event closes the socket
                self.loop.touched.add(self)
                return
        self.watch((READ if capacity > 0 else 0) | (WRITE if pending > 0 else 0))

    def watch(self, mask: int) -> None:
        if mask != self.mask:
            self.mask = mask
            self.loop.watch(self.fd, self, mask)

    def _schedule_tick(self, deadline: float) -> None:
        def tick() -> None:
            self.tick_at = None
            self.loop.touched.add(self)

        self.tick_at = self.loop.schedule(max(0.0, deadline - time.time()), tick)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for timer in (self.tick_at, self.handshake):
            if timer is not None:  # its action holds this connection's objects: let go of them now
                timer.cancel()
        self.loop.forget(self.fd)
        self.loop.release(self)
        self.sock.close()
        self.transport.unbind()
