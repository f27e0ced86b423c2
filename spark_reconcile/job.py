"""One reconciliation run: read, group once, classify, measure, write. Returns the summary."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from functools import reduce

from pyspark.sql import DataFrame, SparkSession

from spark_reconcile import classify, metrics, outputs, report, session, summary
from spark_reconcile.config import Settings, to_micros
from spark_reconcile.reading import read_log


class _Phases:
    """Wall time per phase, reported in the summary (the bench reads it)."""

    def __init__(self) -> None:
        self.times: dict[str, float] = {}
        self._last = time.perf_counter()

    def done(self, name: str) -> None:
        now = time.perf_counter()
        self.times[name] = now - self._last
        self._last = now


def grouped_records(spark: SparkSession, settings: Settings) -> DataFrame:
    """The one read and the one shuffle: every log's records grouped by message key (not cached)."""
    read_start, read_end = settings.window.read_range(settings.lookahead)
    logs = reduce(lambda a, b: a.unionByName(b),
                  [read_log(spark, log, read_start, read_end) for log in settings.logs])
    return classify.group(classify.with_roles(logs, settings), settings)


def inventory(grouped: DataFrame, settings: Settings) -> metrics.Inventory:
    """Records, malformed records, watermarks and (replica mode) the source's capture gaps."""
    targets = [c.target for c in classify.roles(settings).comparisons]
    window = tuple(None if t is None else to_micros(t) for t in (settings.window.start, settings.window.end))
    source = settings.source if settings.mode == "replica" else None
    return metrics.inventory(grouped, settings.tags(), targets, source, window)


def classified_keys(grouped: DataFrame, found: metrics.Inventory, settings: Settings) -> DataFrame:
    """One row per comparison and message key with its status, lag and duplicate counts (not cached)."""
    keyed = classify.per_comparison(classify.merge(grouped, settings), settings)
    return classify.classify(keyed, found.watermark, found.sent_logs, settings)


def _measured(spark: SparkSession, settings: Settings, grouped: DataFrame,
              phases: _Phases) -> tuple[summary.Collected, outputs.Details]:
    """Every pass over the two caches: inventory, classification and cube, percentiles, the out-of-order
    walk, the detail tables and their samples."""
    comparisons = classify.roles(settings).comparisons
    exactly_once = settings.mode == "exactly-once"
    found = inventory(grouped, settings)
    phases.done("group_inventory")

    names = {"target": [c.target for c in comparisons], "origin": settings.tags(), "entity": found.entities}
    keyed = classified_keys(grouped, found, settings).withColumn("walk", metrics.walk(names))
    classified = outputs.unlisted_blank(keyed).persist(session.cache_level(spark))
    # A task per core, not per shuffle partition: each task's partial cube holds every (entity, hour, lag
    # bucket) it meets, so 16 tasks shuffled ~0.5 M partial rows at 1M messages for a ~0.1 M row cube.
    cube = metrics.collect_cube(metrics.cube(classified.coalesce(spark.sparkContext.defaultParallelism)))
    grouped.unpersist()
    phases.done("classify")

    counts, lag, histogram = metrics.counts(cube), metrics.percentiles(cube), metrics.lag_histogram(cube)
    phases.done("lag")

    ordering = metrics.ordering(classified, names)
    phases.done("ordering")

    details = outputs.write_details(classified, f"{settings.out}/details", exactly_once)
    classified.unpersist()
    samples = outputs.samples(spark, details, settings.list_limit, exactly_once)
    phases.done("details")

    data = summary.Collected(counts=counts, lag=lag, histogram=histogram, ordering=ordering,
                             source_gaps=found.source_gaps,
                             watermarks=found.watermarks, malformed=found.malformed, records=found.records,
                             sent_logs=found.sent_logs, samples=samples)
    return data, details


def run(spark: SparkSession, settings: Settings) -> dict:
    phases = _Phases()
    now_us = to_micros(settings.now or datetime.now(UTC))
    comparisons = classify.roles(settings).comparisons

    # Grouped records cached once (filled by the inventory's pass: records, malformed, watermarks and the
    # source's capture gaps); then one row per comparison and key, classified, cached.
    with session.sql_settings(spark, session.GROUPING_SETTINGS):
        # The setting applies to every aggregation of the query it plans: the cached plan is planned under
        # it when persisted, and the inventory's own aggregation outside it runs partial (no shuffle of every
        # key). The inventory's query builds the cache: no job of its own (a count added two).
        grouped = grouped_records(spark, settings).persist(session.cache_level(spark))
    with session.sql_settings(spark, session.pass_settings(spark)):
        data, details = _measured(spark, settings, grouped, phases)

    paths = {"details": details.path, "summary": f"{settings.out}/summary.json",
             "report": f"{settings.out}/report.html"}
    engine = {"name": "pyspark", "version": spark.version, "master": spark.sparkContext.master,
              "shuffle_partitions": spark.conf.get("spark.sql.shuffle.partitions"),
              "session_time_zone": spark.conf.get("spark.sql.session.timeZone")}
    result = summary.build(settings, comparisons, data, now_us=now_us, engine=engine, outputs=paths,
                           timings=phases.times)
    outputs.write_text(spark, paths["summary"], json.dumps(result, indent=2, sort_keys=False) + "\n")
    outputs.write_text(spark, paths["report"], report.render(result))
    return result
