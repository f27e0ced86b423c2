"""Steady replica traffic for the follow mode's tests: two entities, one message every few seconds, with gaps,
duplicate copies, late copies (within the lookahead), TTL expiries and orphans planted at fixed intervals, cut
into one file per log, entity and slice of time, so the files can be handed over a few at a time."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

from .planted import iso, record

T0 = datetime(2026, 11, 22, 22, 0, tzinfo=UTC)
ENTITIES = ("orders", "billing/payments")
# Small rules, so a slice of a few minutes finalizes keys: grace 1 min, skew 1 s, lookahead 3 min.
OPTIONS = ["--grace", "1m", "--skew", "1s", "--lookahead", "3m"]


def replica_traffic(slices: int, slice_s: int = 300, every_s: int = 10) -> list[tuple[int, dict]]:
    """(slice, record) for `slices` slices of `slice_s` seconds. A target's copies go in the slice after
    their source's when they arrive past its end, and every late copy arrives 2 minutes after its source:
    a later file, but within the lookahead."""
    out = []
    for entity in ENTITIES:
        for i in range(slices * slice_s // every_s):
            p_ts = T0 + timedelta(seconds=i * every_s)
            mid = f"{entity}-{i}"
            ttl = {"ttl_seconds": 20.0} if i % 97 == 5 else {}
            out.append(record("enqueued", "primary", entity, mid, p_ts, sequence_number=i, **ttl))
            if i % 53 == 7 or ttl:
                continue  # a gap (or an expiry)
            lag = timedelta(minutes=2) if i % 41 == 3 else timedelta(milliseconds=150 + i % 900)
            for k in range(2 if i % 31 == 2 else 1):
                arrival = p_ts + lag + k * timedelta(seconds=30)
                out.append(record("enqueued", "secondary", entity, mid, arrival, repl_enqueued_time=iso(p_ts),
                                  repl_sequence=str(i), repl_source=f"primary/{entity}"))
            if i % 67 == 11:
                ghost = p_ts + timedelta(seconds=3)
                out.append(record("enqueued", "secondary", entity, f"ghost-{i}", ghost,
                                  repl_enqueued_time=iso(ghost)))
    return [(_slice(r, slice_s), r) for r in out]


def _slice(r: dict, slice_s: int) -> int:
    t = datetime.fromisoformat(r["enqueued_time_utc"].replace("Z", "+00:00"))
    return int((t - T0).total_seconds() // slice_s)


def write_slice(root: Path, traffic: list[tuple[int, dict]], number: int) -> list[Path]:
    """One slice's files (a file per log and entity), in the audit-log layout under root/<namespace>, with
    modification times in slice order (Spark's file source takes files oldest first)."""
    parts: dict[Path, list[str]] = defaultdict(list)
    for s, r in traffic:
        if s != number:
            continue
        t = datetime.fromisoformat(r["enqueued_time_utc"].replace("Z", "+00:00"))
        ns = r["namespace"]
        folder = (root / ns / f"namespace={ns}" / f"entity={quote(r['entity'], safe='')}"
                  / f"date={t:%Y-%m-%d}" / f"hour={t:%H}")
        parts[folder / f"tap-{number:04d}.jsonl"].append(json.dumps(r))
    mtime = T0.timestamp() + number
    for path, lines in sorted(parts.items()):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        os.utime(path, (mtime, mtime))
    return sorted(parts)


def log_args(root: Path) -> list[str]:
    (root / "primary").mkdir(parents=True, exist_ok=True)
    (root / "secondary").mkdir(parents=True, exist_ok=True)
    return ["--log", f"primary={root / 'primary'}", "--log", f"secondary={root / 'secondary'}",
            "--format", "json", *OPTIONS]
