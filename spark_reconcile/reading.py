"""Reading audit logs (docs/audit-log.md) from any path Spark reads, pruned to the UTC date/hour needed."""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_reconcile.config import LogInput

# The contract's fields as JSON carries them: times stay strings here and are parsed below, so an
# unparsable time becomes a counted malformed record instead of a failed job.
JSON_SCHEMA = T.StructType([
    T.StructField("event", T.StringType()),
    T.StructField("entity", T.StringType()),
    T.StructField("message_id", T.StringType()),
    T.StructField("enqueued_time_utc", T.StringType()),
    T.StructField("observed_time_utc", T.StringType()),
    T.StructField("sequence_number", T.LongType()),
    T.StructField("partition_key", T.StringType()),
    T.StructField("ttl_seconds", T.DoubleType()),
    T.StructField("repl_enqueued_time", T.StringType()),
    T.StructField("repl_sequence", T.StringType()),
    T.StructField("repl_source", T.StringType()),
    T.StructField("processor", T.StringType()),
])
_TIME_FIELDS = ("enqueued_time_utc", "observed_time_utc")
_DATA_SUFFIXES = {".parquet": "parquet", ".jsonl": "json", ".json": "json", ".ndjson": "json"}


class InputError(ValueError):
    """A log cannot be read as the audit log contract describes."""


def sample_file(spark: SparkSession, log: LogInput) -> tuple[str, str]:
    """The format and the first data file under the path (listed through Hadoop's FileSystem: any scheme)."""
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(log.path)
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if not fs.exists(path):
        raise InputError(f"log {log.tag!r}: path {log.path} does not exist")
    files = fs.listFiles(path, True)
    while files.hasNext():
        found = files.next().getPath()
        name = found.getName()
        if name.startswith(("_", ".")):
            continue
        fmt = log.format if log.format != "auto" else next(
            (f for suffix, f in _DATA_SUFFIXES.items() if name.endswith(suffix)), None)
        if fmt is not None:
            return fmt, found.toString()
    raise InputError(f"log {log.tag!r}: no .jsonl/.json/.parquet files under {log.path}; "
                     "pass --format json|parquet if the files have other names")


def read_log(spark: SparkSession, log: LogInput, start: datetime | None, end: datetime | None) -> DataFrame:
    """One log as normalized rows, tagged, limited to EnqueuedTimeUtc in [start, end) plus malformed rows."""
    fmt, sample = sample_file(spark, log)
    reader = spark.read.option("mode", "PERMISSIVE")
    if fmt == "json":
        raw = reader.schema(JSON_SCHEMA).json(log.path)
    else:
        raw = reader.schema(_parquet_schema(spark.read.parquet(sample).schema)).parquet(log.path)
    raw = _prune_partitions(raw, start, end)
    return _normalize(raw, log.tag, start, end)


def _parquet_schema(found: T.StructType) -> T.StructType:
    """The schema of one file plus every contract field it lacks: writers may leave out optional columns that
    are all null in a file, and merging every file's footer (mergeSchema) costs a job."""
    names = set(found.fieldNames())
    return T.StructType(list(found.fields) + [f for f in JSON_SCHEMA.fields if f.name not in names])


def _prune_partitions(raw: DataFrame, start: datetime | None, end: datetime | None) -> DataFrame:
    """Filter on the date=/hour= directory values so Spark lists and reads only the hours in range."""
    if "date" not in raw.columns or (start is None and end is None):
        return raw
    hour_col = F.lpad(raw["hour"], 2, "0") if "hour" in raw.columns else F.lit("00")
    bucket = F.concat(raw["date"], F.lit("T"), hour_col)
    # Hour granularity: the first and last hour partitions are read whole and trimmed by the row filter.
    fmt = "%Y-%m-%dT%H" if "hour" in raw.columns else "%Y-%m-%dT00"
    if start is not None:
        raw = raw.where(bucket >= start.strftime(fmt))
    if end is not None:
        raw = raw.where(bucket <= end.strftime(fmt))
    return raw


def _normalize(raw: DataFrame, tag: str, start: datetime | None, end: datetime | None) -> DataFrame:
    columns = set(raw.columns)
    missing_required = {"event", "entity", "message_id", "enqueued_time_utc"} - columns
    if missing_required:
        raise InputError(f"log {tag!r} lacks the required fields {sorted(missing_required)} "
                         "(see docs/audit-log.md)")

    def col(name: str, kind: T.DataType) -> Column:
        return raw[name].cast(kind) if name in columns else F.lit(None).cast(kind)

    ts = _as_timestamp(raw, "enqueued_time_utc")
    valid = (raw["entity"].isNotNull() & raw["message_id"].isNotNull() & ts.isNotNull()
             & raw["event"].isNotNull())
    rows = raw.select(
        F.lit(tag).alias("tag"),
        F.lower(raw["event"]).alias("event"),
        F.when(valid, raw["entity"]).alias("entity"),
        # Malformed records group under (NULL entity, tag) so they are counted per log, never matched.
        F.when(valid, raw["message_id"]).otherwise(F.lit(tag)).alias("message_id"),
        F.coalesce(col("partition_key", T.StringType()), F.lit("")).alias("partition_key"),
        ts.alias("ts"),
        (_as_timestamp(raw, "observed_time_utc") if "observed_time_utc" in columns
         else F.lit(None).cast(T.TimestampType())).alias("observed"),
        col("sequence_number", T.LongType()).alias("seq"),
        col("ttl_seconds", T.DoubleType()).alias("ttl"),
        _try_cast(_first_hop(col("repl_enqueued_time", T.StringType())), T.TimestampType()).alias("stamp_ts"),
        _try_cast(_first_hop(col("repl_sequence", T.StringType())), T.LongType()).alias("stamp_seq"),
        (col("repl_enqueued_time", T.StringType()).isNotNull()
         | col("repl_source", T.StringType()).isNotNull()).alias("is_replica"),
        col("processor", T.StringType()).alias("processor"),
        valid.alias("valid"),
    )
    in_range = F.lit(True)
    if start is not None:
        in_range = in_range & (rows["ts"] >= F.lit(start))
    if end is not None:
        in_range = in_range & (rows["ts"] < F.lit(end))
    return rows.where(~rows["valid"] | in_range).drop("valid")


def _as_timestamp(raw: DataFrame, name: str) -> Column:
    """A UTC instant whatever the file holds: ISO strings (offset honoured), timestamps, naive NTZ as UTC."""
    kind = raw.schema[name].dataType
    if isinstance(kind, T.StringType):
        return _try_cast(F.trim(raw[name]), T.TimestampType())
    if isinstance(kind, T.TimestampNTZType):
        # The wall time is UTC by contract; unix_micros of NTZ does not depend on any zone.
        return F.timestamp_micros(F.unix_micros(raw[name]))
    return raw[name].cast(T.TimestampType())


def _try_cast(value: Column, kind: T.DataType) -> Column:
    """NULL for an unparsable value. Spark 4 has Column.try_cast (ANSI casts raise); 3.5's casts give NULL."""
    return value.try_cast(kind) if hasattr(Column, "try_cast") else value.cast(kind)


def _first_hop(stamp: Column) -> Column:
    """`repl-*` stamps are `;`-joined per hop; the first value is the origin's."""
    return F.nullif(F.trim(F.split(stamp, ";").getItem(0)), F.lit(""))
