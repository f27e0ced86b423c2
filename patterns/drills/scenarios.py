"""What each pattern's drill runs and checks: its topology, its applications, the extra steps of its
timeline, when it has settled, and the pattern's own figures (the recipes' drills build on the same base in
recipes.py; catalog.py names them all).

- all-active: a producer homed in each region (the primary's fails over to the secondary and back), a
  consumer in each region; every region must process every message once.
- active-passive: the failover producer and the failover consumer (patterns/failover.py); every message
  processed once, every repeated delivery reported, replicas alive only for the TTL window.
- spillover: a producer with failover, a consumer per region, poison messages that fail everywhere, and a
  phase where the primary's consumer is stopped so its messages expire into the dead-letter queue and spill
  to the secondary; aux-queue consumers take the double spills.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from patterns import federation
from patterns.drills.clients import (
    DeliveryLog,
    LocalConsumer,
    PacedProducer,
    PoisonMessage,
    Producer,
    Worker,
    numbered,
    recorded,
)
from patterns.drills.metrics import CHECKS, Record
from patterns.failover import ConsumerOptions, FailoverConsumer, FailoverProducer
from patterns.regions import PRIMARY, SECONDARY, Region
from patterns.transforms import AUX_SUFFIX
from topology import Topology
from topology.durations import parse_duration

if TYPE_CHECKING:
    from patterns.drills.run import Drill

TOPIC = "events"
QUEUE = "work"
POISON_EVERY = 50  # one message in 50 fails in every region (spillover's double spills)


@dataclass(frozen=True)
class Step:
    """Something a scenario does at `offset` seconds after the clients started."""

    offset: float
    name: str
    action: Callable[[], None]


@dataclass
class Scenario:
    """The base of the three drills: producer and consumer workers, and the pattern's expectations."""

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

    def topology(self, names: tuple[str, ...], audit_sink: str) -> Topology:
        raise NotImplementedError

    @property
    def down(self) -> str:
        """The namespace the outage takes down."""
        return self.drill.names[0]

    def destinations(self, message_id: str) -> frozenset[str] | None:
        """The namespaces that must each process the message exactly once; None: exactly once, anywhere."""
        return None

    def problems(self, summary: dict[str, Any], details: dict[str, Any], by_event: dict[str, list[Record]],
                 handled: list[Record]) -> list[str]:
        """The pattern's own checks of what the drill's records show (metrics.CHECKS)."""
        return CHECKS[self.pattern](summary, details, by_event, handled, self)

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
                 writer: str) -> Worker:
        """A region-local consumer in its own worker."""
        consumer = LocalConsumer(region, handler, entity=entity, audit=self.drill.sink(writer),
                                 processor=processor)
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


class AllActive(Scenario):
    pattern = "all-active"

    def topology(self, names: tuple[str, ...], audit_sink: str) -> Topology:
        return federation.all_active(list(names), TOPIC, audit_sink=audit_sink)

    def destinations(self, message_id: str) -> frozenset[str]:
        return frozenset(self.drill.names)

    def start(self, rate: float) -> None:
        drill = self.drill
        primary, secondary = drill.names
        senders = drill.regions(topic=TOPIC)
        self.home_primary = FailoverProducer(
            *senders, entity=TOPIC, policy=drill.policy, audit=drill.sink(f"producer-{primary}")
        )
        self.home_secondary = FailoverProducer(
            *reversed(drill.regions(topic=TOPIC)),
            entity=TOPIC,
            policy=drill.policy,
            audit=drill.sink(f"producer-{secondary}"),
        )
        half = drill.settings.messages // 2
        self._produce(self.home_primary, "p", drill.settings.messages - half, rate / 2)
        self._produce(self.home_secondary, "s", half, rate / 2)
        for region in drill.regions(topic=TOPIC, subscription="consumer"):
            self._consume(region, lambda message: None, entity=TOPIC, processor=f"consumer-{region.name}",
                          writer=f"consumer-{region.name}")

    def status(self) -> str:
        return f"producer(p) on {'primary' if self.home_primary.on_primary else 'secondary'}"

    def details(self) -> dict[str, Any]:
        return {**super().details(), "producer_events": _events(self.home_primary.events)}


