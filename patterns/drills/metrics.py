"""The figures of a drill, from its audit logs (docs/audit-log.md) and its clients' reports: messages sent,
processed, lost, processed twice, time to fail over and back, replication lag; plus each pattern's checks,
and the text the drill prints."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from patterns.transforms import AUX_SUFFIX
from replicators.stamps import HOP_SEPARATOR

if TYPE_CHECKING:
    from patterns.drills.run import DrillSettings, Timeline
    from patterns.drills.scenarios import Scenario

Record = dict[str, Any]
LIST_LIMIT = 20  # ids listed per problem in the summary


def read_records(audit_dir: Path) -> list[Record]:
    """Every record under the audit root, whichever writer wrote it."""
    records = []
    for path in sorted(audit_dir.rglob("*.jsonl")):
        with open(path, encoding="utf-8") as handle:
            records.extend(json.loads(line) for line in handle if line.strip())
    return records


def parse_time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def hops(record: Record) -> int:
    """How many replication hops a record's message made (0: an original)."""
    source = record.get("repl_source")
    return 0 if not source else len(source.split(HOP_SEPARATOR))


def percentile(values: list[float], fraction: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def replication_lag_ms(records: Iterable[Record]) -> list[float]:
    """Replica EnqueuedTimeUtc minus its origin's (`repl-enqueued-time`, first hop), per replica seen."""
    return [
        (
            parse_time(r["enqueued_time_utc"]) - parse_time(r["repl_enqueued_time"].split(HOP_SEPARATOR)[0])
        ).total_seconds()
        * 1000
        for r in records
        if r.get("repl_enqueued_time")
    ]


def _first_after(records: Iterable[Record], moment: dt.datetime | None) -> float | None:
    """Seconds from `moment` to the earliest record observed at or after it."""
    if moment is None:
        return None
    times = [t for t in (parse_time(r["observed_time_utc"]) for r in records) if t >= moment]
    return None if not times else round((min(times) - moment).total_seconds(), 3)


def _consumer_back(
    scenario: Scenario, processed: list[Record], primary: str, restored: dt.datetime | None
) -> float | None:
    """Seconds from the primary's return until the consumer switched back to it, or (for consumers that never
    switch) until the first message it processed there."""
    if restored is None:
        return None
    back = scenario.consumer_back_at(restored)
    if back is not None:
        return round((back - restored).total_seconds(), 3)
    return _first_after([r for r in processed if r["namespace"] == primary], restored)


def _ids(ids: Iterable[str]) -> list[str]:
    return sorted(ids)[:LIST_LIMIT]


def summarize(settings: DrillSettings, scenario: Scenario, timeline: Timeline, records: list[Record]) -> dict:
    run = f"-{scenario.drill.run_id}-"  # a reused broker may still hold messages of earlier drills
    by_event: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        if run in record["message_id"]:
            by_event[record["event"]].append(record)
    sent = {r["message_id"]: r for r in by_event["sent"]}
    processed = [r for r in by_event["processed"] if not r.get("processor", "").endswith(AUX_SUFFIX)]
    aux = [r for r in by_event["processed"] if r.get("processor", "").endswith(AUX_SUFFIX)]
    handled = processed + aux
    problems: list[str] = []

    lost, twice, astray = _where_processed(scenario, sent, handled)
    if lost:
        problems.append(f"{len(lost)} message(s) lost: {_ids(lost)}")
    if astray:
        problems.append(f"{len(astray)} message(s) processed where they do not belong: {_ids(astray)}")
    homed = scenario.producers[0].prefix + "-"  # the producer whose home is the primary
    own_sends = [r for r in by_event["sent"] if r["message_id"].startswith(homed)]
    lag = replication_lag_ms(by_event["enqueued"] or processed)
    summary: dict[str, Any] = {
        "pattern": settings.pattern,
        "out": str(settings.out),
        "settings": {
            "messages": settings.messages,
            "outage_s": settings.outage,
            "mode": settings.mode,
            "warmup_s": settings.warmup,
            "probe_interval_s": settings.probe_interval,
            "lock_duration": settings.lock_duration,
            "ttl": settings.ttl,
            "deadline": settings.deadline,
        },
        "namespaces": list(scenario.drill.names),
        "sent": len(sent),
        "sent_by_namespace": dict(Counter(r["namespace"] for r in sent.values())),
        "unsent": sum(len(p.unsent) for p in scenario.producers),
        "processed": len({r["message_id"] for r in handled}),
        "processed_by_namespace": dict(Counter(r["namespace"] for r in processed)),
        "lost": len(lost),
        "processed_twice": len(twice),
        "down": scenario.down,
        "fails_over": scenario.fails_over,
        **_switch_times(scenario, timeline, processed, own_sends),
        "replication_lag_ms": {
            "p50": _round(percentile(lag, 0.5)),
            "p99": _round(percentile(lag, 0.99)),
            "max": _round(max(lag, default=None)),
            "replicas": len(lag),
        },
        "fault_at": _iso(timeline.fault_at),
        "restored_at": _iso(timeline.restored_at),
        "settled": timeline.settled_at is not None,
        "duration_s": round((timeline.finished_at - timeline.started).total_seconds(), 1)
        if timeline.finished_at
        else None,
        "steps": timeline.steps,
    }
    if twice:
        summary["processed_twice_ids"] = _ids(twice)
    details = scenario.details()
    problems += scenario.problems(summary, details, by_event, handled)
    summary["pattern_details"] = details
    summary["problems"] = problems
    summary["passed"] = not problems
    return summary


def _where_processed(scenario: Scenario, sent: Iterable[str],
                     handled: list[Record]) -> tuple[set[str], set[str], set[str]]:
    """Messages lost (not processed where they must be), processed twice (in one of their destinations, or
    anywhere when they have none), and processed in a namespace that is not one of their destinations."""
    anywhere = Counter(r["message_id"] for r in handled)
    by_namespace = Counter((r["namespace"], r["message_id"]) for r in handled)
    lost, twice, astray = set(), set(), set()
    for message_id in set(sent) | set(anywhere):
        where = scenario.destinations(message_id)
        counts = [anywhere[message_id]] if where is None else [by_namespace[ns, message_id] for ns in where]
        if message_id in sent and 0 in counts:
            lost.add(message_id)
        if any(n > 1 for n in counts):
            twice.add(message_id)
        if sum(counts) < anywhere[message_id]:
            astray.add(message_id)
    return lost, twice, astray


def _switch_times(scenario: Scenario, timeline: Timeline, processed: list[Record],
                  own_sends: list[Record]) -> dict[str, dict[str, float | None]]:
    """Seconds from the fault until the primary's producer and the consumer worked on the secondary, and from
    the primary's return until they worked there again. Where nothing fails over (the recipes), only the
    last: the first message processed in the namespace that was down, after it came back."""
    down = scenario.down
    if not scenario.fails_over:
        back = _first_after([r for r in processed if r["namespace"] == down], timeline.restored_at)
        return {"time_to_fail_over_s": {"producer": None, "consumer": None},
                "time_to_fail_back_s": {"producer": None, "consumer": back}}
    secondary = scenario.drill.names[1]
    fault = timeline.fault_at
    return {
        "time_to_fail_over_s": {
            "producer": _first_after([r for r in own_sends if r["namespace"] == secondary], fault),
            "consumer": _first_after([r for r in processed if r["namespace"] == secondary], fault),
        },
        "time_to_fail_back_s": {
            "producer": _first_after([r for r in own_sends if r["namespace"] == down], timeline.restored_at),
            "consumer": _consumer_back(scenario, processed, down, timeline.restored_at),
        },
    }


def _check_all_active(
    summary: dict, details: dict, by_event: dict[str, list[Record]], handled: list[Record], scenario: Scenario
) -> list[str]:
    """Every region gets every message enqueued once (audit taps) and processed once (consumers), none
    bounces."""
    names = scenario.drill.names
    problems = check_arrivals(by_event, names, lambda message_id: names, details)
    if summary["processed_twice"]:
        problems.append(f"{summary['processed_twice']} message(s) processed twice in one region")
    return problems


def check_arrivals(by_event: dict[str, list[Record]], names: Iterable[str],
                   arrivals: Callable[[str], Iterable[str]], details: dict) -> list[str]:
    """Each message sent is enqueued exactly once in each namespace `arrivals` names for it (audit taps),
    in no other, and never after more than one hop. An enqueue is a (MessageId, SequenceNumber): the audit
    taps are at-least-once, so a tap whose complete an outage cut sees the message again when its lock
    expires, with the same sequence number; a second enqueue (a copy duplicate detection let through, or a
    copy that came back) has a new one."""
    problems = []
    sent = {r["message_id"] for r in by_event["sent"]}
    for ns in names:
        records = [r for r in by_event["enqueued"] if r["namespace"] == ns]
        enqueues = {(r["message_id"], r["sequence_number"]) for r in records}
        seen = Counter(message_id for message_id, _ in enqueues)
        expected = {m for m in sent if ns in arrivals(m)}
        missing, extra = expected - set(seen), {m for m, n in seen.items() if n > 1}
        astray = (set(seen) & sent) - expected
        details[f"enqueued_in_{ns}"] = sum(seen.values())
        details[f"audit_redeliveries_in_{ns}"] = len(records) - len(enqueues)
        if missing:
            problems.append(f"{len(missing)} message(s) never reached {ns}: {_ids(missing)}")
        if extra:
            problems.append(f"{len(extra)} message(s) reached {ns} more than once: {_ids(extra)}")
        if astray:
            problems.append(f"{len(astray)} message(s) reached {ns}, where they do not belong: "
                            f"{_ids(astray)}")
    bounced = {r["message_id"] for r in by_event["enqueued"] if hops(r) > 1}
    details["bounced"] = len(bounced)
    if bounced:
        problems.append(f"{len(bounced)} message(s) bounced back: {_ids(bounced)}")
    return problems


def _check_active_passive(
    summary: dict, details: dict, by_event: dict[str, list[Record]], handled: list[Record], scenario: Scenario
) -> list[str]:
    """Nothing lost (checked for all); every repeated delivery reported; duplicates within the TTL window."""
    problems = []
    if details["duplicates_unreported"]:
        problems.append(
            f"deliveries neither processed nor reported as duplicates: "
            f"{_ids(details['duplicates_unreported'])}"
        )
    if details["duplicates_outside_ttl_window"]:
        problems.append(
            f"duplicates enqueued on the secondary before the TTL window: "
            f"{_ids(details['duplicates_outside_ttl_window'])}"
        )
    if not any(e["kind"] == "failover" for e in details["consumer_events"]):
        problems.append("the consumer never failed over")
    return problems


def _check_spillover(
    summary: dict, details: dict, by_event: dict[str, list[Record]], handled: list[Record], scenario: Scenario
) -> list[str]:
    """The stopped consumer's messages are handled by the other region before the deadline; nothing bounces;
    the auxiliary queues get exactly the double spills (the poison messages)."""
    problems = []
    primary, secondary = scenario.drill.names
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
                f"messages of the stopped consumer not handled by {secondary}: {_ids(stranded - took_over)}"
            )
        if late:
            problems.append(
                f"spilled messages handled after the {deadline.total_seconds():.0f} s deadline: {_ids(late)}"
            )
    if bounced:
        problems.append(f"{len(bounced)} message(s) bounced: {_ids(bounced)}")
    if set(in_aux) != poison or any(n > 1 for n in in_aux.values()):
        problems.append(
            f"the auxiliary queues hold {dict(in_aux)} instead of each double spill once: {_ids(poison)}"
        )
    if details["poison_processed"]:
        problems.append(f"poison messages processed: {_ids(details['poison_processed'])}")
    return problems


