"""A drill's summary (`drill-summary.json`) and the text `sbfed drill` prints: the figures of docs/drills.md
from the audit records (metrics.py) and the scenario's own details and checks."""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from patterns.drills.drill import DrillSettings, Timeline
from patterns.drills.metrics import (
    Record,
    first_after,
    iso,
    listed,
    percentile,
    replication_lag_ms,
    where_processed,
)
from patterns.drills.scenario import Scenario
from patterns.transforms import AUX_SUFFIX


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

    lost, twice, astray = where_processed(scenario.destinations, sent, handled)
    unaccounted = set(lost) - scenario.accounted_losses()
    if unaccounted:
        problems.append(f"{len(unaccounted)} message(s) lost: {listed(unaccounted)}")
    if astray:
        problems.append(f"{len(astray)} message(s) processed where they do not belong: {listed(astray)}")
    homed = scenario.producers[0].prefix + "-"  # the producer whose home is the primary
    own_sends = [r for r in by_event["sent"] if r["message_id"].startswith(homed)]
    # the copies the audit taps saw (not the originals a source's tap saw), else what the consumers got
    lag = replication_lag_ms([r for r in by_event["enqueued"] if r.get("repl_enqueued_time")] or processed)
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
        **(scenario.switch_times(timeline, processed, own_sends)
           or _switch_times(scenario, timeline, processed, own_sends)),
        "replication_lag_ms": {
            "p50": _round(percentile(lag, 0.5)),
            "p99": _round(percentile(lag, 0.99)),
            "max": _round(max(lag, default=None)),
            "replicas": len(lag),
        },
        "fault_at": iso(timeline.fault_at),
        "restored_at": iso(timeline.restored_at),
        "settled": timeline.settled_at is not None,
        "duration_s": round((timeline.finished_at - timeline.started).total_seconds(), 1)
        if timeline.finished_at
        else None,
        "steps": timeline.steps,
    }
    if twice:
        summary["processed_twice_ids"] = listed(twice)
    details = scenario.details()
    problems += scenario.problems(summary, details, by_event, handled)
    summary["pattern_details"] = details
    summary["problems"] = problems
    summary["passed"] = not problems
    return summary


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
    return first_after([r for r in processed if r["namespace"] == primary], restored)


def _switch_times(scenario: Scenario, timeline: Timeline, processed: list[Record],
                  own_sends: list[Record]) -> dict[str, dict[str, float | None]]:
    """Seconds from the fault until the primary's producer and the consumer worked on the secondary, and from
    the primary's return until they worked there again. Where nothing fails over (the recipes), only the
    last: the first message processed in the namespace that was down, after it came back."""
    down = scenario.down
    if not scenario.fails_over:
        back = first_after([r for r in processed if r["namespace"] == down], timeline.restored_at)
        return {"time_to_fail_over_s": {"producer": None, "consumer": None},
                "time_to_fail_back_s": {"producer": None, "consumer": back}}
    secondary = scenario.drill.names[1]
    fault = timeline.fault_at
    return {
        "time_to_fail_over_s": {
            "producer": first_after([r for r in own_sends if r["namespace"] == secondary], fault),
            "consumer": first_after([r for r in processed if r["namespace"] == secondary], fault),
        },
        "time_to_fail_back_s": {
            "producer": first_after([r for r in own_sends if r["namespace"] == down], timeline.restored_at),
            "consumer": _consumer_back(scenario, processed, down, timeline.restored_at),
        },
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


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
        f"({lag['replicas']} replicas)" if lag["replicas"] else "  replication lag: no replica seen",
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
