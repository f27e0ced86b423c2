"""Per message key and comparison, a status: one UNION ALL + one GROUP BY (one shuffle), then classification.

A comparison is "the messages of some expected groups must each reach one target once". The mode decides
which records are expected and which are target copies:

* replica: the source tag's records are expected; every other tag is a target.
* mirror: each region's originals (no `repl-*` stamp) are expected in every other region.
* exactly-once: the originals (or `sent` records) of all tags are expected once in the `processed` records
  of all tags, whichever region processed them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_reconcile.config import Settings, to_micros

PROCESSED = "processed"
EXPECTED = "expected"
STATUSES = ("ok", "late", "pending", "missing", "expired", "orphan")
_US_PER_S = 1_000_000


@dataclass(frozen=True)
class Comparison:
    target: str
    sources: tuple[str, ...]


@dataclass(frozen=True)
class Roles:
    """For every record: which expected group and which target it feeds (NULL = none)."""

    expected: Column
    target: Column
    arrival: Column
    orphan_capable: Column
    comparisons: tuple[Comparison, ...]


def roles(settings: Settings) -> Roles:
    tags = settings.tags()
    tag, event, is_replica = F.col("tag"), F.col("event"), F.col("is_replica")
    enqueued = event == "enqueued"
    if settings.mode == "replica":
        source = settings.source
        return Roles(
            expected=F.when((tag == source) & (event == settings.expected_event), tag),
            target=F.when((tag != source) & enqueued, tag),
            arrival=F.col("ts"),
            orphan_capable=F.lit(True),
            comparisons=tuple(Comparison(t, (source,)) for t in tags if t != source),
        )
    if settings.mode == "mirror":
        # A region's own originals are copies it holds, but never orphans of the others.
        return Roles(
            expected=F.when(enqueued & ~is_replica, tag),
            target=F.when(enqueued, tag),
            arrival=F.col("ts"),
            orphan_capable=is_replica,
            comparisons=tuple(Comparison(t, tuple(s for s in tags if s != t)) for t in tags),
        )
    originals = (event == "sent") if settings.expected_event == "sent" else (enqueued & ~is_replica)
    return Roles(
        expected=F.when(originals, F.lit(EXPECTED)),
        target=F.when(event == PROCESSED, F.lit(PROCESSED)),
        arrival=F.coalesce(F.col("observed"), F.col("ts")),
        orphan_capable=F.lit(True),
        comparisons=(Comparison(PROCESSED, (EXPECTED,)),),
    )


def key_columns(settings: Settings) -> list[str]:
    keys = ["entity", "message_id"]
    return [*keys, "partition_key"] if settings.use_partition_key else keys


# (output name, aggregate, input column) per side; each aggregate only sees its own group's records.
_SOURCE_AGGS = (("p_ts", F.min, "ts"), ("p_seq", F.min, "seq"), ("p_ttl", F.min, "ttl"))
_TARGET_AGGS = (("s_first", F.min, "_arrival"), ("s_last", F.max, "_arrival"), ("s_stamp", F.min, "stamp_ts"),
                ("s_src_seq", F.min, "stamp_seq"), ("s_seq", F.min, "seq"))


def _side(mine: Column, group_name: str, count_name: str, specs: tuple) -> list[Column]:
    return [F.count_if(mine).alias(f"{count_name}__{group_name}"),
            *[agg(F.when(mine, F.col(column))).alias(f"{name}__{group_name}") for name, agg, column in specs]]


def with_roles(logs: DataFrame, settings: Settings) -> DataFrame:
    """The records with the expected group (`_exp`), target (`_tgt`) and arrival time each one feeds."""
    r = roles(settings)
    return logs.select("*", r.expected.alias("_exp"), r.target.alias("_tgt"), r.arrival.alias("_arrival"),
                       r.orphan_capable.alias("_orphan_capable"))


def group(rows: DataFrame, settings: Settings) -> DataFrame:
    """One row per message key with per-group aggregates and records per log (the single shuffle of the job).

    Malformed records group under a NULL entity: they are only counted (metrics.inventory), never matched."""
    r = roles(settings)
    if not settings.use_partition_key:
        rows = rows.drop("partition_key")
    aggs = [F.count_if(F.col("tag") == tag).alias(f"n__{tag}") for tag in settings.tags()]
    for g in sorted({s for c in r.comparisons for s in c.sources}):
        aggs += _side(F.col("_exp") == g, g, "p_cnt", _SOURCE_AGGS)
    for c in r.comparisons:
        t = c.target
        mine = F.col("_tgt") == t
        aggs += _side(mine, t, "s_cnt", _TARGET_AGGS)
        if settings.mode == "mirror":
            aggs.append(F.count_if(mine & F.col("_orphan_capable")).alias(f"s_rel__{t}"))
        if settings.mode == "exactly-once":
            aggs.append(F.collect_set(F.when(mine, F.coalesce(F.col("processor"), F.col("tag"))))
                        .alias(f"s_proc__{t}"))
    return rows.groupBy(*key_columns(settings)).agg(*aggs)


def per_comparison(grouped: DataFrame, settings: Settings) -> DataFrame:
    """Explode the grouped keys into one row per (comparison, key) that concerns the comparison."""
    r = roles(settings)
    structs = []
    for c in r.comparisons:
        t = c.target
        s_cnt = F.col(f"s_cnt__{t}")
        fields = [
            F.lit(t).alias("target"),
            _sum([F.col(f"p_cnt__{g}") for g in c.sources]).alias("p_copies"),
            _least([F.col(f"p_ts__{g}") for g in c.sources]).alias("p_time"),
            _least([F.col(f"p_seq__{g}") for g in c.sources]).alias("p_seq"),
            _least([F.col(f"p_ttl__{g}") for g in c.sources] + _configured_ttl(settings, t)).alias("ttl_s"),
            s_cnt.alias("s_copies"),
            (F.col(f"s_rel__{t}") if settings.mode == "mirror" else s_cnt).alias("s_relevant"),
            F.col(f"s_first__{t}").alias("s_first"),
            F.col(f"s_last__{t}").alias("s_last"),
            F.col(f"s_stamp__{t}").alias("s_stamp"),
            F.col(f"s_src_seq__{t}").alias("s_src_seq"),
            F.col(f"s_seq__{t}").alias("s_seq"),
        ]
        if settings.mode == "exactly-once":
            fields.append(F.array_sort(F.col(f"s_proc__{t}")).alias("processors"))
        structs.append(F.struct(*fields))
    keys = key_columns(settings)
    exploded = grouped.where(F.col("entity").isNotNull()).select(*keys, F.inline(F.array(*structs)))
    return exploded.where((F.col("p_copies") > 0) | (F.col("s_relevant") > 0)).drop("s_relevant")


def classify(rows: DataFrame, watermarks: DataFrame, settings: Settings) -> DataFrame:
    """Add status, lag and duplicate counts; `watermarks` holds (target, entity, wm_us), broadcast."""
    grace_us = int(settings.grace.total_seconds() * _US_PER_S)
    skew_us = int(settings.skew.total_seconds() * _US_PER_S)
    w = rows.join(F.broadcast(watermarks), ["target", "entity"], "left")
    p_us = F.unix_micros(F.col("p_time"))
    origin_us = F.unix_micros(F.coalesce(F.col("s_stamp"), F.col("p_time")))
    first_us = F.unix_micros(F.col("s_first"))
    lag_us = first_us - origin_us
    wm = F.col("wm_us")
    expires_us = p_us + (F.col("ttl_s") * _US_PER_S).cast("long")
    status = (F.when(F.col("p_copies") == 0, "orphan")
              .when((F.col("s_copies") == 0) & (expires_us <= wm - skew_us), "expired")
              .when((F.col("s_copies") == 0) & (wm.isNull() | (p_us > wm - grace_us - skew_us)), "pending")
              .when(F.col("s_copies") == 0, "missing")
              .when(lag_us > grace_us, "late")
              .otherwise("ok"))
    anchor_us = F.coalesce(p_us, F.unix_micros(F.col("s_stamp")), first_us)
    hour_us = F.floor(anchor_us / 3_600_000_000).cast("long") * 3_600_000_000
    out = w.select(
        "*",
        status.alias("status"),
        (lag_us / 1000.0).alias("lag_ms"),
        F.greatest(F.col("s_copies") - 1, F.lit(0)).alias("dup_extra"),
        F.greatest(F.col("p_copies") - 1, F.lit(0)).alias("source_dup_extra"),
        ((F.unix_micros(F.col("s_last")) - first_us) / 1000.0).alias("spread_ms"),
        F.coalesce(F.col("s_src_seq"), F.col("p_seq")).alias("src_seq"),
        anchor_us.alias("anchor_us"),
        hour_us.alias("hour_us"),
    )
    start, end = settings.window.start, settings.window.end
    if start is not None:
        out = out.where(F.col("anchor_us") >= to_micros(start))
    if end is not None:
        out = out.where(F.col("anchor_us") < to_micros(end))
    return out.drop("wm_us", "anchor_us")


def _configured_ttl(settings: Settings, target: str) -> list[Column]:
    ttl = settings.replica_ttl.get(target)
    return [] if ttl is None else [F.lit(ttl.total_seconds())]


def _sum(cols: list[Column]) -> Column:
    return reduce(lambda a, b: a + b, cols)


def _least(cols: list[Column]) -> Column:
    return cols[0] if len(cols) == 1 else F.least(*cols)
