"""Replication between two local namespaces through the repository's function_app.py and the local
Functions host: every property survives, session order holds, outages and poison messages lose nothing."""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from replication_harness import (
    HOST_OPTIONS,
    drain_queue_sessions,
    drain_subscription,
    functions_host,
    keyed_message,
    mismatches,
    send_all,
    session_message,
    settings_for,
    topology,
)

from tests.broker_process import brokers


def check_sessions_in_order(replicas) -> None:
    by_session = collections.defaultdict(list)
    for replica in replicas:
        by_session[replica.session_id].append(replica.application_properties[b"seq"])
    for session, seqs in by_session.items():
        assert seqs == sorted(seqs), f"{session} out of order"


@pytest.mark.parametrize(
    "count",
    [
        pytest.param(400, id="400"),
        pytest.param(10_000, id="10k", marks=pytest.mark.slow),
    ],
)
def test_every_property_replicated_sessions_in_order_and_audited(tmp_path, count):
    half = count // 2
    session_sent = [session_message(i) for i in range(half)]
    keyed_sent = [keyed_message(i) for i in range(half)]
    sent = {s.message_id: s for _, s in session_sent + keyed_sent}
    audit_dir = tmp_path / "audit"
    with brokers(topology(audit=str(audit_dir)), tmp_path) as (namespaces, path):
        settings = settings_for(namespaces, path)
        send_all(settings["PRIMARY"], "sessions", [m for m, _ in session_sent])
        send_all(settings["PRIMARY"], "events", [m for m, _ in keyed_sent])
        with functions_host(settings):
            timeout = 60 + count / 50
            per_session = collections.Counter(s.fields["session_id"] for _, s in session_sent)
            with ThreadPoolExecutor(2) as pool:  # both replicated side by side, so both drained at once
                sessions = pool.submit(drain_queue_sessions, settings["SECONDARY"], "sessions", per_session,
                                       timeout)
                keyed = pool.submit(drain_subscription, settings["SECONDARY"], "events", "check", half,
                                    timeout)
                session_replicas, keyed_replicas = sessions.result(), keyed.result()
    assert len(session_replicas) == half and len(keyed_replicas) == half
    assert {r.message_id for r in session_replicas + keyed_replicas} == set(sent)
    problems = [p for r in session_replicas for p in mismatches(sent, r, source="primary/sessions")]
    problems += [p for r in keyed_replicas for p in mismatches(sent, r, source="primary/events")]
    assert problems == []
    check_sessions_in_order(session_replicas)
    records = [json.loads(line) for f in audit_dir.rglob("*.jsonl") for line in f.read_text().splitlines()]
    assert sorted(r["message_id"] for r in records) == sorted(s.message_id for _, s in keyed_sent)
    assert all(r["namespace"] == "secondary" and r["repl_source"] == "primary/events" for r in records)
    assert all(f.parent.parent.parent.name == "entity=events" for f in audit_dir.rglob("*.jsonl"))


@pytest.mark.slow
def test_target_down_for_10_seconds_loses_nothing(tmp_path):
    messages = [keyed_message(i) for i in range(2000)]
    sent = {s.message_id: s for _, s in messages}
    with brokers(topology(), tmp_path) as (namespaces, path):
        settings = settings_for(namespaces, path)
        with functions_host(settings, only={"events-to-secondary"}) as host:
            send_all(settings["PRIMARY"], "events", [m for m, _ in messages[:500]])
            _wait_for(lambda: host.runners[0].stats.completed >= 100, 30)
            namespaces["secondary"].control().set_down("drop")
            send_all(settings["PRIMARY"], "events", [m for m, _ in messages[500:]])
            time.sleep(10)
            held = host.runners[0].stats.completed
            namespaces["secondary"].control().set_down(None)
            replicas = drain_subscription(settings["SECONDARY"], "events", "check", len(messages), 180)
    assert held < len(messages), "the outage did not hold anything back"
    ids = [r.message_id for r in replicas]
    assert sorted(ids) == sorted(sent), "lost or duplicated replicas"
    assert [p for r in replicas for p in mismatches(sent, r, source="primary/events")] == []


