"""Tiny audit logs (docs/audit-log.md layout) with every kind of problem planted, and the truth about them.

Two hours of traffic spanning a UTC midnight (23:00-01:00), two entities (one of them partitioned, one
with a `/` in its name), one message every two minutes.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

T0 = datetime(2026, 11, 22, 23, 0, tzinfo=UTC)
T1 = T0 + timedelta(hours=2)
PER_ENTITY = 60
ENTITIES = ("orders", "billing/payments")
PARTITION = {"orders": 0, "billing/payments": 3}
BASE_LAG = timedelta(milliseconds=150)
RETRY = timedelta(seconds=30)


def iso(t: datetime) -> str:
    return t.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def seq(entity: str, counter: int) -> int:
    return (PARTITION[entity] << 48) | counter


@dataclass
class Truth:
    status: dict[tuple[str, str], str] = field(default_factory=dict)  # (entity, message_id) -> status
    dup_extra: dict[tuple[str, str], int] = field(default_factory=dict)
    lag_ms: dict[tuple[str, str], float] = field(default_factory=dict)  # delivered: first copy - source
    out_of_order: dict[str, int] = field(default_factory=dict)
    max_displacement: dict[str, int] = field(default_factory=dict)
    source_gaps: dict[str, int] = field(default_factory=dict)
    malformed: dict[str, int] = field(default_factory=dict)

    def count(self, status: str, entity: str | None = None) -> int:
        return sum(1 for (e, _), s in self.status.items() if s == status and entity in (None, e))


def record(event: str, namespace: str, entity: str, message_id: str, enqueued: datetime, **extra) -> dict:
    return {"event": event, "namespace": namespace, "entity": entity, "message_id": message_id,
            "enqueued_time_utc": iso(enqueued), "observed_time_utc": iso(enqueued + timedelta(seconds=1)),
            **extra}


def write_log(root: Path, records: list[dict], extra_lines: list[str] = ()) -> Path:
    """Hive layout by UTC date/hour of enqueued_time_utc, one writer file per partition."""
    parts: dict[Path, list[str]] = defaultdict(list)
    for r in records:
        t = datetime.fromisoformat(r["enqueued_time_utc"].replace("Z", "+00:00"))
        d = (root / f"namespace={r['namespace']}" / f"entity={quote(r['entity'], safe='')}"
             / f"date={t:%Y-%m-%d}" / f"hour={t:%H}")
        parts[d].append(json.dumps(r))
    for i, (d, lines) in enumerate(sorted(parts.items())):
        d.mkdir(parents=True, exist_ok=True)
        text = lines + (list(extra_lines) if i == 0 else [])
        (d / "tap-0001.jsonl").write_text("\n".join(text) + "\n")
    return root


def replica_logs(base: Path) -> tuple[Path, Path, Truth]:
    """Primary and secondary logs of an active-passive pair, with planted gaps, duplicates, late, pending,
    expired, orphan and out-of-order copies."""
    truth = Truth()
    primary: list[dict] = []
    secondary: list[dict] = []
    planted = {
        ("orders", 5): "missing", ("orders", 20): "expired", ("orders", 12): "late",
        ("orders", 59): "pending", ("billing/payments", 10): "missing", ("billing/payments", 58): "pending",
    }
    copies = {("orders", 7): 3, ("billing/payments", 3): 2}
    for entity in ENTITIES:
        counter = 0
        for i in range(PER_ENTITY):
            counter += 2 if entity == "billing/payments" and i == 40 else 1  # one capture gap
            mid = f"{entity}-{i}"
            p_ts = T0 + timedelta(minutes=2 * i)
            extra = {"ttl_seconds": 30.0} if planted.get((entity, i)) == "expired" else {}
            primary.append(record("enqueued", "primary", entity, mid, p_ts,
                                  sequence_number=seq(entity, counter), **extra))
            status = planted.get((entity, i), "ok")
            truth.status[(entity, mid)] = status
            if status in ("missing", "pending", "expired"):
                continue
            lag = BASE_LAG + timedelta(milliseconds=i)
            if status == "late":
                lag = timedelta(minutes=7)
            if (entity, i) == ("orders", 30):
                lag = timedelta(minutes=3)  # overtaken by orders-31
            truth.lag_ms[(entity, mid)] = lag / timedelta(milliseconds=1)
            n = copies.get((entity, i), 1)
            if n > 1:
                truth.dup_extra[(entity, mid)] = n - 1
            for k in range(n):
                secondary.append(record("enqueued", "secondary", entity, mid, p_ts + lag + k * RETRY,
                                        repl_enqueued_time=iso(p_ts), repl_sequence=str(seq(entity, counter)),
                                        repl_source=f"primary/{entity}"))
    # orders: 12 arrives after 13, 14, 15 (displacement 3); 30 after 31 (1).
    truth.out_of_order = {"orders": 2, "billing/payments": 0}
    truth.max_displacement = {"orders": 3, "billing/payments": 0}
    truth.source_gaps = {"orders": 0, "billing/payments": 1}
    # Before the window: its copy lands inside the window, but it is neither reported nor an orphan.
    early = T0 - timedelta(milliseconds=100)
    primary.append(record("enqueued", "primary", "orders", "orders-early", early,
                          sequence_number=seq("orders", 0)))
    secondary.append(record("enqueued", "secondary", "orders", "orders-early", early + BASE_LAG,
                            repl_enqueued_time=iso(early), repl_sequence=str(seq("orders", 0))))
    # In the replica only.
    phantom = T0 + timedelta(minutes=33, seconds=7)
    secondary.append(record("enqueued", "secondary", "orders", "orders-phantom", phantom,
                            repl_enqueued_time=iso(phantom - BASE_LAG)))
    truth.status[("orders", "orders-phantom")] = "orphan"
    # A broken line and a record with an unparsable time in the replica's log.
    unparsable = record("enqueued", "secondary", "orders", "x", T0) | {"enqueued_time_utc": "soon"}
    bad = ["{not json", json.dumps(unparsable)]
    truth.malformed = {"primary": 0, "secondary": 2}
    secondary_root = write_log(base / "secondary", secondary, bad)
    # Two days earlier: partition pruning must skip this hour entirely (it would add a malformed record).
    far = secondary_root / "namespace=secondary" / "entity=orders" / "date=2026-11-20" / "hour=05"
    far.mkdir(parents=True)
    (far / "tap-0001.jsonl").write_text("{not json either\n")
    return write_log(base / "primary", primary), secondary_root, truth