CHECKS = {
    "all-active": _check_all_active,
    "active-passive": _check_active_passive,
    "spillover": _check_spillover,
}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _iso(moment: dt.datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def _seconds(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f} s"


def format_summary(summary: dict) -> str:
    """What a drill prints at the end."""
    s = summary
    lag, over, back = s["replication_lag_ms"], s["time_to_fail_over_s"], s["time_to_fail_back_s"]
    by_ns = ", ".join(f"{ns} {n}" for ns, n in sorted(s["sent_by_namespace"].items()))
    lines = [
        f"{s['pattern']} drill: {'PASS' if s['passed'] else 'FAIL'} ({s['settings']['outage_s']:.0f} s "
        f"outage of {s['down']}, mode {s['settings']['mode']}, {s['duration_s']} s)",
        f"  messages sent {s['sent']} ({by_ns}), processed {s['processed']}, lost {s['lost']}, "
        f"processed twice {s['processed_twice']}",
        f"  time to fail over: producer {_seconds(over['producer'])}, consumer {_seconds(over['consumer'])}; "
        f"time to fail back: producer {_seconds(back['producer'])}, consumer {_seconds(back['consumer'])}"
        if s["fails_over"] else
        f"  nothing fails over; first message processed in {s['down']} {_seconds(back['consumer'])} after "
        "it came back",
        f"  replication lag p50 {lag['p50']} ms, p99 {lag['p99']} ms, max {lag['max']} ms "
        f"({lag['replicas']} replicas)",
    ]
    d = s["pattern_details"]
    if "duplicates_delivered" in d:
        lines.append(
            f"  duplicates delivered {d['duplicates_delivered']}, reported {d['duplicates_reported']} "
            f"(by {d['duplicates_by'] or 'none'}), replica TTL {d['replica_ttl_s']:.0f} s"
        )
    if "spilled" in d:
        lines.append(
            f"  primary consumer stopped: {d.get('handled_by_other_region', 0)} of its "
            f"{d.get('stopped_consumer_messages', 0)} messages handled by the other region, the oldest "
            f"{d.get('handled_by_other_region_age_max_s', 0)} s after it was sent "
            f"(deadline {d['deadline_s']:.0f} s)")
        lines.append(f"  spilled {d['spilled']} in all (oldest handled at {d['spilled_age_max_s']} s), "
                     f"double spills in the aux queues {d['double_spills']}")
    if "bounced" in d:
        reached = ", ".join(f"{k.removeprefix('enqueued_in_')} {v}" for k, v in d.items()
                            if k.startswith("enqueued_in_"))
        again = ", ".join(f"{k.removeprefix('audit_redeliveries_in_')} {v}" for k, v in d.items()
                          if k.startswith("audit_redeliveries_in_"))
        lines.append(f"  messages enqueued per region: {reached}; bounced {d['bounced']}; "
                     f"seen again by the audit taps (redelivered): {again}")
    if "outcome" in d:
        lines.append(f"  {d['outcome']}")
    skipped = d.get("duplicates_skipped") or {}
    if any(skipped.values()):
        lines.append("  repeated deliveries skipped by MessageId: "
                     + ", ".join(f"{name} {n}" for name, n in skipped.items() if n))
    lines += [f"  PROBLEM: {p}" for p in s["problems"]]
    lines.append(f"  summary: {Path(s['out']) / 'drill-summary.json'}")
    return "\n".join(lines)
