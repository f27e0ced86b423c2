"""`sbfed reconcile` / `spark-submit .../spark_reconcile/__main__.py`: arguments in, exit status out.

Exit status: 0 the run passed, 1 it failed a gate (missing messages above --max-missing, or a target with
no records at all), 2 bad arguments or unreadable input (local paths are checked before Spark starts),
3 no data: a log without records in the window, or nothing expected, so nothing was proven.
"""

from __future__ import annotations

import argparse
import os
import sys

from spark_reconcile.config import (
    FORMATS,
    MODES,
    FollowSettings,
    LogInput,
    Settings,
    Window,
    parse_duration,
    parse_tagged,
    parse_threshold,
    parse_utc,
)
from spark_reconcile.listing import InputError, check_local, local_path

EXIT_PASS, EXIT_FAIL, EXIT_USAGE, EXIT_NO_DATA = 0, 1, 2, 3
FINISH_S = 45.0  # --follow stopped by a signal: how long the micro-batch in progress may take to end


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
                   help="which records define the expected messages in replica and exactly-once modes "
                        "(default: %(default)s)")
    p.add_argument("--out", required=True, help="output directory (any path Spark writes)")
    p.add_argument("--format", choices=FORMATS, default="auto",
                   help="input format (default: auto, detect per log)")
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
    follow = p.add_argument_group("continuous reconciliation (docs/reconcile.md, follow mode)")
    follow.add_argument("--follow", action="store_true",
                        help="keep reading the logs as writers add files (Spark Structured Streaming) and "
                             "write each message's verdict once it is final")
    follow.add_argument("--checkpoint", metavar="DIR",
                        help="--follow: where the query keeps its progress and open keys (any path Spark "
                             "writes)")
    follow.add_argument("--trigger", type=parse_duration, default="1m",
                        help="--follow: how often to look for new files (default 1m)")
    follow.add_argument("--available-now", action="store_true",
                        help="--follow: process every file present now, then stop (exit 1 if an alert fired)")
    follow.add_argument("--alert-missing", type=int, metavar="N",
                        help="--follow: write an alert record and log at ERROR when a comparison has more "
                             "than N final missing messages in the status window")
    follow.add_argument("--status-window", type=parse_duration, default="1h",
                        help="--follow: the sliding window of status.json's recent counts and lag "
                             "(default 1h)")
    follow.add_argument("--max-files-per-trigger", type=int, metavar="N",
                        help="--follow: at most N new files per log in one micro-batch (default: all)")
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
    if args.follow and args.lookahead < args.grace + args.skew:
        raise ValueError("--follow needs --lookahead of at least --grace plus --skew (a key is judged once "
                         "the logs are that far past it)")
    return Settings(logs=logs, mode=args.mode, out=args.out.rstrip("/"), source=source,
                    expected_event=args.expected_event, window=Window(args.start, args.end), grace=args.grace,
                    skew=args.skew, lookahead=args.lookahead, replica_ttl=ttl,
                    use_partition_key=not args.ignore_partition_key, max_missing=args.max_missing,
                    now=args.now, list_limit=args.list_limit, follow=args.follow)


def follow_settings_from(args: argparse.Namespace) -> FollowSettings | None:
    """The --follow options (None for a batch run, where giving them is an error)."""
    given = [name for name, value in (("--checkpoint", args.checkpoint),
                                      ("--available-now", args.available_now),
                                      ("--alert-missing", args.alert_missing is not None),
                                      ("--max-files-per-trigger", args.max_files_per_trigger)) if value]
    if not args.follow:
        if given:
            raise ValueError(f"{', '.join(given)} only apply with --follow")
        return None
    if not args.checkpoint:
        raise ValueError("--follow needs --checkpoint DIR (where the query keeps its progress)")
    if args.alert_missing is not None and args.alert_missing < 0:
        raise ValueError("--alert-missing must not be negative")
    return FollowSettings(checkpoint=args.checkpoint.rstrip("/"), trigger=args.trigger,
                          available_now=args.available_now, alert_missing=args.alert_missing,
                          status_window=args.status_window, max_files_per_trigger=args.max_files_per_trigger)


def main(argv: list[str]) -> int:
    if argv[:1] == ["report"]:
        return report_main(argv[1:])
    p = parser()
    args = p.parse_args(argv)
    try:
        settings = settings_from(args)
        follow = follow_settings_from(args)
        extra = dict(parse_tagged(text, "--conf") for text in args.conf)
    except ValueError as e:
        p.error(str(e))
    try:
        check_inputs(settings, follow is not None, _scheme_less_is_local(args.master))
    except InputError as e:
        print(f"sbfed reconcile: {e}", file=sys.stderr)
        return EXIT_USAGE

    def work(spark) -> int:
        return _batch(spark, settings) if follow is None else _follow(spark, settings, follow, argv)

    return _with_spark(work, args.master, args.driver_memory, args.shuffle_partitions, extra)


def check_inputs(settings: Settings, stream: bool, scheme_less_is_local: bool) -> None:
    """Every local log as the job would read it, before the JVM starts: InputError for the first that it
    would refuse (a log on a remote file system is checked by the job)."""
    start, end = settings.window.read_range(settings.lookahead)
    for log in settings.logs:
        check_local(log, start, end, stream, scheme_less_is_local)


def _scheme_less_is_local(master: str | None) -> bool:
    """Whether a path without a scheme is on this machine's disk: in a Spark session already running here,
    as its default file system says; under spark-submit, unknown (the cluster's may be HDFS); otherwise when
    this process starts a local Spark with no Hadoop configuration of its own."""
    if "pyspark" in sys.modules:
        from pyspark.sql import SparkSession

        from spark_reconcile.reading import is_local

        active = SparkSession.getActiveSession()
        if active is not None:
            return is_local(active, "path")
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        return False
    return (master or "local").startswith("local") and not os.environ.get("HADOOP_CONF_DIR")


