"""What a continuous run (`--follow`) knows after each micro-batch, and the rolling status it shows.

`Progress` is small (per log, per target and entity, per status) and kept as JSON in the checkpoint, one
file per micro-batch; the file is written last, so it also marks the micro-batch's state as complete.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from spark_reconcile import metrics, summary
from spark_reconcile.classify import Comparison
from spark_reconcile.config import Settings, iso_micros
from spark_reconcile.metrics import COUNTERS

_US_PER_S = 1_000_000


@dataclass
class Progress:
    batch: int = -1
    records: dict[str, int] = field(default_factory=dict)
    malformed: dict[str, int] = field(default_factory=dict)
    sent_logs: list[str] = field(default_factory=list)
    entities: list[str] = field(default_factory=list)
    marks: list[tuple[str, str, int]] = field(default_factory=list)  # (target, entity, latest arrival us)
    seen: dict[str, int] = field(default_factory=dict)  # log tag -> its latest record's time, us
    # Final verdicts so far: count rows per (target, entity, status) with the cube's counters.
    totals: list[dict] = field(default_factory=list)
    state_rows: int = 0
    open: list[dict] = field(default_factory=list)  # keys not final yet: (target, status, n)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Progress:
        found = json.loads(text)
        found["marks"] = [tuple(m) for m in found["marks"]]
        return cls(**found)

    def watermarks(self) -> dict[tuple[str, str], int]:
        return {(t, e): wm for t, e, wm in self.marks}

    def add(self, found: metrics.Inventory, seen: dict[str, int | None]) -> None:
        """Fold one micro-batch's inventory and its logs' latest records in."""
        for tag, n in found.records.items():
            self.records[tag] = self.records.get(tag, 0) + n
        for tag, n in found.malformed.items():
            self.malformed[tag] = self.malformed.get(tag, 0) + n
        self.sent_logs = sorted(set(self.sent_logs) | found.sent_logs)
        self.entities = sorted(set(self.entities) | set(found.entities))
        marks = self.watermarks()
        for key, wm in found.watermarks.items():
            marks[key] = max(marks.get(key, wm), wm)
        self.marks = [(t, e, wm) for (t, e), wm in sorted(marks.items())]
        for tag, t in seen.items():
            if t is not None:
                self.seen[tag] = max(self.seen.get(tag, t), t)

    def count_final(self, cube_rows: list[dict]) -> None:
        """Add a micro-batch's final verdicts (its cube rows) to the running totals."""
        self.totals = merge_counts(self.totals, metrics.counts(cube_rows))

    def reached(self, tags: list[str]) -> int | None:
        """How far all these logs have come: the earliest of their latest records (None: one has none)."""
        times = [self.seen.get(t) for t in tags]
        return None if not times or None in times else min(times)


def merge_counts(*parts: list[dict]) -> list[dict]:
    """Count rows summed per (target, entity, status); hours are dropped (a running total stays small)."""
    out: dict[tuple, dict] = {}
    for rows in parts:
        for r in rows:
            key = (r["target"], r["entity"], r["status"])
            row = out.setdefault(key, {"target": key[0], "entity": key[1], "status": key[2]}
                                 | dict.fromkeys(COUNTERS, 0))
            for c in COUNTERS:
                row[c] += r[c]
    return [out[k] for k in sorted(out)]


def comparison_status(c: Comparison, p: Progress, recent: list[dict], *, settings: Settings, now_us: int,
                      window_start_us: int, alert: dict | None) -> dict:
    """One comparison's rolling status: final verdicts so far and in the last window (counts and lag
    percentiles), what is still open, the target's watermark per entity and its age, the state held."""
    lag = metrics.percentiles(recent)["target"].get((c.target,))
    open_keys = {r["status"]: r["n"] for r in p.open if r["target"] == c.target}
    entities = [{"entity": e, "watermark": iso_micros(wm), "watermark_age_s": _age(now_us, wm)}
                for t, e, wm in p.marks if t == c.target]
    return {
        "target": c.target,
        "sources": list(c.sources),
        "mode": settings.mode,
        "micro_batch": p.batch,
        "updated_at": iso_micros(now_us),
        "final": summary.counters(r for r in p.totals if r["target"] == c.target),
        "last_window": {"since": iso_micros(window_start_us),
                        **summary.counters(r for r in metrics.counts(recent) if r["target"] == c.target),
                        "lag_ms": None if lag is None else lag.as_dict()},
        "open": {"keys": sum(open_keys.values()), **open_keys},
        "state_rows": p.state_rows,
        "entities": entities,
        "inputs": [{"tag": tag, "records_read": p.records.get(tag, 0),
                    "malformed_records": p.malformed.get(tag, 0),
                    "latest_record": iso_micros(p.seen.get(tag))} for tag in settings.tags()],
        "alert": alert,
    }


def _age(now_us: int, then_us: int) -> float:
    return round((now_us - then_us) / _US_PER_S, 3)
