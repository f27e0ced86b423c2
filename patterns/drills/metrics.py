"""Judging a drill: pure functions over its audit records (docs/audit-log.md): reading them, their times and
hops, percentiles, the replication lag, where each message was processed and enqueued. The scenarios' checks
and the summary build on these; they know no scenario and run nothing."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from replicators.stamps import HOP_SEPARATOR

Record = dict[str, Any]
LIST_LIMIT = 20  # ids listed per problem in the summary
# where a message must be processed once; None: anywhere, once
Destinations = Callable[[str], "frozenset[str] | None"]


def read_records(audit_dir: Path) -> list[Record]:
    """Every record under the audit root, whichever writer wrote it."""
    records = []
    for path in sorted(audit_dir.rglob("*.jsonl")):
        with open(path, encoding="utf-8") as handle:
            records.extend(json.loads(line) for line in handle if line.strip())
    return records


def parse_time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def hops(record: Record) -> int:
    """How many replication hops a record's message made (0: an original)."""
    source = record.get("repl_source")
    return 0 if not source else len(source.split(HOP_SEPARATOR))


def percentile(values: list[float], fraction: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def replication_lag_ms(records: Iterable[Record]) -> list[float]:
    """Replica EnqueuedTimeUtc minus its origin's (`repl-enqueued-time`, first hop), per replica seen."""
    return [
        (
            parse_time(r["enqueued_time_utc"]) - parse_time(r["repl_enqueued_time"].split(HOP_SEPARATOR)[0])
        ).total_seconds()
        * 1000
        for r in records
        if r.get("repl_enqueued_time")
    ]


def first_after(records: Iterable[Record], moment: dt.datetime | None) -> float | None:
    """Seconds from `moment` to the earliest record observed at or after it."""
    if moment is None:
        return None
    times = [t for t in (parse_time(r["observed_time_utc"]) for r in records) if t >= moment]
    return None if not times else round((min(times) - moment).total_seconds(), 3)


def listed(ids: Iterable[str]) -> list[str]:
    """The first ids, sorted, that a problem lists."""
    return sorted(ids)[:LIST_LIMIT]


def iso(moment: dt.datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def where_processed(destinations: Destinations, sent: Iterable[str],
                    handled: list[Record]) -> tuple[set[str], set[str], set[str]]:
    """Messages lost (not processed where they must be), processed twice (in one of their destinations, or
    anywhere when they have none), and processed in a namespace that is not one of their destinations."""
    anywhere = Counter(r["message_id"] for r in handled)
    by_namespace = Counter((r["namespace"], r["message_id"]) for r in handled)
    lost, twice, astray = set(), set(), set()
    for message_id in set(sent) | set(anywhere):
        where = destinations(message_id)
        counts = [anywhere[message_id]] if where is None else [by_namespace[ns, message_id] for ns in where]
        if message_id in sent and 0 in counts:
            lost.add(message_id)
        if any(n > 1 for n in counts):
            twice.add(message_id)
        if sum(counts) < anywhere[message_id]:
            astray.add(message_id)
    return lost, twice, astray


def check_arrivals(by_event: dict[str, list[Record]], names: Iterable[str],
                   arrivals: Callable[[str], Iterable[str]], details: dict) -> list[str]:
    """Each message sent is enqueued exactly once in each namespace `arrivals` names for it (audit taps),
    in no other, and never after more than one hop. An enqueue is a (MessageId, SequenceNumber): the audit
    taps are at-least-once, so a tap whose complete an outage cut sees the message again when its lock
    expires, with the same sequence number; a second enqueue (a copy duplicate detection let through, or a
    copy that came back) has a new one."""
    problems = []
    sent = {r["message_id"] for r in by_event["sent"]}
    for ns in names:
        records = [r for r in by_event["enqueued"] if r["namespace"] == ns]
        enqueues = {(r["message_id"], r["sequence_number"]) for r in records}
        seen = Counter(message_id for message_id, _ in enqueues)
        expected = {m for m in sent if ns in arrivals(m)}
        missing, extra = expected - set(seen), {m for m, n in seen.items() if n > 1}
        astray = (set(seen) & sent) - expected
        details[f"enqueued_in_{ns}"] = sum(seen.values())
        details[f"audit_redeliveries_in_{ns}"] = len(records) - len(enqueues)
        if missing:
            problems.append(f"{len(missing)} message(s) never reached {ns}: {listed(missing)}")
        if extra:
            problems.append(f"{len(extra)} message(s) reached {ns} more than once: {listed(extra)}")
        if astray:
            problems.append(f"{len(astray)} message(s) reached {ns}, where they do not belong: "
                            f"{listed(astray)}")
    bounced = {r["message_id"] for r in by_event["enqueued"] if hops(r) > 1}
    details["bounced"] = len(bounced)
    if bounced:
        problems.append(f"{len(bounced)} message(s) bounced back: {listed(bounced)}")
    return problems

