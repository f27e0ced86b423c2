"""One geo-replicated namespace in the broker: each region's store in its own directory
(`<data>/regions/<region>/<namespace>.db`), the current primary remembered beside them
(`<data>/regions/<namespace>.geo.json`), the shipping thread, and promotion behind the one endpoint.

The namespace keeps one endpoint (its ports, keys and connection strings): what changes on promotion is the
replica behind it, as Azure repoints the namespace's hostname. Promotion runs on the reactor: every client
connection is dropped (the SDKs reconnect, as after an Azure failover) and the engine reloads from the new
primary's store. A region down is the namespace's own fault switch while the region is the primary's (the
endpoint refuses clients and nothing ships), and the geo region switch for a secondary's.

On start every secondary is seeded again from the primary's database (a killed broker may have stopped
between the primary's commit and a secondary's, before the client was answered): what a secondary holds is
then exactly what the primary committed.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from local_broker.engine.errors import BrokerError
from local_broker.faults import FaultState, NamespaceFaults
from local_broker.geo.store import GeoStore, Replica
from local_broker.store.sqlite import SqliteStore
from topology.geo import GeoReplicationSpec


class GeoHost:
    def __init__(self, name: str, spec: GeoReplicationSpec, data_dir: Path,
                 synchronous: str = "NORMAL") -> None:
        self.root = data_dir / "regions"
        self.state_path = self.root / f"{name}.geo.json"
        self.synchronous = synchronous
        primary = self._remembered_primary(spec)
        replicas = []
        for region in spec.regions:
            folder = self.root / region
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{name}.db"
            replicas.append(Replica(region, path, self._open(path)))
        self.store = GeoStore(replicas, primary, spec.mode == "synchronous", spec.max_lag.total_seconds(),
                              self._open)
        self._remember()
        self._stopped = threading.Event()
        self._shipper: threading.Thread | None = None
        self._call: Callable[[Callable[[], Any]], Any] | None = None
        self._engine: Any = None
        self._endpoint: Any = None
        self._faults: NamespaceFaults | None = None

    def _open(self, path: Path) -> SqliteStore:
        return SqliteStore(path, synchronous=self.synchronous)

    def _remembered_primary(self, spec: GeoReplicationSpec) -> str:
        try:
            primary = json.loads(self.state_path.read_text(encoding="utf-8"))["primary"]
        except (OSError, ValueError, KeyError):
            return spec.primary
        return primary if primary in spec.regions else spec.primary

    def _remember(self) -> None:
        temporary = self.state_path.with_suffix(".tmp")
        temporary.write_text(json.dumps({"primary": self.store.primary}), encoding="utf-8")
        os.replace(temporary, self.state_path)

    def attach(self, call: Callable[[Callable[[], Any]], Any], engine: Any, endpoint: Any,
               faults: NamespaceFaults) -> None:
        """Serve through `endpoint`; `call` runs a function on the reactor. Starts shipping (asynchronous)."""
        self._call, self._engine, self._endpoint, self._faults = call, engine, endpoint, faults
        faults.on_change(self._on_fault_change)
        if not self.store.synchronous:
            self._shipper = threading.Thread(target=self.store.ship_until, args=(self._stopped,),
                                             name="geo-shipping", daemon=True)
            self._shipper.start()

    def _on_fault_change(self, old: FaultState, new: FaultState) -> None:
        if (old.namespace_down is None) != (new.namespace_down is None):
            self._set_region(self.store.primary, new.namespace_down is None, None)

    def _set_region(self, region: str, available: bool | None, latency: float | None) -> None:
        """On the reactor: seeding a returning replica reads the primary's store, which the reactor owns."""
        assert self._call is not None, "a region changes after attach"
        self._call(lambda: self.store.set_region(region, available, latency))

    # --- what the control API asks ----------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        return self.store.status()

    def summary(self) -> dict[str, Any]:
        """What `sbfed broker serve` prints of it: the primary, the regions, the mode."""
        status = self.store.status()
        return {"primary": status["primary"], "regions": [r["region"] for r in status["replicas"]],
                "mode": status["mode"]}

    def set_region(self, region: str, available: bool | None, latency_ms: int | None) -> dict[str, Any]:
        latency = None if latency_ms is None else latency_ms / 1000.0
        if region == self.store.primary and available is not None and self._faults is not None:
            self._faults.set({"namespace_down": None if available else "drop"})  # the listener marks it
            available = None
        self._set_region(region, available, latency)
        return self.status()

    def promote(self, region: str, forced: bool) -> dict[str, Any]:
        def swap() -> dict[str, Any]:
            try:
                self._engine.commit()  # what this turn changed goes to the old primary (and its log) first
            except BrokerError:
                pass
            report = self.store.promote(region, forced)
            self._remember()
            self._endpoint.drop_connections()
            self._engine.reopen()
            return report

        assert self._call is not None, "promote before attach"
        report = self._call(swap)
        if self._faults is not None and self.store.replicas[region].available:
            self._faults.set({"namespace_down": None})  # the new primary's region serves
        return {**report, **self.status()}

    def close(self) -> None:
        self._stopped.set()
        if self._shipper is not None:
            self._shipper.join(timeout=5)
