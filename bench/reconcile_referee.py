"""The referee for bench/reconcile.py: a minimal idiomatic PySpark job computing the reconcile job's core
answer on the same Parquet logs, so the bench can say what sbfed's job costs over Spark's own floor.

The core answer (reference: reconciliation.md sections 3-5): every primary message enqueued in the window
[--from, --to) matched by MessageId (per entity) against the secondary log read up to the window's end plus
the lookahead, in one UNION ALL + GROUP BY; each entity's secondary watermark (its latest EnqueuedTimeUtc);
each message's status (ok, late beyond the grace, pending within grace + skew of the watermark, missing,
orphan); replica and primary duplicate copies; the gap and duplicate lists written as Parquet, and the counts
per entity and status collected. Not in it (sbfed's job adds these): lag percentiles and the hourly cube, the
out-of-order walk, the source's sequence gaps, TTL expiry, malformed records, JSON logs, the HTML report.

Written as a user new to the data would: DataFrame API, an explicit schema, 4 shuffle partitions, AQE on,
the grouped result cached once. Prints one JSON line: the counts and the job time (after the JVM start).

    .venv/bin/python bench/reconcile_referee.py --primary DIR --secondary DIR --out DIR --from T --to T
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime, timedelta

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

SCHEMA = "entity STRING, message_id STRING, enqueued_time_utc TIMESTAMP"


def session(driver_memory: str, conf: list[str]) -> SparkSession:
    builder = (SparkSession.builder.master("local[*]").appName("reconcile-referee")
               .config("spark.driver.memory", driver_memory)
               .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
               .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.sql.adaptive.enabled", "true"))
    for item in conf:
        key, value = item.split("=", 1)
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def reconcile(spark: SparkSession, primary: str, secondary: str, out: str, t0: datetime, t1: datetime,
              grace: timedelta, skew: timedelta, lookahead: timedelta) -> dict:
    def side(path: str, start: datetime, end: datetime):
        ts = F.col("enqueued_time_utc")
        return (spark.read.schema(SCHEMA).option("recursiveFileLookup", "true").parquet(path)
                .where((ts >= F.lit(start)) & (ts < F.lit(end))))

    p = side(primary, t0, t1)
    s = side(secondary, t0, t1 + lookahead)
    watermarks = s.groupBy("entity").agg(F.max("enqueued_time_utc").alias("wm"))
    rows = p.select("entity", "message_id", "enqueued_time_utc", F.lit(True).alias("primary")).unionByName(
        s.select("entity", "message_id", "enqueued_time_utc", F.lit(False).alias("primary")))
    ts, is_p = F.col("enqueued_time_utc"), F.col("primary")
    g = rows.groupBy("entity", "message_id").agg(
        F.count_if(is_p).alias("p_copies"), F.min(F.when(is_p, ts)).alias("p_ts"),
        F.count_if(~is_p).alias("s_copies"), F.min(F.when(~is_p, ts)).alias("s_first"),
        F.max(F.when(~is_p, ts)).alias("s_last"))
    lag = F.col("s_first") - F.col("p_ts")
    status = (F.when(F.col("p_copies") == 0, "orphan")
              .when((F.col("s_copies") == 0) & (F.col("p_ts") > F.col("wm") - grace - skew), "pending")
              .when(F.col("s_copies") == 0, "missing")
              .when(lag > grace, "late")
              .otherwise("ok"))
    classified = (g.join(F.broadcast(watermarks), "entity", "left")
                  .where((F.col("p_copies") > 0) | (F.col("s_first") < F.lit(t1)))
                  .select("entity", "message_id", "p_ts", "s_first", "s_last", "p_copies", "s_copies",
                          status.alias("status"),
                          F.greatest(F.col("s_copies") - 1, F.lit(0)).alias("dup_extra"),
                          F.greatest(F.col("p_copies") - 1, F.lit(0)).alias("source_dup_extra"))
                  .cache())
    counts = (classified.groupBy("entity", "status")
              .agg(F.count(F.lit(1)).alias("n"), F.sum("dup_extra").alias("dup_extra"),
                   F.count_if(F.col("dup_extra") > 0).alias("dup_keys"),
                   F.sum("source_dup_extra").alias("source_dup_extra"))
              .collect())
    duplicated = (F.col("dup_extra") > 0) | (F.col("source_dup_extra") > 0)
    listed = classified.where((F.col("status") != "ok") | duplicated)
    kind = F.when(F.col("status") != "ok", F.col("status")).otherwise(F.lit("duplicate"))
    listed.withColumn("kind", kind).write.mode("overwrite").partitionBy("kind").parquet(f"{out}/lists")
    classified.unpersist()
    totals: dict[str, int] = {"dup_extra": 0, "dup_keys": 0, "source_dup_extra": 0}
    for r in counts:
        totals[r.status] = totals.get(r.status, 0) + r.n
        for name in ("dup_extra", "dup_keys", "source_dup_extra"):
            totals[name] += r[name]
    return {"totals": totals, "entities": len({r.entity for r in counts})}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--primary", required=True)
    p.add_argument("--secondary", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--from", dest="start", required=True, type=datetime.fromisoformat)
    p.add_argument("--to", dest="end", required=True, type=datetime.fromisoformat)
    p.add_argument("--grace-s", type=float, default=300)
    p.add_argument("--skew-s", type=float, default=5)
    p.add_argument("--lookahead-s", type=float, default=1800)
    p.add_argument("--driver-memory", default="4g")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    args = p.parse_args(argv)
    spark = session(args.driver_memory, args.conf)
    try:
        start = time.perf_counter()
        answer = reconcile(spark, args.primary, args.secondary, args.out, args.start, args.end,
                           timedelta(seconds=args.grace_s), timedelta(seconds=args.skew_s),
                           timedelta(seconds=args.lookahead_s))
        answer["job_s"] = time.perf_counter() - start
    finally:
        spark.stop()
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
