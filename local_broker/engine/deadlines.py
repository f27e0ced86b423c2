"""Time: everything the clock decides. Message lock expiry, session lock expiry, time-to-live expiry (of
messages and of lazy copies), scheduled activation, dedup-window pruning and auto-delete-on-idle, each
kept in a heap of deadlines; `next_deadline()` and `tick()`.

A mixin of `Namespace` (namespace.py): it shares the namespace's maps, heaps, journal and clock.
"""

from __future__ import annotations

import heapq

from local_broker.engine.clock import seconds
from local_broker.engine.entities import (
    Queue,
    Topic,
)
from local_broker.engine.filtering import still_lazy
from local_broker.engine.message import (
    Message,
)
from local_broker.engine.placement import ACTIVE, MAIN, TTL_EXPIRED


class Deadlines:
    """tick, next_deadline and the deadlines they serve."""

    def _watch_expiry(self, m: Message) -> None:
        """Put a message (in a main sub-queue, with an expiry a clock can reach: under placement.UNREACHABLE)
        in the TTL heap."""
        expiring = self._expiring
        if expiring is not None and expiring[0] == m.expires_at:
            m.expires_at = expiring[0]  # one float for the group, not one per copy
            expiring[2].append(m)
        else:
            self._expiring = expiring = (m.expires_at, next(self._ticket), [m])
            heapq.heappush(self._ttl_heap, expiring)

    def _expire(self, m: Message, now: float) -> None:
        entity = m.entity.entity
        if entity.props.dead_lettering_on_message_expiration:
            self._dead_letter(m, *TTL_EXPIRED, now)
        else:
            self._remove(m)

    def _activate(self, target: Queue | Topic, m: Message, now: float) -> None:
        """A scheduled message's time came: appended as if enqueued now, with a new sequence number."""
        del target.scheduled[m.sequence_number]
        self._detach(m)
        m.state = ACTIVE
        seq = target.next_sequence_number(m.partition_id)
        self._journal.counter(target)
        m.sequence_number = m.enqueued_sequence_number = seq
        m.enqueued_time = now
        if isinstance(target, Queue):
            self._enqueue(target, m, now, seconds(target.props.default_message_time_to_live))
        else:
            self._publish(target, m, now)

    def _purge_stale(self) -> None:
        """Drop heap tops that mean nothing any more (settled, renewed, cancelled): exact deadlines."""
        heap = self._lock_heap
        while heap:
            until, _, locked = heap[0]
            live = 0  # the first lock still standing (a loop: no generator per purge, most stop at once)
            for m in locked:
                if m.lock_token is not None and m.locked_until == until:
                    break
                live += 1
            if live < len(locked):
                del locked[:live]  # settled one by one, a batch's lock entry is scanned once, not per purge
                break
            heapq.heappop(heap)
        sheap = self._session_heap
        while sheap and not (
            sheap[0][2].session_locks.get(sheap[0][3].session_id) is sheap[0][3]
            and sheap[0][3].locked_until == sheap[0][0]
        ):
            heapq.heappop(sheap)
        lheap = self._lazy_heap
        while lheap and next(still_lazy(lheap[0][2], lheap[0][3]), None) is None:
            heapq.heappop(lheap)
        theap = self._ttl_heap
        while theap:
            waiting = theap[0][2]
            live = 0  # the first message still waiting to expire (a loop: no generator per purge)
            for m in waiting:
                if m.entity is not None and m.state is ACTIVE:
                    break
                live += 1
            if live < len(waiting):
                del waiting[:live]  # once: repeated purges stay linear
                break
            self._pop_expiring()
        scheap = self._schedule_heap
        while scheap and scheap[0][2].scheduled.get(scheap[0][3].sequence_number) is not scheap[0][3]:
            heapq.heappop(scheap)

    def _pop_expiring(self) -> list[Message]:
        entry = heapq.heappop(self._ttl_heap)
        if entry is self._expiring:
            self._expiring = None  # nothing may join an entry that left the heap
        return entry[2]

    def next_deadline(self) -> float | None:
        """When `tick()` next has something to do (epoch seconds), or None."""
        self._purge_stale()
        soonest = None
        for heap in (self._lock_heap, self._session_heap, self._ttl_heap, self._lazy_heap,
                     self._schedule_heap, self._dedup_heap, self._idle_heap):
            if heap and (soonest is None or heap[0][0] < soonest):
                soonest = heap[0][0]
        return soonest

    def tick(self) -> None:
        """Process everything due at the clock's now."""
        now = self.clock.now()
        heap = self._lock_heap
        while heap and heap[0][0] <= now:
            for m in heapq.heappop(heap)[2]:  # whichever lock a message holds now: expired if its time passed
                if m.lock_token is not None and m.entity is not None and m.locked_until <= now:  # type: ignore[operator]
                    self._return(m, True, now)
        sheap = self._session_heap
        while sheap and sheap[0][0] <= now:
            _, _, sq, lock = heapq.heappop(sheap)
            if sq.session_locks.get(lock.session_id) is lock and lock.locked_until <= now:
                self._expire_session(sq, lock, now)
        lheap = self._lazy_heap
        while lheap and lheap[0][0] <= now:
            _, _, m, targets = heapq.heappop(lheap)
            self._expire_lazy(m, targets, now)
        theap = self._ttl_heap
        while theap and theap[0][0] <= now:
            for m in self._pop_expiring():
                sq = m.entity
                if (
                    sq is not None
                    and sq.kind is MAIN
                    and m.lock_token is None
                    and m.state is ACTIVE
                    and m.expires_at <= now
                ):
                    self._expire(m, now)
        scheap = self._schedule_heap
        while scheap and scheap[0][0] <= now:
            _, _, target, m = heapq.heappop(scheap)
            if target.scheduled.get(m.sequence_number) is m:
                self._activate(target, m, now)
        dheap = self._dedup_heap
        while dheap and dheap[0][0] <= now:
            _, _, target = heapq.heappop(dheap)
            window = target.props.duplicate_detection_history_time_window.total_seconds()
            cutoff = target.dedup.prune(now, window)
            if cutoff is not None:
                self._journal.dedup_pruned(target.key, cutoff)
            following = target.dedup.next_expiry(window)
            if following is not None:
                heapq.heappush(dheap, (following, next(self._ticket), target))
        self._delete_idle(now)
        self._flush_available()
