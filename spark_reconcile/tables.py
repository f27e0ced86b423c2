"""`sbfed reconcile report --out DIR`: the summary and HTML report of a `--follow` run, rebuilt from the
tables it wrote (final verdicts and their count/lag cube) and its latest progress."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from pyspark.sql import SparkSession
from pyspark.sql.utils import AnalysisException

from spark_reconcile import classify, follow, metrics, outputs, report, summary
from spark_reconcile.config import from_record, to_micros


def rebuild(spark: SparkSession, out: str) -> dict:
    run = outputs.read_text(spark, f"{out}/follow.json")
    if run is None:
        raise FileNotFoundError(f"{out}/follow.json not found: is {out} the --out of a --follow run?")
    recorded = json.loads(run)
    if "settings" not in recorded:
        raise FileNotFoundError(f"{out}/follow.json holds no settings (written by an older sbfed): run the "
                                "--follow query once more with the same --checkpoint, then the report")
    settings, following = from_record(recorded["settings"])
    where = follow.paths(settings, following)
    p = follow.latest_progress(spark, where["progress"])
    cube = _read(spark, where["cube"])
    rows = [] if cube is None else metrics.collect_cube(cube.drop("batch", "final_at_us"))
    exactly_once = settings.mode == "exactly-once"
    verdicts = _read(spark, where["verdicts"])
    details = None if verdicts is None else outputs.Details(where["verdicts"], verdicts.schema)
    samples = {} if details is None else outputs.samples(spark, details, settings.list_limit, exactly_once)
    data = summary.Collected(counts=metrics.counts(rows), lag=metrics.percentiles(rows),
                             histogram=metrics.lag_histogram(rows), ordering=[], source_gaps=[],
                             watermarks=p.watermarks(), malformed=p.malformed, records=p.records,
                             sent_logs=set(p.sent_logs), samples=samples)
    paths = {"details": where["verdicts"], "summary": f"{out}/summary.json", "report": f"{out}/report.html"}
    engine = {"name": "pyspark", "version": spark.version, "follow_micro_batch": p.batch,
              "open_keys": p.open, "state_rows": p.state_rows}
    result = summary.build(settings, classify.roles(settings).comparisons, data,
                           now_us=to_micros(datetime.now(UTC)), engine=engine, outputs=paths, timings={})
    outputs.write_text(spark, paths["summary"], json.dumps(result, indent=2) + "\n")
    outputs.write_text(spark, paths["report"], report.render(result))
    return result


def _read(spark: SparkSession, folder: str):
    """A table's rows, None while it has no Parquet file (every micro-batch so far wrote nothing there)."""
    try:
        return spark.read.parquet(folder)
    except AnalysisException:
        return None
