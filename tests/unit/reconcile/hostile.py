"""The hostile-log corpus: small audit logs that break naive readers, each with the answer worked out from
docs/audit-log.md and docs/reconcile.md by hand.

Every case uses its own entities, so the cases of one run (same mode and options) do not see each other:
a case's expectations are its keys' statuses (per target), its entities' duplicate and lag figures, its
malformed lines, capture gaps and out-of-order counts. Window [10:00, 11:00) UTC, grace 5 min, skew 5 s,
lookahead 30 min.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

from .reference import parse_time

DAY = "2026-11-22"
WINDOW = ["--from", f"{DAY}T10:00:00Z", "--to", f"{DAY}T11:00:00Z"]
P, S = "primary", "secondary"


def at(clock: str) -> str:
    """`HH:MM:SS[.ffffff]` on the corpus day as ISO 8601 UTC with a Z."""
    return f"{DAY}T{clock}Z"


def rec(event: str, ns: str, entity: str | None, mid: str, time: str, **extra) -> dict:
    r = {
        "event": event,
        "namespace": ns,
        "entity": entity,
        "message_id": mid,
        "enqueued_time_utc": time,
        "observed_time_utc": time,
        **extra,
    }
    return {k: v for k, v in r.items() if v is not None}


def copy(src: dict, ns: str, time: str, **extra) -> dict:
    """A replica copy of `src` arriving at `time`, stamped as the replication task stamps it."""
    stamps = {
        "repl_enqueued_time": src["enqueued_time_utc"],
        "repl_source": f"{src['namespace']}/{src['entity']}",
    }
    if "sequence_number" in src:
        stamps["repl_sequence"] = str(src["sequence_number"])
    return rec("enqueued", ns, src["entity"], src["message_id"], time, **(stamps | extra))


@dataclass
class Line:
    """A raw line, written where a record for `entity` at `time` would be (malformed lines included)."""

    text: str
    ns: str
    entity: str
    time: str


@dataclass
class Case:
    name: str
    records: list[dict | Line]
    statuses: dict[tuple[str, str, str], str]  # (target, entity, message_id) -> status
    malformed: dict[str, int] = field(default_factory=dict)
    dup_extra: dict[tuple[str, str], int] = field(default_factory=dict)  # (target, entity) -> extra copies
    lag_max_ms: dict[tuple[str, str], float] = field(default_factory=dict)
    gaps: dict[tuple[str, int], int] = field(default_factory=dict)  # (entity, partition) -> missing seqs
    out_of_order: dict[tuple[str, str, str], int] = field(default_factory=dict)  # (target, origin, entity)
    originals_unsent: dict[str, int] = field(default_factory=dict)
    directory: dict[int, str] = field(default_factory=dict)  # record index -> entity= directory to file it in


def write(root: Path, records: list[dict | Line], directory: dict[int, str]) -> dict[str, Path]:
    """The records in the audit-log layout (percent-encoded entity directories, UTC date/hour), per log."""
    files: dict[Path, list[str]] = defaultdict(list)
    roots: dict[str, Path] = {}
    for i, r in enumerate(records):
        if isinstance(r, Line):
            ns, entity, time, text = r.ns, r.entity, r.time, r.text
        else:
            ns, entity, time, text = (
                r["namespace"],
                r.get("entity", "none"),
                r["enqueued_time_utc"],
                json.dumps(r, ensure_ascii=i % 2 == 0),
            )
        t = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=parse_time(time))  # UTC hour
        roots[ns] = root / ns
        folder = (
            root
            / ns
            / f"namespace={ns}"
            / f"entity={quote(directory.get(i, entity), safe='')}"
            / f"date={t:%Y-%m-%d}"
            / f"hour={t:%H}"
        )
        files[folder / "tap-0001.jsonl"].append(text)
    for path, lines in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    return roots


def _clock(entity: str, ns_from: str = P, ns_to: str = S, when: str = "10:50:00") -> list[dict]:
    """A message delivered at `when`: it moves the target's watermark for `entity` there."""
    m = rec("enqueued", ns_from, entity, "clock", at(when))
    return [m, copy(m, ns_to, at(when + ".100000"))]


# ---------------------------------------------------------------- replica mode, default options
def unicode_entities() -> Case:
    """Issue item 1: the entity is the record's field, not the percent-encoded directory decoded byte-wise."""
    e = "zahlungen-ü"
    m1 = rec("enqueued", P, e, "id/1 %20 ü", at("10:01:00"))
    m2 = rec("enqueued", P, e, "m 2", at("10:02:00"))
    return Case(
        "unicode entity and ids",
        [m1, copy(m1, S, at("10:01:00.250000")), m2, *_clock(e)],
        {(S, e, "id/1 %20 ü"): "ok", (S, e, "m 2"): "missing", (S, e, "clock"): "ok"},
    )


