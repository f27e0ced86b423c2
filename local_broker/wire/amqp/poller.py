"""The reactor's socket poll on epoll: no ceiling on file descriptor numbers, no cost per idle socket.

proton's `IO.Selector` polls with `select()`, which fails for good once a socket's fd reaches 1024
(`ValueError: filedescriptor out of range`: the reactor thread dies), and walks every selectable on each
update to find the next deadline. `EpollSelector` keeps proton's Selector interface (the reactor's
IOHandler calls add/update/remove/select) on `select.epoll`:
- a selectable is registered only while it wants to read or write: a socket nobody reads is not watched,
  so a peer's hang-up on it cannot make every poll return at once;
- only selectables with a deadline are scanned for expiry;
- a connection whose input has ended (the peer closed, or sent bytes proton refused) and that has nothing
  left to write once the turn is over is closed: proton would otherwise keep its socket open, unwatched,
  for ever (CLOSE-WAIT), one more leaked fd per broken peer.
"""

from __future__ import annotations

import select
import time
from typing import Any

from proton import ProtonException

_READ = select.EPOLLIN | select.EPOLLRDHUP
_WRITE = select.EPOLLOUT
_FAILED = select.EPOLLHUP | select.EPOLLERR | select.EPOLLRDHUP


class EpollSelector:
    """proton's `IO.Selector` (same methods and `_writing` set) on epoll."""

    def __init__(self) -> None:
        self._poll = select.epoll()
        self._selectables: set[Any] = set()
        self._writing: set[Any] = set()
        self._timed: set[Any] = set()
        self._stalled: set[Any] = set()  # connections neither reading nor writing
        self._by_fd: dict[int, Any] = {}
        self._watched: dict[Any, tuple[int, int]] = {}  # selectable -> (fd, event mask) registered

    @property
    def selectables(self) -> int:
        return len(self._selectables)

    def add(self, selectable: Any) -> None:
        self._selectables.add(selectable)
        self.update(selectable)

    def update(self, selectable: Any) -> None:
        if selectable not in self._selectables:
            return
        mask = (_READ if selectable.reading else 0) | (_WRITE if selectable.writing else 0)
        if selectable.writing:
            self._writing.add(selectable)
        else:
            self._writing.discard(selectable)
        if selectable.deadline:
            self._timed.add(selectable)
        else:
            self._timed.discard(selectable)
        if not mask and getattr(selectable, "_transport", None) is not None:
            self._stalled.add(selectable)
        else:
            self._stalled.discard(selectable)
        watched = self._watched.get(selectable)
        if watched is not None and watched[1] == mask:
            return
        if watched is not None and not mask:
            self._unwatch(selectable)
            return
        if watched is not None:
            self._poll.modify(watched[0], mask)
            self._watched[selectable] = (watched[0], mask)
        elif mask:
            fd = selectable.fileno()
            self._poll.register(fd, mask)
            self._by_fd[fd] = selectable
            self._watched[selectable] = (fd, mask)

    def _unwatch(self, selectable: Any) -> None:
        fd, _ = self._watched.pop(selectable)
        if self._by_fd.get(fd) is not selectable:  # closed before removal; its fd number is reused
            return
        del self._by_fd[fd]
        try:
            self._poll.unregister(fd)
        except (OSError, ValueError):  # the socket was closed first: the kernel dropped it already
            pass

    def remove(self, selectable: Any) -> None:
        self._selectables.discard(selectable)
        self._writing.discard(selectable)
        self._timed.discard(selectable)
        self._stalled.discard(selectable)
        if selectable in self._watched:
            self._unwatch(selectable)

    def select(self, timeout: float | None) -> tuple[list[Any], list[Any], list[Any]]:
        """Selectables ready to read, to write, and past their deadline (proton's contract)."""
        if self._stalled and self._close_dead():
            return [], [], []  # proton has the closed transports' events to hand out first
        deadline = min((s.deadline for s in self._timed), default=None)
        wait = timeout
        if deadline is not None:
            until = max(0.0, deadline - time.time())
            wait = until if wait is None else min(wait, until)
        events = self._poll.poll(-1 if wait is None else wait)
        readable, writable = [], []
        by_fd = self._by_fd
        for fd, event in events:
            selectable = by_fd.get(fd)
            if selectable is None:
                continue
            if event & _READ or (event & _FAILED and selectable.reading):
                readable.append(selectable)
            if event & _WRITE or (event & _FAILED and selectable.writing):
                writable.append(selectable)
        expired = []
        if self._timed:
            now = time.time()
            expired = [s for s in self._timed if s.deadline and now > s.deadline]
        return readable, writable, expired

    def _close_dead(self) -> bool:
        """Close the output of transports whose input ended with nothing left to write (see module doc).
        Runs when a turn is over: every handler had its chance to answer (e.g. a close frame)."""
        closed = False
        for selectable in list(self._stalled):
            transport = getattr(selectable, "_transport", None)
            self._stalled.discard(selectable)
            if transport is None or selectable.reading or selectable.writing:
                continue
            try:
                dead = transport.capacity() < 0 and transport.pending() == 0
            except ProtonException:  # the transport failed outright: its close is under way already
                continue
            if dead:
                transport.close_head()
                closed = True
        return closed

    def close(self) -> None:
        self._poll.close()
