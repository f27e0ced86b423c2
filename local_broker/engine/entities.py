"""In-memory structures of entities: sub-queues with their ready order, sessions, dedup history.

These hold state only; the rules that move messages between them live in the namespace.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import uuid
from collections import deque
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, NamedTuple

from local_broker.engine.message import Message
from local_broker.engine.properties import QueueProperties, SubscriptionProperties, TopicProperties

_new_uuid = object.__new__
# UUID's slots set through their descriptors (UUID forbids setattr); object.__setattr__ costs a third more
_set_int = uuid.UUID.int.__set__  # type: ignore[attr-defined]
_set_safety = uuid.UUID.is_safe.__set__  # type: ignore[attr-defined]
_UNKNOWN_SAFETY = uuid.SafeUUID.unknown



class MessageTotals(NamedTuple):
    """An entity's message counters since its namespace was opened (Namespace.message_totals)."""

    enqueued: int
    completed: int  # completed, or received and deleted
    dead_lettered: int
    delivered: int  # handed to receivers, in either receive mode
    abandoned: int

class LockTokens:
    """Fresh lock tokens: a random version-4 prefix per namespace plus a counter in the low 48 bits.

    Unique and cheap (uuid4() costs a system call per token); tokens are identifiers, not secrets.
    """

    __slots__ = ("new",)

    def __init__(self) -> None:
        counter = itertools.count((uuid.uuid4().int & ~((1 << 48) - 1)) + 1).__next__

        def new(
            _counter: Any = counter,
            _make: Any = _new_uuid,
            _cls: type = uuid.UUID,
            _set_int: Any = _set_int,
            _set_safety: Any = _set_safety,
            _unknown: Any = _UNKNOWN_SAFETY,
        ) -> uuid.UUID:
            token = _make(_cls)
            _set_int(token, _counter())
            _set_safety(token, _unknown)
            return token

        self.new = new


class SubQueueKind(IntEnum):
    MAIN = 0
    DEAD_LETTER = 1
    TRANSFER_DEAD_LETTER = 2
    SCHEDULED = 3  # a topic's scheduled messages (not receivable)


SUFFIXES = {
    SubQueueKind.MAIN: "",
    SubQueueKind.DEAD_LETTER: "/$DeadLetterQueue",
    SubQueueKind.TRANSFER_DEAD_LETTER: "/$Transfer/$DeadLetterQueue",
    SubQueueKind.SCHEDULED: "",
}


class ReadyQueue:
    """Receivable messages in order: new arrivals in a deque, returned ones (abandon, lock expiry) in a
    sequence-number heap so they come back "at or near the front". Entries are removed lazily: an entry
    whose message left this sub-queue or got locked is skipped."""

    __slots__ = ("fresh", "owner", "returned")

    def __init__(self, owner: SubQueue) -> None:
        self.owner = owner
        self.fresh: deque[Message] = deque()
        self.returned: list[tuple[int, int, Message]] = []

    def _live(self, m: Message) -> bool:
        return m.entity is self.owner and m.lock_token is None and m.state == 0

    def push(self, m: Message) -> None:
        self.fresh.append(m)

    def push_returned(self, m: Message) -> None:
        heapq.heappush(self.returned, (m.sequence_number, m.uid, m))

    def pop(self) -> Message | None:
        fresh, returned, owner = self.fresh, self.returned, self.owner
        while returned:
            m = returned[0][2]
            if m.entity is owner and m.lock_token is None and m.state == 0:
                if fresh and fresh[0].sequence_number < m.sequence_number and self._live(fresh[0]):
                    return fresh.popleft()
                heapq.heappop(returned)
                return m
            heapq.heappop(returned)
        while fresh:
            m = fresh.popleft()
            if m.entity is owner and m.lock_token is None and m.state == 0:
                return m
        return None

    def has_ready(self) -> bool:
        fresh, returned = self.fresh, self.returned
        while fresh and not self._live(fresh[0]):
            fresh.popleft()
        while returned and not self._live(returned[0][2]):
            heapq.heappop(returned)
        return bool(fresh or returned)


