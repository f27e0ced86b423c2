"""One Service Bus namespace: messaging semantics over the entity structures, driven by an injected clock.

Management (create/update/delete of entities and rules) is in `management.py`; this module holds
sending, receiving, settlement, sessions, time and commit. One thread owns a Namespace.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
import uuid
import zlib
from collections.abc import Callable, Iterable
from operator import attrgetter
from typing import Any

from local_broker.engine.clock import Clock, SystemClock
from local_broker.engine.entities import (
    LockTokens,
    Queue,
    SessionLock,
    SubQueue,
    SubQueueKind,
    Subscription,
    Topic,
)
from local_broker.engine.errors import (
    ArgumentError,
    BrokerError,
    EntityDisabledError,
    EntityNotFoundError,
    MessageLockLostError,
    MessageNotFoundError,
    MessageSizeExceededError,
    NotAllowedError,
    OperationTimeoutError,
    QuotaExceededError,
    ServerBusyError,
    SessionCannotBeLockedError,
    SessionLockLostError,
    StoreFullError,
)
from local_broker.engine.filtering import CompiledRule, Route, Target, selector, still_lazy
from local_broker.engine.journal import Journal, NullJournal
from local_broker.engine.management import Management
from local_broker.engine.message import (
    DEAD_LETTER_ERROR_DESCRIPTION,
    DEAD_LETTER_REASON,
    Message,
    MessageState,
    ReceiveMode,
)
from local_broker.engine.properties import EntityStatus, NamespaceConfig
from local_broker.engine.transactions import Transactions
from local_broker.engine.validation import MAX_ID_LENGTH, check_message_ids
from local_broker.rules.errors import FilterEvaluationError
from local_broker.store.base import MemoryStore, Store
from local_broker.store.codec import unstorable

ACTIVE = MessageState.ACTIVE
DEFERRED = MessageState.DEFERRED
SCHEDULED = MessageState.SCHEDULED
MAIN = SubQueueKind.MAIN
INF = math.inf
MAX_TRANSFER_HOPS = 4
MAX_HEADER_BYTES = 65536  # all properties of a message: Service Bus's header stream quota

_NON_SESSION_RECEIVER = (
    "It is not possible for an entity that requires sessions to create a non-sessionful message receiver."
)
_SESSION_RECEIVER = (
    "It is not possible for an entity that does not require sessions to create a sessionful message receiver."
)
_NO_SESSION_ID = (
    "The SessionId was not set on a message, and it cannot be sent to the entity. Entities that have session "
    "support enabled can only receive messages that have the SessionId set to a valid value."
)

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


def _value_size(v: Any) -> int:
    if isinstance(v, str | bytes):
        return len(v)
    return 8 if v is not None else 1


# The content's string fields a message's size counts, read in one C call.
_COUNTED_FIELDS = attrgetter(
    "message_id", "correlation_id", "session_id", "reply_to_session_id", "partition_key", "subject", "to",
    "reply_to", "content_type",
)


def message_size(m: Message) -> int:
    """len(body) plus the system and application properties, as Service Bus counts a message."""
    c = m.content
    size = len(c.body) + 32
    for v in _COUNTED_FIELDS(c):
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


def _set_dead_letter_properties(m: Message, reason: str | None, description: str | None) -> None:
    changes = {}
    if reason is not None:
        changes[DEAD_LETTER_REASON] = reason
    if description is not None:
        changes[DEAD_LETTER_ERROR_DESCRIPTION] = description
    if changes:
        m.with_application_properties(changes)


class Namespace(Management, Transactions):
    """See docs/engine-api.md for the contract the wire adapters rely on."""

    def __init__(
        self,
        config: NamespaceConfig | None = None,
        *,
        clock: Clock | None = None,
        store: Store | None = None,
    ) -> None:
        self.config = config or NamespaceConfig()
        self.clock: Clock = clock or SystemClock()
        self._store: Store = store or MemoryStore()
        self._journal: Journal = Journal(self._store) if self._store.journaled else NullJournal(self._store)
        self.created_at = self.clock.now()
        self._queues: dict[str, Queue] = {}
        self._topics: dict[str, Topic] = {}
        self._addresses: dict[str, Any] = {}
        self._uids = itertools.count(1)
        self._ticket = itertools.count()
        self._lock_heap: list[tuple[float, int, list[Message]]] = []  # messages locked until then
        self._tokens = LockTokens()
        # Message ids the broker gives: a random prefix per namespace and a counter (no uuid4 per message).
        self._message_ids = itertools.count((uuid.uuid4().int >> 48) << 48).__next__
        self._session_heap: list[tuple[float, int, SubQueue, SessionLock]] = []
        # Messages expiring then. Consecutive placements with one deadline (the copies of a topic message,
        # a batch sent in one call) share the entry pushed last, `_expiring`, while it is in the heap.
        self._ttl_heap: list[tuple[float, int, list[Message]]] = []
        self._expiring: tuple[float, int, list[Message]] | None = None
        # Topic messages when their earliest lazy copy (see SubQueue) expires, with the copies chosen.
        self._lazy_heap: list[tuple[float, int, Message, list[Target]]] = []
        self._schedule_heap: list[tuple[float, int, Any, Message]] = []
        self._dedup_heap: list[tuple[float, int, Any]] = []
        self._idle_heap: list[tuple[float, int, Any]] = []
        self._callbacks: list[Callable[[str], None]] = []
        self._available: dict[SubQueue, None] = {}
        self._journal.config = self._config_record()  # a new store learns its namespace; a restore discards

    @classmethod
    def open(
        cls, store: Store, config: NamespaceConfig | None = None, clock: Clock | None = None
    ) -> Namespace:
        """A namespace rebuilt exactly from `store` (a new store starts empty with `config`)."""
        ns = cls(config, clock=clock, store=store)
        state = store.load()
        if state is not None:
            ns._restore(state, config)
        ns.commit()
        return ns

    # --- plumbing -------------------------------------------------------------------------------

    def on_available(self, callback: Callable[[str], None]) -> None:
        """`callback(canonical_path)` runs whenever that entity or sub-queue gains receivable messages."""
        self._callbacks.append(callback)

    def _flush_available(self) -> None:
        available = self._available
        if not available:
            return
        self._available = {}
        if not self._callbacks:
            return
        for sq in available:
            path = sq.path
            for cb in self._callbacks:
                cb(path)

    def commit(self) -> None:
        """Make every change since the last commit durable (one store transaction).

        If the store fails (`BrokerError`), it has stored none of the changes; the namespace goes back to
        the last committed state (reloaded from the store), so nothing a client was not told about stays,
        and the error is raised for the adapter to answer every operation since the last commit with."""
        try:
            self._journal.commit(self._record_of)
        except BrokerError:
            self._reload()
            raise

    def has_storage_room(self) -> bool:
        """False while the store's disk is (nearly) full and sends are refused."""
        return self._store.has_room()

    def _reload(self) -> None:
        """Replace every structure with the store's committed state (the engine object stays the same)."""
        fresh = type(self)(self.config, clock=self.clock, store=self._store)
        state = self._store.load()
        if state is not None:
            fresh._restore(state, self.config)
        fresh._callbacks = self._callbacks
        self.__dict__.clear()
        self.__dict__.update(fresh.__dict__)

    def close(self) -> None:
        self.commit()
        self._store.close()

    # --- addressing -----------------------------------------------------------------------------

    def _lookup(self, path: str) -> Any:
        target = self._addresses.get(path.strip("/").lower())
        if target is None:
            raise EntityNotFoundError.for_path(path)
        return target

    def resolve(self, path: str) -> str:
        """The canonical path of an entity or sub-queue (see docs/engine-api.md section 4)."""
        return self._lookup(path).path

    def deferred_message_count(self, path: str) -> int:
        """Deferred messages of a queue, subscription or sub-queue (the runtime properties have no such
        count; the console shows it)."""
        return sum(len(same) for same in self._sub_queue(path).deferred.values())

    def partition_count(self, path: str) -> int:
        """Partitions of a queue or topic (1 when not partitioned)."""
        return self._lookup(path).partition_count

    def message_totals(self, path: str) -> tuple[int, int, int]:
        """Messages a queue, topic or subscription enqueued, completed (or received and deleted) and
        dead-lettered since the namespace was opened: the console's throughput. Kept in memory only."""
        entity = self._lookup(path)
        if isinstance(entity, SubQueue):
            raise NotAllowedError(f"'{entity.path}' is a sub-queue; its entity has the totals.")
        return entity.enqueued, getattr(entity, "completed", 0), getattr(entity, "dead_lettered", 0)

    def _sub_queue(self, path: str) -> SubQueue:
        target = self._lookup(path)
        if isinstance(target, Topic):
            raise NotAllowedError(
                f"Cannot receive from topic '{target.path}'; receive from one of its subscriptions."
            )
        return target if isinstance(target, SubQueue) else target.main

    def _receivable(self, path: str) -> SubQueue:
        sq = self._sub_queue(path)
        entity = sq.entity
        status = entity.props.status
        if status is EntityStatus.DISABLED or status is EntityStatus.RECEIVE_DISABLED:
            raise EntityDisabledError(f"Messaging entity '{entity.path}' is currently disabled for receive.")
        if sq.kind is MAIN and entity.props.forward_to:
            raise NotAllowedError(
                f"Cannot receive from entity '{entity.path}' because it auto-forwards its messages to "
                f"'{entity.props.forward_to}'."
            )
        if sq.kind is SubQueueKind.DEAD_LETTER and entity.props.forward_dead_lettered_messages_to:
            raise NotAllowedError(
                f"Cannot receive from '{sq.path}' because dead-lettered messages are forwarded to "
                f"'{entity.props.forward_dead_lettered_messages_to}'."
            )
        return sq

    def _send_target(self, path: str) -> Queue | Topic:
        target = self._lookup(path)
        if not isinstance(target, Queue | Topic):
            raise NotAllowedError(f"Cannot send to '{target.path}': only queues and topics accept messages.")
        status = target.props.status
        if status is EntityStatus.DISABLED or status is EntityStatus.SEND_DISABLED:
            raise EntityDisabledError(f"Messaging entity '{target.path}' is currently disabled for send.")
        return target

    def max_message_size(self, path: str) -> int:
        """Bytes: the largest message the entity at `path` (or its topic, for a subscription) accepts; what
        an AMQP attach advertises as its max-message-size."""
        target = self._lookup(path)
        if isinstance(target, SubQueue):
            target = target.entity
        if isinstance(target, Subscription):
            target = target.topic
        return target.props.max_message_size_in_kilobytes * 1024

    def check_sender(self, path: str) -> str:
        """Raise what a sender link attach must fail with; returns the canonical path."""
        return self._send_target(path).path

    def check_receiver(self, path: str, sessionful: bool = False) -> str:
        """Raise what a receiver link attach must fail with; returns the canonical path."""
        sq = self._receivable(path)
        if sq.session_enabled and not sessionful:
            raise NotAllowedError(_NON_SESSION_RECEIVER)
        if sessionful and not sq.session_enabled:
            raise NotAllowedError(_SESSION_RECEIVER)
        return sq.path

    # --- sizes ----------------------------------------------------------------------------------

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

    # --- sending --------------------------------------------------------------------------------

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
        partitioned = target.partitioned
        total = 0
        for m in messages:
            if m.message_id is None:  # Service Bus gives every message an id: a GUID without dashes
                m.message_id = f"{self._message_ids():032x}"
            c = m.content
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
        current = sum(q.size for q in self._queues.values()) + sum(t.size for t in self._topics.values())
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
            window = target.props.duplicate_detection_history_time_window.total_seconds()
            dedup = target.dedup
            if dedup.is_duplicate(key, now, window):
                self._journal.delete(m)  # a forwarded duplicate may have a stored row
                return 0
            if not dedup.order:
                heapq.heappush(self._dedup_heap, (now + window, next(self._ticket), target))
            dedup.record(key, now)
            self._journal.dedup(target.key, key, now)
        if not target.partitioned:
            m.partition_id = None
        seq = target.next_sequence_number(m.partition_id)
        self._journal.counter(target)
        m.sequence_number = seq
        if not m.enqueued_sequence_number:
            m.enqueued_sequence_number = seq
        m.enqueued_time = now
        m.lock_token = None
        m.locked_until = None
        when = m.scheduled_enqueue_time
        if when is not None and (force_schedule or when > now):
            m.state = SCHEDULED
            target.scheduled[seq] = m
            heapq.heappush(self._schedule_heap, (when, next(self._ticket), target, m))
            self._place(target.main if isinstance(target, Queue) else target.held, m)
            return seq
        m.state = ACTIVE
        if isinstance(target, Queue):
            self._enqueue(target, m, now, target.props.default_message_time_to_live.total_seconds())
        else:
            self._publish(target, m, now)
        return seq

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
            self._enqueue(target, m, now, target.props.default_message_time_to_live.total_seconds())
        else:
            self._publish(target, m, now)

    def _routes(self, topic: Topic) -> Callable[[Message], list[Target]]:
        """The topic's fan-out plan, built again only after its subscriptions, rules or properties changed
        (Management sets `topic.routes` to None): subscriptions that can get a copy, in order, with
        what deciding that takes, compiled into one selector.

        A subscription gets lazy copies (see SubQueue) unless it forwards, has sessions or a rule with an
        action, or the topic is partitioned (its sequence numbers do not rise across partitions). One
        whose lazy copies no longer fit (it stopped getting them, or its time to live changed) gives them
        records first: they keep the TTL they were placed with, and stay ahead of what arrives next."""
        routes = topic.routes
        if routes is None:
            cap = topic.props.default_message_time_to_live.total_seconds()
            filtering_errors_kept = not topic.props.filtering_messages_before_publishing
            plan = []
            shortest: float | None = None
            for sub in topic.subscriptions.values():
                props, main = sub.props, sub.main
                ttl = min(props.default_message_time_to_live.total_seconds(), cap)
                lazy = not (
                    topic.partitioned
                    or props.forward_to
                    or props.requires_session
                    or any(rule.apply is not None for rule in sub.rules.values())
                )
                if main.lazy and not (lazy and main.lazy_ttl == ttl):
                    self._materialize(main, INF)
                main.lazy_ttl = ttl
                rules = tuple(rule for rule in sub.rules.values() if not rule.never)
                if props.status is EntityStatus.DISABLED or not rules:
                    continue  # gets no copies whatever the message
                if lazy and (shortest is None or ttl < shortest):
                    shortest = ttl
                plan.append(
                    Route(
                        sub,
                        rules,
                        props.dead_lettering_on_filter_evaluation_exceptions and filtering_errors_kept,
                        ttl,
                        main if lazy else None,
                    )
                )
            topic.lazy_ttl = shortest
            routes = topic.routes = selector(topic, plan)
        return routes

    def _publish(self, topic: Topic, m: Message, now: float) -> None:
        """Fan a topic message out into its subscriptions (semantics 4.6, 4.7).

        A plain copy (see `_routes`) is the message itself appended to the subscription's lazy copies;
        the copy's uid is the message's (a block of `topic.span` reserved here) plus the subscription's
        ordinal. Other copies get records of their own now."""
        topic.enqueued += 1
        targets = (topic.routes or self._routes(topic))(m)
        if not targets:
            self._journal.delete(m)  # an activated or forwarded message may have a stored row
            return
        last = targets[-1]
        lazy_ttl = topic.lazy_ttl
        if lazy_ttl is not None:  # the message may stand for lazy copies: never one of the other copies
            last = None
            self._journal.delete(m)  # the row of an activated or forwarded message: its copies have their own
            m.persisted = False
        size = m.size
        available = self._available
        placed = 0
        for target in targets:
            route, what = target
            sub = route.subscription
            sub.accessed = now
            if what is None:
                main = route.main
                if main is not None:
                    main.lazy.append(m)
                    main.size += size
                    available[main] = None
                    sub.enqueued += 1
                    placed += 1
                    continue
                self._enqueue(sub, m if target is last else m.copy(), now, route.ttl)
                continue
            copy = m if target is last else m.copy()
            if isinstance(what, CompiledRule):
                copy.with_application_properties({"RuleName": what.props.name})  # the action's own dict
                try:
                    what.apply(copy)  # type: ignore[misc]
                except FilterEvaluationError as exc:
                    what = exc
                else:
                    self._enqueue(sub, copy, now, route.ttl)
                    continue
            if sub.props.dead_lettering_on_filter_evaluation_exceptions:
                self._to_dead_letter(sub, copy, what.type_name, what.description, now)
        if placed:
            topic.size += size * placed
            m.uid = base = next(self._uids)
            self._uids = itertools.count(base + topic.span)
            self._journal.publish(m, targets)
            expires = m.expiry(lazy_ttl)  # type: ignore[arg-type]
            if expires != INF:
                heapq.heappush(self._lazy_heap, (expires, next(self._ticket), m, targets))

    def _own_copy(self, sq: SubQueue, m: Message) -> Message:
        """The record of the lazy copy `m` just taken off the front of `sq.lazy`, in `sq` (not yet ready,
        locked, or watched for expiry: its caller decides)."""
        copy = m.copy()
        copy.uid = uid = m.uid + sq.entity.ordinal
        copy.expires_at = m.expiry(sq.lazy_ttl)
        copy.entity = sq
        copy.persisted = m.persisted  # its row is written with the message's lazy copies, or with it
        sq.messages[uid] = copy
        sq.browse.add(copy)
        return copy

    def _materialize(self, sq: SubQueue, until: float) -> None:
        """Give the lazy copies of `sq` numbered up to `until` records of their own, in order, ready."""
        lazy, journal = sq.lazy, self._journal
        while lazy and lazy[0].sequence_number <= until:
            m = self._own_copy(sq, lazy.popleft())
            sq.ready.fresh.append(m)
            if m.expires_at != INF:
                self._watch_expiry(m)
            if not m.persisted:
                journal.put(m)  # no longer lazy: the journal's lazy rows leave it out

    def _expire_lazy(self, m: Message, targets: list[Target], now: float) -> None:
        """The earliest lazy copy of topic message `m` was due: the copies due get records (the TTL heap
        then expires them), the heap holds `m` again for the next one."""
        later = INF
        for route in still_lazy(m, targets):
            expires = m.expiry(route.ttl)
            if expires <= now:
                self._materialize(route.main, m.sequence_number)
            elif expires < later:
                later = expires
        if later != INF:
            heapq.heappush(self._lazy_heap, (later, next(self._ticket), m, targets))

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
        own = m.time_to_live
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

    # --- placing and removing -------------------------------------------------------------------

    def _place(self, sq: SubQueue, m: Message) -> None:
        """Put a message into a sub-queue in the place its state says (ready, deferred, scheduled)."""
        if not m.uid:
            m.uid = next(self._uids)
        m.entity = sq
        sq.messages[m.uid] = m
        sq.browse.add(m)
        sq.size += m.size
        sq.total.size += m.size
        state = m.state
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
        elif state is ACTIVE and m.expires_at != INF and sq.kind is MAIN:
            self._watch_expiry(m)
        self._journal.put(m)

    def _watch_expiry(self, m: Message) -> None:
        """Put a message (in a main sub-queue, with an expiry) in the TTL heap."""
        expiring = self._expiring
        if expiring is not None and expiring[0] == m.expires_at:
            m.expires_at = expiring[0]  # one float for the group, not one per copy
            expiring[2].append(m)
        else:
            self._expiring = expiring = (m.expires_at, next(self._ticket), [m])
            heapq.heappush(self._ttl_heap, expiring)

    def _detach(self, m: Message) -> None:
        """Take a message out of its sub-queue's bookkeeping (it is about to move or vanish)."""
        sq: SubQueue = m.entity
        del sq.messages[m.uid]
        sq.size -= m.size
        sq.total.size -= m.size
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

    def _expire(self, m: Message, now: float) -> None:
        entity = m.entity.entity
        if entity.props.dead_lettering_on_message_expiration:
            self._dead_letter(m, *TTL_EXPIRED, now)
        else:
            self._remove(m)

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
        if sq.kind is MAIN and m.expires_at != INF:
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

    # --- receiving ------------------------------------------------------------------------------

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
                raise NotAllowedError(_NON_SESSION_RECEIVER)
            s = self._held(sq, session, now)
            ready = s.ready
            locked_until = session.locked_until
        else:
            if session is not None:
                raise NotAllowedError(_SESSION_RECEIVER)
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
        while len(out) < max_count:
            m = pop() if fresh or returned else None
            if m is None:
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
                raise NotAllowedError(_NON_SESSION_RECEIVER)
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

    # --- settlement -----------------------------------------------------------------------------

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
        for m in self._locked(path, lock_tokens, session_id):
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

    # --- sessions -------------------------------------------------------------------------------

    def _session_queue(self, path: str) -> SubQueue:
        sq = self._receivable(path)
        if sq.sessions is None or sq.kind is not MAIN:
            raise NotAllowedError(_SESSION_RECEIVER)
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

    # --- time -----------------------------------------------------------------------------------

    def _purge_stale(self) -> None:
        """Drop heap tops that mean nothing any more (settled, renewed, cancelled): exact deadlines."""
        heap = self._lock_heap
        while heap:
            until, _, locked = heap[0]
            live = next(
                (i for i, m in enumerate(locked) if m.lock_token is not None and m.locked_until == until),
                None,
            )
            if live is not None:
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
            live = next(
                (i for i, m in enumerate(waiting) if m.entity is not None and m.state is ACTIVE), None
            )
            if live is not None:
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
        tops = [
            heap[0][0]
            for heap in (
                self._lock_heap,
                self._session_heap,
                self._ttl_heap,
                self._lazy_heap,
                self._schedule_heap,
                self._dedup_heap,
                self._idle_heap,
            )
            if heap
        ]
        return min(tops) if tops else None

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
