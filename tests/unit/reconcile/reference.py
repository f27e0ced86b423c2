"""A plain-Python reconciliation written from docs/audit-log.md and docs/reconcile.md alone (no Spark, no
code shared with spark_reconcile): the property test checks the Spark job against it key by key.

It covers what decides a key's fate: parsing and malformed records, identity, the three modes, the status
rules with their decided boundaries, duplicate counts and lag from the first copy. Where the docs leave a
choice open (copies arriving at the same microsecond) it returns every allowed answer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

EVENTS = ("enqueued", "sent", "processed")
_TIME = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?"
                   r"(Z|[+-]\d{2}:?\d{2})?$")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_time(value) -> int | None:
    """Epoch microseconds of an ISO 8601 time as audit-log.md allows it, else None."""
    if not isinstance(value, str):
        return None
    m = _TIME.match(value.strip(" ").upper())
    if m is None:
        return None
    year, month, day, hour, minute, second, fraction, zone = m.groups()
    try:
        t = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second or 0), tzinfo=UTC)
    except ValueError:
        return None
    micros = int((fraction or "").ljust(6, "0")[:6])
    if zone and zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        t -= sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
    return (t - _EPOCH) // timedelta(microseconds=1) + micros


def _text(value) -> str | None:
    """A required/textual field: JSON strings as they are, other JSON values as their JSON text."""
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _integer(value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if -(2 ** 63) <= value < 2 ** 63 else None
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
        number = int(value)
        return number if -(2 ** 63) <= number < 2 ** 63 else None
    return None


def _number(value) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _first_hop(value) -> str | None:
    text = _text(value)
    if text is None:
        return None
    first = text.split(";")[0].strip(" ")
    return first or None


@dataclass(frozen=True)
class Record:
    tag: str
    event: str
    entity: str
    message_id: str
    partition_key: str
    ts: int
    observed: int | None
    seq: int | None
    ttl: float | None
    stamp_ts: int | None
    is_replica: bool


def parse_line(tag: str, line: str) -> Record | str | None:
    """A Record, None for a blank line, or "malformed"."""
    text = line.strip(" ")
    if not text:
        return None
    try:
        obj = json.loads(text)
    except ValueError:
        return "malformed"
    if not isinstance(obj, dict):
        return "malformed"
    event = _text(obj.get("event"))
    entity, message_id = _text(obj.get("entity")), _text(obj.get("message_id"))
    ts = parse_time(_text(obj.get("enqueued_time_utc")))
    event = None if event is None else event.strip(" ").lower()
    if event not in EVENTS or not entity or not message_id or ts is None:
        return "malformed"
    stamp, source = _text(obj.get("repl_enqueued_time")), _text(obj.get("repl_source"))
    return Record(tag=tag, event=event, entity=entity, message_id=message_id,
                  partition_key=_text(obj.get("partition_key")) or "", ts=ts,
                  observed=parse_time(_text(obj.get("observed_time_utc"))),
                  seq=_integer(obj.get("sequence_number")), ttl=_number(obj.get("ttl_seconds")),
                  stamp_ts=parse_time(_first_hop(obj.get("repl_enqueued_time"))),
                  is_replica=bool(stamp) or bool(source))


@dataclass(frozen=True)
class Options:
    mode: str = "replica"
    source: str | None = None
    expected_event: str = "enqueued"
    start: int | None = None  # window, epoch micros
    end: int | None = None
    grace_us: int = 300_000_000
    skew_us: int = 5_000_000
    lookahead_us: int = 1_800_000_000
    replica_ttl_s: dict[str, float] = field(default_factory=dict)
    use_partition_key: bool = True


@dataclass(frozen=True)
class Outcome:
    status: str
    p_copies: int
    s_copies: int
    dup_extra: int
    source_dup_extra: int
    lag_ms: float | None  # delivered only


@dataclass
class Result:
    records: dict[str, int]
    malformed: dict[str, int]
    # (target, key) -> every outcome the docs allow (one, unless first copies tie)
    outcomes: dict[tuple, set[Outcome]]


def reconcile(logs: dict[str, list[str]], o: Options) -> Result:
    tags = list(logs)
    records: dict[str, int] = dict.fromkeys(tags, 0)
    malformed: dict[str, int] = dict.fromkeys(tags, 0)
    valid: list[Record] = []
    low = None if o.start is None else o.start - o.lookahead_us
    high = None if o.end is None else o.end + o.lookahead_us
    for tag, lines in logs.items():
        for line in lines:
            r = parse_line(tag, line)
            if r is None:
                continue
            if r == "malformed":
                malformed[tag] += 1
                records[tag] += 1
            elif (low is None or r.ts >= low) and (high is None or r.ts < high):
                records[tag] += 1
                valid.append(r)

    def key(r: Record) -> tuple:
        return (r.entity, r.message_id, r.partition_key) if o.use_partition_key else (r.entity, r.message_id)

    comparisons, expected_group, target_of, arrival = _roles(o, tags)
    by_key: dict[tuple, list[Record]] = {}
    for r in valid:
        by_key.setdefault(key(r), []).append(r)

    # Watermarks: each target's latest arrival per entity, over every record read.
    marks: dict[tuple[str, str], int] = {}
    for r in valid:
        t = target_of(r)
        if t is not None:
            marks[(t, r.entity)] = max(marks.get((t, r.entity), arrival(r)), arrival(r))
    overall = {t: max((v for (tt, _), v in marks.items() if tt == t), default=None) for t, _ in comparisons}

    outcomes: dict[tuple, set[Outcome]] = {}
    for k, rs in by_key.items():
        for target, sources in comparisons:
            src = [r for r in rs if expected_group(r) in sources]
            copies = [r for r in rs if target_of(r) == target]
            stamped = [r for r in copies if r.is_replica or o.mode == "exactly-once"]
            if not src and not (stamped if o.mode != "replica" else copies):
                continue
            wm = marks.get((target, k[0]), overall[target])
            found = _judge(o, target, src, copies, stamped, wm, arrival)
            if found is not None:
                outcomes[(target, k)] = found
    return Result(records, malformed, outcomes)


def _roles(o: Options, tags: list[str]):
    """(comparisons, expected group of a record, target of a record, arrival time of a record)."""
    if o.mode == "replica":
        source = o.source or tags[0]
        return ([(t, (source,)) for t in tags if t != source],
                lambda r: r.tag if r.tag == source and r.event == o.expected_event else None,
                lambda r: r.tag if r.tag != source and r.event == "enqueued" else None,
                lambda r: r.ts)
    if o.mode == "mirror":
        return ([(t, tuple(s for s in tags if s != t)) for t in tags],
                lambda r: r.tag if r.event == "enqueued" and not r.is_replica else None,
                lambda r: r.tag if r.event == "enqueued" else None,
                lambda r: r.ts)

    def original(r: Record) -> bool:
        if o.expected_event == "sent":
            return r.event == "sent"
        return r.event == "enqueued" and not r.is_replica

    return ([("processed", ("expected",))],
            lambda r: "expected" if original(r) else None,
            lambda r: "processed" if r.event == "processed" else None,
            lambda r: r.observed if r.observed is not None else r.ts)


def _judge(o: Options, target: str, src: list[Record], copies: list[Record], stamped: list[Record],
           wm: int | None, arrival) -> set[Outcome] | None:
    p_time = min((r.ts for r in src), default=None)
    first = min((arrival(r) for r in copies), default=None)
    firsts = [r for r in copies if arrival(r) == first]
    outs = set()
    for f in firsts or [None]:
        origin = f.stamp_ts if f is not None and f.stamp_ts is not None else p_time
        anchor = p_time if p_time is not None else (f.stamp_ts if f is not None and f.stamp_ts is not None
                                                    else first)
        if (o.start is not None and anchor < o.start) or (o.end is not None and anchor >= o.end):
            continue
        lag_us = None if first is None or origin is None else first - origin
        if not src:
            status = "orphan" if stamped else "original"
        elif not copies:
            ttls = [r.ttl for r in src if r.ttl is not None]
            if target in o.replica_ttl_s:
                ttls.append(o.replica_ttl_s[target])
            ttl = min(ttls, default=None)
            if wm is None or p_time > wm - o.grace_us - o.skew_us:
                status = "pending"
            elif ttl is not None and p_time + int(ttl * 1_000_000) <= wm - o.skew_us:
                status = "expired"
            else:
                status = "missing"
        else:
            status = "late" if lag_us > o.grace_us else "ok"
        outs.add(Outcome(status=status, p_copies=len(src), s_copies=len(copies),
                         dup_extra=max(len(copies) - 1, 0), source_dup_extra=max(len(src) - 1, 0),
                         lag_ms=lag_us / 1000.0 if status in ("ok", "late") else None))
    return outs or None
