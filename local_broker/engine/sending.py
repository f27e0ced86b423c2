"""Sending: a batch's checks (size, quota, ids, partitions), duplicate detection, sequence numbers, and a
message's arrival at a queue (or a topic: fanout.py), forwarded or placed.

A mixin of `Namespace` (namespace.py): it shares the namespace's maps, heaps, journal and clock.
"""

from __future__ import annotations

import heapq
import zlib
from collections.abc import Iterable
from typing import Any

from local_broker.engine.clock import seconds
from local_broker.engine.entities import (
    Queue,
    Subscription,
    Topic,
)
from local_broker.engine.errors import (
    ArgumentError,
    EntityNotFoundError,
    MessageSizeExceededError,
    NotAllowedError,
    QuotaExceededError,
    ServerBusyError,
    StoreFullError,
)
from local_broker.engine.message import (
    Message,
)
from local_broker.engine.placement import ACTIVE, INF, MAX_HOPS, SCHEDULED, SESSION_ID_NULL
from local_broker.engine.properties import EntityStatus
from local_broker.engine.validation import MAX_ID_LENGTH, check_message_ids
from local_broker.store.codec import unstorable

MAX_TRANSFER_HOPS = 4
MAX_HEADER_BYTES = 65536  # all properties of a message: Service Bus's header stream quota

_NO_SESSION_ID = (
    "The SessionId was not set on a message, and it cannot be sent to the entity. Entities that have session "
    "support enabled can only receive messages that have the SessionId set to a valid value."
)


# isinstance's classes as a tuple made once: `str | bytes` written in the call builds a union per call
# (~125 ns, as much as the rest of the check)
_SIZED = (str, bytes)


def _value_size(v: Any) -> int:
    if isinstance(v, _SIZED):
        return len(v)
    return 8 if v is not None else 1


def message_size(m: Message) -> int:
    """len(body) plus the system and application properties, as Service Bus counts a message."""
    c = m.content  # its string fields read as slots (an attrgetter of the nine costs twice as much)
    size = len(c.body) + 32
    for v in (c.message_id, c.correlation_id, c.session_id, c.reply_to_session_id, c.partition_key, c.subject,
              c.to, c.reply_to, c.content_type):
        if v:
            size += len(v)
    ap = m.application_properties
    if ap:
        for k, v in ap.items():
            size += len(k) + _value_size(v)
    an = c.annotations
    if an:
        for k, v in an.items():
            size += len(k) + _value_size(v)
    return size


