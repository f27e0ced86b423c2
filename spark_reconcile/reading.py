"""Reading audit logs (docs/audit-log.md) from any path Spark reads, pruned to the UTC date/hour needed.

The files are listed (listing.py) with os.scandir or through Hadoop's FileSystem (any scheme), skipping
`date=`/`hour=` directories outside the range, and handed to Spark by name: Spark then infers no partition
columns, so every field, `entity` above all, comes from the record itself. The directories are only a
pruning hint.
"""

from __future__ import annotations

import json
from datetime import datetime

from py4j.protocol import Py4JError
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_reconcile.config import LogInput
from spark_reconcile.listing import (
    DATA_SUFFIXES,
    InputError,
    Listing,
    files_under,
    local_listing,
    no_files_yet,
)

EVENTS = ("enqueued", "sent", "processed")
REQUIRED = ("event", "entity", "message_id", "enqueued_time_utc")
# The contract's fields, all read as JSON text: a field of an unexpected JSON type then becomes NULL on its
# own (try_cast below) instead of nulling the whole record, and times stay strings until parsed here.
FIELDS = ("event", "entity", "message_id", "enqueued_time_utc", "observed_time_utc", "sequence_number",
          "partition_key", "ttl_seconds", "repl_enqueued_time", "repl_sequence", "repl_source", "processor")
JSON_SCHEMA = T.StructType([T.StructField(name, T.StringType()) for name in FIELDS])
# The types a Parquet writer gives these fields, for a column the first file lacks (all null there).
_PARQUET_KINDS = {"sequence_number": T.LongType(), "ttl_seconds": T.DoubleType(),
                  "enqueued_time_utc": T.TimestampType(), "observed_time_utc": T.TimestampType()}
_SHORTEST_TIME = len("2026-11-22T12:00")  # a date alone is not a time


def list_files(spark: SparkSession, log: LogInput, start: datetime | None,
               end: datetime | None) -> tuple[str, list[str]]:
    """The format and the data files of a log in [start, end] (listing.files_under), listed with os.scandir
    where the path is local and through Hadoop's FileSystem otherwise."""
    listing = local_listing if is_local(spark, log.path) else _hadoop_listing(spark)
    return files_under(log, listing, start, end)


def is_local(spark: SparkSession, path: str) -> bool:
    """A path without a scheme when the default file system is the local disk (listed with os.scandir, much
    faster than through py4j); on a YARN or HDFS cluster such a path is on HDFS, and any path with a scheme
    (`file:` included) is listed through Hadoop."""
    if ":" in path.split("/", 1)[0]:
        return False
    default = spark.sparkContext._jsc.hadoopConfiguration().get("fs.defaultFS") or "file:///"
    return default.startswith("file:")


def _hadoop_listing(spark: SparkSession) -> Listing:
    """The same through Hadoop's FileSystem, for `abfss://`, `s3a://`, `hdfs://`, `dbfs:/` and the like."""
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()

    def listing(folder: str) -> list[tuple[str, bool, str]] | None:
        path = jvm.org.apache.hadoop.fs.Path(folder)
        fs = path.getFileSystem(conf)
        if not fs.exists(path):
            return None
        return [(s.getPath().getName(), s.isDirectory(), s.getPath().toString()) for s in fs.listStatus(path)]

    return listing


def read_log(spark: SparkSession, log: LogInput, start: datetime | None, end: datetime | None) -> DataFrame:
    """One log as normalized rows, tagged, limited to EnqueuedTimeUtc in [start, end) plus malformed rows."""
    fmt, files = list_files(spark, log, start, end)
    if not files:
        raw = spark.createDataFrame([], JSON_SCHEMA)
    elif fmt == "json":
        raw = _json_records(spark.read.text(files))
    else:
        found = footer_schema(spark, files[0])
        lacking = [name for name in REQUIRED if name not in found.fieldNames()]
        if lacking:
            raise InputError(f"log {log.tag!r}: Parquet file {files[0]} lacks the required columns {lacking} "
                             "(see docs/audit-log.md: the record's own fields, not the directories)")
        raw = spark.read.schema(_parquet_schema(found)).parquet(*files)
    return _normalize(raw, log.tag, start, end)


def footer_schema(spark: SparkSession, path: str) -> T.StructType:
    """A Parquet file's schema as Spark infers it (the Spark schema a Spark writer stored, else the Parquet
    types converted under the session's settings), read from the footer on the driver: Spark's own inference
    runs a job per log. Where Spark's internals differ (another version), that job after all."""
    jvm = spark.sparkContext._jvm
    parquet = jvm.org.apache.spark.sql.execution.datasources.parquet
    try:
        conf = spark._jsparkSession.sessionState().newHadoopConf()
        where = jvm.org.apache.hadoop.fs.Path(path)
        reader = jvm.org.apache.parquet.hadoop.ParquetFileReader.open(
            jvm.org.apache.parquet.hadoop.util.HadoopInputFile.fromPath(where, conf))
        try:
            footer = jvm.org.apache.parquet.hadoop.Footer(where, reader.getFooter())
        finally:
            reader.close()
        converter = parquet.ParquetToSparkSchemaConverter(spark._jsparkSession.sessionState().conf())
        found = T.StructType.fromJson(json.loads(parquet.ParquetFileFormat.readSchemaFromFooter(footer,
                                                                                                converter).json()))
    except Py4JError:
        return spark.read.parquet(path).schema
    return T.StructType([T.StructField(f.name, f.dataType, True, f.metadata) for f in found.fields])


