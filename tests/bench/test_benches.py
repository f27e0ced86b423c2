"""Every script in bench/ runs once with tiny sizes, so a broken bench fails CI rather than the next person
who measures. Nothing here is timed: the checks are that each run finishes, prints its figures, and that the
counts it reports are whole (every message sent came back, the planted truth was found)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HELPERS = {"amqp_client.py", "lag_trace.py", "reconcile_referee.py"}  # run by other benches; Makefile too


def bench(script: str, *args: str, timeout: float = 300) -> str:
    done = subprocess.run([sys.executable, f"bench/{script}", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, f"{script} exited {done.returncode}:\n{done.stdout}{done.stderr[-4000:]}"
    return done.stdout


def last_json(output: str) -> dict:
    return json.loads(output.strip().splitlines()[-1])


SMOKED = {"engine.py", "partitions.py", "rules.py", "wire.py", "amqp_compare.py", "replicate.py",
          "reconcile.py", "backlog.py", "connection_churn.py", "rest.py",
          "costs.py"}  # run whole by tests/bench/test_costs.py, the cost guard


def test_every_bench_script_has_a_smoke_run_here():
    scripts = {p.name for p in (ROOT / "bench").glob("*.py")} - HELPERS
    assert scripts == SMOKED


def test_engine():
    out = bench("engine.py", "--messages", "400", "--batch", "50", "--repeat", "1")
    for label in ("in-memory store", "SQLite WAL synchronous=NORMAL", "SQLite WAL synchronous=FULL",
                  "geo-replicated, synchronous", "geo-replicated, asynchronous", "in-memory store, GC tuned"):
        assert re.search(rf"^{re.escape(label)} +median +[\d,]+ msg/s", out, re.M), out


def test_backlog():
    out = bench("backlog.py", "--messages", "3000", "--drain", "500", "--sdk", "400")
    figures = last_json(out)
    assert figures["messages"] == 3000 and figures["drained"] == 500 and figures["sdk_messages"] == 400
    assert figures["ready_s"] > 0 and figures["first_message_s"] >= figures["ready_s"]
    assert figures["rss_per_message"] > 0
    assert figures["deep_msg_per_s"] > 0 and figures["shallow_msg_per_s"] > 0
    assert figures["sdk_deep_broker_cpu_per_msg"] > 0 and figures["sdk_shallow_broker_cpu_per_msg"] > 0


def test_partitions():
    out = bench("partitions.py", "--messages", "400", "--batch", "50", "--repeat", "1")
    assert len(re.findall(r"median +[\d,]+ msg/s", out)) == 3, out


@pytest.mark.parametrize("mode", [[], ["--engine"]], ids=["filters", "engine"])
def test_rules(mode):
    out = bench("rules.py", "--subscriptions", "10", "--messages", "200", "--rounds", "2", *mode)
    assert "compiled 10 filters" in out
    assert re.search(r"200 messages, [\d.]+ matched subscriptions per message", out), out
    if mode:
        assert re.search(r"[\d.]+ us CPU per copy receiving it", out), out


def test_wire():
    out = bench("wire.py", "--messages", "150")
    phases = [r["phase"] for r in last_json(out)["results"]]
    assert phases == ["batch send", "peek-lock receive+complete",
                      "batch send (AMQPS)", "peek-lock receive+complete (AMQPS)"]


def test_rest():
    out = bench("rest.py", "--messages", "120", "--connections", "2", "--batch", "25")
    phases = [r["phase"] for r in last_json(out)["results"]]
    assert phases == ["REST send", "REST peek-lock+complete", "REST batch send (25)"]


def test_amqp_compare_against_sbfed():
    out = bench("amqp_compare.py", "-n", "200", "--reps", "1", "--warmup", "50", "--peers", "")
    results = last_json(out)["results"]
    assert list(results) == ["sbfed (SQLite, synchronous=full)"]
    assert set(results["sbfed (SQLite, synchronous=full)"]) == {"send", "receive", "concurrent"}


@pytest.mark.slow
def test_amqp_compare_against_rabbitmq():
    """RabbitMQ comes from Debian, installed on demand as `make bench` does (CI runs as root)."""
    installed = subprocess.run(["bash", "scripts/ensure-rabbitmq.sh"], cwd=ROOT, capture_output=True,
                               text=True)
    assert installed.returncode == 0, installed.stderr
    out = bench("amqp_compare.py", "-n", "200", "--reps", "1", "--warmup", "50", "--sync", "normal",
                "--peers", "rabbitmq")
    results = last_json(out)["results"]
    assert list(results) == ["sbfed (SQLite, synchronous=normal)", "RabbitMQ (durable classic queue)"]
    assert all(set(phases) == {"send", "receive", "concurrent"} for phases in results.values())


def test_replicate():
    out = bench("replicate.py", "--messages", "100", "--rounds", "1", "--lag-rate", "50",
                "--lag-seconds", "1")
    assert re.search(r"^replication: +[\d.]+ msg/s", out, re.M), out
    assert "(50 messages at 50 msg/s)" in out, out  # every stamped replica of the lag phase came back


@pytest.mark.slow
def test_reconcile():
    """Spark and DuckDB on a small generated day; exit status 0 means both agreed with the planted truth.

    200k, not less: the bench holds Spark's lag percentiles within 1.2 % of DuckDB's interpolated ones, which
    needs thousands of messages per entity (at 5k the sparse tails differ by up to 50 %)."""
    out = bench("reconcile.py", "200k", "--driver-memory", "1g", timeout=600)
    assert re.search(r"^ +200,000 +[\d,]+ .* yes$", out, re.M), out


@pytest.mark.slow
def test_reconcile_follow():
    """The follow query beside a live writer, briefly (one planted gap due): it printed its figures and the
    gap got its missing verdict (exit status 0)."""
    out = bench("reconcile.py", "--follow", "--rate", "50", "--seconds", "40", timeout=600)
    assert re.search(r"^follow: [\d,]+ records written .* [\d,]+ records/s while busy", out, re.M), out
    assert re.search(r"^  verdict delay .* over 1 gaps", out, re.M), out
    assert re.search(r"^  state rows: max [\d,]+", out, re.M), out
    assert "agrees with the planted gaps" in out, out


@pytest.mark.slow
def test_connection_churn():
    # the soak's shortest that still reopens the connections and samples RSS twice after its warm-up
    out = bench("connection_churn.py", "--connections", "30", "--soak-seconds", "10", "--rate", "50",
                "--churn-every", "4", "--warm-up", "5")
    assert re.search(r"churn: 30 connections in \d+ s .* bytes per connection stayed", out), out
    assert re.search(r"soak: 50 msg/s, connections reopened every 4 s, 10 s; after the 5 s warm-up RSS .* "
                     r"KB/min", out), out


def test_amqp_compare_against_artemis():
    """Artemis comes from Maven Central, pinned and checked, fetched by ensure-artemis.sh on first use."""
    out = bench("amqp_compare.py", "-n", "200", "--reps", "1", "--warmup", "50", "--peers", "artemis")
    results = last_json(out)["results"]
    artemis = next(label for label in results if label.startswith("Artemis 2.40.0 (durable"))
    assert set(results[artemis]) == {"send", "receive", "concurrent"}
    assert all(results[artemis][name]["broker_cpu_per_msg"]["median"] > 0 for name in results[artemis])
    assert re.search(r"^target \(sbfed >= Artemis .*: send (met|missed)", out, re.M), out
