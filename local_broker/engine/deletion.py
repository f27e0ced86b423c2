"""Batch deletion (`com.microsoft:batch-delete-messages`: the SDKs' DeleteMessages / PurgeMessages): up to N
of a sub-queue's messages enqueued before a time, oldest first, without receiving them.

As Service Bus documents it (learn.microsoft.com, "Batch delete messages in Azure Service Bus"): at most 500
messages per request on Standard and 4000 on Premium; locked messages are not eligible and stay; partitioned
entities are not supported. Deferred and scheduled messages are not deleted either: only what a receiver
could take now, the backlog a paging store holds (paging.py) included. A mixin of `Namespace` (namespace.py).
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any

from local_broker.engine.errors import ArgumentOutOfRangeError, NotAllowedError
from local_broker.engine.message import Message
from local_broker.engine.placement import ACTIVE, INF

STANDARD_MAX_DELETE = 500
PREMIUM_MAX_DELETE = 4000


class Deletion:
    """delete_messages."""

    def max_delete_count(self) -> int:
        return PREMIUM_MAX_DELETE if self.config.premium else STANDARD_MAX_DELETE

    def delete_messages(self, path: str, max_count: int, enqueued_before: float | None = None,
                        session_id: str | None = None) -> int:
        """Delete up to `max_count` unlocked active messages of the entity or sub-queue at `path` enqueued
        before `enqueued_before` (epoch seconds; now when None), in sequence-number order, and only those of
        session `session_id` when given. Returns how many were deleted."""
        limit = self.max_delete_count()
        if not 1 <= max_count <= limit:
            raise ArgumentOutOfRangeError(
                f"The message count {max_count} is out of range: a request deletes 1 to {limit} messages.")
        sq = self._sub_queue(path)
        if getattr(sq.entity, "topic", sq.entity).partitioned:
            raise NotAllowedError(f"Batch delete is not supported for partitioned entity '{sq.entity.path}'.")
        now = self.clock.now()
        before = now if enqueued_before is None else enqueued_before
        if sq.lazy:
            self._materialize(sq, INF)
        eligible = self._deletable(sq, max_count, before, session_id)
        tail = sq.tail
        while (len(eligible) < max_count and tail is not None and tail.count
               and self._page_in(sq, max_count - len(eligible))):  # the backlog in the store (paging.py)
            eligible = self._deletable(sq, max_count, before, session_id)
        for m in eligible:
            self._remove(m)
        sq.entity.accessed = now
        return len(eligible)

    def _deletable(self, sq: Any, max_count: int, before: float, session_id: str | None) -> list[Message]:
        found = (m for m in sq.messages.values() if _eligible(m, before, session_id))
        return sorted(found, key=attrgetter("sequence_number"))[:max_count]


def _eligible(m: Message, before: float, session_id: str | None) -> bool:
    return (m.state == ACTIVE and m.lock_token is None and m.enqueued_time < before
            and (session_id is None or m.session_id == session_id))
