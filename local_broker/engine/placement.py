"""Where a message sits: placing it in a sub-queue, taking it out, moving it to a dead-letter queue.

A mixin of `Namespace` (namespace.py): it shares the namespace's maps, heaps, journal and clock.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from local_broker.engine.entities import (
    WINDOW,
    Queue,
    SubQueue,
    SubQueueKind,
    Subscription,
)
from local_broker.engine.message import (
    DEAD_LETTER_ERROR_DESCRIPTION,
    DEAD_LETTER_REASON,
    Message,
    MessageState,
)

ACTIVE = MessageState.ACTIVE
DEFERRED = MessageState.DEFERRED
SCHEDULED = MessageState.SCHEDULED
MAIN = SubQueueKind.MAIN
INF = math.inf
# The latest time a clock can show (datetime.max, UTC): an expiry after it is never reached, so it is not
# watched. An entity's default time to live (TimeSpan.MaxValue, ~29,000 years) puts every message there,
# which the TTL heap (and a topic message's lazy-copy heap entry) would otherwise hold until purged.
UNREACHABLE = datetime.max.replace(tzinfo=UTC).timestamp()

# Broker-written dead-letter reasons and descriptions (semantics.md section 15).
TTL_EXPIRED = ("TTLExpiredException", "The message expired and was dead-lettered.")
MAX_DELIVERY = ("MaxDeliveryCountExceeded", "Message couldn't be consumed after maximum delivery attempts.")
SESSION_ID_NULL = (
    "Session id is null.",
    "Session enabled entity doesn't allow a message whose session identifier is null.",
)
MAX_HOPS = (
    "MaxTransferHopCountExceeded",
    "The maximum number of allowed hops when forwarding between queues exceeded the limit. "
    "This value is set to 4.",
)


def _set_dead_letter_properties(m: Message, reason: str | None, description: str | None) -> None:
    changes = {}
    if reason is not None:
        changes[DEAD_LETTER_REASON] = reason
    if description is not None:
        changes[DEAD_LETTER_ERROR_DESCRIPTION] = description
    if changes:
        m.with_application_properties(changes)


class Placement:
    """A sub-queue's bookkeeping of its messages (ready, deferred, locked, sessions, sizes, journal)."""

    def _place(self, sq: SubQueue, m: Message) -> None:
        """Put a message into a sub-queue in the place its state says (ready, deferred, scheduled)."""
        if not m.uid:
            m.uid = next(self._uids)
        m.entity = sq
        size = m.size
        sq.size += size
        total = sq.total
        total.size += size
        total.usage.size += size
        state = m.state
        tail = sq.tail
        if (
            tail is not None
            and state is ACTIVE
            and m.lock_token is None
            and (tail.count or len(sq.messages) >= WINDOW)
        ):
            self._to_tail(sq, m)
            self._journal.put(m)
            return
        sq.messages[m.uid] = m
        sq.browse.add(m)
        sessions = sq.sessions
        if sessions is not None and sq.kind is MAIN:
            s = sessions.get(m.session_id)  # type: ignore[arg-type]
            if s is None:
                s = sq.session(m.session_id)  # type: ignore[arg-type]
            s.message_count += 1
            if state is ACTIVE and m.lock_token is None:
                s.ready.push(m)
                if m.session_id not in sq.session_locks:
                    sq.available_sessions[m.session_id] = None  # type: ignore[index]
                    self._available[sq] = None
        elif state is ACTIVE and m.lock_token is None:
            sq.ready.fresh.append(m)  # ReadyQueue.push, without the call (once per topic copy)
            self._available[sq] = None
        if state is DEFERRED:
            sq.deferred.setdefault(m.sequence_number, []).append(m)
        elif state is ACTIVE and m.expires_at < UNREACHABLE and sq.kind is MAIN:
            self._watch_expiry(m)
        self._journal.put(m)

    def _detach(self, m: Message) -> None:
        """Take a message out of its sub-queue's bookkeeping (it is about to move or vanish)."""
        sq: SubQueue = m.entity
        del sq.messages[m.uid]
        size = m.size
        sq.size -= size
        total = sq.total
        total.size -= size
        total.usage.size -= size
        token = m.lock_token
        if token is not None:
            sq.locked.pop(token.int, None)
            m.lock_token = None
            m.locked_until = None
        if m.state is DEFERRED:
            same = sq.deferred.get(m.sequence_number)
            if same is not None:
                if m in same:
                    same.remove(m)
                if not same:
                    del sq.deferred[m.sequence_number]
        if sq.sessions is not None and sq.kind is MAIN:
            s = sq.sessions.get(m.session_id)  # type: ignore[arg-type]
            if s is not None:
                s.message_count -= 1
                if token is not None:
                    s.locked.pop(token.int, None)
                sq.drop_session_if_idle(s)
        m.entity = None

    def _remove(self, m: Message) -> None:
        self._detach(m)
        self._journal.delete(m)

    def _dead_letter_into(
        self, sq: SubQueue, m: Message, reason: str | None, description: str | None
    ) -> None:
        _set_dead_letter_properties(m, reason, description)
        sq.entity.dead_lettered += 1
        m.state = ACTIVE
        m.expires_at = INF
        self._place(sq, m)

    def _to_dead_letter(
        self,
        entity: Queue | Subscription,
        m: Message,
        reason: str | None,
        description: str | None,
        now: float,
    ) -> None:
        """Dead-letter a message that is not in any sub-queue (yet) on `entity`."""
        forward = entity.props.forward_dead_lettered_messages_to
        if forward:
            _set_dead_letter_properties(m, reason, description)
            entity.dead_lettered += 1
            m.dead_letter_source = entity.path
            m.state = ACTIVE
            self._transfer(entity, m, forward, now)
            return
        self._dead_letter_into(entity.dlq, m, reason, description)

    def _dead_letter(self, m: Message, reason: str | None, description: str | None, now: float) -> None:
        entity = m.entity.entity
        self._detach(m)
        self._to_dead_letter(entity, m, reason, description, now)