class Sending:
    """send, schedule, cancel_scheduled and the arrival of a message at an entity."""

    def _quota_error(self, target: Any, size: int) -> QuotaExceededError | None:
        limit = target.props.max_size_in_megabytes * 1048576 * target.partition_count
        current = target.size
        if current + size <= limit:
            return None
        return QuotaExceededError(
            f"The maximum entity size has been reached or exceeded for {target.kind.capitalize()}: "
            f"'{self.config.name}:{target.kind}:{target.path}'. Size of entity in bytes:{current}, "
            f"Max entity size in bytes:{limit}."
        )

    def _validate_batch(
        self, target: Queue | Topic, messages: list[Message], check_quota: bool = True
    ) -> int:
        if not self._store.has_room():
            raise StoreFullError(
                f"The namespace '{self.config.name}' has no storage space left for new messages: its disk is "
                "full. Receiving, completing and deleting messages still work; retry the send once space is "
                "freed."
            )
        max_size = target.props.max_message_size_in_kilobytes * 1024
        requires_session = isinstance(target, Queue) and target.props.requires_session
        partitioned = target.partition_count > 1  # `partitioned`, without the property's call per send
        total = 0
        for m in messages:
            c = m.content
            if c.message_id is None:  # Service Bus gives every message an id: a GUID without dashes
                if c.shared or c.payload:  # else a fresh message's own: written directly, no setter's frame
                    c = m.own_content()
                # 32 hex digits; to_bytes(...).hex() costs half of formatting with "032x"
                c.message_id = self._message_ids().to_bytes(16, "big").hex()
            if m.application_properties or c.annotations:
                self._check_properties(m)
            size = message_size(m)
            if size > max_size:
                raise MessageSizeExceededError(
                    f"The message size {size} bytes exceeds the limit of {max_size} bytes allowed on "
                    f"entity '{target.path}'."
                )
            if size - len(c.body) > MAX_HEADER_BYTES:
                raise MessageSizeExceededError(
                    "A serialization error occurred while processing the message header stream. The "
                    f"serialization process return the following message: The size quota for this stream "
                    f"({MAX_HEADER_BYTES}) has been exceeded. The properties of a message must not exceed "
                    f"{MAX_HEADER_BYTES} bytes on entity '{target.path}'."
                )
            m.size = size
            total += size
            sid = c.session_id
            mid = c.message_id
            pk = c.partition_key
            if requires_session and sid is None:
                raise NotAllowedError(_NO_SESSION_ID)
            if (
                (mid is not None and len(mid) > MAX_ID_LENGTH)
                or (sid is not None and len(sid) > MAX_ID_LENGTH)
                or (pk is not None and len(pk) > MAX_ID_LENGTH)
            ):
                check_message_ids(m)
            if pk is not None and sid is not None and pk != sid:
                raise NotAllowedError(
                    f"The PartitionKey '{pk}' of the message differs from its SessionId '{sid}'; "
                    "when both are set they must be equal."
                )
            if partitioned:
                m.partition_id = self._partition_for(target, m)
        error = self._quota_error(target, total) if check_quota else None
        if error is not None:
            raise error
        if check_quota:
            self._check_namespace_quota(total)
        return total

    def _check_namespace_quota(self, adding: int) -> None:
        limit = self.config.max_size_in_megabytes * 1048576
        current = self._usage.size
        if current + adding > limit:
            raise QuotaExceededError(
                "The maximum namespace size has been reached or exceeded for namespace "
                f"'{self.config.name}'. Size of all entities in bytes:{current}, Max namespace size in "
                f"bytes:{limit}."
            )

    @staticmethod
    def _check_properties(m: Message) -> None:
        checks = (("application property", m.application_properties), ("annotation", m.annotations))
        for kind, props in checks:
            bad = unstorable(props) if props else None
            if bad is not None:
                raise ArgumentError(
                    f"The {kind} {bad} has a type Service Bus cannot carry: {type(props.get(bad)).__name__}.",
                    "application_properties" if kind == "application property" else "annotations",
                )

    def send(self, path: str, messages: Message | list[Message]) -> None:
        """Accept one message or a batch atomically (all validated before any is enqueued)."""
        target = self._send_target(path)
        batch = [messages] if isinstance(messages, Message) else messages
        self._validate_batch(target, batch)
        now = self.clock.now()
        target.accessed = now
        for m in batch:
            self._accept(target, m, now, False)
        self._flush_available()

    def schedule(self, path: str, messages: Message | list[Message]) -> list[int]:
        """`schedule-message`: returns the sequence numbers valid while the messages wait."""
        target = self._send_target(path)
        batch = [messages] if isinstance(messages, Message) else messages
        self._validate_batch(target, batch)
        now = self.clock.now()
        target.accessed = now
        numbers = [self._accept(target, m, now, True) for m in batch]
        self._flush_available()
        return numbers

    def cancel_scheduled(self, path: str, sequence_numbers: Iterable[int]) -> None:
        target = self._send_target(path)
        target.accessed = self.clock.now()
        for seq in sequence_numbers:
            m = target.scheduled.pop(seq, None)
            if m is not None:
                self._remove(m)

    @staticmethod
    def _partition_key(target: Queue | Topic, m: Message) -> str | None:
        """SessionId, then PartitionKey, then MessageId when duplicate detection is on (semantics 14)."""
        if m.session_id is not None:
            return m.session_id
        if m.partition_key is not None:
            return m.partition_key
        if target.props.requires_duplicate_detection:
            return m.message_id
        return None

    def _partition_for(self, target: Queue | Topic, m: Message) -> int:
        """The partition a message goes to; a keyed message whose partition is down is refused."""
        key = self._partition_key(target, m)
        count = target.partition_count
        if key is not None:
            partition = zlib.crc32(key.encode("utf-8")) % count
            if partition in target.down:
                raise ServerBusyError(
                    f"Partition {partition} of '{target.path}', which the message's partition key maps to, "
                    "is temporarily unavailable. Retry the operation later."
                )
            return partition
        for _ in range(count):
            partition = target.round_robin % count
            target.round_robin += 1
            if partition not in target.down:
                return partition
        raise ServerBusyError(f"No partition of '{target.path}' is available. Retry the operation later.")

    def _dedup_key(self, target: Queue | Topic, m: Message) -> str | None:
        if not target.props.requires_duplicate_detection or m.message_id is None:
            return None
        key = m.session_id or m.partition_key  # partitioned entities: MessageId + PartitionKey
        if target.partitioned and key is not None:
            return f"{key}\x1f{m.message_id}"
        return m.message_id

    def _accept(self, target: Queue | Topic, m: Message, now: float, force_schedule: bool) -> int:
        """A message arriving at a queue or topic (from a sender or a forward); returns its number."""
        key = self._dedup_key(target, m) if target.props.requires_duplicate_detection else None
        if key is not None:
            window = seconds(target.props.duplicate_detection_history_time_window)
            dedup = target.dedup
            if dedup.is_duplicate(key, now, window):
                self._journal.delete(m)  # a forwarded duplicate may have a stored row
                return 0
            if not dedup.order:
                heapq.heappush(self._dedup_heap, (now + window, next(self._ticket), target))
            dedup.record(key, now)
            self._journal.dedup(target.key, key, now)
        # content fields read and written on the content itself: a fresh message's own, so the setters'
        # copy-on-write checks (a Python call each) run only for a shared or stored content (own_content)
        c = m.content
        unpartition = c.partition_id is not None and not target.partitioned
        if (unpartition or not c.enqueued_sequence_number) and (c.shared or c.payload):
            c = m.own_content()  # a fresh message's content is its own: no call for it
            if unpartition:
                c.partition_id = None
        seq = target.next_sequence_number(c.partition_id)
        self._journal.counter(target)
        m.sequence_number = seq
        if not c.enqueued_sequence_number:
            c.enqueued_sequence_number = seq
        m.enqueued_time = now
        m.lock_token = None
        m.locked_until = None
        when = c.scheduled_enqueue_time
        if when is not None and (force_schedule or when > now):
            m.state = SCHEDULED
            target.scheduled[seq] = m
            heapq.heappush(self._schedule_heap, (when, next(self._ticket), target, m))
            self._place(target.main if isinstance(target, Queue) else target.held, m)
            return seq
        m.state = ACTIVE
        if isinstance(target, Queue):
            self._enqueue(target, m, now, seconds(target.props.default_message_time_to_live))
        else:
            self._publish(target, m, now)
        return seq

    def _enqueue(self, entity: Queue | Subscription, m: Message, now: float, ttl: float) -> None:
        """A message arriving at a message-holding entity: forwarded, or placed in its main sub-queue.

        `ttl` is the entity's default time to live in seconds (a subscription's capped by its topic's).
        """
        entity.enqueued += 1
        props = entity.props
        if props.forward_to:
            self._transfer(entity, m, props.forward_to, now)
            return
        if props.requires_session and m.session_id is None:
            self._to_dead_letter(entity, m, *SESSION_ID_NULL, now)
            return
        own = m.content.time_to_live
        if own is not None and own < ttl:
            ttl = own
        m.expires_at = now + ttl if ttl < 1e15 else INF
        m.state = ACTIVE
        self._place(entity.main, m)

    def _transfer(self, source: Queue | Subscription, m: Message, destination: str, now: float) -> None:
        """Auto-forward one message; failures stay on the source's transfer dead-letter queue."""
        m.hop_count += 1
        if m.hop_count > MAX_TRANSFER_HOPS:
            self._dead_letter_into(source.dlq, m, *MAX_HOPS)
            return
        target = self._queues.get(destination.lower()) or self._topics.get(destination.lower())
        problem: tuple[str, str] | None = None
        if target is None:
            problem = ("MessagingEntityNotFound", EntityNotFoundError.for_path(destination).description)
        elif target.props.status in (EntityStatus.DISABLED, EntityStatus.SEND_DISABLED):
            problem = ("MessagingEntityDisabled", f"Messaging entity '{target.path}' is currently disabled.")
        else:
            quota = self._quota_error(target, m.size)
            if quota is not None:
                problem = ("QuotaExceeded", quota.description)
            elif target.partitioned:
                try:
                    m.partition_id = self._partition_for(target, m)
                except ServerBusyError as busy:
                    problem = ("ServerBusy", busy.description)
        if problem is not None:
            self._dead_letter_into(source.tdlq, m, *problem)
            return
        assert target is not None
        target.accessed = now
        m.enqueued_sequence_number = m.enqueued_sequence_number or m.sequence_number
        self._accept(target, m, now, False)