def wrong_directory() -> Case:
    """The directory is only a hint: a record filed under another entity's directory keeps its own entity."""
    e = "a/b%c d"
    m1 = rec("enqueued", P, e, "m1", at("10:03:00"))
    return Case(
        "entity directory disagrees with the record",
        [m1, copy(m1, S, at("10:03:01"))],
        {(S, e, "m1"): "ok"},
        directory={0: "somewhere-else", 1: "a%2Fb"},
    )


def record_without_entity() -> Case:
    """Item 2: no `entity` field means malformed (never matched), even inside an entity= directory."""
    e = "orders-2"
    m1 = rec("enqueued", P, None, "m1", at("10:04:00"))
    c1 = copy(rec("enqueued", P, e, "m1", at("10:04:00")), S, at("10:04:00.500000"))
    return Case(
        "record without entity", [m1, c1], {(S, e, "m1"): "orphan"}, malformed={P: 1}, directory={0: e}
    )


def non_object_lines() -> Case:
    """Item 3 and every other kind of malformed line."""
    e = "orders-3"
    good = {
        "event": "enqueued",
        "namespace": P,
        "entity": e,
        "message_id": "x",
        "enqueued_time_utc": at("10:05:00"),
    }
    bad = [
        "[]",
        '"x"',
        "3",
        "null",
        "{not json",
        '{"event": "enqueued"} trailing text',
        json.dumps(good) + " " + json.dumps(good),
        "{'event': 'enqueued'}",
        json.dumps(good | {"event": None}),
        json.dumps(good | {"event": "peeked"}),
        json.dumps(good | {"message_id": ""}),
        json.dumps({k: v for k, v in good.items() if k != "message_id"}),
        json.dumps(good | {"enqueued_time_utc": "soon"}),
        json.dumps(good | {"enqueued_time_utc": DAY}),
        json.dumps(good | {"enqueued_time_utc": 1795341600}),
    ]
    lines = [Line(text, P, e, at("10:05:00")) for text in bad] + [Line("   ", P, e, at("10:05:00"))]
    return Case("lines that are not usable records", lines, {}, malformed={P: len(bad)})


def resent_ids() -> Case:
    """Item 4: `a` seq 1, `b` seq 2, `a` seq 3, `c` seq 4: no capture gap (a re-sent MessageId has two)."""
    e = "orders-4"
    src = [
        rec("enqueued", P, e, mid, at(f"10:06:0{i}"), sequence_number=i)
        for i, mid in enumerate(["a", "b", "a", "c"], 1)
    ]
    copies = [
        copy(src[0], S, at("10:06:05")),
        copy(src[1], S, at("10:06:06")),
        copy(src[3], S, at("10:06:07")),
    ]
    return Case(
        "re-sent MessageId",
        src + copies,
        {(S, e, "a"): "ok", (S, e, "b"): "ok", (S, e, "c"): "ok"},
        gaps={(e, 0): 0},
    )


def partitioned_gap() -> Case:
    """Partitioned SequenceNumbers: partition 3 misses counter 2; partition 0 is whole."""
    e = "orders-p"
    src = [
        rec("enqueued", P, e, f"m{p}-{c}", at(f"10:07:{10 * p + c:02d}"), sequence_number=(p << 48) | c)
        for p, counters in ((0, (1, 2)), (3, (1, 3)))
        for c in counters
    ]
    copies = [copy(r, S, r["enqueued_time_utc"][:-1] + ".5Z") for r in src]
    return Case(
        "partitioned sequence numbers",
        src + copies,
        {(S, e, r["message_id"]): "ok" for r in src},
        gaps={(e, 0): 0, (e, 3): 1},
    )


def lag_from_first_copy() -> Case:
    """Item 5: the first copy (no stamp) decides the lag, not a retry's older multi-hop stamp."""
    e = "orders-5"
    m = rec("enqueued", P, e, "e1", at("10:40:00"))
    first = rec("enqueued", S, e, "e1", at("10:40:01"))
    retry = rec(
        "enqueued", S, e, "e1", at("10:40:30"), repl_enqueued_time=f"{at('10:34:00')};{at('10:40:00')}"
    )
    return Case(
        "lag from the first copy",
        [m, first, retry],
        {(S, e, "e1"): "ok"},
        dup_extra={(S, e): 1},
        lag_max_ms={(S, e): 1000.0},
    )


