"""`sbfed reconcile --follow`: the reconciliation as a Structured Streaming query over the audit logs.

Each micro-batch (Spark's file sources: the files writers added since the last one) is grouped by message
key like the batch job and merged into the keys still open, and every (comparison, key) whose fate is final
is classified by the batch job's own rules (classify.classify) and written once. The open keys are a
Parquet table in the checkpoint, one version per micro-batch, rather than Spark's state store: the rules
need each target's watermark per entity (its latest arrival), which Spark's one event-time watermark per
query cannot give, and Spark drops input older than its watermark, which an audit must not do.

A key's fate is final once its target's watermark for the entity and every log of the comparison have come
`lookahead` past the key's time (its source EnqueuedTimeUtc, else its copy's origin stamp or arrival): every
record of it is in by then, if the lookahead holds. It is judged as of that moment (the watermark capped at
time + lookahead), so the verdict is the same however the files were cut into micro-batches. A key is
forgotten once every comparison has its verdict and no log can add to it any more.

Exactly once across restarts: everything a micro-batch writes goes to paths named by its batch id and is
replaced when Spark runs the batch again after a crash; the micro-batch reads the state of the latest batch
before it whose progress file (written last) exists.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime
from functools import reduce

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_reconcile import classify, metrics, outputs
from spark_reconcile.config import FollowSettings, Settings, as_record, to_micros
from spark_reconcile.progress import Progress, comparison_status
from spark_reconcile.reading import stream_log

log = logging.getLogger("sbfed.reconcile")
_US_PER_S = 1_000_000
_DONE = "_done"  # the targets a key's verdict has been written for


def paths(settings: Settings, follow: FollowSettings) -> dict[str, str]:
    """Where a continuous run keeps things: outputs under --out, its own state under --checkpoint."""
    return {"verdicts": f"{settings.out}/verdicts", "cube": f"{settings.out}/cube",
            "status": f"{settings.out}/status", "alerts": f"{settings.out}/alerts",
            "run": f"{settings.out}/follow.json", "spark": f"{follow.checkpoint}/spark",
            "state": f"{follow.checkpoint}/state", "progress": f"{follow.checkpoint}/progress"}


def latest_progress(spark: SparkSession, folder: str, before: int | None = None) -> Progress:
    """The progress of the latest complete micro-batch (before `before`), or an empty one."""
    batches = [int(name[:-5]) for name in outputs.list_names(spark, folder) if name.endswith(".json")]
    batches = [b for b in batches if before is None or b < before]
    if not batches:
        return Progress()
    return Progress.from_json(outputs.read_text(spark, f"{folder}/{max(batches):020d}.json"))


def comparison_logs(c: classify.Comparison, settings: Settings) -> list[str]:
    """The logs whose progress decides a comparison's keys: source and target in replica mode, else all."""
    return [settings.source, c.target] if settings.mode == "replica" else settings.tags()


