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
STATUSES = ("ok", "late", "pending", "missing", "expired", "orphan", "original")
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
            comparisons=tuple(Comparison(t, (source,)) for t in tags if t != source),
        )
    if settings.mode == "mirror":
        return Roles(
            expected=F.when(enqueued & ~is_replica, tag),
            target=F.when(enqueued, tag),
            arrival=F.col("ts"),
            comparisons=tuple(Comparison(t, tuple(s for s in tags if s != t)) for t in tags),
        )
    originals = (event == "sent") if settings.expected_event == "sent" else (enqueued & ~is_replica)
    return Roles(
        expected=F.when(originals, F.lit(EXPECTED)),
        target=F.when(event == PROCESSED, F.lit(PROCESSED)),
        # The exactly-once clock is the processing time: lag, watermark and out-of-order all use it.
        arrival=F.coalesce(F.col("observed"), F.col("ts")),
        comparisons=(Comparison(PROCESSED, (EXPECTED,)),),
    )


def key_columns(settings: Settings) -> list[str]:
    keys = ["entity", "message_id"]
    return [*keys, "partition_key"] if settings.use_partition_key else keys


def _arrival(settings: Settings) -> str:
    """The column holding a target record's arrival time (its own for exactly-once: the processing time)."""
    return "_arrival" if settings.mode == "exactly-once" else "ts"


@dataclass(frozen=True)
class _Agg:
    """One aggregate over a group's own records (`mine`), and how two partial results of it merge."""

    name: str
    kind: str  # count | min | max | first (the value at the earliest arrival) | set
    column: str = ""

    def over(self, mine: Column, arrival: str) -> Column:
        if self.kind == "count":
            return F.count_if(mine).alias(self.name)
        value = F.when(mine, F.col(self.column))
        if self.kind == "set":
            return F.collect_set(value).alias(self.name)
        if self.kind == "first":
            return F.min_by(value, F.when(mine, F.col(arrival))).alias(self.name)
        return (F.min if self.kind == "min" else F.max)(value).alias(self.name)

    def merged(self, first: str) -> Column:
        c = F.col(self.name)
        if self.kind == "count":
            return F.sum(c).alias(self.name)
        if self.kind == "first":
            return F.min_by(c, F.col(first)).alias(self.name)
        if self.kind == "set":
            return F.array_distinct(F.flatten(F.collect_list(c))).alias(self.name)
        return (F.min if self.kind == "min" else F.max)(c).alias(self.name)


def _codes(settings: Settings) -> tuple[list[str], list[str], list[str]]:
    """Tags, expected groups and targets, in the order their 1-based codes (`_tag`, `_exp`, `_tgt`) use."""
    r = roles(settings)
    groups = sorted({s for c in r.comparisons for s in c.sources})
    return settings.tags(), groups, [c.target for c in r.comparisons]


def _aggregates(settings: Settings) -> tuple[list[tuple[_Agg, Column]], dict[str, str]]:
    """Every aggregate of the grouping with the records it sees, and for `first` aggregates the column holding
    their group's earliest arrival."""
    tags, groups, targets = _codes(settings)
    tag, exp, tgt = F.col("_tag"), F.col("_exp"), F.col("_tgt")
    arrival = _arrival(settings)
    out: list[tuple[_Agg, Column]] = [(_Agg(f"n__{t}", "count"), tag == i) for i, t in enumerate(tags, 1)]
    firsts: dict[str, str] = {}
    for i, g in enumerate(groups, 1):
        mine = exp == i
        out += [(_Agg(f"p_cnt__{g}", "count"), mine), (_Agg(f"p_ts__{g}", "min", "ts"), mine),
                (_Agg(f"p_seq__{g}", "min", "seq"), mine), (_Agg(f"p_ttl__{g}", "min", "ttl"), mine)]
        if settings.mode == "exactly-once":
            out.append((_Agg(f"p_origin__{g}", "min", "_tag"), mine))
    for i, t in enumerate(targets, 1):
        mine = tgt == i
        out += [(_Agg(f"s_cnt__{t}", "count"), mine),
                (_Agg(f"s_rep__{t}", "count"), mine & F.col("is_replica")),
                (_Agg(f"s_first__{t}", "min", arrival), mine),
                (_Agg(f"s_last__{t}", "max", arrival), mine)]
        for name, column in (("s_stamp", "stamp_ts"), ("s_src_seq", "stamp_seq"), ("s_seq", "seq")):
            out.append((_Agg(f"{name}__{t}", "first", column), mine))
            firsts[f"{name}__{t}"] = f"s_first__{t}"
        if settings.mode == "replica":
            out.append((_Agg(f"s_sent__{t}", "count"), (tag == tags.index(t) + 1) & F.col("_sent")))
        if settings.mode == "exactly-once":
            out.append((_Agg(f"s_proc__{t}", "set", "_processor"), mine))
    if settings.follow:
        # Each log's latest record of the key: how far each log has come, and when the key may be forgotten.
        out += [(_Agg(f"seen__{t}", "max", arrival), tag == i) for i, t in enumerate(tags, 1)]
    return out, firsts


