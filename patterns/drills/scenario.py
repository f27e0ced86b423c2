"""What a drill is, the part every scenario shares: the namespaces it takes, its topology, its clients, the
extra steps of its timeline, when it has settled, its own figures and checks. A new drill is a subclass
listed in catalog.py; the run (run.py) and the summary (summary.py) only call what this base declares.
The three federation patterns are in scenarios.py, the recipes in recipes.py."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from patterns.drills.broker import namespaces_only
from patterns.drills.clients import LocalConsumer, PacedProducer, Producer, Worker, numbered
from patterns.drills.drill import Drill
from patterns.drills.metrics import Record
from patterns.regions import PRIMARY, SECONDARY, Region
from topology import Topology

_NUMBERS = {2: "two", 3: "three"}


@dataclass(frozen=True)
class Step:
    """Something a scenario does at `offset` seconds after the clients started."""

    offset: float
    name: str
    action: Callable[[], None]


@dataclass
class Scenario:
    """The base of every drill: producer and consumer workers, and the pattern's expectations."""

    drill: Drill
    workers: list[Worker] = field(default_factory=list)  # consumers
    producers: list[PacedProducer] = field(default_factory=list)
    producer_workers: list[Worker] = field(default_factory=list)
    local_consumers: list[LocalConsumer] = field(default_factory=list)

    pattern = ""
    namespace_roles = "primary,secondary"  # what --namespaces lists, for its help and errors
    default_namespaces: tuple[str, ...] = (PRIMARY, SECONDARY)
    namespace_counts: tuple[int, int | None] = (2, 2)  # how many namespaces it takes: at least, at most
    fails_over = True  # its clients fail over from the namespace the outage takes down, and back

    @classmethod
    def checked_namespaces(cls, given: tuple[str, ...]) -> tuple[str, ...]:
        """The namespaces `--namespaces` gave (default: the scenario's own), if they are as many distinct
        names as the scenario takes; ValueError otherwise."""
        names = tuple(given or cls.default_namespaces)
        least, most = cls.namespace_counts
        if len({n.lower() for n in names}) != len(names) or not least <= len(names) <= (most or len(names)):
            count = _NUMBERS.get(least, str(least)) if least == most else f"{least} or more"
            raise ValueError(f"--namespaces needs {count} distinct names for {cls.pattern} "
                             f"({cls.namespace_roles}), got {','.join(names)!r}")
        return names

    @classmethod
    def broker_topology(cls, names: tuple[str, ...]) -> dict[str, Any]:
        """The topology `sbfed broker serve` starts with: the namespaces alone (the pattern's entities come
        from `topology apply`, as in Azure); a drill whose namespace needs more from the broker (Geo-
        Replication's regions) says so here."""
        return namespaces_only(names)

    def topology(self, names: tuple[str, ...], audit_sink: str) -> Topology:
        raise NotImplementedError

    @classmethod
    def broker_namespaces(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        """The drill's namespaces the Service Bus broker serves (the others are services the scenario
        starts itself, `services`)."""
        return names

    def services(self, stack: ExitStack) -> dict[str, str]:
        """Start what the drill needs beside the broker (stopped through `stack`); the app settings the
        Functions host needs to reach it."""
        return {}

    @property
    def down(self) -> str:
        """The namespace the outage takes down."""
        return self.drill.names[0]

    def destinations(self, message_id: str) -> frozenset[str] | None:
        """The namespaces that must each process the message exactly once; None: exactly once, anywhere."""
        return None

    def accounted_losses(self) -> set[str]:
        """MessageIds whose loss the scenario's design allows and accounts for (a forced Geo-Replication
        promotion's); every other lost message is a problem."""
        return set()

    def switch_times(self, timeline: Any, processed: list[Record],
                     sent: list[Record]) -> dict[str, dict[str, float | None]] | None:
        """Its own time to fail over and back (summary.py's keys), for a scenario whose clients do not switch
        namespaces (None: summary.py measures the switch)."""
        return None

    def problems(self, summary: dict[str, Any], details: dict[str, Any], by_event: dict[str, list[Record]],
                 handled: list[Record]) -> list[str]:
        """The pattern's own checks of what the drill's records show (`details` takes their figures)."""
        return []

    def start(self, rate: float) -> None:
        raise NotImplementedError

    def steps(self, after: float) -> list[Step]:
        """Extra steps of this pattern's timeline, from `after` seconds on (once the clients failed back)."""
        return []

    def status(self) -> str:
        return ""

    def consumer_back_at(self, restored: dt.datetime) -> dt.datetime | None:
        """When the consumer switched back to the primary, for consumers that switch (None: the drill takes
        the first message processed on the primary after `restored`)."""
        return None

    def details(self) -> dict[str, Any]:
        """Pattern-specific figures and checks for the summary."""
        skipped: Counter[str] = Counter()
        for consumer in self.local_consumers:  # a restarted consumer adds to its predecessor's count
            skipped[consumer.processor] += len(consumer.duplicates)
        return {"duplicates_skipped": dict(skipped)}

    def _consume(self, region: Region, handler: Callable[[Any], None], *, entity: str, processor: str,
                 writer: str, **options: Any) -> Worker:
        """A region-local consumer in its own worker (`options`: LocalConsumer's)."""
        consumer = LocalConsumer(region, handler, entity=entity, audit=self.drill.sink(writer),
                                 processor=processor, **options)
        self.local_consumers.append(consumer)
        worker = Worker(processor, consumer.run).start()
        self.workers.append(worker)
        return worker

    def settled(self) -> bool:
        """Every message that was sent has been processed where the pattern says it must be."""
        processed = self.drill.tracker.processed_ids()
        anywhere = set().union(*processed.values())
        for message_id in self.drill.tracker.sent_ids():
            where = self.destinations(message_id)
            if where is None and message_id not in anywhere:
                return False
            if where is not None and any(message_id not in processed.get(ns, ()) for ns in where):
                return False
        return True

    def failure(self) -> str | None:
        """The first client that died, and why (the drill stops instead of waiting for it)."""
        return next(
            (
                f"{w.name}: {type(w.error).__name__}: {w.error}"
                for w in [*self.producer_workers, *self.workers]
                if w.error
            ),
            None,
        )

    @property
    def sending(self) -> bool:
        return any(w.alive for w in self.producer_workers)

    def _produce(self, producer: Producer, prefix: str, count: int, rate: float,
                 compose: Callable[[int, str], Any] = numbered) -> None:
        paced = PacedProducer(producer, f"{prefix}-{self.drill.run_id}", count, rate, compose)
        self.producers.append(paced)
        self.producer_workers.append(Worker(f"producer-{prefix}", paced.run).start())

    def stop(self) -> None:
        errors = []
        for worker in [*self.producer_workers, *self.workers]:
            try:
                worker.stop()
            except RuntimeError as error:
                errors.append(str(error))
        if errors:
            raise RuntimeError("; ".join(errors))


