"""Benchmark: the Spark reconciliation job against a DuckDB query computing the same numbers.

For each size (primary messages; default 1M 5M 10M) it generates one UTC day of synthetic audit logs in the
docs/audit-log.md layout (Parquet, 20 entities, one of them holding 40 % of the traffic): 0.1 % gaps,
0.5 % duplicate copies (retries 30 s later, a few triples), lognormal lag (median 150 ms) and 0.05 % late
copies (+10-20 min). Then it times `sbfed reconcile` (as a user runs it, in its own process) and DuckDB
(threads=2), and checks both against the planted truth and against each other.

    .venv/bin/python bench/reconcile.py [SIZE ...] [--keep DIR]      e.g. 1M 5M, 250k

With --follow it measures `sbfed reconcile --follow` instead: a writer thread appends one JSON-lines file per
log and entity every second at --rate messages/s (copies ~150 ms later, planted gaps and duplicates), the
follow query runs beside it for --seconds, and the bench prints the records/s the query processed (and whether
it kept up), the delay from each planted gap's source time to its final `missing` verdict, the state rows it
held, and the batch job's time on the same logs next to it.

    .venv/bin/python bench/reconcile.py --follow [--rate 500] [--seconds 120]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb

REPO = Path(__file__).resolve().parents[1]
DAY, NEXT_DAY = "2026-11-22", "2026-11-23"
GRACE_S, SKEW_S = 300, 5
ENTITIES = 20


def parse_size(text: str) -> int:
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1].lower(), 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def connect() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET threads = 2")
    return con


def generate(con: duckdb.DuckDBPyConnection, n: int, root: Path) -> dict:
    """Write primary and secondary logs under `root`; return the planted truth."""
    con.execute("SELECT setseed(0.42)")
    con.execute(f"""
        CREATE OR REPLACE TABLE p AS
        SELECT i,
               'orders-' || lpad(CAST(CASE WHEN i % 5 < 2 THEN 0 ELSE 1 + (i // 5) % {ENTITIES - 1} END
                                      AS VARCHAR), 2, '0') AS entity,
               concat_ws('-', substr(h, 1, 8), substr(h, 9, 4), substr(h, 13, 4), substr(h, 17, 4),
                         substr(h, 21, 12)) AS message_id,
               TIMESTAMPTZ '{DAY} 00:00:00+00' + to_microseconds(CAST(i * 86400000000 // {n} AS BIGINT))
                   AS enqueued_time_utc,
               random() AS u_gap, random() AS u_dup, random() AS u_late,
               -- lognormal lag, median 150 ms (Box-Muller)
               150.0 * exp(0.8 * sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random())) AS lag_ms,
               600000 + 600000 * random() AS late_ms
        FROM (SELECT i, md5(CAST(i AS VARCHAR)) AS h FROM range({n}) t(i))
    """)
    con.execute("""
        CREATE OR REPLACE TABLE p2 AS
        SELECT *, row_number() OVER (PARTITION BY entity ORDER BY i) AS sequence_number,
               u_gap < 0.001 AS gap,
               CASE WHEN u_dup < 0.0002 THEN 3 WHEN u_dup < 0.0048 THEN 2 ELSE 1 END AS copies,
               u_late < 0.0005 AS late
        FROM p
    """)
    con.execute("""
        CREATE OR REPLACE TABLE s AS
        SELECT entity, message_id, enqueued_time_utc AS source_time, sequence_number AS source_seq,
               enqueued_time_utc
                 + to_microseconds(CAST(round((lag_ms + CASE WHEN late THEN late_ms ELSE 0 END) * 1000)
                                        AS BIGINT))
                                 + to_microseconds(CAST((k - 1) * 30000000 AS BIGINT)) AS arrival
        FROM p2, generate_series(1, copies) g(k)
        WHERE NOT gap
    """)
    write_log(con, root / "primary", """
        SELECT 'enqueued' AS event, 'primary' AS namespace, entity, message_id, enqueued_time_utc,
               enqueued_time_utc + INTERVAL 1 SECOND AS observed_time_utc, sequence_number
        FROM p2""")
    write_log(con, root / "secondary", """
        SELECT 'enqueued' AS event, 'secondary' AS namespace, entity, message_id,
               arrival AS enqueued_time_utc,
               arrival + INTERVAL 1 SECOND AS observed_time_utc,
               row_number() OVER (PARTITION BY entity ORDER BY arrival) AS sequence_number,
               strftime(source_time, '%Y-%m-%dT%H:%M:%S.%fZ') AS repl_enqueued_time,
               CAST(source_seq AS VARCHAR) AS repl_sequence, 'primary/' || entity AS repl_source
        FROM s""")
    truth = con.execute(f"""
        WITH wm AS (SELECT entity, max(arrival) AS wm FROM s GROUP BY entity)
        SELECT count(*) FILTER (WHERE gap AND enqueued_time_utc <= wm - INTERVAL {GRACE_S + SKEW_S} SECOND),
               count(*) FILTER (WHERE gap AND enqueued_time_utc > wm - INTERVAL {GRACE_S + SKEW_S} SECOND),
               count(*) FILTER (WHERE NOT gap AND late),
               count(*) FILTER (WHERE NOT gap AND NOT late),
               count(*) FILTER (WHERE NOT gap AND copies > 1),
               coalesce(sum(copies - 1) FILTER (WHERE NOT gap), 0),
               count(*), (SELECT count(*) FROM s)
        FROM p2 JOIN wm USING (entity)
    """).fetchall()[0]
    con.execute("DROP TABLE p; DROP TABLE p2; DROP TABLE s")
    keys = ("missing", "pending", "late", "ok", "dup_keys", "dup_extra", "primary_rows", "secondary_rows")
    return dict(zip(keys, (int(v) for v in truth), strict=True))


def write_log(con: duckdb.DuckDBPyConnection, root: Path, query: str) -> None:
    """Hive layout by namespace/entity/UTC date/hour, UTC-adjusted timestamps (docs/audit-log.md)."""
    root.mkdir(parents=True, exist_ok=True)
    con.execute(f"""
        COPY (SELECT *, strftime(enqueued_time_utc, '%Y-%m-%d') AS date,
                     strftime(enqueued_time_utc, '%H') AS hour
              FROM ({query}) ORDER BY enqueued_time_utc)
        TO '{root}' (FORMAT parquet, PARTITION_BY (namespace, entity, date, hour),
                     WRITE_PARTITION_COLUMNS true, ROW_GROUP_SIZE 1000000)
    """)


DUCKDB_RECONCILE = """
CREATE OR REPLACE TEMP TABLE g AS
WITH u AS (
  SELECT entity, message_id, enqueued_time_utc AS ts, sequence_number AS seq, NULL::TIMESTAMPTZ AS stamp,
         NULL::BIGINT AS src_seq, 1 AS side
  FROM read_parquet('{root}/primary/**/*.parquet', hive_partitioning = true)
  WHERE enqueued_time_utc >= TIMESTAMPTZ '{t0}' - INTERVAL 30 MINUTE
    AND enqueued_time_utc < TIMESTAMPTZ '{t1}' + INTERVAL 30 MINUTE
  UNION ALL
  SELECT entity, message_id, enqueued_time_utc, sequence_number,
         CAST(split_part(repl_enqueued_time, ';', 1) AS TIMESTAMPTZ),
         CAST(split_part(repl_sequence, ';', 1) AS BIGINT), 2
  FROM read_parquet('{root}/secondary/**/*.parquet', hive_partitioning = true)
  WHERE enqueued_time_utc >= TIMESTAMPTZ '{t0}' - INTERVAL 30 MINUTE
    AND enqueued_time_utc < TIMESTAMPTZ '{t1}' + INTERVAL 30 MINUTE
)
SELECT entity, message_id,
       count(*) FILTER (WHERE side = 1) AS p_copies, min(ts) FILTER (WHERE side = 1) AS p_ts,
       min(seq) FILTER (WHERE side = 1) AS p_seq,
       count(*) FILTER (WHERE side = 2) AS s_copies, min(ts) FILTER (WHERE side = 2) AS s_first,
       max(ts) FILTER (WHERE side = 2) AS s_last, min(stamp) FILTER (WHERE side = 2) AS s_stamp,
       min(src_seq) FILTER (WHERE side = 2) AS s_src_seq, min(seq) FILTER (WHERE side = 2) AS s_seq
FROM u GROUP BY entity, message_id;

CREATE OR REPLACE TEMP TABLE c AS
WITH wm AS (SELECT entity, max(s_last) AS wm FROM g GROUP BY entity)
SELECT g.*, (epoch_us(s_first) - epoch_us(coalesce(s_stamp, p_ts))) / 1000.0 AS lag_ms,
       CASE WHEN p_copies = 0 THEN 'orphan'
            WHEN s_copies = 0 AND p_ts > wm.wm - INTERVAL {gs} SECOND THEN 'pending'
            WHEN s_copies = 0 THEN 'missing'
            WHEN epoch_us(s_first) - epoch_us(coalesce(s_stamp, p_ts)) > {grace_us} THEN 'late'
            ELSE 'ok' END AS status,
       greatest(s_copies - 1, 0) AS dup_extra, date_trunc('hour', coalesce(p_ts, s_stamp, s_first)) AS hour
FROM g LEFT JOIN wm USING (entity)
WHERE coalesce(p_ts, s_stamp, s_first) >= TIMESTAMPTZ '{t0}'
  AND coalesce(p_ts, s_stamp, s_first) < TIMESTAMPTZ '{t1}';
"""


def duckdb_reconcile(con: duckdb.DuckDBPyConnection, root: Path, out: Path) -> dict:
    """The same numbers as the Spark job, the DuckDB way (exact quantiles)."""
    con.execute(DUCKDB_RECONCILE.format(root=root, t0=f"{DAY} 00:00:00+00", t1=f"{NEXT_DAY} 00:00:00+00",
                                        gs=GRACE_S + SKEW_S, grace_us=GRACE_S * 1_000_000))
    totals = con.execute("""
        SELECT status, count(*), sum(dup_extra), count(*) FILTER (WHERE dup_extra > 0) FROM c GROUP BY status
    """).fetchall()
    per_entity = con.execute("""
        SELECT entity, status, count(*), sum(dup_extra) FROM c GROUP BY entity, status
    """).fetchall()
    per_hour = con.execute("SELECT epoch_us(hour), status, count(*), sum(dup_extra) FROM c GROUP BY ALL")\
        .fetchall()
    lag_entity = con.execute("""
        SELECT entity, quantile_cont(lag_ms, [0.5, 0.95, 0.99]), max(lag_ms) FROM c
        WHERE status IN ('ok', 'late') GROUP BY entity
    """).fetchall()
    lag_hour = con.execute("""
        SELECT entity, epoch_us(hour), quantile_cont(lag_ms, [0.5, 0.95, 0.99]), max(lag_ms) FROM c
        WHERE status IN ('ok', 'late') GROUP BY ALL
    """).fetchall()
    order = con.execute("""
        WITH w AS (SELECT entity, s_src_seq - lag(s_src_seq) OVER (PARTITION BY entity, s_src_seq >> 48
                                                                   ORDER BY s_first, s_seq) AS d
                   FROM c WHERE s_src_seq IS NOT NULL AND s_first IS NOT NULL)
        SELECT entity, count(*) FILTER (WHERE d < 0) FROM w GROUP BY entity
    """).fetchall()
    gaps = con.execute("""
        SELECT sum(max_s - min_s + 1 - n) FROM (
          SELECT entity, max(p_seq) AS max_s, min(p_seq) AS min_s, count(*) AS n FROM c
          WHERE p_seq IS NOT NULL GROUP BY entity, p_seq >> 48)
    """).fetchall()[0][0]
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    con.execute(f"COPY (SELECT * EXCLUDE (hour) FROM c WHERE status <> 'ok') TO '{out}/details' "
                "(FORMAT parquet, PARTITION_BY (status))")
    con.execute(f"COPY (SELECT * EXCLUDE (hour) FROM c WHERE dup_extra > 0) TO '{out}/duplicates.parquet' "
                "(FORMAT parquet)")
    result = {s: int(n) for s, n, _, _ in totals}
    result["dup_extra"] = int(sum(d or 0 for _, _, d, _ in totals))
    result["dup_keys"] = int(sum(k for _, _, _, k in totals))
    result["lag_entity"] = {e: (*q, m) for e, q, m in lag_entity}
    result["out_of_order"] = int(sum(n for _, n in order))
    result["source_gaps"] = int(gaps or 0)
    result["entities"], result["hours"], result["lag_hours"] = len({r[0] for r in per_entity}), len(
        {r[0] for r in per_hour}), len(lag_hour)
    con.execute("DROP TABLE g; DROP TABLE c")
    return result


def event_log_conf(event_log: Path | None) -> list[str]:
    """`--conf` arguments that make a Spark job write its event log (per-stage and SQL metrics) there."""
    if event_log is None:
        return []
    event_log.mkdir(parents=True, exist_ok=True)
    return ["--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={event_log.resolve()}",
            "--conf", "spark.eventLog.compress=false"]


def executor_cpu(event_log: Path | None, before: set[Path]) -> float | None:
    """CPU seconds of the Spark tasks (executorCpuTime summed over the stages) from the event log the last job
    wrote under `event_log` (`before`: the logs there before it ran)."""
    if event_log is None:
        return None
    new = sorted(set(event_log.glob("*/events_*")) - before)
    if not new:
        return None
    total = 0
    with new[-1].open() as lines:
        for line in lines:
            if '"SparkListenerStageCompleted"' in line:
                for a in json.loads(line)["Stage Info"].get("Accumulables", []):
                    if a["Name"] == "internal.metrics.executorCpuTime":
                        total += int(a["Value"])
    return total / 1e9


def timed(cmd: list[str], name: str) -> tuple[str, float]:
    """Run a Spark job in its own process, as a user would: its stdout and wall time (JVM start included)."""
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{name} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return done.stdout, wall


def spark_reconcile(root: Path, out: Path, driver_memory: str,
                    event_log: Path | None) -> tuple[dict, float]:
    """`sbfed reconcile` on the logs: its summary and wall time."""
    cmd = [sys.executable, "-m", "sbfed.cli", "reconcile", "--log", f"primary={root / 'primary'}",
           "--log", f"secondary={root / 'secondary'}", "--source", "primary", "--out", str(out),
           "--from", f"{DAY}T00:00:00Z", "--to", f"{NEXT_DAY}T00:00:00Z", "--driver-memory", driver_memory,
           "--max-missing", "100%", *event_log_conf(event_log)]
    before = set(event_log.glob("*/events_*")) if event_log else set()
    _, wall = timed(cmd, "sbfed reconcile")
    summary = json.loads((out / "summary.json").read_text())
    summary["executor_cpu_s"] = executor_cpu(event_log, before)
    return summary, wall


def referee(root: Path, out: Path, driver_memory: str, event_log: Path | None) -> tuple[dict, float]:
    """The minimal PySpark job (bench/reconcile_referee.py) on the same logs: its answer and wall time."""
    cmd = [sys.executable, str(REPO / "bench" / "reconcile_referee.py"), "--primary", str(root / "primary"),
           "--secondary", str(root / "secondary"), "--out", str(out), "--from", f"{DAY}T00:00:00+00:00",
           "--to", f"{NEXT_DAY}T00:00:00+00:00", "--grace-s", str(GRACE_S), "--skew-s", str(SKEW_S),
           "--driver-memory", driver_memory, *event_log_conf(event_log)]
    before = set(event_log.glob("*/events_*")) if event_log else set()
    stdout, wall = timed(cmd, "the referee")
    answer = json.loads(stdout.strip().splitlines()[-1])
    answer["executor_cpu_s"] = executor_cpu(event_log, before)
    return answer, wall


def check(name: str, got: dict, truth: dict) -> list[str]:
    keys = ("missing", "pending", "late", "ok", "dup_keys", "dup_extra")
    return [f"{name}: {k} = {got.get(k, 0)}, planted {truth[k]}" for k in keys if got.get(k, 0) != truth[k]]


def agree_lag(spark_entities: list[dict], duck: dict) -> list[str]:
    """Spark's histogram percentiles vs DuckDB's exact interpolated ones: within 1 % (+ 1 ms for ranks)."""
    issues = []
    for e in spark_entities:
        exact = duck["lag_entity"][e["entity"]]
        for name, value in zip(("p50", "p95", "p99", "max"), exact, strict=True):
            got = e["lag_ms"][name]
            if not math.isclose(got, value, rel_tol=0.012, abs_tol=1.0):
                issues.append(f"lag {e['entity']} {name}: spark {got} vs duckdb {value:.3f}")
    return issues


def logs(n: int, work: Path, keep: bool) -> tuple[Path, dict]:
    """The generated logs of size `n` and their planted truth; kept logs (--keep) serve the next run too."""
    root = work / f"logs-{n}"
    planted = root / "truth.json"
    if keep and planted.exists():
        truth = json.loads(planted.read_text())
        print(f"  reusing the logs in {root}", flush=True)
        return root, truth
    shutil.rmtree(root, ignore_errors=True)
    con = connect()
    start = time.perf_counter()
    truth = generate(con, n, root)
    generated = time.perf_counter() - start
    con.close()
    planted.write_text(json.dumps(truth))
    print(f"  generated {truth['primary_rows']:,} primary + {truth['secondary_rows']:,} secondary rows "
          f"in {generated:.1f}s: planted missing {truth['missing']:,}, pending {truth['pending']:,}, "
          f"late {truth['late']:,}, duplicated keys {truth['dup_keys']:,} (+{truth['dup_extra']:,} copies)",
          flush=True)
    return root, truth


def run_size(n: int, work: Path, driver_memory: str, keep: bool, event_log: Path | None) -> dict:
    root, truth = logs(n, work, keep)

    con = connect()
    start, duck_cpu = time.perf_counter(), time.process_time()
    duck = duckdb_reconcile(con, root, work / "duck-out")
    duck_s, duck_cpu = time.perf_counter() - start, time.process_time() - duck_cpu
    con.close()

    summary, wall = spark_reconcile(root, work / "spark-out", driver_memory, event_log)
    job_s = sum(summary["timings_s"].values())
    minimal, referee_wall = referee(root, work / "referee-out", driver_memory, event_log)
    c = summary["comparisons"][0]
    spark_totals = c["totals"]
    issues = [*check("spark", spark_totals, truth), *check("duckdb", duck, truth),
              *check("referee", minimal["totals"], truth), *agree_lag(c["entities"], duck)]
    ordering = sum(r["out_of_order"] for r in c["out_of_order"])
    if ordering != duck["out_of_order"]:
        issues.append(f"out-of-order: spark {ordering} vs duckdb {duck['out_of_order']}")
    gaps = sum(g["gaps"] for g in summary["source_sequence_gaps"])
    if gaps != duck["source_gaps"]:
        issues.append(f"source sequence gaps: spark {gaps} vs duckdb {duck['source_gaps']}")
    if not keep:
        shutil.rmtree(root, ignore_errors=True)
    rows = truth["primary_rows"] + truth["secondary_rows"]
    return {"n": n, "rows": rows, "duckdb_s": duck_s, "duckdb_cpu_s": duck_cpu, "spark_job_s": job_s,
            "spark_wall_s": wall,
            "referee_s": minimal["job_s"], "referee_wall_s": referee_wall,
            "spark_tasks_cpu_s": summary["executor_cpu_s"],
            "referee_tasks_cpu_s": minimal["executor_cpu_s"],
            "phases": summary["timings_s"], "issues": issues, "out_of_order": ordering}


FOLLOW_RULES = ["--grace", "5s", "--skew", "1s", "--lookahead", "15s"]
FOLLOW_LOOKAHEAD_S = 15
GAP_EVERY, DUP_EVERY = 1000, 200  # 0.1 % gaps, 0.5 % duplicate copies


def iso(t: datetime) -> str:
    return t.isoformat(timespec="microseconds").replace("+00:00", "Z")


class LiveWriter(threading.Thread):
    """Appends, every second, the previous second's records to one new file per log and entity: primary
    messages at `rate` per second and their copies in the secondary (lognormal lag, median 150 ms), the
    planted gaps left out and the planted duplicates copied twice (30 s later)."""

    def __init__(self, root: Path, rate: int) -> None:
        super().__init__(daemon=True)
        self.root, self.rate = root, rate
        self.stop = threading.Event()
        self.gaps: dict[str, datetime] = {}
        self.records = 0
        self.last: datetime | None = None
        self._copies: list[tuple[datetime, dict]] = []  # copies not arrived yet

    def run(self) -> None:
        rng = random.Random(42)
        second = datetime.now(UTC).replace(microsecond=0)
        i = 0
        while not self.stop.is_set():
            end = second + timedelta(seconds=1)
            time.sleep(max(0.0, (end - datetime.now(UTC)).total_seconds()))
            files: dict[Path, list[str]] = {}
            for k in range(self.rate):
                i += 1
                t = second + timedelta(microseconds=k * 1_000_000 // self.rate)
                entity, mid = f"orders-{i % 4}", f"m-{i}"
                self._add(files, "primary", {"event": "enqueued", "entity": entity, "message_id": mid,
                                             "enqueued_time_utc": iso(t), "sequence_number": i})
                if i % GAP_EVERY == 0:
                    self.gaps[mid] = t
                    continue
                for retry in range(2 if i % DUP_EVERY == 0 else 1):
                    at = t + timedelta(milliseconds=150 * math.exp(0.8 * rng.gauss(0, 1)) + 30_000 * retry)
                    self._copies.append((at, {"event": "enqueued", "entity": entity, "message_id": mid,
                                              "enqueued_time_utc": iso(at), "repl_enqueued_time": iso(t),
                                              "repl_sequence": str(i), "repl_source": f"primary/{entity}"}))
            for r in [r for at, r in self._copies if at < end]:
                self._add(files, "secondary", r)
            self._copies = [(at, r) for at, r in self._copies if at >= end]
            for path, lines in files.items():
                path.parent.mkdir(parents=True, exist_ok=True)
                hidden = path.parent / f".{path.name}"  # the file source skips it until it is complete
                hidden.write_text("".join(lines))
                hidden.rename(path)
            self.last, second = second, end

    def _add(self, files: dict[Path, list[str]], namespace: str, r: dict) -> None:
        t = datetime.fromisoformat(r["enqueued_time_utc"].replace("Z", "+00:00"))
        folder = (self.root / namespace / f"namespace={namespace}" / f"entity={r['entity']}"
                  / f"date={t:%Y-%m-%d}" / f"hour={t:%H}")
        files.setdefault(folder / f"tap-{int(time.time())}.jsonl", []).append(json.dumps(r) + "\n")
        self.records += 1


def gap_delays(out: Path) -> dict[str, float]:
    """message_id -> seconds from its source time to its final `missing` verdict."""
    if not list(out.glob("verdicts/*/*/*.parquet")):
        return {}
    con = connect()
    found = con.execute(f"""
        SELECT message_id, (epoch_us(final_at) - epoch_us(p_time)) / 1e6
        FROM read_parquet('{out}/verdicts/*/*/*.parquet', hive_partitioning = true) WHERE kind = 'missing'
    """).fetchall()
    con.close()
    return dict(found)


def run_follow(work: Path, logs: list[str], writer: LiveWriter,
               seconds: int) -> tuple[dict, list[int], float]:
    """The follow query beside the writer for `seconds`, then until it has read everything written; returns
    its last status, the state rows seen each second and how long it took to catch up."""
    out = work / "follow-out"
    cmd = [sys.executable, "-m", "sbfed.cli", "reconcile", *logs, *FOLLOW_RULES, "--follow",
           "--trigger", "5s", "--checkpoint", str(work / "checkpoint"), "--out", str(out),
           "--driver-memory", "2g"]
    with (work / "follow.log").open("w") as log:
        query = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        status = out / "status" / "secondary.json"
        state_rows, started = [], time.monotonic()
        while time.monotonic() - started < seconds and query.poll() is None:
            time.sleep(1)
            if status.exists():
                state_rows.append(json.loads(status.read_text())["state_rows"])
        writer.stop.set()
        writer.join()
        stopped = time.monotonic()
        while query.poll() is None and time.monotonic() - stopped < 300:  # a loaded machine is slow
            time.sleep(1)
            found = json.loads(status.read_text()) if status.exists() else None
            if found and all((i["latest_record"] or "") >= iso(writer.last) for i in found["inputs"]):
                break
        caught_up = time.monotonic() - stopped
        query.send_signal(signal.SIGTERM)
        query.wait(timeout=120)
    return json.loads(status.read_text()), state_rows, caught_up


def follow_bench(work: Path, rate: int, seconds: int) -> int:
    """The follow query beside a live writer; then the batch job over the same logs."""
    root = work / "live"
    for namespace in ("primary", "secondary"):
        (root / namespace).mkdir(parents=True, exist_ok=True)
    writer = LiveWriter(root, rate)
    writer.start()
    logs = ["--log", f"primary={root / 'primary'}", "--log", f"secondary={root / 'secondary'}",
            "--format", "json"]
    found, state_rows, caught_up = run_follow(work, logs, writer, seconds)
    log = (work / "follow.log").read_text()
    pattern = r"micro-batch \d+: (\d+) records, .*, ([\d.]+) s$"
    batches = [(int(n), float(s)) for n, s in re.findall(pattern, log, re.M)]
    processed, busy = sum(n for n, _ in batches), sum(s for _, s in batches)
    delays = gap_delays(work / "follow-out")
    due = {m for m, t in writer.gaps.items() if t + timedelta(seconds=FOLLOW_LOOKAHEAD_S) <= writer.last}
    issues = [f"{len(set(delays) - set(writer.gaps))} missing verdicts for messages that were not gaps",
              f"{len(due - set(delays))} planted gaps due without a missing verdict"]
    issues = [i for i in issues if not i.startswith("0 ")]
    final = found["final"]
    print(f"follow: {writer.records:,} records written in {seconds} s "
          f"({writer.records / seconds:,.0f}/s offered); {processed:,} processed in {len(batches)} "
          f"micro-batches, busy {busy:.1f} s: {processed / busy if busy else 0:,.0f} records/s while busy; "
          f"caught up {caught_up:.0f} s after the writer stopped")
    if delays:
        d = sorted(delays.values())
        print(f"  verdict delay (gap's source time -> final missing verdict): p50 {d[len(d) // 2]:.1f} s, "
              f"max {d[-1]:.1f} s over {len(d)} gaps (lookahead {FOLLOW_LOOKAHEAD_S} s, trigger 5 s)")
    most = max([*state_rows, found["state_rows"]])
    print(f"  state rows: max {most:,}, last {found['state_rows']:,}; final: ok {final['ok']:,}, missing "
          f"{final['missing']:,}, late {final['late']:,}, duplicated keys {final['dup_keys']:,}")
    start = time.perf_counter()
    batch = subprocess.run([sys.executable, "-m", "sbfed.cli", "reconcile", *logs, *FOLLOW_RULES, "--out",
                            str(work / "batch-out"), "--max-missing", "100%", "--driver-memory", "2g"],
                           cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if batch.returncode != 0:
        issues.append(f"batch job failed: {batch.stderr[-2000:]}")
    else:
        summary = json.loads((work / "batch-out" / "summary.json").read_text())
        job_s = sum(summary["timings_s"].values())
        rows = sum(i["records_read"] for i in summary["inputs"])
        t = summary["comparisons"][0]["totals"]
        print(f"  batch job, same logs: {rows:,} records in {job_s:.1f} s job time ({rows / job_s:,.0f} "
              f"records/s; {wall:.1f} s with the JVM start), missing {t['missing']:,}, "
              f"pending {t['pending']:,}; its verdict delay: the schedule's interval + lookahead + its run "
              "time")
    print("  " + ("agrees with the planted gaps" if not issues else "ISSUES: " + "; ".join(issues)))
    print(f"load average at the end (the machine may be shared): {os.getloadavg()[0]:.1f}")
    return 1 if issues else 0


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sizes", nargs="*", default=["1M", "5M", "10M"], help="primary messages per run")
    p.add_argument("--driver-memory", default="4g")
    p.add_argument("--keep", type=Path, help="work directory to keep, logs and outputs (reused by the next "
                   "run with the same --keep); default: a temporary one, removed")
    p.add_argument("--event-log", type=Path, help="directory both Spark jobs write their event logs to")
    p.add_argument("--follow", action="store_true", help="measure the follow mode against a live writer")
    p.add_argument("--rate", type=int, default=500, help="--follow: primary messages per second")
    p.add_argument("--seconds", type=int, default=120, help="--follow: how long the writer writes")
    args = p.parse_args(argv)
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-reconcile-"))
    if args.follow:
        try:
            return follow_bench(work, args.rate, args.seconds)
        finally:
            if args.keep is None:
                shutil.rmtree(work, ignore_errors=True)
    results = []
    try:
        for size in args.sizes:
            n = parse_size(size)
            load = os.getloadavg()[0]
            print(f"== {n:,} primary messages (cores: {os.cpu_count()}, load average {load:.1f})", flush=True)
            r = run_size(n, work, args.driver_memory, args.keep is not None, args.event_log)
            results.append(r)
            verdict = "agree with planted truth" if not r["issues"] else "DISAGREE: " + "; ".join(r["issues"])
            print(f"  duckdb {r['duckdb_s']:.1f}s ({r['duckdb_cpu_s']:.1f} CPU s) | "
                  f"spark job {r['spark_job_s']:.1f}s "
                  f"(phases {r['phases']}) | referee {r['referee_s']:.1f}s | "
                  f"incl. JVM start: spark {r['spark_wall_s']:.1f}s, referee {r['referee_wall_s']:.1f}s | "
                  f"spark/referee {r['spark_job_s'] / r['referee_s']:.2f}x | "
                  f"{tasks_cpu(r) and tasks_cpu(r) + ' | '}"
                  f"spark/duckdb {r['spark_job_s'] / r['duckdb_s']:.1f}x | {verdict}", flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print("\nsize        rows   duckdb s  referee s  spark job s  spark wall s  /referee  /duckdb  "
          "spark us/row  ok")
    for r in results:
        print(f"{r['n']:>9,} {r['rows']:>11,} {r['duckdb_s']:>9.1f} {r['referee_s']:>10.1f} "
              f"{r['spark_job_s']:>12.1f} {r['spark_wall_s']:>13.1f} "
              f"{r['spark_job_s'] / r['referee_s']:>8.2f}x "
              f"{r['spark_job_s'] / r['duckdb_s']:>6.1f}x {1e6 * r['spark_job_s'] / r['rows']:>13.2f}  "
              f"{'yes' if not r['issues'] else 'NO'}")
    for line in targets(results):
        print(line)
    print(f"load average at the end (the machine may be shared): {os.getloadavg()[0]:.1f}")
    return 1 if any(r["issues"] for r in results) else 0


def tasks_cpu(r: dict) -> str:
    """The Spark tasks' CPU seconds from the event logs (--event-log), the steadiest figure of all."""
    if r["spark_tasks_cpu_s"] is None or r["referee_tasks_cpu_s"] is None:
        return ""
    return (f"tasks' CPU s (event logs): spark {r['spark_tasks_cpu_s']:.1f}, referee "
            f"{r['referee_tasks_cpu_s']:.1f}, {r['spark_tasks_cpu_s'] / r['referee_tasks_cpu_s']:.2f}x")


def cpu_vs_duckdb(r: dict) -> str:
    """The Spark tasks' CPU seconds against DuckDB's process CPU seconds (both threads), where measured."""
    if r["spark_tasks_cpu_s"] is None:
        return ""
    return (f"; CPU s: spark tasks {r['spark_tasks_cpu_s']:.1f} vs DuckDB {r['duckdb_cpu_s']:.1f}, "
            f"{r['spark_tasks_cpu_s'] / r['duckdb_cpu_s']:.1f}x")


def targets(results: list[dict]) -> list[str]:
    """The three speed targets of the job, each met, missed (with the figures and where the time went) or not
    measured in this run."""
    by_n = {r["n"]: r for r in results}

    def us_per_row(r: dict) -> float:
        return 1e6 * r["spark_job_s"] / r["rows"]

    def verdict(ok: bool) -> str:
        return "MET" if ok else "NOT MET"

    lines = ["targets:"]
    for r in results:
        ratio = r["spark_job_s"] / r["referee_s"]
        lines.append(f"  job time at {r['n']:,} <= 1.3x the minimal Spark job: {verdict(ratio <= 1.3)} "
                     f"({ratio:.2f}x: {r['spark_job_s']:.1f} s vs {r['referee_s']:.1f} s"
                     f"{tasks_cpu(r) and '; ' + tasks_cpu(r)})")
    one, five, ten = by_n.get(1_000_000), by_n.get(5_000_000), by_n.get(10_000_000)
    if one:
        job = one["spark_job_s"]
        lines.append(f"  job time at 1M <= 10 s: {verdict(job <= 10)} ({job:.1f} s; phases {one['phases']})")
    else:
        lines.append("  job time at 1M <= 10 s: not measured (run size 1M)")
    if five:
        ratio = five["spark_job_s"] / five["duckdb_s"]
        lines.append(f"  job time at 5M <= 5x DuckDB: {verdict(ratio <= 5)} ({ratio:.1f}x: "
                     f"{five['spark_job_s']:.1f} s vs {five['duckdb_s']:.1f} s; phases {five['phases']}"
                     f"{cpu_vs_duckdb(five)})")
    else:
        lines.append("  job time at 5M <= 5x DuckDB: not measured (run size 5M)")
    if one and ten:
        rising = us_per_row(ten) > 1.1 * us_per_row(one)
        lines.append(f"  us/row not rising 1M -> 10M (within 10 %): {verdict(not rising)} "
                     f"({us_per_row(one):.2f} -> {us_per_row(ten):.2f})")
    else:
        lines.append("  us/row not rising 1M -> 10M: not measured (run sizes 1M and 10M)")
    return lines


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
