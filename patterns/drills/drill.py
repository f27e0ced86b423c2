"""A running drill as a scenario sees it: its settings, its namespaces (connection strings, sinks for the
audit records, what the clients reported), and its timeline. Plain data the scenarios read and the run
fills; it knows no scenario (catalog.py checks the settings against the chosen one)."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patterns.drills.broker import BrokerNamespace
from patterns.drills.clients import Tracker, TrackingSink
from patterns.failover import FailoverPolicy
from patterns.regions import Region, sdk_region
from replicators.audit import AuditSink, open_sink
from topology.durations import parse_duration


@dataclass
class DrillSettings:
    """What `sbfed drill` was asked for; `catalog.drill_settings` builds it with the scenario's namespaces."""

    pattern: str
    out: Path
    messages: int = 600
    outage: float = 15.0
    warmup: float = 5.0  # seconds of normal traffic before the fault
    mode: str = "drop"  # how the primary goes down: drop (open connections cut too) or refuse
    ttl: str = "PT10S"  # active-passive: replica TimeToLive
    deadline: str = "PT20S"  # spillover: processing deadline (messages live half of it per region)
    lock_duration: str = "PT10S"  # on the pattern's queues and subscriptions: locks held at the fault return
    probe_interval: float = 5.0
    settle_timeout: float = 90.0  # after the last send, how long to wait for everything to be handled
    broker_file: Path | None = None  # namespaces of a running broker (its --ready-file); default: start one
    namespaces: tuple[str, ...] = ()  # the drill's namespaces, as its scenario takes them
    in_memory: bool = True

    def __post_init__(self) -> None:
        self.out = Path(self.out)
        if not self.namespaces:
            raise ValueError(f"the {self.pattern} drill's namespaces are not given "
                             "(catalog.drill_settings fills in the scenario's)")
        if self.messages < 1 or self.outage <= 0 or self.warmup <= 0:
            raise ValueError("--messages must be at least 1, --outage and --warmup above 0 seconds")
        if self.mode not in ("drop", "refuse"):
            raise ValueError(f"--mode must be drop or refuse, not '{self.mode}'")
        for option, value in (("--ttl", self.ttl), ("--deadline", self.deadline),
                              ("--lock-duration", self.lock_duration)):
            try:
                parse_duration(value)
            except ValueError as error:
                raise ValueError(f"{option}: {error}") from None

    @property
    def recovery(self) -> float:
        """Time for the producer's probe to find the primary, then the consumer's, then its drain."""
        return 2 * self.probe_interval + 3.0


@dataclass
class Timeline:
    """When the drill's steps happened (the drill's own clock)."""

    started: dt.datetime
    fault_at: dt.datetime | None = None
    restored_at: dt.datetime | None = None
    sending_done_at: dt.datetime | None = None
    settled_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None
    steps: list[dict[str, str]] = field(default_factory=list)


@dataclass
class Drill:
    """What a scenario sees of the running drill."""

    settings: DrillSettings
    names: tuple[str, ...]
    namespaces: dict[str, BrokerNamespace]
    audit_dir: Path
    tracker: Tracker = field(default_factory=Tracker)
    # part of every MessageId: a broker reused by another drill (--broker) must not see ids it has seen
    # before, or its duplicate detection would drop them
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:6])
    policy: FailoverPolicy = field(default_factory=FailoverPolicy)
    functions_host: Any = None  # the FunctionsHostProcess, once the run started it (a step may kill it)
    _sinks: list[AuditSink] = field(default_factory=list)

    def regions(self, **entity: Any) -> tuple[Region, Region]:
        """Primary and secondary for the failover clients, named after the namespaces."""
        return self.region(self.names[0], **entity), self.region(self.names[1], **entity)

    def region(self, name: str, **entity: Any) -> Region:
        """One namespace's sender or receiver factory (`sdk_region`)."""
        return sdk_region(name, self.namespaces[name].connection_string, **entity)

    def sink(self, writer: str) -> AuditSink:
        sink = TrackingSink(open_sink(str(self.audit_dir), writer), self.tracker)
        self._sinks.append(sink)
        return sink

    def close(self) -> None:
        for sink in self._sinks:
            sink.close()