class MicroBatch:
    """The foreachBatch function: merge, judge what is final, write it, keep the rest."""

    def __init__(self, spark: SparkSession, settings: Settings, follow: FollowSettings) -> None:
        self.spark, self.settings, self.follow = spark, settings, follow
        self.where = paths(settings, follow)
        self.comparisons = classify.roles(settings).comparisons
        self.horizon_us = int(settings.lookahead.total_seconds() * _US_PER_S)
        self.recent: list[dict] | None = None  # final verdicts' cube rows of the status window
        self.alerted = False
        self.history: list[dict] = []  # this run's micro-batches: records, verdicts, state rows, seconds

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        started = time.perf_counter()
        now_us = to_micros(datetime.now(UTC))
        s = self.settings
        p = latest_progress(self.spark, self.where["progress"], before=batch_id)
        new = classify.group(classify.with_roles(batch, s), s).persist(StorageLevel.MEMORY_AND_DISK)
        found = metrics.inventory(new, s.tags(), [c.target for c in self.comparisons], None, (None, None))
        latest = new.where(F.col("entity").isNotNull()).agg(
            *[F.unix_micros(F.max(f"seen__{t}")).alias(t) for t in s.tags()]).first().asDict()
        p.add(found, latest)
        keyed = self._merged(new, p).persist(StorageLevel.MEMORY_AND_DISK)
        judged = self._judged(keyed, p).persist(StorageLevel.MEMORY_AND_DISK)
        cube_rows = self._write_verdicts(judged.where("_decided"), batch_id, now_us)
        still = judged.where(~F.col("final")).groupBy("target", "status").agg(F.count(F.lit(1)).alias("n"))
        p.open = [r.asDict() for r in still.collect()]
        self._write_state(keyed, judged, p, batch_id)
        for cached in (judged, keyed, new):
            cached.unpersist()

        p.batch = batch_id
        p.state_rows = self.spark.read.parquet(self._state(batch_id)).count()
        p.count_final(cube_rows)
        outputs.write_text(self.spark, f"{self.where['progress']}/{batch_id:020d}.json", p.to_json())
        self._status(p, cube_rows, now_us, batch_id)
        self._forget(batch_id)
        figures = {"micro_batch": batch_id, "records": sum(found.records.values()),
                   "final": sum(r["n"] for r in cube_rows), "state_rows": p.state_rows,
                   "seconds": round(time.perf_counter() - started, 3)}
        self.history.append(figures)
        log.info("micro-batch %(micro_batch)d: %(records)d records, %(final)d final verdicts, %(state_rows)d "
                 "state rows, %(seconds).1f s", figures)

    def _merged(self, new: DataFrame, p: Progress) -> DataFrame:
        """The micro-batch's keys merged into the open keys of the previous one (one row per key)."""
        fresh = new.where(F.col("entity").isNotNull()).drop("gseq").withColumn(
            _DONE, F.array().cast("array<string>"))
        if p.batch >= 0:
            fresh = self.spark.read.parquet(self._state(p.batch)).unionByName(fresh)
        done = F.array_distinct(F.flatten(F.collect_list(_DONE))).alias(_DONE)
        return classify.combine(fresh, self.settings, done)

    def _judged(self, keyed: DataFrame, p: Progress) -> DataFrame:
        """(comparison, key) rows classified as of their final moment; `final`, and `_decided`: final and not
        written before."""
        s = self.settings
        ceiling = {c.target: p.reached(comparison_logs(c, s)) for c in self.comparisons}
        watermark = metrics.watermark_column(p.watermarks(), p.entities, [c.target for c in self.comparisons],
                                             ceiling)
        judged = classify.classify(classify.per_comparison(keyed, s, keep=(_DONE,)), watermark,
                                   set(p.sent_logs), s, horizon_us=self.horizon_us)
        return judged.withColumn("_decided", F.col("final") & ~_written())

    def _write_verdicts(self, decided: DataFrame, batch_id: int, now_us: int) -> list[dict]:
        """verdicts/batch=<id>/ and cube/batch=<id>/ (replaced on a rerun); returns the cube's rows."""
        outputs.write_details(decided, f"{self.where['verdicts']}/batch={batch_id}",
                              self.settings.mode == "exactly-once",
                              extra=(F.lit(batch_id).cast("long").alias("micro_batch"),
                                     F.timestamp_micros(F.lit(now_us)).alias("final_at")))
        cube = metrics.cube(decided).withColumn("final_at_us", F.lit(now_us)).persist()
        rows = metrics.collect_cube(cube)
        cube.write.mode("overwrite").parquet(f"{self.where['cube']}/batch={batch_id}")
        cube.unpersist()
        return rows

    def _write_state(self, keyed: DataFrame, judged: DataFrame, p: Progress, batch_id: int) -> None:
        """The keys to keep: a comparison still waits for their verdict, or a log may still add to them (their
        last record is less than the lookahead behind every log); with the comparisons now written."""
        s = self.settings
        keys = classify.key_columns(s)
        flags = judged.groupBy(*keys).agg(
            F.max(~F.col("final") & ~_written()).alias("_open"),
            F.collect_set(F.when(F.col("_decided"), F.col("target"))).alias("_now"))
        reached = p.reached(s.tags())
        kept = F.coalesce(F.col("_open"), F.lit(False)) | F.lit(reached is None)
        if reached is not None:
            last = F.greatest(*[F.col(f"seen__{t}") for t in s.tags()])
            kept = kept | (F.unix_micros(last) + self.horizon_us > reached)
        written = F.array_union(F.col(_DONE), F.coalesce(F.col("_now"), F.array().cast("array<string>")))
        state = keyed.join(flags, keys, "left").where(kept).withColumn(_DONE, written).drop("_open", "_now")
        state.write.mode("overwrite").parquet(self._state(batch_id))

    def _state(self, batch_id: int) -> str:
        return f"{self.where['state']}/batch={batch_id:020d}"

    def _status(self, p: Progress, cube_rows: list[dict], now_us: int, batch_id: int) -> None:
        """status/<target>.json for each comparison; an alert record (and an ERROR line) when a comparison's
        missing verdicts in the status window exceed --alert-missing."""
        start_us = now_us - int(self.follow.status_window.total_seconds() * _US_PER_S)
        if self.recent is None:
            self.recent = recent_cube(self.spark, self.where["cube"], start_us)
        else:
            self.recent = [r for r in self.recent if r["final_at_us"] >= start_us] + cube_rows
        alerts = []
        for c in self.comparisons:
            missing = sum(r["n"] for r in self.recent if r["target"] == c.target and r["status"] == "missing")
            alert = None
            if self.follow.alert_missing is not None and missing > self.follow.alert_missing:
                alert = {"target": c.target, "micro_batch": batch_id, "missing": missing,
                         "threshold": self.follow.alert_missing, "since_us": start_us, "at_us": now_us}
                alerts.append(alert)
                log.error("ALERT %s: %d missing messages in the last %s exceed --alert-missing %d", c.target,
                          missing, self.follow.status_window, self.follow.alert_missing)
            status = comparison_status(c, p, [r for r in self.recent if r["target"] == c.target],
                                       settings=self.settings, now_us=now_us, window_start_us=start_us,
                                       alert=alert)
            outputs.write_text(self.spark, f"{self.where['status']}/{c.target}.json",
                               json.dumps(status, indent=2) + "\n")
        if alerts:
            self.alerted = True
            outputs.write_text(self.spark, f"{self.where['alerts']}/batch={batch_id:020d}.json",
                               "".join(json.dumps(a) + "\n" for a in alerts))

    def _forget(self, batch_id: int) -> None:
        """Drop state and progress older than the previous batch (a rerun of this one reads that)."""
        kept = ((self.where["state"], "batch=", ""), (self.where["progress"], "", ".json"))
        for folder, prefix, suffix in kept:
            for name in outputs.list_names(self.spark, folder):
                number = name.removeprefix(prefix).removesuffix(suffix)
                if number.isdigit() and int(number) < batch_id - 1:
                    outputs.delete(self.spark, f"{folder}/{name}")


