"""Where results go: Parquet detail tables and text files (summary, HTML) under one output path."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

DETAIL_COLUMNS = ["target", "entity", "message_id", "partition_key", "status", "p_time", "p_seq", "origin",
                  "partition", "ttl_s", "s_first", "s_last", "lag_ms", "spread_ms", "p_copies", "s_copies",
                  "dup_extra", "source_dup_extra", "unsent"]
KINDS = ("missing", "late", "pending", "expired", "orphan", "original", "duplicate")
# What only the detail tables read (the count/lag cube and the out-of-order walk read none of these; the
# walk reads its own code, metrics.walk, not the origin).
LISTED_ONLY = ("message_id", "partition_key", "origin", "p_time", "p_seq", "ttl_s", "s_last", "spread_ms",
               "processors")


@dataclass(frozen=True)
class Details:
    """Where the detail tables are and the schema they were written with: a run where every message is ok
    writes no Parquet file to read a schema back from."""

    path: str
    schema: T.StructType


def _duplicated() -> Column:
    return (F.col("dup_extra") > 0) | (F.col("source_dup_extra") > 0)


def _listed() -> Column:
    """A classified row some detail table holds: not plainly ok."""
    return (F.col("status") != "ok") | _duplicated()


def unlisted_blank(classified: DataFrame) -> DataFrame:
    """LISTED_ONLY columns NULL on rows no detail table holds (~99 % of them): the cached classification then
    neither builds nor decodes a MessageId and the other detail-only fields of every plainly ok message."""
    listed = _listed()
    return classified.select(*[F.when(listed, F.col(c)).alias(c) if c in LISTED_ONLY else c
                               for c in classified.columns])


def write_details(classified: DataFrame, path: str, with_processors: bool,
                  extra: tuple[Column, ...] = ()) -> Details:
    """`<path>/kind=<status|duplicate>/`: every message that is not plainly ok, in one write (a duplicated
    message that is also late is listed under both); `extra` columns follow the detail columns."""
    kinds = F.array_compact(F.array(F.when(F.col("status") != "ok", F.col("status")),
                                    F.when(_duplicated(), F.lit("duplicate"))))
    columns = DETAIL_COLUMNS + (["processors"] if with_processors else [])
    if "partition_key" not in classified.columns:  # --ignore-partition-key: not part of the identity
        classified = classified.withColumn("partition_key", F.lit(None).cast("string"))
    rows = (classified.where(_listed())
            .withColumn("partition", F.shiftright(F.col("p_seq"), 48))
            .select(F.explode(kinds).alias("kind"), *columns, *extra))
    rows.write.mode("overwrite").partitionBy("kind").parquet(path)
    return Details(path, rows.schema)


def samples(spark: SparkSession, details: Details, limit: int,
            with_processors: bool) -> dict[str, list[dict]]:
    """The first rows of each list for the report, read back from the (small) detail tables; times as
    epoch micros, never naive datetimes."""
    rows = spark.read.schema(details.schema).parquet(details.path)

    def micros(name: str) -> F.Column:
        return F.unix_micros(F.col(name)).alias(name)

    base = ["target", "entity", "message_id", micros("p_time"), "p_seq", micros("s_first"), "lag_ms"]
    dups = [*base, "s_copies", "p_copies", "dup_extra", "source_dup_extra", "spread_ms"]
    if with_processors:
        dups.append("processors")

    def kind(name: str) -> DataFrame:
        return rows.where(F.col("kind") == name)

    lists = {
        "missing": kind("missing").orderBy("p_time").select(*base),
        "late": kind("late").orderBy(F.col("lag_ms").desc()).select(*base),
        "orphan": kind("orphan").orderBy("s_first").select(*base),
        "original": kind("original").orderBy("s_first").select(*base),
        "duplicates": kind("duplicate").orderBy(F.col("dup_extra").desc(), "p_time").select(*dups),
    }
    # One job for all lists; each keeps its own order (rank within the list).
    as_json = F.to_json(F.struct("*"), {"ignoreNullFields": "false"}).alias("row")
    rank = F.monotonically_increasing_id().alias("rank")
    parts = [q.limit(limit).select(F.lit(name).alias("list"), as_json, rank) for name, q in lists.items()]
    found: dict[str, list[dict]] = {name: [] for name in lists}
    for r in sorted(reduce(DataFrame.unionByName, parts).collect(), key=lambda r: r.rank):
        found[r.list].append(json.loads(r.row))
    return found


def _file_system(spark: SparkSession, path: str):
    """Hadoop's FileSystem and Path for `path`, so `abfss://`, `s3a://` and local paths all work."""
    target = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(path)
    return target.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), target


def write_text(spark: SparkSession, path: str, text: str) -> None:
    """Write a small file (replacing it) through Hadoop's FileSystem."""
    fs, target = _file_system(spark, path)
    stream = fs.create(target, True)
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()


def read_text(spark: SparkSession, path: str) -> str | None:
    """A small file's text, None when it does not exist."""
    fs, target = _file_system(spark, path)
    if not fs.exists(target):
        return None
    jvm = spark.sparkContext._jvm
    stream = fs.open(target)
    try:
        return jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
    finally:
        stream.close()


def list_names(spark: SparkSession, folder: str) -> list[str]:
    """The names in a folder (none when it does not exist)."""
    fs, target = _file_system(spark, folder)
    if not fs.exists(target):
        return []
    return sorted(s.getPath().getName() for s in fs.listStatus(target))


def delete(spark: SparkSession, path: str) -> None:
    """Remove a file or a folder with everything in it."""
    fs, target = _file_system(spark, path)
    fs.delete(target, True)