def stream_log(spark: SparkSession, log: LogInput, start: datetime | None, end: datetime | None,
               max_files: int | None = None) -> DataFrame:
    """One log as a stream of normalized rows: the files writers add under the path, each read once (Spark's
    file source remembers them in its checkpoint). A stream cannot look at its files first, so the schema is
    the contract's: JSON lines as text, Parquet with the contract's column types."""
    fmt = log.format
    if fmt == "auto":
        fmt, files = list_files(spark, log, None, None)
        if not files:
            raise InputError(no_files_yet(log))
    reader = spark.readStream.option("recursiveFileLookup", "true")
    if log.format == "auto":
        names = [suffix[1:] for suffix, f in DATA_SUFFIXES.items() if f == fmt]
        reader = reader.option("pathGlobFilter", f"*.{{{','.join(names)}}}")
    if max_files:
        reader = reader.option("maxFilesPerTrigger", max_files)
    if fmt == "json":
        raw = _json_records(reader.text(log.path))
    else:
        raw = reader.schema(_parquet_schema(T.StructType([]))).parquet(log.path)
    return _normalize(raw, log.tag, start, end)


def _json_records(lines: DataFrame) -> DataFrame:
    """One record per non-blank line. A line that is not one JSON object (broken JSON, `[]`, `"x"`, `3`,
    trailing text) keeps NULL required fields, so it is counted as malformed."""
    text = F.trim(lines["value"])
    parsed = F.from_json(text, JSON_SCHEMA, {"mode": "PERMISSIVE", "allowSingleQuotes": "false"})
    # from_json reads the first value and ignores what follows; as the one element of an array the whole
    # line must be valid JSON.
    one_object = text.startswith("{") & (F.json_array_length(F.concat(F.lit("["), text, F.lit("]"))) == 1)
    return (lines.where(F.length(text) > 0)
            .select(F.when(one_object, parsed).alias("r"))
            .select(*[F.col("r")[name].alias(name) for name in FIELDS]))


def _parquet_schema(found: T.StructType) -> T.StructType:
    """The schema of one file plus every contract field it lacks: writers may leave out optional columns that
    are all null in a file, and merging every file's footer (mergeSchema) costs a job."""
    names = set(found.fieldNames())
    return T.StructType(list(found.fields) + [T.StructField(name, _PARQUET_KINDS.get(name, T.StringType()))
                                              for name in FIELDS if name not in names])


def _normalize(raw: DataFrame, tag: str, start: datetime | None, end: datetime | None) -> DataFrame:
    def col(name: str, kind: T.DataType = T.StringType()) -> Column:
        value = raw[name]
        if isinstance(kind, T.StringType):
            return value.cast(kind)
        textual = isinstance(raw.schema[name].dataType, T.StringType)
        return _try_cast(value, kind) if textual else value.cast(kind)

    def text(name: str) -> Column:
        return F.nullif(col(name), F.lit(""))

    ts = _as_timestamp(raw, "enqueued_time_utc")
    event = F.lower(F.trim(col("event")))
    entity, message_id = text("entity"), text("message_id")
    valid = entity.isNotNull() & message_id.isNotNull() & ts.isNotNull() & event.isin(*EVENTS)
    repl_time, repl_source = text("repl_enqueued_time"), text("repl_source")
    rows = raw.select(
        F.lit(tag).alias("tag"),
        event.alias("event"),
        F.when(valid, entity).alias("entity"),
        # Malformed records group under (NULL entity, tag) so they are counted per log, never matched.
        F.when(valid, message_id).otherwise(F.lit(tag)).alias("message_id"),
        F.coalesce(col("partition_key"), F.lit("")).alias("partition_key"),
        ts.alias("ts"),
        _as_timestamp(raw, "observed_time_utc").alias("observed"),
        col("sequence_number", T.LongType()).alias("seq"),
        col("ttl_seconds", T.DoubleType()).alias("ttl"),
        _parse_time(_first_hop(repl_time)).alias("stamp_ts"),
        _try_cast(_first_hop(col("repl_sequence")), T.LongType()).alias("stamp_seq"),
        (repl_time.isNotNull() | repl_source.isNotNull()).alias("is_replica"),
        col("processor").alias("processor"),
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
        return _parse_time(raw[name])
    if isinstance(kind, T.TimestampNTZType):
        # The wall time is UTC by contract; unix_micros of NTZ does not depend on any zone.
        return F.timestamp_micros(F.unix_micros(raw[name]))
    return raw[name].cast(T.TimestampType())


def _parse_time(value: Column) -> Column:
    """ISO 8601 text as an instant: an offset is honoured, none means UTC (the session zone), `z` is `Z`,
    digits beyond microseconds are cut; a date without a time of day is not a time (NULL)."""
    text = F.upper(F.trim(value))
    return F.when(F.length(text) >= _SHORTEST_TIME, _try_cast(text, T.TimestampType()))


def _try_cast(value: Column, kind: T.DataType) -> Column:
    """NULL for an unparsable value. Spark 4 has Column.try_cast (ANSI casts raise); 3.5's casts give NULL."""
    return value.try_cast(kind) if hasattr(Column, "try_cast") else value.cast(kind)


def _first_hop(stamp: Column) -> Column:
    """`repl-*` stamps are `;`-joined per hop; the first value is the origin's (the text before the first `;`,
    without splitting the stamp into an array of every hop)."""
    return F.nullif(F.trim(F.substring_index(stamp, ";", 1)), F.lit(""))