def recent_cube(spark: SparkSession, folder: str, since_us: int) -> list[dict]:
    """The final verdicts' cube rows written since `since_us` (a restarted run's status window)."""
    if not outputs.list_names(spark, folder):
        return []
    rows = spark.read.parquet(folder).where(F.col("final_at_us") >= since_us).drop("batch")
    return metrics.collect_cube(rows)


def start(spark: SparkSession, settings: Settings, follow: FollowSettings, argv: list[str]):
    """Start the query; returns it and the micro-batch function (which knows whether an alert fired)."""
    where = paths(settings, follow)
    run = {"argv": argv, "settings": as_record(settings, follow)}  # the command line, for people
    outputs.write_text(spark, where["run"], json.dumps(run, indent=2) + "\n")
    read_start, read_end = settings.window.read_range(settings.lookahead)
    stream = reduce(DataFrame.unionByName, [stream_log(spark, lg, read_start, read_end,
                                                       follow.max_files_per_trigger) for lg in settings.logs])
    handler = MicroBatch(spark, settings, follow)
    writer = (stream.writeStream.foreachBatch(handler).queryName("sbfed-reconcile")
              .option("checkpointLocation", where["spark"]))
    if follow.available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{max(follow.trigger.total_seconds(), 0.001)} seconds")
    return writer.start(), handler


def _written():
    """The (comparison, key) row's verdict was written by an earlier micro-batch."""
    return F.array_contains(F.col(_DONE), F.col("target"))


def statuses(spark: SparkSession, settings: Settings, follow: FollowSettings) -> list[dict]:
    """Each comparison's status.json as last written (none before the first micro-batch)."""
    folder = paths(settings, follow)["status"]
    found = [outputs.read_text(spark, f"{folder}/{c.target}.json")
             for c in classify.roles(settings).comparisons]
    return [json.loads(text) for text in found if text is not None]