class BrowseIndex:
    """Messages of a sub-queue by sequence number, for peek without scanning the whole sub-queue.

    Two parallel lists, appended in arrival order (which is sequence order except in dead-letter
    queues, where an out-of-order number is inserted in place). Entries are dropped lazily: one is live
    while its message is still in the sub-queue with the same number; the lists are compacted when dead
    entries outnumber live ones (counted at every 1,024th entry).
    """

    __slots__ = ("messages", "numbers", "owner")

    def __init__(self, owner: SubQueue) -> None:
        self.owner = owner
        self.numbers: list[int] = []
        self.messages: list[Message] = []

    def add(self, m: Message) -> None:
        numbers = self.numbers
        seq = m.sequence_number
        if not numbers or seq >= numbers[-1]:
            numbers.append(seq)
            self.messages.append(m)
        else:
            i = bisect.bisect_right(numbers, seq)
            numbers.insert(i, seq)
            self.messages.insert(i, m)
        n = len(numbers)  # grows by one per add: the dead entries are counted at every 1,024th
        if not n & 1023 and n > 2 * len(self.owner.messages) + 1024:
            self._compact()

    def extend(self, ms: list[Message]) -> None:
        """`add` for each of `ms` (in sequence order): appended at once when they follow every entry (the
        page of a backlog a sub-queue reads from the store, paging.py)."""
        numbers = self.numbers
        if numbers and ms[0].sequence_number < numbers[-1]:
            for m in ms:
                self.add(m)
            return
        numbers.extend([m.sequence_number for m in ms])
        self.messages.extend(ms)
        if len(numbers) > 2 * len(self.owner.messages) + 1024:
            self._compact()

    def _compact(self) -> None:
        owner = self.owner
        live = [
            (s, m)
            for s, m in zip(self.numbers, self.messages, strict=True)
            if m.entity is owner and m.sequence_number == s
        ]
        self.numbers = [s for s, _ in live]
        self.messages = [m for _, m in live]

    def peek(self, from_sequence_number: int, max_count: int, session_id: str | None) -> list[Message]:
        numbers, messages, owner = self.numbers, self.messages, self.owner
        out: list[Message] = []
        i = bisect.bisect_left(numbers, from_sequence_number)
        end = len(numbers)
        while i < end and len(out) < max_count:
            m = messages[i]
            if (
                m.entity is owner
                and m.sequence_number == numbers[i]
                and (session_id is None or m.session_id == session_id)
            ):
                out.append(m)
            i += 1
        return out


@dataclass(slots=True)
class SessionLock:
    """A receiver's hold on one session; `locked_until` moves on renewal."""

    session_id: str
    owner: Any
    locked_until: float


class Session:
    __slots__ = ("locked", "message_count", "ready", "session_id", "state")

    def __init__(self, session_id: str, sub_queue: SubQueue) -> None:
        self.session_id = session_id
        self.ready = ReadyQueue(sub_queue)
        self.locked: dict[int, Message] = {}  # lock token's int -> message
        self.message_count = 0
        self.state: bytes | None = None


WINDOW = 2000  # messages a paged main sub-queue holds in memory before new arrivals stay in the store
PAGE = 500  # messages read from the store at a time


class Tail:
    """The messages of a main sub-queue kept in the store only (see paging.py): `count` of them, `size`
    bytes (part of the sub-queue's), all numbered after `after` (the last one read); `pending` holds those
    placed since the last commit (in memory until it has written them)."""

    __slots__ = ("after", "count", "pending", "size")

    def __init__(self) -> None:
        self.count = 0
        self.size = 0
        self.after = 0
        self.pending: deque[Message] = deque()


