"""`sbfed reconcile --follow` (spark_reconcile/follow.py): the streaming job against the batch job and itself.

(a) the hostile-log corpus through both: the same final verdicts, row for row; (b) files handed over in
increments, the target's a slice late, give the rows of one run; (c) a run killed in the middle of a
micro-batch and restarted writes every verdict once; (d) the state stays bounded while 10x the data flows.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from replicators.audit import DirectorySink
from spark_reconcile import cli, follow, job, tables
from spark_reconcile.outputs import DETAIL_COLUMNS

from . import hostile, traffic

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[3]
TICK = f"{hostile.DAY}T11:29:59.999999Z"  # window end + lookahead - 1 µs: every key in the window is due


def run_follow(spark, args: list[str], out: Path, checkpoint: Path, *extra: str) -> follow.MicroBatch:
    argv = [*args, "--out", str(out), "--follow", "--available-now", "--checkpoint", str(checkpoint), *extra]
    parsed = cli.parser().parse_args(argv)
    query, handler = follow.start(spark, cli.settings_from(parsed), cli.follow_settings_from(parsed), argv)
    query.awaitTermination()
    return handler


def rows(spark, folder: Path) -> Counter:
    """Every verdict row (kind and the detail columns), counted: a row written twice shows as 2."""
    if not list(folder.rglob("*.parquet")):
        return Counter()
    found = spark.read.parquet(str(folder)).select("kind", *DETAIL_COLUMNS)
    return Counter(tuple(r) for r in found.collect())


def status(out: Path, target: str) -> dict:
    return json.loads((out / "status" / f"{target}.json").read_text())


def with_ticks(cases, mode: str) -> list:
    """The corpus plus, in every log and entity, a record at window end + lookahead (outside the window):
    every target's watermark for every entity gets there, so every key in the window is due in both jobs."""
    records = [r for c in cases for r in c().records]
    entities = {r.entity if isinstance(r, hostile.Line) else r.get("entity") for r in records} - {None}
    tags = {r.ns if isinstance(r, hostile.Line) else r["namespace"] for r in records}
    events = ("enqueued", "processed") if mode == "exactly-once" else ("enqueued",)
    return records + [hostile.rec(event, tag, e, "tick", TICK, processor=f"{tag}-1")
                      for tag in sorted(tags) for e in sorted(entities) for event in events]


@pytest.mark.parametrize("run", list(hostile.RUNS))
def test_a_the_hostile_corpus_gets_the_batch_jobs_verdicts(spark, tmp_path, run):
    options, cases = hostile.RUNS[run]
    mode = options[options.index("--mode") + 1]
    records = with_ticks(cases, mode)
    directory, offset = {}, 0
    for c in cases:
        made = c()
        directory |= {offset + i: d for i, d in made.directory.items()}
        offset += len(made.records)
    roots = hostile.write(tmp_path / "logs", records, directory)
    args = [*options, "--max-missing", "100%"]
    for tag in sorted(roots, key=lambda t: (t != hostile.P, t)):
        args += ["--log", f"{tag}={roots[tag]}"]
    batch_args = cli.parser().parse_args([*args, "--out", str(tmp_path / "batch")])
    batch = job.run(spark, cli.settings_from(batch_args))
    assert all(c["totals"]["pending"] == 0 for c in batch["comparisons"])  # the ticks made every key due

    run_follow(spark, args, tmp_path / "follow", tmp_path / "checkpoint")
    got, want = rows(spark, tmp_path / "follow" / "verdicts"), rows(spark, tmp_path / "batch" / "details")
    assert got == want
    for c in batch["comparisons"]:
        final = status(tmp_path / "follow", c["target"])["final"]
        assert final == c["totals"] and final["expected"] > 0, c["target"]
    # The follow mode reads every file (no date/hour pruning): broken lines in hours outside the read range
    # count as malformed there, and only there.
    pruned = Counter(r.ns for r in records
                     if isinstance(r, hostile.Line) and not "09" <= r.time[11:13] <= "11")
    first = status(tmp_path / "follow", batch["comparisons"][0]["target"])
    for read, i in zip(first["inputs"], batch["inputs"], strict=True):
        assert read["malformed_records"] == i["malformed_records"] + pruned[i["tag"]]
        assert read["records_read"] == i["records_read"] + pruned[i["tag"]]


def test_b_increments_with_late_files_give_the_answers_of_one_run(spark, tmp_path):
    """Five increments, each an available-now run: the primary's slice k with the secondary's slice k-1."""
    made = traffic.replica_traffic(slices=4)
    for number in range(5):
        traffic.write_slice(tmp_path / "all", made, number)
    one_run = run_follow(spark, traffic.log_args(tmp_path / "all"), tmp_path / "one",
                         tmp_path / "one-checkpoint", "--alert-missing", "2")
    args = traffic.log_args(tmp_path / "inc")
    for k in range(5):
        for log in ("primary", "secondary"):
            number = k if log == "primary" else k - 1
            traffic.write_slice(tmp_path / "inc", [(s, r) for s, r in made if r["namespace"] == log], number)
        run_follow(spark, args, tmp_path / "inc-out", tmp_path / "inc-checkpoint")
    one, increments = (rows(spark, tmp_path / out / "verdicts") for out in ("one", "inc-out"))
    assert max(one.values()) == 1
    assert {r[0] for r in one} >= {"missing", "late", "expired", "orphan", "duplicate"}
    assert increments == one
    final = [status(tmp_path / o, "secondary")["final"] for o in ("one", "inc-out")]
    assert final[0] == final[1] and final[0]["ok"] > 0
    batches = sorted(p.name for p in (tmp_path / "inc-out" / "verdicts").iterdir())
    assert len(batches) == 5  # a micro-batch per increment

    # --alert-missing: more than 2 final missing messages in the status window.
    assert one_run.alerted
    alert = json.loads((tmp_path / "one" / "alerts" / f"batch={0:020d}.json").read_text())
    assert (alert["target"], alert["missing"], alert["threshold"]) == ("secondary", final[0]["missing"], 2)
    # `sbfed reconcile report --out DIR`: the batch job's summary and page, from the tables.
    rebuilt = tables.rebuild(spark, str(tmp_path / "inc-out"))
    assert rebuilt["comparisons"][0]["totals"] == final[1]
    assert len(rebuilt["samples"]["missing"]) == final[1]["missing"] > 0
    assert "missing" in (tmp_path / "inc-out" / "report.html").read_text()


