"""Receiving: peek-lock and receive-and-delete, peek (browse), deferred messages by sequence number.

A mixin of `Namespace` (namespace.py): it shares the namespace's maps, heaps, journal and clock.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections.abc import Iterable
from operator import attrgetter
from typing import Any

from local_broker.engine.entities import (
    SessionLock,
    SubQueue,
)
from local_broker.engine.errors import (
    MessageNotFoundError,
    NotAllowedError,
    SessionLockLostError,
)
from local_broker.engine.message import (
    Message,
    ReceiveMode,
)
from local_broker.engine.placement import MAIN
from local_broker.engine.sessions import NON_SESSION_RECEIVER, SESSION_RECEIVER


class Receiving:
    """receive, peek and receive_deferred."""

    def _held(self, sq: SubQueue, lock: SessionLock, now: float) -> Any:
        current = sq.session_locks.get(lock.session_id)
        if current is not lock or lock.locked_until <= now:
            raise SessionLockLostError()
        return sq.session(lock.session_id)

    def receive(
        self,
        path: str,
        max_count: int,
        mode: ReceiveMode = ReceiveMode.PEEK_LOCK,
        *,
        session: SessionLock | None = None,
    ) -> list[Message]:
        """Up to `max_count` messages available now (never blocks)."""
        sq = self._receivable(path)
        now = self.clock.now()
        entity = sq.entity
        entity.accessed = now
        s = None
        if sq.sessions is not None and sq.kind is MAIN:
            if session is None:
                raise NotAllowedError(NON_SESSION_RECEIVER)
            s = self._held(sq, session, now)
            ready = s.ready
            locked_until = session.locked_until
        else:
            if session is not None:
                raise NotAllowedError(SESSION_RECEIVER)
            ready = sq.ready
            locked_until = now + entity.props.lock_duration.total_seconds()
        out: list[Message] = []
        peek_lock = mode == ReceiveMode.PEEK_LOCK
        main = sq.kind is MAIN
        locked = sq.locked
        session_locked = s.locked if s is not None else None
        touch = self._journal.touch if self._store.journaled else None
        pop, fresh, returned = ready.pop, ready.fresh, ready.returned
        lazy, own_copy = sq.lazy, self._own_copy
        new_token = self._tokens.new
        expiring: list[Message] = []
        tail = sq.tail
        while len(out) < max_count:
            m = pop() if fresh or returned else None
            if m is None:
                if tail is not None and tail.count and self._page_in(sq, max_count - len(out)):
                    continue
                if not lazy:
                    break
                m = own_copy(sq, lazy.popleft())
            if main and m.expires_at <= now:
                self._expire(m, now)
                continue
            if peek_lock:
                token = new_token()
                m.lock_token = token
                m.locked_until = locked_until
                locked[token.int] = m
                if session_locked is None:
                    expiring.append(m)
                else:
                    session_locked[token.int] = m
                if touch is not None:
                    touch(m)
            else:
                self._remove(m)
            out.append(m)
        if expiring:
            heapq.heappush(self._lock_heap, (locked_until, next(self._ticket), expiring))
        entity.delivered += len(out)
        if not peek_lock:
            entity.completed += len(out)
        if self._available:
            self._flush_available()
        return out

    def peek(
        self, path: str, from_sequence_number: int, max_count: int, session_id: str | None = None
    ) -> list[Message]:
        """Messages from `from_sequence_number` on, without locking (locked, deferred, scheduled included)."""
        sq = self._sub_queue(path)
        sq.entity.accessed = self.clock.now()
        found = sq.browse.peek(from_sequence_number, max_count, session_id)
        tail = sq.tail
        if tail is not None and tail.count:  # lazy copies are newer than the tail too
            found = self._peek_tail(sq, found, from_sequence_number, max_count)
        lazy = sq.lazy
        if lazy and len(found) < max_count:  # lazy copies come after every message with a record
            start = bisect.bisect_left(lazy, from_sequence_number, key=attrgetter("sequence_number"))
            ordinal, ttl = sq.entity.ordinal, sq.lazy_ttl
            found += [
                m.copy_as(m.uid + ordinal, ttl)  # what the copy's record would hold now
                for m in itertools.islice(lazy, start, start + max_count - len(found))
            ]
        if found and found[0].partition_id is not None:  # a partitioned entity: what one partition has
            first = found[0].partition_id
            found = [m for m in found if m.partition_id == first]
        return found

    def receive_deferred(
        self,
        path: str,
        sequence_numbers: Iterable[int],
        mode: ReceiveMode = ReceiveMode.PEEK_LOCK,
        session_id: str | None = None,
    ) -> list[Message]:
        """Deferred messages by number; a number not deferred (or locked) -> MessageNotFoundError."""
        sq = self._receivable(path)
        now = self.clock.now()
        sq.entity.accessed = now
        in_session = sq.sessions is not None and sq.kind is MAIN
        lock = None
        if in_session:
            if session_id is None:
                raise NotAllowedError(NON_SESSION_RECEIVER)
            lock = sq.session_locks.get(session_id)
            if lock is None or lock.locked_until <= now:
                raise SessionLockLostError()
        found: list[Message] = []
        for seq in sequence_numbers:
            m = next(
                (
                    x
                    for x in sq.deferred.get(seq, ())
                    if x.lock_token is None
                    and x not in found
                    and (session_id is None or x.session_id == session_id)
                ),
                None,
            )
            if m is None:
                raise MessageNotFoundError(
                    f"Failed to lock one or more specified messages. The message with sequence number {seq} "
                    "was not found or is not deferred."
                )
            found.append(m)
        sq.entity.delivered += len(found)
        if mode != ReceiveMode.PEEK_LOCK:
            sq.entity.completed += len(found)
            for m in found:
                self._remove(m)
            return found
        locked_until = (
            lock.locked_until if lock is not None else now + sq.entity.props.lock_duration.total_seconds()
        )
        for m in found:
            token = self._tokens.new()
            m.lock_token = token
            m.locked_until = locked_until
            sq.locked[token.int] = m
            if lock is not None:
                sq.session(session_id).locked[token.int] = m  # type: ignore[arg-type]
            else:
                heapq.heappush(self._lock_heap, (locked_until, next(self._ticket), [m]))
            self._journal.touch(m)
        return found
