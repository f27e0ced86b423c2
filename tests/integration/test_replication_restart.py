"""`sbfed functions run` killed mid-run (SIGKILL: no clean shutdown) and started again: every message
reaches the target exactly once, because sources are settled only after their copies are accepted and
the target's duplicate detection absorbs the copies of the unsettled batch."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from replication_harness import (
    APP,
    REPO,
    drain_subscription,
    keyed_message,
    mismatches,
    send_all,
    topology,
)
from replication_harness import settings_for as broker_settings

from tests.broker_process import brokers


def start_host(tmp_path, settings, log_name: str) -> subprocess.Popen:
    local_settings = tmp_path / "local.settings.json"
    local_settings.write_text(json.dumps({"IsEncrypted": False, "Values": settings}))
    env = {k: v for k, v in os.environ.items() if k not in settings}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sbfed",
            "functions",
            "run",
            "--app",
            str(APP),
            "--settings",
            str(local_settings),
            "--host-json",
            str(REPO / "host.json"),
            "--only",
            "events-to-secondary",
            "--stats-interval",
            "0.5",
        ],
        cwd=tmp_path,
        env=env,
        stdout=open(tmp_path / log_name, "w"),
        stderr=subprocess.STDOUT,
    )


def completed(log_path) -> int:
    """The host's last reported completed count; a line the host is still writing is not read."""
    counts = re.findall(r"completed (\d+)\s", log_path.read_text())
    return int(counts[-1]) if counts else 0


@pytest.mark.slow
def test_host_killed_mid_run_and_restarted_loses_nothing_and_duplicates_nothing(tmp_path):
    messages = [keyed_message(i) for i in range(3000)]
    sent = {s.message_id: s for _, s in messages}
    with brokers(topology(lock_duration="PT5S"), tmp_path) as (namespaces, path):
        settings = broker_settings(namespaces, path)
        send_all(settings["PRIMARY"], "events", [m for m, _ in messages])
        first = start_host(tmp_path, settings, "host-1.log")
        deadline = time.monotonic() + 120
        while completed(tmp_path / "host-1.log") < 500:
            assert first.poll() is None, (tmp_path / "host-1.log").read_text()
            assert time.monotonic() < deadline, "the host did not start replicating"
            time.sleep(0.2)
        first.send_signal(signal.SIGKILL)
        first.wait()
        killed_at = completed(tmp_path / "host-1.log")
        second = start_host(tmp_path, settings, "host-2.log")
        try:
            replicas = drain_subscription(settings["SECONDARY"], "events", "check", len(messages), 240)
        finally:
            second.send_signal(signal.SIGTERM)
            assert second.wait(60) == 0
    assert killed_at < len(messages), "the first host finished before it was killed"
    ids = [r.message_id for r in replicas]
    assert len(ids) == len(set(ids)), "duplicates reached the target"
    assert set(ids) == set(sent), f"lost {len(set(sent) - set(ids))} messages"
    assert [p for r in replicas for p in mismatches(sent, r, source="primary/events")] == []
    assert "stopping (SIGTERM)" in (tmp_path / "host-2.log").read_text()


@pytest.mark.slow
def test_host_stops_promptly_after_its_brokers_are_gone(tmp_path):
    """SIGTERM once both namespaces are gone: the host waits for workers that hold messages, not for the
    SDK's reconnect retries of workers that hold none."""
    messages = [keyed_message(i) for i in range(300)]
    with brokers(topology(lock_duration="PT5S"), tmp_path) as (namespaces, path):
        settings = broker_settings(namespaces, path)
        send_all(settings["PRIMARY"], "events", [m for m, _ in messages])
        host = start_host(tmp_path, settings, "host.log")
        deadline = time.monotonic() + 120
        while completed(tmp_path / "host.log") < len(messages):
            assert host.poll() is None, (tmp_path / "host.log").read_text()
            assert time.monotonic() < deadline, "the host did not replicate"
            time.sleep(0.2)
    while "reconnecting" not in (tmp_path / "host.log").read_text():
        assert time.monotonic() < deadline, "the host did not notice its brokers had gone"
        time.sleep(0.2)
    host.send_signal(signal.SIGTERM)
    try:
        assert host.wait(30) == 0, (tmp_path / "host.log").read_text()
    finally:
        host.kill()
    log = (tmp_path / "host.log").read_text()
    assert "stopping (SIGTERM)" in log
    assert re.findall(r"completed (\d+)\s", log)[-1] == str(len(messages))