def with_roles(logs: DataFrame, settings: Settings) -> DataFrame:
    """The records as the grouping needs them, and nothing more (they are what the one shuffle moves): the
    key, the log (`_tag`), the expected group (`_exp`) and the target (`_tgt`) each feeds as small codes, and
    the fields the aggregates read."""
    r = roles(settings)
    tags, groups, targets = _codes(settings)

    def code(value: Column, names: list[str]) -> Column:
        return F.array_position(F.array(*[F.lit(n) for n in names]), value).cast("int")

    extra = []
    if settings.mode == "replica":
        extra.append((F.col("event") == "sent").alias("_sent"))
    if settings.mode == "exactly-once":
        processor = F.coalesce(F.col("processor"), F.col("tag"))
        extra += [r.arrival.alias("_arrival"), processor.alias("_processor")]
    keys = key_columns(settings)
    return logs.select(*keys, code(F.col("tag"), tags).alias("_tag"), code(r.expected, groups).alias("_exp"),
                       code(r.target, targets).alias("_tgt"), "ts", "seq", "ttl", "stamp_ts", "stamp_seq",
                       "is_replica", *extra)


def group(rows: DataFrame, settings: Settings) -> DataFrame:
    """Records grouped by message key and source SequenceNumber (`gseq`): the single shuffle of the job.

    Rows are shuffled by message key, so `merge` regroups by key without another shuffle. Splitting by the
    SequenceNumber keeps every distinct source SequenceNumber of a re-sent MessageId for the capture-gap check
    (a copy files under its `repl-sequence`, so a key normally stays one row). Malformed records group under a
    NULL entity: they are only counted (metrics.inventory), never matched."""
    keys = key_columns(settings)
    gseq = F.lit(None).cast("long")
    if settings.mode == "replica":
        gseq = F.coalesce(F.when(F.col("_exp").isNotNull(), F.col("seq")),
                          F.when(F.col("_tgt").isNotNull(), F.col("stamp_seq")))
    aggs, _ = _aggregates(settings)
    arrival = _arrival(settings)
    return (rows.repartition(*keys).groupBy(*keys, gseq.alias("gseq"))
            .agg(*[a.over(mine, arrival) for a, mine in aggs]))


def merge(grouped: DataFrame, settings: Settings) -> DataFrame:
    """One row per message key (the grouped rows of a key are in one partition already). Only replica mode
    splits a key by source SequenceNumber; elsewhere `gseq` is NULL and the grouping is one row per key."""
    if settings.mode != "replica":
        return grouped.drop("gseq")
    return combine(grouped.drop("gseq"), settings)


def combine(rows: DataFrame, settings: Settings, *extra: Column) -> DataFrame:
    """Partial aggregates of the same keys (split by SequenceNumber, or from several micro-batches) merged
    into one row per key; `extra` are further aggregates over the same rows."""
    aggs, firsts = _aggregates(settings)
    return rows.groupBy(*key_columns(settings)).agg(*[a.merged(firsts.get(a.name, "")) for a, _ in aggs],
                                                    *extra)


def per_comparison(rows: DataFrame, settings: Settings, keep: tuple[str, ...] = ()) -> DataFrame:
    """Explode the keys into one row per (comparison, key) that concerns the comparison (`keep`: columns of
    the key carried along)."""
    r = roles(settings)
    structs = []
    for c in r.comparisons:
        t = c.target
        s_cnt, s_rep = F.col(f"s_cnt__{t}"), F.col(f"s_rep__{t}")
        p_cnt = _sum([F.col(f"p_cnt__{g}") for g in c.sources])
        # A comparison concerns a key its sources hold, or one the target holds (as an orphan copy, or in
        # replica mode as an original written there); a mirror region's own originals concern only the others.
        relevant = p_cnt > 0
        relevant = relevant | ((s_rep if settings.mode == "mirror" else s_cnt) > 0)
        fields = [
            F.lit(t).alias("target"),
            relevant.alias("relevant"),
            p_cnt.alias("p_copies"),
            _origin(c, settings).alias("origin"),
            _least([F.col(f"p_ts__{g}") for g in c.sources]).alias("p_time"),
            _least([F.col(f"p_seq__{g}") for g in c.sources]).alias("p_seq"),
            _least([F.col(f"p_ttl__{g}") for g in c.sources] + _configured_ttl(settings, t)).alias("ttl_s"),
            s_cnt.alias("s_copies"),
            # Only a replica target holds originals of its own; elsewhere any unexpected record is an orphan.
            (s_rep if settings.mode == "replica" else s_cnt).alias("s_replicas"),
            (F.col(f"s_sent__{t}") if settings.mode == "replica" else F.lit(0)).alias("s_sent"),
            F.col(f"s_first__{t}").alias("s_first"),
            F.col(f"s_last__{t}").alias("s_last"),
            F.col(f"s_stamp__{t}").alias("s_stamp"),
            F.col(f"s_src_seq__{t}").alias("s_src_seq"),
            F.col(f"s_seq__{t}").alias("s_seq"),
        ]
        if settings.mode == "exactly-once":
            fields.append(F.array_sort(F.col(f"s_proc__{t}")).alias("processors"))
        structs.append(fields)
    keys = key_columns(settings)
    known = rows.where(F.col("entity").isNotNull())
    if len(structs) == 1:  # one comparison (replica with one target, exactly-once): nothing to explode
        exploded = known.select(*keys, *keep, *structs[0])
    else:
        exploded = known.select(*keys, *keep, F.inline(F.array(*[F.struct(*f) for f in structs])))
    return exploded.where("relevant").drop("relevant")


