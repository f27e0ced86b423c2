"""The store a geo-replicated namespace's engine writes through: the current primary's store, and the log
that carries every commit to the secondaries' stores.

* synchronous: a commit returns (and the client is answered) only after every secondary in the replica set
  has applied it; while a secondary's region is down the primary refuses work with ServerBusy (nothing is
  written), since it could not keep that promise.
* asynchronous: a commit returns once the primary has it; a shipping thread applies the log to the
  secondaries in the background. When even the secondary least behind lags more than the maximum
  replication lag (Azure: "to a quorum of secondary replicas"), the primary refuses work with ServerBusy
  until it catches up.

Promotion (`promote`): planned applies the whole log to the chosen secondary first (nothing is lost; the
old primary, then identical, becomes a secondary); forced switches at once, and what the chosen secondary
had not applied is gone (reported). A replica that missed entries it can never get (the old primary after
a forced promotion, a secondary that failed to apply) leaves the replica set and is seeded again from the
primary's database once its region is available.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from local_broker.engine.errors import BrokerError, ServerBusyError
from local_broker.geo.log import Entry, ReplicationLog, frozen
from local_broker.store.base import ChangeSet, StoredState
from local_broker.store.sqlite import SqliteStore

OpenStore = Callable[[Path], SqliteStore]


class GeoError(Exception):
    """A geo request that cannot be done as asked (the control API answers 409 or 400)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Replica:
    """One region's copy of the namespace: its own store in its own directory."""

    def __init__(self, region: str, path: Path, store: SqliteStore) -> None:
        self.region = region
        self.path = path
        self.store = store
        self.applied = 0  # the last log position it holds
        self.available = True  # its region is up
        self.attached = True  # in the replica set (False: to be seeded again from the primary)
        self.latency = 0.0  # seconds an entry takes to reach it (a far region)


