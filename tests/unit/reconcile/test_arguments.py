"""Argument parsing, thresholds and the pure-Python parts of the report (no Spark needed)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from spark_reconcile import cli
from spark_reconcile.config import (
    MissingThreshold,
    iso_micros,
    parse_duration,
    parse_threshold,
    parse_utc,
    to_micros,
)
from spark_reconcile.metrics import BUCKET_RATIO, bucket_value
from spark_reconcile.summary import counters, failures
from spark_reconcile.svg import Series, columns, nice_ticks


def settings(*args: str):
    return cli.settings_from(cli.parser().parse_args(list(args)))


@pytest.mark.parametrize(("text", "seconds"), [("300", 300), ("5m", 300), ("1.5h", 5400), ("250ms", 0.25),
                                               ("1d", 86400), ("30s", 30)])
def test_durations(text, seconds):
    assert parse_duration(text) == timedelta(seconds=seconds)


def test_bad_duration_says_what_is_accepted():
    with pytest.raises(ValueError, match="unit ms, s, m, h or d"):
        parse_duration("5 minutes")


def test_times_are_utc_whatever_their_offset():
    assert parse_utc("2026-11-22T23:30:00") == datetime(2026, 11, 22, 23, 30, tzinfo=UTC)
    assert parse_utc("2026-11-22T18:30:00-05:00") == datetime(2026, 11, 22, 23, 30, tzinfo=UTC)
    assert parse_utc("2026-11-22T23:30:00Z").tzinfo is UTC
    with pytest.raises(ValueError, match="ISO 8601"):
        parse_utc("yesterday")


def test_epoch_micros_round_trip():
    t = datetime(2026, 11, 22, 23, 30, 0, 123456, tzinfo=UTC)
    assert iso_micros(to_micros(t)) == "2026-11-22T23:30:00.123456Z"


def test_missing_thresholds():
    assert parse_threshold("0") == MissingThreshold(count=0)
    assert parse_threshold("0").exceeded(1, 1000) and not parse_threshold("0").exceeded(0, 1000)
    assert not parse_threshold("0.1%").exceeded(1, 1000) and parse_threshold("0.1%").exceeded(2, 1000)
    with pytest.raises(ValueError, match="percentage"):
        parse_threshold("some")


def test_replica_mode_defaults_to_the_first_log_as_source():
    s = settings("--log", "primary=/a", "--log", "secondary=/b", "--out", "/o/")
    assert (s.mode, s.source, s.out, s.grace, s.skew, s.lookahead) == (
        "replica", "primary", "/o", timedelta(minutes=5), timedelta(seconds=5), timedelta(minutes=30))


@pytest.mark.parametrize(("args", "message"), [
    (["--log", "a=/a", "--log", "a=/b"], "unique"),
    (["--log", "a=/a"], "at least two"),
    (["--log", "a=/a", "--log", "b=/b", "--source", "c"], "not one of the --log tags"),
    (["--log", "a=/a", "--log", "b=/b", "--replica-ttl", "c=2m"], "unknown tags"),
    (["--log", "a=/a", "--log", "b=/b", "--from", "2026-01-02", "--to", "2026-01-01"], "before"),
    (["--log", "a", "--log", "b=/b"], "TAG=VALUE"),
])
def test_bad_arguments_are_refused_with_a_reason(args, message):
    with pytest.raises(ValueError, match=message):
        settings(*args, "--out", "/o")


def test_bad_arguments_exit_2_without_starting_spark(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--log", "a=/a", "--out", "/o"])
    assert exit_.value.code == 2
    assert "at least two" in capsys.readouterr().err


def test_lag_buckets_are_within_one_percent():
    for bucket in (1, 10, 500, 900, -300):
        low = 0.001 * BUCKET_RATIO ** (abs(bucket) - 1)
        high = low * BUCKET_RATIO
        value = abs(bucket_value(bucket))
        assert low <= value < high
        assert (value - low) / low <= 0.01 and (high - value) / high <= 0.01
    assert bucket_value(0) == 0.0


def count_row(status: str, n: int, **extra) -> dict:
    return {"status": status, "n": n, "dup_keys": 0, "dup_extra": 0, "source_dup_extra": 0, "p_rows": n,
            "s_rows": 0, **extra}


def test_a_target_without_any_record_fails_even_with_a_lenient_threshold():
    s = settings("--log", "a=/a", "--log", "b=/b", "--out", "/o", "--max-missing", "100%")
    silent = {"target": "b", "totals": counters([count_row("pending", 10)])}
    assert failures([silent], s) == ["b: no records at all for 10 expected messages "
                                     "(is the replica, its replication task or its audit tap down?)"]


def test_completeness_counts_late_as_delivered():
    block = counters([count_row("ok", 97, s_rows=97), count_row("late", 1, s_rows=1),
                      count_row("missing", 2)])
    assert (block["expected"], block["completeness_pct"]) == (100, 98.0)


def test_chart_ticks_and_empty_chart():
    assert nice_ticks(7) == [0, 2, 4, 6, 8]
    assert nice_ticks(0.3) == pytest.approx([0, 0.1, 0.2, 0.3])
    assert "nothing to show" in columns("t", [], [Series("s", [], "#000")])
    svg = columns("t", ["a", "b"], [Series("missing", [1, 0], "#d62728"), Series("late", [2, 3], "#e7ba52")])
    assert svg.count("<rect") == 2 + 3  # legend swatches + non-zero segments
    assert "<title>a: missing 1</title>" in svg


def follow_options(*args: str):
    return cli.follow_settings_from(cli.parser().parse_args(["--log", "a=/x", "--out", "/o", *args]))


def test_follow_options_need_follow_and_a_checkpoint():
    with pytest.raises(ValueError, match="--checkpoint, --available-now only apply with --follow"):
        follow_options("--checkpoint", "/c", "--available-now")
    with pytest.raises(ValueError, match="needs --checkpoint"):
        follow_options("--follow")
    assert follow_options() is None
    f = follow_options("--follow", "--checkpoint", "/c/", "--trigger", "30s", "--alert-missing", "0")
    assert (f.checkpoint, f.trigger, f.alert_missing) == ("/c", timedelta(seconds=30), 0)


def test_follow_needs_a_lookahead_beyond_grace_and_skew():
    """A key is judged once the logs are a lookahead past it; before grace + skew it could be pending."""
    logs = ("--log", "a=/x", "--log", "b=/y", "--out", "/o", "--follow", "--grace", "5m")
    with pytest.raises(ValueError, match="at least --grace plus --skew"):
        settings(*logs, "--lookahead", "5m")
    assert settings(*logs, "--skew", "5s", "--lookahead", "305s").follow
