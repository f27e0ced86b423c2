"""The SparkSession: UTC everywhere, small-machine defaults locally, the cluster's under spark-submit."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from pyspark import StorageLevel
from pyspark.sql import SparkSession

# SQL settings every run needs, local or cluster (all of them can be set on a running session).
SQL_SETTINGS = {
    # Hour/date buckets, offset-less literals and CAST(ts AS STRING) all follow the session zone.
    "spark.sql.session.timeZone": "UTC",
    # Naive Parquet timestamps must not become TIMESTAMP_NTZ (they are UTC instants in this contract).
    "spark.sql.parquet.inferTimestampNTZ.enabled": "false",
    # UTC-adjusted Parquet timestamps in the detail tables (INT96 is legacy and zone-ambiguous).
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    # date=/hour= directory values stay strings, so pruning compares exactly what the writer wrote.
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    # The classified messages are cached once and scanned a few times: compressing the cache cost more
    # (measured: +70 % on the classification stage) than it saved.
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.enabled": "true",
}


# For the grouping only (near-unique message keys, already shuffled by key): one aggregation instead of a
# partial and a final one over the same rows in one stage (Spark 4.1+; older versions ignore the setting).
GROUPING_SETTINGS = {"spark.sql.execution.bypassPartialAggregation": "true"}


# For the passes over the two caches (job.run): without adaptive execution a cache is built inside the tasks
# of the first query that scans it, and a query's stages run as one Spark job; adaptive execution makes the
# cache and every shuffle a query stage of its own, each a job (planned and scheduled on its own).
# Only for a job in one local JVM: on a cluster, adaptive execution's partition coalescing and skew handling
# in the walk's shuffle are worth the extra jobs, and the user's own settings decide.
PASS_SETTINGS = {"spark.sql.adaptive.enabled": "false"}


def pass_settings(spark: SparkSession) -> dict[str, str]:
    """PASS_SETTINGS for a local master, none on a cluster."""
    return PASS_SETTINGS if spark.sparkContext.master.startswith("local") else {}


@contextlib.contextmanager
def sql_settings(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """SQL settings for the queries run inside the block, the previous values restored after it."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def launched_by_spark() -> bool:
    """True under spark-submit, pyspark shells and notebooks (a JVM gateway or a session already exists)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ or SparkSession.getActiveSession() is not None


def local_settings(master: str, driver_memory: str, shuffle_partitions: int | None) -> dict[str, str]:
    """Settings for a JVM this process starts: few shuffle partitions, no UI, UTC JVM, loopback if local."""
    cores = os.cpu_count() or 2
    # The parallel collector: a batch job wants throughput, not G1's short pauses (measured: the grouping
    # stage 42 s -> 34 s at 5M messages on 2 cores).
    jvm = "-Duser.timezone=UTC -XX:+UseParallelGC"
    settings = {
        "spark.master": master,
        "spark.app.name": "sbfed-reconcile",
        "spark.driver.memory": driver_memory,
        "spark.driver.extraJavaOptions": jvm,
        "spark.executor.extraJavaOptions": jvm,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # Enough partitions that one key group's hash map stays small at 10M messages; AQE coalesces the
        # small ones (measured 16 vs 4 on 2 cores at 5M: the grouping stage 46 s -> 42 s).
        "spark.sql.shuffle.partitions": str(shuffle_partitions or 8 * cores),
        # List date=/hour= directories on the driver: a listing job per directory level costs more here.
        "spark.sql.sources.parallelPartitionDiscovery.threshold": "100000",
        # The job's two caches live outside the collected heap (cache_level): held on the heap, hundreds of
        # MB of cached batches were promoted and copied by every full collection.
        "spark.memory.offHeap.enabled": "true",
        "spark.memory.offHeap.size": driver_memory,
    }
    if master.startswith("local"):
        settings["spark.driver.host"] = settings["spark.driver.bindAddress"] = "127.0.0.1"
    return settings


def cache_level(spark: SparkSession) -> StorageLevel:
    """Off the heap where the session has off-heap memory (a JVM started here), else memory then disk."""
    offheap = spark.sparkContext.getConf().get("spark.memory.offHeap.enabled", "false") == "true"
    return StorageLevel.OFF_HEAP if offheap else StorageLevel.MEMORY_AND_DISK


def start(master: str | None, driver_memory: str, shuffle_partitions: int | None,
          extra: dict[str, str]) -> tuple[SparkSession, bool]:
    """The session to run on: the existing one under spark-submit (False: not ours to stop), else a JVM
    started here (True)."""
    builder = SparkSession.builder
    owned = master is not None or not launched_by_spark()
    if owned:
        # Driver memory and JVM options only apply before the JVM starts, i.e. here.
        if (master or "local").startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        for key, value in local_settings(master or "local[*]", driver_memory, shuffle_partitions).items():
            builder = builder.config(key, value)
    for key, value in extra.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    for key, value in SQL_SETTINGS.items():
        spark.conf.set(key, value)
    if shuffle_partitions is not None:
        spark.conf.set("spark.sql.shuffle.partitions", str(shuffle_partitions))
    for key, value in extra.items():
        if key.startswith("spark.sql."):
            spark.conf.set(key, value)
    return spark, owned