def _with_spark(work, master: str | None, driver_memory: str, shuffle_partitions: int | None,
                extra: dict[str, str]) -> int:
    """Run `work(spark)` for its exit status; unreadable input is exit 2. Spark is imported only now, so
    `--help` and argument errors stay instant."""
    from spark_reconcile import session

    spark, owned = session.start(master, driver_memory, shuffle_partitions, extra)
    try:
        return work(spark)
    except (InputError, FileNotFoundError) as e:
        print(f"sbfed reconcile: {e}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        if owned:
            spark.stop()


def _batch(spark, settings: Settings) -> int:
    from spark_reconcile import job

    result = job.run(spark, settings)
    print(_one_screen(result))
    return exit_status(result)


def exit_status(result: dict) -> int:
    """The summary's verdict as the exit status: fail 1, no data 3, pass 0."""
    return EXIT_FAIL if result["failures"] else EXIT_NO_DATA if result["no_data"] else EXIT_PASS


def _follow(spark, settings: Settings, follow: FollowSettings, argv: list[str]) -> int:
    """Run the continuous query until it stops (--available-now) or is stopped (Ctrl-C, SIGTERM).

    A signal only sets a flag: stopping the query from the handler would call into the JVM while the main
    thread waits on the same py4j connection. The wait is one second at a time, so the flag is seen. The
    micro-batch in progress then ends (at most FINISH_S) before the query stops."""
    import logging
    import signal
    import threading
    import time

    from spark_reconcile import follow as following

    logging.basicConfig(format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("sbfed.reconcile").setLevel(logging.INFO)
    query, handler = following.start(spark, settings, follow, argv)
    stopping = threading.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: stopping.set())
    while not stopping.is_set() and not query.awaitTermination(1):
        pass
    deadline = time.monotonic() + FINISH_S
    while query.isActive and query.status["isTriggerActive"] and time.monotonic() < deadline:
        query.awaitTermination(1)  # the micro-batch in progress ends: its verdicts are not lost
    if query.isActive:
        query.stop()
    found = following.statuses(spark, settings, follow)
    for c in found:
        f, o = c["final"], c["open"]
        print(f"  {'+'.join(c['sources'])} -> {c['target']} (micro-batch {c['micro_batch']}): final "
              f"{f['expected']} expected, ok {f['ok']}, late {f['late']}, missing {f['missing']}, "
              f"expired {f['expired']}, orphan {f['orphan']}, originals {f['original']}, duplicated keys "
              f"{f['dup_keys']}; open {o['keys']}; state rows {c['state_rows']}")
    empty = follow_no_data(found) if follow.available_now else []  # a stopped query was cut short
    for reason in empty:
        print(f"  NO DATA: {reason}")
    return EXIT_FAIL if handler.alerted else EXIT_NO_DATA if empty else EXIT_PASS


def follow_no_data(statuses: list[dict]) -> list[str]:
    """Why an --available-now run, which reads every file present, proved nothing (the batch job's `no
    data`): no micro-batch ran, or a log gave it no usable record. A query stopped by a signal is not
    judged: it may have been stopped before its first micro-batch ended."""
    if not statuses:
        return ["no micro-batch ran: no log had a file to read"]
    return [f"log {i['tag']}: {'no records' if not i['records_read'] else 'only malformed records'} read"
            for i in statuses[0]["inputs"] if i["records_read"] == i["malformed_records"]]


def report_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sbfed reconcile report",
                                description="Regenerate summary.json and report.html from the tables a "
                                            "`sbfed reconcile --follow` run wrote under DIR.")
    p.add_argument("--out", required=True, metavar="DIR", help="the --out of the --follow run")
    return p


def report_main(argv: list[str]) -> int:
    args = report_parser().parse_args(argv)
    local = local_path(args.out, _scheme_less_is_local(None))
    if local is not None and not os.path.isfile(os.path.join(local, "follow.json")):
        print(f"sbfed reconcile report: {args.out}/follow.json not found: is {args.out} the --out of a "
              "--follow run?", file=sys.stderr)
        return EXIT_USAGE

    def rebuild(spark) -> int:
        from spark_reconcile import tables

        print(_one_screen(tables.rebuild(spark, args.out.rstrip("/"))))
        return EXIT_PASS

    return _with_spark(rebuild, None, "1g", None, {})


def _one_screen(result: dict) -> str:
    lines = [f"reconcile ({result['mode']}): {result['verdict'].upper()}"]
    for c in result["comparisons"]:
        t = c["totals"]
        lag = c["lag_ms"]
        lag_text = ("lag p50/p99/max ms " + "/".join(f"{lag[k]:g}" for k in ("p50", "p99", "max"))
                    if lag else "no lag (nothing delivered)")
        lines.append(
            f"  {'+'.join(c['sources'])} -> {c['target']}: expected {t['expected']}, ok {t['ok']}, "
            f"late {t['late']}, "
            f"pending {t['pending']}, missing {t['missing']}, expired {t['expired']}, orphan {t['orphan']}, "
            f"originals at target {t['original']}, "
            f"duplicates {t['dup_keys']} (+{t['dup_extra']} copies); {lag_text}")
    lines += [f"  FAIL: {reason}" for reason in result["failures"]]
    lines += [f"  NO DATA: {reason}" for reason in result["no_data"]]
    lines.append(f"  report: {result['outputs']['report']}")
    return "\n".join(lines)
