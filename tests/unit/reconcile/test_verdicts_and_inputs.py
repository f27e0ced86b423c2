"""The verdicts a run can give (pass, fail, no data) and what it prints for each; the inputs checked before
Spark starts; the settings a continuous run records for its report. No Spark: the summary, the report and
the checks are plain Python over what the job collects."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest

from spark_reconcile import cli, session
from spark_reconcile.classify import Comparison
from spark_reconcile.config import LogInput, as_record, from_record
from spark_reconcile.listing import InputError, check_local, local_path
from spark_reconcile.report import render
from spark_reconcile.summary import Collected, build

LAG_LEVELS = ("target", "entity", "hour", "entity_hour")


def settings(*args: str):
    return cli.settings_from(cli.parser().parse_args(list(args)))


def count_row(target: str, status: str, n: int, **extra) -> dict:
    return {"target": target, "entity": "orders", "hour_us": 0, "status": status, "n": n, "dup_keys": 0,
            "dup_extra": 0, "source_dup_extra": 0, "p_rows": n, "s_rows": n if status == "ok" else 0, **extra}


def summary_of(s, counts: list[dict], records: dict[str, int],
               malformed: dict[str, int] | None = None) -> dict:
    data = Collected(counts=counts, lag={level: {} for level in LAG_LEVELS}, histogram={}, ordering=[],
                     source_gaps=[], watermarks={}, malformed=malformed or {}, records=records)
    comparisons = (Comparison("secondary", ("primary",)),)  # replica mode's one comparison
    return build(s, comparisons, data, now_us=0, engine={"name": "pyspark", "master": None},
                 outputs={"details": "/o/details", "summary": "/o/summary.json", "report": "/o/report.html"},
                 timings={})


def printed(result: dict) -> str:
    """Everything a person reads: the one-screen text, the HTML page, the JSON's reasons."""
    return "\n".join([cli._one_screen(result), render(result), json.dumps(result["failures"]),
                      json.dumps(result["no_data"])])


def test_empty_logs_are_no_data_not_a_pass():
    s = settings("--log", "primary=/a", "--log", "secondary=/b", "--out", "/o")
    result = summary_of(s, [], {})
    assert result["verdict"] == "no data" and result["failures"] == []
    assert result["no_data"] == ["log primary (/a): no records", "log secondary (/b): no records",
                                 "primary -> secondary: no expected messages in the window"]
    assert cli.exit_status(result) == cli.EXIT_NO_DATA == 3
    text = printed(result)
    assert "reconcile (replica): NO DATA" in text and "NO DATA: log primary (/a): no records" in text
    assert "no lag (nothing delivered)" in text
    assert '<span class="badge no-data">NO DATA</span>' in text
    assert not re.search(r"\bNone\b|\bnan\b", text)


def test_a_log_of_malformed_records_only_is_no_data_and_the_window_read_is_named():
    s = settings("--log", "primary=/a", "--log", "secondary=/b", "--out", "/o", "--from",
                 "2026-11-22T00:00:00Z", "--to", "2026-11-23T00:00:00Z", "--lookahead", "1h")
    rows = [count_row("secondary", "ok", 5)]
    result = summary_of(s, rows, {"primary": 5, "secondary": 3}, {"secondary": 3})
    assert result["no_data"] == ["log secondary (/b): 3 records, all malformed from 2026-11-21T23:00:00Z "
                                 "to 2026-11-23T01:00:00Z"]
    assert result["verdict"] == "no data"


def test_fail_outranks_no_data_and_a_full_run_passes():
    s = settings("--log", "primary=/a", "--log", "secondary=/b", "--out", "/o")
    silent = summary_of(s, [count_row("secondary", "missing", 4)], {"primary": 4})
    assert silent["verdict"] == "fail" and silent["no_data"] == ["log secondary (/b): no records"]
    assert cli.exit_status(silent) == cli.EXIT_FAIL
    assert "NO DATA: log secondary" in printed(silent) and '<span class="badge fail">' in printed(silent)
    full = summary_of(s, [count_row("secondary", "ok", 4)], {"primary": 4, "secondary": 4})
    assert (full["verdict"], full["failures"], full["no_data"], cli.exit_status(full)) == ("pass", [], [], 0)


def test_a_follow_run_that_read_nothing_is_no_data():
    assert cli.follow_no_data([]) == ["no micro-batch ran: no log had a file to read"]
    status = {"inputs": [{"tag": "primary", "records_read": 7, "malformed_records": 0},
                         {"tag": "secondary", "records_read": 0, "malformed_records": 0}]}
    assert cli.follow_no_data([status]) == ["log secondary: no records read"]


def test_a_missing_path_is_one_line_and_exit_2_before_spark_starts(tmp_path, monkeypatch, capsys):
    def no_spark(*args):
        raise AssertionError("Spark started")

    monkeypatch.setattr(session, "start", no_spark)
    (tmp_path / "empty").mkdir()
    code = cli.main(["--log", f"primary={tmp_path / 'typo'}", "--log", f"secondary={tmp_path / 'empty'}",
                     "--out", str(tmp_path / "out")])
    assert code == cli.EXIT_USAGE
    assert capsys.readouterr().err.splitlines() == [
        f"sbfed reconcile: log 'primary': path {tmp_path / 'typo'} does not exist"]
    assert cli.report_main(["--out", str(tmp_path / "empty")]) == cli.EXIT_USAGE
    assert "follow.json not found" in capsys.readouterr().err


def test_local_inputs_are_checked_as_the_job_reads_them(tmp_path):
    root = tmp_path / "audit"
    (root / "entity=a").mkdir(parents=True)
    (root / "entity=a" / "notes.txt").write_text("x")

    def check(path, fmt="auto", stream=False, local=True):
        check_local(LogInput("primary", str(path), fmt), None, None, stream, local)

    with pytest.raises(InputError, match=r"no \.jsonl/\.json/\.parquet files"):
        check(root)
    check(root, fmt="json")
    with pytest.raises(InputError, match="does not exist"):
        check((tmp_path / "nope").as_uri())  # file: URIs are local whatever the default file system
    check("abfss://audit@acct.dfs.core.windows.net/nope")  # remote: the job checks it
    check(tmp_path / "nope", local=False)  # a scheme-less path on a cluster's HDFS: the job checks it
    (root / "entity=a" / "r.parquet").write_bytes(b"")
    (root / "entity=a" / "r.jsonl").write_text("")
    with pytest.raises(InputError, match="both JSON lines and Parquet"):
        check(root)
    (tmp_path / "fresh").mkdir()
    with pytest.raises(InputError, match=r"no data files under \S+ yet"):
        check(tmp_path / "fresh", stream=True)
    check(tmp_path / "fresh", fmt="json", stream=True)
    assert local_path("file:///data/a%20b", False) == "/data/a b"


def test_a_follow_run_records_its_settings_for_the_report_without_a_command_line():
    args = cli.parser().parse_args(
        ["--log", "primary=/a", "--log", "secondary=/b", "--out", "/o/", "--mode", "replica",
         "--replica-ttl", "secondary=10s", "--from", "2026-11-22T00:00:00Z", "--grace", "10s",
         "--lookahead", "15s", "--max-missing", "0.5%", "--follow", "--checkpoint", "/c", "--trigger", "3s",
         "--alert-missing", "2", "--format", "json"])
    s, f = cli.settings_from(args), cli.follow_settings_from(args)
    record = json.loads(json.dumps(as_record(s, f)))
    assert from_record(record) == (s, f)
    assert record["replica_ttl_s"] == {"secondary": 10.0} and f.trigger == timedelta(seconds=3)
