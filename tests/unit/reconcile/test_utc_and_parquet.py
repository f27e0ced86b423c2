"""Same answers whatever the machine's time zone and whatever the input format (JSON lines, Parquet with
UTC-adjusted or naive timestamps)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb

from spark_reconcile import cli, job

from .planted import replica_logs

WINDOW = ["--from", "2026-11-22T23:00:00Z", "--to", "2026-11-23T01:00:00Z"]
REPO = Path(__file__).resolve().parents[3]


def problems(details: Path) -> dict[tuple[str, str], str]:
    query = (f"SELECT entity, message_id, status FROM read_parquet('{details}/*/*.parquet', "
             "hive_partitioning = true) WHERE kind <> 'duplicate'")
    rows = duckdb.connect().execute(query).fetchall()
    return {(e, m): s for e, m, s in rows}


def test_new_york_process_gives_the_utc_answers(tmp_path):
    primary, secondary, truth = replica_logs(tmp_path)
    out = tmp_path / "out"
    env = dict(os.environ, TZ="America/New_York")
    done = subprocess.run(
        [sys.executable, "-m", "sbfed.cli", "reconcile", "--log", f"primary={primary}",
         "--log", f"secondary={secondary}", "--out", str(out), "--shuffle-partitions", "2", *WINDOW],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr[-2000:]  # two planted gaps fail the default threshold of 0
    assert "FAIL: secondary: 2 missing messages" in done.stdout
    assert problems(out / "details") == {k: v for k, v in truth.status.items() if v != "ok"}
    summary = json.loads((out / "summary.json").read_text())
    c = summary["comparisons"][0]
    assert [h["hour"] for h in c["hours"]] == ["2026-11-22T23:00:00.000000Z", "2026-11-23T00:00:00.000000Z"]
    assert [h["expected"] for h in c["hours"]] == [60, 60]
    assert {e["entity"]: e["watermark"] for e in c["entities"]} == {
        "billing/payments": "2026-11-23T00:58:00.209000Z", "orders": "2026-11-23T00:56:00.208000Z"}
    assert summary["samples"]["missing"][0]["p_time"] == "2026-11-22T23:10:00.000000Z"
    # The detail tables hold UTC-adjusted timestamps: another engine reads the same instants.
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    first = con.execute(f"SELECT min(p_time)::VARCHAR FROM read_parquet("
                        f"'{out}/details/kind=missing/*.parquet')").fetchall()
    assert first == [("2026-11-22 23:10:00+00",)]


def to_parquet(root: Path, naive: bool) -> Path:
    """Rewrite a JSON-lines log as Parquet in the same layout: times as TIMESTAMPTZ or naive TIMESTAMP."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    kind = "TIMESTAMP" if naive else "TIMESTAMPTZ"
    target = root.with_name(root.name + ("-naive" if naive else "-tz"))
    for source in root.rglob("*.jsonl"):
        lines = [json.loads(line) for line in source.read_text().splitlines() if line.startswith('{"')]
        if not lines:
            continue
        folder = target / source.parent.relative_to(root)
        folder.mkdir(parents=True)
        staged = folder / "rows.json"
        staged.write_text(json.dumps(lines))
        con.execute(f"""COPY (SELECT * REPLACE (
                CAST(TRY_CAST(enqueued_time_utc AS TIMESTAMPTZ) AS {kind}) AS enqueued_time_utc,
                CAST(CAST(observed_time_utc AS TIMESTAMPTZ) AS {kind}) AS observed_time_utc)
            FROM read_json('{staged}', format = 'array', hive_partitioning = false))
            TO '{folder}/tap-0001.parquet' (FORMAT parquet)""")
        staged.unlink()
    return target


def test_parquet_inputs_with_utc_and_naive_timestamps(spark, tmp_path):
    primary, secondary, truth = replica_logs(tmp_path)
    out = tmp_path / "out"
    args = ["--log", f"primary={to_parquet(primary, naive=False)}",
            "--log", f"secondary={to_parquet(secondary, naive=True)}", "--out", str(out), *WINDOW]
    summary = job.run(spark, cli.settings_from(cli.parser().parse_args(args)))
    assert problems(out / "details") == {k: v for k, v in truth.status.items() if v != "ok"}
    c = summary["comparisons"][0]
    assert [h["hour"] for h in c["hours"]] == ["2026-11-22T23:00:00.000000Z", "2026-11-23T00:00:00.000000Z"]
    assert {r["entity"]: r["out_of_order"] for r in c["out_of_order"]} == truth.out_of_order
