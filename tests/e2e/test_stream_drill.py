"""`sbfed drill stream-to-queue` end to end (patterns/drills/stream.py): Apache Kafka started by the drill,
the record copies made by `sbfed functions run`, the namespace down once and the host killed once; every
record processed once and in its key's order, as the audit records show. (`sbfed reconcile --mode
exactly-once` over the same logs is what `sbfed demo` adds; docs/drills.md.)"""

from __future__ import annotations

from collections import Counter

import pytest

from patterns.drills.metrics import parse_time
from patterns.drills.summary import format_summary
from tests.e2e.drill_records import drill, of

pytestmark = pytest.mark.slow


def test_every_record_is_processed_once_in_key_order_through_an_outage_and_a_host_kill(tmp_path):
    result, records = drill(tmp_path, "stream-to-queue", messages=240, outage=5.0, warmup=3.0,
                            probe_interval=2.0)
    summary = result.summary
    assert summary["passed"], summary["problems"]
    assert [s["step"] for s in summary["steps"]] == [
        "central down (drop)", "central back up", "Functions host killed", "Functions host started again"]
    sent, processed = of(records, "sent", namespace="stream"), of(records, "processed", namespace="central")
    assert len(sent) == 240 and Counter(r["message_id"] for r in processed) == Counter(
        r["message_id"] for r in sent)
    assert {r["message_id"] for r in of(records, "enqueued", namespace="stream")} == {
        r["message_id"] for r in sent}  # the Kafka-side audit tap read every record
    killed = parse_time(summary["steps"][2]["time"])
    assert any(parse_time(r["observed_time_utc"]) > killed for r in processed), "nothing left after the kill"
    for record in processed:  # each copy carries its record's key as its session and where it came from
        assert record["session_id"].startswith("user-") and record["repl_source"].startswith("stream/clicks-")
    assert result.scenario.violations == [] and len(result.scenario.order) == 12
    assert "12 keys over 3 partitions" in format_summary(summary)
