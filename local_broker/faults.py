"""Injected faults of one namespace: what drills use to simulate a regional outage.

The control API (`local_broker.control`, HTTP handler threads) writes the state; the AMQP listener (the
reactor thread) and the management endpoint read it:

* `namespace_down`: `None` (up), `"refuse"` (new connections are refused; open ones keep working) or
  `"drop"` (open connections are dropped and new ones refused).
* `latency_ms`: delay added before every AMQP response (and every management response).
* `partitions_down`: the partitions taken down, as `(entity path, partition id)`; the engine holds the
  effect (`Namespace.set_partition_available`), this is the record that `GET /$control/faults` shows.

How the AMQP adapter uses it:

    faults.state.refuses_connections      # check on every accepted connection
    faults.state.latency_seconds          # delay responses by this much
    faults.on_change(callback)            # callback(old: FaultState, new: FaultState), called on the
                                          # thread that made the change (an HTTP thread): hop to the
                                          # reactor (EngineThread.call) before touching links;
                                          # drop open connections when new.drops_connections and not
                                          # old.drops_connections.

`FaultState` is immutable; reading `faults.state` needs no lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

DownMode = Literal["refuse", "drop"]
DOWN_MODES: tuple[str, ...] = ("refuse", "drop")
MAX_LATENCY_MS = 600_000


@dataclass(frozen=True)
class FaultState:
    namespace_down: DownMode | None = None
    latency_ms: int = 0
    partitions_down: frozenset[tuple[str, int]] = field(default_factory=frozenset)

    @property
    def refuses_connections(self) -> bool:
        return self.namespace_down is not None

    @property
    def drops_connections(self) -> bool:
        return self.namespace_down == "drop"

    @property
    def latency_seconds(self) -> float:
        return self.latency_ms / 1000.0

    def unavailable(self, namespace: str) -> str:
        """What an HTTP request to a namespace that is down is answered (the admin API's and REST's 503)."""
        return (f"The namespace '{namespace}' is unavailable (fault injection: "
                f"namespace_down={self.namespace_down}).")

    def to_json(self) -> dict[str, object]:
        return {
            "namespace_down": self.namespace_down,
            "latency_ms": self.latency_ms,
            "partitions_down": [{"entity": entity, "partition_id": pid}
                                for entity, pid in sorted(self.partitions_down)],
        }


FaultListener = Callable[[FaultState, FaultState], None]


class NamespaceFaults:
    """The fault state of one namespace, changed from any thread, with change notification."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = FaultState()
        self._listeners: list[FaultListener] = []

    @property
    def state(self) -> FaultState:
        return self._state

    def on_change(self, listener: FaultListener) -> Callable[[], None]:
        """Call `listener(old, new)` after every change; returns a function that unregisters it."""
        with self._lock:
            self._listeners.append(listener)

        def unregister() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unregister

    def set(self, changes: Mapping[str, object]) -> FaultState:
        """Change `namespace_down` and/or `latency_ms` (others stay as they are); returns the new state."""
        unknown = set(changes) - {"namespace_down", "latency_ms"}
        if unknown:
            raise ValueError(f"Unknown fault settings {sorted(unknown)}; use namespace_down and latency_ms.")
        down = changes.get("namespace_down")
        if down is not None and down not in DOWN_MODES:
            raise ValueError(f"namespace_down must be one of {', '.join(DOWN_MODES)} or null, not {down!r}.")
        latency = changes.get("latency_ms", 0)
        if isinstance(latency, bool) or not isinstance(latency, int) or not 0 <= latency <= MAX_LATENCY_MS:
            raise ValueError(f"latency_ms must be whole milliseconds, 0..{MAX_LATENCY_MS}, not {latency!r}.")
        return self._apply(lambda state: replace(state, **changes))

    def record_partition(self, entity: str, partition_id: int, available: bool) -> FaultState:
        """Note a partition taken down or brought back (after the engine accepted the change)."""
        key = (entity, partition_id)

        def change(state: FaultState) -> FaultState:
            down = state.partitions_down - {key} if available else state.partitions_down | {key}
            return replace(state, partitions_down=down)

        return self._apply(change)

    def _apply(self, change: Callable[[FaultState], FaultState]) -> FaultState:
        with self._lock:
            old = self._state
            self._state = new = change(old)
            listeners = list(self._listeners)
        if new != old:
            for listener in listeners:
                listener(old, new)
        return new
