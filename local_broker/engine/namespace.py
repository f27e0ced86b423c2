"""One Service Bus namespace: messaging semantics over the entity structures, driven by an injected clock.

`Namespace` is put together from one mixin per concern (docs/engine-api.md, "Where things are"): this
module holds its construction, commit and reload, availability callbacks and addressing; sending.py,
fanout.py, receiving.py, settlement.py, sessions.py, deadlines.py, paging.py, placement.py and deletion.py
the messaging; management.py entities and rules; transactions.py transactions. One thread owns a Namespace.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from typing import Any

from local_broker.engine.clock import Clock, SystemClock
from local_broker.engine.deadlines import Deadlines
from local_broker.engine.deletion import Deletion
from local_broker.engine.entities import (
    LockTokens,
    MessageTotals,
    Queue,
    SessionLock,
    SubQueue,
    SubQueueKind,
    Subscription,
    Topic,
    Usage,
)
from local_broker.engine.errors import (
    BrokerError,
    EntityDisabledError,
    EntityNotFoundError,
    NotAllowedError,
)
from local_broker.engine.fanout import Fanout
from local_broker.engine.filtering import Target
from local_broker.engine.journal import Journal, NullJournal
from local_broker.engine.management import Management
from local_broker.engine.message import Message
from local_broker.engine.paging import Paging
from local_broker.engine.placement import MAIN, Placement
from local_broker.engine.properties import EntityStatus, NamespaceConfig
from local_broker.engine.receiving import Receiving
from local_broker.engine.sending import Sending
from local_broker.engine.sessions import NON_SESSION_RECEIVER, SESSION_RECEIVER, Sessions
from local_broker.engine.settlement import Settlement
from local_broker.engine.transactions import Transactions
from local_broker.store.base import MemoryStore, Store

# what a sender may address, as a tuple made once: `Queue | Topic` written in isinstance builds a union per
# call (~125 ns, once per send)
_SEND_TARGETS = (Queue, Topic)


class Namespace(
    Sending,
    Fanout,
    Receiving,
    Settlement,
    Sessions,
    Deadlines,
    Paging,
    Placement,
    Management,
    Transactions,
    Deletion,
):
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
        self._usage = Usage()  # the bytes its queues and topics hold (the namespace quota's total)
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
        self._session_lost_callbacks: list[Callable[[Any], None]] = []
        self._available: dict[SubQueue, None] = {}
        self._pending: dict[SubQueue, None] = {}  # sub-queues whose tail holds unwritten messages
        self._spilling: dict[SubQueue, None] = {}  # subscriptions with more lazy copies than WINDOW
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

    def on_session_lost(self, callback: Callable[[Any], None]) -> None:
        """`callback(owner)` runs when a session lock expires unrenewed, with the owner that accepted it
        (Service Bus then detaches that receiver with `com.microsoft:session-lock-lost`)."""
        self._session_lost_callbacks.append(callback)

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
        if self._pending or self._spilling:
            self._after_commit()

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
        fresh._session_lost_callbacks = self._session_lost_callbacks
        self.__dict__.clear()
        self.__dict__.update(fresh.__dict__)

    def reopen(self) -> None:
        """Reload from the store, whose contents changed under the engine (a geo promotion put another
        region's replica behind it); the engine object stays, so every adapter keeps its reference."""
        self._reload()

    def close(self) -> None:
        self.commit()
        self._store.close()

    # --- addressing -----------------------------------------------------------------------------

    def _lookup(self, path: str) -> Any:
        addresses = self._addresses
        # a canonical key as given (a link's entity, on every send and settlement) needs no normalizing:
        # keys are lower-case and never start or end with "/" (validation.py's name rules)
        target = addresses.get(path)
        if target is None:
            target = addresses.get(path.strip("/").lower())
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

    def message_totals(self, path: str) -> MessageTotals:
        """Messages a queue, topic or subscription took in, completed (or received and deleted),
        dead-lettered, delivered to receivers and had abandoned since the namespace was opened: the
        console's throughput and the broker's /metrics. Kept in memory only."""
        entity = self._lookup(path)
        if isinstance(entity, SubQueue):
            raise NotAllowedError(f"'{entity.path}' is a sub-queue; its entity has the totals.")
        return MessageTotals(entity.enqueued, *(getattr(entity, name, 0)  # a topic holds nothing to settle
                                                for name in MessageTotals._fields[1:]))

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
        if not isinstance(target, _SEND_TARGETS):
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
            raise NotAllowedError(NON_SESSION_RECEIVER)
        if sessionful and not sq.session_enabled:
            raise NotAllowedError(SESSION_RECEIVER)
        return sq.path
