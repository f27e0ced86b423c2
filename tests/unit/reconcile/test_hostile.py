"""The hostile-log corpus (hostile.py) through the whole job: one Spark run per mode and options, every case
checked on its own entities (statuses per key, per-entity counts, duplicates, lag, gaps, out-of-order)."""

from __future__ import annotations

from collections import Counter

import pytest

from spark_reconcile import cli, job

from . import hostile

CASES = [(run, case) for run, (_, cases) in hostile.RUNS.items() for case in cases]


@pytest.fixture(scope="module")
def results(spark, tmp_path_factory):
    """Each run's summary and its non-ok detail rows, computed once for the module."""
    found = {}
    for run, (options, cases) in hostile.RUNS.items():
        base = tmp_path_factory.mktemp(run)
        records = [r for c in cases for r in c().records]
        directory = {}
        offset = 0
        for c in cases:
            made = c()
            directory |= {offset + i: d for i, d in made.directory.items()}
            offset += len(made.records)
        roots = hostile.write(base / "logs", records, directory)
        args = [*options, "--out", str(base / "out"), "--max-missing", "100%"]
        for tag in sorted(roots, key=lambda t: (t != hostile.P, t)):
            args += ["--log", f"{tag}={roots[tag]}"]
        summary = job.run(spark, cli.settings_from(cli.parser().parse_args(args)))
        written = list((base / "out" / "details").glob("kind=*/*.parquet"))
        details = spark.read.parquet(str(base / "out" / "details")).collect() if written else []
        found[run] = summary, details
    return found


def entity_rows(summary: dict, entities: set[str]) -> dict[tuple[str, str], dict]:
    return {(c["target"], e["entity"]): e for c in summary["comparisons"] for e in c["entities"]
            if e["entity"] in entities}


@pytest.mark.parametrize(("run", "case"), CASES, ids=[f"{r}: {c.__name__}" for r, c in CASES])
def test_case(results, run, case):
    c = case()
    summary, details = results[run]
    entities = {r["entity"] if isinstance(r, dict) and "entity" in r else getattr(r, "entity", None)
                for r in c.records} - {None}
    problems = {(d.target, d.entity, d.message_id): d.status for d in details
                if d.kind != "duplicate" and d.entity in entities}
    assert problems == {k: v for k, v in c.statuses.items() if v != "ok"}
    per_entity = entity_rows(summary, entities)
    want = Counter((t, e, s) for (t, e, _), s in c.statuses.items())
    got = Counter({(t, e, s): row[s] for (t, e), row in per_entity.items()
                   for s in ("ok", "late", "pending", "missing", "expired", "orphan", "original") if row[s]})
    assert got == want
    for (t, e), extra in c.dup_extra.items():
        assert per_entity[(t, e)]["dup_extra"] == extra
    for (t, e), lag in c.lag_max_ms.items():
        assert per_entity[(t, e)]["lag_ms"]["max"] == lag
    gaps = {(g["entity"], g["partition"]): g["gaps"] for g in summary["source_sequence_gaps"]}
    for where, n in c.gaps.items():
        assert gaps[where] == n
    order = {(cmp["target"], o["origin"], o["entity"]): o["out_of_order"]
             for cmp in summary["comparisons"] for o in cmp["out_of_order"] if o["entity"] in entities}
    if c.out_of_order:
        assert order == c.out_of_order
    totals = {x["target"]: x["totals"] for x in summary["comparisons"]}
    for target, n in c.originals_unsent.items():
        assert totals[target]["original_unsent"] == n


@pytest.mark.parametrize("run", list(hostile.RUNS))
def test_malformed_lines_per_log(results, run):
    _, cases = hostile.RUNS[run]
    want = Counter()
    for case in cases:
        want.update(case().malformed)
    summary, _ = results[run]
    malformed = {i["tag"]: i["malformed_records"] for i in summary["inputs"] if i["malformed_records"]}
    assert malformed == dict(want)


def test_ignored_partition_key_leaves_the_details_column_empty(results):
    _, details = results["ignore-partition-key"]
    assert details and all(d.partition_key is None for d in details)
    summary, _ = results["ignore-partition-key"]
    assert summary["settings"]["identity"] == "entity + message_id"


def test_unicode_entity_reaches_every_output(results):
    summary, details = results["replica"]
    assert "zahlungen-ü" in {d.entity for d in details}
    assert "zahlungen-ü" in {e["entity"] for c in summary["comparisons"] for e in c["entities"]}
    assert not any("Ã" in (d.entity or "") for d in details)


def test_listing_through_hadoop_prunes_like_the_local_listing(spark, tmp_path):
    """A path with a scheme (`file:` here, `abfss://` on Azure) is listed through Hadoop's FileSystem: same
    files, same pruning of the date=/hour= directories outside the range."""
    from datetime import UTC, datetime

    from spark_reconcile.config import LogInput
    from spark_reconcile.reading import list_files

    case = hostile.lookahead_partitions()
    roots = hostile.write(tmp_path, case.records, case.directory)
    start, end = datetime(2026, 11, 22, 9, 30, tzinfo=UTC), datetime(2026, 11, 22, 11, 30, tzinfo=UTC)
    local = list_files(spark, LogInput(hostile.S, str(roots[hostile.S])), start, end)
    hadoop = list_files(spark, LogInput(hostile.S, roots[hostile.S].as_uri()), start, end)
    assert local[0] == hadoop[0] == "json"
    assert [p.removeprefix("file:") for p in hadoop[1]] == local[1]
    assert len(local[1]) == 2  # hours 10 and 11; 08 and 13 are outside [09:30, 11:30)
