"""Mirror (all-active) and exactly-once (failover/spillover consumers) modes on planted logs."""

from __future__ import annotations

from datetime import timedelta

from spark_reconcile import cli, job

from .planted import BASE_LAG, T0, iso, record, write_log


def run(spark, tmp_path, mode: str, logs: dict[str, list[dict]]) -> tuple[dict, dict]:
    args = ["--mode", mode, "--out", str(tmp_path / "out")]
    for tag, records in logs.items():
        args += ["--log", f"{tag}={write_log(tmp_path / tag, records)}"]
    summary = job.run(spark, cli.settings_from(cli.parser().parse_args(args)))
    return summary, {c["target"]: c["totals"] for c in summary["comparisons"]}


def replica_of(original: dict, namespace: str, lag: timedelta = BASE_LAG) -> dict:
    enqueued = T0 + timedelta(minutes=int(original["message_id"].split("-")[1])) + lag
    return record("enqueued", namespace, original["entity"], original["message_id"], enqueued,
                  repl_enqueued_time=original["enqueued_time_utc"],
                  repl_source=f"{original['namespace']}/{original['entity']}")


def test_mirror_checks_every_region_against_every_other(spark, tmp_path):
    east = [record("enqueued", "east", "orders", f"e-{i}", T0 + timedelta(minutes=i)) for i in range(20)]
    west = [record("enqueued", "west", "orders", f"w-{i}", T0 + timedelta(minutes=i)) for i in range(20)]
    to_west = [replica_of(r, "west") for r in east if r["message_id"] not in ("e-4", "e-19")]
    to_west.append(replica_of(east[7], "west", BASE_LAG + timedelta(seconds=30)))  # retry copy
    to_west.append(record("enqueued", "west", "orders", "x-1", T0 + timedelta(minutes=3),
                          repl_enqueued_time=iso(T0)))  # no original anywhere
    to_east = [replica_of(r, "east") for r in west if r["message_id"] != "w-9"]
    to_east.append(replica_of(east[2], "east"))  # echoed back to its origin: loop prevention failed
    summary, totals = run(spark, tmp_path, "mirror", {"east": east + to_east, "west": west + to_west})
    assert [c["sources"] for c in summary["comparisons"]] == [["west"], ["east"]]
    pick = ("expected", "ok", "late", "pending", "missing", "orphan", "dup_keys", "dup_extra")
    assert {t: tuple(v[k] for k in pick) for t, v in totals.items()} == {
        "west": (20, 18, 0, 1, 1, 1, 1, 1),
        # The echo of e-2 sits next to east's own original: an orphan with one extra copy.
        "east": (20, 19, 0, 0, 1, 1, 1, 1),
    }
    missing = {(r["target"], r["message_id"]) for r in summary["samples"]["missing"]}
    assert missing == {("west", "e-4"), ("east", "w-9")}
    assert {(r["target"], r["message_id"]) for r in summary["samples"]["orphan"]} == {("west", "x-1"),
                                                                                      ("east", "e-2")}


def processed(namespace: str, message_id: str, after: timedelta, processor: str) -> dict:
    enqueued = T0 + timedelta(minutes=int(message_id.split("-")[1]))
    r = record("processed", namespace, "orders", message_id, enqueued, processor=processor)
    return r | {"observed_time_utc": iso(enqueued + after)}


def test_exactly_once_across_regions(spark, tmp_path):
    originals = [record("enqueued", "primary", "orders", f"m-{i}", T0 + timedelta(minutes=i))
                 for i in range(20)]
    replicas = [replica_of(r, "secondary") for r in originals]
    # Sent straight to the secondary during an outage: an original there.
    spill = record("enqueued", "secondary", "orders", "s-0", T0 + timedelta(seconds=30))
    done_primary = [processed("primary", f"m-{i}", timedelta(seconds=2), "primary-1")
                    for i in range(10) if i not in (3, 8)]
    done_primary += [processed("primary", "m-5", timedelta(seconds=40), "primary-1"),  # redelivered
                     processed("primary", "m-12", timedelta(seconds=2), "primary-1"),
                     processed("primary", "m-8", timedelta(minutes=10), "primary-1")]  # late
    done_secondary = [processed("secondary", f"m-{i}", timedelta(seconds=2), "secondary-1")
                      for i in range(10, 18)]
    done_secondary += [processed("secondary", "s-0", timedelta(seconds=5), "secondary-1"),
                       processed("secondary", "ghost-1", timedelta(seconds=5), "secondary-1")]
    summary, totals = run(spark, tmp_path, "exactly-once", {
        "primary": originals + done_primary, "secondary": [*replicas, spill, *done_secondary]})
    t = totals["processed"]
    counts = (t["expected"], t["ok"], t["late"], t["pending"], t["missing"], t["orphan"])
    assert counts == (21, 17, 1, 2, 1, 1)
    assert (t["dup_keys"], t["dup_extra"]) == (2, 2)
    dups = {r["message_id"]: r["processors"] for r in summary["samples"]["duplicates"]}
    assert dups == {"m-12": ["primary-1", "secondary-1"], "m-5": ["primary-1"]}
    assert [r["message_id"] for r in summary["samples"]["missing"]] == ["m-3"]
    assert [r["message_id"] for r in summary["samples"]["late"]] == ["m-8"]


def test_a_clean_run_passes_with_empty_lists(spark, tmp_path):
    """Nothing missing, late or duplicated: the detail tables hold no row (and no Parquet file)."""
    originals = [record("enqueued", "primary", "orders", f"m-{i}", T0 + timedelta(minutes=i))
                 for i in range(5)]
    done = [processed("primary", f"m-{i}", timedelta(seconds=1), "primary-1") for i in range(5)]
    summary, totals = run(spark, tmp_path, "exactly-once", {"primary": originals + done})
    t = totals["processed"]
    assert (t["expected"], t["ok"], t["missing"], t["late"], t["dup_keys"]) == (5, 5, 0, 0, 0)
    assert summary["verdict"] == "pass"
    assert summary["samples"] == {"missing": [], "late": [], "orphan": [], "original": [], "duplicates": []}
