"""What the drill tests share: run a drill quietly and read the audit records it left."""

from __future__ import annotations

from patterns.drills.catalog import drill_settings
from patterns.drills.metrics import parse_time, read_records
from patterns.drills.run import run_drill


def drill(tmp_path, pattern, **settings):
    """Run the drill (a short outage by default); it must have had its outage and settled."""
    settings = {"outage": 6.0, "warmup": 4.0, "probe_interval": 3.0, **settings}
    result = run_drill(drill_settings(pattern, tmp_path / pattern, **settings),
                       progress=lambda line: None)
    records = read_records(tmp_path / pattern / "audit")
    assert result.timeline.fault_at and result.timeline.restored_at, "the outage did not happen"
    assert result.timeline.settled_at, f"not every message was handled: {result.summary}"
    return result, records


def of(records, event, **fields):
    return [r for r in records if r["event"] == event and all(r.get(k) == v for k, v in fields.items())]


def between(record, start, end):
    return start <= parse_time(record["observed_time_utc"]) < end
