"""Sessions: accepting (named or next available), renewing, releasing and expiring a session lock, and
session state.

A mixin of `Namespace` (namespace.py): it shares the namespace's maps, heaps, journal and clock.
"""

from __future__ import annotations

import heapq
from typing import Any

from local_broker.engine.entities import (
    SessionLock,
    SubQueue,
)
from local_broker.engine.errors import (
    NotAllowedError,
    OperationTimeoutError,
    SessionCannotBeLockedError,
    SessionLockLostError,
)
from local_broker.engine.placement import MAIN

NON_SESSION_RECEIVER = (
    "It is not possible for an entity that requires sessions to create a non-sessionful message receiver."
)
SESSION_RECEIVER = (
    "It is not possible for an entity that does not require sessions to create a sessionful message receiver."
)


class Sessions:
    """The session operations of docs/engine-api.md section 7."""

    def _session_queue(self, path: str) -> SubQueue:
        sq = self._receivable(path)
        if sq.sessions is None or sq.kind is not MAIN:
            raise NotAllowedError(SESSION_RECEIVER)
        return sq

    def accept_session(self, path: str, session_id: str | None, owner: Any) -> SessionLock:
        """Lock a named session, or the next available one (None); see docs/engine-api.md section 7."""
        sq = self._session_queue(path)
        now = self.clock.now()
        sq.entity.accessed = now
        locks = sq.session_locks
        if session_id is None:
            session_id = self._next_available_session(sq, now)
        else:
            current = locks.get(session_id)
            if current is not None and current.locked_until <= now:
                self._expire_session(sq, current, now)
                current = None
            if current is not None:
                if current.owner != owner:
                    raise SessionCannotBeLockedError(
                        f"The requested session '{session_id}' cannot be accepted. "
                        "It may be locked by another receiver."
                    )
                self._renew(sq, current, now)
                return current
        lock = SessionLock(session_id, owner, now + sq.entity.props.lock_duration.total_seconds())
        locks[session_id] = lock
        sq.available_sessions.pop(session_id, None)
        sq.session(session_id)
        heapq.heappush(self._session_heap, (lock.locked_until, next(self._ticket), sq, lock))
        self._flush_available()
        return lock

    def _next_available_session(self, sq: SubQueue, now: float) -> str:
        sessions = sq.sessions
        assert sessions is not None
        for sid in list(sq.available_sessions):
            current = sq.session_locks.get(sid)
            if current is not None and current.locked_until <= now:
                self._expire_session(sq, current, now)
                current = None
            s = sessions.get(sid)
            if current is None and s is not None and s.ready.has_ready():
                return sid
            del sq.available_sessions[sid]
        raise OperationTimeoutError(
            f"The operation did not complete within the allocated time: no unlocked session with messages is "
            f"available on '{sq.path}'."
        )

    def _renew(self, sq: SubQueue, lock: SessionLock, now: float) -> float:
        until = now + sq.entity.props.lock_duration.total_seconds()
        lock.locked_until = until
        heapq.heappush(self._session_heap, (until, next(self._ticket), sq, lock))
        s = sq.sessions.get(lock.session_id) if sq.sessions is not None else None
        if s is not None:
            for m in s.locked.values():
                m.locked_until = until
                self._journal.touch(m)
        return until

    def renew_session_lock(self, path: str, session_id: str, owner: Any = None) -> float:
        sq = self._session_queue(path)
        now = self.clock.now()
        lock = sq.session_locks.get(session_id)
        if lock is None or lock.locked_until <= now or (owner is not None and lock.owner != owner):
            raise SessionLockLostError()
        return self._renew(sq, lock, now)

    def release_session(self, path: str, session_id: str, owner: Any) -> None:
        """The session link closed: unlock the session; its locked messages return without an increment."""
        sq = self._sub_queue(path)
        lock = sq.session_locks.get(session_id)
        if lock is None or lock.owner != owner:
            return
        self._unlock_session(sq, lock, False, self.clock.now())
        self._flush_available()

    def _expire_session(self, sq: SubQueue, lock: SessionLock, now: float) -> None:
        self._unlock_session(sq, lock, True, now)
        for callback in self._session_lost_callbacks:
            callback(lock.owner)

    def _unlock_session(self, sq: SubQueue, lock: SessionLock, increment: bool, now: float) -> None:
        del sq.session_locks[lock.session_id]
        assert sq.sessions is not None
        s = sq.sessions.get(lock.session_id)
        if s is None:
            return
        for m in list(s.locked.values()):
            self._return(m, increment, now)
        if s.ready.has_ready():
            sq.available_sessions[lock.session_id] = None
            self._available[sq] = None
        sq.drop_session_if_idle(s)

    def get_session_state(self, path: str, session_id: str) -> bytes | None:
        sq = self._session_queue(path)
        assert sq.sessions is not None
        s = sq.sessions.get(session_id)
        return None if s is None else s.state

    def set_session_state(self, path: str, session_id: str, state: bytes | None) -> None:
        sq = self._session_queue(path)
        s = sq.session(session_id)
        old = s.state
        sq.resize((len(state) if state else 0) - (len(old) if old else 0))
        s.state = bytes(state) if state is not None else None
        self._journal.session_state(sq.entity.key, session_id, s.state)
        sq.drop_session_if_idle(s)

    def list_sessions(self, path: str, skip: int = 0, top: int = 100) -> list[str]:
        """Sessions that hold messages or state."""
        sq = self._session_queue(path)
        assert sq.sessions is not None
        ids = [sid for sid, s in sq.sessions.items() if s.message_count or s.state is not None]
        return ids[skip : skip + top]
