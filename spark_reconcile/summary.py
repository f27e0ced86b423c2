"""The JSON summary: plain Python over what the job collected (small), so it is easy to test and to read."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from spark_reconcile.classify import STATUSES, Comparison
from spark_reconcile.config import Settings, iso_micros
from spark_reconcile.metrics import BUCKET_RATIO, LagStats, bucket_value

EXPECTED_STATUSES = ("ok", "late", "pending", "missing", "expired")
NO_DATA = "no data"  # the verdict of a run with nothing to compare: not a pass
_US_PER_S = 1_000_000


@dataclass
class Collected:
    """Everything the Spark side hands over (all keyed by target first)."""

    counts: list[dict]
    lag: dict[str, dict[tuple, LagStats]]
    histogram: dict[str, list[tuple[int, int]]]
    ordering: list[dict]
    source_gaps: list[dict]
    watermarks: dict[tuple[str, str], int | None]
    malformed: dict[str, int]
    records: dict[str, int]
    sent_logs: set[str] = field(default_factory=set)
    samples: dict[str, list[dict]] = field(default_factory=dict)


def counters(rows: Iterable[dict]) -> dict:
    """Status counts and duplicate/row counters for any slice of the count rows."""
    block = dict.fromkeys(STATUSES, 0) | {"original_unsent": 0, "dup_keys": 0, "dup_extra": 0,
                                          "source_dup_extra": 0, "source_rows": 0, "target_rows": 0}
    for r in rows:
        block[r["status"]] += r["n"]
        block["original_unsent"] += r.get("unsent", 0)
        block["dup_keys"] += r["dup_keys"]
        block["dup_extra"] += r["dup_extra"]
        block["source_dup_extra"] += r["source_dup_extra"]
        block["source_rows"] += r["p_rows"]
        block["target_rows"] += r["s_rows"]
    expected = sum(block[s] for s in EXPECTED_STATUSES)
    block["expected"] = expected
    delivered = block["ok"] + block["late"]
    block["completeness_pct"] = round(100.0 * delivered / expected, 4) if expected else None
    return block


def _lag(stats: LagStats | None) -> dict | None:
    return None if stats is None else stats.as_dict()


def comparison_summary(c: Comparison, data: Collected, now_us: int) -> dict:
    rows = [r for r in data.counts if r["target"] == c.target]
    lag = data.lag
    by_entity: dict[str, list[dict]] = defaultdict(list)
    by_hour: dict[int, list[dict]] = defaultdict(list)
    by_entity_hour: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for r in rows:
        by_entity[r["entity"]].append(r)
        by_hour[r["hour_us"]].append(r)
        by_entity_hour[(r["entity"], r["hour_us"])].append(r)
    entities = []
    for entity in sorted(by_entity):
        wm = data.watermarks.get((c.target, entity))
        entities.append({
            "entity": entity, **counters(by_entity[entity]),
            "lag_ms": _lag(lag["entity"].get((c.target, entity))),
            "watermark": iso_micros(wm),
            "watermark_age_s": None if wm is None else round((now_us - wm) / _US_PER_S, 3),
        })
    hours = [{"hour": iso_micros(h), **counters(by_hour[h]), "lag_ms": _lag(lag["hour"].get((c.target, h)))}
             for h in sorted(by_hour)]
    entity_hours = [{"entity": e, "hour": iso_micros(h), **counters(by_entity_hour[(e, h)]),
                     "lag_ms": _lag(lag["entity_hour"].get((c.target, e, h)))}
                    for e, h in sorted(by_entity_hour)]
    return {
        "target": c.target,
        "sources": list(c.sources),
        "totals": counters(rows),
        # Originals at the target are checked against `sent` records only when its log holds some.
        "originals_checked_against_sent": c.target in data.sent_logs,
        "lag_ms": _lag(lag["target"].get((c.target,))),
        "entities": entities,
        "hours": hours,
        "entity_hours": entity_hours,
        "out_of_order": [{k: v for k, v in r.items() if k != "target"}
                         for r in data.ordering if r["target"] == c.target],
        "lag_histogram": [{"bucket": b, "lag_ms": round(bucket_value(b), 3), "messages": n}
                          for b, n in data.histogram.get(c.target, [])],
    }


def failures(comparisons: list[dict], settings: Settings) -> list[str]:
    """Why the run should fail a pipeline (empty list: it passes)."""
    out = []
    for c in comparisons:
        t = c["totals"]
        if settings.max_missing.exceeded(t["missing"], t["expected"]):
            out.append(f"{c['target']}: {t['missing']} missing messages exceed the threshold "
                       f"{settings.max_missing.describe()}")
        if t["target_rows"] == 0 and t["expected"] > 0:
            out.append(f"{c['target']}: no records at all for {t['expected']} expected messages "
                       "(is the replica, its replication task or its audit tap down?)")
    return out


def no_data(comparisons: list[dict], settings: Settings, data: Collected) -> list[str]:
    """Why the run proves nothing (empty list: it had something to compare): a log without one usable record
    in the window read (a mistyped path to an existing folder, a stopped audit tap), or a comparison that
    expected no message. Nothing was lost, but nothing was checked either."""
    start, end = settings.window.read_range(settings.lookahead)
    read = "" if start is None and end is None else (
        f" from {_iso(start) or 'the start'} to {_iso(end) or 'the end'}")
    out = []
    for log in settings.logs:
        records, malformed = data.records.get(log.tag, 0), data.malformed.get(log.tag, 0)
        if records == malformed:
            what = f"{records} records, all malformed" if records else "no records"
            out.append(f"log {log.tag} ({log.path}): {what}{read}")
    for c in comparisons:
        if c["totals"]["expected"] == 0:
            out.append(f"{' + '.join(c['sources'])} -> {c['target']}: no expected messages in the window")
    return out


def verdict(failed: list[str], empty: list[str]) -> str:
    """`fail` over `no data` over `pass`."""
    return "fail" if failed else NO_DATA if empty else "pass"


def build(settings: Settings, comparisons: tuple[Comparison, ...], data: Collected, *, now_us: int,
          engine: dict, outputs: dict[str, str], timings: dict[str, float]) -> dict:
    parts = [comparison_summary(c, data, now_us) for c in comparisons]
    failed, empty = failures(parts, settings), no_data(parts, settings, data)
    return {
        "verdict": verdict(failed, empty),
        "failures": failed,
        "no_data": empty,
        "mode": settings.mode,
        "source": settings.source,
        "expected_event": settings.expected_event,
        "window": {"start": _iso(settings.window.start), "end": _iso(settings.window.end),
                   "lookahead_s": settings.lookahead.total_seconds()},
        "settings": {
            "grace_s": settings.grace.total_seconds(),
            "skew_s": settings.skew.total_seconds(),
            "replica_ttl_s": {k: v.total_seconds() for k, v in settings.replica_ttl.items()},
            "missing_threshold": settings.max_missing.describe(),
            "identity": "entity + message_id" + (" + partition_key" if settings.use_partition_key else ""),
            "lag_percentiles": f"log-bucket histogram, ratio {BUCKET_RATIO}: within 1% of exact; "
                               "min and max exact",
        },
        "generated_at": iso_micros(now_us),
        "engine": engine,
        "inputs": [{"tag": log.tag, "path": log.path, "records_read": data.records.get(log.tag, 0),
                    "malformed_records": data.malformed.get(log.tag, 0)} for log in settings.logs],
        "comparisons": parts,
        "source_sequence_gaps": data.source_gaps,
        "samples": {name: [_iso_row(r) for r in rows] for name, rows in data.samples.items()},
        "outputs": outputs,
        "timings_s": {k: round(v, 3) for k, v in timings.items()},
    }


def _iso(value) -> str | None:
    return None if value is None else value.isoformat().replace("+00:00", "Z")


def _iso_row(row: dict) -> dict:
    return {k: iso_micros(v) if k in ("p_time", "s_first") else v for k, v in row.items()}
