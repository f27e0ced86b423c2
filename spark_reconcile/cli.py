"""`sbfed reconcile` / `spark-submit .../spark_reconcile/__main__.py`: arguments in, exit status out.

Exit status: 0 the run passed, 1 it failed a gate (missing messages above --max-missing, or a target with
no records at all), 2 bad arguments or unreadable input.
"""

from __future__ import annotations

import argparse
import sys

from spark_reconcile.config import (
    FORMATS,
    MODES,
    LogInput,
    Settings,
    Window,
    parse_duration,
    parse_tagged,
    parse_threshold,
    parse_utc,
)

EXIT_PASS, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sbfed reconcile",
        description="Prove that replication lost nothing and processed nothing twice: compare audit "
                    "logs (docs/audit-log.md) with Spark and write a JSON summary, Parquet details and "
                    "an HTML report.",
    )
    p.add_argument("--log", action="append", required=True, metavar="TAG=PATH",
                   help="an audit log and its role or region name (repeat; replica and mirror need two+)")
    p.add_argument("--mode", choices=MODES, default="replica",
                   help="replica: active-passive, every source message must reach each other log; mirror: "
                        "all-active, every region's messages in every other region; exactly-once: every "
                        "message processed once across all regions (default: replica)")
    p.add_argument("--source", help="replica mode: the tag of the source log (default: the first --log)")
    p.add_argument("--expected-event", choices=("enqueued", "sent"), default="enqueued",
                   help="which records define the expected messages in replica and exactly-once modes")
    p.add_argument("--out", required=True, help="output directory (any path Spark writes)")
    p.add_argument("--format", choices=FORMATS, default="auto", help="input format (default: detect per log)")
    p.add_argument("--from", dest="start", type=parse_utc, metavar="TIME",
                   help="window start, ISO 8601 (no offset means UTC), inclusive")
    p.add_argument("--to", dest="end", type=parse_utc, metavar="TIME", help="window end, exclusive")
    p.add_argument("--grace", type=parse_duration, default="5m",
                   help="a copy arriving later than this after its source is late (default 5m)")
    p.add_argument("--skew", type=parse_duration, default="5s",
                   help="clock-skew allowance between namespaces, added to the pending boundary (default 5s)")
    p.add_argument("--lookahead", type=parse_duration, default="30m",
                   help="extra time read before and after the window for late copies (default 30m; "
                        "must exceed grace + the largest expected lag)")
    p.add_argument("--replica-ttl", action="append", default=[], metavar="TAG=DURATION",
                   help="TimeToLive stamped on the copies in TAG (e.g. secondary=2m): expired, not missing")
    p.add_argument("--ignore-partition-key", action="store_true",
                   help="match on entity + MessageId only (default also PartitionKey when present)")
    p.add_argument("--max-missing", type=parse_threshold, default="0", metavar="N|P%",
                   help="fail (exit 1) when more messages than this are missing (default 0)")
    p.add_argument("--now", type=parse_utc, metavar="TIME", help="the time watermark ages are measured at")
    p.add_argument("--list-limit", type=int, default=100, help="rows per list in the report (default 100)")
    spark = p.add_argument_group("Spark (ignored for an existing session, e.g. under spark-submit)")
    spark.add_argument("--master", help="Spark master (default: local[*] unless launched by spark-submit)")
    spark.add_argument("--driver-memory", default="2g", help="local driver memory (default 2g)")
    spark.add_argument("--shuffle-partitions", type=int,
                       help="default: 8 x cores locally, the cluster's setting otherwise")
    spark.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting")
    return p


def settings_from(args: argparse.Namespace) -> Settings:
    logs = tuple(LogInput(*parse_tagged(text, "--log"), format=args.format) for text in args.log)
    tags = [log.tag for log in logs]
    if len(set(tags)) != len(tags):
        raise ValueError(f"--log tags must be unique, got {tags}")
    if args.mode in ("replica", "mirror") and len(logs) < 2:
        raise ValueError(f"{args.mode} mode compares logs: give at least two --log TAG=PATH")
    source = args.source or (tags[0] if args.mode == "replica" else None)
    if args.mode == "replica" and source not in tags:
        raise ValueError(f"--source {source!r} is not one of the --log tags {tags}")
    if args.source and args.mode != "replica":
        raise ValueError("--source applies to replica mode only")
    if args.start and args.end and args.start >= args.end:
        raise ValueError("--from must be before --to")
    ttl = {tag: parse_duration(value)
           for tag, value in (parse_tagged(t, "--replica-ttl") for t in args.replica_ttl)}
    unknown = set(ttl) - set(tags)
    if unknown:
        raise ValueError(f"--replica-ttl names unknown tags {sorted(unknown)}")
    if args.grace.total_seconds() < 0 or args.lookahead < args.grace:
        raise ValueError("--lookahead must be at least --grace")
    return Settings(logs=logs, mode=args.mode, out=args.out.rstrip("/"), source=source,
                    expected_event=args.expected_event, window=Window(args.start, args.end), grace=args.grace,
                    skew=args.skew, lookahead=args.lookahead, replica_ttl=ttl,
                    use_partition_key=not args.ignore_partition_key, max_missing=args.max_missing,
                    now=args.now, list_limit=args.list_limit)


def main(argv: list[str]) -> int:
    p = parser()
    args = p.parse_args(argv)
    try:
        settings = settings_from(args)
        extra = dict(parse_tagged(text, "--conf") for text in args.conf)
    except ValueError as e:
        p.error(str(e))
    # Spark is imported only now, so `--help` and argument errors stay instant.
    from spark_reconcile import job, session
    from spark_reconcile.reading import InputError

    spark, owned = session.start(args.master, args.driver_memory, args.shuffle_partitions, extra)
    try:
        result = job.run(spark, settings)
    except InputError as e:
        print(f"sbfed reconcile: {e}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        if owned:
            spark.stop()
    print(_one_screen(result))
    return EXIT_FAIL if result["failures"] else EXIT_PASS


def _one_screen(result: dict) -> str:
    lines = [f"reconcile ({result['mode']}): {result['verdict'].upper()}"]
    for c in result["comparisons"]:
        t = c["totals"]
        lag = c["lag_ms"] or {}
        lines.append(
            f"  {'+'.join(c['sources'])} -> {c['target']}: expected {t['expected']}, ok {t['ok']}, "
            f"late {t['late']}, "
            f"pending {t['pending']}, missing {t['missing']}, expired {t['expired']}, orphan {t['orphan']}, "
            f"originals at target {t['original']}, "
            f"duplicates {t['dup_keys']} (+{t['dup_extra']} copies); lag p50/p99/max ms "
            f"{lag.get('p50')}/{lag.get('p99')}/{lag.get('max')}")
    lines += [f"  FAIL: {reason}" for reason in result["failures"]]
    lines.append(f"  report: {result['outputs']['report']}")
    return "\n".join(lines)