class SubQueue:
    """The messages of one address: a queue or subscription, or its (transfer) dead-letter queue.

    A subscription's main sub-queue may also hold lazy copies (`lazy`): topic messages themselves, in
    sequence order, each standing for a copy that is active, unlocked and never delivered, placed here
    with the time to live `lazy_ttl` (the subscription's default, capped by the topic's, when it was
    placed). A lazy copy has no record of its own until it is received or its time to live runs out
    (Namespace._own_copy); its bytes are counted in `size` from the start. Every lazy copy is newer than
    every message in `messages`, so the ready order is the returned and fresh messages, then `lazy`.
    """

    __slots__ = (
        "available_sessions",
        "browse",
        "deferred",
        "entity",
        "kind",
        "lazy",
        "lazy_ttl",
        "locked",
        "messages",
        "path",
        "ready",
        "session_locks",
        "sessions",
        "size",
        "tail",
        "total",
    )

    def __init__(self, entity: Any, kind: SubQueueKind, total: Any, session_enabled: bool = False) -> None:
        self.entity = entity
        self.kind = kind
        self.total = total  # the queue or topic whose size (checked against its quota) includes this one
        self.path = entity.path + SUFFIXES[kind]  # canonical; names never change after creation
        self.messages: dict[int, Message] = {}
        self.ready = ReadyQueue(self)
        self.locked: dict[int, Message] = {}  # lock token's int -> message
        self.deferred: dict[int, list[Message]] = {}
        self.size = 0
        self.sessions: dict[str, Session] | None = {} if session_enabled else None
        self.session_locks: dict[str, SessionLock] = {}
        self.available_sessions: dict[str, None] = {}  # unlocked sessions that may hold ready messages
        self.browse = BrowseIndex(self)
        self.lazy: deque[Message] | tuple[()] = ()  # a deque in a subscription's main sub-queue
        self.lazy_ttl = 0.0
        self.tail: Tail | None = None  # a main sub-queue whose backlog may stay in the store (paging.py)

    def holds_lazy(self, message: Message) -> bool:
        """Whether the lazy copy of `message` placed here is still lazy: lazy copies leave in order from
        the front (or all at once), and their sequence numbers rise."""
        lazy = self.lazy
        return bool(lazy) and lazy[0].sequence_number <= message.sequence_number

    def resize(self, delta: int) -> None:
        """Bytes held here changed (messages, session states); the quota totals follow."""
        self.size += delta
        total = self.total
        total.size += delta
        total.usage.size += delta

    @property
    def session_enabled(self) -> bool:
        return self.sessions is not None

    def session(self, session_id: str) -> Session:
        sessions = self.sessions
        assert sessions is not None
        s = sessions.get(session_id)
        if s is None:
            s = sessions[session_id] = Session(session_id, self)
        return s

    def drop_session_if_idle(self, s: Session) -> None:
        if (
            s.message_count == 0
            and s.state is None
            and not s.locked
            and s.session_id not in self.session_locks
            and self.sessions is not None
        ):
            self.sessions.pop(s.session_id, None)


class DedupHistory:
    """MessageIds seen within the duplicate-detection window, oldest first."""

    __slots__ = ("order", "seen")

    def __init__(self) -> None:
        self.seen: dict[str, float] = {}
        self.order: deque[tuple[float, str]] = deque()

    def is_duplicate(self, key: str, now: float, window: float) -> bool:
        t = self.seen.get(key)
        return t is not None and now - t < window

    def record(self, key: str, now: float) -> None:
        if key in self.seen:
            self.order = deque(item for item in self.order if item[1] != key)
        self.seen[key] = now
        self.order.append((now, key))

    def prune(self, now: float, window: float) -> float | None:
        """Forget ids older than the window; returns the cutoff used when something was forgotten."""
        order, seen = self.order, self.seen
        cutoff = now - window
        pruned = False
        while order and order[0][0] <= cutoff:
            _, key = order.popleft()
            seen.pop(key, None)
            pruned = True
        return cutoff if pruned else None

    def next_expiry(self, window: float) -> float | None:
        return self.order[0][0] + window if self.order else None


PARTITION_SHIFT = 48


class Usage:
    """The bytes all queues and topics of a namespace hold, kept as they change: the namespace quota is
    checked on every send, and summing every entity there costs a send O(entities)."""

    __slots__ = ("size",)

    def __init__(self) -> None:
        self.size = 0