def test_records_a_directory_sink_wrote_across_rolls_are_followed_exactly_once(spark, tmp_path):
    """The audit taps' own sink: a roll is read once it is published, the roll in progress not before."""
    made = traffic.replica_traffic(slices=2)
    for number in range(2):
        traffic.write_slice(tmp_path / "files", made, number)
    run_follow(spark, traffic.log_args(tmp_path / "files"), tmp_path / "one", tmp_path / "one-checkpoint")

    now = [0.0]
    sinks = {log: DirectorySink(tmp_path / "taps" / log, writer=f"tap-{log}", roll_seconds=10,
                                clock=lambda: now[0]) for log in ("primary", "secondary")}
    args = traffic.log_args(tmp_path / "taps")
    for number in range(2):
        for log, sink in sinks.items():
            batch = [r for s, r in made if s == number and r["namespace"] == log]
            half = len(batch) // 2
            sink.write(batch[:half])
            now[0] += 10 if number == 0 else 0  # the first roll is due at its next write, the second is not
            sink.write(batch[half:])
        now[0] += 1
        run_follow(spark, args, tmp_path / "rolled", tmp_path / "rolled-checkpoint")
        if number == 1:
            # The second roll was still in progress: only the first was read.
            assert list((tmp_path / "taps").rglob(".*.inprogress"))
            read = {i["tag"]: i["records_read"] for i in status(tmp_path / "rolled", "secondary")["inputs"]}
            assert read == Counter(r["namespace"] for s, r in made if s == 0)
            for sink in sinks.values():
                sink.close()
            run_follow(spark, args, tmp_path / "rolled", tmp_path / "rolled-checkpoint")

    got, want = rows(spark, tmp_path / "rolled" / "verdicts"), rows(spark, tmp_path / "one" / "verdicts")
    assert max(want.values()) == 1 and {r[0] for r in want} >= {"missing", "late", "duplicate"}
    assert got == want
    final = status(tmp_path / "rolled", "secondary")
    assert final["final"] == status(tmp_path / "one", "secondary")["final"]
    written = Counter(r["namespace"] for _, r in made)
    assert {i["tag"]: i["records_read"] for i in final["inputs"]} == written


def test_c_a_run_killed_mid_batch_and_restarted_writes_every_verdict_once(spark, tmp_path):
    made = traffic.replica_traffic(slices=3)
    for number in range(4):
        traffic.write_slice(tmp_path / "logs", made, number)
    args = traffic.log_args(tmp_path / "logs")
    run_follow(spark, args, tmp_path / "one", tmp_path / "one-checkpoint")
    command = [sys.executable, "-m", "spark_reconcile", *args, "--out", str(tmp_path / "out"), "--follow",
               "--available-now", "--checkpoint", str(tmp_path / "checkpoint"),
               "--max-files-per-trigger", "3", "--driver-memory", "1g", "--master", "local[2]"]
    env = os.environ | {"PYTHONPATH": str(REPO)}
    killed = subprocess.Popen(command, cwd=REPO, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    # Kill it (driver and JVM) once the second micro-batch has written its verdicts, before its progress.
    written = tmp_path / "out" / "verdicts" / "batch=1" / "_SUCCESS"
    deadline = time.monotonic() + 300
    while not written.exists() and killed.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    assert written.exists()
    assert not (tmp_path / "checkpoint" / "progress" / f"{1:020d}.json").exists()  # killed mid-batch
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    got, want = rows(spark, tmp_path / "out" / "verdicts"), rows(spark, tmp_path / "one" / "verdicts")
    assert want and got == want
    assert status(tmp_path / "out", "secondary")["final"] == status(tmp_path / "one", "secondary")["final"]


def test_d_state_stays_bounded_while_ten_times_the_data_flows_through(spark, tmp_path):
    """Twenty slices, two per micro-batch: the state never holds more keys than one micro-batch brings, while
    ten micro-batches' verdicts flow through."""
    made = traffic.replica_traffic(slices=20)
    for number in range(20):
        traffic.write_slice(tmp_path / "logs", made, number)
    per_batch = len({(r["entity"], r["message_id"]) for s, r in made if s < 2})
    args = traffic.log_args(tmp_path / "logs")
    handler = run_follow(spark, args, tmp_path / "out", tmp_path / "checkpoint",
                         "--max-files-per-trigger", "4")  # two slices of both entities
    sizes = [h["state_rows"] for h in handler.history]
    final = status(tmp_path / "out", "secondary")["final"]
    print(f"state rows after each micro-batch: {sizes} (one micro-batch brings {per_batch} keys; "
          f"{final['expected'] + final['orphan']} final verdicts in all)")
    assert len(sizes) == 10
    assert final["expected"] + final["orphan"] > 9 * per_batch
    assert 0 < max(sizes) <= per_batch