class GeoStore:
    """Used by the reactor thread (writes, promotion, region changes: everything that touches the primary's
    store) and the shipping thread (secondaries' stores only), each under `shipped`."""

    journaled = True
    pages = True

    def __init__(self, replicas: list[Replica], primary: str, synchronous: bool, max_lag: float,
                 open_store: OpenStore, clock: Callable[[], float] = time.monotonic) -> None:
        self.replicas = {r.region: r for r in replicas}
        self.primary = primary
        self.synchronous = synchronous
        self.max_lag = max_lag
        self.open_store = open_store
        self.clock = clock
        self.log = ReplicationLog()
        self.shipped = threading.Condition()  # guards everything here; notified on every commit
        for replica in self.secondaries():
            self._seed(replica)

    # --- the Store protocol: the primary's store -----------------------------------------------------
    @property
    def current(self) -> SqliteStore:
        return self.replicas[self.primary].store

    def load(self) -> StoredState | None:
        return self.current.load()

    def page(self, *args: Any) -> Any:
        return self.current.page(*args)

    def has_room(self) -> bool:
        return self.current.has_room()

    def write(self, changes: ChangeSet) -> None:
        with self.shipped:
            self._admit()
            self._reseed()
            self.current.write(changes)
            entry = self.log.append(changes if self.synchronous else frozen(changes), self.clock())
            if self.synchronous:
                for replica in self.secondaries():
                    if not self._apply(replica, entry):  # the primary has it: the next write seeds
                        raise ServerBusyError(
                            f"Geo-replication: the secondary region '{replica.region}' could not apply this "
                            "operation; it is seeded again from the primary. Retry.")
                self._trim()
            else:
                self.shipped.notify_all()

    def close(self) -> None:
        with self.shipped:
            for replica in self.replicas.values():
                replica.store.close()

    # --- replication -------------------------------------------------------------------------------
    def secondaries(self) -> list[Replica]:
        """The secondaries in the replica set."""
        return [r for r in self.replicas.values() if r.region != self.primary and r.attached]

    def lag(self, replica: Replica) -> float:
        """Seconds since the oldest commit `replica` has not applied (0: caught up)."""
        entry = self.log.next_after(replica.applied)
        return 0.0 if entry is None else max(0.0, self.clock() - entry.committed_at)

    def _admit(self) -> None:
        secondaries = self.secondaries()
        if not secondaries:
            return
        if self.synchronous:
            down = [r.region for r in secondaries if not r.available]
            if down:
                raise ServerBusyError(
                    f"Synchronous geo-replication: the secondary region '{down[0]}' is unavailable, so the "
                    "primary cannot acknowledge operations. Promote a replica or wait for the region.")
        elif min(self.lag(r) for r in secondaries) > self.max_lag:
            raise ServerBusyError(
                f"Geo-replication lag exceeds the maximum replication lag ({self.max_lag:g} s): the primary "
                "throttles until the secondary catches up. Retry later.")

    def _apply(self, replica: Replica, entry: Entry) -> bool:
        try:
            replica.store.write(entry.changes)
        except BrokerError:
            replica.attached = False
            return False
        replica.applied = entry.position
        return True

    def pump(self, drain: bool = False) -> int:
        """Apply what is due to every reachable secondary (`drain`: everything, due or not); the number of
        entries applied. Nothing ships while the primary's region is down."""
        with self.shipped:
            if not self.replicas[self.primary].available:
                return 0
            applied = 0
            now = self.clock()
            for replica in self.secondaries():
                if not replica.available:
                    continue
                while (entry := self.log.next_after(replica.applied)) is not None:
                    if not drain and entry.committed_at + replica.latency > now:
                        break
                    if not self._apply(replica, entry):
                        break
                    applied += 1
            self._trim()
            self.shipped.notify_all()
            return applied

    def due_in(self) -> float | None:
        """Seconds until the next entry is due at some reachable secondary (None: nothing waits)."""
        waits = []
        for replica in self.secondaries():
            entry = self.log.next_after(replica.applied)
            if entry is not None and replica.available:
                waits.append(entry.committed_at + replica.latency - self.clock())
        return max(0.0, min(waits)) if waits else None

    def ship_until(self, stopped: threading.Event) -> None:
        """The shipping thread's loop (asynchronous mode)."""
        while not stopped.is_set():
            with self.shipped:
                wait = self.due_in()
                self.shipped.wait(0.5 if wait is None else min(wait, 0.5))
            self.pump()

    def _trim(self) -> None:
        positions = [r.applied for r in self.secondaries()]
        self.log.trim(min(positions) if positions else self.log.position)

    def _reseed(self) -> None:
        """Seed again every replica out of the replica set whose region is available (one that failed to
        apply an entry, an old primary back after a forced promotion)."""
        for replica in self.replicas.values():
            if replica.region != self.primary and replica.available and not replica.attached:
                self._seed(replica)

    def _seed(self, replica: Replica) -> None:
        """Make `replica` a copy of the primary's database as of now, in the replica set again."""
        replica.store.close()
        self.current.copy_to(replica.path)
        replica.store = self.open_store(replica.path)
        replica.applied = self.log.position
        replica.attached = True

    # --- operations ----------------------------------------------------------------------------------
    def set_region(self, region: str, available: bool | None = None, latency: float | None = None) -> None:
        with self.shipped:
            replica = self._replica(region)
            if available is not None:
                replica.available = available
            if latency is not None:
                replica.latency = latency
            self._reseed()
            self.shipped.notify_all()

    def promote(self, region: str, forced: bool) -> dict[str, Any]:
        """Make `region` the primary; what was lost (forced only) as operations and message ids."""
        with self.shipped:
            target = self._replica(region)
            old = self.replicas[self.primary]
            if target is old:
                raise GeoError(409, f"'{region}' is already the primary region.")
            if not target.available:
                raise GeoError(409, f"The region '{region}' is unavailable; promote another one.")
            if not target.attached:
                raise GeoError(409, f"The replica in '{region}' is being seeded again and holds no complete "
                                    "copy yet; promote it once its status says Ready.")
            lost: list[Entry] = []
            if forced:
                lost = self.log.drop_after(target.applied)
                self.log.position = target.applied
                old.attached = False
                for replica in self.secondaries():
                    if replica.applied > target.applied:
                        replica.attached = False
            else:
                if not old.available:
                    raise GeoError(409, f"Planned promotion needs the primary region '{old.region}' to "
                                        "replicate what is left; it is unavailable. Use forced promotion.")
                while (entry := self.log.next_after(target.applied)) is not None:
                    if not self._apply(target, entry):
                        raise GeoError(409, f"'{region}' could not apply the replication log; it is seeded "
                                            "again. Promote once its status says Ready.")
                old.applied = self.log.position
            target.store.close()  # opened again: its in-memory state (payload ids) from what it now holds
            target.store = self.open_store(target.path)
            self.primary = region
            self._reseed()
            self._trim()
            self.shipped.notify_all()
            return {"primary": region, "promotion": "forced" if forced else "planned",
                    "lost_operations": len(lost),
                    "lost_message_ids": [i for entry in lost for i in entry.message_ids()]}

    def _replica(self, region: str) -> Replica:
        replica = self.replicas.get(region)
        if replica is None:
            regions = ", ".join(self.replicas)
            raise GeoError(404, f"No replica in region '{region}'; the regions are {regions}.")
        return replica

    def status(self) -> dict[str, Any]:
        with self.shipped:
            return {
                "primary": self.primary,
                "mode": "synchronous" if self.synchronous else "asynchronous",
                "max_replication_lag_seconds": 0 if self.synchronous else self.max_lag,
                "replicas": [self._replica_status(r) for r in self.replicas.values()],
            }

    def _replica_status(self, replica: Replica) -> dict[str, Any]:
        primary = replica.region == self.primary
        if primary:
            state = "Ready" if replica.available else "Unavailable"
        else:
            state = ("Unavailable" if not replica.available else "Ready" if replica.attached else "Seeding")
        pending = 0 if primary or not replica.attached else self.log.position - replica.applied
        return {"region": replica.region, "role": "Primary" if primary else "Secondary", "state": state,
                "lag_seconds": 0.0 if primary or not replica.attached else round(self.lag(replica), 3),
                "pending_operations": pending, "latency_ms": round(replica.latency * 1000)}