def times_and_hops() -> Case:
    """Offsets, naive times, microseconds and nanoseconds; the first hop of multi-hop stamps."""
    e = "orders-t"
    m1 = rec("enqueued", P, e, "m1", f"{DAY}T12:10:00.000001+02:00")  # 10:10:00.000001 UTC
    c1 = rec(
        "enqueued",
        S,
        e,
        "m1",
        f"{DAY} 10:10:00.250002123z",
        repl_enqueued_time=f"{DAY}T10:10:00.000001Z;{at('10:10:00.1')}",
        repl_sequence="5;77",
        unknown={"nested": [1]},
    )
    m2 = rec("enqueued", P, e, "m2", f"{DAY}T10:11:00", unknown_field=True)  # naive: UTC
    c2 = copy(m2, S, f"{DAY}T05:11:00.5-05:00")
    return Case(
        "time formats and hops",
        [m1, c1, m2, c2],
        {(S, e, "m1"): "ok", (S, e, "m2"): "ok"},
        lag_max_ms={(S, e): 500.0},
    )


def window_edges() -> Case:
    """[from, to): exactly `from` is in, a microsecond before and exactly `to` are out; a copy in the
    lookahead hour after the window matches; grace boundary: exactly 5 min is ok, a microsecond more is
    late."""
    e = "orders-w"
    first = rec("enqueued", P, e, "at-from", at("10:00:00"))
    before = rec("enqueued", P, e, "before", at("09:59:59.999999"))
    end = rec("enqueued", P, e, "at-to", at("11:00:00"))
    on_grace = rec("enqueued", P, e, "on-grace", at("10:58:00"))
    over = rec("enqueued", P, e, "over-grace", at("10:59:00"))
    return Case(
        "window and grace edges",
        [
            first,
            copy(first, S, at("10:00:00.1")),
            before,
            copy(before, S, at("10:00:00.2")),
            end,
            copy(end, S, at("11:00:01")),
            on_grace,
            copy(on_grace, S, at("11:03:00")),
            over,
            copy(over, S, at("11:04:00.000001")),
        ],
        {(S, e, "at-from"): "ok", (S, e, "on-grace"): "ok", (S, e, "over-grace"): "late"},
    )


def due_boundaries() -> Case:
    """wm = 10:50:00.1. Due at p_time <= wm - grace - skew = 10:44:55.1. Expired when p_time + ttl <=
    wm - skew = 10:49:55.1. Not yet due wins over an expired TTL (pending)."""
    e = "orders-d"
    due = rec("enqueued", P, e, "due", at("10:44:55.100000"))
    not_due = rec("enqueued", P, e, "not-due", at("10:44:55.100001"))
    ttl_on = rec("enqueued", P, e, "ttl-on-edge", at("10:30:00.100000"), ttl_seconds=1195)
    ttl_long = rec("enqueued", P, e, "ttl-too-long", at("10:30:00.100000"), ttl_seconds=1195.000001)
    both = rec("enqueued", P, e, "ttl-but-not-due", at("10:48:00"), ttl_seconds=1)
    return Case(
        "pending, expired and missing boundaries",
        [due, not_due, ttl_on, ttl_long, both, *_clock(e)],
        {
            (S, e, "due"): "missing",
            (S, e, "not-due"): "pending",
            (S, e, "ttl-on-edge"): "expired",
            (S, e, "ttl-too-long"): "missing",
            (S, e, "ttl-but-not-due"): "pending",
            (S, e, "clock"): "ok",
        },
    )


def lookahead_partitions() -> Case:
    """Hours beyond the lookahead are not even read: their broken lines are not counted."""
    e = "orders-l"
    m = rec("enqueued", P, e, "m1", at("10:20:00"))
    far = [Line("{broken", S, e, f"{DAY}T13:00:00Z"), Line("{broken", S, e, f"{DAY}T08:00:00Z")]
    near = [Line("{broken", S, e, f"{DAY}T11:29:00Z")]
    return Case(
        "hour directories outside the read range",
        [m, copy(m, S, at("10:20:01")), *far, *near],
        {(S, e, "m1"): "ok"},
        malformed={S: 1},
    )


def originals_at_target() -> Case:
    """Item 8: the failover producer's own sends to the secondary are originals there, checked against its
    `sent` records (one has none); a stamped copy without a source stays an orphan."""
    e = "orders-8"
    m = rec("enqueued", P, e, "m1", at("10:10:00"))
    sent = rec("sent", S, e, "f1", at("10:11:00"))
    f1 = rec("enqueued", S, e, "f1", at("10:11:00.010000"))
    f2 = rec("enqueued", S, e, "f2", at("10:12:00"))
    ghost = rec("enqueued", S, e, "ghost", at("10:13:00"), repl_enqueued_time=at("10:12:59"))
    return Case(
        "originals at the target",
        [m, copy(m, S, at("10:10:01")), sent, f1, f2, ghost],
        {(S, e, "m1"): "ok", (S, e, "f1"): "original", (S, e, "f2"): "original", (S, e, "ghost"): "orphan"},
        originals_unsent={S: 1},
    )