class SendTarget:
    """What queues and topics share: sequence counters, dedup history, scheduled messages, partitions.

    A partitioned entity has one sequence space per partition, with the partition id in the top
    16 bits of its numbers; `down` holds the partitions taken down through fault injection.
    """

    def _init_send_target(self, partition_count: int, usage: Usage | None) -> None:
        self.usage = Usage() if usage is None else usage  # the namespace's (one of its own standing alone)
        self.partition_count = partition_count
        self.counters = [0] * partition_count
        self.down: set[int] = set()
        self.round_robin = 0
        self.dedup = DedupHistory()
        self.scheduled: dict[int, Message] = {}
        self.accessed = 0.0
        self.size = 0  # bytes in all its sub-queues (a topic's include its subscriptions'), kept by SubQueue
        self.enqueued = 0  # messages it took in since the namespace was opened (the console's throughput)

    @property
    def partitioned(self) -> bool:
        return self.partition_count > 1

    def next_sequence_number(self, partition_id: int | None) -> int:
        if partition_id is None:
            self.counters[0] += 1
            return self.counters[0]
        self.counters[partition_id] += 1
        return (partition_id << PARTITION_SHIFT) | self.counters[partition_id]

    def counter_records(self) -> dict[str, int]:
        """Store rows: `key` for a plain entity, `key#<partition>` per partition."""
        if not self.partitioned:
            return {self.key: self.counters[0]}  # type: ignore[attr-defined]
        return {f"{self.key}#{p}": n for p, n in enumerate(self.counters) if n}  # type: ignore[attr-defined]

    def restore_counter(self, record_key: str, value: int) -> None:
        _, _, partition = record_key.partition("#")
        self.counters[int(partition) if partition else 0] = value


class Queue(SendTarget):
    kind = "queue"

    def __init__(self, props: QueueProperties, partition_count: int = 1, usage: Usage | None = None) -> None:
        self._init_send_target(partition_count if props.enable_partitioning else 1, usage)
        self.props = props
        self.key = props.name.lower()  # names never change; the store and the address map use this
        self.main = SubQueue(self, SubQueueKind.MAIN, self, props.requires_session)
        self.dlq = SubQueue(self, SubQueueKind.DEAD_LETTER, self)
        self.tdlq = SubQueue(self, SubQueueKind.TRANSFER_DEAD_LETTER, self)
        # since the namespace was opened, like `enqueued` (the console's rates, the broker's /metrics)
        self.completed = self.dead_lettered = self.delivered = self.abandoned = 0

    @property
    def path(self) -> str:
        return self.props.name

    def sub_queues(self) -> tuple[SubQueue, ...]:
        return (self.main, self.dlq, self.tdlq)


class Topic(SendTarget):
    kind = "topic"

    def __init__(self, props: TopicProperties, partition_count: int = 1, usage: Usage | None = None) -> None:
        self._init_send_target(partition_count if props.enable_partitioning else 1, usage)
        self.props = props
        self.key = props.name.lower()
        self.subscriptions: dict[str, Subscription] = {}
        self.routes: list[Any] | None = None  # fan-out plan (Namespace._routes); None: build it again
        self.lazy_ttl: float | None = None  # the shortest TTL of the plan's lazy copies; None: it has none
        self.span = 0  # ordinals given to its subscriptions: a message's copies take uids base..base+span
        self.held = SubQueue(self, SubQueueKind.SCHEDULED, self)

    @property
    def path(self) -> str:
        return self.props.name

    def sub_queues(self) -> tuple[SubQueue, ...]:
        return (self.held,)


class Subscription:
    kind = "subscription"

    def __init__(self, topic: Topic, props: SubscriptionProperties) -> None:
        self.topic = topic
        self.props = props
        self.key = f"{topic.props.name}/subscriptions/{props.name}".lower()
        self.ordinal = topic.span  # its lazy copy of a topic message has the uid message uid + ordinal
        topic.span += 1
        self.rules: dict[str, Any] = {}  # lower-case name -> CompiledRule
        self.main = SubQueue(self, SubQueueKind.MAIN, topic, props.requires_session)
        self.main.lazy = deque()
        self.dlq = SubQueue(self, SubQueueKind.DEAD_LETTER, topic)
        self.tdlq = SubQueue(self, SubQueueKind.TRANSFER_DEAD_LETTER, topic)
        self.accessed = 0.0
        # since the namespace was opened (the console's rates, the broker's /metrics)
        self.enqueued = self.completed = self.dead_lettered = self.delivered = self.abandoned = 0

    @property
    def path(self) -> str:
        return f"{self.topic.props.name}/Subscriptions/{self.props.name}"

    def sub_queues(self) -> tuple[SubQueue, ...]:
        return (self.main, self.dlq, self.tdlq)
