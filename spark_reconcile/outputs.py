"""Where results go: Parquet detail tables and text files (summary, HTML) under one output path."""

from __future__ import annotations

import json
from functools import reduce

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

DETAIL_COLUMNS = ["target", "entity", "message_id", "partition_key", "p_time", "p_seq", "partition", "ttl_s",
                  "s_first", "lag_ms", "p_copies", "s_copies", "status"]
DUPLICATE_COLUMNS = ["target", "entity", "message_id", "partition_key", "status", "p_copies", "s_copies",
                     "dup_extra", "source_dup_extra", "p_time", "s_first", "s_last", "spread_ms"]


def write_details(classified: DataFrame, out: str, with_processors: bool) -> dict[str, str]:
    """`details/status=<status>` for every message that is not plainly ok, and `duplicates/`."""
    paths = {"details": f"{out}/details", "duplicates": f"{out}/duplicates"}
    partition = F.shiftright(F.col("p_seq"), 48).alias("partition")
    (classified.where(F.col("status") != "ok").withColumn("partition", partition).select(*DETAIL_COLUMNS)
     .write.mode("overwrite").partitionBy("status").parquet(paths["details"]))
    dup_columns = DUPLICATE_COLUMNS + (["processors"] if with_processors else [])
    (classified.where((F.col("dup_extra") > 0) | (F.col("source_dup_extra") > 0)).select(*dup_columns)
     .write.mode("overwrite").parquet(paths["duplicates"]))
    return paths


def samples(classified: DataFrame, limit: int, with_processors: bool) -> dict[str, list[dict]]:
    """The first rows of each list for the HTML report; times as epoch micros (never naive datetimes)."""
    def micros(name: str) -> F.Column:
        return F.unix_micros(F.col(name)).alias(name)

    base = ["target", "entity", "message_id", micros("p_time"), "p_seq", micros("s_first"), "lag_ms"]
    dups = [*base, "s_copies", "p_copies", "dup_extra", "source_dup_extra", "spread_ms"]
    if with_processors:
        dups.append("processors")
    lists = {
        "missing": classified.where(F.col("status") == "missing").orderBy("p_time").select(*base),
        "late": classified.where(F.col("status") == "late").orderBy(F.col("lag_ms").desc()).select(*base),
        "orphan": classified.where(F.col("status") == "orphan").orderBy("s_first").select(*base),
        "duplicates": classified.where((F.col("dup_extra") > 0) | (F.col("source_dup_extra") > 0))
        .orderBy(F.col("dup_extra").desc(), "p_time").select(*dups),
    }
    # One job for all lists; each keeps its own order (rank within the list).
    as_json = F.to_json(F.struct("*"), {"ignoreNullFields": "false"}).alias("row")
    rank = F.monotonically_increasing_id().alias("rank")
    parts = [q.limit(limit).select(F.lit(name).alias("list"), as_json, rank) for name, q in lists.items()]
    found: dict[str, list[dict]] = {name: [] for name in lists}
    for r in sorted(reduce(DataFrame.unionByName, parts).collect(), key=lambda r: r.rank):
        found[r.list].append(json.loads(r.row))
    return found


def write_text(spark: SparkSession, path: str, text: str) -> None:
    """Write a small file through Hadoop's FileSystem, so `abfss://`, `s3a://` and local paths all work."""
    jvm = spark.sparkContext._jvm
    target = jvm.org.apache.hadoop.fs.Path(path)
    fs = target.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    stream = fs.create(target, True)
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()