def test_transform_validates_drops_reroutes_and_poison_goes_to_dead_letter_with_reason(tmp_path):
    raw = topology(max_delivery_count=3, transform="replication_transforms:reject_poison")
    with brokers(raw, tmp_path) as (namespaces, path):
        settings = settings_for(namespaces, path)
        batch = [
            ServiceBusMessage(b"ok", message_id=f"good-{i}", application_properties={"n": i})
            for i in range(20)
        ]
        batch.insert(
            7, ServiceBusMessage(b"bad", message_id="poison-1", application_properties={"poison": True})
        )
        batch.insert(
            12, ServiceBusMessage(b"skip", message_id="dropped-1", application_properties={"drop": True})
        )
        batch.insert(
            15, ServiceBusMessage(b"odd", message_id="odd-1", application_properties={"quarantine": 1})
        )
        send_all(settings["PRIMARY"], "events", batch)
        with functions_host(settings, only={"events-to-secondary"}):
            replicas = drain_subscription(settings["SECONDARY"], "events", "check", 20, 60)
            with (
                ServiceBusClient.from_connection_string(settings["SECONDARY"]) as client,
                client.get_queue_receiver("quarantine") as quarantine,
            ):
                rerouted = _receive_until(quarantine, 1, 30)
            with (
                ServiceBusClient.from_connection_string(settings["PRIMARY"]) as client,
                client.get_subscription_receiver(
                    "events", "to-secondary", sub_queue=ServiceBusSubQueue.DEAD_LETTER
                ) as dlq,
            ):
                dead = _receive_until(dlq, 1, 60)
    assert sorted(r.message_id for r in replicas) == sorted(f"good-{i}" for i in range(20))
    assert all(r.application_properties[b"validated"] is True for r in replicas)
    assert [m.message_id for m in rerouted] == ["odd-1"]
    assert [m.message_id for m in dead] == ["poison-1"]
    assert dead[0].dead_letter_reason == "ReplicationTransformFailed"
    assert "PoisonMessage: order poison-1 has no customer" in dead[0].dead_letter_error_description
    assert dead[0].delivery_count >= 2


def _receive_until(receiver, expected: int, timeout: float):
    received = []
    deadline = time.monotonic() + timeout
    while len(received) < expected and time.monotonic() < deadline:
        for message in receiver.receive_messages(max_message_count=10, max_wait_time=1):
            receiver.complete_message(message)
            received.append(message)
    return received


def _wait_for(condition, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.1)


def test_locks_are_renewed_while_a_batch_runs_longer_than_the_lock(tmp_path):
    raw = topology(lock_duration="PT5S", transform="replication_transforms:slow_first_message")
    messages = [keyed_message(i) for i in range(50)]
    with brokers(raw, tmp_path) as (namespaces, path):
        settings = settings_for(namespaces, path)
        send_all(settings["PRIMARY"], "events", [m for m, _ in messages])
        # one batch of all of them (a message still in the prefetch buffer is not the batch's to renew)
        whole = dataclasses.replace(
            HOST_OPTIONS, min_message_batch_size=len(messages), max_batch_wait_time=dt.timedelta(seconds=2)
        )
        with functions_host(settings, whole, only={"events-to-secondary"}) as host:
            replicas = drain_subscription(settings["SECONDARY"], "events", "check", len(messages), 60)
            stats = host.runners[0].stats
            _wait_for(lambda: stats.completed + stats.abandoned >= len(messages), 30)
    assert sorted(r.message_id for r in replicas) == sorted(s.message_id for _, s in messages)
    assert (stats.completed, stats.abandoned, stats.settle_failures) == (len(messages), 0, 0), (
        "a lock was lost"
    )
