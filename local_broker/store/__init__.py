"""Where a namespace's state is kept: SQLite in WAL mode (durable, the default) or nowhere (memory)."""

from local_broker.store.base import ChangeSet, MemoryStore, Store, StoredState
from local_broker.store.sqlite import SCHEMA_VERSION, SqliteStore

__all__ = ["SCHEMA_VERSION", "ChangeSet", "MemoryStore", "SqliteStore", "Store", "StoredState"]
