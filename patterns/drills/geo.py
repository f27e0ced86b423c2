"""The Geo-Replication drills: one namespace whose broker keeps a replica in `west` (the primary) and one in
`north`, the pattern drills' workload (a producer and a consumer on one queue, through the namespace's one
connection string) and outage (the primary's region goes down, `--mode`), then what an operator does:

1. `--probe-interval` seconds into the outage (the time to decide), a forced promotion of `north`; the
   clients reconnect to the same connection string and carry on there;
2. once the outage is over, `west` is back (seeded again from `north`) and a planned promotion moves the
   primary back (the failback; it replicates what is left first, so it loses nothing).

`geo-replication` replicates synchronously (a forced promotion loses nothing); `geo-replication-async`
asynchronously to a far region (what ships arrives SHIP_LATENCY_MS later), so the forced promotion loses
what was acknowledged in that window: the broker's promotion answer lists it, and the drill reconciles that
list with what the consumer never saw. Loss beyond the list, or any loss in synchronous mode, fails the drill.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from patterns.building import connection_setting
from patterns.drills.broker import namespaces_only
from patterns.drills.clients import RegionProducer
from patterns.drills.metrics import Record, first_after, listed, parse_time
from patterns.drills.scenario import Scenario, Step
from topology import Topology, parse

REGIONS = ("west", "north")
QUEUE = "work"
SHIP_LATENCY_MS = 1000  # asynchronous: a far secondary, what ships arrives a second later
MAX_LAG = "PT1M"
BACK_AFTER_SECONDS = 3.0  # from the old primary's return (seeded again) to the planned promotion


class GeoReplication(Scenario):
    pattern = "geo-replication"
    namespace_roles = "the geo-replicated namespace"
    default_namespaces = ("geo",)
    namespace_counts = (1, 1)
    replication_mode = "synchronous"

    def __init__(self, drill: Any) -> None:
        super().__init__(drill)
        self.promotions: list[dict[str, Any]] = []
        self.promoted_at: dict[str, dt.datetime] = {}

    @classmethod
    def geo_replication(cls) -> dict[str, Any]:
        geo = {"regions": list(REGIONS), "primary": REGIONS[0], "mode": cls.replication_mode}
        return geo if cls.replication_mode == "synchronous" else {**geo, "max_lag": MAX_LAG}

    @classmethod
    def broker_topology(cls, names: tuple[str, ...]) -> dict[str, Any]:
        topology = namespaces_only(names)
        topology["namespaces"][names[0]]["geo_replication"] = cls.geo_replication()
        return topology

    def topology(self, names: tuple[str, ...], audit_sink: str) -> Topology:
        (name,) = names  # no replication task: the broker replicates; the clients write the audit records
        namespace = {"geo_replication": self.geo_replication(), "queues": {QUEUE: {}}}
        return parse({"namespaces": {name: namespace}, "connections": {connection_setting(name): name}})

    @property
    def control(self) -> Any:
        return self.drill.namespaces[self.down].control()

    def start(self, rate: float) -> None:
        drill = self.drill
        if self.replication_mode == "asynchronous":
            self.control.call("PUT", f"geo/regions/{REGIONS[1]}", {"latency_ms": SHIP_LATENCY_MS})
        producer = RegionProducer(drill.region(self.down, queue=QUEUE), QUEUE, drill.sink("producer"))
        self._produce(producer, "m", drill.settings.messages, rate)
        self._consume(drill.region(self.down, queue=QUEUE, receive=True), lambda message: None, entity=QUEUE,
                      processor="consumer", writer="consumer")

    def steps(self, after: float) -> list[Step]:
        """During the outage the forced promotion; at its end (while traffic still flows) the old primary's
        return and the planned promotion back."""
        settings = self.drill.settings
        decide = settings.warmup + min(settings.probe_interval, settings.outage / 2)
        back = settings.warmup + settings.outage
        return [
            Step(decide, f"forced promotion of {REGIONS[1]}", lambda: self._promote(REGIONS[1], "forced")),
            Step(back, f"{REGIONS[0]} back, seeded as a secondary",
                 lambda: self.control.call("PUT", f"geo/regions/{REGIONS[0]}", {"available": True})),
            Step(back + BACK_AFTER_SECONDS, f"planned promotion of {REGIONS[0]}",
                 lambda: self._promote(REGIONS[0], "planned")),
        ]

    def _promote(self, region: str, mode: str) -> None:
        self.promoted_at[mode] = dt.datetime.now(dt.UTC)
        self.promotions.append(self.control.call("POST", "geo/promote", {"region": region, "mode": mode}))

    def status(self) -> str:
        return f"primary {self.promotions[-1]['primary'] if self.promotions else REGIONS[0]}"

    def lost_by_promotion(self) -> set[str]:
        return {i for report in self.promotions for i in report.get("lost_message_ids", ())}

    def accounted_losses(self) -> set[str]:
        return self.lost_by_promotion() if self.replication_mode == "asynchronous" else set()

    def settled(self) -> bool:
        processed = set().union(*self.drill.tracker.processed_ids().values())
        return not self.drill.tracker.sent_ids() - processed - self.accounted_losses()

    def switch_times(self, timeline: Any, processed: list[Record],
                     sent: list[Record]) -> dict[str, dict[str, float | None]]:
        """Fail over: from the region outage until the producer's and the consumer's first message after
        the forced promotion; fail back: from the planned promotion, likewise."""
        forced, planned = self.promoted_at.get("forced"), self.promoted_at.get("planned")
        return {
            "time_to_fail_over_s": {"producer": _since(sent, forced, timeline.fault_at),
                                    "consumer": _since(processed, forced, timeline.fault_at)},
            "time_to_fail_back_s": {"producer": _since(sent, planned, planned),
                                    "consumer": _since(processed, planned, planned)},
        }

    def details(self) -> dict[str, Any]:
        return {**super().details(), "replication_mode": self.replication_mode,
                "promotions": [{k: v for k, v in p.items() if k != "lost_message_ids"} | {
                    "lost_message_ids": listed(p.get("lost_message_ids", ()))} for p in self.promotions]}

    def problems(self, summary: dict[str, Any], details: dict[str, Any], by_event: dict[str, list[Record]],
                 handled: list[Record]) -> list[str]:
        """The promotions happened; what the forced one lost is all the mode allows: nothing when synchronous;
        when asynchronous, only messages acknowledged within the lag window before the outage."""
        problems = [f"the {mode} promotion did not happen" for mode in ("forced", "planned")
                    if mode not in self.promoted_at]
        processed = {r["message_id"] for r in handled}
        reported = self.lost_by_promotion()
        details["lost_by_promotion"] = len(reported)
        details["lost_by_promotion_processed_before"] = len(reported & processed)  # handled before the outage
        details["lost_to_the_application"] = len(reported - processed)
        if self.replication_mode == "synchronous" and reported:
            problems.append(f"a synchronous forced promotion lost {len(reported)} message(s): "
                            f"{listed(reported)}")
        fault = parse_time(summary["fault_at"]) if summary["fault_at"] else None
        window = dt.timedelta(milliseconds=SHIP_LATENCY_MS + 1000)  # the lag, and a second of the client's
        sent_at = {r["message_id"]: parse_time(r["observed_time_utc"]) for r in by_event["sent"]}
        early = sorted(i for i in reported if fault and i in sent_at and sent_at[i] < fault - window)
        if early:
            problems.append(f"{len(early)} message(s) lost that were sent before the lag window: "
                            f"{listed(early)}")
        details["outcome"] = (
            f"{self.replication_mode} geo-replication: the forced promotion lost {len(reported)} message(s) "
            f"({len(reported - processed)} never processed, {len(reported & processed)} processed before the "
            "outage); the planned promotion lost "
            f"{sum(p.get('lost_operations', 0) for p in self.promotions if p.get('promotion') == 'planned')}")
        return problems


def _since(records: list[Record], moment: dt.datetime | None, origin: dt.datetime | None) -> float | None:
    """Seconds from `origin` to the first record at or after `moment` (a promotion)."""
    wait = first_after(records, moment)
    if wait is None or moment is None or origin is None:
        return None
    return round(wait + (moment - origin).total_seconds(), 3)


class GeoReplicationAsync(GeoReplication):
    pattern = "geo-replication-async"
    replication_mode = "asynchronous"


GEO_REPLICATION = (GeoReplication, GeoReplicationAsync)
