"""The contract between the engine's journal and a store: a change set in, a stored state out."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

from local_broker.engine.message import Message


@dataclass(slots=True)
class ChangeSet:
    """Everything that changed since the last commit, coalesced (latest state wins).

    Message rows carry their owner (entity key) and sub-queue kind, read from the live message.
    """

    config: dict[str, Any] | None = None
    entities_put: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)  # key -> (kind, record)
    entities_deleted: set[str] = field(default_factory=set)  # also drops the owner's messages and history
    counters: dict[str, int] = field(default_factory=dict)
    messages_put: list[tuple[str, int, Message]] = field(default_factory=list)  # full rows
    messages_state: list[Message] = field(default_factory=list)  # lock / delivery count / state only
    messages_deleted: list[int] = field(default_factory=list)
    dedup_put: dict[tuple[str, str], float] = field(default_factory=dict)
    dedup_prune: dict[str, float] = field(default_factory=dict)  # owner -> forget entries at or before
    session_states: dict[tuple[str, str], bytes | None] = field(default_factory=dict)

    @classmethod
    def of_locks_and_deletes(cls, states: list[Message], deleted: list[int]) -> ChangeSet:
        """A change set of only locks and settlements (a receiver fed or settling one message per turn
        commits one each time): its maps and sets are shared empty read-only ones, not six new ones (half
        of what making the change set cost)."""
        return cls(None, _NONE, _NO_KEYS, _NONE, [], states, deleted, _NONE, _NONE, _NONE)

    def only_deletes(self) -> bool:
        """Whether deleting messages is all this change set does (what a settlement commits)."""
        return not self.messages_state and self.only_locks_and_deletes()

    def only_locks_and_deletes(self) -> bool:
        """Whether changing messages' locks, delivery counts or states and deleting messages is all this
        change set does (what receives and settlements commit)."""
        return not (
            self.config
            or self.entities_put
            or self.entities_deleted
            or self.counters
            or self.messages_put
            or self.dedup_put
            or self.dedup_prune
            or self.session_states
        )

    def __bool__(self) -> bool:
        return bool(self.messages_deleted) or not self.only_deletes()


_NONE: Any = MappingProxyType({})
_NO_KEYS: Any = frozenset()


@dataclass(slots=True)
class StoredState:
    config: dict[str, Any]
    entities: list[tuple[str, str, dict[str, Any]]]  # (key, kind, record)
    counters: dict[str, int]
    messages: list[tuple[str, int, Message]]  # (owner, sub-queue kind, message) by owner, kind, sequence
    dedup: list[tuple[str, str, float]]
    session_states: list[tuple[str, str, bytes]]
    # Plain messages of main sub-queues left in the store (see SqliteStore.load): owner -> (count, bytes).
    tails: dict[str, tuple[int, int]] = field(default_factory=dict)
    top_uid: int = 0  # the highest message uid stored


class Store(Protocol):
    journaled: bool
    pages: bool  # whether `load` may leave messages in the store for `page` to read (see SqliteStore)

    def load(self) -> StoredState | None:
        """The saved state, or None for a new store."""
        ...

    def write(self, changes: ChangeSet) -> None:
        """Apply the change set in one transaction; return only once it is durable. On failure nothing of
        it is stored and a `BrokerError` says why (`StoreFullError`: no space; `StoreWriteError`)."""
        ...

    def has_room(self) -> bool:
        """Whether new messages may be stored (False: the disk is nearly full)."""
        ...

    def close(self) -> None: ...


class MemoryStore:
    """Keeps nothing outside the engine's memory: the namespace lives as long as the process."""

    journaled = False
    pages = False

    def load(self) -> StoredState | None:
        return None

    def write(self, changes: ChangeSet) -> None:
        return None

    def has_room(self) -> bool:
        return True

    def close(self) -> None:
        return None
