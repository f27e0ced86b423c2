"""Replica mode on planted logs: every planted problem classified exactly, per key."""

from __future__ import annotations

import json
import math

import pytest

from spark_reconcile import cli, job, metrics
from spark_reconcile.reading import read_log

from .planted import T0, T1, replica_logs

WINDOW = ["--from", "2026-11-22T23:00:00Z", "--to", "2026-11-23T01:00:00Z"]


def settings(*args: str):
    return cli.settings_from(cli.parser().parse_args(list(args)))


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    base = tmp_path_factory.mktemp("replica")
    primary, secondary, truth = replica_logs(base)
    return base, primary, secondary, truth


@pytest.fixture(scope="module")
def result(spark, planted):
    base, primary, secondary, _ = planted
    out = base / "out"
    s = settings("--log", f"primary={primary}", "--log", f"secondary={secondary}", "--out", str(out), *WINDOW)
    return job.run(spark, s), out


def statuses(spark, out) -> dict[tuple[str, str], str]:
    rows = (spark.read.parquet(str(out / "details")).where("kind <> 'duplicate'")
            .select("entity", "message_id", "status").collect())
    return {(r.entity, r.message_id): r.status for r in rows}


def test_every_planted_problem_is_classified_exactly(spark, planted, result):
    _, _, _, truth = planted
    summary, out = result
    expected_problems = {k: v for k, v in truth.status.items() if v != "ok"}
    assert statuses(spark, out) == expected_problems
    totals = summary["comparisons"][0]["totals"]
    for status in ("ok", "late", "pending", "missing", "expired", "orphan"):
        assert totals[status] == truth.count(status), status
    assert totals["expected"] == sum(1 for s in truth.status.values() if s != "orphan")
    assert summary["verdict"] == "fail"
    assert summary["failures"] == ["secondary: 2 missing messages exceed the threshold 0"]


def test_duplicates_carry_their_count(spark, planted, result):
    _, _, _, truth = planted
    summary, out = result
    rows = spark.read.parquet(str(out / "details" / "kind=duplicate")).collect()
    assert {(r.entity, r.message_id): r.dup_extra for r in rows} == truth.dup_extra
    assert all(r.s_copies == r.dup_extra + 1 and r.spread_ms == 30_000 * r.dup_extra for r in rows)
    totals = summary["comparisons"][0]["totals"]
    assert (totals["dup_keys"], totals["dup_extra"]) == (len(truth.dup_extra), sum(truth.dup_extra.values()))


def test_per_entity_counts_and_watermarks(planted, result):
    _, _, _, truth = planted
    summary, _ = result
    entities = {e["entity"]: e for e in summary["comparisons"][0]["entities"]}
    assert set(entities) == {"orders", "billing/payments"}
    for name, e in entities.items():
        for status in ("ok", "late", "pending", "missing", "expired", "orphan"):
            assert e[status] == truth.count(status, name), (name, status)
    assert entities["orders"]["watermark"] == "2026-11-23T00:56:00.208000Z"
    assert entities["billing/payments"]["watermark"] == "2026-11-23T00:58:00.209000Z"


def test_hours_are_utc_buckets(result):
    summary, _ = result
    hours = summary["comparisons"][0]["hours"]
    assert [h["hour"] for h in hours] == ["2026-11-22T23:00:00.000000Z", "2026-11-23T00:00:00.000000Z"]
    assert [h["expected"] for h in hours] == [60, 60]
    assert [(h["missing"], h["pending"], h["dup_extra"]) for h in hours] == [(2, 0, 3), (0, 2, 0)]


def test_lag_percentiles_within_one_percent_of_exact(planted, result):
    _, _, _, truth = planted
    summary, _ = result
    lag = summary["comparisons"][0]["lag_ms"]
    values = sorted(truth.lag_ms.values())
    assert lag["count"] == len(values)
    assert (lag["min"], lag["max"]) == (values[0], values[-1])
    for name, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
        exact = values[math.ceil(q * len(values)) - 1]
        assert lag[name] == pytest.approx(exact, rel=0.01), name


def test_out_of_order_and_source_capture_gaps(planted, result):
    _, _, _, truth = planted
    summary, _ = result
    order = {r["entity"]: r for r in summary["comparisons"][0]["out_of_order"]}
    assert {e: r["out_of_order"] for e, r in order.items()} == truth.out_of_order
    assert {e: r["max_displacement"] for e, r in order.items()} == truth.max_displacement
    assert {e: r["partition"] for e, r in order.items()} == {"orders": 0, "billing/payments": 3}
    assert {g["entity"]: g["gaps"] for g in summary["source_sequence_gaps"]} == truth.source_gaps


def test_the_walk_code_names_its_walk_again(spark):
    """The walk's one-long key decodes to the target, origin, entity and partition it was made of, a NULL
    origin (a mirror orphan) and the extreme partitions of a signed sequence number included."""
    names = {"target": ["east", "west"], "origin": ["east", "west", "north"], "entity": ["a", "b/c", "d"]}
    rows = [("west", None, "d", (-1 << 63) + 5), ("east", "north", "a", 7),
            ("west", "west", "b/c", (1 << 63) - 1), ("east", "east", "d", 3 << 48)]
    frame = spark.createDataFrame(rows, "target string, origin string, entity string, src_seq long")
    codes = [r.walk for r in frame.select(metrics._walk_code(names).alias("walk")).collect()]
    assert len(set(codes)) == 4
    assert [metrics._walk_key(c, names) for c in codes] == [(t, o, e, s >> 48) for t, o, e, s in rows]


def test_malformed_records_counted_and_hours_outside_the_window_not_read(spark, planted, result):
    _, _, secondary, truth = planted
    summary, _ = result
    assert {i["tag"]: i["malformed_records"] for i in summary["inputs"]} == truth.malformed
    from spark_reconcile.config import LogInput

    log = LogInput("secondary", str(secondary))
    pruned = read_log(spark, log, T0, T1).where("entity IS NULL").count()
    everything = read_log(spark, log, None, None).where("entity IS NULL").count()
    assert (pruned, everything) == (2, 3)


def test_outputs_are_written(result):
    summary, out = result
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk["comparisons"][0]["totals"] == summary["comparisons"][0]["totals"]
    html = (out / "report.html").read_text()
    assert "FAIL" in html and html.count("<svg") == 3 and "orders-5" in html


def test_replica_ttl_turns_old_gaps_into_expired(spark, planted):
    base, primary, secondary, truth = planted
    s = settings("--log", f"primary={primary}", "--log", f"secondary={secondary}", "--out", str(base / "ttl"),
                 "--replica-ttl", "secondary=2m", *WINDOW)
    totals = job.run(spark, s)["comparisons"][0]["totals"]
    assert totals["missing"] == 0
    assert totals["expired"] == truth.count("expired") + truth.count("missing")
    assert totals["pending"] == truth.count("pending")


def test_the_walk_code_refuses_more_walks_than_its_key_holds():
    names = {k: [f"{k}-{i}" for i in range(60_000)] for k in ("target", "origin", "entity")}
    with pytest.raises(ValueError, match="more than the out-of-order walk's 63-bit key holds"):
        metrics._walk_code(names)
