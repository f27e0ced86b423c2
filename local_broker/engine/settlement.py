"""Settlement of locked messages: complete, abandon, release, defer, dead-letter, renew; and what unlocking a
message does (abandon, release, lock expiry, a session's end): its delivery count, dead-lettering at the
maximum, expiry, and its place back in the ready order.

A mixin of `Namespace` (namespace.py): it shares the namespace's maps, heaps, journal and clock.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Iterable
from typing import Any

from local_broker.engine.entities import (
    SubQueue,
)
from local_broker.engine.errors import (
    MessageLockLostError,
    NotAllowedError,
    SessionLockLostError,
)
from local_broker.engine.message import (
    Message,
)
from local_broker.engine.placement import DEFERRED, MAIN, MAX_DELIVERY, UNREACHABLE


class Settlement:
    """Operations on messages by lock token."""

    def _locked(self, path: str, lock_tokens: Iterable[uuid.UUID], session_id: str | None) -> list[Message]:
        sq = self._sub_queue(path)
        now = self.clock.now()
        if session_id is not None and sq.sessions is not None and sq.kind is MAIN:
            lock = sq.session_locks.get(session_id)
            if lock is None or lock.locked_until <= now:
                raise SessionLockLostError()
        locked = sq.locked
        out = []
        for token in lock_tokens:
            m = locked.get(token.int) if token is not None else None
            if m is None or m.locked_until <= now:  # type: ignore[operator]
                raise MessageLockLostError()
            out.append(m)
        sq.entity.accessed = now
        return out

    def locked_message(self, path: str, lock_token: uuid.UUID) -> Message:
        """The message `lock_token` locks on `path` (MessageLockLostError when the lock is gone): a REST
        lock URL names the message too, and must name this one."""
        return self._locked(path, [lock_token], None)[0]

    def _modify(self, m: Message, properties_to_modify: dict[str, Any] | None) -> None:
        if properties_to_modify:
            m.with_application_properties(properties_to_modify)
            self._journal.put(m)

    def complete(self, path: str, lock_tokens: Iterable[uuid.UUID], *, session_id: str | None = None) -> None:
        messages = self._locked(path, lock_tokens, session_id)
        if messages:
            messages[0].entity.entity.completed += len(messages)  # all from the sub-queue of `path`
        for m in messages:
            self._remove(m)

    def abandon(
        self,
        path: str,
        lock_tokens: Iterable[uuid.UUID],
        properties_to_modify: dict[str, Any] | None = None,
        *,
        session_id: str | None = None,
    ) -> None:
        now = self.clock.now()
        messages = self._locked(path, lock_tokens, session_id)
        if messages:
            messages[0].entity.entity.abandoned += len(messages)
        for m in messages:
            self._modify(m, properties_to_modify)
            self._return(m, True, now)
        self._flush_available()

    def release(self, path: str, lock_tokens: Iterable[uuid.UUID]) -> None:
        """AMQP `released`: unlock without raising the delivery count; unknown tokens are ignored."""
        sq = self._sub_queue(path)
        now = self.clock.now()
        for token in lock_tokens:
            m = sq.locked.get(token.int) if token is not None else None
            if m is not None:
                self._return(m, False, now)
        self._flush_available()

    def defer(
        self,
        path: str,
        lock_tokens: Iterable[uuid.UUID],
        properties_to_modify: dict[str, Any] | None = None,
        *,
        session_id: str | None = None,
    ) -> None:
        for m in self._locked(path, lock_tokens, session_id):
            sq: SubQueue = m.entity
            key = m.lock_token.int  # type: ignore[union-attr]
            sq.locked.pop(key, None)
            if sq.sessions is not None and sq.kind is MAIN:
                sq.session(m.session_id).locked.pop(key, None)  # type: ignore[arg-type]
            m.lock_token = None
            m.locked_until = None
            if m.state is not DEFERRED:
                m.state = DEFERRED
                sq.deferred.setdefault(m.sequence_number, []).append(m)
            self._journal.touch(m)
            self._modify(m, properties_to_modify)

    def dead_letter(
        self,
        path: str,
        lock_tokens: Iterable[uuid.UUID],
        reason: str | None = None,
        description: str | None = None,
        properties_to_modify: dict[str, Any] | None = None,
        *,
        session_id: str | None = None,
    ) -> None:
        now = self.clock.now()
        messages = self._locked(path, lock_tokens, session_id)
        for m in messages:
            if m.entity.kind is not MAIN:
                raise NotAllowedError("A message in a dead-letter queue cannot be dead-lettered again.")
        for m in messages:
            self._modify(m, properties_to_modify)
            self._dead_letter(m, reason, description, now)
        self._flush_available()

    def renew_lock(self, path: str, lock_tokens: Iterable[uuid.UUID]) -> list[float]:
        messages = self._locked(path, lock_tokens, None)
        now = self.clock.now()
        out = []
        for m in messages:
            sq: SubQueue = m.entity
            if sq.sessions is not None and sq.kind is MAIN:
                raise NotAllowedError(
                    "Renewing message lock is an invalid operation when working with sessions; renew the "
                    "session lock instead."
                )
            until = now + sq.entity.props.lock_duration.total_seconds()
            m.locked_until = until
            heapq.heappush(self._lock_heap, (until, next(self._ticket), [m]))
            self._journal.touch(m)
            out.append(until)
        return out

    def _return(self, m: Message, increment: bool, now: float) -> None:
        """Unlock a message (abandon, lock expiry, release) and make it receivable again."""
        sq: SubQueue = m.entity
        token = m.lock_token
        if token is not None:
            sq.locked.pop(token.int, None)
            if sq.sessions is not None and sq.kind is MAIN:
                s = sq.sessions.get(m.session_id)  # type: ignore[arg-type]
                if s is not None:
                    s.locked.pop(token.int, None)
        m.lock_token = None
        m.locked_until = None
        if increment:
            m.delivery_count += 1
            if sq.kind is MAIN and m.delivery_count >= sq.entity.props.max_delivery_count:
                self._dead_letter(m, *MAX_DELIVERY, now)
                return
        self._journal.touch(m)
        if m.state is DEFERRED:
            return
        if sq.kind is MAIN and m.expires_at <= now:
            self._expire(m, now)
            return
        if sq.kind is MAIN and m.expires_at < UNREACHABLE:
            self._watch_expiry(m)  # a former lazy copy was not watched while it was locked
        if sq.sessions is not None and sq.kind is MAIN:
            sid: str = m.session_id  # type: ignore[assignment]
            sq.session(sid).ready.push_returned(m)
            if sid not in sq.session_locks:
                sq.available_sessions[sid] = None
                self._available[sq] = None
        else:
            sq.ready.push_returned(m)
            self._available[sq] = None
