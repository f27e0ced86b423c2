"""The drills of the three federation patterns (scenario.py is their base; the recipes' drills are in
recipes.py):

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
from typing import Any

from patterns import federation
from patterns.drills.clients import DeliveryLog, PoisonMessage, Worker, recorded
from patterns.drills.metrics import Record, check_arrivals, hops, iso, listed, parse_time
from patterns.drills.scenario import Scenario, Step
from patterns.failover import ConsumerOptions, FailoverConsumer, FailoverProducer
from patterns.regions import Region
from patterns.transforms import AUX_SUFFIX
from topology import Topology
from topology.durations import parse_duration

TOPIC = "events"
QUEUE = "work"
POISON_EVERY = 50  # one message in 50 fails in every region (spillover's double spills)


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

    def problems(self, summary: dict[str, Any], details: dict[str, Any], by_event: dict[str, list[Record]],
                 handled: list[Record]) -> list[str]:
        """Every region gets every message enqueued once (audit taps) and processed once (consumers), none
        bounces."""
        names = self.drill.names
        problems = check_arrivals(by_event, names, lambda message_id: names, details)
        if summary["processed_twice"]:
            problems.append(f"{summary['processed_twice']} message(s) processed twice in one region")
        return problems



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

    def problems(self, summary: dict[str, Any], details: dict[str, Any], by_event: dict[str, list[Record]],
                 handled: list[Record]) -> list[str]:
        """Nothing lost (checked for all); every repeated delivery reported; duplicates within the TTL
        window."""
        problems = []
        if details["duplicates_unreported"]:
            problems.append(
                f"deliveries neither processed nor reported as duplicates: "
                f"{listed(details['duplicates_unreported'])}"
            )
        if details["duplicates_outside_ttl_window"]:
            problems.append(
                f"duplicates enqueued on the secondary before the TTL window: "
                f"{listed(details['duplicates_outside_ttl_window'])}"
            )
        if not any(e["kind"] == "failover" for e in details["consumer_events"]):
            problems.append("the consumer never failed over")
        return problems



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
            "consumer_stopped_at": iso(self.stopped_at),
            "consumer_restarted_at": iso(self.restarted_at),
            "deadline_s": parse_duration(self.drill.settings.deadline).total_seconds(),
            "producer_events": _events(self.producer.events),
        }

    def problems(self, summary: dict[str, Any], details: dict[str, Any], by_event: dict[str, list[Record]],
                 handled: list[Record]) -> list[str]:
        """The stopped consumer's messages are handled by the other region before the deadline; nothing
        bounces; the auxiliary queues get exactly the double spills (the poison messages)."""
        problems = []
        primary, secondary = self.drill.names
        sent = {r["message_id"]: r for r in by_event["sent"]}
        poison = set(details["poison"])
        in_aux = Counter(r["message_id"] for r in handled if r["processor"].endswith(AUX_SUFFIX))
        work = [r for r in handled if not r["processor"].endswith(AUX_SUFFIX)]
        spilled = [r for r in work if hops(r) == 1]
        bounced = {r["message_id"] for r in work if hops(r) > 1} | {m for m in in_aux if m not in poison}
        details.update(
            spilled=len(spilled),
            double_spills=sum(in_aux.values()),
            poison_processed=sorted(poison & {r["message_id"] for r in work}),
        )
        deadline = dt.timedelta(seconds=details["deadline_s"])
        ages = {
            r["message_id"]: parse_time(r["observed_time_utc"])
            - parse_time(sent[r["message_id"]]["observed_time_utc"])
            for r in spilled
            if r["message_id"] in sent
        }
        details["spilled_age_max_s"] = round(max(ages.values(), default=dt.timedelta()).total_seconds(), 3)
        stopped, restarted = details["consumer_stopped_at"], details["consumer_restarted_at"]
        if stopped and restarted:
            window = (parse_time(stopped), parse_time(restarted) - deadline / 2)
            stranded = {
                m
                for m, r in sent.items()
                if r["namespace"] == primary
                and m not in poison
                and window[0] <= parse_time(r["observed_time_utc"]) < window[1]
            }
            took_over = {r["message_id"] for r in spilled if r["namespace"] == secondary} & stranded
            late = {m for m in took_over if ages[m] > deadline}
            details.update(
                stopped_consumer_messages=len(stranded),
                handled_by_other_region=len(took_over),
                handled_by_other_region_age_max_s=round(
                    max((ages[m] for m in took_over), default=dt.timedelta()).total_seconds(), 3),
                handled_after_deadline=sorted(late),
            )
            if stranded - took_over:
                problems.append(
                    f"messages of the stopped consumer not handled by {secondary}: "
                    f"{listed(stranded - took_over)}"
                )
            if late:
                problems.append(
                    f"spilled messages handled after the {deadline.total_seconds():.0f} s deadline: "
                    f"{listed(late)}"
                )
        if bounced:
            problems.append(f"{len(bounced)} message(s) bounced: {listed(bounced)}")
        if set(in_aux) != poison or any(n > 1 for n in in_aux.values()):
            problems.append(
                f"the auxiliary queues hold {dict(in_aux)} instead of each double spill once: "
                f"{listed(poison)}"
            )
        if details["poison_processed"]:
            problems.append(f"poison messages processed: {listed(details['poison_processed'])}")
        return problems


def _events(events: list[Any]) -> list[dict[str, str]]:
    return [{"time": e.time.isoformat(), "kind": e.kind, "reason": e.reason} for e in events]


PATTERNS: tuple[type[Scenario], ...] = (AllActive, ActivePassive, Spillover)
