"""Paging: a queue's or subscription's backlog kept in the store instead of memory.

With a store that pages (SQLite), the main sub-queue of a queue or subscription without sessions whose
entity is not partitioned has a `Tail`. Its messages in memory (the window: ready, locked, deferred,
returned) stay at most WINDOW; an active, unlocked message placed while the window is full, or while the
tail holds any, joins the tail: it is counted and sized, kept in `pending` until the commit has written
it, then dropped from memory. A subscription holding more than WINDOW lazy copies (fanout.py) moves them
all into its tail once the commit has written their rows. A restart leaves the plain messages of every
such sub-queue in the store (`SqliteStore.load` counts them). When the window has nothing ready, `receive`
reads the next PAGE messages numbered after the last one read, then the pending ones; they are placed as
if they had just arrived (and expire then, as Service Bus expires messages lazily). `peek` merges the
window with the tail's messages read from the store without keeping them.

The sub-queue's order stays the sequence order: every message in the tail is newer than every message
in the window except those returned (abandoned, unlocked) or restored with a state of their own.

A mixin of `Namespace` (namespace.py): it shares the namespace's maps, heaps, journal and clock.
"""

from __future__ import annotations

from typing import Any

from local_broker.engine.entities import PAGE, WINDOW, SubQueue, Subscription, Tail, Topic
from local_broker.engine.message import Message
from local_broker.engine.placement import INF, UNREACHABLE


def _lazy_start(sq: SubQueue) -> float:
    """Where the lazy copies of a subscription begin (their rows are in the store too, but the tail
    holds none of them: they are newer than it)."""
    return sq.lazy[0].sequence_number if sq.lazy else INF


class Paging:
    """A main sub-queue's backlog in the store."""

    def _page_tail(self, entity: Any) -> None:
        """Give the main sub-queue of a queue or subscription a tail, if its store pages and it can."""
        if not self._store.pages or isinstance(entity, Topic):
            return
        sq = entity.main
        target = entity.topic if isinstance(entity, Subscription) else entity
        if sq.tail is None and sq.sessions is None and not target.partitioned:
            sq.tail = Tail()

    def _to_tail(self, sq: SubQueue, m: Message) -> None:
        """`m` (placed, sized, to be written at the next commit) joins the tail of `sq`."""
        tail: Tail = sq.tail  # type: ignore[assignment]
        if not tail.count:  # what the store holds numbered before it is in memory, or gone
            tail.after = m.sequence_number - 1
        tail.count += 1
        tail.size += m.size
        tail.pending.append(m)
        self._pending[sq] = None
        self._available[sq] = None

    def _after_commit(self) -> None:
        """The commit wrote the pending messages and every lazy copy: memory lets them go (a lazy copy
        becomes one of the tail's rows, its topic message a reference fewer)."""
        for sq in self._pending:
            tail = sq.tail
            if tail is not None:
                for m in tail.pending:
                    m.entity = None
                tail.pending.clear()
        self._pending = {}
        for sq in self._spilling:
            tail, lazy = sq.tail, sq.lazy
            if tail is None or len(lazy) <= WINDOW:
                continue
            if not tail.count:  # what the store holds numbered before it is in memory, or gone
                tail.after = lazy[0].sequence_number - 1
            while lazy:
                m = lazy.popleft()
                tail.count += 1
                tail.size += m.size
        self._spilling = {}

    def _adopt(self, sq: SubQueue, ms: list[Message]) -> None:
        """Messages of the tail (in sequence order) join the window, ready (as `_place` puts arrivals)."""
        for m in ms:
            m.entity = sq
        sq.messages.update([(m.uid, m) for m in ms])
        sq.browse.extend(ms)
        sq.ready.fresh.extend(ms)
        watch = self._watch_expiry
        for m in ms:
            if m.expires_at < UNREACHABLE:
                watch(m)

    def _page_in(self, sq: SubQueue, wanted: int) -> bool:
        """Move the tail's next messages (at least `wanted`, PAGE if more) into the window; False if it
        had none to give."""
        tail: Tail = sq.tail  # type: ignore[assignment]
        limit = max(wanted, PAGE)
        pending = tail.pending
        journal = self._journal
        held, full, deleted = sq.messages, journal.full, journal.deleted
        added = 0
        while tail.count > len(pending):
            rows = self._store.page(sq.entity.key, int(sq.kind), tail.after, limit, _lazy_start(sq))
            if rows:
                tail.after = rows[-1].sequence_number
            # Those restored with a state of their own, or changed since, are in the window already.
            new = [m for m in rows if m.uid not in held and m.uid not in full and m.uid not in deleted]
            if new:
                tail.count -= len(new)
                tail.size -= sum([m.size for m in new])
                self._adopt(sq, new)
                added += len(new)
            if len(rows) < limit:
                tail.count = len(pending)  # every stored one is read: the rest are pending
                tail.size = sum(m.size for m in pending)
            elif added:
                return True
        new = [pending.popleft() for _ in range(min(len(pending), limit - added))]
        if new:
            tail.after = new[-1].sequence_number
            tail.count -= len(new)
            tail.size -= sum([m.size for m in new])
            self._adopt(sq, new)
        return bool(added or new)

    def _peek_tail(self, sq: SubQueue, found: list[Message], start: int, max_count: int) -> list[Message]:
        """`found` (the window's messages from number `start` on) merged with the tail's, in order."""
        tail: Tail = sq.tail  # type: ignore[assignment]
        journal = self._journal
        stored = [
            m
            for m in self._store.page(
                sq.entity.key, int(sq.kind), max(start - 1, tail.after), max_count, _lazy_start(sq)
            )
            if m.uid not in sq.messages and m.uid not in journal.full and m.uid not in journal.deleted
        ]
        pending = [m for m in tail.pending if m.sequence_number >= start][:max_count]
        merged = sorted([*found, *stored, *pending], key=lambda m: m.sequence_number)
        return merged[:max_count]