REPLICA = [
    unicode_entities,
    wrong_directory,
    record_without_entity,
    non_object_lines,
    resent_ids,
    partitioned_gap,
    lag_from_first_copy,
    times_and_hops,
    window_edges,
    due_boundaries,
    lookahead_partitions,
    originals_at_target,
]


# ---------------------------------------------------------------- replica mode, --ignore-partition-key
def ignore_partition_key() -> Case:
    """Item 6: the option runs (it crashed writing the details) and matches across partition keys."""
    e = "orders-6"
    m = rec("enqueued", P, e, "m1", at("10:15:00"), partition_key="a")
    late = rec("enqueued", P, e, "m2", at("10:16:00"), partition_key="a")
    return Case(
        "--ignore-partition-key",
        [m, copy(m, S, at("10:15:01"), partition_key="b"), late, copy(late, S, at("10:26:00"))],
        {(S, e, "m1"): "ok", (S, e, "m2"): "late"},
    )


IGNORE_PARTITION_KEY = [ignore_partition_key]


# ---------------------------------------------------------------- mirror mode
def mirror_regions_share_partitions() -> Case:
    """Item 7: east's and west's originals, both in partition 0, each copied in order to the other regions;
    north receives both streams interleaved, in order per (origin region, entity, partition). An echo of
    east's own message back to east is an orphan there with an extra copy."""
    e = "orders-7"
    east = [
        rec("enqueued", "east", e, f"e{i}", at(f"10:20:{2 * i:02d}"), sequence_number=1000 + i)
        for i in range(5)
    ]
    west = [
        rec("enqueued", "west", e, f"w{i}", at(f"10:20:{2 * i + 1:02d}"), sequence_number=5 + i)
        for i in range(5)
    ]
    copies = [
        copy(r, target, r["enqueued_time_utc"][:-1] + ".5Z", sequence_number=100 + i)
        for i, r in enumerate(east + west)
        for target in ("east", "west", "north")
        if target != r["namespace"]
    ]
    echo = copy(east[1], "east", at("10:21:00"))
    statuses = {
        (t, e, r["message_id"]): "ok"
        for r in east + west
        for t in ("east", "west", "north")
        if t != r["namespace"]
    }
    statuses[("east", e, "e1")] = "orphan"
    order = {("north", "east", e): 0, ("north", "west", e): 0, ("west", "east", e): 0, ("east", "west", e): 0}
    return Case(
        "mirror: regions sharing partition numbers",
        east + west + copies + [echo],
        statuses,
        dup_extra={("east", e): 1},
        out_of_order=order,
    )


MIRROR = [mirror_regions_share_partitions]


# ---------------------------------------------------------------- exactly-once mode
def exactly_once_regions() -> Case:
    """Item 7 in exactly-once mode: each region's originals processed in order, the regions interleaved."""
    e = "orders-x"
    origins = [
        rec(
            "enqueued",
            ns,
            e,
            f"{ns[0]}{i}",
            at(f"10:30:0{i}.{3 if ns == 'west' else 0}"),
            sequence_number=(900 if ns == "west" else 7) + i,
        )
        for i in range(4)
        for ns in ("east", "west")
    ]
    done = [
        rec(
            "processed",
            "east",
            e,
            r["message_id"],
            r["enqueued_time_utc"],
            processor="east-1",
            observed_time_utc=at(f"10:30:0{r['message_id'][1]}.{7 if r['namespace'] == 'west' else 5}"),
        )
        for r in origins
    ]
    return Case(
        "exactly-once: regions sharing partition numbers",
        origins + done,
        {("processed", e, r["message_id"]): "ok" for r in origins},
        out_of_order={("processed", "east", e): 0, ("processed", "west", e): 0},
    )


EXACTLY_ONCE = [exactly_once_regions]

RUNS = {  # one Spark run per (mode, options)
    "replica": (["--mode", "replica", "--source", P, *WINDOW], REPLICA),
    "ignore-partition-key": (
        ["--mode", "replica", "--source", P, "--ignore-partition-key", *WINDOW],
        IGNORE_PARTITION_KEY,
    ),
    "mirror": (["--mode", "mirror", *WINDOW], MIRROR),
    "exactly-once": (["--mode", "exactly-once", *WINDOW], EXACTLY_ONCE),
}
