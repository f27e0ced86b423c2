"""End-to-end drills with a real outage, one per pattern: `sbfed broker serve` and `sbfed functions run` as
processes, the pattern applied through the admin client, the failover clients, the primary taken down with
`namespace_down: drop` through the control API. Assertions are the issue's statements, checked on the audit
logs and the clients' own reports (not on the drill's verdict)."""

from __future__ import annotations

import datetime as dt
from collections import Counter

import pytest

from patterns.drills.metrics import hops, parse_time
from tests.e2e.drill_records import between, drill, of

pytestmark = pytest.mark.slow
LOCK = dt.timedelta(seconds=10)  # the drills' default lock duration


def test_all_active_every_region_gets_every_message_once_and_none_bounces(tmp_path):
    result, records = drill(tmp_path, "all-active", messages=160)
    sent = {r["message_id"] for r in of(records, "sent")}
    assert len(sent) == 160
    fault, restored = result.timeline.fault_at, result.timeline.restored_at
    # a real outage: the primary's producer published to the secondary meanwhile
    assert [r for r in of(records, "sent", namespace="secondary") if r["message_id"].startswith("p-")
            and between(r, fault, restored)]
    for namespace in ("primary", "secondary"):
        # Enqueued once = one sequence number. The audit tap is at-least-once: when the outage cuts its
        # complete, the message comes back after its lock expires (same sequence number) and is recorded
        # again; a second enqueue that duplicate detection let through would have a new sequence number.
        taps = of(records, "enqueued", namespace=namespace)
        enqueues = {(r["message_id"], r["sequence_number"]) for r in taps}
        arrived = Counter(message_id for message_id, _ in enqueues)
        assert arrived == Counter(sent), f"{namespace} did not get every message enqueued exactly once"
        processed = Counter(r["message_id"] for r in of(records, "processed", namespace=namespace))
        assert processed == Counter(sent), f"{namespace}'s consumer did not process every message once"
    for record in of(records, "enqueued"):
        assert hops(record) <= 1, f"{record['message_id']} bounced: {record['repl_source']}"
        if hops(record) == 1:
            assert not record["repl_source"].startswith(record["namespace"] + "/")


def test_active_passive_consumer_works_through_the_outage_loses_nothing_and_reports_every_duplicate(tmp_path):
    # warm-up longer than TTL + 1 s: some replicas expire before the failover, so the window shows
    result, records = drill(tmp_path, "active-passive", messages=160, ttl="PT3S", warmup=6.0)
    scenario, timeline = result.scenario, result.timeline
    fault, restored = timeline.fault_at, timeline.restored_at
    sent = {r["message_id"] for r in of(records, "sent")}
    processed = Counter(r["message_id"] for r in of(records, "processed"))
    # the consumer keeps working through the outage: on the secondary while the primary is down
    assert [r for r in of(records, "processed", namespace="secondary") if between(r, fault, restored)]
    assert [e.kind for e in scenario.consumer.events][:1] == ["failover"]
    assert "failback" in [e.kind for e in scenario.consumer.events]
    assert sent and set(processed) == sent, f"lost: {sorted(sent - set(processed))[:20]}"
    # every delivery the broker made was either processed or reported as a duplicate
    deliveries = scenario.deliveries.snapshot()
    delivered = Counter(d.message_id for d in deliveries)
    reported = Counter(d.message_id for d in scenario.consumer.duplicates)
    assert delivered == processed + reported
    assert reported, "a failover and a failback always produce duplicates"
    assert max(processed.values()) == 1
    # bounded by the TTL window: replicas older than the TTL at the failover had expired and were never
    # delivered; every duplicate the secondary handed over had been there for less than the TTL
    failover = next(e.time for e in scenario.consumer.events if e.kind == "failover")
    window = dt.timedelta(seconds=3) + dt.timedelta(seconds=1)  # TTL plus the broker's timer granularity
    expired = {r["message_id"] for r in of(records, "enqueued", namespace="secondary")
               if parse_time(r["enqueued_time_utc"]) < failover - window}
    on_secondary = [d for d in deliveries if d.namespace == "secondary"]
    assert expired and not expired & {d.message_id for d in on_secondary}
    for delivery in on_secondary:
        if reported[delivery.message_id]:
            assert delivery.delivered(LOCK) - delivery.enqueued < window, delivery


def test_spillover_stopped_consumers_messages_are_handled_elsewhere_in_time_and_double_spills_go_to_aux(
        tmp_path):
    result, records = drill(tmp_path, "spillover", messages=240, deadline="PT12S")
    details = result.summary["pattern_details"]
    deadline = dt.timedelta(seconds=12)
    sent = {r["message_id"]: r for r in of(records, "sent")}
    poison = set(details["poison"])
    work = [r for r in of(records, "processed") if not r["processor"].endswith("-aux")]
    aux = [r for r in of(records, "processed") if r["processor"].endswith("-aux")]
    # the primary's consumer was stopped; what was sent to the primary meanwhile (and expired before it came
    # back) was handled by the secondary, before the deadline
    stopped = parse_time(details["consumer_stopped_at"])
    restarted = parse_time(details["consumer_restarted_at"])
    stranded = {m for m, r in sent.items() if r["namespace"] == "primary" and m not in poison
                and between(r, stopped, restarted - deadline / 2)}
    assert stranded
    took_over = {r["message_id"]: r for r in work
                 if r["namespace"] == "secondary" and r["message_id"] in stranded}
    assert set(took_over) == stranded
    for message_id, record in took_over.items():
        assert record["repl_source"] == "primary/work"
        age = parse_time(record["observed_time_utc"]) - parse_time(sent[message_id]["observed_time_utc"])
        assert age < deadline, f"{message_id} handled {age} after it was sent"
    # nothing bounces: no message came back into a queue it had spilled from
    assert all(hops(r) <= 1 for r in work)
    # the auxiliary queues get the double spills (the poison messages fail in both regions), each once
    assert poison and Counter(r["message_id"] for r in aux) == Counter(poison)
    assert all(hops(r) == 2 for r in aux)
    # nothing lost
    assert {r["message_id"] for r in work} | poison == set(sent)
