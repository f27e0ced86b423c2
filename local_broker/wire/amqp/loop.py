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
from proton import Connection, Event, ProtonException, Transport

log = logging.getLogger("local_broker.amqp")

READ = select.EPOLLIN | select.EPOLLRDHUP
WRITE = select.EPOLLOUT
MAX_READ = 64 * 1024
MAX_WAIT = 3600.0  # seconds: the longest single poll (epoll's timeout overflows near 1e9 s)
_LIB, _NULL = cproton_ffi.lib, cproton_ffi.ffi.NULL
_TRANSPORT_CLOSED = Event.TRANSPORT_CLOSED.number


class Channel(Protocol):
    """Something the loop watches a socket for."""

    def on_io(self, events: int) -> None: ...
    def close(self) -> None: ...


class Timer:
    __slots__ = ("action", "cancelled")

    def __init__(self, action: Callable[[], None]) -> None:
        self.action = action
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Loop:
    """See the module docstring. Everything but `wake` runs on the loop's thread."""

    def __init__(self, collector: Any, dispatch: Callable[[Any, int], None]) -> None:
        self.collector = collector  # every connection's events, read in bulk each turn
        self.dispatch = dispatch  # (C event, its type number): hands it to its handler
        self.on_turn_end: Callable[[], bool] = lambda: False  # True: the turn end made more work
        self.on_wake: Callable[[], None] = lambda: None
        self._epoll = select.epoll()
        self._channels: dict[int, Channel] = {}
        self._masks: dict[int, int] = {}
        self._timers: list[tuple[float, int, Timer]] = []
        self._ticket = itertools.count()
        self._by_transport: dict[Any, TransportIO] = {}
        self.touched: set[TransportIO] = set()
        self._unseen_input: set[int] = set()  # fds `readable` has reported for the next poll
        self._woken, self._wake_out = socket.socketpair()
        self._woken.setblocking(False)
        self._wake_out.setblocking(False)
        self.watch(self._woken.fileno(), _Waker(self), READ)
        self._running = False

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
        timer = Timer(action)
        heapq.heappush(self._timers, (time.monotonic() + delay, next(self._ticket), timer))
        return timer

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
        for fd, events in self._epoll.poll(timeout):
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
            if timer.cancelled:
                continue
            try:
                timer.action()
            except Exception:
                log.exception("error in a timer")

    def _settle_turn(self) -> None:
        """Steps 3 to 5 of the module docstring, repeated while they make new events."""
        for _ in range(100):
            self._dispatch()
            if self.on_turn_end():
                self._dispatch()
            touched, self.touched = self.touched, set()
            for io in touched:
                io.flush()
            if _LIB.pn_collector_peek(self.collector._impl) == _NULL:
                return

    def _dispatch(self) -> None:
        impl = self.collector._impl
        by_transport = self._by_transport
        touched = self.touched
        dispatch = self.dispatch
        event = _LIB.pn_collector_peek(impl)
        while event != _NULL:
            number = _LIB.pn_event_type(event)
            dispatch(event, number)
            transport = _LIB.pn_event_transport(event)
            if transport != _NULL:
                io = by_transport.get(transport)
                if io is not None:
                    touched.add(io)
                    if number == _TRANSPORT_CLOSED:
                        io.close()
            _LIB.pn_collector_pop(impl)
            event = _LIB.pn_collector_peek(impl)


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
    """One AMQP connection's socket and its proton server transport."""

    __slots__ = ("closed", "connection", "loop", "sock", "tick_at", "transport")

    def __init__(self, loop: Loop, sock: socket.socket, connection: Connection, transport: Transport,
                 preread: bytes) -> None:
        """`transport`: a new server transport for `connection`; `preread`: bytes already read for it."""
        self.loop = loop
        self.sock = sock
        self.connection = connection
        self.transport = transport
        transport.idle_timeout = 0
        self.transport.bind(connection)
        self.closed = False
        self.tick_at: Timer | None = None
        loop.adopt(self)
        loop.watch(sock.fileno(), self, READ)
        if preread:
            self.transport.push(preread)

    def on_io(self, events: int) -> None:
        if events & WRITE:
            self._write()
        if events & ~WRITE:  # input, hang-up or error: reading tells which
            self._read()
        self.loop.touched.add(self)  # flushed at the end of the turn

    def _read(self) -> None:
        transport = self.transport
        total = 0
        while total < MAX_READ:
            capacity = transport.capacity()
            if capacity <= 0:
                return
            try:
                chunk = self.sock.recv(capacity)
            except BlockingIOError:
                return
            except OSError:
                transport.close_tail()
                return
            if not chunk:
                transport.close_tail()
                return
            transport.push(chunk)
            total += len(chunk)
            if len(chunk) < capacity:
                return

    def _write(self) -> None:
        transport = self.transport
        pending = transport.pending()
        if pending > 0:
            try:
                transport.pop(self.sock.send(transport.peek(pending)))
            except BlockingIOError:
                pass  # the socket's buffer is full: the poll says when it takes more
            except OSError:
                transport.close_head()

    def flush(self) -> None:
        """At the end of a turn: write what the transport has, close it if it is done, then watch the socket
        for what this connection waits for."""
        if self.closed:
            return
        transport = self.transport
        impl = transport._impl
        try:
            self._schedule_tick(impl)  # first: a heartbeat due now leaves with this write
            self._write()
        except ProtonException:
            pass
        # proton's C calls (its Python wrappers raise for errors): below zero is end of stream or an error
        capacity = max(_LIB.pn_transport_capacity(impl), -1)
        pending = max(_LIB.pn_transport_pending(impl), -1)
        if capacity < 0 and pending <= 0:
            if pending == 0:  # input over, nothing to say: the peer is gone (see the module docstring)
                transport.close_head()
            if transport.closed:  # its TRANSPORT_CLOSED event closes the socket
                self.loop.touched.add(self)
                return
        mask = (READ if capacity > 0 else 0) | (WRITE if pending > 0 else 0)
        self.loop.watch(self.sock.fileno(), self, mask)

    def _schedule_tick(self, impl: Any) -> None:
        """Idle-timeout heartbeats the peer asked for (proton says when the next is due, in ms)."""
        deadline = _LIB.pn_transport_tick(impl, int(time.time() * 1000)) / 1000
        if not deadline or self.tick_at is not None:
            return

        def tick() -> None:
            self.tick_at = None
            self.loop.touched.add(self)

        self.tick_at = self.loop.schedule(max(0.0, deadline - time.time()), tick)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.tick_at is not None:
            self.tick_at.cancel()
        self.loop.forget(self.sock.fileno())
        self.loop.release(self)
        self.sock.close()
        self.transport.unbind()
