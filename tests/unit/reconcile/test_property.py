"""Random small logs (hypothesis): the Spark job and the plain-Python reference (reference.py, written from
the docs) agree on every key's status, copy and duplicate counts and lag, and on records and malformed records
per log. Few examples per mode, each a whole log set in one Spark run, to keep the suite quick."""

from __future__ import annotations

import json
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_reconcile import cli, job

from . import reference

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
WINDOW = ("2026-11-22T10:00:00Z", "2026-11-22T11:00:00Z")
GRACE_S, SKEW_S, LOOKAHEAD_S = 60, 5, 1800
ENTITIES = ("orders", "zahlungen-ü", "a/b", "50% off", "spa ce")
IDS = ("m1", "m/2", "m%3", "m 4", "ü5", "6")
KEYS = (None, "pk")
MALFORMED = ("{not json", "[]", '"x"', "3", "null", "{}", '{"event": "enqueued"} trailing',
             "{'event': 'enqueued'}", '{"event": "enqueued", "message_id": "m1", '
             '"enqueued_time_utc": "2026-11-22T10:00:00Z"}')


def iso(t: datetime, style: int) -> str:
    """The same instant in the shapes the contract allows (and a few it tolerates)."""
    if style == 1:
        return (t + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%S.%f") + "+02:00"
    if style == 2:
        return t.strftime("%Y-%m-%dT%H:%M:%S.%f")  # naive: UTC
    if style == 3:
        return t.strftime("%Y-%m-%d %H:%M:%S.%f") + "123z"  # nanoseconds, space, lowercase z
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@st.composite
def instants(draw) -> datetime:
    # Whole seconds around the window and the grace/skew boundaries, sometimes a microsecond off.
    seconds = draw(st.sampled_from([-1801, -1800, -60, -1, 0, 1, 30, 60, 61, 65, 66, 600, 3540, 3599, 3600,
                                    3601, 3660, 5399, 5400]) | st.integers(-1900, 5500))
    micros = draw(st.sampled_from([0, 0, 0, 1, 999_999]))
    return T0 + timedelta(seconds=seconds, microseconds=micros)


@st.composite
def records(draw, tags: tuple[str, ...]) -> str:
    tag = draw(st.sampled_from(tags))
    when = draw(instants())
    r: dict = {"event": draw(st.sampled_from(["enqueued"] * 6 + ["sent", "processed", " Enqueued "])),
               "namespace": tag, "entity": draw(st.sampled_from(ENTITIES)),
               "message_id": draw(st.sampled_from(IDS)),
               "enqueued_time_utc": iso(when, draw(st.integers(0, 3))),
               "observed_time_utc": iso(when + timedelta(seconds=draw(st.sampled_from([0, 1, 90]))), 0)}
    pk = draw(st.sampled_from(KEYS))
    if pk is not None:
        r["partition_key"] = pk
    if draw(st.booleans()):
        r["sequence_number"] = (draw(st.sampled_from([0, 1])) << 48) | draw(st.integers(1, 30))
    if draw(st.integers(0, 5)) == 0:
        r["ttl_seconds"] = draw(st.sampled_from([10, 59.5, 600]))
    if draw(st.booleans()):
        origin = when - timedelta(seconds=draw(st.sampled_from([0, 1, 30, 61, 400])))
        hops = [iso(origin, 0)] + ([iso(when, 0)] if draw(st.booleans()) else [])
        r["repl_enqueued_time"] = ";".join(hops)
        r["repl_sequence"] = str(draw(st.integers(1, 30)))
    elif draw(st.integers(0, 4)) == 0:
        r["repl_source"] = "primary/x"
    if draw(st.integers(0, 6)) == 0:
        r["unknown_field"] = {"nested": [1, 2]}
    if draw(st.integers(0, 8)) == 0:
        r["sequence_number"] = "not a number"
    return json.dumps(r, ensure_ascii=draw(st.booleans()))


LAGS = (0.1, 1, 59, 60, 60.000001, 66, 400, -2)


@st.composite
def messages(draw, tags: tuple[str, ...], mode: str) -> list[dict]:
    """One message: its original (or `sent`) record and its copies (or `processed` records), with lags around
    grace and retries whose stamps may differ from the first copy's."""
    origin = "primary" if mode == "replica" else draw(st.sampled_from(tags))
    when = draw(instants())
    base = {"entity": draw(st.sampled_from(ENTITIES)), "message_id": draw(st.sampled_from(IDS))}
    pk = draw(st.sampled_from(KEYS))
    if pk is not None:
        base["partition_key"] = pk
    seq = (draw(st.sampled_from([0, 1])) << 48) | draw(st.integers(1, 30))
    source = base | {"event": draw(st.sampled_from(["enqueued", "enqueued", "sent"])), "namespace": origin,
                     "enqueued_time_utc": iso(when, draw(st.integers(0, 3))),
                     "observed_time_utc": iso(when, 0), "sequence_number": seq}
    if draw(st.integers(0, 3)) == 0:
        source["ttl_seconds"] = draw(st.sampled_from([10, 59.5, 600]))
    out = [source] * draw(st.sampled_from([1, 1, 1, 2]))
    targets = [t for t in tags if t != origin] if mode != "exactly-once" else list(tags)
    for target in targets:
        arrival = when
        for _ in range(draw(st.sampled_from([0, 1, 1, 1, 2, 3]))):
            arrival += timedelta(seconds=draw(st.sampled_from(LAGS)))
            stamp = when - timedelta(seconds=draw(st.sampled_from([0, 0, 0, 400])))
            copy = base | {"namespace": target, "enqueued_time_utc": iso(arrival, draw(st.integers(0, 3))),
                           "observed_time_utc": iso(arrival + timedelta(seconds=1), 0)}
            if mode == "exactly-once":
                copy |= {"event": "processed", "processor": f"{target}-1",
                         "observed_time_utc": iso(arrival, 0), "enqueued_time_utc": iso(when, 0)}
            else:
                copy |= {"event": "enqueued", "sequence_number": draw(st.integers(1, 99))}
                if draw(st.integers(0, 5)):
                    hops = iso(stamp, 0) + (";" + iso(when, 0)) * draw(st.integers(0, 1))
                    copy |= {"repl_enqueued_time": hops, "repl_sequence": str(seq),
                             "repl_source": f"{origin}/{base['entity']}"}
            out.append(copy)
    return [json.dumps(r, ensure_ascii=draw(st.booleans())) for r in out]


@st.composite
def log_sets(draw, mode: str) -> tuple[dict[str, list[str]], list[str]]:
    tags = ("primary", "secondary", "third")[: 3 if mode == "mirror" and draw(st.booleans()) else 2]
    lines = {t: [] for t in tags}
    made = [line for m in draw(st.lists(messages(tags, mode), min_size=5, max_size=25)) for line in m]
    for line in made + draw(st.lists(records(tags), max_size=12)):
        lines[json.loads(line)["namespace"]].append(line)
    for _ in range(draw(st.integers(0, 3))):
        lines[draw(st.sampled_from(tags))].append(draw(st.sampled_from(MALFORMED)))
    options = []
    if mode == "replica" and draw(st.booleans()):
        options += ["--replica-ttl", "secondary=30s"]
    if mode != "mirror" and draw(st.integers(0, 3)) == 0:
        options += ["--expected-event", "sent"]
    if draw(st.integers(0, 3)) == 0:
        options.append("--ignore-partition-key")
    return lines, options


def spark_outcomes(spark, logs: dict[str, list[str]], mode: str, options: list[str]):
    with tempfile.TemporaryDirectory() as tmp:
        args = ["--mode", mode, "--out", f"{tmp}/out", "--from", WINDOW[0], "--to", WINDOW[1],
                "--grace", f"{GRACE_S}s", "--skew", f"{SKEW_S}s", "--lookahead", f"{LOOKAHEAD_S}s", *options]
        for tag, lines in logs.items():
            folder = Path(tmp) / tag
            folder.mkdir()
            (folder / "log.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
            args += ["--log", f"{tag}={folder}"]
        s = cli.settings_from(cli.parser().parse_args(args))
        grouped = job.grouped_records(spark, s).persist()
        found = job.inventory(grouped, s)
        rows = job.classified_keys(grouped, found, s).collect()
        grouped.unpersist()
    keys = ("entity", "message_id", "partition_key") if s.use_partition_key else ("entity", "message_id")
    out = {}
    for r in rows:
        delivered = r.status in ("ok", "late")
        out[(r.target, tuple(r[k] for k in keys))] = reference.Outcome(
            status=r.status, p_copies=r.p_copies, s_copies=r.s_copies, dup_extra=r.dup_extra,
            source_dup_extra=r.source_dup_extra, lag_ms=r.lag_ms if delivered else None)
    return out, found


def reference_result(logs: dict[str, list[str]], mode: str, options: list[str]) -> reference.Result:
    def micros(text: str) -> int:
        return reference.parse_time(text)

    o = reference.Options(
        mode=mode, source="primary" if mode == "replica" else None,
        expected_event="sent" if "sent" in options else "enqueued",
        start=micros(WINDOW[0]), end=micros(WINDOW[1]), grace_us=GRACE_S * 1_000_000,
        skew_us=SKEW_S * 1_000_000, lookahead_us=LOOKAHEAD_S * 1_000_000,
        replica_ttl_s={"secondary": 30.0} if "secondary=30s" in options else {},
        use_partition_key="--ignore-partition-key" not in options)
    return reference.reconcile(logs, o)


def check(spark, logs, mode, options):
    got, found = spark_outcomes(spark, logs, mode, options)
    want = reference_result(logs, mode, options)
    assert set(got) == set(want.outcomes), (sorted(set(got) ^ set(want.outcomes)), logs)
    for k, outcome in got.items():
        assert outcome in want.outcomes[k], (k, outcome, want.outcomes[k])
    assert found.records == want.records
    assert {t: n for t, n in found.malformed.items() if n} == {t: n for t, n in want.malformed.items() if n}


SETTINGS = settings(max_examples=3, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large])


@SETTINGS
@given(st.data())
def test_replica_mode_agrees_with_the_reference(spark, data):
    logs, options = data.draw(log_sets("replica"))
    check(spark, logs, "replica", options)


@SETTINGS
@given(st.data())
def test_mirror_mode_agrees_with_the_reference(spark, data):
    logs, options = data.draw(log_sets("mirror"))
    check(spark, logs, "mirror", options)


@SETTINGS
@given(st.data())
def test_exactly_once_mode_agrees_with_the_reference(spark, data):
    logs, options = data.draw(log_sets("exactly-once"))
    check(spark, logs, "exactly-once", options)