class ActivePassive(Scenario):
    pattern = "active-passive"

    def topology(self, names: tuple[str, ...], audit_sink: str) -> Topology:
        return federation.active_passive(*names, TOPIC, ttl=self.drill.settings.ttl, audit_sink=audit_sink)

    def start(self, rate: float) -> None:
        drill = self.drill
        self.deliveries = DeliveryLog()
        self.producer = FailoverProducer(
            *drill.regions(topic=TOPIC), entity=TOPIC, policy=drill.policy, audit=drill.sink("producer")
        )
        receivers = [
            recorded(r, self.deliveries) for r in drill.regions(topic=TOPIC, subscription="consumer")
        ]
        options = ConsumerOptions(
            publishers_on_primary=lambda: self.producer.on_primary, processor="consumer"
        )
        self.consumer = FailoverConsumer(
            *receivers,
            lambda message: None,
            entity=TOPIC,
            policy=drill.policy,
            options=options,
            audit=drill.sink("consumer"),
        )
        self._produce(self.producer, "m", drill.settings.messages, rate)
        self.workers.append(Worker("consumer", lambda stop: self.consumer.run(until=stop.is_set)).start())

    def status(self) -> str:
        consumer = (
            "draining secondary"
            if self.consumer.draining
            else ("primary" if self.consumer.on_primary else "secondary")
        )
        return (
            f"producer on {'primary' if self.producer.on_primary else 'secondary'}, consumer on {consumer}, "
            f"duplicates skipped {len(self.consumer.duplicates)}"
        )

    def consumer_back_at(self, restored: dt.datetime) -> dt.datetime | None:
        return next(
            (e.time for e in self.consumer.events if e.kind == "failback" and e.time >= restored), None
        )

    def details(self) -> dict[str, Any]:
        """Every delivery the broker made is either a processed message or a reported duplicate; a duplicate
        the secondary handed over had been there for less than the replica TTL."""
        deliveries = self.deliveries.snapshot()
        processed = Counter(mid for ids in self.drill.tracker.processed.values() for mid in ids)
        reported = Counter(d.message_id for d in self.consumer.duplicates)
        delivered = Counter(d.message_id for d in deliveries)
        unreported = delivered - processed - reported
        ttl = parse_duration(self.drill.settings.ttl)
        lock = parse_duration(self.drill.settings.lock_duration)
        secondary = self.drill.names[1]
        # the broker expires a replica on time to the timer's granularity; a second more is still a bug
        outside = sorted({d.message_id for d in deliveries
                          if d.namespace == secondary and d.message_id in reported
                          and d.delivered(lock) - d.enqueued > ttl + dt.timedelta(seconds=1)})
        return {
            "duplicates_delivered": sum((delivered - processed).values()),
            "duplicates_reported": len(self.consumer.duplicates),
            "duplicates_by": dict(Counter(d.caught_by for d in self.consumer.duplicates)),
            "duplicates_unreported": sorted(unreported),
            "duplicates_outside_ttl_window": outside,
            "replica_ttl_s": ttl.total_seconds(),
            "producer_events": _events(self.producer.events),
            "consumer_events": _events(self.consumer.events),
        }


class Spillover(Scenario):
    pattern = "spillover"

    def topology(self, names: tuple[str, ...], audit_sink: str) -> Topology:
        return federation.spillover(
            list(names), QUEUE, deadline=self.drill.settings.deadline, audit_sink=audit_sink
        )

    def start(self, rate: float) -> None:
        drill = self.drill
        self.producer = FailoverProducer(
            *drill.regions(queue=QUEUE), entity=QUEUE, policy=drill.policy, audit=drill.sink("producer")
        )
        self._produce(self.producer, "w", drill.settings.messages, rate)
        self.poison = {
            self.producers[0].message_id(i)
            for i in range(drill.settings.messages)
            if i % POISON_EVERY == POISON_EVERY // 2
        }
        self.primary_region, secondary_region = drill.regions(queue=QUEUE, receive=True)
        self.primary_consumer = self._consumer(self.primary_region, QUEUE)
        self._consumer(secondary_region, QUEUE)
        for region in drill.regions(queue=QUEUE + AUX_SUFFIX, receive=True):
            self._consumer(region, QUEUE + AUX_SUFFIX)
        self.stopped_at: dt.datetime | None = None
        self.restarted_at: dt.datetime | None = None

    def _consumer(self, region: Region, queue: str) -> Worker:
        aux = queue.endswith(AUX_SUFFIX)
        return self._consume(region, (lambda message: None) if aux else self._handle, entity=QUEUE,
                             processor=f"{region.name}/{queue}", writer=f"consumer-{region.name}-{queue}")

    def _handle(self, message: Any) -> None:
        if str(message.message_id) in self.poison:
            raise PoisonMessage(message.message_id)

    def steps(self, after: float) -> list[Step]:
        stopped_for = parse_duration(self.drill.settings.deadline).total_seconds()
        return [
            Step(after, "primary consumer stopped", self._stop_primary_consumer),
            Step(after + stopped_for, "primary consumer restarted", self._restart_primary_consumer),
        ]

    def _stop_primary_consumer(self) -> None:
        self.primary_consumer.stop()
        self.workers.remove(self.primary_consumer)
        self.stopped_at = dt.datetime.now(dt.UTC)

    def _restart_primary_consumer(self) -> None:
        self.primary_consumer = self._consumer(self.primary_region, QUEUE)
        self.restarted_at = dt.datetime.now(dt.UTC)

    def status(self) -> str:
        consumer = "stopped" if self.stopped_at and not self.restarted_at else "running"
        return (
            f"producer on {'primary' if self.producer.on_primary else 'secondary'}, "
            f"primary consumer {consumer}"
        )

    def details(self) -> dict[str, Any]:
        return {
            **super().details(),
            "poison": sorted(self.poison & self.drill.tracker.sent_ids()),
            "consumer_stopped_at": _iso(self.stopped_at),
            "consumer_restarted_at": _iso(self.restarted_at),
            "deadline_s": parse_duration(self.drill.settings.deadline).total_seconds(),
            "producer_events": _events(self.producer.events),
        }


def _iso(moment: dt.datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def _events(events: list[Any]) -> list[dict[str, str]]:
    return [{"time": e.time.isoformat(), "kind": e.kind, "reason": e.reason} for e in events]


PATTERNS: tuple[type[Scenario], ...] = (AllActive, ActivePassive, Spillover)
