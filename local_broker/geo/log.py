"""The replication log: the primary's store change sets, in commit order, until every secondary has them.

Why change sets and not engine calls or SQL: a `ChangeSet` is what one engine commit made durable, already
coalesced and complete (entities, rules, policies' config, messages, their state, sequence counters,
duplicate-detection history, session state) and expressed in store terms, so a secondary applies it with
its own `SqliteStore.write` and ends up with the same database as the primary; replaying engine calls
would need the primary's clock, lock tokens and ids to come out the same, and SQL would tie the log to one
store schema. The log is applied in order only; an entry is never skipped, so a secondary's state is always
the primary's at some earlier commit (what a forced promotion then serves).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace

from local_broker.engine.message import COPY_FIELDS, Message, MessageContent
from local_broker.store.base import ChangeSet

_new = object.__new__


@dataclass(slots=True, frozen=True)
class Entry:
    position: int
    committed_at: float  # monotonic seconds
    changes: ChangeSet

    def message_ids(self) -> list[str]:
        """Ids of the messages this entry stored (what a forced promotion reports as lost with it)."""
        return [str(m.message_id) for _, _, m in self.changes.messages_put if m.message_id is not None]


def frozen(changes: ChangeSet) -> ChangeSet:
    """A copy of a change set that later engine work cannot alter: the engine keeps changing the live
    messages a change set holds (locks, delivery counts, a content shared later), so an entry shipped in
    the background keeps the messages as they were committed. The other parts are the journal's, which it
    replaces rather than changes after a commit."""
    contents: dict[int, MessageContent] = {}
    return replace(
        changes,
        messages_put=[(owner, sub, _message(m, contents)) for owner, sub, m in changes.messages_put],
        messages_state=[_message(m, contents) for m in changes.messages_state],
    )


def _message(m: Message, contents: dict[int, MessageContent]) -> Message:
    twin = _new(Message)
    for name in COPY_FIELDS:
        setattr(twin, name, getattr(m, name))
    twin.entity = None
    c = m.content
    if not c.payload:  # stored in its row: freeze whether it is shared (a stored payload never changes)
        key = id(c)
        kept = contents.get(key)
        if kept is None:
            kept = contents[key] = c.clone()
            kept.shared = c.shared
        twin.content = kept
    return twin


class ReplicationLog:
    """Entries not yet applied by every secondary; positions grow by one per commit, forever."""

    def __init__(self, position: int = 0) -> None:
        self.position = position  # the last entry appended
        self.entries: deque[Entry] = deque()

    def append(self, changes: ChangeSet, at: float) -> Entry:
        self.position += 1
        entry = Entry(self.position, at, changes)
        self.entries.append(entry)
        return entry

    def after(self, position: int) -> list[Entry]:
        """The entries past `position`, in order."""
        first = self.entries[0].position if self.entries else self.position + 1
        return list(self.entries)[max(0, position + 1 - first):]

    def next_after(self, position: int) -> Entry | None:
        first = self.entries[0].position if self.entries else self.position + 1
        index = position + 1 - first
        return self.entries[index] if 0 <= index < len(self.entries) else None

    def trim(self, applied_by_all: int) -> None:
        """Forget the entries every secondary has applied."""
        while self.entries and self.entries[0].position <= applied_by_all:
            self.entries.popleft()

    def drop_after(self, position: int) -> list[Entry]:
        """Remove and return the entries past `position` (a forced promotion loses them)."""
        lost = self.after(position)
        for _ in lost:
            self.entries.pop()
        return lost