def _origin(c: Comparison, settings: Settings) -> Column:
    """The region a message started in: a source partition is (origin region, entity, partition)."""
    if settings.mode == "replica":
        return F.lit(c.sources[0])
    if settings.mode == "mirror":
        return F.coalesce(*[F.when(F.col(f"p_cnt__{g}") > 0, F.lit(g)) for g in c.sources])
    index = F.col(f"p_origin__{c.sources[0]}")  # the original's log, as its `_tag` code
    return F.coalesce(*[F.when(index == i, F.lit(t)) for i, t in enumerate(settings.tags(), 1)])


def classify(rows: DataFrame, watermark: Column, sent_logs: set[str], settings: Settings,
             horizon_us: int | None = None) -> DataFrame:
    """Add status, lag and duplicate counts; `watermark` is a row's wm_us (metrics.watermark_column);
    `sent_logs` are the targets whose logs hold `sent` records (originals there are checked against them).

    With `horizon_us` (the follow mode's lookahead) a key is judged as of the moment its fate became final,
    its anchor time plus the horizon: the watermark is capped there, and `final` says whether `wm_us` has
    reached it, so the verdict does not depend on how far the logs had come when it was given."""
    grace_us = int(settings.grace.total_seconds() * _US_PER_S)
    skew_us = int(settings.skew.total_seconds() * _US_PER_S)
    w = rows.select("target", "entity", *[c for c in rows.columns if c not in ("target", "entity")],
                    watermark.alias("wm_us"))
    p_us = F.unix_micros(F.col("p_time"))
    first_us = F.unix_micros(F.col("s_first"))
    # Lag from the first copy: its own repl-enqueued-time stamp, else the source's enqueue time.
    lag_us = first_us - F.unix_micros(F.coalesce(F.col("s_stamp"), F.col("p_time")))
    anchor_us = F.coalesce(p_us, F.unix_micros(F.col("s_stamp")), first_us)
    wm = F.col("wm_us")
    final = []
    if horizon_us is not None:
        wm = F.least(wm, anchor_us + horizon_us)
        final = [F.coalesce(F.col("wm_us") >= anchor_us + horizon_us, F.lit(False)).alias("final")]
    expires_us = p_us + (F.col("ttl_s") * _US_PER_S).cast("long")
    undelivered = F.col("s_copies") == 0
    status = (F.when(F.col("p_copies") == 0, F.when(F.col("s_replicas") > 0, "orphan").otherwise("original"))
              .when(undelivered & (wm.isNull() | (p_us > wm - grace_us - skew_us)), "pending")
              .when(undelivered & (expires_us <= wm - skew_us), "expired")
              .when(undelivered, "missing")
              .when(lag_us > grace_us, "late")
              .otherwise("ok"))
    checked = F.col("target").isin(*sent_logs) if sent_logs else F.lit(False)
    hour_us = F.floor(anchor_us / 3_600_000_000).cast("long") * 3_600_000_000
    out = w.select(
        "*",
        status.alias("status"),
        (status.eqNullSafe("original") & checked & (F.col("s_sent") == 0)).alias("unsent"),
        (lag_us / 1000.0).alias("lag_ms"),
        F.greatest(F.col("s_copies") - 1, F.lit(0)).alias("dup_extra"),
        F.greatest(F.col("p_copies") - 1, F.lit(0)).alias("source_dup_extra"),
        ((F.unix_micros(F.col("s_last")) - first_us) / 1000.0).alias("spread_ms"),
        F.coalesce(F.col("s_src_seq"), F.col("p_seq")).alias("src_seq"),
        anchor_us.alias("anchor_us"),
        hour_us.alias("hour_us"),
        *final,
    )
    start, end = settings.window.start, settings.window.end
    if start is not None:
        out = out.where(F.col("anchor_us") >= to_micros(start))
    if end is not None:
        out = out.where(F.col("anchor_us") < to_micros(end))
    # What no later pass reads stays out of the cached classification.
    return out.drop("wm_us", "anchor_us", "s_replicas", "s_sent", "s_stamp", "s_src_seq")


def _configured_ttl(settings: Settings, target: str) -> list[Column]:
    ttl = settings.replica_ttl.get(target)
    return [] if ttl is None else [F.lit(ttl.total_seconds())]


def _sum(cols: list[Column]) -> Column:
    return reduce(lambda a, b: a + b, cols)


def _least(cols: list[Column]) -> Column:
    return cols[0] if len(cols) == 1 else F.least(*cols)
